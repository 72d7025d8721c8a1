//! perfabi-exportd: publishes host statistics (CPU, memory, disks,
//! network interfaces, interrupts, pressure) and DAMON region statistics
//! as a perfabi segment, for machines where the kernel module cannot be
//! loaded. Readers (the reader library, perfabi-cat, the PCP agent) cannot
//! tell the difference.
//!
//! Lifecycle: the configuration is checked before anything is created; one
//! daemon per segment path (a lock file); a heartbeat every interval;
//! SIGINT/SIGTERM mark the segment closed; a restart creates it again at the
//! same path with a new epoch, and readers follow.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{CommandFactory, FromArgMatches, Parser};
use perfabi::Semantics;
use perfabi_exportd::collectors::{CgroupOptions, Context, FsOptions, Selection};
use perfabi_exportd::filter::{self, Filter};
use perfabi_exportd::follow::Room;
use perfabi_exportd::sources::{self, Need};
use perfabi_exportd::stop::Stop;
use perfabi_exportd::{cpu, damon, host, lock, procfs};
use perfabi_shm::safe_open::escape_path;
use perfabi_shm::writer::{Config, Health, Writer};

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
or a symbolic link in its place, is refused.

When it stops, on a signal or an error, it prints its own CPU use since
it started, as the kernel accounts it in /proc/self/stat (utime + stime of
all its threads, in clock ticks of 1/sysconf(_SC_CLK_TCK) s), on standard
error:
  perfabi-exportd: used 0.08% of a core over 60.0 s (utime 0.03 s, stime 0.02 s, 61 refreshes)
--cpu-report SECS prints the same every SECS seconds, for the last SECS.

Collectors are chosen as node_exporter's are: each --collector.NAME above
says whether it runs by default; --no-collector.NAME turns one off,
--collector.disable-defaults all but those named (the later of
--collector.NAME and --no-collector.NAME wins). A pattern matches anywhere
in a name unless anchored (^...$); an empty pattern matches nothing."
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
    /// Instance table capacity: the value slots of every member and
    /// counter. Default: --max-members plus the daemon's own counters.
    #[arg(long, value_name = "N")]
    max_instances: Option<u32>,
    /// Member table capacity: one member per device (disk, interface,
    /// IRQ) and family. Default: twice what this host has at start, plus
    /// 1024 for devices that appear later; a device that finds the table
    /// full is not published and is counted in exportd.skipped_instances.
    #[arg(long, value_name = "N")]
    max_members: Option<u32>,
    /// Family table capacity. Default: the families registered at start,
    /// plus 16.
    #[arg(long, value_name = "N")]
    max_families: Option<u32>,
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
    #[arg(long, default_value_t = perfabi_record::damon::DEFAULT_MAX_RECORD_BYTES >> 20, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..=65536))]
    replay_max_mib: u64,
    /// Also print the CPU use of the last SECS seconds every SECS seconds
    /// (the line printed at stop, from /proc/self/stat; see below).
    #[arg(long, value_name = "SECS")]
    cpu_report: Option<f64>,
    /// Publish only the disks whose name matches REGEX (instead of the
    /// exclude pattern).
    #[arg(long = "collector.diskstats.device-include", value_name = "REGEX")]
    disks_include: Option<String>,
    /// Leave out the disks whose name matches REGEX.
    #[arg(long = "collector.diskstats.device-exclude", value_name = "REGEX",
          default_missing_value = None, help = format!("Leave out the disks whose name matches REGEX [default: {}]", filter::DISKS_EXCLUDE))]
    disks_exclude: Option<String>,
    /// Publish only the interfaces whose name matches REGEX.
    #[arg(long = "collector.netdev.device-include", value_name = "REGEX")]
    netdev_include: Option<String>,
    /// Leave out the interfaces whose name matches REGEX [default: none].
    #[arg(long = "collector.netdev.device-exclude", value_name = "REGEX")]
    netdev_exclude: Option<String>,
    /// Leave out the mount points that match REGEX. (The default is in
    /// the help text, where a long pattern can wrap, not beside the flag.)
    #[arg(long = "collector.filesystem.mount-points-exclude", value_name = "REGEX",
          default_value = filter::MOUNT_POINTS_EXCLUDE, hide_default_value = true,
          help = format!("Leave out the mount points that match REGEX [default: {}]", filter::MOUNT_POINTS_EXCLUDE))]
    mount_points_exclude: String,
    /// Leave out the filesystems whose type matches REGEX.
    #[arg(long = "collector.filesystem.fs-types-exclude", value_name = "REGEX",
          default_value = filter::FS_TYPES_EXCLUDE, hide_default_value = true,
          help = format!("Leave out the filesystems whose type matches REGEX [default: {}]", filter::FS_TYPES_EXCLUDE))]
    fs_types_exclude: String,
    /// How long a mount's statfs may take before the mount is marked
    /// stuck (filesys.device_error 1) and not asked again until it answers.
    #[arg(
        long = "collector.filesystem.mount-timeout",
        value_name = "SECS",
        default_value_t = 0.5
    )]
    mount_timeout: f64,
    /// The cgroup v2 hierarchy [default: the first cgroup2 mount of
    /// /proc/self/mountinfo].
    #[arg(long = "collector.cgroups.root", value_name = "DIR")]
    cgroups_root: Option<PathBuf>,
    /// The most cgroups published; the rest are counted in cgroup.dropped.
    #[arg(long = "collector.cgroups.max", value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    cgroups_max: u32,
    /// How deep below the root cgroups are published (the root is 0).
    #[arg(long = "collector.cgroups.depth", value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(0..=64))]
    cgroups_depth: u32,
}

