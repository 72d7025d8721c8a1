//! Opening paths that other local users may have planted.
//!
//! Segments, their lock files and recordings live in world-writable folders
//! such as `/dev/shm`, next to files of other users. Every path is therefore
//! untrusted (`spec/PERFABI.md` §11):
//!
//! * the last component is never followed if it is a symbolic link
//!   (`O_NOFOLLOW`), so a planted link cannot redirect a write (or a read) to
//!   a file of the victim's choosing;
//! * nothing blocks in `open` (`O_NONBLOCK`, `O_NOCTTY`): a FIFO or a
//!   terminal is refused after `fstat`, not waited on;
//! * the type is checked on the open descriptor, before any use, and the
//!   path is looked at with `lstat` first so that special files (a tape
//!   that rewinds on open, a FIFO) are refused without being opened;
//! * a file that is written (a lock, a recording) must belong to the
//!   caller and have no other hard link, so a planted file or a link to
//!   another user's file is never truncated or appended to.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::prelude::rust_2021::*;

/// What kind of file a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO (named pipe).
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
}

impl FileKind {
    /// The kind of the file `md` describes.
    pub fn of(md: &Metadata) -> Self {
        let t = md.file_type();
        if t.is_symlink() {
            Self::Symlink
        } else if t.is_dir() {
            Self::Directory
        } else if t.is_fifo() {
            Self::Fifo
        } else if t.is_socket() {
            Self::Socket
        } else if t.is_char_device() {
            Self::CharDevice
        } else if t.is_block_device() {
            Self::BlockDevice
        } else {
            Self::Regular
        }
    }

    /// "a FIFO", "a directory", … for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Regular => "a regular file",
            Self::Directory => "a directory",
            Self::Symlink => "a symbolic link",
            Self::Fifo => "a FIFO",
            Self::Socket => "a socket",
            Self::CharDevice => "a character device",
            Self::BlockDevice => "a block device",
        }
    }
}

/// Why a path was refused.
#[derive(Debug)]
pub enum Problem {
    /// The last component is a symbolic link.
    Symlink,
    /// The file is of a kind this use does not accept.
    Kind(FileKind),
    /// A file to be written belongs to another user.
    Owner {
        /// Its owner.
        uid: u32,
        /// The caller's effective uid.
        expected: u32,
    },
    /// A file to be written has other hard links (it may be another
    /// user's file linked here).
    Links(u64),
    /// The folder lets others replace its entries (writable by group or
    /// others, without the sticky bit), or belongs to another user.
    Folder {
        /// The folder's mode bits.
        mode: u32,
        /// Its owner.
        uid: u32,
    },
    /// The file is larger than the caller accepts.
    TooLarge {
        /// Its length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// The path changed between the check and the open (raced).
    Changed,
    /// The system call failed.
    Io(io::Error),
}

/// A refused or failed path, with the reason.
#[derive(Debug)]
pub struct PathError {
    /// The path.
    pub path: PathBuf,
    /// Why.
    pub problem: Problem,
}

impl PathError {
    fn new(path: &Path, problem: Problem) -> Self {
        Self {
            path: path.to_path_buf(),
            problem,
        }
    }

    /// The I/O error behind it, if it is one.
    pub fn io(&self) -> Option<&io::Error> {
        match &self.problem {
            Problem::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.path.display();
        match &self.problem {
            Problem::Symlink => write!(
                f,
                "refusing {p}: it is a symbolic link (give the real path; links are not followed)"
            ),
            Problem::Kind(k) => write!(f, "refusing {p}: it is {}", k.describe()),
            Problem::Owner { uid, expected } => write!(
                f,
                "refusing {p}: it belongs to uid {uid}, not to this user (uid {expected}); \
                 remove it if it is stale, or choose another path"
            ),
            Problem::Links(n) => write!(
                f,
                "refusing {p}: it has {n} hard links (it may be another file linked here)"
            ),
            Problem::Folder { mode, uid } => write!(
                f,
                "refusing folder {p}: mode {mode:o}, owner uid {uid}: others could replace \
                 files in it (use a folder owned by root or this user, not writable by others \
                 unless sticky like /dev/shm)"
            ),
            Problem::TooLarge { len, limit } => {
                write!(
                    f,
                    "refusing {p}: {len} bytes, more than the limit of {limit}"
                )
            }
            Problem::Changed => write!(f, "refusing {p}: it was replaced while being opened"),
            Problem::Io(e) => write!(f, "cannot use {p}: {e}"),
        }
    }
}

impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io().map(|e| e as _)
    }
}

/// The caller's effective uid.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn flags() -> i32 {
    libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC
}

/// Opens `path` for reading without following a final symbolic link and
/// without blocking, if its kind is one of `accept` (checked with `lstat`
/// before opening, and again on the descriptor). Returns the file and its
/// metadata.
pub fn open_read(path: &Path, accept: &[FileKind]) -> Result<(File, Metadata), PathError> {
    let err = |p| PathError::new(path, p);
    let before = std::fs::symlink_metadata(path).map_err(|e| err(Problem::Io(e)))?;
    let kind = FileKind::of(&before);
    if kind == FileKind::Symlink {
        return Err(err(Problem::Symlink));
    }
    if !accept.contains(&kind) {
        return Err(err(Problem::Kind(kind)));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags())
        .open(path)
        .map_err(|e| err(open_problem(e)))?;
    let md = file.metadata().map_err(|e| err(Problem::Io(e)))?;
    if (md.dev(), md.ino()) != (before.dev(), before.ino()) {
        return Err(err(Problem::Changed));
    }
    Ok((file, md))
}

