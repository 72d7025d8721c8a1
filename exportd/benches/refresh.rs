//! What one refresh of each `/proc` source costs, on this machine's own
//! files: each source is refreshed in a loop into a private segment, and
//! the loop's CPU time (this thread's, `CLOCK_THREAD_CPUTIME_ID`: user and
//! system, which other load on the machine changes little) is divided by
//! the refreshes. The last column is what the source costs the daemon at
//! `--interval 1`, in percent of one core.
//!
//! `cargo bench -p perfabi-exportd --bench refresh` (PERFABI_REFRESH_SECS:
//! seconds per source, default 1).

use std::time::{Duration, Instant};

use perfabi_exportd::cpu;
use perfabi_exportd::disks::DiskSource;
use perfabi_exportd::follow::Room;
use perfabi_exportd::host::{HostSource, DEFAULT_VMSTAT};
use perfabi_exportd::interrupts::InterruptSource;
use perfabi_exportd::meminfo::MemSource;
use perfabi_exportd::netdev::NetSource;
use perfabi_exportd::pressure::PressureSource;
use perfabi_exportd::sources::{self, Paths, Sources};
use perfabi_shm::writer::{Config, Writer};
use rustix::time::{clock_gettime, ClockId};

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Runs `f` for about `secs` of wall-clock time; prints and returns its
/// CPU time per call.
fn measure(name: &str, secs: f64, mut f: impl FnMut()) -> Duration {
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
    let paths = Paths::default();
    let vmstat: Vec<String> = DEFAULT_VMSTAT
        .iter()
        .map(|s| s.to_string())
        .filter(|n| {
            std::fs::read_to_string("/proc/vmstat")
                .is_ok_and(|t| t.lines().any(|l| l.split(' ').next() == Some(n)))
        })
        .collect();
    let need = sources::need(&paths, &vmstat).unwrap();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let config = Config {
        max_families: (2 * need.families + 64) as u32,
        max_members: (4 * need.members + 1024) as u32,
        max_instances: (4 * need.members + 1100) as u32,
        auto_heartbeat: false,
        ..Config::default()
    };
    let w = Writer::create(dir.path().join("seg"), &config).unwrap();
    let mut room = Room::new(&w).unwrap();
    println!(
        "refresh cost of each source, {} CPUs, {} families and {} members here",
        w.layout().nr_cpus,
        need.families,
        need.members
    );
    let mut total = Duration::ZERO;
    let mut host = HostSource::new(&w, &paths, &vmstat).unwrap();
    total += measure("host", secs, || host.refresh(&w).unwrap());
    if let Ok(mut s) = DiskSource::new(&w, &paths) {
        total += measure("disks", secs, || s.refresh(&w, &mut room).unwrap());
    }
    if let Ok(mut s) = NetSource::new(&w, &paths) {
        total += measure("network", secs, || s.refresh(&w, &mut room).unwrap());
    }
    if let Ok(mut s) = InterruptSource::new(&w, &paths) {
        total += measure("interrupts", secs, || s.refresh(&w, &mut room).unwrap());
    }
    let mut pressure = PressureSource::new(&w, &paths).unwrap();
    total += measure("pressure", secs, || pressure.refresh(&w).unwrap());
    if let Ok(mut s) = MemSource::new(&w, &paths) {
        total += measure("meminfo", secs, || s.refresh(&w).unwrap());
    }
    let mut clock = cpu::Clock::new();
    measure("cpu-sample", secs, || {
        clock.sample().unwrap();
    });
    println!(
        "REFRESH-COST sum          {:>9.1} us CPU per refresh of every source = {:.4}% of a core at 1 s",
        total.as_secs_f64() * 1e6,
        total.as_secs_f64() * 100.0
    );
    drop(w);
    // Every source together, as the daemon runs them, in a segment of its own.
    let w = Writer::create(dir.path().join("all"), &config).unwrap();
    let mut all = Sources::new(&w, &paths, &vmstat).unwrap();
    measure("all", secs, || all.refresh(&w));
}
