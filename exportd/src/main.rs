//! perfabi-exportd: publishes host statistics and DAMON region statistics
//! as a perfabi segment, for machines where the kernel module cannot be
//! loaded. Readers (the reader library, perfabi-cat, the PCP agent) cannot
//! tell the difference.
//!
//! Lifecycle: the configuration is checked before anything is created; one
//! daemon per segment path (a lock file); a heartbeat every interval;
//! SIGINT/SIGTERM mark the segment closed; a restart creates it again at the
//! same path with a new epoch, and readers follow.

mod damon;
mod host;
mod lock;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use perfabi::writer::{Config, Writer};
use perfabi::Semantics;

/// Publish host statistics and DAMON region statistics as a perfabi segment.
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
    /// DAMON source: tracepoint (live damon_aggregated events, passive),
    /// sysfs (own kdamond), replay (--replay FILE), auto (the best of these
    /// available, logged), none. Default: replay if --replay is given, else
    /// none.
    #[arg(long, value_enum, value_name = "SOURCE")]
    source: Option<damon::Choice>,
    /// Replay a DAMON record (ftrace or perf script text of damon_aggregated
    /// events, a damo json or json_compressed record, or a perfabi-cat
    /// --record recording) at its recorded cadence, in a loop.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// Replay this many times faster than recorded.
    #[arg(long, default_value_t = 1.0, value_name = "X", requires = "replay")]
    replay_speed: f64,
    /// Replay the record once instead of in a loop.
    #[arg(long, requires = "replay")]
    replay_once: bool,
    /// DAMON sampling interval: of the sysfs source's kdamond, and of
    /// replayed or traced regions whose intervals are not known otherwise.
    #[arg(long, default_value_t = 5000, value_name = "US")]
    damon_sample_us: u32,
    /// DAMON aggregation interval (as --damon-sample-us).
    #[arg(long, default_value_t = 100_000, value_name = "US")]
    damon_aggr_us: u32,
    /// The sysfs source monitors this process's virtual address space
    /// (vaddr); without it, physical memory (paddr).
    #[arg(long, value_name = "PID")]
    damon_pid: Option<u32>,
    /// The sysfs source's minimum number of regions.
    #[arg(long, default_value_t = 10, value_name = "N")]
    damon_min_regions: u32,
    /// The sysfs source's maximum number of regions.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    damon_max_regions: u32,
    /// The tracepoint source's ring buffer per CPU, in pages (a power of two).
    #[arg(long, default_value_t = 64, value_name = "PAGES")]
    perf_pages: u32,
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
            let bytes =
                std::fs::read(f).map_err(|e| bad(format!("--replay {}: {e}", f.display())))?;
            let r = damon::replay::parse(&bytes)
                .map_err(|e| bad(format!("--replay {}: {e}", f.display())))?;
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
    if default_iv.sample_us == 0 || default_iv.aggr_us < default_iv.sample_us {
        return Err(bad(
            "--damon-sample-us must be positive and at most --damon-aggr-us".into(),
        ));
    }
    let choice = args.source.unwrap_or(if record.is_some() {
        damon::Choice::Replay
    } else {
        damon::Choice::None
    });
    if choice == damon::Choice::Replay && record.is_none() {
        return Err(bad("--source replay needs --replay FILE".into()));
    }
    if args.damon_pid.is_some() && !matches!(choice, damon::Choice::Sysfs | damon::Choice::Auto) {
        return Err(bad(
            "--damon-pid applies to --source sysfs or auto only".into()
        ));
    }
    if args.damon_min_regions < 3 || args.damon_max_regions < args.damon_min_regions {
        return Err(bad(
            "--damon-min-regions must be at least 3 and at most --damon-max-regions".into(),
        ));
    }
    if !args.perf_pages.is_power_of_two() || !(1..=65536).contains(&args.perf_pages) {
        return Err(bad(format!(
            "--perf-pages {} must be a power of two between 1 and 65536",
            args.perf_pages
        )));
    }
    let sysfs_opts = damon::sysfs::Options {
        target: match args.damon_pid {
            Some(pid) => damon::sysfs::Target::Vaddr(pid),
            None => damon::sysfs::Target::Paddr,
        },
        intervals: default_iv,
        min_regions: args.damon_min_regions,
        max_regions: args.damon_max_regions,
    };
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

    // 3. Open the DAMON source: a refusal or missing permission is a
    // configuration error, and nothing has been created yet.
    let decision = damon::open(
        choice,
        &sysfs_opts,
        record,
        args.perf_pages.trailing_zeros(),
    )
    .map_err(|e| bad(format!("--source {choice}: {e}")))?;

    // 4. Create the segment (a new epoch).
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
    let counters = damon::Published::add(&w).map_err(|e| (1u8, e.to_string()))?;
    eprintln!("perfabi-exportd: DAMON: {}", decision.why);
    let damon_thread = decision.source.map(|source| {
        let (w, stop) = (w.clone(), stop.clone());
        let (speed, repeat) = (args.replay_speed, !args.replay_once);
        std::thread::spawn(move || {
            let done = || stop.load(Ordering::Relaxed);
            let res = match source {
                damon::Source::Replay(r) => {
                    damon::replay::run(&w, &r, default_iv, speed, repeat, &counters, &done)
                        .map(drop)
                }
                damon::Source::Tracepoint(mut t) => t.run(&w, &counters, default_iv, &done),
                damon::Source::Sysfs(k) => k.run(&w, &counters, &done),
            };
            if let Err(e) = res {
                eprintln!("perfabi-exportd: DAMON source stopped: {e}");
            }
        })
    });
    eprintln!(
        "perfabi-exportd: writing {} (epoch {:#x}, {} CPUs, every {:?}; lock {})",
        args.path.display(),
        w.epoch(),
        w.layout().nr_cpus,
        interval,
        lock.path().display()
    );

    // 5. Refresh and heartbeat until told to stop.
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
    if let Some(t) = damon_thread {
        let _ = t.join();
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
