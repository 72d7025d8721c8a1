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

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use perfabi::writer::{Config, Health, Writer};
use perfabi::Semantics;

/// Publish host statistics and DAMON region statistics as a perfabi segment.
#[derive(Parser, Debug)]
#[command(
    name = "perfabi-exportd",
    version,
    after_help = "\
Exit status: 0 after SIGINT/SIGTERM (segment marked closed), 1 runtime
error (including a segment that cannot be created, such as on a full
filesystem), 2 bad configuration or a refused path (nothing was created),
3 another daemon already writes the path.

The segment's folder must not let other users replace files in it (owned by
root or this user; if others may write it, sticky like /dev/shm). The lock
file PATH.lock is private (0600) to this user; a lock file of another user,
or a symbolic link in its place, is refused."
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
    /// Largest --replay record to read, and to decompress, in MiB.
    #[arg(long, default_value_t = damon::replay::DEFAULT_MAX_RECORD_BYTES >> 20, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..=65536))]
    replay_max_mib: u64,
}

/// A failure: the exit code (see `--help`) and one line.
type Fail = (u8, String);

fn main() -> ExitCode {
    let args = Args::parse();
    let r = configure(&args).and_then(|plan| run(&args, plan));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("perfabi-exportd: {msg}");
            ExitCode::from(code)
        }
    }
}

/// Everything checked before anything is created.
struct Plan {
    interval: Duration,
    vmstat: Vec<String>,
    paths: host::ProcPaths,
    record: Option<damon::replay::Record>,
    default_iv: perfabi::damon::Intervals,
    choice: damon::Choice,
    sysfs_opts: damon::sysfs::Options,
    config: Config,
}

/// Instances the daemon registers beside the host statistics.
const OWN_INSTANCES: usize = 2 + damon::Published::INSTANCES;

/// 1. Checks the whole configuration (exit 2); nothing exists yet.
fn configure(args: &Args) -> Result<Plan, Fail> {
    let bad = |m: String| (2u8, m);
    if !(args.interval.is_finite() && args.interval >= 0.01 && args.interval <= 3600.0) {
        return Err(bad(format!(
            "--interval {} must be between 0.01 and 3600 seconds",
            args.interval
        )));
    }
    check_path(&args.path).map_err(bad)?;
    let vmstat: Vec<String> = if args.vmstat.is_empty() {
        default_vmstat()
    } else {
        args.vmstat.clone()
    };
    let paths = host::ProcPaths::default();
    host::check(&paths, &vmstat).map_err(|e| bad(e.to_string()))?;
    let limit = args.replay_max_mib << 20;
    let record = match &args.replay {
        Some(f) => {
            let mut bytes = Vec::new();
            // The file may grow after it was measured: read at most the limit.
            perfabi::safe_open::open_input(f, limit)
                .map_err(|e| match e.problem {
                    perfabi::safe_open::Problem::TooLarge { .. } => {
                        bad(format!("--replay: {e} (raise --replay-max-mib to read it)"))
                    }
                    _ => bad(format!("--replay: {e}")),
                })?
                .take(limit + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| bad(format!("--replay {}: {e}", f.display())))?;
            if bytes.len() as u64 > limit {
                return Err(bad(format!(
                    "--replay {}: it grew past the limit of {limit} bytes while being read",
                    f.display()
                )));
            }
            let r = damon::replay::parse(&bytes, limit)
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
    if !(args.replay_speed.is_finite() && args.replay_speed > 0.0 && args.replay_speed <= 1e6) {
        return Err(bad(format!(
            "--replay-speed {} must be positive and at most 1000000",
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
        heartbeat_interval: Duration::from_secs_f64(args.interval),
        // The daemon's loop beats at every refresh and logs what it finds.
        auto_heartbeat: false,
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
    let needed = host::instances(&paths, &vmstat).map_err(|e| bad(e.to_string()))? + OWN_INSTANCES;
    if (args.max_instances as usize) < needed {
        return Err(bad(format!(
            "--max-instances {} is too small: this daemon registers {needed} instances here",
            args.max_instances
        )));
    }
    Ok(Plan {
        interval: Duration::from_secs_f64(args.interval),
        vmstat,
        paths,
        record,
        default_iv,
        choice,
        sysfs_opts,
        config,
    })
}

/// `--path` must name a file (not a folder) in a folder that exists, is
/// reached through no other user's symbolic link, and in which other users
/// cannot replace files.
fn check_path(path: &Path) -> Result<(), String> {
    let shown = path.display();
    if path.as_os_str().as_bytes().ends_with(b"/") || path.file_name().is_none() {
        return Err(format!(
            "--path {shown}: names a folder, not a segment file"
        ));
    }
    let (folder, name) =
        perfabi::safe_open::Folder::of(path).map_err(|e| format!("--path: {e}"))?;
    if folder
        .stat(&name)
        .map_err(|e| format!("--path {shown}: {e}"))?
        .is_some_and(|e| e.kind == perfabi::safe_open::FileKind::Directory)
    {
        return Err(format!("--path {shown}: is a folder, not a segment file"));
    }
    folder
        .check_private()
        .map_err(|e| format!("--path {shown}: {e}"))
}

/// 2–5: locks the path, opens the DAMON source, creates the segment, then
/// refreshes and heartbeats until told to stop.
fn run(args: &Args, plan: Plan) -> Result<(), Fail> {
    let Plan {
        interval,
        vmstat,
        paths,
        record,
        default_iv,
        choice,
        sysfs_opts,
        config,
    } = plan;
    // 2. One daemon per path.
    let lock = lock::PathLock::take(&args.path).map_err(|e| {
        let code = match e {
            lock::LockError::Held { .. } => 3,
            lock::LockError::Refused(_) => 2,
            lock::LockError::Io(_) => 1,
        };
        (code, e.to_string())
    })?;

    // 3. Open the DAMON source: a refusal or missing permission is a
    // configuration error; the lock file goes with the lock.
    let decision = damon::open(
        choice,
        &sysfs_opts,
        record,
        args.perf_pages.trailing_zeros(),
    )
    .map_err(|e| (2u8, format!("--source {choice}: {e}")))?;

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
    let mut last_damage = None;
    let mut result = Ok(());
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        if let Err(e) = hostsrc.refresh(&w) {
            eprintln!("perfabi-exportd: host statistics: {e}");
        }
        let _ = w.set(refresh_us, t.elapsed().as_micros() as i64);
        let _ = w.adjust(refreshes, 1);
        match w.heartbeat() {
            Health::Intact => last_damage = None,
            Health::Recreated { why, epoch } => {
                last_damage = None;
                eprintln!(
                    "perfabi-exportd: {} was damaged by someone else ({why}): created it again (epoch {epoch:#x})",
                    args.path.display()
                );
            }
            Health::Damaged { why, error } => {
                let line = format!(
                    "{} was damaged by someone else ({why}) and cannot be created again: {error}; retrying every interval",
                    args.path.display()
                );
                if last_damage.as_ref() != Some(&line) {
                    eprintln!("perfabi-exportd: {line}");
                }
                last_damage = Some(line);
            }
        }
        if !lock.still_held() {
            result = Err((
                1,
                format!(
                    "lock file {} was removed or replaced: stopping, so that two daemons never write one path",
                    lock.path().display()
                ),
            ));
            stop.store(true, Ordering::Relaxed);
            break;
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
    if result.is_ok() {
        eprintln!(
            "perfabi-exportd: stopped; {} marked closed",
            args.path.display()
        );
    }
    result
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
