//! Work the kernel counts, for the tests that compare a kernel-side
//! writer's counts with the kernel's own (`/proc/stat`, `/proc/diskstats`)
//! and with other agents': context switches from two threads handing a
//! token back and forth, and a loop device of the test's own.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

use crate::deadline::Deadline;

/// Two threads handing a token back and forth for `d`: context switches
/// and wakeups. Returns the round trips.
pub fn ping_pong(d: Duration) -> u64 {
    ping_pong_until(d, &AtomicBool::new(false))
}

/// [`ping_pong`] until `stop` is set or `d` has passed.
pub fn ping_pong_until(d: Duration, stop: &AtomicBool) -> u64 {
    exchange(d, stop, None)
}

/// [`ping_pong`] with its two threads pinned to two different CPUs the
/// process may run on (as before when it may run on one only). Each side
/// is woken on its own CPU, where nothing of the workload runs, so a
/// woken side never preempts the side that woke it: every wait of the
/// workload's to run follows a wakeup. A run-queue latency (runqlat's,
/// which also times a preempted task's wait) and a wakeup latency then
/// time the same waits of the workload's. The calling thread's affinity
/// is restored before it returns.
pub fn ping_pong_apart(d: Duration) -> u64 {
    let allowed = sched_getaffinity(None).expect("sched_getaffinity");
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|&c| allowed.is_set(c))
        .take(2)
        .collect();
    match cpus[..] {
        [a, b] => {
            pin(a);
            let n = exchange(d, &AtomicBool::new(false), Some(b));
            sched_setaffinity(None, &allowed).expect("sched_setaffinity");
            n
        }
        _ => ping_pong(d),
    }
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    let mut one = CpuSet::new();
    one.set(cpu);
    sched_setaffinity(None, &one).unwrap_or_else(|e| panic!("pinning to CPU {cpu}: {e}"));
}

/// The exchange: the calling thread sends, a new one (pinned to
/// `other_cpu` if given) answers.
fn exchange(d: Duration, stop: &AtomicBool, other_cpu: Option<usize>) -> u64 {
    let (to_b, from_a) = std::sync::mpsc::channel::<u64>();
    let (to_a, from_b) = std::sync::mpsc::channel::<u64>();
    let b = std::thread::spawn(move || {
        if let Some(cpu) = other_cpu {
            pin(cpu);
        }
        while let Ok(v) = from_a.recv() {
            if to_a.send(v + 1).is_err() {
                break;
            }
        }
    });
    let end = Deadline::after(d);
    let mut n = 0;
    while !end.passed() && !stop.load(Ordering::Relaxed) {
        to_b.send(n).unwrap();
        n = from_b.recv().unwrap();
    }
    drop(to_b);
    b.join().unwrap();
    n
}

/// A loop device over a sparse file of the test's own in `/var/tmp`,
/// detached when dropped (needs root and `losetup`).
pub struct Loop {
    /// Its device node (`/dev/loopN`).
    pub dev: PathBuf,
    /// Its backing file.
    pub file: tempfile::NamedTempFile,
}

impl Loop {
    /// A loop device over a new file of `mib` MiB.
    pub fn attach(mib: u64) -> Self {
        let file = tempfile::Builder::new()
            .prefix("perfabi-test-loop")
            .tempfile_in("/var/tmp")
            .unwrap();
        file.as_file().set_len(mib << 20).unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(file.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        Loop { dev, file }
    }

    /// Its name in `/sys/block` and `/proc/diskstats` (`loopN`).
    pub fn name(&self) -> String {
        self.dev.file_name().unwrap().to_string_lossy().into_owned()
    }

    /// Its `/proc/diskstats` fields after the name.
    pub fn diskstats(&self) -> Vec<u64> {
        diskstats(&self.name())
    }

    /// Detaches it (again when dropped: harmless).
    pub fn detach(&self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        self.detach();
    }
}

/// `/proc/diskstats`' fields after the name for disk `name`: 0 reads,
/// 2 sectors read, 4 writes, 6 sectors written, 8 in flight, 11 discards,
/// 13 sectors discarded, 15 flushes.
pub fn diskstats(name: &str) -> Vec<u64> {
    let s = std::fs::read_to_string("/proc/diskstats").unwrap();
    s.lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.nth(2) == Some(name)).then(|| f.map(|v| v.parse().unwrap()).collect())
        })
        .unwrap_or_else(|| panic!("{name} not in /proc/diskstats"))
}
