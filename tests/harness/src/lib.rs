//! Helpers for the tests that play a hostile local user against perfabi
//! (`spec/PERFABI.md` §11): a private tmpfs mounted for the test (sticky and
//! world-writable, like `/dev/shm`), a throw-away uid that belongs to no
//! account, child processes measured (peak memory, time) and killed if they
//! hang, and skips that are reported as skips, never as passes; the
//! images perfabi-cat draws, read back ([`image`]), a terminal for its
//! views redrawn in place ([`tmux`]), and waiting for a witness of a race
//! by time, never by a count ([`deadline`]).

pub mod deadline;
pub mod forge;
pub mod hammer;
pub mod http;
pub mod image;
pub mod kernel_work;
pub mod probe;
pub mod prometheus;
pub mod python;
pub mod readme;
pub mod tmux;
pub mod trace;
pub mod workload;
pub mod workspace;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The program `name` the tests run: `built` (the path Cargo gave the test
/// at build time), or `name` in `$PERFABI_TEST_BIN_DIR` if that is set — to
/// run the same tests against another build, an older one say, and see
/// them fail where it misbehaves.
pub fn bin(name: &str, built: &str) -> PathBuf {
    match std::env::var_os("PERFABI_TEST_BIN_DIR") {
        Some(dir) => Path::new(&dir).join(name),
        None => PathBuf::from(built),
    }
}

/// A uid no account uses: the "other local user" of the tests. Processes
/// run as it with [`as_other_user`]; files are given to it with `chown`.
pub const OTHER_UID: u32 = 64_123;

/// Reports `test` as skipped for `reason`: the line `PERFABI-SKIP <test>:
/// <reason>`, which `tests/run` lists apart from passes and counts as a
/// failure unless `tests/expected-skips` expects it.
pub fn skip(test: &str, reason: &str) {
    println!("PERFABI-SKIP {test}: {reason}");
}

/// Whether the file `path` (a program the test runs) exists. If it does
/// not, `PERFABI-SKIP <test>: no PATH (<install>)` is printed and the
/// answer is false; under CI (`CI` set), where `tests/setup` installs
/// everything, a missing program is a failure instead.
pub fn need_file(test: &str, path: &Path, install: &str) -> bool {
    if path.exists() {
        return true;
    }
    let reason = format!("no {} ({install})", path.display());
    assert!(std::env::var_os("CI").is_none(), "{test}: {reason}");
    skip(test, &reason);
    false
}

/// Whether this process may do what a two-user test needs (mount a tmpfs,
/// switch uid, chown). If not, prints `PERFABI-SKIP <test>: <reason>` and
/// returns false; under CI (`CI` set), where the suite runs as root, a
/// missing privilege is a failure instead.
pub fn need_root(test: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    let reason = "needs root (mounts a tmpfs, plays a second user)";
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} {reason}, and CI runs as root"
    );
    skip(test, reason);
    false
}

