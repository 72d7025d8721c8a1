//! perfabi-exportd: publishes host statistics as a perfabi segment, for
//! machines where the kernel module cannot be loaded. Readers (the reader
//! library, perfabi-cat, the PCP agent) cannot tell the difference.
//!
//! Lifecycle: the configuration is checked before anything is created; one
//! daemon per segment path (a lock file); a heartbeat every interval;
//! SIGINT/SIGTERM mark the segment closed; a restart creates it again at the
//! same path with a new epoch, and readers follow.

mod host;
mod lock;
mod replay;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use perfabi::writer::{Config, Writer};
use perfabi::Semantics;

/// Publish host statistics as a perfabi segment.
#[derive(Parser, Debug)]
#[command(
    name = "perfabi-exportd",
    version,
    after_help = "\
Exit status: 0 after SIGINT/SIGTERM (segment marked closed), 1 runtime
error, 2 bad configuration (nothing was created), 3 another daemon already
writes the path."
)]
struct Args {
    /// Segment file to create (on tmpfs).
    #[arg(long, default_value = "/dev/shm/perfabi.seg")]
    path: PathBuf,
    /// Seconds between refreshes of the host statistics (and heartbeats).
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    interval: f64,
    /// A /proc/vmstat counter to publish (repeatable; default: a common set).
    #[arg(long = "vmstat", value_name = "NAME")]
    vmstat: Vec<String>,
    /// Instance table capacity.
    #[arg(long, default_value_t = 1024)]
    max_instances: u32,
    /// Replay a DAMON record (ftrace or perf script text of damon_aggregated
    /// events, or a perfabi-cat --record recording) at its recorded cadence,
    /// in a loop.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// Replay this many times faster than recorded.
    #[arg(long, default_value_t = 1.0, value_name = "X", requires = "replay")]
    replay_speed: f64,
    /// Replay the record once instead of in a loop.
    #[arg(long, requires = "replay")]
    replay_once: bool,
    /// Sampling interval of replayed regions, for records that do not name it.
    #[arg(long, default_value_t = 5000, value_name = "US")]
    damon_sample_us: u32,
    /// Aggregation interval of replayed regions, for records that do not name it.
    #[arg(long, default_value_t = 100_000, value_name = "US")]
    damon_aggr_us: u32,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("perfabi-exportd: {msg}");
            ExitCode::from(code)
        }
    }
}