/// [`open_read`] for a regular file of at most `limit` bytes (an input such
/// as a recording): a FIFO, a device or an oversized file is refused.
pub fn open_input(path: &Path, limit: u64) -> Result<File, PathError> {
    let (file, md) = open_read(path, &[FileKind::Regular])?;
    if md.len() > limit {
        return Err(PathError::new(
            path,
            Problem::TooLarge {
                len: md.len(),
                limit,
            },
        ));
    }
    Ok(file)
}

/// How [`open_private`] opens a file it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read and write (a lock file).
    ReadWrite,
    /// Append only (a recording).
    Append,
}

/// Opens or creates (with `mode`, less the umask) a regular file to write,
/// without following a final symbolic link and without blocking. The file
/// must then belong to the caller and have exactly one link: a file planted
/// by someone else is refused, never truncated or appended to. Nothing is
/// truncated here. Returns the file and whether this call created it.
pub fn open_private(path: &Path, access: Access, mode: u32) -> Result<(File, bool), PathError> {
    let err = |p| PathError::new(path, p);
    let mut o = OpenOptions::new();
    match access {
        Access::ReadWrite => o.read(true).write(true),
        Access::Append => o.append(true),
    };
    o.custom_flags(flags()).mode(mode);
    // Create exclusively first, to know whether the file is ours from birth.
    let (file, created) = match o.clone().create_new(true).open(path) {
        Ok(f) => (f, true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let before = std::fs::symlink_metadata(path).map_err(|e| err(Problem::Io(e)))?;
            match FileKind::of(&before) {
                FileKind::Regular => {}
                FileKind::Symlink => return Err(err(Problem::Symlink)),
                k => return Err(err(Problem::Kind(k))),
            }
            (o.open(path).map_err(|e| err(open_problem(e)))?, false)
        }
        Err(e) => return Err(err(open_problem(e))),
    };
    let md = file.metadata().map_err(|e| err(Problem::Io(e)))?;
    match FileKind::of(&md) {
        FileKind::Regular => {}
        k => return Err(err(Problem::Kind(k))),
    }
    if md.uid() != euid() {
        return Err(err(Problem::Owner {
            uid: md.uid(),
            expected: euid(),
        }));
    }
    if md.nlink() != 1 {
        return Err(err(Problem::Links(md.nlink())));
    }
    Ok((file, created))
}

/// Checks that files in `dir` cannot be replaced by other users: it must be
/// a directory owned by root or the caller, and if group or others may
/// write it, it must be sticky (as `/dev/shm` and `/tmp` are).
pub fn check_folder(dir: &Path) -> Result<(), PathError> {
    let err = |p| PathError::new(dir, p);
    let md = std::fs::metadata(dir).map_err(|e| err(Problem::Io(e)))?;
    if !md.is_dir() {
        return Err(err(Problem::Kind(FileKind::of(&md))));
    }
    let mode = md.permissions().mode() & 0o7777;
    let open = mode & 0o022 != 0 && mode & 0o1000 == 0;
    if open || (md.uid() != 0 && md.uid() != euid()) {
        return Err(err(Problem::Folder {
            mode,
            uid: md.uid(),
        }));
    }
    Ok(())
}

/// The folder of `path` (`.` for a bare file name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

fn open_problem(e: io::Error) -> Problem {
    // O_NOFOLLOW on a symbolic link fails with ELOOP.
    if e.raw_os_error() == Some(libc::ELOOP) {
        Problem::Symlink
    } else {
        Problem::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_special_files_are_refused() {
        let d = std::env::temp_dir().join(format!("perfabi-safe-open-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let target = d.join("target");
        std::fs::write(&target, b"keep").unwrap();
        let link = d.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(
            open_private(&link, Access::ReadWrite, 0o600)
                .unwrap_err()
                .problem,
            Problem::Symlink
        ));
        assert!(matches!(
            open_read(&link, &[FileKind::Regular]).unwrap_err().problem,
            Problem::Symlink
        ));
        let hard = d.join("hard");
        let _ = std::fs::remove_file(&hard);
        std::fs::hard_link(&target, &hard).unwrap();
        assert!(matches!(
            open_private(&hard, Access::Append, 0o600)
                .unwrap_err()
                .problem,
            Problem::Links(2)
        ));
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(matches!(
            open_input(Path::new("/dev/zero"), 1 << 20)
                .unwrap_err()
                .problem,
            Problem::Kind(FileKind::CharDevice)
        ));
        assert!(matches!(
            open_input(&target, 2).unwrap_err().problem,
            Problem::TooLarge { len: 4, limit: 2 }
        ));
        let (_, created) = open_private(&d.join("new"), Access::Append, 0o600).unwrap();
        assert!(created);
        let (_, created) = open_private(&d.join("new"), Access::Append, 0o600).unwrap();
        assert!(!created);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
