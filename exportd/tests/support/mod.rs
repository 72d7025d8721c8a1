//! Helpers of the daemon's tests: the daemon as a child process.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The daemon under test (see `perfabi_test_harness::bin`).
pub fn bin() -> std::path::PathBuf {
    perfabi_test_harness::bin("perfabi-exportd", env!("CARGO_BIN_EXE_perfabi-exportd"))
}

/// A daemon started by a test; killed (SIGKILL) if the test drops it
/// without [`stop`]ping it, so a failing test leaves no daemon behind.
pub struct Running(Option<Child>);

impl Running {
    /// Its pid.
    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }
    /// The child process.
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
    }
    /// Waits for it to end by itself; its output.
    pub fn wait(mut self) -> Output {
        self.0.take().expect("running").wait_with_output().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts the daemon on `path` (with a 0.1 s interval and `extra`); returns
/// once it has refreshed once (`exportd.refreshes` ≥ 1): the segment exists
/// from the daemon's first steps, its families and counters only once the
/// first refresh registered them.
pub fn start(path: &Path, extra: &[&str]) -> Running {
    spawn_until(path, extra, || refreshed(path))
}

/// Whether the daemon writing `path` has finished a refresh.
pub fn refreshed(path: &Path) -> bool {
    perfabi_reader::Segment::open(path)
        .ok()
        .and_then(|mut seg| seg.counter("exportd.refreshes").ok())
        .is_some_and(|c| c.total >= 1)
}

/// Starts the daemon on `path`; returns once `ready()` holds.
pub fn spawn_until(path: &Path, extra: &[&str], ready: impl FnMut() -> bool) -> Running {
    spawn_under(&[], path, extra, ready)
}

/// Starts the daemon on `path` as the last argument of `wrapper` (`ip
/// netns exec NS`, which execs it: the child is the daemon); returns once
/// `ready()` holds.
pub fn spawn_under(
    wrapper: &[&str],
    path: &Path,
    extra: &[&str],
    mut ready: impl FnMut() -> bool,
) -> Running {
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(bin());
            c
        }
        None => Command::new(bin()),
    };
    let child = cmd
        .arg("--path")
        .arg(path)
        .args(["--interval", "0.1"])
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut r = Running(Some(child));
    // Generous: a busy machine can take seconds to start a process.
    let end = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(
            r.child().try_wait().unwrap().is_none(),
            "the daemon on {} exited",
            path.display()
        );
        assert!(
            Instant::now() < end,
            "daemon did not create {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    r
}

/// SIGTERM, as a service manager stops the daemon, then its output.
pub fn stop(mut r: Running) -> Output {
    let child = r.0.take().expect("running");
    perfabi_test_harness::send(child.id(), perfabi_test_harness::Signal::TERM);
    child.wait_with_output().unwrap()
}

/// The daemon replaying `record` once, 20 times faster than recorded.
pub fn replay_once_fast(path: &Path, record: &Path) -> Running {
    let record = record.to_str().unwrap();
    start(
        path,
        &["--replay", record, "--replay-speed", "20", "--replay-once"],
    )
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().unwrap()
}

/// One member's values in a consistent snapshot: its total and per-CPU
/// values (counters and gauges of `u64`).
pub struct MemberValues {
    /// The sum over CPUs.
    pub total: u64,
    /// The value on each CPU.
    pub per_cpu: Vec<u64>,
    /// The family's kind.
    pub kind: perfabi::Kind,
}

/// The values of `instance` of family `family` (`""` for a family of one
/// instance), read in one snapshot.
pub fn member(
    seg: &mut perfabi_reader::Segment,
    family: &str,
    instance: &str,
) -> Result<MemberValues, String> {
    let snap = seg.snapshot().map_err(|e| e.to_string())?;
    let f = snap
        .family(family)
        .ok_or_else(|| format!("no family {family}"))?;
    let m = f
        .member(instance)
        .ok_or_else(|| format!("no {family} instance {instance:?}"))?;
    let per_cpu: Vec<u64> = (0..snap.nr_cpus).map(|c| snap.words(c, m)[0]).collect();
    Ok(MemberValues {
        total: per_cpu.iter().fold(0u64, |a, &v| a.wrapping_add(v)),
        per_cpu,
        kind: f.kind,
    })
}