/// A tmpfs mounted on a fresh folder for one test, mode 1777 like
/// `/dev/shm`; unmounted (lazily) and removed on drop.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of at most `size` (mount's syntax: `16m`, `256k`).
    pub fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::Builder::new()
            .prefix("perfabi-tmpfs.")
            .tempdir()
            .unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size},mode=1777"))
            .arg("perfabi-test")
            .arg(dir.path())
            .status()
            .expect("mount(8)");
        assert!(st.success(), "mount -t tmpfs on {}", dir.path().display());
        Tmpfs { dir }
    }

    /// Its mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `path` inside it.
    pub fn join(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Bytes of memory its files use now (`statvfs`).
    pub fn used_bytes(&self) -> u64 {
        let s = rustix::fs::statvfs(self.dir.path()).unwrap();
        (s.f_blocks - s.f_bfree) * s.f_frsize
    }

    /// Remounts it read-only (`ro`) or read-write.
    pub fn remount(&self, opts: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "remount {opts}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Makes `cmd` run as [`OTHER_UID`] (its group too, no supplementary
/// groups).
pub fn as_other_user(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    cmd.uid(OTHER_UID).gid(OTHER_UID)
}

/// Gives `path` to [`OTHER_UID`].
pub fn give_to_other_user(path: &Path) {
    std::os::unix::fs::chown(path, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
}

/// A copy of the executable `exe` in `dir` (mode 0755), so that another
/// user can run it wherever the build folder is.
pub fn executable_copy(exe: &Path, dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let to = dir.join(exe.file_name().unwrap());
    std::fs::copy(exe, &to).unwrap();
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    to
}

/// A child process that is killed and reaped when dropped, so that a test
/// that fails half-way leaves nothing running.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How a child process ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status; `None` if it was killed for running too long.
    pub status: Option<ExitStatus>,
    /// Its peak resident memory, KiB, when measured ([`run_measured`]).
    pub max_rss_kib: u64,
    /// Wall time until it ended.
    pub elapsed: Duration,
    /// What it wrote to stdout.
    pub stdout: String,
    /// What it wrote to stderr.
    pub stderr: String,
}

impl Finished {
    /// Its exit code (`None`: killed by a signal, or for hanging).
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
}

/// Runs `cmd` to its end, or kills it after `limit` (a hang) with every
/// process it started (it runs in a process group of its own).
pub fn run_limited(cmd: &mut Command, limit: Duration) -> Finished {
    use std::os::unix::process::CommandExt;
    let start = Instant::now();
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let status = wait_limited(&mut child, limit);
    Finished {
        status,
        max_rss_kib: 0,
        elapsed: start.elapsed(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// GNU time, which measures what it runs (apt-get install time).
const TIME: &str = "/usr/bin/time";

/// [`run_limited`] for `program args`, with its peak memory measured by GNU
/// time. (`wait4` of a child of the test would not do: a child's peak
/// counts the memory of the process it was forked from, the test itself.)
pub fn run_measured(program: &Path, args: &[String], limit: Duration) -> Finished {
    measure(Command::new(program).args(args), limit)
}

fn measure(cmd: &Command, limit: Duration) -> Finished {
    assert!(
        Path::new(TIME).exists(),
        "{TIME} is missing: run tests/setup (Debian: apt-get install time)"
    );
    let report = tempfile::NamedTempFile::new().unwrap();
    let mut f = run_limited(
        Command::new(TIME)
            .args(["-f", "%M", "-o"])
            .arg(report.path())
            .arg(cmd.get_program())
            .args(cmd.get_args()),
        limit,
    );
    let text = std::fs::read_to_string(report.path()).unwrap_or_default();
    f.max_rss_kib = text
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .unwrap_or(0);
    f
}

fn wait_limited(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if Instant::now() > end {
            // The whole group: a grandchild blocked in open() holds the pipes.
            let _ = rustix::process::kill_process_group(
                rustix::process::Pid::from_child(child),
                rustix::process::Signal::KILL,
            );
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A thread calling `f(n)` for n = 0, 1, 2, … at a steady rate, paced by
/// the clock (every call that is due is made, checked every 5 ms), not by
/// sleeps: by t seconds, `rate × t` calls. A writer fed this way has a
/// known rate that a reader's rates can be held to. Stopped on drop.
pub struct Paced {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Paced {
    /// Starts calling `f` `rate` times a second.
    pub fn start(rate: u64, mut f: impl FnMut(u64) + Send + 'static) -> Paced {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut done = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let due = start.elapsed().as_millis() as u64 * rate / 1000;
                    while done < due {
                        f(done);
                        done += 1;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                done
            })
        };
        Paced {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the calls; returns how many were made. A panic in `f` fails
    /// the test here.
    pub fn stop(mut self) -> u64 {
        self.finish().unwrap()
    }

    fn finish(&mut self) -> Option<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let t = self.thread.take()?;
        Some(t.join().expect("the paced calls panicked"))
    }
}

impl Drop for Paced {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.finish();
        } else {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

pub use rustix::process::Signal;

/// Sends `signal` to process `pid` (a child or a server the test started);
/// a process already gone is not an error.
pub fn send(pid: u32, signal: Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, signal);
    }
}
