//! The memory behind a writer's segment: a memfd or a file on tmpfs, mapped
//! shared and writable, that never shrinks while it exists.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::prelude::rust_2021::*;

use memmap2::MmapRaw;
use rustix::fs::{MemfdFlags, SealFlags};

use crate::sync::AtomicU64;

/// A shared, writable mapping of the whole segment.
pub(crate) struct Backing {
    // Field order: the guard must be dropped before the mapping it guards.
    guard: Option<crate::sigbus::Guard>,
    pub(crate) file: File,
    map: MmapRaw,
}

impl Backing {
    /// An anonymous memfd of `len` bytes, sealed against shrinking.
    pub(crate) fn memfd(name: &str, len: u64) -> io::Result<Self> {
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len)?;
        // Readers may then map it without fear of SIGBUS from a shrink; growing
        // stays possible for a future minor version.
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::SEAL)?;
        Self::map(File::from(fd))
    }

    /// A new file created next to `path` under a temporary name with
    /// `O_EXCL`, to be [`publish`](Self::publish)ed by renaming once filled.
    pub(crate) fn temp_file(path: &Path, len: u64) -> io::Result<(Self, PathBuf)> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let base = path.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "segment path names no file")
        })?;
        let mut nonce = [0u8; 8];
        rustix::rand::getrandom(&mut nonce, rustix::rand::GetRandomFlags::empty())?;
        let tmp = dir.join(format!(
            ".{}.{}.{:016x}.tmp",
            base.to_string_lossy(),
            std::process::id(),
            u64::from_ne_bytes(nonce)
        ));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        let r = file.set_len(len).and_then(|()| Self::map(file));
        match r {
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
    pub(crate) fn damaged(&self) -> bool {
        self.guard
            .as_ref()
            .is_some_and(crate::sigbus::Guard::faulted)
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

/// Renames `tmp` to `path` (atomically replacing an older segment there).
pub(crate) fn publish(tmp: &Path, path: &Path) -> io::Result<()> {
    std::fs::rename(tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(tmp);
    })
}
