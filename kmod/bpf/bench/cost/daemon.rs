//! The daemon measured: `perfabi-bpfd` as a process of its own, its pin
//! in a bpffs folder of this run's own (removed at the end), its CPU time
//! from `/proc/PID/stat`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

use crate::{failed, Failure};

/// How long the daemon may take to load, attach and pin (the verifier on a
/// busy machine, at nice 19).
const START_LIMIT: Duration = Duration::from_secs(120);

/// How long it may take to stop cleanly after SIGTERM.
const STOP_LIMIT: Duration = Duration::from_secs(20);

/// `perfabi-bpfd` beside this example's folder (`target/<profile>/`).
pub fn beside_examples() -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| failed(format!("cannot find this program's path: {e}")))?;
    let bpfd = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("perfabi-bpfd"))
        .ok_or_else(|| failed("cannot find this program's folder"))?;
    if !bpfd.is_file() {
        return Err(failed(format!(
            "no {} (build it: cargo build --release -p perfabi-bpf --bins), or give --bpfd PATH",
            bpfd.display()
        )));
    }
    Ok(bpfd)
}

/// A folder of this run's own in bpffs, removed with its pins when dropped.
pub struct PinDir(PathBuf);

impl PinDir {
    /// `/sys/fs/bpf/perfabi-cost-<pid>`, bpffs mounted if needed (the
    /// daemon makes the folder).
    pub fn new() -> Result<Self, Failure> {
        let d = PathBuf::from(format!("/sys/fs/bpf/perfabi-cost-{}", std::process::id()));
        perfabi_bpf::system::ensure_bpffs(&d).map_err(failed)?;
        // A folder of an earlier run of the same pid: ours to remove.
        let _ = std::fs::remove_dir_all(&d);
        Ok(Self(d))
    }

    fn pin(&self) -> PathBuf {
        self.0.join("kernel")
    }
}

impl Drop for PinDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `perfabi-bpfd`, killed if dropped before [`Daemon::stop`].
pub struct Daemon {
    child: Option<Child>,
    pid: u32,
}

impl Daemon {
    /// Starts `bpfd` pinning in `dir` (`--unpin-on-exit`; `--raw-tp` if
    /// `raw_tp`) and waits for its "pinned" line.
    pub fn start(bpfd: &Path, dir: &PinDir, raw_tp: bool) -> Result<Self, Failure> {
        let mut cmd = Command::new(bpfd);
        cmd.arg("--pin").arg(dir.pin()).arg("--unpin-on-exit");
        if raw_tp {
            cmd.arg("--raw-tp");
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot start {}: {e}", bpfd.display())))?;
        let pid = child.id();
        let Some(out) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(failed("perfabi-bpfd's output is not piped"));
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut d = Daemon {
            child: Some(child),
            pid,
        };
        let end = Instant::now() + START_LIMIT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) if l.starts_with("perfabi-bpfd: pinned") => {
                    println!("{l}");
                    return Ok(d);
                }
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(failed(format!(
                        "perfabi-bpfd did not pin within {} s",
                        START_LIMIT.as_secs()
                    )))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = d.child.take().and_then(|mut c| c.wait().ok());
                    return Err(failed(format!(
                        "perfabi-bpfd exited before pinning ({}; its message above)",
                        status.map_or("status unknown".into(), |s| s.to_string())
                    )));
                }
            }
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// utime + stime of all its threads, in clock ticks (`/proc/PID/stat`
    /// fields 14 and 15).
    pub fn cpu_ticks(&self) -> Result<u64, Failure> {
        let path = format!("/proc/{}/stat", self.pid);
        let stat = std::fs::read_to_string(&path)
            .map_err(|e| failed(format!("cannot read {path}: {e}")))?;
        // The command name (field 2) may hold spaces: fields after its ')'.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .ok_or_else(|| failed(format!("{path}: no ')'")))?;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // rest starts at field 3 (state): utime is field 14, stime 15.
        let field = |n: usize| -> Result<u64, Failure> {
            f.get(n - 3)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| failed(format!("{path}: no field {n}")))
        };
        Ok(field(14)? + field(15)?)
    }

    /// Time on a CPU of all its threads, in ns (the first field of each
    /// `/proc/PID/task/TID/schedstat`): the same time as utime + stime,
    /// not rounded to clock ticks.
    pub fn cpu_ns(&self) -> Result<u64, Failure> {
        let dir = format!("/proc/{}/task", self.pid);
        let tasks =
            std::fs::read_dir(&dir).map_err(|e| failed(format!("cannot list {dir}: {e}")))?;
        let mut ns = 0;
        for t in tasks.flatten() {
            // A thread gone meanwhile ran no more.
            if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
                ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        Ok(ns)
    }

    /// Stops it with SIGTERM and checks that it stopped cleanly (exit 0).
    pub fn stop(mut self) -> Result<(), Failure> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        signal(self.pid, Signal::TERM);
        let end = Instant::now() + STOP_LIMIT;
        loop {
            match child.try_wait() {
                Ok(Some(s)) if s.success() => return Ok(()),
                Ok(Some(s)) => return Err(failed(format!("perfabi-bpfd stopped with {s}"))),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(failed(format!(
                        "perfabi-bpfd did not stop within {} s of SIGTERM (killed)",
                        STOP_LIMIT.as_secs()
                    )));
                }
                Err(e) => return Err(failed(format!("cannot wait for perfabi-bpfd: {e}"))),
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn signal(pid: u32, sig: Signal) {
    if let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = kill_process(p, sig);
    }
}