/// Why the daemon stopped other than on a signal, by exit status (see
/// `--help`); each holds one line for the user.
enum Fail {
    /// Exit 1: a runtime error.
    Runtime(String),
    /// Exit 2: bad configuration or a refused path; nothing was created.
    Config(String),
    /// Exit 3: another daemon already writes the path.
    Held(String),
}

impl Fail {
    /// The exit status, as `--help` lists them.
    fn code(&self) -> u8 {
        match self {
            Fail::Runtime(_) => 1,
            Fail::Config(_) => 2,
            Fail::Held(_) => 3,
        }
    }

    fn message(&self) -> &str {
        match self {
            Fail::Runtime(m) | Fail::Config(m) | Fail::Held(m) => m,
        }
    }
}

/// A runtime failure from any displayable error.
fn runtime(e: impl std::fmt::Display) -> Fail {
    Fail::Runtime(e.to_string())
}

fn main() -> ExitCode {
    // The page names the collector flags too, which are generated.
    perfabi_man::print_if_asked(|| {
        perfabi_man::Page::new(perfabi_exportd::collectors::flags(
            Args::command(),
            &sources::ALL,
        ))
    });
    let started = Instant::now();
    let matches = perfabi_exportd::collectors::flags(Args::command(), &sources::ALL).get_matches();
    let args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let selection = Selection::from_matches(&sources::ALL, &matches);
    let r = configure(&args, selection).and_then(|plan| run(&args, plan, started));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("perfabi-exportd: {}", f.message());
            ExitCode::from(f.code())
        }
    }
}

/// Everything checked before anything is created.
struct Plan {
    interval: Duration,
    cpu_report: Option<Duration>,
    ctx: Context,
    selection: Selection,
    record: Option<perfabi_record::damon::Record>,
    default_iv: perfabi::damon::Intervals,
    choice: damon::Choice,
    sysfs_opts: damon::sysfs::Options,
    config: Config,
}

/// Instances the daemon registers beside the host statistics.
const OWN_INSTANCES: usize = 2 + damon::DamonCounters::INSTANCES + Room::INSTANCES;

/// Members the default `--max-members` holds beyond twice what is live at
/// start: 256 new network interfaces, or 146 disks.
const MEMBER_HEADROOM: usize = 1024;

/// Families the default `--max-families` holds beyond those registered at
/// start (all are, today).
const FAMILY_HEADROOM: usize = 16;

