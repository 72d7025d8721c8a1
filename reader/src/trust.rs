//! Whose segments a reader believes, and how it opens a path
//! (`spec/PERFABI.md` §11).
//!
//! Segments live in world-writable folders next to files of other users, so
//! a path is untrusted input: its last component is not followed if it is a
//! symbolic link, nothing blocks in `open` (a FIFO is refused, not waited
//! on), only a regular file or the kernel module's device is accepted, and a
//! file must belong to a trusted user and be writable by its owner alone.

use std::fs::{File, Metadata};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use perfabi::safe_open::{self, FileKind, Problem};
use perfabi::trust::Origin;

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

/// Opens the segment at `path` as §11.2 says, or says why not.
pub(crate) fn open_path(path: &Path, trust: &Trust) -> Result<(File, Metadata, Found), Error> {
    let (file, md) = safe_open::open_read(path, &[FileKind::Regular, FileKind::CharDevice])
        .map_err(|e| match e.problem {
            Problem::Symlink => Error::Symlink(path.to_path_buf()),
            Problem::Kind(k) => Error::NotASegmentFile(path.to_path_buf(), k.describe()),
            Problem::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
                Error::NotFound(path.to_path_buf())
            }
            Problem::Io(io) => Error::Io(path.to_path_buf(), io),
            _ => Error::Io(path.to_path_buf(), std::io::Error::other(e.to_string())),
        })?;
    let mode = md.permissions().mode() & 0o7777;
    let found = if md.file_type().is_file() {
        if mode & 0o022 != 0 {
            return Err(Error::Writable(path.to_path_buf(), mode));
        }
        if !trust.trusts(md.uid()) {
            return Err(Error::Untrusted {
                path: path.to_path_buf(),
                uid: md.uid(),
            });
        }
        Found {
            origin: Origin::File,
            owner: md.uid(),
        }
    } else if md.uid() == 0 && mode & 0o022 == 0 {
        Found {
            origin: Origin::KernelDevice,
            owner: 0,
        }
    } else {
        return Err(Error::NotASegmentFile(
            path.to_path_buf(),
            "a character device other than the kernel module's",
        ));
    };
    Ok((file, md, found))
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
