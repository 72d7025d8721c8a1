//! What one refresh of each `/proc` source costs, on this machine's own
//! files: each source is refreshed in a loop into a private segment, and
//! the loop's CPU time (this thread's, `CLOCK_THREAD_CPUTIME_ID`: user and
//! system, which other load on the machine changes little) is divided by
//! the refreshes. The last column is what the source costs the daemon at
//! `--interval 1`, in percent of one core.
//!
//! `PERFABI_REFRESH_CPUS=64,256` also measures the sources on synthetic
//! `/proc/stat`, `/proc/softirqs` and `/proc/interrupts` of machines of
//! that many CPUs (4 numbered IRQs per CPU and the named rows, every count
//! per CPU; the other files are this machine's), read from a tmpfs folder
//! into a segment of that many CPUs: what parsing and publishing cost
//! there. What the kernel spends generating the real files is not in it
//! (it grows with CPUs × IRQs too).
//!
//! `cargo bench -p perfabi-exportd --bench refresh` (PERFABI_REFRESH_SECS:
//! seconds per source, default 1).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use perfabi_exportd::collectors::{Context, Selection};
use perfabi_exportd::cpu;
use perfabi_exportd::follow::Room;
use perfabi_exportd::host::DEFAULT_VMSTAT;
use perfabi_exportd::sources::{self, Paths, Sources};
use perfabi_shm::writer::{Config, Writer};
use rustix::time::{clock_gettime, ClockId};

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Runs `f` for about `secs` of wall-clock time; prints and returns its
/// CPU time per call.
/// The line's source name is prefixed with `label`.
fn measure_as(label: &str, name: &str, secs: f64, mut f: impl FnMut()) -> Duration {
    let name = format!("{label}{name}");
    // Warm up: the first refreshes register instances and size buffers.
    for _ in 0..3 {
        f();
    }
    let (w0, c0) = (Instant::now(), thread_cpu());
    let mut n = 0u32;
    while n < 10 || w0.elapsed().as_secs_f64() < secs {
        f();
        n += 1;
    }
    let (wall, cpu) = (w0.elapsed() / n, (thread_cpu() - c0) / n);
    println!(
        "REFRESH-COST {name:<12} {:>9.1} us CPU {:>9.1} us wall per refresh ({n} refreshes) = {:.4}% of a core at 1 s",
        cpu.as_secs_f64() * 1e6,
        wall.as_secs_f64() * 1e6,
        cpu.as_secs_f64() * 100.0,
    );
    cpu
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes
    // nothing: then run briefly.
    let bench = std::env::args().any(|a| a == "--bench");
    let secs: f64 = std::env::var("PERFABI_REFRESH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if bench { 1.0 } else { 0.05 });
    let vmstat: Vec<String> = DEFAULT_VMSTAT
        .iter()
        .map(|s| s.to_string())
        .filter(|n| {
            std::fs::read_to_string("/proc/vmstat")
                .is_ok_and(|t| t.lines().any(|l| l.split(' ').next() == Some(n)))
        })
        .collect();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    each_source(&Paths::default(), &vmstat, None, dir.path(), secs);
    let cpus = std::env::var("PERFABI_REFRESH_CPUS").unwrap_or_default();
    for n in cpus.split(',').filter_map(|n| n.trim().parse::<u32>().ok()) {
        let root = dir.path().join(format!("machine-{n}"));
        let paths = synthetic(&root, n as usize);
        each_source(&paths, &vmstat, Some(n), &root, secs);
    }
}

/// Measures each source on the files under `paths`, into a segment of
/// `nr_cpus` CPUs (this machine's if `None`) in `dir`.
fn each_source(paths: &Paths, vmstat: &[String], nr_cpus: Option<u32>, dir: &Path, secs: f64) {
    // Every collector, the ones off by default too.
    let all = Selection::only(&sources::ALL, &sources::ALL.map(|c| c.name));
    let ctx = Context {
        vmstat: vmstat.to_vec(),
        ..Context::new(paths.clone())
    };
    let need = sources::need(&ctx, &all);
    let config = Config {
        nr_cpus,
        max_families: (2 * need.families + 64) as u32,
        max_members: (4 * need.members + 1024) as u32,
        max_instances: (4 * need.members + 1100) as u32,
        auto_heartbeat: false,
        ..Config::default()
    };
    let w = Writer::create(dir.join("seg"), &config).unwrap();
    let mut room = Room::new(&w).unwrap();
    let label = match nr_cpus {
        Some(n) => format!("{n}cpus:"),
        None => String::new(),
    };
    println!(
        "refresh cost of each source, {} CPUs{}, {} families and {} members",
        w.layout().nr_cpus,
        if nr_cpus.is_some() {
            " (synthetic /proc/stat, softirqs, interrupts)"
        } else {
            " (this machine's /proc)"
        },
        need.families,
        need.members
    );
    let measure = |name: &str, secs: f64, f: &mut dyn FnMut()| measure_as(&label, name, secs, f);
    let mut total = Duration::ZERO;
    for c in &sources::ALL {
        if let Ok(mut s) = (c.start)(&w, &ctx) {
            total += measure(c.name, secs, &mut || s.refresh(&w, &mut room).unwrap());
        }
    }
    if nr_cpus.is_none() {
        let mut clock = cpu::Clock::new();
        measure("cpu-sample", secs, &mut || {
            clock.sample().unwrap();
        });
    }
    println!(
        "REFRESH-COST {:<12} {:>9.1} us CPU per refresh of every source = {:.4}% of a core at 1 s",
        format!("{label}sum"),
        total.as_secs_f64() * 1e6,
        total.as_secs_f64() * 100.0
    );
    drop(w);
    // Every source together, as the daemon runs them, in a segment of its own.
    let w = Writer::create(dir.join("all"), &config).unwrap();
    let mut every = Sources::new(&w, &ctx, &all).unwrap();
    measure("all", secs, &mut || every.refresh(&w));
}

/// A `/proc` and `/sys` of a machine of `n` CPUs under `root`: `stat`,
/// `softirqs` and `interrupts` made up (counts that differ by CPU and
/// row), the other files copied from this machine.
fn synthetic(root: &Path, n: usize) -> Paths {
    let (proc, sys) = (root.join("proc"), root.join("sys"));
    std::fs::create_dir_all(proc.join("pressure")).unwrap();
    std::fs::create_dir_all(proc.join("net")).unwrap();
    std::fs::create_dir_all(proc.join("sys/kernel")).unwrap();
    for f in [
        "vmstat",
        "meminfo",
        "diskstats",
        "partitions",
        "net/dev",
        "pressure/cpu",
        "pressure/memory",
        "pressure/io",
        "pressure/irq",
        "sys/kernel/osrelease",
    ] {
        if let Ok(text) = std::fs::read(Path::new("/proc").join(f)) {
            std::fs::write(proc.join(f), text).unwrap();
        }
    }
    // Whole disks: the names /sys/block has here.
    for e in std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
    {
        std::fs::create_dir_all(sys.join("block").join(e.file_name())).unwrap();
    }
    let count = |cpu: usize, row: usize| 1_000_003 * (cpu as u64 + 1) + 7 * row as u64;
    let header = |s: &mut String, indent: usize| {
        s.push_str(&" ".repeat(indent));
        for c in 0..n {
            let _ = write!(s, "CPU{c:<7} ");
        }
        s.push('\n');
    };
    let mut stat = String::from("cpu  1 2 3 4 5 6 7 8 0 0\n");
    for c in 0..n {
        let v: Vec<String> = (0..10).map(|f| count(c, f).to_string()).collect();
        let _ = writeln!(stat, "cpu{c} {}", v.join(" "));
    }
    stat.push_str("intr 12345 0 0\nctxt 987654321\nbtime 1700000000\nprocesses 4242\n");
    std::fs::write(proc.join("stat"), stat).unwrap();
    let mut sirq = String::new();
    header(&mut sirq, 20);
    for (r, kind) in [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ]
    .iter()
    .enumerate()
    {
        let _ = write!(sirq, "{kind:>12}:");
        for c in 0..n {
            let _ = write!(sirq, " {:>10}", count(c, r));
        }
        sirq.push('\n');
    }
    std::fs::write(proc.join("softirqs"), sirq).unwrap();
    let mut irq = String::new();
    header(&mut irq, 11);
    let row = |s: &mut String, label: &str, r: usize, tail: &str| {
        let _ = write!(s, "{label:>4}:");
        for c in 0..n {
            let _ = write!(s, " {:>10}", count(c, r));
        }
        let _ = writeln!(s, "  {tail}");
    };
    for i in 0..4 * n {
        let tail = format!(
            "IR-PCI-MSIX-0000:{:02x}:00.0 {i}-edge      nvme0q{i}",
            i / 64
        );
        row(&mut irq, &(24 + i).to_string(), i, &tail);
    }
    for (r, kind) in [
        "NMI", "LOC", "SPU", "PMI", "IWI", "RTR", "RES", "CAL", "TLB", "TRM", "THR", "DFR", "MCE",
        "MCP",
    ]
    .iter()
    .enumerate()
    {
        row(&mut irq, kind, r, "Some interrupts");
    }
    irq.push_str(" ERR:          0\n MIS:          0\n");
    std::fs::write(proc.join("interrupts"), irq).unwrap();
    Paths { proc, sys }
}