/// 1. Checks the whole configuration (exit 2); nothing exists yet.
fn configure(args: &Args, selection: Selection) -> Result<Plan, Fail> {
    let bad = Fail::Config;
    if !(args.interval.is_finite() && args.interval >= 0.01 && args.interval <= 3600.0) {
        return Err(bad(format!(
            "--interval {} must be between 0.01 and 3600 seconds",
            args.interval
        )));
    }
    let cpu_report = match args.cpu_report {
        None => None,
        Some(s) if s.is_finite() && (0.1..=86_400.0).contains(&s) => {
            Some(Duration::from_secs_f64(s))
        }
        Some(s) => {
            return Err(bad(format!(
                "--cpu-report {s} must be between 0.1 and 86400 seconds"
            )))
        }
    };
    check_path(&args.path).map_err(bad)?;
    let vmstat: Vec<String> = match (args.vmstat.is_empty(), selection.runs("vmstat")) {
        (_, false) if !args.vmstat.is_empty() => {
            return Err(bad(
                "--vmstat needs the vmstat collector, which is off".into()
            ))
        }
        (_, false) => Vec::new(),
        (true, true) => default_vmstat(),
        (false, true) => args.vmstat.clone(),
    };
    let paths = sources::Paths::default();
    host::check(&paths, &vmstat).map_err(|e| bad(e.to_string()))?;
    if !(args.mount_timeout.is_finite() && (0.001..=60.0).contains(&args.mount_timeout)) {
        return Err(bad(format!(
            "--collector.filesystem.mount-timeout {} must be between 0.001 and 60 seconds",
            args.mount_timeout
        )));
    }
    let ctx = Context {
        vmstat,
        disks: Filter::new(
            (
                "--collector.diskstats.device-include",
                args.disks_include.as_deref(),
            ),
            (
                "--collector.diskstats.device-exclude",
                args.disks_exclude.as_deref(),
            ),
            filter::DISKS_EXCLUDE,
        )
        .map_err(bad)?,
        interfaces: Filter::new(
            (
                "--collector.netdev.device-include",
                args.netdev_include.as_deref(),
            ),
            (
                "--collector.netdev.device-exclude",
                args.netdev_exclude.as_deref(),
            ),
            "",
        )
        .map_err(bad)?,
        filesystem: FsOptions {
            mount_points: Filter::exclude(
                "--collector.filesystem.mount-points-exclude",
                &args.mount_points_exclude,
            )
            .map_err(bad)?,
            fs_types: Filter::exclude(
                "--collector.filesystem.fs-types-exclude",
                &args.fs_types_exclude,
            )
            .map_err(bad)?,
            timeout: Duration::from_secs_f64(args.mount_timeout),
            ..FsOptions::default()
        },
        cgroups: CgroupOptions {
            root: args.cgroups_root.clone(),
            max: args.cgroups_max as usize,
            depth: args.cgroups_depth as usize,
        },
        ..Context::new(paths)
    };
    let limit = args.replay_max_mib << 20;
    let default_iv = perfabi::damon::Intervals {
        sample_us: args.damon_sample_us,
        aggr_us: args.damon_aggr_us,
    };
    if default_iv.sample_us == 0 || default_iv.aggr_us < default_iv.sample_us {
        return Err(bad(
            "--damon-sample-us must be positive and at most --damon-aggr-us".into(),
        ));
    }
    let record = match &args.replay {
        Some(f) => Some(read_record(f, limit, default_iv).map_err(bad)?),
        None => None,
    };
    if !(args.replay_speed.is_finite() && args.replay_speed > 0.0 && args.replay_speed <= 1e6) {
        return Err(bad(format!(
            "--replay-speed {} must be positive and at most 1000000",
            args.replay_speed
        )));
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
    let need = sources::need(&ctx, &selection);
    let config = sizes(args, need)?;
    Ok(Plan {
        interval: Duration::from_secs_f64(args.interval),
        cpu_report,
        ctx,
        selection,
        record,
        default_iv,
        choice,
        sysfs_opts,
        config,
    })
}

/// 1b. The segment's tables: what the sources `need` here now, with
/// headroom for devices that appear later, or what the command line asks
/// (at least what is needed now).
fn sizes(args: &Args, need: Need) -> Result<Config, Fail> {
    let max = |given: Option<u32>, default: usize, needed: usize, what: &str, opt: &str| {
        let n = given.unwrap_or(u32::try_from(default).unwrap_or(u32::MAX));
        if (n as usize) < needed {
            return Err(Fail::Config(format!(
                "{opt} {n} is too small: this daemon registers {needed} {what} here"
            )));
        }
        Ok(n)
    };
    let max_families = max(
        args.max_families,
        need.families + FAMILY_HEADROOM,
        need.families,
        "families",
        "--max-families",
    )?;
    let max_members = max(
        args.max_members,
        2 * need.members + MEMBER_HEADROOM,
        need.members,
        "members",
        "--max-members",
    )?;
    let max_instances = max(
        args.max_instances,
        max_members as usize + OWN_INSTANCES,
        need.members + OWN_INSTANCES,
        "instances",
        "--max-instances",
    )?;
    let config = Config {
        max_instances,
        max_families,
        max_members,
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
        max_families: config.max_families,
        max_members: config.max_members,
    }
    .sizes()
    .map_err(|e| {
        Fail::Config(format!(
            "--max-instances {max_instances}, --max-members {max_members}, --max-families {max_families}: {e}"
        ))
    })?;
    Ok(config)
}

/// Reads and parses the `--replay` record at `f` (at most `limit` bytes,
/// compressed or not); it must hold at least one complete aggregation.
fn read_record(
    f: &Path,
    limit: u64,
    default_iv: perfabi::damon::Intervals,
) -> Result<perfabi_record::damon::Record, String> {
    use perfabi_record::damon::ReadError;
    perfabi_record::damon::read_file(f, limit, default_iv).map_err(|e| {
        let said = e.advising("raise --replay-max-mib");
        match e {
            // A refused path says "refusing PATH: …"; the others start with it.
            ReadError::Open(_) | ReadError::TooLarge { .. } => format!("--replay: {said}"),
            _ => format!("--replay {said}"),
        }
    })
}

/// `--path` must name a file (not a folder) in a folder that exists, is
/// reached through no other user's symbolic link, and in which other users
/// cannot replace files.
fn check_path(path: &Path) -> Result<(), String> {
    let shown = escape_path(path);
    if path.as_os_str().as_bytes().ends_with(b"/") || path.file_name().is_none() {
        return Err(format!(
            "--path {shown}: names a folder, not a segment file"
        ));
    }
    let (folder, name) =
        perfabi_shm::safe_open::Folder::of(path).map_err(|e| format!("--path: {e}"))?;
    if folder
        .stat(&name)
        .map_err(|e| format!("--path {shown}: {e}"))?
        .is_some_and(|e| e.kind == perfabi_shm::safe_open::FileKind::Directory)
    {
        return Err(format!("--path {shown}: is a folder, not a segment file"));
    }
    folder
        .check_private()
        .map_err(|e| format!("--path {shown}: {e}"))
}

/// 2–5: locks the path, opens the DAMON source, creates the segment, then
/// refreshes and heartbeats until told to stop, and prints the CPU use
/// since `started`.
fn run(args: &Args, plan: Plan, started: Instant) -> Result<(), Fail> {
    let lock = lock_path(&args.path)?;
    let decision = damon::open(
        plan.choice,
        &plan.sysfs_opts,
        plan.record,
        args.perf_pages.trailing_zeros(),
    )
    .map_err(|e| Fail::Config(format!("--source {}: {e}", plan.choice)))?;
    let mut daemon = Daemon::start(
        args,
        &plan.config,
        decision,
        (&plan.ctx, &plan.selection),
        plan.default_iv,
    )?;
    eprintln!(
        "perfabi-exportd: writing {} (epoch {:#x}, {} CPUs, every {:?}; lock {})",
        escape_path(&args.path),
        daemon.w.epoch(),
        daemon.w.layout().nr_cpus,
        plan.interval,
        escape_path(lock.path())
    );
    let result = daemon.serve(&lock, plan.interval, plan.cpu_report);
    let (mut clock, refreshes) = (cpu::Clock::new(), daemon.done);
    daemon.finish()?;
    // After the DAMON thread's end: all of the process's time is counted.
    match clock.sample() {
        Ok(now) => eprintln!(
            "perfabi-exportd: {}",
            clock
                .used(&cpu::Sample::start(started), &now)
                .refreshes(refreshes)
        ),
        Err(e) => eprintln!("perfabi-exportd: CPU use unknown: {e}"),
    }
    if result.is_ok() {
        eprintln!(
            "perfabi-exportd: stopped; {} marked closed",
            escape_path(&args.path)
        );
    }
    result
}

/// Step 2, one daemon per path: takes the path's lock.
fn lock_path(path: &Path) -> Result<lock::PathLock, Fail> {
    lock::PathLock::take(path).map_err(|e| match e {
        lock::LockError::Held { .. } => Fail::Held(e.to_string()),
        lock::LockError::Refused(_) => Fail::Config(e.to_string()),
        lock::LockError::Io(_) => Fail::Runtime(e.to_string()),
    })
}

/// A running daemon: its segment, its own counters, the host source and
/// the DAMON source's thread.
struct Daemon {
    path: PathBuf,
    w: Arc<Writer>,
    stop: Arc<Stop>,
    /// Readable once SIGINT or SIGTERM came: the refresh loop sleeps in
    /// `poll` on it until its next refresh.
    signalled: UnixStream,
    sources: sources::Sources,
    refreshes: perfabi_shm::writer::InstanceId,
    refresh_us: perfabi_shm::writer::InstanceId,
    /// Refreshes done so far.
    done: u64,
    damon_thread: Option<std::thread::JoinHandle<()>>,
}

impl Daemon {
    /// Step 4: creates the segment (a new epoch), registers the counters, and
    /// starts the DAMON source on its own thread.
    fn start(
        args: &Args,
        config: &Config,
        decision: damon::Decision,
        (ctx, selection): (&Context, &Selection),
        default_iv: perfabi::damon::Intervals,
    ) -> Result<Daemon, Fail> {
        let stop = Arc::new(Stop::new());
        let signals = || -> std::io::Result<UnixStream> {
            let (signalled, wake) = UnixStream::pair()?;
            for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
                // The flag for the DAMON thread, the wakeup for the loop.
                signal_hook::flag::register(sig, stop.flag())?;
                signal_hook::low_level::pipe::register(sig, wake.try_clone()?)?;
            }
            Ok(signalled)
        };
        let signalled =
            signals().map_err(|e| Fail::Runtime(format!("cannot handle signals: {e}")))?;
        let w = Arc::new(Writer::create(&args.path, config).map_err(runtime)?);
        let refreshes = w
            .add("exportd.refreshes", "count", Semantics::Counter)
            .map_err(runtime)?;
        let refresh_us = w
            .add_typed(
                "exportd.refresh_us",
                "us",
                Semantics::Instant,
                perfabi::ValueType::U64,
            )
            .map_err(runtime)?;
        let sources = sources::Sources::new(&w, ctx, selection).map_err(runtime)?;
        eprintln!(
            "perfabi-exportd: collectors: {}",
            sources.names().collect::<Vec<_>>().join(", ")
        );
        let counters = damon::DamonCounters::add(&w).map_err(runtime)?;
        eprintln!("perfabi-exportd: DAMON: {}", decision.why);
        let damon_thread = decision.source.map(|source| {
            let (w, stop) = (w.clone(), stop.clone());
            let (speed, repeat) = (args.replay_speed, !args.replay_once);
            std::thread::spawn(move || {
                let done = || stop.is_set();
                let res = match source {
                    damon::Source::Replay(r) => {
                        damon::replay::run(&w, &r, speed, repeat, &counters, &stop).map(drop)
                    }
                    damon::Source::Tracepoint(mut t) => t.run(&w, &counters, default_iv, &done),
                    damon::Source::Sysfs(k) => k.run(&w, &counters, &done),
                };
                if let Err(e) = res {
                    eprintln!("perfabi-exportd: DAMON source stopped: {e}");
                }
            })
        });
        Ok(Daemon {
            path: args.path.clone(),
            w,
            stop,
            signalled,
            sources,
            refreshes,
            refresh_us,
            done: 0,
            damon_thread,
        })
    }

    /// Step 5: refreshes and heartbeats every `interval` until told to stop, or
    /// until the lock is lost; prints the CPU use every `cpu_report`.
    fn serve(
        &mut self,
        lock: &lock::PathLock,
        interval: Duration,
        cpu_report: Option<Duration>,
    ) -> Result<(), Fail> {
        let mut next = Instant::now();
        let mut last_damage = None;
        let mut cpu = cpu_report.map(CpuReport::new);
        while !self.stopping() {
            self.refresh();
            self.report(self.w.heartbeat(), &mut last_damage);
            if let Some(c) = &mut cpu {
                c.tick(self.done);
            }
            if !lock.still_held() {
                self.stop.set();
                return Err(Fail::Runtime(format!(
                    "lock file {} was removed or replaced: stopping, so that two daemons never write one path",
                    escape_path(lock.path())
                )));
            }
            next += interval;
            self.sleep_until(next);
        }
        // Wakes the DAMON thread's sleep, if any.
        self.stop.set();
        Ok(())
    }

    fn stopping(&self) -> bool {
        self.stop.is_set()
    }

    /// Sleeps until `until`, or until SIGINT or SIGTERM: one wakeup per
    /// refresh, not one every few milliseconds to look at the flag.
    fn sleep_until(&self, until: Instant) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        while !self.stopping() {
            let Some(left) = until
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
            else {
                return;
            };
            let timeout = Timespec {
                tv_sec: left.as_secs().try_into().unwrap_or(i64::MAX),
                tv_nsec: left.subsec_nanos().into(),
            };
            let mut fds = [PollFd::new(&self.signalled, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                // Only the signal handlers write the pipe (their flag is
                // set already); set here too, so that no state of the
                // socket can make this loop spin.
                Ok(n) if n > 0 => {
                    self.stop.set();
                    return;
                }
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                // Cannot happen on a socket of its own; never spin.
                Err(_) => std::thread::sleep(left.min(Duration::from_millis(50))),
            }
        }
    }

    /// One refresh of the host statistics, timed and counted.
    fn refresh(&mut self) {
        let t = Instant::now();
        self.sources.refresh(&self.w);
        let _ = self.w.set(self.refresh_us, t.elapsed().as_micros() as i64);
        let _ = self.w.adjust(self.refreshes, 1);
        self.done += 1;
    }

    /// Logs what a heartbeat found: a repair every time, a damage it cannot
    /// repair once until its message changes.
    fn report(&self, health: Health, last_damage: &mut Option<String>) {
        match health {
            Health::Intact => *last_damage = None,
            Health::Recreated { why, epoch } => {
                *last_damage = None;
                eprintln!(
                    "perfabi-exportd: {} was damaged by someone else ({why}): created it again (epoch {epoch:#x})",
                    escape_path(&self.path)
                );
            }
            Health::Damaged { why, error } => {
                let line = format!(
                    "{} was damaged by someone else ({why}) and cannot be created again: {error}; retrying every interval",
                    escape_path(&self.path)
                );
                if last_damage.as_ref() != Some(&line) {
                    eprintln!("perfabi-exportd: {line}");
                }
                *last_damage = Some(line);
            }
        }
    }

    /// Stops the DAMON source and closes the segment (marked closed).
    fn finish(self) -> Result<(), Fail> {
        self.stop.set();
        if let Some(t) = self.damon_thread {
            let _ = t.join();
        }
        match Arc::try_unwrap(self.w) {
            Ok(w) => {
                w.close();
                Ok(())
            }
            Err(_) => Err(Fail::Runtime(
                "internal: the writer is still shared at exit".into(),
            )),
        }
    }
}

