//! The directory's locks (`spec/PERFABI.md` §15.5, §11.1): the one home of
//! how folds and readers exclude each other.
//!
//! * `fold.lock` (mode `0644`): readers of any user open it read-only and
//!   hold an open-file-description **read** lock (`F_OFD_SETLK`) while they
//!   list and read; a fold holds a **write** lock. A write lock needs a
//!   descriptor open for writing, so only the directory's user (who alone
//!   may open it so) can ever hold one: another user can delay a fold, never
//!   block readers.
//! * `fold.owner.lock` (mode `0600`): folds hold it (write lock) for their
//!   whole run, so that at most one fold runs; nobody else may open it.
//!
//! A reader that holds `fold.lock` for longer than a fold's patience (a
//! stopped process, or a hostile one) would stop every fold. So a fold that
//! still finds it held after its patience **replaces** it: it creates a new
//! lock file, write-locks it, and renames it over `fold.lock`. A reader
//! therefore checks, after its read, that the lock it holds is still the
//! directory's; if not, a fold may have run during its read, and it reads
//! again.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::safe_open::{Access, FileId, FileKind, Folder, PathError};

/// Name of the lock readers share and a fold holds alone.
pub const LOCK_NAME: &str = "fold.lock";

/// Name of the lock folds hold among themselves.
pub const OWNER_LOCK_NAME: &str = "fold.owner.lock";

/// The prefix of a replacement lock's temporary name (a crashed fold's is
/// removed by the next one).
pub const TEMP_PREFIX: &str = ".fold.lock.";

/// How a fold or a reader wants a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// A reader's: shared with other readers.
    Read,
    /// A fold's: alone.
    Write,
}

/// Tries once to take an open-file-description lock of the whole of
/// `file`. `Ok(false)`: someone holds a conflicting one.
pub fn try_lock(file: &File, want: Want) -> io::Result<bool> {
    try_lock_range(file, want, 0, 0)
}

/// A `struct flock` of `len` bytes from `start` (`len` 0: to the end of
/// the file, however long).
fn range(l_type: libc::c_int, start: u64, len: u64) -> io::Result<libc::flock> {
    let at = |v: u64| libc::off_t::try_from(v).map_err(io::Error::other);
    Ok(libc::flock {
        l_type: l_type as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: at(start)?,
        l_len: at(len)?,
        l_pid: 0,
    })
}

