//! [`Mapping`]: the one owner of a mapped segment — the file, its shared
//! mapping and the SIGBUS guard of that range — and the only place that
//! turns the mapping into the core's safe view, a `&[Word]`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};
use perfabi::Word;

use crate::sigbus::Guard;

/// A segment file mapped shared, read-only (a reader) or writable (its
/// writer), registered with the SIGBUS guard.
///
/// # Safety (of the type, stated once)
///
/// The memory is shared with other processes (or the kernel), which may
/// change it at any time, and someone may truncate the file under it. So it
/// is only ever seen as atomic words ([`words`](Self::words)) — every access
/// an atomic 8-byte load, store or read-modify-write (or an rseq section's
/// `mov` on x86_64, itself an atomic 8-byte access) — and a load or store
/// to a page truncated away is caught by the guard registered for exactly
/// this range, which maps a zero page there and counts the fault: no access
/// can kill the process, and [`faulted`](Self::faulted) tells the caller
/// to throw what it read away. Callers stay safe.
pub(crate) struct Mapping {
    // Field order: the guard must be dropped before the mapping it guards.
    guard: Guard,
    /// The guard's fault count when the range was last mapped anew (by
    /// [`replace_file`](Self::replace_file)): faults past it hit the file
    /// mapped now.
    faults_seen: AtomicU64,
    /// The file mapped, kept by a writable mapping only (after a
    /// `replace_file`, the descriptor refers to the new file). A read-only
    /// mapping keeps no descriptor: the mapping alone holds the file, so a
    /// reader holds no descriptor per segment and does not keep the kernel
    /// module's device open (the module may be unloaded while mapped).
    file: Option<File>,
    map: MmapRaw,
}

impl Mapping {
    /// Maps the first `len` bytes of `file` shared and read-only (the
    /// descriptor is not kept). `len` is a multiple of 8 (whole words).
    pub(crate) fn read_only(file: &File, len: usize) -> io::Result<Self> {
        let map = MmapOptions::new().len(len).map_raw_read_only(file)?;
        Ok(Self::guarded(None, map, false))
    }

    /// Maps the whole of `file` shared and writable, and keeps it.
    pub(crate) fn writable(file: File) -> io::Result<Self> {
        let map = MmapRaw::map_raw(&file)?;
        Ok(Self::guarded(Some(file), map, true))
    }

    fn guarded(file: Option<File>, map: MmapRaw, writable: bool) -> Self {
        // SAFETY: the range is `map`, which this Mapping owns and which is
        // dropped after the guard (field order).
        let guard = unsafe { Guard::register(map.as_ptr() as usize, map.len(), writable) };
        Self {
            guard,
            faults_seen: AtomicU64::new(0),
            file,
            map,
        }
    }

    /// The mapping as atomic words: the core's safe view of shared memory.
    #[inline]
    pub(crate) fn words(&self) -> &[Word] {
        // SAFETY: the mapping is page aligned (so 8-byte aligned), its length
        // a multiple of 8 (`read_only`'s contract; `writable` maps whole
        // files, which writers size in pages), and it lives as long as
        // `self`. Shared memory may change at any time, which is why it is
        // only ever seen as atomics (the type's safety section). Of a
        // read-only mapping this crate only ever makes loads that read each
        // word whole and write nothing: relaxed 8-byte atomic loads (the
        // core's protocol) and, on AVX processors, 16-byte loads that are
        // single-copy atomic as a whole (`pair_loads`), both permitted on
        // read-only memory; never a read-modify-write. The type is crate-private so
        // that no caller can store into one. A truncated page is caught by the
        // guard of exactly this range.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr() as *const Word, self.map.len() / 8) }
    }

    /// Whether an access hit a page someone truncated away (since the file
    /// mapped now was mapped): what was read is then void.
    #[inline]
    pub(crate) fn faulted(&self) -> bool {
        self.guard.faults() > self.faults_seen.load(Ordering::Acquire)
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is mapped (never true: mappings are not empty).
    pub(crate) fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// The file mapped now, if this mapping keeps it (a writable one).
    pub(crate) fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// Replaces the file under a writable mapping with `new` (at least as
    /// long), mapped at the same addresses, so that every word keeps its
    /// address and concurrent users keep working; their accesses land in the
    /// old or the new file. The descriptor of [`file`](Self::file) then
    /// refers to `new`.
    pub(crate) fn replace_file(&self, new: &File) -> io::Result<()> {
        // Only a writable mapping keeps its file.
        let Some(file) = self.file.as_ref() else {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "a read-only mapping cannot be given a new file",
            ));
        };
        if new.metadata()?.len() < self.map.len() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the new file is shorter than the mapping",
            ));
        }
        // Faults counted from here on may be a handler still running for
        // the old file, whose zero page could land over the new mapping:
        // they count as damage of the new file, to be mended again.
        let seen = self.guard.faults();
        // SAFETY: the range is exactly this Mapping's own (page aligned,
        // `len` bytes, which `new` has, checked above), owned by `self.map`
        // and unmapped only when it drops. MAP_FIXED replaces it atomically:
        // the memory stays mapped, with the same protection, throughout, so
        // concurrent users — who access it only through atomics — keep valid
        // addresses.
        unsafe {
            rustix::mm::mmap(
                self.map.as_mut_ptr().cast(),
                self.map.len(),
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED | rustix::mm::MapFlags::FIXED,
                new,
                0,
            )
        }?;
        // The descriptor number stays, and now refers to the new file.
        // SAFETY: both descriptors are open and owned (`new` by the caller,
        // `file` by this Mapping); dup2 only makes `file`'s number refer to
        // `new`'s open file, which `file` then owns; nothing else uses that
        // number.
        if unsafe { libc::dup2(new.as_raw_fd(), file.as_raw_fd()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        self.faults_seen.store(seen, Ordering::Release);
        Ok(())
    }
}
