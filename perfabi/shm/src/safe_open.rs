//! Opening paths that other local users may have planted.
//!
//! Segments, their lock files and recordings live in world-writable folders
//! such as `/dev/shm`, next to files of other users. Every path is therefore
//! untrusted (`spec/PERFABI.md` §11):
//!
//! * a path is resolved one component at a time from a descriptor
//!   ([`Folder`]); a symbolic link on the way is followed only if root or
//!   the caller owns it, so a link another user planted (`/dev/shm/app ->
//!   /root`) cannot lead a root process into a folder of the attacker's
//!   choosing, and the last component is never followed (`O_NOFOLLOW`);
//! * every later operation is relative to the folder's descriptor
//!   (`openat`, `renameat`, `unlinkat`), so the folder cannot be swapped
//!   between a check and a use;
//! * nothing blocks in `open` (`O_NONBLOCK`, `O_NOCTTY`): a FIFO or a
//!   terminal is refused after `fstat`, not waited on, and special files
//!   are refused from `fstatat` before they are opened at all;
//! * a file that is written (a lock, a recording) must belong to the
//!   caller and have no other hard link, so a planted file or a link to
//!   another user's file is never truncated or appended to.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat, CWD};

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
        Self::of_mode(md.mode())
    }

    /// The kind of a file of mode `st_mode`.
    pub fn of_mode(mode: u32) -> Self {
        match FileType::from_raw_mode(mode as _) {
            FileType::Symlink => Self::Symlink,
            FileType::Directory => Self::Directory,
            FileType::Fifo => Self::Fifo,
            FileType::Socket => Self::Socket,
            FileType::CharacterDevice => Self::CharDevice,
            FileType::BlockDevice => Self::BlockDevice,
            _ => Self::Regular,
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

/// The identity of a file: (device, inode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
}

impl FileId {
    /// The identity of the file `md` describes.
    pub fn of(md: &Metadata) -> Self {
        Self {
            dev: md.dev(),
            ino: md.ino(),
        }
    }

    fn of_stat(st: &Stat) -> Self {
        Self {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }
}

/// Why a path was refused.
#[derive(Debug)]
pub enum Problem {
    /// The last component is a symbolic link.
    Symlink,
    /// A folder on the way is reached through a symbolic link of another
    /// user (its owner).
    ForeignLink(u32),
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
    /// The caller's own check refused the file (it says why).
    Refused,
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
    pub(crate) fn new(path: &Path, problem: Problem) -> Self {
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

    /// Whether nothing exists at the path.
    pub fn not_found(&self) -> bool {
        self.io()
            .is_some_and(|e| e.kind() == io::ErrorKind::NotFound)
    }
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = escape_path(&self.path);
        match &self.problem {
            Problem::Symlink => write!(
                f,
                "refusing {p}: it is a symbolic link (give the real path; links are not followed)"
            ),
            Problem::ForeignLink(uid) => write!(
                f,
                "refusing {p}: the way to it goes through a symbolic link of uid {uid} \
                 (links are followed only if root or this user owns them)"
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
            Problem::Refused => write!(f, "refusing {p}"),
            // An empty path: the error says so, with nothing to quote.
            Problem::Io(e) if self.path.as_os_str().is_empty() => write!(f, "{e}"),
            Problem::Io(e) => write!(f, "cannot use {p}: {e}"),
        }
    }
}

impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io().map(|e| e as _)
    }
}

/// A path for a message or a log line: escaped as every untrusted text is
/// ([`perfabi::text::escape`], `spec/PERFABI.md` §11.7), since a folder
/// others write may hold a name with terminal controls in it.
pub fn escape_path(path: &Path) -> perfabi::text::Escaped<'_> {
    perfabi::text::escape(path.as_os_str().as_bytes())
}

/// The caller's effective uid.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Flags of every open here: no link followed, no blocking, no terminal.
fn safe() -> OFlags {
    OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

/// Most symbolic links followed while resolving one path.
const MAX_LINKS: u32 = 40;

/// An open folder: everything below happens relative to its descriptor.
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    path: PathBuf,
}

