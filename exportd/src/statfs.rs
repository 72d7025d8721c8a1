//! `statvfs` with a timeout, for the filesystem collector: a mount whose
//! server is gone (NFS, a FUSE daemon stopped) can make the call hang
//! for ever, and the refresh loop must not hang with it.
//!
//! Calls run on a worker thread; the caller waits for each at most the
//! timeout. A call that takes longer marks its mount point *stuck*: the
//! worker is left to it (it ends when the call returns, then reports the
//! mount point free again) and a new worker takes the next calls. A stuck
//! mount point is not asked again until its call returned, so one hung
//! mount costs one timeout once, not at every refresh. At most
//! [`MAX_STUCK`] workers are left hanging; beyond that no call is made
//! until one returns. (node_exporter's filesystem collector does the same
//! with its `stuckMounts` map.)

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most mount points stuck at once (each holds a thread).
pub const MAX_STUCK: usize = 8;

/// What `statvfs` says of a filesystem, in bytes and inodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Total size.
    pub size: u64,
    /// Free, root's reserve included.
    pub free: u64,
    /// Free for unprivileged users.
    pub avail: u64,
    /// Inodes.
    pub files: u64,
    /// Free inodes.
    pub files_free: u64,
}

/// The function that asks: [`statvfs`], or another in tests.
pub type StatFn = Arc<dyn Fn(&Path) -> std::io::Result<Usage> + Send + Sync>;

/// `statvfs(2)` of `path`, as `df` computes sizes (fragment size ×
/// blocks).
pub fn statvfs(path: &Path) -> std::io::Result<Usage> {
    let s = rustix::fs::statvfs(path)?;
    let bytes = |n: u64| n.saturating_mul(s.f_frsize);
    Ok(Usage {
        size: bytes(s.f_blocks),
        free: bytes(s.f_bfree),
        avail: bytes(s.f_bavail),
        files: s.f_files,
        files_free: s.f_ffree,
    })
}

/// What one call came to.
#[derive(Debug)]
pub enum Outcome {
    /// It answered.
    Usage(Usage),
    /// It failed (permission, a mount gone).
    Failed(std::io::Error),
    /// It did not answer within the timeout, now or in an earlier
    /// refresh, or too many calls hang.
    Stuck,
}

/// A call's answer, from a worker.
struct Done {
    seq: u64,
    path: PathBuf,
    result: std::io::Result<Usage>,
}

/// Calls with a timeout (see the module's doc).
pub struct Statter {
    f: StatFn,
    timeout: Duration,
    /// The current worker's job queue.
    worker: Option<Sender<(u64, PathBuf)>>,
    done_tx: Sender<Done>,
    done: Receiver<Done>,
    stuck: HashSet<PathBuf>,
    seq: u64,
}

impl Statter {
    /// Calls `f`, each waited for at most `timeout`.
    pub fn new(f: StatFn, timeout: Duration) -> Self {
        let (done_tx, done) = mpsc::channel();
        Self {
            f,
            timeout,
            worker: None,
            done_tx,
            done,
            stuck: HashSet::new(),
            seq: 0,
        }
    }

    /// The mount points stuck now.
    pub fn stuck(&self) -> usize {
        self.stuck.len()
    }

    /// A late answer: its mount point is free again.
    fn late(&mut self, d: Done) {
        self.stuck.remove(&d.path);
    }

    fn spawn(&mut self) -> std::io::Result<Sender<(u64, PathBuf)>> {
        let (tx, jobs) = mpsc::channel::<(u64, PathBuf)>();
        let (f, done) = (self.f.clone(), self.done_tx.clone());
        std::thread::Builder::new()
            .name("exportd-statfs".into())
            .spawn(move || {
                // Ends when its queue is dropped (the daemon stops, or
                // left it to a hung call) or nobody listens.
                for (seq, path) in jobs {
                    let result = f(&path);
                    if done.send(Done { seq, path, result }).is_err() {
                        break;
                    }
                }
            })?;
        Ok(tx)
    }