fn run(args: Args) -> Result<(), (u8, String)> {
    // 1. Check the configuration; nothing exists yet.
    let bad = |m: String| (2u8, m);
    if !(args.interval.is_finite() && args.interval >= 0.01 && args.interval <= 3600.0) {
        return Err(bad(format!(
            "--interval {} must be between 0.01 and 3600 seconds",
            args.interval
        )));
    }
    let interval = Duration::from_secs_f64(args.interval);
    match args.path.parent() {
        Some(d) if d.as_os_str().is_empty() || d.is_dir() => {}
        _ => {
            return Err(bad(format!(
                "--path {}: its folder does not exist",
                args.path.display()
            )))
        }
    }
    let vmstat: Vec<String> = if args.vmstat.is_empty() {
        default_vmstat()
    } else {
        args.vmstat.clone()
    };
    let paths = host::ProcPaths::default();
    host::check(&paths, &vmstat).map_err(|e| bad(e.to_string()))?;
    let record = match &args.replay {
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| bad(format!("--replay {}: {e}", f.display())))?;
            let r =
                replay::parse(&text).map_err(|e| bad(format!("--replay {}: {e}", f.display())))?;
            if r.aggregations.is_empty() {
                return Err(bad(format!(
                    "--replay {}: no complete damon_aggregated aggregation in it",
                    f.display()
                )));
            }
            Some(r)
        }
        None => None,
    };
    if !(args.replay_speed.is_finite() && args.replay_speed > 0.0) {
        return Err(bad(format!(
            "--replay-speed {} must be positive",
            args.replay_speed
        )));
    }
    let default_iv = perfabi::damon::Intervals {
        sample_us: args.damon_sample_us,
        aggr_us: args.damon_aggr_us,
    };
    if default_iv.sample_us == 0 || default_iv.aggr_us == 0 {
        return Err(bad(
            "--damon-sample-us and --damon-aggr-us must be positive".into(),
        ));
    }
    let config = Config {
        max_instances: args.max_instances,
        heartbeat_interval: interval,
        ..Config::default()
    };
    perfabi::Geometry {
        page_size: 4096,
        nr_cpus: 1,
        max_instances: config.max_instances,
        damon_capacity: config.damon_capacity,
    }
    .sizes()
    .map_err(|e| bad(format!("--max-instances {}: {e}", args.max_instances)))?;

    // 2. One daemon per path.
    let lock = lock::PathLock::take(&args.path).map_err(|m| (3u8, m))?;

    // 3. Create the segment (a new epoch) and the sources.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| (1u8, format!("cannot handle signals: {e}")))?;
    }
    let w = Arc::new(Writer::create(&args.path, &config).map_err(|e| (1u8, e.to_string()))?);
    let refreshes = w
        .add("exportd.refreshes", "count", Semantics::Counter)
        .map_err(|e| (1u8, e.to_string()))?;
    let refresh_us = w
        .add_typed(
            "exportd.refresh_us",
            "us",
            Semantics::Instant,
            perfabi::ValueType::U64,
        )
        .map_err(|e| (1u8, e.to_string()))?;
    let mut hostsrc =
        host::HostSource::new(&w, paths, &vmstat).map_err(|e| (1u8, e.to_string()))?;
    let replayer = match record {
        Some(record) => {
            let counter = w
                .add("exportd.damon_aggregations", "count", Semantics::Counter)
                .map_err(|e| (1u8, e.to_string()))?;
            let (w, stop) = (w.clone(), stop.clone());
            let (speed, repeat) = (args.replay_speed, !args.replay_once);
            eprintln!(
                "perfabi-exportd: replaying {} aggregations from {}",
                record.aggregations.len(),
                args.replay
                    .as_ref()
                    .map_or(String::new(), |p| p.display().to_string())
            );
            Some(std::thread::spawn(move || {
                let done = || stop.load(Ordering::Relaxed);
                if let Err(e) = replay::run(&w, &record, default_iv, speed, repeat, counter, &done)
                {
                    eprintln!("perfabi-exportd: replay: {e}");
                }
            }))
        }
        None => None,
    };
    eprintln!(
        "perfabi-exportd: writing {} (epoch {:#x}, {} CPUs, every {:?}; lock {})",
        args.path.display(),
        w.epoch(),
        w.layout().nr_cpus,
        interval,
        lock.path().display()
    );

    // 4. Refresh and heartbeat until told to stop.
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if let Err(e) = hostsrc.refresh(&w) {
            eprintln!("perfabi-exportd: host statistics: {e}");
        }
        let _ = w.set(refresh_us, t.elapsed().as_micros() as i64);
        let _ = w.adjust(refreshes, 1);
        w.heartbeat();
        if w.damaged() {
            return Err((
                1,
                format!(
                    "{} was truncated by someone else: restart to create it again",
                    args.path.display()
                ),
            ));
        }
        next += interval;
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
        }
    }
    if let Some(r) = replayer {
        let _ = r.join();
    }
    match Arc::try_unwrap(w) {
        Ok(w) => w.close(),
        Err(_) => return Err((1, "internal: the writer is still shared at exit".into())),
    }
    eprintln!(
        "perfabi-exportd: stopped; {} marked closed",
        args.path.display()
    );
    Ok(())
}

/// The default vmstat set, limited to what this kernel has.
fn default_vmstat() -> Vec<String> {
    let present = std::fs::read_to_string("/proc/vmstat")
        .map(|t| perfabi::host::vmstat(&t))
        .unwrap_or_default();
    host::DEFAULT_VMSTAT
        .iter()
        .filter(|n| present.contains_key(**n))
        .map(|n| n.to_string())
        .collect()
}