impl Folder {
    /// Opens the folder `dir`, one component at a time; a symbolic link on
    /// the way is followed only if root or the caller owns it.
    pub fn open(dir: &Path) -> Result<Folder, PathError> {
        let err = |p| PathError::new(dir, p);
        let io = |e: rustix::io::Errno| err(Problem::Io(e.into()));
        let start = if dir.is_absolute() { "/" } else { "." };
        let dirflags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let mut fd = rustix::fs::openat(CWD, start, dirflags, Mode::empty()).map_err(io)?;
        let mut todo: std::collections::VecDeque<OsString> = components(dir);
        let mut links = 0;
        while let Some(c) = todo.pop_front() {
            let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let next = rustix::fs::openat(&fd, c.as_os_str(), flags, Mode::empty()).map_err(io)?;
            let st = rustix::fs::fstat(&next).map_err(io)?;
            match FileKind::of_mode(st.st_mode as u32) {
                FileKind::Directory => fd = next,
                FileKind::Symlink => {
                    if st.st_uid != 0 && st.st_uid != euid() {
                        return Err(err(Problem::ForeignLink(st.st_uid)));
                    }
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(io(rustix::io::Errno::LOOP));
                    }
                    let target =
                        rustix::fs::readlinkat(&fd, c.as_os_str(), Vec::new()).map_err(io)?;
                    let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                    if target.is_absolute() {
                        fd = rustix::fs::openat(CWD, "/", dirflags, Mode::empty()).map_err(io)?;
                    }
                    for t in components(&target).into_iter().rev() {
                        todo.push_front(t);
                    }
                }
                _ => return Err(io(rustix::io::Errno::NOTDIR)),
            }
        }
        Ok(Folder {
            fd,
            path: dir.to_path_buf(),
        })
    }

    /// The folder of `path` and the name of its last component (which must
    /// be a name: not `..`, not empty, no trailing `/`).
    pub fn of(path: &Path) -> Result<(Folder, OsString), PathError> {
        if path.as_os_str().is_empty() {
            return Err(PathError::new(
                path,
                Problem::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the path is empty: name a file",
                )),
            ));
        }
        let name = path
            .file_name()
            .filter(|_| !path.as_os_str().as_bytes().ends_with(b"/"))
            .ok_or_else(|| {
                PathError::new(
                    path,
                    Problem::Io(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "names a folder, not a file",
                    )),
                )
            })?
            .to_os_string();
        Ok((Folder::open(folder_of(path))?, name))
    }

    /// Its descriptor (`O_PATH`), for system calls relative to it.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// Sets the permission bits of `name` in it. A symbolic link there is
    /// refused, not followed (`fchmodat` would follow it): callers use it
    /// in folders others cannot change (§11.1).
    pub fn chmod(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        match self.stat(name)? {
            Some(e) if e.kind != FileKind::Symlink => {}
            Some(_) => return Err(io::Error::other("refusing to chmod a symbolic link")),
            None => return Err(io::ErrorKind::NotFound.into()),
        }
        Ok(rustix::fs::chmodat(
            &self.fd,
            name,
            Mode::from_raw_mode(mode as _),
            AtFlags::empty(),
        )?)
    }

    /// Creates the folder `name` in it with `mode` (less the umask) if
    /// nothing is there; an existing folder is left as it is.
    pub fn mkdir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode as _)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The path it was opened as.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shown(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// Checks that other users cannot replace files in it: owned by root or
    /// the caller, and, if group or others may write it, sticky (as
    /// `/dev/shm` and `/tmp` are).
    pub fn check_private(&self) -> Result<(), PathError> {
        let err = |p| PathError::new(&self.path, p);
        let st = rustix::fs::fstat(&self.fd).map_err(|e| err(Problem::Io(e.into())))?;
        let mode = st.st_mode as u32 & 0o7777;
        let open = mode & 0o022 != 0 && mode & 0o1000 == 0;
        if open || (st.st_uid != 0 && st.st_uid != euid()) {
            return Err(err(Problem::Folder {
                mode,
                uid: st.st_uid,
            }));
        }
        Ok(())
    }

    /// `lstat` of `name` in it: its identity, kind, owner; `None` if there
    /// is nothing by that name.
    pub fn stat(&self, name: &OsStr) -> io::Result<Option<Entry>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Entry::of(&st))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Opens `name` for reading if its kind is one of `accept`, checked
    /// before opening (special files are never opened) and again on the
    /// descriptor. Returns the file and its metadata.
    pub fn open_read(
        &self,
        name: &OsStr,
        accept: &[FileKind],
    ) -> Result<(File, Metadata), PathError> {
        self.open_read_checked(name, |e| {
            if accept.contains(&e.kind) {
                Ok(())
            } else {
                Err(Problem::Kind(e.kind))
            }
        })
    }

    /// [`open_read`](Self::open_read) with the check `accept` made on the
    /// `lstat` of `name` before it is opened (a link is always refused).
    pub fn open_read_checked(
        &self,
        name: &OsStr,
        accept: impl FnOnce(&Entry) -> Result<(), Problem>,
    ) -> Result<(File, Metadata), PathError> {
        let err = |p| PathError::new(&self.shown(name), p);
        let before = self
            .stat(name)
            .map_err(|e| err(Problem::Io(e)))?
            .ok_or_else(|| err(Problem::Io(io::ErrorKind::NotFound.into())))?;
        if before.kind == FileKind::Symlink {
            return Err(err(Problem::Symlink));
        }
        accept(&before).map_err(err)?;
        let fd = rustix::fs::openat(&self.fd, name, OFlags::RDONLY | safe(), Mode::empty())
            .map_err(|e| err(open_problem(e.into())))?;
        let file = File::from(fd);
        let md = file.metadata().map_err(|e| err(Problem::Io(e)))?;
        if FileId::of(&md) != before.id {
            return Err(err(Problem::Changed));
        }
        Ok((file, md))
    }

    /// Opens or creates (with `mode`, less the umask) a regular file to
    /// write; it must belong to the caller and have exactly one link. A
    /// file planted by someone else is refused, never truncated or
    /// appended to; nothing is truncated here. Returns the file and whether
    /// this call created it.
    pub fn open_private(
        &self,
        name: &OsStr,
        access: Access,
        mode: u32,
    ) -> Result<(File, bool), PathError> {
        let err = |p| PathError::new(&self.shown(name), p);
        let rw = match access {
            Access::ReadWrite => OFlags::RDWR,
            Access::Append => OFlags::WRONLY | OFlags::APPEND,
        };
        let mode = Mode::from_raw_mode(mode as _);
        // Create exclusively first, to know whether the file is ours from birth.
        let create = rw | safe() | OFlags::CREATE | OFlags::EXCL;
        let (fd, created) = match rustix::fs::openat(&self.fd, name, create, mode) {
            Ok(fd) => (fd, true),
            Err(rustix::io::Errno::EXIST) => {
                let e = self
                    .stat(name)
                    .map_err(|e| err(Problem::Io(e)))?
                    .ok_or_else(|| err(Problem::Changed))?;
                e.check_private().map_err(err)?;
                let fd = rustix::fs::openat(&self.fd, name, rw | safe(), Mode::empty())
                    .map_err(|e| err(open_problem(e.into())))?;
                (fd, false)
            }
            Err(e) => return Err(err(open_problem(e.into()))),
        };
        let file = File::from(fd);
        let md = file.metadata().map_err(|e| err(Problem::Io(e)))?;
        Entry::of_metadata(&md).check_private().map_err(err)?;
        Ok((file, created))
    }

    /// Creates `name` anew (`O_EXCL`: never an existing file or a link),
    /// read-write, with `mode` less the umask.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | safe();
        Ok(File::from(rustix::fs::openat(
            &self.fd,
            name,
            flags,
            Mode::from_raw_mode(mode as _),
        )?))
    }

    /// Renames `from` to `to`, both in this folder (replacing `to`).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Removes the file `name`.
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }
}

