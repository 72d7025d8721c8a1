//! The reader's errors: each says what went wrong and what to do, with
//! every path and name in it escaped for a terminal or a log.

use std::fmt;
use std::io;
use std::path::PathBuf;

use perfabi::text::escape;
use perfabi_shm::safe_open::escape_path;
use std::time::Duration;

/// Everything a read can report.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Nothing exists at the path.
    NotFound(PathBuf),
    /// The segment could not be opened, inspected or mapped.
    Io(PathBuf, io::Error),
    /// The path's last component is a symbolic link; readers do not follow
    /// one (`spec/PERFABI.md` §11.2).
    Symlink(PathBuf),
    /// The way to the path goes through a symbolic link of another user
    /// (links are followed only if root or the reader's user owns them).
    ForeignLink {
        /// The path.
        path: PathBuf,
        /// The link's owner.
        uid: u32,
    },
    /// The file at the path was replaced while it was being opened (retry).
    Raced(PathBuf),
    /// The path names something that cannot be a segment: a directory, a
    /// FIFO, a socket, a block device, or a character device other than the
    /// kernel module's (`kind` says which).
    NotASegmentFile(PathBuf, &'static str),
    /// The segment file may be written by others than its owner.
    Writable(PathBuf, u32),
    /// A pinned segment map whose pin mode lets others open it read-write
    /// while unprivileged BPF is enabled: they could write it from a BPF
    /// program of their own (§11.2 step 7).
    WritablePin(PathBuf, u32),
    /// The segment file belongs to a user this reader does not trust (see
    /// [`crate::Trust`]).
    Untrusted {
        /// The file.
        path: PathBuf,
        /// Its owner.
        uid: u32,
    },
    /// The segment file has a hole at byte `at`, inside the segment: its
    /// writer did not create it (writers fill every byte before they
    /// publish a segment), or it was truncated and grown again.
    Sparse {
        /// The file.
        path: PathBuf,
        /// Offset of the first hole.
        at: u64,
    },
    /// The segment is larger than this reader's limit
    /// ([`crate::Options::max_segment_bytes`]).
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The segment size its header declares.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The segment is malformed, of an unknown ABI, or a read failed its
    /// protocol (see [`perfabi::Error`]).
    Abi(perfabi::Error),
    /// A consistent read did not succeed within its bound: the writer is
    /// updating too fast, or died mid-update (retry later).
    Busy(perfabi::Error),
    /// The writer is gone: its process no longer exists (or is not the
    /// process the header names), or it has not refreshed its heartbeat for
    /// `silent_for`.
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
    /// The segment's header changed under the reader (zeroed, overwritten,
    /// or the segment was created again in the same file); the data of the
    /// read was discarded and the next read maps the segment again.
    HeaderChanged(PathBuf),
    /// No live instance has this name.
    NoSuchCounter(String),
    /// No live metric family has this name.
    NoSuchFamily(String),
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
                | Self::HeaderChanged(_)
                | Self::Raced(_)
                | Self::NotFound(_)
        )
    }

    /// Stable, lower-case, hyphenated code (`spec/PERFABI.md` §11.6); for
    /// [`Error::Abi`] and [`Error::Busy`], the code of the ABI error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not-found",
            Self::Io(..) => "io",
            Self::Symlink(_) => "symlink",
            Self::ForeignLink { .. } => "foreign-link",
            Self::Raced(_) => "raced",
            Self::NotASegmentFile(..) => "not-a-segment-file",
            Self::Writable(..) | Self::WritablePin(..) => "writable-by-others",
            Self::Untrusted { .. } => "untrusted-owner",
            Self::Sparse { .. } => "sparse",
            Self::TooLarge { .. } => "too-large",
            Self::Abi(e) | Self::Busy(e) => e.code(),
            Self::Stale { .. } => "stale",
            Self::Closed => "closed",
            Self::Truncated(_) => "truncated-while-mapped",
            Self::HeaderChanged(_) => "header-changed",
            Self::NoSuchCounter(_) => "no-such-counter",
            Self::NoSuchFamily(_) => "no-such-family",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound(p) => write!(f, "no segment at {}: is the exporter running?", escape_path(p)),
            Self::Io(p, e) if e.kind() == io::ErrorKind::PermissionDenied => {
                write!(f, "cannot read {}: permission denied (run as its owner or a member of its group)", escape_path(p))
            }
            // An empty path: the error says so, with nothing to quote.
            Self::Io(p, e) if p.as_os_str().is_empty() => {
                write!(f, "{}", escape(e.to_string().as_bytes()))
            }
            // The OS's message, escaped too: an error made with text of
            // its own may quote a name.
            Self::Io(p, e) => write!(
                f,
                "cannot use {}: {}",
                escape_path(p),
                escape(e.to_string().as_bytes())
            ),
            Self::Symlink(p) => write!(
                f,
                "refusing {}: it is a symbolic link (give the segment's own path; links are not followed)",
                escape_path(p)
            ),
            Self::ForeignLink { path, uid } => write!(
                f,
                "refusing {}: the way to it goes through a symbolic link of uid {uid} \
                 (links are followed only if root or this user owns them)",
                escape_path(path)
            ),
            Self::Raced(p) => write!(f, "{} was replaced while it was being opened; try again", escape_path(p)),
            Self::NotASegmentFile(p, kind) => write!(
                f,
                "{} is {kind}, not a perfabi segment (a regular file, or the kernel module's /dev/perfabi)",
                escape_path(p)
            ),
            Self::Writable(p, mode) => write!(
                f,
                "refusing {}: mode {mode:o} lets others write it (chmod go-w, or ask its writer to create it 0644)",
                escape_path(p)
            ),
            Self::WritablePin(p, mode) => write!(
                f,
                "refusing {}: mode {mode:o} lets others open the map read-write while unprivileged \
                 BPF is enabled, so they could write it from a BPF program (sysctl \
                 kernel.unprivileged_bpf_disabled=1, or pin it 0600)",
                escape_path(p)
            ),
            Self::Untrusted { path, uid } => write!(
                f,
                "refusing {}: it belongs to uid {uid}, whom this reader does not trust \
                 (it trusts its own uid and root; trust that uid explicitly to read it)",
                escape_path(path)
            ),
            Self::Sparse { path, at } => write!(
                f,
                "refusing {}: it has a hole at byte {at} (writers fill their whole segment; \
                 this one was not made by a writer, or was truncated and grown again)",
                escape_path(path)
            ),
            Self::TooLarge { path, size, limit } => write!(
                f,
                "refusing {}: its segment is {size} bytes, more than the limit of {limit} \
                 (raise the reader's limit to read it)",
                escape_path(path)
            ),
            Self::Abi(e) => write!(f, "bad segment: {e}"),
            Self::Busy(e) => write!(f, "segment busy, try again: {e}"),
            Self::Stale { pid, silent_for, dead: true } => write!(
                f,
                "writer (pid {pid}) is gone; last heartbeat {:.1} s ago: restart the exporter",
                silent_for.as_secs_f64()
            ),
            // writer_pid 0 and alive until silent: the kernel's BPF
            // programs (§11.3), detached.
            Self::Stale { pid: 0, silent_for, dead: false } => write!(
                f,
                "the kernel-side writer is silent: no heartbeat for {:.1} s (its BPF programs \
                 are detached: restart perfabi-bpfd)",
                silent_for.as_secs_f64()
            ),
            Self::Stale { pid, silent_for, dead: false } => write!(
                f,
                "writer (pid {pid}) is silent: no heartbeat for {:.1} s",
                silent_for.as_secs_f64()
            ),
            Self::Closed => f.write_str("the writer closed the segment; values are final"),
            Self::Truncated(p) => write!(f, "{} was truncated while mapped; reading again re-opens it", escape_path(p)),
            Self::HeaderChanged(p) => write!(
                f,
                "the header of {} changed under the reader (zeroed, overwritten or created again); reading again re-opens it",
                escape_path(p)
            ),
            Self::NoSuchCounter(n) => write!(
                f,
                "no counter named \"{}\" (perfabi-cat lists them)",
                escape(n.as_bytes())
            ),
            Self::NoSuchFamily(n) => write!(
                f,
                "no metric family named \"{}\" (perfabi-cat lists them)",
                escape(n.as_bytes())
            ),
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
