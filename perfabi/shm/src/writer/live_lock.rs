//! The writer's liveness lock (`spec/PERFABI.md` §10): a process writer
//! holds an open-file-description write lock on bytes
//! [`LOCK_START`]`..+`[`LOCK_LEN`] of its segment file for its whole life,
//! and says so with `FLAG_LIVE_LOCK`. The kernel releases it when the
//! writer dies, in whatever pid or time namespace it ran, so a fold or a
//! reader anywhere tells a live writer from a dead one by the lock alone,
//! not by `writer_pid` and `writer_start_ns` (which are its namespace's).
//!
//! Only a description open for writing can hold a write lock: the file's
//! owner (or root) alone can take one. Anyone may read-lock the bytes once
//! the writer is gone, but the test asks for write locks only, so no other
//! user can make a dead writer look alive.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use perfabi::layout::FLAG_LIVE_LOCK;

use crate::directory::lock::{self, Want};
use crate::safe_open::{Access, FileId, Folder};

/// First byte of the segment file the liveness lock covers.
pub const LOCK_START: u64 = 0;

/// Bytes the liveness lock covers (the header's `magic`).
pub const LOCK_LEN: u64 = 8;

/// Whether the writer of the segment open as `file` is alive by its
/// liveness lock: `Some(true)` if a write lock is held on its bytes, or if
/// the lock cannot be asked about (`fcntl` fails: the writer is unknown,
/// never gone for sure); `Some(false)` if none is held (the writer is gone
/// for sure); `None` if the header (its `flags`) promises no lock: judge by
/// `writer_pid` and `writer_start_ns` then. Takes no lock.
pub fn alive(file: &File, flags: u64) -> Option<bool> {
    if flags & FLAG_LIVE_LOCK == 0 {
        return None;
    }
    Some(lock::write_locked(file, LOCK_START, LOCK_LEN).unwrap_or(true))
}

/// A writer's hold of its liveness lock: a descriptor of its segment file
/// of its own (an open file description apart from the mapping's, so that
/// a child of `fork()` can let go of its share without touching the
/// parent's), or none.
pub(crate) struct LiveLock {
    /// The descriptor holding the lock, or -1: owned by this value.
    fd: AtomicI32,
    /// The identity of the file it locks (set with `fd`).
    id: Mutex<Option<FileId>>,
}

impl LiveLock {
    /// No lock.
    pub(crate) const fn none() -> Self {
        Self {
            fd: AtomicI32::new(-1),
            id: Mutex::new(None),
        }
    }

    /// Takes the lock on the file `name` of `folder`, which must be `file`
    /// (the segment just created there, not yet published), through a new
    /// open file description. No lock if it cannot be taken (a filesystem
    /// without record locks, or someone who read-locked the new file
    /// first): the writer then promises none, and is judged by its pid.
    pub(crate) fn take(folder: &Folder, name: &OsStr, file: &File) -> Self {
        let taken = || -> io::Result<Option<File>> {
            let (own, created) = folder
                .open_private(name, Access::ReadWrite, 0o644)
                .map_err(|e| io::Error::other(e.to_string()))?;
            if created {
                // The new file was removed meanwhile: not ours to lock.
                let _ = folder.unlink(name);
                return Ok(None);
            }
            if FileId::of(&own.metadata()?) != FileId::of(&file.metadata()?) {
                return Ok(None);
            }
            Ok(lock::try_lock_range(&own, Want::Write, LOCK_START, LOCK_LEN)?.then_some(own))
        };
        match taken() {
            Ok(Some(own)) => Self {
                id: Mutex::new(own.metadata().ok().map(|md| FileId::of(&md))),
                fd: AtomicI32::new(OwnedFd::from(own).into_raw_fd()),
            },
            _ => Self::none(),
        }
    }

    /// Whether a lock is held (the header may say `FLAG_LIVE_LOCK`).
    pub(crate) fn held(&self) -> bool {
        self.fd.load(Ordering::Relaxed) >= 0
    }

    /// The identity of the file whose lock is held (`None`: no lock).
    pub(crate) fn id(&self) -> Option<FileId> {
        if !self.held() {
            return None;
        }
        *self.id.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds `new`'s lock instead of this one's (released).
    pub(crate) fn replace(&self, new: Self) {
        *self.id.lock().unwrap_or_else(|p| p.into_inner()) = new.id();
        let fd = new.fd.swap(-1, Ordering::Relaxed);
        close(self.fd.swap(fd, Ordering::Relaxed));
    }

    /// Closes this process's descriptor: the lock goes when no other
    /// descriptor of its open file description is left (a parent of
    /// `fork()` still holds it).
    pub(crate) fn release(&self) {
        close(self.fd.swap(-1, Ordering::Relaxed));
    }
}

impl Drop for LiveLock {
    fn drop(&mut self) {
        self.release();
    }
}

/// Closes `fd` if it is one (-1: none).
fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: `fd` came from `into_raw_fd` of a descriptor `LiveLock`
        // owns, and was swapped out of its atomic: no other value holds it,
        // so it is closed once, here.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
}
