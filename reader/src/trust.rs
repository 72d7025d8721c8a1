//! Whose segments a reader believes, and how it opens a path
//! (`spec/PERFABI.md` §11).
//!
//! Segments live in world-writable folders next to files of other users, so
//! a path is untrusted input: its last component is not followed if it is a
//! symbolic link, nothing blocks in `open` (a FIFO is refused, not waited
//! on), only a regular file or the kernel module's device is accepted, and a
//! file must belong to a trusted user and be writable by its owner alone.

use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use perfabi::trust::Origin;
use perfabi_shm::bpf_pin::{self, PinProblem};
use perfabi_shm::safe_open::{self, Entry, FileId, FileKind, Folder, Problem};

use crate::error::Error;

/// Whose segment files a reader believes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Trust {
    /// Segments owned by the reader's own effective uid or by root (the
    /// default, as ssh's `StrictModes` trusts only the user and root).
    #[default]
    OwnerOrRoot,
    /// Those, and segments owned by these uids.
    Also(Vec<u32>),
    /// Segments of any owner. The writer's process must still run as the
    /// file's owner for the writer to count as alive.
    Anyone,
}

impl Trust {
    /// The trust command-line flags ask for (`--trust-anyone`,
    /// `--trust-uid UID`...): anyone, else these uids too, else the default.
    pub fn from_flags(anyone: bool, uids: &[u32]) -> Self {
        if anyone {
            Self::Anyone
        } else if uids.is_empty() {
            Self::OwnerOrRoot
        } else {
            Self::Also(uids.to_vec())
        }
    }

    /// Whether a segment owned by `uid` is believed.
    pub fn trusts(&self, uid: u32) -> bool {
        uid == 0
            || uid == safe_open::euid()
            || match self {
                Self::OwnerOrRoot => false,
                Self::Also(uids) => uids.contains(&uid),
                Self::Anyone => true,
            }
    }
}

/// Where a segment was found and who owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// A file, or the kernel module's device.
    pub origin: Origin,
    /// The owner's uid.
    pub owner: u32,
}

/// What [`open_path`] opened: a file (or the kernel module's device), or
/// the BPF map behind a pin.
pub(crate) enum Opened {
    /// A file or a device, and its `fstat`.
    File(File, Metadata),
    /// A frozen segment map: its descriptor, the pin's identity and the
    /// bytes the map holds.
    Map {
        /// The map's descriptor (read-write: see `perfabi_shm::bpf_pin`).
        file: File,
        /// The identity of the pin (`lstat`), to notice it replaced.
        pin: FileId,
        /// Bytes the map holds.
        bytes: u64,
    },
}

/// Opens the segment at `path` as §11.2 says, or says why not. Everything
/// that can be judged from `lstat` (kind, owner, mode, links, which device)
/// is judged before the file is opened. A path on a bpffs mount is a pin:
/// the map behind it is opened as step 7 says.
pub(crate) fn open_path(path: &Path, trust: &Trust) -> Result<(Opened, Found), Error> {
    let (folder, name) = Folder::of(path).map_err(|e| path_error(path, e))?;
    if bpf_pin::on_bpffs(&folder).map_err(|e| Error::Io(path.to_path_buf(), e))? {
        return open_pin(path, &folder, &name, trust);
    }
    let mut verdict = None;
    let opened = folder.open_read_checked(&name, |e| {
        let v = judge(path, e, trust);
        let ok = v.is_ok();
        verdict = Some(v);
        if ok {
            Ok(())
        } else {
            Err(Problem::Refused)
        }
    });
    match (opened, verdict) {
        (Ok((file, md)), Some(Ok(found))) => Ok((Opened::File(file, md), found)),
        (Err(e), Some(Err(refusal))) if matches!(e.problem, Problem::Refused) => Err(refusal),
        (Err(e), _) => Err(path_error(path, e)),
        (Ok(_), _) => unreachable!("opened only after a verdict"),
    }
}

