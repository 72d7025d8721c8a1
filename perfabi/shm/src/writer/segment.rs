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
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::prelude::rust_2021::*;

use memmap2::MmapRaw;
use rustix::fs::{MemfdFlags, SealFlags};

use crate::safe_open::{FileId, Folder};
use crate::sync::AtomicU64;

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

    /// Removes the temporary file `tmp`.
    pub(crate) fn discard(&self, tmp: &OsStr) {
        let _ = self.folder.unlink(tmp);
    }

    /// Creates a new file of `len` bytes under a temporary name (`O_EXCL`,
    /// mode 0644 less the umask) and fills it. Returns it and its name.
    fn new_file(&self, len: u64) -> io::Result<(File, OsString)> {
        let mut nonce = [0u8; 8];
        rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())?;
        let tmp = OsString::from(format!(
            ".{}.{}.{:016x}.tmp",
            self.name.to_string_lossy(),
            std::process::id(),
            u64::from_ne_bytes(nonce)
        ));
        let file = self.folder.create_new(&tmp, 0o644)?;
        match fill(&file, len) {
            Ok(()) => Ok((file, tmp)),
            Err(e) => {
                self.discard(&tmp);
                Err(io::Error::new(
                    e.kind(),
                    format!(
                        "cannot fill a {len}-byte segment in {}: {e}",
                        self.folder.path().display()
                    ),
                ))
            }
        }
    }
}

/// A shared, writable mapping of the whole segment.
pub(crate) struct Backing {
    // Field order: the guard must be dropped before the mapping it guards.
    guard: crate::sigbus::Guard,
    /// The guard's fault count when the range was last mapped anew: faults
    /// past it hit the file mapped now.
    faults_seen: std::sync::atomic::AtomicU64,
    /// The file mapped (after a [`replace`](Self::replace), the descriptor
    /// refers to the new file).
    pub(crate) file: File,
    map: MmapRaw,
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
        Self::map(file)
    }

    /// A new file of `len` bytes at `place` under a temporary name, filled,
    /// to be [`Place::publish`]ed by renaming.
    pub(crate) fn temp_file(place: &Place, len: u64) -> io::Result<(Self, OsString)> {
        let (file, tmp) = place.new_file(len)?;
        match Self::map(file) {
            Ok(b) => Ok((b, tmp)),
            Err(e) => {
                place.discard(&tmp);
                Err(e)
            }
        }
    }

    fn map(file: File) -> io::Result<Self> {
        let map = MmapRaw::map_raw(&file)?;
        // If someone truncates the file, the writer's stores past the new end
        // must not kill it (see `crate::sigbus`).
        // SAFETY: the range is `map`, which this Backing owns and which is
        // dropped after the guard (field order).
        let guard =
            unsafe { crate::sigbus::Guard::register(map.as_mut_ptr() as usize, map.len(), true) };
        Ok(Self {
            guard,
            faults_seen: std::sync::atomic::AtomicU64::new(0),
            file,
            map,
        })
    }

    /// Whether an access hit a page someone truncated away since the file
    /// mapped now was mapped.
    pub(crate) fn faulted(&self) -> bool {
        self.guard.faults() > self.faults_seen.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// What the file looks like now: its length and the offset of its first
    /// hole (`len` if none), or `None` if the file cannot be inspected.
    pub(crate) fn extent(&self) -> Option<(u64, u64)> {
        let len = self.file.metadata().ok()?.len();
        let hole = rustix::fs::seek(&self.file, rustix::fs::SeekFrom::Hole(0)).ok()?;
        Some((len, hole.min(len)))
    }

    /// The identity of the file mapped now.
    pub(crate) fn id(&self) -> io::Result<FileId> {
        Ok(FileId::of(&self.file.metadata()?))
    }

    /// Replaces the file under the mapping with a new, filled file created
    /// at `place` (not yet published), mapped at the same addresses, so
    /// that every word keeps its address and concurrent updates keep
    /// working. The old file is left as it is; [`Place::publish`] the new one.
    pub(crate) fn replace(&self, place: &Place) -> io::Result<OsString> {
        let (new, tmp) = place.new_file(self.len())?;
        // Faults counted from here on may be a handler still running for
        // the old file, whose zero page could land over the new mapping:
        // they count as damage of the new file, to be mended again.
        let seen = self.guard.faults();
        // SAFETY: the range is exactly this Backing's own mapping (page
        // aligned, `len` bytes, which `new` has), owned by `self.map` and
        // unmapped only when it drops. MAP_FIXED replaces it atomically: the
        // memory stays mapped, with the same protection, throughout, so
        // concurrent users — who access it only through atomics (see
        // `words`) — keep valid addresses; their accesses land in the old or
        // the new file.
        let r = unsafe {
            rustix::mm::mmap(
                self.map.as_mut_ptr().cast(),
                self.map.len(),
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED | rustix::mm::MapFlags::FIXED,
                &new,
                0,
            )
        };
        if let Err(e) = r {
            place.discard(&tmp);
            return Err(e.into());
        }
        // The descriptor number stays, and now refers to the new file.
        // SAFETY: both descriptors are open and owned (`new` here, `file` by
        // this Backing); dup2 only makes `file`'s number refer to `new`'s
        // open file, which `file` then owns; nothing else uses that number.
        if unsafe { libc::dup2(new.as_raw_fd(), self.file.as_raw_fd()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        self.faults_seen
            .store(seen, std::sync::atomic::Ordering::Release);
        Ok(tmp)
    }

    /// The mapping as atomic words.
    pub(crate) fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page aligned (so 8-byte aligned), its length
        // is a multiple of the page size, and it lives as long as `self`.
        // Shared memory may change at any time, which is why it is only ever
        // seen as atomics: every access is an atomic load, store or RMW (or
        // an rseq section's `mov` on x86_64, which is an atomic 8-byte access).
        unsafe {
            std::slice::from_raw_parts(
                self.map.as_mut_ptr() as *const AtomicU64,
                self.map.len() / 8,
            )
        }
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
