//! The memory behind a writer's segment: a memfd or a file on tmpfs, mapped
//! shared and writable, that never shrinks while it exists.
//!
//! A segment file is written in full (zeros) before it is mapped, so it has
//! no holes: readers refuse a file with holes (`spec/PERFABI.md` §11.4),
//! because on tmpfs merely reading a hole allocates memory, and a writer
//! whose filesystem is full learns it here, as an error, instead of dying
//! of (or silently losing stores to) `SIGBUS` later.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use perfabi::Word;
use rustix::fs::{MemfdFlags, SealFlags};

use crate::mapping::Mapping;
use crate::safe_open::{FileId, Folder};

/// Where a segment file lives: its folder, opened once (`spec/PERFABI.md`
/// §11.1: no link of another user on the way, a folder others cannot
/// replace files in), and its name there. Every later creation and rename
/// is relative to the folder's descriptor.
pub(crate) struct Place {
    folder: Folder,
    name: OsString,
}

impl Place {
    /// The place of `path`, checked.
    pub(crate) fn of(path: &Path) -> io::Result<Self> {
        let refused = |e: crate::safe_open::PathError| match e.problem {
            crate::safe_open::Problem::Io(io) => io,
            _ => io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()),
        };
        let (folder, name) = Folder::of(path).map_err(refused)?;
        folder.check_private().map_err(refused)?;
        Ok(Self { folder, name })
    }

    /// What is at the segment's name now (`None`: nothing).
    pub(crate) fn current(&self) -> io::Result<Option<FileId>> {
        Ok(self.folder.stat(&self.name)?.map(|e| e.id))
    }

    /// Renames the temporary file `tmp` to the segment's name (atomically
    /// replacing an older segment there); removes it if that fails.
    pub(crate) fn publish(&self, tmp: &OsStr) -> io::Result<()> {
        self.folder.rename(tmp, &self.name).inspect_err(|_| {
            let _ = self.folder.unlink(tmp);
        })
    }

    /// The liveness lock on the temporary file `tmp`, which is `file`
    /// (see [`LiveLock::take`](super::live_lock::LiveLock::take)); then
    /// the file is given its readers' mode (0644 less the umask): created
    /// 0600, no other user could open it, and so none could read-lock it
    /// first and keep the writer from taking its lock (`spec/PERFABI.md`
    /// §10, §11.1).
    pub(crate) fn live_lock(
        &self,
        tmp: &OsStr,
        file: &File,
    ) -> io::Result<super::live_lock::LiveLock> {
        let lock = super::live_lock::LiveLock::take(&self.folder, tmp, file);
        rustix::fs::fchmod(file, rustix::fs::Mode::from_raw_mode(readers_mode() as _))?;
        Ok(lock)
    }

    /// Removes the temporary file `tmp`.
    pub(crate) fn discard(&self, tmp: &OsStr) {
        let _ = self.folder.unlink(tmp);
    }

    /// Creates a new file of `len` bytes under a temporary name (`O_EXCL`,
    /// mode 0600 until its liveness lock is taken: [`Place::live_lock`])
    /// and fills it. Returns it and its name.
    fn new_file(&self, len: u64) -> io::Result<(File, OsString)> {
        let mut nonce = [0u8; 8];
        rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())?;
        let tmp = OsString::from(format!(
            ".{}.{}.{:016x}.tmp",
            self.name.to_string_lossy(),
            std::process::id(),
            u64::from_ne_bytes(nonce)
        ));
        let file = self.folder.create_new(&tmp, 0o600)?;
        match fill(&file, len) {
            Ok(()) => Ok((file, tmp)),
            Err(e) => {
                self.discard(&tmp);
                Err(io::Error::new(
                    e.kind(),
                    format!(
                        "cannot fill a {len}-byte segment in {}: {e}",
                        crate::safe_open::escape_path(self.folder.path())
                    ),
                ))
            }
        }
    }
}

/// A writer's shared, writable [`Mapping`] of the whole segment.
pub(crate) struct Backing {
    map: Mapping,
}

impl Backing {
    /// An anonymous memfd of `len` bytes, sealed against shrinking.
    pub(crate) fn memfd(name: &str, len: u64) -> io::Result<Self> {
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        let file = File::from(fd);
        fill(&file, len)?;
        // Readers may then map it without fear of SIGBUS from a shrink; growing
        // stays possible for a future minor version.
        rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::SEAL)?;
        Ok(Self {
            map: Mapping::writable(file)?,
        })
    }

    /// A new file of `len` bytes at `place` under a temporary name, filled,
    /// to be [`Place::publish`]ed by renaming.
    pub(crate) fn temp_file(place: &Place, len: u64) -> io::Result<(Self, OsString)> {
        let (file, tmp) = place.new_file(len)?;
        // If someone truncates the file, the writer's stores past the new end
        // must not kill it: the mapping is guarded (see `crate::sigbus`).
        match Mapping::writable(file) {
            Ok(map) => Ok((Self { map }, tmp)),
            Err(e) => {
                place.discard(&tmp);
                Err(e)
            }
        }
    }

    /// Whether an access hit a page someone truncated away since the file
    /// mapped now was mapped.
    pub(crate) fn faulted(&self) -> bool {
        self.map.faulted()
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// The file mapped now.
    pub(crate) fn file(&self) -> &File {
        self.map
            .file()
            .expect("a writable mapping keeps its file (Mapping::writable)")
    }

    /// What the file looks like now: its length and the offset of its first
    /// hole (`len` if none), or `None` if the file cannot be inspected.
    pub(crate) fn extent(&self) -> Option<(u64, u64)> {
        let len = self.file().metadata().ok()?.len();
        let hole = rustix::fs::seek(self.file(), rustix::fs::SeekFrom::Hole(0)).ok()?;
        Some((len, hole.min(len)))
    }

    /// The identity of the file mapped now.
    pub(crate) fn id(&self) -> io::Result<FileId> {
        Ok(FileId::of(&self.file().metadata()?))
    }

    /// Replaces the file under the mapping with a new, filled file created
    /// at `place` (not yet published), mapped at the same addresses, so
    /// that every word keeps its address and concurrent updates keep
    /// working. The old file is left as it is; [`Place::publish`] the new one.
    pub(crate) fn replace(&self, place: &Place) -> io::Result<OsString> {
        let (new, tmp) = place.new_file(self.len())?;
        if let Err(e) = self.map.replace_file(&new) {
            place.discard(&tmp);
            return Err(e);
        }
        Ok(tmp)
    }

    /// The mapping as atomic words.
    pub(crate) fn words(&self) -> &[Word] {
        self.map.words()
    }
}

/// The mode of a published segment file: 0644 less the process umask (as
/// `open` would have made it, §11.1). The umask is read from
/// `/proc/self/status` (setting it to learn it would race with other
/// threads creating files); if it cannot be, 0600: never wider than the
/// user asked.
fn readers_mode() -> u32 {
    let umask = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let v = s.lines().find_map(|l| l.strip_prefix("Umask:"))?;
            u32::from_str_radix(v.trim(), 8).ok()
        });
    match umask {
        Some(m) => 0o644 & !m,
        None => 0o600,
    }
}

/// Writes `len` zero bytes into an empty file, so that every page of it is
/// allocated (no holes) and a full filesystem fails here.
fn fill(file: &File, len: u64) -> io::Result<()> {
    const CHUNK: usize = 1 << 20;
    let zeros = vec![0u8; CHUNK];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(CHUNK as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}
