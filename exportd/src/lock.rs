//! One daemon per segment path: an exclusive `flock` on `PATH.lock`, held
//! for the daemon's life, with the holder's pid written inside
//! (`spec/PERFABI.md` §11.1).
//!
//! The lock file lies in the segment's folder, which other users may write
//! (`/dev/shm`), so it is untrusted input: it is never opened through a
//! symbolic link, it must be a regular file of this user with a single
//! link (a planted file, or a link to another file, is refused — never
//! truncated), and it is created mode 0600 so that no other user can open
//! it and hold the lock. Once locked, the path must still name the locked
//! file (else it was removed or replaced meanwhile, and the daemon tries
//! again), and the daemon checks that it still does at every interval. The
//! file is removed when the lock is released.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Permissions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use perfabi_shm::safe_open::escape_path;
use perfabi_shm::safe_open::{Access, FileId, Folder, PathError};
use rustix::fs::{flock, FlockOperation};

/// Why the lock could not be taken.
#[derive(Debug)]
pub enum LockError {
    /// Another daemon holds it.
    Held {
        /// The lock file.
        path: PathBuf,
        /// The holder's pid, if the file says it plainly.
        pid: Option<u32>,
    },
    /// The lock file is refused: a link, another user's file, not a
    /// regular file.
    Refused(PathError),
    /// A system call failed (a full or read-only filesystem, …).
    Io(String),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Held { path, pid } => write!(
                f,
                "another perfabi-exportd ({}) already writes this path (it holds {}): \
                 stop it first, or choose another --path",
                pid.map_or("pid unknown".to_string(), |p| format!("pid {p}")),
                escape_path(path)
            ),
            Self::Refused(e) => write!(f, "lock file: {e}"),
            Self::Io(m) => f.write_str(m),
        }
    }
}

/// The held lock (released, and its file removed, when dropped).
pub struct PathLock {
    _file: File,
    folder: Folder,
    name: OsString,
    path: PathBuf,
    id: FileId,
}

impl PathLock {
    /// Takes the lock of `segment`, or says why not.
    pub fn take(segment: &Path) -> Result<Self, LockError> {
        let mut name = segment.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        let refused = |e: PathError| match e.io() {
            Some(io) => LockError::Io(format!(
                "cannot open lock file {}: {io}",
                escape_path(&path)
            )),
            None => LockError::Refused(e),
        };
        let io = |what: &str, e: std::io::Error| {
            LockError::Io(format!("lock file {}: {what}: {e}", escape_path(&path)))
        };
        let (folder, name) = Folder::of(&path).map_err(refused)?;
        for _ in 0..16 {
            let (mut f, _) = folder
                .open_private(&name, Access::ReadWrite, 0o600)
                .map_err(refused)?;
            // 0600 whatever the umask (an older lock of this user may be 0644).
            f.set_permissions(Permissions::from_mode(0o600))
                .map_err(|e| io("chmod", e))?;
            match flock(&f, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(LockError::Held {
                        pid: holder(&mut f),
                        path,
                    })
                }
                Err(e) => return Err(io("flock", e.into())),
            }
            let id = FileId::of(&f.metadata().map_err(|e| io("fstat", e))?);
            if same_file(&folder, &name, id) {
                f.set_len(0)
                    .and_then(|()| f.rewind())
                    .and_then(|()| writeln!(f, "{}", std::process::id()))
                    .map_err(|e| io("write", e))?;
                return Ok(Self {
                    _file: f,
                    folder,
                    name,
                    path,
                    id,
                });
            }
            // Removed or replaced between open and flock: try again.
        }
        Err(LockError::Io(format!(
            "lock file {} kept being replaced while it was being locked",
            escape_path(&path)
        )))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the lock file is still at its path: if someone removed or
    /// replaced it, another daemon could lock the path anew.
    pub fn still_held(&self) -> bool {
        same_file(&self.folder, &self.name, self.id)
    }
}

impl Drop for PathLock {
    fn drop(&mut self) {
        // Removed while still locked, and only if it is still ours, so that
        // a daemon starting now locks a new file, never this one. (Between
        // the check and the removal only this user or root could swap it.)
        if self.still_held() {
            let _ = self.folder.unlink(&self.name);
        }
    }
}

fn same_file(folder: &Folder, name: &OsStr, id: FileId) -> bool {
    folder
        .stat(name)
        .is_ok_and(|e| e.is_some_and(|e| e.id == id))
}

/// The pid a held lock file names, if it holds a plain number (its content
/// is never printed as it is: it may hold anything, terminal escapes too).
fn holder(f: &mut File) -> Option<u32> {
    let mut buf = [0u8; 24];
    let n = f.read(&mut buf).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}
