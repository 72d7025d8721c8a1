//! Where the segment map is pinned: a folder on bpffs that only root
//! changes, the lock that keeps one loader per folder, and the pin itself,
//! made under a temporary name, given its mode and renamed into place (so
//! a reader never finds a pin without its mode, and a restart replaces the
//! old pin in one step).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::{Path, PathBuf};

use perfabi_shm::safe_open::{escape_path, FileId, Folder};

use crate::error::Error;
use crate::system;

/// The default pin: `/sys/fs/bpf/perfabi/kernel`.
pub const DEFAULT_PIN: &str = "/sys/fs/bpf/perfabi/kernel";

/// The pin's mode when unprivileged BPF is off: every user may open the
/// map read-write, which a frozen map makes harmless, and which a shared
/// read-only mapping needs (spec §9.1).
pub const MODE_SHARED: u32 = 0o666;
/// The pin's mode while unprivileged BPF is on (any user holding a
/// read-write descriptor could write the map from a program): root only.
pub const MODE_PRIVATE: u32 = 0o600;

/// The pin's place: its folder (checked, locked) and name.
pub struct Place {
    folder: Folder,
    name: OsString,
    path: PathBuf,
    /// The folder opened for `flock`, held for the loader's life.
    _lock: File,
}

impl Place {
    /// Prepares `path`: bpffs mounted, the folder made (mode 0755) and
    /// checked (root's, not writable by others), and locked.
    pub fn new(path: &Path) -> Result<Self, Error> {
        let (dir, name) = match (path.parent(), path.file_name()) {
            (Some(d), Some(n)) if !d.as_os_str().is_empty() => (d, n.to_os_string()),
            _ => {
                return Err(Error::Folder(format!(
                    "{} names no file in a folder: give a path such as {DEFAULT_PIN}",
                    escape_path(path)
                )))
            }
        };
        system::ensure_bpffs(dir)?;
        if let (Some(parent), Some(leaf)) = (dir.parent(), dir.file_name()) {
            let up = Folder::open(parent).map_err(|e| Error::Folder(e.to_string()))?;
            up.mkdir(leaf, 0o755)
                .map_err(|e| Error::Io(format!("cannot make {}", escape_path(dir)), e))?;
        }
        let folder = Folder::open(dir).map_err(|e| Error::Folder(e.to_string()))?;
        folder
            .check_private()
            .map_err(|e| Error::Folder(e.to_string()))?;
        if !perfabi_shm::bpf_pin::on_bpffs(&folder).unwrap_or(false) {
            return Err(Error::NoBpffs {
                path: dir.to_path_buf(),
                why: "the folder is not on a bpffs mount".into(),
            });
        }
        let lock = File::open(dir)
            .map_err(|e| Error::Io(format!("cannot open {}", escape_path(dir)), e))?;
        match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Err(Error::Running(dir.to_path_buf())),
            Err(e) => {
                return Err(Error::Io(
                    format!("cannot lock {}", escape_path(dir)),
                    e.into(),
                ))
            }
        }
        Ok(Self {
            folder,
            name,
            path: path.to_path_buf(),
            _lock: lock,
        })
    }

    /// The pin's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A temporary name in the folder, for pinning before the rename (no
    /// dot: bpffs refuses names with one, `bpf_lookup` in
    /// kernel/bpf/inode.c).
    pub fn temp_path(&self) -> (OsString, PathBuf) {
        let tmp = OsString::from(format!(
            "{}-pinning-{}",
            self.name.to_string_lossy(),
            std::process::id()
        ));
        let p = self.folder.path().join(&tmp);
        (tmp, p)
    }

    /// Removes what is at the temporary name (a crashed loader's), if
    /// anything.
    pub fn clear(&self, tmp: &OsStr) {
        let _ = self.folder.unlink(tmp);
    }

    /// Gives the pin at `tmp` its mode and renames it over the pin's name.
    /// Returns the pin's identity, to notice later that it was removed or
    /// replaced.
    pub fn publish(&self, tmp: &OsStr, mode: u32) -> Result<FileId, Error> {
        let fail = |what: &str, e| {
            self.clear(tmp);
            Error::Io(format!("cannot {what} {}", escape_path(&self.path)), e)
        };
        self.folder
            .chmod(tmp, mode)
            .map_err(|e| fail("set the mode of", e))?;
        self.folder
            .rename(tmp, &self.name)
            .map_err(|e| fail("pin", e))?;
        self.current()
            .ok_or_else(|| Error::Map(format!("{} vanished once pinned", escape_path(&self.path))))
    }

    /// The identity of what is at the pin's name now.
    pub fn current(&self) -> Option<FileId> {
        self.folder.stat(&self.name).ok().flatten().map(|e| e.id)
    }

    /// Removes the pin if it is still `id`.
    pub fn remove(&self, id: FileId) {
        if self.current() == Some(id) {
            let _ = self.folder.unlink(&self.name);
        }
    }
}
