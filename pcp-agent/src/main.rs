//! pmdaperfabi: a Performance Co-Pilot daemon PMDA that serves a perfabi
//! segment's counters, DAMON regions and writer state to pmcd.
//!
//! It runs as a pipe daemon under pmcd (pmcd.conf:
//! `perfabi 502 pipe binary /var/lib/pcp/pmdas/perfabi/pmdaperfabi -d 502`),
//! never inside pmcd, so nothing in reading a segment can take pmcd down.
//! PCP's library is loaded at run time; see `ffi`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use perfabi_pcp_agent::dir_source::DirSource;
use perfabi_pcp_agent::{ffi, help_text, pmda, DEFAULT_DOMAIN};

const AFTER_HELP: &str = "\
Counters keep their PMIDs, and DAMON streams and regions their instance
ids, across restarts: saved in $PCP_VAR_DIR/config/pmda/perfabi/DOMAIN.pmids
and (PCP's instance cache) $PCP_VAR_DIR/config/pmda/DOMAIN.1 and DOMAIN.2.

Exit status: 0 when pmcd closes the pipe, 1 if PCP's library cannot be
loaded or the agent cannot start (no user -U names), 2 on bad arguments.";

/// The man page's PCP sections (pmdaperfabi(1), as PCP's agents' pages).
const INSTALLATION: &str = "\
The perfabi agent is installed like PCP's other agents. As root:

  # cd /var/lib/pcp/pmdas/perfabi
  # ./Install

Install adds the line of pmdaperfabi to pmcd.conf(5) (as a pipe daemon
under pmcd, domain 502 from domain.h) and the perfabi namespace, then
signals pmcd. PERFABI_SEGMENT, set when Install runs, is the segment it
serves (-s); PERFABI_PMDA_USER, the user it runs as (-U; default PCP's
unprivileged user, $PCP_USER of pcp.conf, pcp on Debian; root for a
segment only root may read); PERFABI_TRUST_UID, a uid whose segments it
also reads (-t; the Debian package of perfabi-exportd writes as the
system user perfabi, whose uid Install trusts when that user exists).

To uninstall, as root:

  # cd /var/lib/pcp/pmdas/perfabi
  # ./Remove

pmdaperfabi is launched by pmcd(1) and should never be run directly; the
Install and Remove scripts notify pmcd when the agent is installed or
removed.";

const FILES: &str = "\
$PCP_PMDAS_DIR/perfabi/Install: installation script for the agent.

$PCP_PMDAS_DIR/perfabi/Remove: undo the installation.

$PCP_PMDAS_DIR/perfabi/help: the fixed metrics' help text (newhelp(1)
format; the agent serves every help text itself).

$PCP_PMDAS_DIR/perfabi/root_perfabi, domain.h: the namespace entry and the
domain number.

$PCP_VAR_DIR/config/pmda/perfabi/DOMAIN.pmids: the families' PMIDs, kept
for good.

$PCP_LOG_DIR/pmcd/perfabi.log: default log file for messages from the
agent.";

const PCP_ENVIRONMENT: &str = "\
Environment variables with the prefix PCP_ are used to parameterize the
file and directory names used by PCP. On each installation, the file
/etc/pcp.conf contains the local values for these variables. The
$PCP_CONF variable may be used to specify an alternative configuration
file, as described in pcp.conf(5).";

/// A Performance Co-Pilot daemon PMDA serving a perfabi segment, or a
/// directory of segments read as one, to pmcd.
///
/// pmdaperfabi serves the counters, metric families (histograms, peaks,
/// instances), DAMON regions and writer state of a perfabi segment as
/// metrics below perfabi. It runs as a pipe daemon under pmcd(1), never
/// inside it, so nothing in reading a segment can take pmcd down. pmcd
/// starts its agents as root: with -U (which Install gives, PCP's
/// unprivileged user by default) it runs as that user once its log is
/// open, as PCP's own agents do.
#[derive(Parser, Debug)]
#[command(name = "pmdaperfabi", version, after_help = AFTER_HELP)]
struct Args {
    /// Performance metrics domain.
    #[arg(short, long, value_name = "DOMAIN", default_value_t = DEFAULT_DOMAIN,
          value_parser = clap::value_parser!(u32).range(1..=510))]
    domain: u32,
    /// Log file (relative: in pmcd's log folder).
    #[arg(short, long, value_name = "FILE", default_value = "perfabi.log")]
    logfile: String,
    /// Segment to serve (default: $PERFABI_SEGMENT, else /dev/perfabi if
    /// it exists, else /dev/shm/perfabi.seg).
    #[arg(short, long, value_name = "PATH", conflicts_with = "directory")]
    segment: Option<PathBuf>,
    /// Serve the segment directory DIR instead: every program's segment in
    /// it (perfabi_shm's writers, perfabi.client, the C writer put one per
    /// process in `/dev/shm/perfabi-<uid>` by default) read and merged as one,
    /// the kept counts of exited writers included (spec/PERFABI.md section
    /// 15); no per-CPU metrics.
    #[arg(long, value_name = "DIR")]
    directory: Option<PathBuf>,
    /// Keep each writer's series apart: instances named
    /// `<instance>::<name>.<pid>`, with label KEY.
    #[arg(long, value_name = "KEY", requires = "directory", value_parser = parse_label)]
    writer_label: Option<String>,
    /// Also serve a segment owned by UID (repeatable); by default only the
    /// user's the agent runs as and root's.
    #[arg(short, long = "trust-uid", value_name = "UID")]
    trust_uid: Vec<u32>,
    /// Run as USER once the log is open (Install gives PCP_USER of
    /// pcp.conf, PCP's unprivileged user, unless told otherwise). Without
    /// it, the agent keeps the user it was started as.
    #[arg(short = 'U', long, value_name = "USER")]
    username: Option<String>,
    /// Print the help text of the fixed metrics in newhelp(1) format and
    /// exit.
    #[arg(long)]
    help_text: bool,
}

/// A `--writer-label KEY`: a label key.
fn parse_label(s: &str) -> Result<String, String> {
    perfabi::name::check_label_key(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    perfabi_man::print_if_asked(|| {
        perfabi_man::Page::of::<Args>()
            .section("installation", INSTALLATION)
            .section("files", FILES)
            .section("pcp environment", PCP_ENVIRONMENT)
            .see_also("pmcd", "1")
            .see_also("pmdbg", "1")
            .see_also("pcp.conf", "5")
            .see_also("pcp.env", "5")
            .see_also("pmns", "5")
    });
    let args = Args::parse();
    if args.help_text {
        print!("{}", help_text(args.domain));
        return ExitCode::SUCCESS;
    }
    let pcp = match ffi::Pcp::load() {
        Ok(p) => Box::leak(Box::new(p)),
        Err(e) => {
            eprintln!("pmdaperfabi: {e}");
            return ExitCode::from(1);
        }
    };
    let segment = args
        .segment
        .clone()
        .unwrap_or_else(perfabi_reader::default_path);
    let trust = perfabi_reader::Trust::from_flags(false, &args.trust_uid);
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
        pmda::Start {
            domain: args.domain,
            logfile: &args.logfile,
            user: args.username.as_deref(),
        },
        &segment,
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