/// `--cpu-report`: the CPU use of each stretch of `every`, printed after
/// the refresh that ends it.
struct CpuReport {
    clock: cpu::Clock,
    every: Duration,
    from: Option<cpu::Sample>,
    refreshes: u64,
}

impl CpuReport {
    /// The first stretch starts at the first [`tick`](Self::tick).
    fn new(every: Duration) -> Self {
        Self {
            clock: cpu::Clock::new(),
            every,
            from: None,
            refreshes: 0,
        }
    }

    /// After a refresh (`refreshes` so far): prints the last stretch's use
    /// if it is `every` long.
    fn tick(&mut self, refreshes: u64) {
        let due = self.from.is_none_or(|f| f.at.elapsed() >= self.every);
        if !due {
            return;
        }
        match (self.from, self.clock.sample()) {
            (Some(from), Ok(now)) => {
                let used = self.clock.used(&from, &now);
                eprintln!(
                    "perfabi-exportd: {}",
                    used.refreshes(refreshes - self.refreshes).periodic()
                );
                self.from = Some(now);
            }
            (None, Ok(now)) => self.from = Some(now),
            // Logged once, until a sample succeeds again.
            (Some(_), Err(e)) => {
                eprintln!("perfabi-exportd: CPU use unknown: {e}");
                self.from = None;
            }
            (None, Err(_)) => {}
        }
        self.refreshes = refreshes;
    }
}

/// The default vmstat set, limited to what this kernel has.
fn default_vmstat() -> Vec<String> {
    let present = std::fs::read_to_string("/proc/vmstat")
        .map(|t| procfs::vmstat(&t))
        .unwrap_or_default();
    host::DEFAULT_VMSTAT
        .iter()
        .filter(|n| present.contains_key(**n))
        .map(|n| n.to_string())
        .collect()
}