    /// Asks about `path`, waiting at most the timeout.
    pub fn stat(&mut self, path: &Path) -> Outcome {
        while let Ok(d) = self.done.try_recv() {
            self.late(d);
        }
        if self.stuck.contains(path) || self.stuck.len() >= MAX_STUCK {
            return Outcome::Stuck;
        }
        self.seq += 1;
        let seq = self.seq;
        let sent = match self.worker.take() {
            Some(w) => w.send((seq, path.to_path_buf())).ok().map(|()| w),
            None => None,
        };
        let worker = match sent {
            Some(w) => w,
            None => match self.spawn() {
                Ok(w) if w.send((seq, path.to_path_buf())).is_ok() => w,
                Ok(_) => return Outcome::Failed(std::io::Error::other("statfs worker ended")),
                Err(e) => return Outcome::Failed(e),
            },
        };
        let until = Instant::now() + self.timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(left) {
                Ok(d) if d.seq == seq => {
                    self.worker = Some(worker);
                    return match d.result {
                        Ok(u) => Outcome::Usage(u),
                        Err(e) => Outcome::Failed(e),
                    };
                }
                Ok(d) => self.late(d),
                // The worker is left to its call (its queue dropped here);
                // the next call gets a new one.
                Err(RecvTimeoutError::Timeout) => {
                    self.stuck.insert(path.to_path_buf());
                    return Outcome::Stuck;
                }
                // Never: this holds a sender too.
                Err(RecvTimeoutError::Disconnected) => {
                    return Outcome::Failed(std::io::Error::other("statfs worker ended"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A statfs that hangs on `/hang` until released, answers the rest.
    fn hanging(release: Arc<AtomicBool>) -> StatFn {
        Arc::new(move |p: &Path| {
            if p == Path::new("/hang") {
                while !release.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            if p == Path::new("/fail") {
                return Err(std::io::Error::from_raw_os_error(libc::EACCES));
            }
            Ok(Usage {
                size: p.as_os_str().len() as u64,
                ..Usage::default()
            })
        })
    }

    #[test]
    fn a_hung_call_costs_one_timeout_once_and_the_rest_still_answer() {
        let release = Arc::new(AtomicBool::new(false));
        let timeout = Duration::from_millis(200);
        let mut s = Statter::new(hanging(release.clone()), timeout);
        assert!(matches!(s.stat(Path::new("/ab")), Outcome::Usage(u) if u.size == 3));
        let t = Instant::now();
        assert!(matches!(s.stat(Path::new("/hang")), Outcome::Stuck));
        assert!(t.elapsed() >= timeout);
        // Asked again: stuck at once, no wait; the others answer.
        let t = Instant::now();
        assert!(matches!(s.stat(Path::new("/hang")), Outcome::Stuck));
        assert!(t.elapsed() < timeout, "{:?}", t.elapsed());
        assert!(matches!(s.stat(Path::new("/abcd")), Outcome::Usage(u) if u.size == 5));
        assert!(matches!(s.stat(Path::new("/fail")), Outcome::Failed(_)));
        assert_eq!(s.stuck(), 1);
        // The call returns: the mount point is asked again, and answers.
        release.store(true, Ordering::Relaxed);
        let until = perfabi_test_harness::deadline::Deadline::witness();
        loop {
            if let Outcome::Usage(u) = s.stat(Path::new("/hang")) {
                assert_eq!(u.size, 5);
                break;
            }
            if until.passed() {
                until.fail("the released call's answer");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(s.stuck(), 0);
    }

    #[test]
    fn at_most_max_stuck_calls_hang() {
        let release = Arc::new(AtomicBool::new(false));
        let stuck_fn: StatFn = {
            let release = release.clone();
            Arc::new(move |_p: &Path| {
                while !release.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(Usage::default())
            })
        };
        let mut s = Statter::new(stuck_fn, Duration::from_millis(20));
        for i in 0..MAX_STUCK + 4 {
            assert!(matches!(
                s.stat(Path::new(&format!("/m{i}"))),
                Outcome::Stuck
            ));
        }
        assert_eq!(s.stuck(), MAX_STUCK);
        release.store(true, Ordering::Relaxed);
    }
}
