//! Opening and listing a segment directory (`spec/PERFABI.md` §15.2): the
//! directory reached without a link of another user, checked, and its
//! segment names listed within stated limits.

use std::collections::BTreeSet;
use std::path::Path;

use perfabi_shm::directory::{SegmentName, MAX_ENTRIES, MAX_SCANNED};
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

/// Opens `dir` (no link of another user followed on the way) and checks
/// it: owned by root or a trusted user; group or others may write it only
/// if sticky.
pub(super) fn open(dir: &Path, opts: &DirectoryOptions) -> Result<Folder, Error> {
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
    drop(fd);
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
    Ok(folder)
}

/// Lists the segment names of `folder` (the directory `dir`) as
/// [`perfabi_shm::directory::list`] does, keeping those of owners the
/// reader trusts (at most [`MAX_ENTRIES`], then `max_segments`): a file
/// named as a segment by an owner it does not trust is a problem of its
/// own (the first [`MAX_REFUSED_NAMED`](perfabi_shm::directory::MAX_REFUSED_NAMED) one by one, the rest counted in
/// one), and never takes a trusted segment's place. A name `open` says the
/// reader holds open already is kept without a look (its owner was checked
/// at its open, and is at every recheck of its path).
pub(super) fn list(
    folder: &Folder,
    dir: &Path,
    opts: &DirectoryOptions,
    open: impl Fn(&SegmentName) -> bool,
) -> Result<Listed, Error> {
    let trust = &opts.segment.trust;
    let found = perfabi_shm::directory::list(folder, open, |uid| trust.trusts(uid))
        .map_err(|e| Error::Io(dir.to_path_buf(), e))?;
    let mut problems = Vec::new();
    for (name, uid) in &found.refused {
        let path = dir.join(name.to_string());
        problems.push(Problem::file(
            &path,
            &Error::Untrusted {
                path: path.clone(),
                uid: *uid,
            },
        ));
    }
    if found.refused_count > found.refused.len() {
        problems.push(Problem {
            file: dir.to_path_buf(),
            family: None,
            message: format!(
                "{}: {} more files named as segments belong to users this reader does not trust: not read",
                perfabi_shm::safe_open::escape_path(dir),
                found.refused_count - found.refused.len()
            ),
            code: "untrusted-owner",
        });
    }
    if found.truncated {
        problems.push(Problem::limit(
            dir,
            format!("more than {MAX_SCANNED} entries: the rest were not looked at"),
        ));
    }
    if found.full {
        problems.push(Problem::limit(
            dir,
            format!("more than {MAX_ENTRIES} segment files of trusted owners: the rest were not looked at"),
        ));
    }
    let mut names = found.names;
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