/// What `lstat` says of a folder entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its identity.
    pub id: FileId,
    /// Its kind.
    pub kind: FileKind,
    /// Its owner.
    pub uid: u32,
    /// Its permission bits.
    pub mode: u32,
    /// Its hard links.
    pub nlink: u64,
    /// Its device number, for a device.
    pub rdev: u64,
    /// Its length.
    pub len: u64,
    /// The 512-byte blocks allocated to it.
    pub blocks: u64,
}

impl Entry {
    // `struct stat`'s field types differ between targets.
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &Stat) -> Self {
        Self {
            id: FileId::of_stat(st),
            kind: FileKind::of_mode(st.st_mode as u32),
            uid: st.st_uid,
            mode: st.st_mode as u32 & 0o7777,
            nlink: st.st_nlink as u64,
            rdev: st.st_rdev,
            len: st.st_size as u64,
            blocks: st.st_blocks as u64,
        }
    }

    /// The entry of an open file.
    pub fn of_metadata(md: &Metadata) -> Self {
        Self {
            id: FileId::of(md),
            kind: FileKind::of(md),
            uid: md.uid(),
            mode: md.mode() & 0o7777,
            nlink: md.nlink(),
            rdev: md.rdev(),
            len: md.len(),
            blocks: md.blocks(),
        }
    }

    /// A file the caller may write: a regular file of the caller's, with
    /// one link.
    fn check_private(&self) -> Result<(), Problem> {
        match self.kind {
            FileKind::Regular => {}
            FileKind::Symlink => return Err(Problem::Symlink),
            k => return Err(Problem::Kind(k)),
        }
        if self.uid != euid() {
            return Err(Problem::Owner {
                uid: self.uid,
                expected: euid(),
            });
        }
        if self.nlink != 1 {
            return Err(Problem::Links(self.nlink));
        }
        Ok(())
    }
}