/// Opens the segment map pinned at `path` (`name` in `folder`, on bpffs),
/// §11.2 step 7: a folder others cannot change, a regular pin of a trusted
/// owner with one link (writable by others only while unprivileged BPF is
/// off), then the map behind it (`perfabi_shm::bpf_pin::open_map`: a
/// frozen mmapable array of pages), and the pin still the one judged.
/// Kernel liveness is believed from it only if root owns the pin.
fn open_pin(
    path: &Path,
    folder: &Folder,
    name: &std::ffi::OsStr,
    trust: &Trust,
) -> Result<(Opened, Found), Error> {
    let p = path.to_path_buf();
    if let Err(e) = folder.check_private() {
        return Err(match e.problem {
            Problem::Folder { mode, .. } if mode & 0o022 != 0 => {
                Error::Writable(folder.path().to_path_buf(), mode)
            }
            Problem::Folder { uid, .. } => Error::Untrusted {
                path: folder.path().to_path_buf(),
                uid,
            },
            _ => path_error(path, e),
        });
    }
    let io = |e| Error::Io(p.clone(), e);
    let e = folder
        .stat(name)
        .map_err(io)?
        .ok_or(Error::NotFound(p.clone()))?;
    match e.kind {
        FileKind::Regular => {}
        FileKind::Symlink => return Err(Error::Symlink(p)),
        k => return Err(Error::NotASegmentFile(p, k.describe())),
    }
    if !trust.trusts(e.uid) {
        return Err(Error::Untrusted {
            path: p,
            uid: e.uid,
        });
    }
    if e.nlink > 1 {
        return Err(Error::NotASegmentFile(p, "a pin with other hard links"));
    }
    if e.mode & 0o022 != 0 && bpf_pin::unprivileged_bpf_enabled() {
        return Err(Error::WritablePin(p, e.mode));
    }
    let (file, info) = bpf_pin::open_map(folder, name).map_err(|problem| match problem {
        PinProblem::NotAMap => {
            Error::NotASegmentFile(p.clone(), "a pinned BPF object that is not a map")
        }
        PinProblem::WrongMap { .. } => Error::NotASegmentFile(
            p.clone(),
            "a BPF map that is not a BPF_F_MMAPABLE array of 4096-byte values",
        ),
        PinProblem::NotFrozen => Error::NotASegmentFile(
            p.clone(),
            "a BPF map that is not frozen (a process may still write it)",
        ),
        PinProblem::Changed => Error::Raced(p.clone()),
        PinProblem::Io(e) if e.kind() == std::io::ErrorKind::NotFound => Error::NotFound(p.clone()),
        PinProblem::Io(e) => Error::Io(p.clone(), e),
    })?;
    let again = folder.stat(name).map_err(io)?;
    if again.map(|a| a.id) != Some(e.id) {
        return Err(Error::Raced(p));
    }
    let found = Found {
        origin: if e.uid == 0 {
            Origin::KernelMap
        } else {
            Origin::File
        },
        owner: e.uid,
    };
    Ok((
        Opened::Map {
            file,
            pin: e.id,
            bytes: info.bytes,
        },
        found,
    ))
}

/// The reader error for a path `safe_open` refused or failed on.
pub(crate) fn path_error(path: &Path, e: safe_open::PathError) -> Error {
    let p = path.to_path_buf();
    match e.problem {
        Problem::Symlink => Error::Symlink(p),
        Problem::ForeignLink(uid) => Error::ForeignLink { path: p, uid },
        Problem::Kind(k) => Error::NotASegmentFile(p, k.describe()),
        Problem::Changed => Error::Raced(p),
        Problem::Io(io) if io.kind() == std::io::ErrorKind::NotFound => Error::NotFound(p),
        Problem::Io(io) => Error::Io(p, io),
        _ => Error::Io(p, std::io::Error::other(e.to_string())),
    }
}

/// Judges the `lstat` of a segment path: a regular file of a trusted owner,
/// writable by its owner alone, with one link; or the kernel module's
/// device (root's, not writable by others, and the device number the
/// module registered).
fn judge(path: &Path, e: &Entry, trust: &Trust) -> Result<Found, Error> {
    let p = path.to_path_buf();
    match e.kind {
        FileKind::Regular => {
            if e.mode & 0o022 != 0 {
                return Err(Error::Writable(p, e.mode));
            }
            if !trust.trusts(e.uid) {
                return Err(Error::Untrusted {
                    path: p,
                    uid: e.uid,
                });
            }
            if e.nlink != 1 {
                return Err(Error::NotASegmentFile(p, "a file with other hard links"));
            }
            Ok(Found {
                origin: Origin::File,
                owner: e.uid,
            })
        }
        FileKind::CharDevice => {
            let module = module_device();
            if e.uid != 0 || e.mode & 0o022 != 0 || module != Some(e.rdev) {
                return Err(Error::NotASegmentFile(
                    p,
                    if module.is_some() {
                        "a character device other than the kernel module's"
                    } else {
                        "a character device, and the perfabi kernel module is not loaded"
                    },
                ));
            }
            Ok(Found {
                origin: Origin::KernelDevice,
                owner: 0,
            })
        }
        k => Err(Error::NotASegmentFile(p, k.describe())),
    }
}

/// The device number of the kernel module's device, as the kernel tells it
/// (`/sys/class/misc/perfabi/dev`, "MAJOR:MINOR"); `None` if the module is
/// not loaded.
fn module_device() -> Option<u64> {
    let text = std::fs::read_to_string("/sys/class/misc/perfabi/dev").ok()?;
    let (major, minor) = text.trim().split_once(':')?;
    Some(rustix::fs::makedev(
        major.parse().ok()?,
        minor.parse().ok()?,
    ))
}

/// What is at `path` now (`lstat`, no link followed on the way but the
/// caller's or root's): `None` if nothing.
pub(crate) fn stat_path(path: &Path) -> Result<Option<Entry>, Error> {
    let (folder, name) = Folder::of(path).map_err(|e| path_error(path, e))?;
    folder
        .stat(&name)
        .map_err(|e| Error::Io(path.to_path_buf(), e))
}

/// Checks a segment handed over as a descriptor (a writer's memfd, whose
/// mode is 0777 by design): a regular file of a trusted owner.
pub(crate) fn check_descriptor(
    file: &File,
    shown: &Path,
    trust: &Trust,
) -> Result<(Metadata, Found), Error> {
    let md = file
        .metadata()
        .map_err(|e| Error::Io(shown.to_path_buf(), e))?;
    if !md.file_type().is_file() {
        return Err(Error::NotASegmentFile(
            shown.to_path_buf(),
            FileKind::of(&md).describe(),
        ));
    }
    if !trust.trusts(md.uid()) {
        return Err(Error::Untrusted {
            path: shown.to_path_buf(),
            uid: md.uid(),
        });
    }
    let found = Found {
        origin: Origin::File,
        owner: md.uid(),
    };
    Ok((md, found))
}
