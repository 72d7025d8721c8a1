//! pmdaperfabi: a Performance Co-Pilot daemon PMDA that serves a perfabi
//! segment's counters, DAMON regions and writer state to pmcd.
//!
//! It runs as a pipe daemon under pmcd (pmcd.conf:
//! `perfabi 502 pipe binary /var/lib/pcp/pmdas/perfabi/pmdaperfabi -d 502`),
//! never inside pmcd, so nothing in reading a segment can take pmcd down.
//! PCP's library is loaded at run time; see `ffi`.

use std::path::PathBuf;
use std::process::ExitCode;

use perfabi_pcp_agent::dir_source::DirSource;
use perfabi_pcp_agent::{ffi, help_text, pmda, DEFAULT_DOMAIN};

const USAGE: &str = "\
Usage: pmdaperfabi [-d DOMAIN] [-l LOGFILE] [-s SEGMENT] [-t UID]...
       pmdaperfabi [-d DOMAIN] [-l LOGFILE] --directory DIR [--writer-label KEY] [-t UID]...
       pmdaperfabi --help-text

A PCP daemon PMDA serving a perfabi segment (run by pmcd, or by dbpmda).

  -d, --domain DOMAIN    performance metrics domain (default 502)
  -l, --logfile FILE     log file (default perfabi.log, in pmcd's log folder)
  -s, --segment PATH     segment to serve (default: $PERFABI_SEGMENT, else
                         /dev/perfabi if it exists, else /dev/shm/perfabi.seg)
      --directory DIR    serve the segment directory DIR instead: every
                         program's segment in it (perfabi_shm's writers,
                         perfabi.client, the C writer put one per process in
                         /dev/shm/perfabi-<uid> by default) read and merged
                         as one, the kept counts of exited writers included
                         (spec/PERFABI.md section 15); no per-CPU metrics
      --writer-label KEY keep each writer's series apart: instances named
                         <instance>::<name>.<pid>, with label KEY
  -t, --trust-uid UID    also serve a segment owned by UID (repeatable); by
                         default only the agent's own user's and root's
      --help-text        print the help text of the fixed metrics in
                         newhelp(1) format and exit
  -h, --help             this text

Counters keep their PMIDs, and DAMON streams and regions their instance
ids, across restarts: saved in $PCP_VAR_DIR/config/pmda/perfabi/DOMAIN.pmids
and (PCP's instance cache) $PCP_VAR_DIR/config/pmda/DOMAIN.1 and DOMAIN.2.

Exit status: 0 when pmcd closes the pipe, 1 if PCP's library cannot be
loaded or the agent cannot start, 2 on bad arguments.";

struct Args {
    domain: u32,
    logfile: String,
    segment: PathBuf,
    directory: Option<PathBuf>,
    writer_label: Option<String>,
    trust: Vec<u32>,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut a = Args {
        domain: DEFAULT_DOMAIN,
        logfile: "perfabi.log".into(),
        segment: perfabi_reader::default_path(),
        directory: None,
        writer_label: None,
        trust: Vec::new(),
    };
    let mut segment_given = false;
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
        match arg.as_str() {
            "-d" | "--domain" => {
                let v = value(&arg)?;
                a.domain = v
                    .parse()
                    .ok()
                    .filter(|d| (1..511).contains(d))
                    .ok_or_else(|| format!("{arg} {v}: a domain is a number from 1 to 510"))?;
            }
            "-l" | "--logfile" => a.logfile = value(&arg)?,
            "-s" | "--segment" => {
                a.segment = PathBuf::from(value(&arg)?);
                segment_given = true;
            }
            "--directory" => a.directory = Some(PathBuf::from(value(&arg)?)),
            "--writer-label" => {
                let v = value(&arg)?;
                if let Err(e) = perfabi::name::check_label_key(&v) {
                    return Err(format!("{arg} {v:?}: {e}"));
                }
                a.writer_label = Some(v);
            }
            "-t" | "--trust-uid" => {
                let v = value(&arg)?;
                a.trust.push(
                    v.parse()
                        .map_err(|_| format!("{arg} {v}: a uid is a number"))?,
                );
            }
            "--help-text" => {
                print!("{}", help_text(a.domain));
                return Ok(None);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    if segment_given && a.directory.is_some() {
        return Err("-s and --directory: give one source".into());
    }
    if a.writer_label.is_some() && a.directory.is_none() {
        return Err("--writer-label needs --directory".into());
    }
    Ok(Some(a))
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pmdaperfabi: {e}");
            return ExitCode::from(2);
        }
    };
    let pcp = match ffi::Pcp::load() {
        Ok(p) => Box::leak(Box::new(p)),
        Err(e) => {
            eprintln!("pmdaperfabi: {e}");
            return ExitCode::from(1);
        }
    };
    let trust = perfabi_reader::Trust::from_flags(false, &args.trust);
    let directory = args.directory.map(|d| {
        let opts = perfabi_reader::directory::DirectoryOptions {
            segment: perfabi_reader::Options {
                trust: trust.clone(),
                ..perfabi_reader::Options::default()
            },
            writer_label: args.writer_label,
            ..Default::default()
        };
        DirSource::new(&d, opts)
    });
    match pmda::run(
        pcp,
        args.domain,
        &args.logfile,
        &args.segment,
        trust,
        directory,
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pmdaperfabi: {e}");
            ExitCode::from(1)
        }
    }
}
