//! The reader's errors: each says what went wrong and what to do.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Everything a read can report.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Nothing exists at the path.
    NotFound(PathBuf),
    /// The segment could not be opened, inspected or mapped.
    Io(PathBuf, io::Error),
    /// The segment file may be written by others than its owner.
    Writable(PathBuf, u32),
    /// The segment file is not owned by the expected user.
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        uid: u32,
        /// The owner the caller asked for.
        expected: u32,
    },
    /// The segment is malformed, of an unknown ABI, or a read failed its
    /// protocol (see [`perfabi::Error`]).
    Abi(perfabi::Error),
    /// A consistent read did not succeed within its bound: the writer is
    /// updating too fast, or died mid-update (retry later).
    Busy(perfabi::Error),
    /// The writer is gone: its process no longer exists, or it has not
    /// refreshed its heartbeat for `silent_for`.
    Stale {
        /// Writer process id (0: unknown).
        pid: u64,
        /// Time since the last heartbeat.
        silent_for: Duration,
        /// Whether the writer's process is known to be gone.
        dead: bool,
    },
    /// The writer closed the segment cleanly; its last values are final.
    Closed,
    /// The segment file was truncated under the reader; the data of the read
    /// was discarded.
    Truncated(PathBuf),
    /// No live instance has this name.
    NoSuchCounter(String),
}

impl Error {
    /// True for conditions that a later retry may clear by itself.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Busy(_)
                | Self::Stale { .. }
                | Self::Closed
                | Self::Truncated(_)
                | Self::NotFound(_)
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound(p) => write!(f, "no segment at {}: is the exporter running?", p.display()),
            Self::Io(p, e) if e.kind() == io::ErrorKind::PermissionDenied => {
                write!(f, "cannot read {}: permission denied (run as its owner or a member of its group)", p.display())
            }
            Self::Io(p, e) => write!(f, "cannot use {}: {e}", p.display()),
            Self::Writable(p, mode) => write!(
                f,
                "refusing {}: mode {mode:o} lets others write it (chmod go-w, or ask its writer to create it 0644)",
                p.display()
            ),
            Self::Owner { path, uid, expected } => write!(
                f,
                "refusing {}: owned by uid {uid}, expected uid {expected}",
                path.display()
            ),
            Self::Abi(e) => write!(f, "bad segment: {e}"),
            Self::Busy(e) => write!(f, "segment busy, try again: {e}"),
            Self::Stale { pid, silent_for, dead: true } => write!(
                f,
                "writer (pid {pid}) is gone; last heartbeat {:.1} s ago: restart the exporter",
                silent_for.as_secs_f64()
            ),
            Self::Stale { pid, silent_for, dead: false } => write!(
                f,
                "writer (pid {pid}) is silent: no heartbeat for {:.1} s",
                silent_for.as_secs_f64()
            ),
            Self::Closed => f.write_str("the writer closed the segment; values are final"),
            Self::Truncated(p) => write!(f, "{} was truncated while mapped; reading again re-opens it", p.display()),
            Self::NoSuchCounter(n) => write!(f, "no counter named {n:?} (perfabi-cat lists them)"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(_, e) => Some(e),
            Self::Abi(e) | Self::Busy(e) => Some(e),
            _ => None,
        }
    }
}

impl From<perfabi::Error> for Error {
    fn from(e: perfabi::Error) -> Self {
        if e.is_busy() {
            Self::Busy(e)
        } else {
            Self::Abi(e)
        }
    }
}
