//! What the eBPF writer costs (issue 31 item 6), from the kernel's own BPF
//! statistics: `perfabi-bpfd` started as a process of its own (its pin in
//! a bpffs folder of this run's own), a floor program
//! (`src/bpf/floor.bpf.c`: one atomic add into a `PERCPU_ARRAY`) attached
//! beside each of its programs on the same tracepoint, the statistics on
//! (`BPF_ENABLE_STATS`), a workload (two threads handing a token back and
//! forth, a thread moved between CPUs, direct I/O on a loop device) and,
//! over each of `--runs` windows of `--seconds`, every program's
//! `run_time_ns / run_cnt` beside its floor's, and the daemon's own
//! utime + stime.
//!
//! An example of `perfabi-bpf`, not a script: it loads BPF programs, turns
//! the statistics on and reads them with the same library (libbpf-rs) as
//! the loader; and not a `[[bin]]`, since it is a measurement, not a program
//! that ships. Run as root:
//!
//! ```sh
//! cargo build --release -p perfabi-bpf --bins --examples
//! nice -n 19 target/release/examples/cost            # 3 runs x 60 s
//! ```
//!
//! It prints a table and, last, `BPF-COST PRINTED: ...` (what `tests/run`'s
//! short smoke run looks for). The targets are printed beside the figures,
//! never asserted: a busy machine moves them.

mod daemon;
mod floor;
mod stats;
mod table;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

/// Why the bench stopped.
#[derive(Debug)]
pub enum Failure {
    /// It cannot run here (not root, no BTF): `PERFABI-SKIP`.
    Cannot(String),
    /// Something it needs failed.
    Failed(String),
}

impl Failure {
    fn exit_code(&self) -> u8 {
        match self {
            Self::Cannot(_) => 3,
            Self::Failed(_) => 1,
        }
    }
}

/// `Failure::Failed` with what was being done.
pub fn failed(what: impl std::fmt::Display) -> Failure {
    Failure::Failed(what.to_string())
}

const EXIT_HELP: &str = "\
Exit status:
  0  the table was printed
  1  something it needs failed (the daemon, a BPF call, the loop device)
  2  bad command line
  3  it cannot run here: not root, or no BTF (PERFABI-SKIP printed)";

/// Measures perfabi-bpfd's BPF programs against floor programs on the same
/// tracepoints, and the daemon's own CPU use, under a workload.
#[derive(Parser, Debug)]
#[command(after_help = EXIT_HELP)]
struct Args {
    /// Length of each measured window.
    #[arg(long, value_name = "S", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    seconds: u64,
    /// Windows measured, one after the other, under the same daemon.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u64).range(1..=100))]
    runs: u64,
    /// Start the daemon with --raw-tp (the raw_tp/ programs and floors).
    #[arg(long)]
    raw_tp: bool,
    /// Attach the floors before the daemon starts, so that on each
    /// tracepoint they run before its programs (by default they are
    /// attached after them, and run after them).
    #[arg(long)]
    floors_first: bool,
    /// The perfabi-bpfd to measure (default: the one beside this example's
    /// folder, target/release/perfabi-bpfd).
    #[arg(long, value_name = "PATH")]
    bpfd: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            match &f {
                Failure::Cannot(why) => {
                    println!("PERFABI-SKIP bpf-cost-bench: {why}");
                }
                Failure::Failed(why) => eprintln!("bpf-cost: {why}"),
            }
            ExitCode::from(f.exit_code())
        }
    }
}

fn run(args: &Args) -> Result<(), Failure> {
    if !rustix::process::geteuid().is_root() {
        return Err(Failure::Cannot(
            "needs root (loads BPF programs, turns BPF statistics on, makes a loop device)".into(),
        ));
    }
    perfabi_bpf::system::preflight().map_err(|e| Failure::Cannot(e.to_string()))?;
    let bpfd = match &args.bpfd {
        Some(p) => p.clone(),
        None => daemon::beside_examples()?,
    };
    let sysctl_before = stats::sysctl();
    let disk = workload::LoopDisk::new()?;
    let dir = daemon::PinDir::new()?;
    // Floors first: on the tracepoints of the writer's object, in the
    // flavour asked for (a daemon that falls back to raw_tp/ is then
    // refused below).
    let early = if args.floors_first {
        let tps = stats::object_tracepoints(args.raw_tp)?;
        Some(floor::Floors::attach(
            args.raw_tp,
            tps.iter().map(String::as_str),
        )?)
    } else {
        None
    };
    let d = daemon::Daemon::start(&bpfd, &dir, args.raw_tp)?;
    let writer = stats::writer_programs(d.pid())?;
    if writer.is_empty() {
        return Err(failed("perfabi-bpfd holds no tracepoint program"));
    }
    let raw = writer.iter().any(|p| p.raw_tp);
    let floors = match early {
        Some(f) if raw == args.raw_tp => f,
        Some(_) => {
            return Err(failed(
                "perfabi-bpfd fell back to raw_tp/ programs: run with --raw-tp --floors-first",
            ))
        }
        None => floor::Floors::attach(raw, writer.iter().map(|p| p.tracepoint.as_str()))?,
    };
    let on = stats::Enabled::new()?;
    let load = workload::Workload::start(&disk)?;
    // A second for the workload's threads to be running and the
    // writer's block scan to have found the loop device.
    std::thread::sleep(Duration::from_secs(1));
    let mut ids: Vec<u32> = writer.iter().map(|p| p.id).collect();
    ids.extend(floors.programs().iter().map(|f| f.id));
    let mut runs = Vec::new();
    for _ in 0..args.runs {
        let before = stats::read(&ids)?;
        let (cpu0, ns0) = (d.cpu_ticks()?, d.cpu_ns()?);
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(args.seconds));
        let after = stats::read(&ids)?;
        let (cpu1, ns1) = (d.cpu_ticks()?, d.cpu_ns()?);
        runs.push(table::Run {
            wall: t0.elapsed(),
            delta: stats::delta(&before, &after),
            daemon_ticks: cpu1.saturating_sub(cpu0),
            daemon_ns: ns1.saturating_sub(ns0),
        });
    }
    let work = load.stop();
    drop(on);
    let sysctl_after = stats::sysctl();
    d.stop()?;
    drop(dir);
    drop(disk);
    table::print(&table::Report {
        writer: &writer,
        floors: floors.programs(),
        runs: &runs,
        ticks_per_s: rustix::param::clock_ticks_per_second(),
        work,
        sysctl: (sysctl_before, sysctl_after),
        floors_first: args.floors_first,
    });
    Ok(())
}