/// How [`Folder::open_private`] opens a file it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read and write (a lock file).
    ReadWrite,
    /// Append only (a recording).
    Append,
}

/// Opens `path` for reading as [`Folder::open_read`] does.
pub fn open_read(path: &Path, accept: &[FileKind]) -> Result<(File, Metadata), PathError> {
    let (folder, name) = Folder::of(path)?;
    folder.open_read(&name, accept)
}

/// Opens a regular file of at most `limit` bytes to read (an input such as
/// a recording): a FIFO, a device or an oversized file is refused. The
/// caller must still bound what it reads: the file may grow.
pub fn open_input(path: &Path, limit: u64) -> Result<File, PathError> {
    let (folder, name) = Folder::of(path)?;
    let (file, _) = folder.open_read_checked(&name, |e| match e.kind {
        FileKind::Regular if e.len > limit => Err(Problem::TooLarge { len: e.len, limit }),
        FileKind::Regular => Ok(()),
        k => Err(Problem::Kind(k)),
    })?;
    Ok(file)
}

/// Opens or creates a file to write as [`Folder::open_private`] does.
pub fn open_private(path: &Path, access: Access, mode: u32) -> Result<(File, bool), PathError> {
    let (folder, name) = Folder::of(path)?;
    folder.open_private(&name, access, mode)
}

/// The folder of `path` (`.` for a bare file name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The components of `p` to resolve one by one (`..` included: it is
/// resolved from the folder reached, like the kernel does).
fn components(p: &Path) -> std::collections::VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
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
        // Folders reached through our own links and through `..` resolve.
        let sub = d.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let to_sub = d.join("to-sub");
        let _ = std::fs::remove_file(&to_sub);
        std::os::unix::fs::symlink("sub", &to_sub).unwrap();
        assert!(open_private(&to_sub.join("../new"), Access::Append, 0o600).is_ok());
        assert!(open_private(&d.join("to-sub/x"), Access::Append, 0o600).is_ok());
        assert!(sub.join("x").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
