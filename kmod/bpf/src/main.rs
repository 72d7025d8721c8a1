//! perfabi-bpfd: loads perfabi's eBPF writer, pins its segment and keeps
//! the programs attached until stopped (SIGTERM, SIGINT, SIGHUP) or until
//! its pin is removed or replaced.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use perfabi_bpf::{Attach, Options, Running};
use perfabi_shm::safe_open::escape_path;

const EXIT_HELP: &str = "\
Exit status:
  0  stopped cleanly (a signal, or the pin removed or replaced): the segment
     is marked closed; its values stay readable while the map is pinned
  1  a system call failed
  2  bad command line
  3  the kernel cannot run it: no BTF, no CAP_BPF and CAP_PERFMON (run as
     root), or lockdown in confidentiality mode
  4  no bpffs at the pin's folder and none could be mounted, an unsafe
     folder (not root's, or writable by others), or another perfabi-bpfd
     writing pins in the folder
  5  the programs could not be loaded, attached or pinned

Start:  perfabi-bpfd &            (as root; pins /sys/fs/bpf/perfabi/kernel)
Stop:   kill -TERM <its pid>       (closes the segment, detaches the programs)
Read:   perfabi-cat /sys/fs/bpf/perfabi/kernel   (any user)";

/// Loads perfabi's eBPF writer: the scheduler families (kernel.all.pswitch,
/// kernel.sched.*) written by BPF programs into a perfabi segment held in a
/// frozen BPF map pinned in bpffs, readable by every user without a kernel
/// module.
#[derive(Parser, Debug)]
#[command(version, after_help = EXIT_HELP)]
struct Args {
    /// Where to pin the segment map (a folder on bpffs; /sys/fs/bpf is
    /// mounted if nothing is).
    #[arg(long, value_name = "PATH", default_value = perfabi_bpf::pin::DEFAULT_PIN)]
    pin: PathBuf,
    /// The heartbeat promise, in milliseconds: the context switch program
    /// refreshes the heartbeat when it is half as old; readers call the
    /// writer silent after three intervals without one.
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    heartbeat_ms: u64,
    /// Attach the raw tracepoint programs (raw_tp/) instead of the BTF ones
    /// (tp_btf/), which are used by default and fall back to these.
    #[arg(long)]
    raw_tp: bool,
    /// DAMON region records per CPU ring (0: no DAMON regions). Regions
    /// are recorded where the kernel has the damon:damon_aggregated
    /// tracepoint, from whatever kdamond runs.
    #[arg(long, value_name = "N", default_value_t = perfabi_bpf::writer::DEFAULT_DAMON_CAPACITY,
          value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    damon_capacity: u32,
    /// The DAMON sampling interval recorded with each region, µs (the
    /// tracepoint carries none: give kdamond's).
    #[arg(long, value_name = "US", default_value_t = 5_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    damon_sample_us: u32,
    /// The DAMON aggregation interval recorded with each region, µs.
    #[arg(long, value_name = "US", default_value_t = 100_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    damon_aggr_us: u32,
    /// Remove the pin on a clean stop (by default it stays, closed, with
    /// the final values, until the next start replaces it).
    #[arg(long)]
    unpin_on_exit: bool,
}

fn main() -> ExitCode {
    perfabi_man::print_if_asked(perfabi_man::Page::of::<Args>);
    let args = Args::parse();
    let opts = Options {
        pin: args.pin,
        heartbeat_interval: Duration::from_millis(args.heartbeat_ms),
        attach: if args.raw_tp {
            Attach::RawTp
        } else {
            Attach::Auto
        },
        damon_capacity: args.damon_capacity,
        damon_intervals_us: (args.damon_sample_us, args.damon_aggr_us),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            eprintln!("perfabi-bpfd: cannot handle signal {sig}: {e}");
            return ExitCode::from(1);
        }
    }
    let w = match Running::start(&opts) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("perfabi-bpfd: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    println!(
        "perfabi-bpfd: pinned {} ({} CPUs, {:?} programs)",
        escape_path(w.pin_path()),
        w.image().geometry.nr_cpus,
        w.flavour()
    );
    let mut w = w;
    let mut looked = Instant::now();
    let mut scanned = Instant::now();
    let mut why = "stopping on a signal";
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if scanned.elapsed() >= perfabi_bpf::writer::SCAN_EVERY {
            scanned = Instant::now();
            if let Err(e) = w.scan() {
                eprintln!("perfabi-bpfd: {e}");
            }
        }
        if looked.elapsed() >= Duration::from_secs(1) {
            looked = Instant::now();
            if !w.pin_intact() {
                why = "the pin was removed or replaced: stopping";
                break;
            }
        }
    }
    println!("perfabi-bpfd: {why}");
    let r = if args.unpin_on_exit {
        w.close_and_unpin()
    } else {
        w.close()
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perfabi-bpfd: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
