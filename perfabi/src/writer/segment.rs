//! The memory behind a writer's segment: a memfd or a file on tmpfs, mapped
//! shared and writable, that never shrinks while it exists.
//!
//! A segment file is written in full (zeros) before it is mapped, so it has
//! no holes: readers refuse a file with holes (`spec/PERFABI.md` §11.4),
//! because on tmpfs merely reading a hole allocates memory, and a writer
//! whose filesystem is full learns it here, as an error, instead of dying
//! of (or silently losing stores to) `SIGBUS` later.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::prelude::rust_2021::*;

use memmap2::MmapRaw;
use rustix::fs::{MemfdFlags, SealFlags};

use crate::safe_open;
use crate::sync::AtomicU64;

/// A shared, writable mapping of the whole segment.
pub(crate) struct Backing {
    // Field order: the guard must be dropped before the mapping it guards.
    guard: crate::sigbus::Guard,
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

    /// A new file of `len` bytes created next to `path` under a temporary
    /// name with `O_EXCL`, filled, to be [`publish`]ed by renaming.
    pub(crate) fn temp_file(path: &Path, len: u64) -> io::Result<(Self, PathBuf)> {
        let (file, tmp) = new_file(path, len)?;
        match Self::map(file) {
            Ok(b) => Ok((b, tmp)),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    fn map(file: File) -> io::Result<Self> {
        let map = MmapRaw::map_raw(&file)?;
        // If someone truncates the file, the writer's stores past the new end
        // must not kill it (see `crate::sigbus`).
        let guard = crate::sigbus::Guard::register(map.as_mut_ptr() as usize, map.len(), true);
        Ok(Self { guard, file, map })
    }

    /// Whether an access hit a page someone truncated away.
    pub(crate) fn faulted(&self) -> bool {
        self.guard.faulted()
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

    /// The (device, inode) of the file mapped now.
    pub(crate) fn id(&self) -> io::Result<(u64, u64)> {
        let md = self.file.metadata()?;
        Ok((md.dev(), md.ino()))
    }

    /// Replaces the file under the mapping with a new, filled file created
    /// next to `path` (not yet published), mapped at the same addresses, so
    /// that every word keeps its address and concurrent updates keep
    /// working. The old file is left as it is; [`publish`] the new one.
    pub(crate) fn replace(&self, path: &Path) -> io::Result<PathBuf> {
        let (new, tmp) = new_file(path, self.len())?;
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
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
        // The descriptor number stays, and now refers to the new file.
        // SAFETY: both descriptors are open and owned (`new` here, `file` by
        // this Backing); dup2 only makes `file`'s number refer to `new`'s
        // open file, which `file` then owns; nothing else uses that number.
        if unsafe { libc::dup2(new.as_raw_fd(), self.file.as_raw_fd()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // The whole range maps the new file: no zero page of an old fault is left.
        self.guard.reset();
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

/// Creates a new file of `len` bytes next to `path`, under a temporary name
/// (`O_EXCL`, mode 0644 less the umask), in a folder others cannot replace
/// files in, and fills it. Returns it and its name.
fn new_file(path: &Path, len: u64) -> io::Result<(File, PathBuf)> {
    let base = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "segment path names no file"))?;
    let dir = safe_open::folder_of(path);
    safe_open::check_folder(dir).map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
    let mut nonce = [0u8; 8];
    rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())?;
    let tmp = dir.join(format!(
        ".{}.{}.{:016x}.tmp",
        base.to_string_lossy(),
        std::process::id(),
        u64::from_ne_bytes(nonce)
    ));
    // O_EXCL: never an existing file, nor a planted link.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    match fill(&file, len) {
        Ok(()) => Ok((file, tmp)),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(io::Error::new(
                e.kind(),
                format!("cannot fill a {len}-byte segment in {}: {e}", dir.display()),
            ))
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

/// Renames `tmp` to `path` (atomically replacing an older segment there).
pub(crate) fn publish(tmp: &Path, path: &Path) -> io::Result<()> {
    std::fs::rename(tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(tmp);
    })
}