/// Tries once to take an open-file-description lock of `len` bytes of
/// `file` from `start` (`len` 0: to its end). `Ok(false)`: someone holds a
/// conflicting one. The lock is the open file description's: it lasts
/// until the last descriptor of that description is closed (or the
/// process holding it dies), whatever the process that took it.
pub fn try_lock_range(file: &File, want: Want, start: u64, len: u64) -> io::Result<bool> {
    let l_type = match want {
        Want::Read => libc::F_RDLCK,
        Want::Write => libc::F_WRLCK,
    };
    let lock = range(l_type, start, len)?;
    // SAFETY: `file` is an open descriptor for the duration of the call,
    // and `lock` a valid `struct flock` with `l_pid` 0, as F_OFD_SETLK
    // requires; the kernel only reads it.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// Whether any open file description (another one than `file`'s) holds a
/// **write** lock on some of the `len` bytes of `file` from `start`
/// (`F_OFD_GETLK` asking for a read lock, which only a write lock
/// conflicts with). Read locks, which anyone who may open the file for
/// reading can take, are not seen. Takes and changes no lock.
pub fn write_locked(file: &File, start: u64, len: u64) -> io::Result<bool> {
    let mut lock = range(libc::F_RDLCK, start, len)?;
    // SAFETY: `file` is an open descriptor for the duration of the call,
    // and `lock` a valid, writable `struct flock` with `l_pid` 0, as
    // F_OFD_GETLK requires; the kernel writes the conflicting lock (or
    // `F_UNLCK`) into it and keeps no pointer to it.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lock.l_type == libc::F_WRLCK as libc::c_short)
}

/// Takes `want` on `file`, trying until `patience` has passed (every
/// 500 µs). `Ok(false)`: still held by someone else.
pub fn lock_within(file: &File, want: Want, patience: Duration) -> io::Result<bool> {
    let end = Instant::now() + patience;
    loop {
        if try_lock(file, want)? {
            return Ok(true);
        }
        if Instant::now() >= end {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Whether `file` is still the directory's `name` (not removed or
/// replaced since it was opened).
pub fn is_current(folder: &Folder, name: &str, file: &File) -> io::Result<bool> {
    let held = FileId::of(&file.metadata()?);
    Ok(folder.stat(OsStr::new(name))?.map(|e| e.id) == Some(held))
}

fn refused(e: PathError) -> io::Error {
    io::Error::other(e.to_string())
}

/// A fold's locks, held until dropped.
#[derive(Debug)]
pub struct FoldLocks {
    _owner: File,
    _lock: File,
    /// The fold replaced a `fold.lock` readers held past its patience.
    pub replaced: bool,
}

/// Takes a fold's locks in `folder` (the writer's own directory, already
/// checked): `fold.owner.lock`, then `fold.lock` alone, each within
/// `patience`; a `fold.lock` still held by readers then is replaced (see
/// the module's text). `Ok(None)`: another fold runs.
pub fn for_fold(folder: &Folder, patience: Duration) -> io::Result<Option<FoldLocks>> {
    let (owner, _) = folder
        .open_private(OsStr::new(OWNER_LOCK_NAME), Access::ReadWrite, 0o600)
        .map_err(refused)?;
    if !lock_within(&owner, Want::Write, patience)? || !is_current(folder, OWNER_LOCK_NAME, &owner)?
    {
        return Ok(None);
    }
    let (lock, _) = folder
        .open_private(OsStr::new(LOCK_NAME), Access::ReadWrite, 0o644)
        .map_err(refused)?;
    // Only folds write-lock it, and they hold the owner lock: readers hold
    // it now, if anyone does.
    if lock_within(&lock, Want::Write, patience)? {
        return Ok(Some(FoldLocks {
            _owner: owner,
            _lock: lock,
            replaced: false,
        }));
    }
    let tmp = format!(
        "{TEMP_PREFIX}{}.{:016x}.tmp",
        std::process::id(),
        super::SegmentName::new("lock")?.nonce
    );
    let fresh = folder.create_new(OsStr::new(&tmp), 0o644)?;
    let taken = try_lock(&fresh, Want::Write);
    if !matches!(taken, Ok(true)) {
        let _ = folder.unlink(OsStr::new(&tmp));
        return Err(taken
            .err()
            .unwrap_or_else(|| io::Error::other("a new lock file was locked by someone else")));
    }
    folder
        .rename(OsStr::new(&tmp), OsStr::new(LOCK_NAME))
        .inspect_err(|_| {
            let _ = folder.unlink(OsStr::new(&tmp));
        })?;
    Ok(Some(FoldLocks {
        _owner: owner,
        _lock: fresh,
        replaced: true,
    }))
}

/// A reader's hold of `fold.lock`: `None` when there is none to take (no
/// fold ran yet, or this reader may not open it).
#[derive(Debug)]
pub struct ReadLock(Option<File>);

/// Why a reader could not take the lock.
#[derive(Debug)]
pub enum ReadLockError {
    /// A fold held it for all of the reader's patience.
    Busy,
    /// The lock file could not be locked (an I/O error).
    Io(io::Error),
}

/// Takes `fold.lock` of `folder` to read, within `patience` (a fold holds
/// it for a bounded time, §15.5). A lock file this reader may not open (a
/// directory of another user whose lock is `0600`, as before ABI 1.1's
/// `0644`) is read without: [`ReadLock::still_current`] then says yes.
pub fn for_reader(folder: &Folder, patience: Duration) -> Result<ReadLock, ReadLockError> {
    let end = Instant::now() + patience;
    loop {
        let file = match folder.open_read(OsStr::new(LOCK_NAME), &[FileKind::Regular]) {
            Ok((f, _)) => f,
            Err(_) => return Ok(ReadLock(None)),
        };
        let left = end.saturating_duration_since(Instant::now());
        if !lock_within(&file, Want::Read, left).map_err(ReadLockError::Io)? {
            return Err(ReadLockError::Busy);
        }
        // Replaced while we waited: take the new one.
        match is_current(folder, LOCK_NAME, &file) {
            Ok(true) => return Ok(ReadLock(Some(file))),
            Ok(false) if Instant::now() < end => continue,
            Ok(false) => return Err(ReadLockError::Busy),
            Err(e) => return Err(ReadLockError::Io(e)),
        }
    }
}

impl ReadLock {
    /// After a read: whether the lock held is still the directory's. If a
    /// fold replaced it, the fold may have run during the read: read again.
    pub fn still_current(&self, folder: &Folder) -> io::Result<bool> {
        match &self.0 {
            None => Ok(true),
            Some(f) => is_current(folder, LOCK_NAME, f),
        }
    }

    /// Whether a lock is held (false: there was none this reader could
    /// open).
    pub fn held(&self) -> bool {
        self.0.is_some()
    }
}
