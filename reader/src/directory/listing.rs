//! Opening and listing a segment directory (`spec/PERFABI.md` §15.2): the
//! directory reached without a link of another user, checked, and its
//! segment names listed within stated limits.

use std::collections::BTreeSet;
use std::path::Path;

use perfabi_shm::directory::{SegmentName, MAX_ENTRIES};
use perfabi_shm::safe_open::Folder;
use rustix::fs::{Mode, OFlags};

use super::{DirectoryOptions, Problem};
use crate::trust::path_error;
use crate::Error;

/// What one listing found.
pub(super) struct Listed {
    /// Segment names, at most `max_segments`, sorted.
    pub names: BTreeSet<SegmentName>,
    /// Limits reached.
    pub problems: Vec<Problem>,
}

/// Opens `dir` (no link of another user followed on the way), checks it
/// (owned by root or a trusted user; group or others may write it only if
/// sticky) and lists its segment names: at most [`MAX_ENTRIES`] entries
/// are looked at and `max_segments` segments kept.
pub(super) fn list(dir: &Path, opts: &DirectoryOptions) -> Result<Listed, Error> {
    let folder = Folder::open(dir).map_err(|e| path_error(dir, e))?;
    let io = |e: rustix::io::Errno| Error::Io(dir.to_path_buf(), e.into());
    let fd = rustix::fs::openat(
        folder.fd(),
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)?;
    let st = rustix::fs::fstat(&fd).map_err(io)?;
    let mode = st.st_mode as u32 & 0o7777;
    if !opts.segment.trust.trusts(st.st_uid) {
        return Err(Error::Untrusted {
            path: dir.to_path_buf(),
            uid: st.st_uid,
        });
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(Error::Writable(dir.to_path_buf(), mode));
    }
    let mut names = BTreeSet::new();
    let mut problems = Vec::new();
    let mut seen = 0usize;
    let mut entries = rustix::fs::Dir::read_from(&fd).map_err(io)?;
    while let Some(entry) = entries.read() {
        let entry = entry.map_err(io)?;
        seen += 1;
        if seen > MAX_ENTRIES {
            problems.push(Problem::limit(
                dir,
                format!("more than {MAX_ENTRIES} entries: the rest were not looked at"),
            ));
            break;
        }
        let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
        if let Some(n) = SegmentName::parse(name) {
            names.insert(n);
        }
    }
    if names.len() > opts.max_segments {
        problems.push(Problem::limit(
            dir,
            format!(
                "{} segment files, more than the limit of {}: the rest were not read (raise max_segments)",
                names.len(),
                opts.max_segments
            ),
        ));
        names = names.into_iter().take(opts.max_segments).collect();
    }
    Ok(Listed { names, problems })
}

use std::os::unix::ffi::OsStrExt;
