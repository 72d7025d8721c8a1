//! A read-only, SIGBUS-guarded mapping of a whole segment.
//!
//! Opening costs what the writer really allocated, never what a header
//! claims (`spec/PERFABI.md` §11.4): a segment file must have no hole in its
//! segment (on tmpfs, reading a hole allocates memory, so a 12 KB sparse
//! file could make a reader allocate gigabytes) and must fit in the reader's
//! size limit. Both are checked before anything past the first page is
//! touched.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::FileExt;

use memmap2::{MmapOptions, MmapRaw};
use perfabi::layout::{HEADER_EPOCH_WORD, HEADER_SIZE_V1_0, HEADER_WORDS, MAGIC_WORD};
use perfabi::safe_open::FileId;
use perfabi::sigbus::Guard;
use perfabi::sync::AtomicU64;
use perfabi::trust::Origin;
use perfabi::Layout;

/// A read-only mapping registered with the SIGBUS guard.
struct Raw {
    // Field order: the guard must be dropped before the mapping it guards.
    guard: Guard,
    map: MmapRaw,
}

impl Raw {
    fn new(file: &File, len: usize) -> io::Result<Self> {
        let map = MmapOptions::new().len(len).map_raw_read_only(file)?;
        // SAFETY: the range is `map`, owned by this Raw and dropped after
        // the guard (field order).
        let guard = unsafe { Guard::register(map.as_ptr() as usize, map.len(), false) };
        Ok(Self { guard, map })
    }

    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page aligned, its length a multiple of 8
        // (callers map whole words), and it lives as long as `self`. Another
        // process writes it, so it is only ever seen as atomics, and only read
        // with relaxed atomic loads of 8 bytes (perfabi::protocol), which Rust
        // permits on read-only memory. A load from a page truncated away is
        // caught by the SIGBUS guard registered for exactly this range, which
        // maps a zero page there and flags the mapping: no load can kill.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr() as *const AtomicU64, self.map.len() / 8)
        }
    }

    fn faulted(&self) -> bool {
        self.guard.faulted()
    }

    /// The header's segment size, validated against an unbounded length.
    fn segment_size(&self) -> Result<u64, perfabi::Error> {
        let mut h = [0u64; HEADER_WORDS];
        perfabi::protocol::load_words(self.words(), 0, &mut h);
        let h = perfabi::layout::header_from_words(h);
        Ok(perfabi::validate_header(&h, u64::MAX)?.segment_size as u64)
    }
}

/// The mapping, the file it maps, and its validated layout.
pub(crate) struct Mapping {
    raw: Raw,
    pub(crate) id: FileId,
    /// The file's length when it was mapped (`None`: a device).
    pub(crate) file_len: Option<u64>,
    pub(crate) layout: Layout,
}

// SAFETY: the mapping is only ever read through atomics (see `Raw::words`),
// and the guard and file are thread-safe.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

/// Why a mapping could not be made.
pub(crate) enum MapError {
    Io(io::Error),
    Abi(perfabi::Error),
    /// A hole at this offset, inside the segment.
    Sparse(u64),
    /// The declared segment size, over the limit.
    TooLarge(u64),
    /// The header changed between the checks and the mapping.
    Changed,
    /// A file too short to hold a header.
    TooShort,
}

impl Mapping {
    /// Maps `file` (described by `md`, found at `origin`) read-only and
    /// validates it. A file's header is read with `pread` (which allocates
    /// nothing, even from a hole); nothing is mapped until the segment is
    /// known to be at most `limit` bytes and, for a file, hole-free. Only
    /// the declared segment is mapped.
    pub(crate) fn new(
        file: File,
        md: &Metadata,
        origin: Origin,
        limit: u64,
    ) -> Result<Self, MapError> {
        let id = FileId::of(md);
        let file_len = (origin == Origin::File).then_some(md.len());
        let declared = match file_len {
            Some(len) => {
                if len < HEADER_SIZE_V1_0 as u64 {
                    return Err(MapError::TooShort);
                }
                let mut h = [0u8; HEADER_SIZE_V1_0];
                file.read_exact_at(&mut h, 0).map_err(MapError::Io)?;
                let h = perfabi::layout::header_from_bytes(&h);
                perfabi::validate_header(&h, u64::MAX).map_err(MapError::Abi)?;
                h.segment_size
            }
            // A device (the kernel module's): its first page tells.
            None => {
                let probe = Raw::new(&file, page_size()).map_err(MapError::Io)?;
                probe.segment_size().map_err(MapError::Abi)?
            }
        };
        if declared > limit {
            return Err(MapError::TooLarge(declared));
        }
        if let Some(len) = file_len {
            if declared > len {
                return Err(MapError::Abi(perfabi::Error::Truncated {
                    needed: declared,
                    have: len,
                }));
            }
            let hole = first_hole(&file, len).map_err(MapError::Io)?;
            if hole < declared {
                return Err(MapError::Sparse(hole));
            }
        }
        let len =
            usize::try_from(declared).map_err(|_| MapError::Abi(perfabi::Error::BadConfig))?;
        let raw = Raw::new(&file, len).map_err(MapError::Io)?;
        let layout = *perfabi::SegmentView::new(raw.words())
            .map_err(MapError::Abi)?
            .layout();
        if raw.faulted() {
            return Err(MapError::Abi(perfabi::Error::Truncated {
                needed: declared,
                have: 0,
            }));
        }
        if layout.segment_size as u64 != declared {
            return Err(MapError::Changed);
        }
        Ok(Self {
            raw,
            id,
            file_len,
            layout,
        })
    }

    /// Whether the file now holds less than its segment: shorter than it,
    /// or (judged from the blocks `lstat` counts, and then confirmed with
    /// `SEEK_HOLE`) holed. Its readers would read fresh zero pages there,
    /// allocating them.
    pub(crate) fn lost_data(
        &self,
        now: &perfabi::safe_open::Entry,
        reopen: impl FnOnce() -> Option<File>,
    ) -> bool {
        if self.file_len.is_none() {
            return false;
        }
        let size = self.layout.segment_size as u64;
        if now.len < size {
            return true;
        }
        if now.blocks.saturating_mul(512) >= size {
            return false;
        }
        reopen().is_some_and(|f| first_hole(&f, now.len).is_ok_and(|h| h < size))
    }

    /// A view of the segment through the protocol.
    pub(crate) fn view(&self) -> perfabi::SegmentView<'_> {
        perfabi::SegmentView::from_validated(self.raw.words(), self.layout)
            .expect("layout validated for this mapping")
    }

    /// Whether a read hit a truncated page (the data read is then void).
    pub(crate) fn faulted(&self) -> bool {
        self.raw.faulted()
    }

    /// Whether the header still shows the segment this mapping validated:
    /// the magic and the epoch are where they were. A file truncated to
    /// nothing and grown again reads as zeros; a writer that created its
    /// segment again in the same file wrote a new epoch.
    pub(crate) fn intact(&self) -> bool {
        let w = self.raw.words();
        w[0].load(perfabi::sync::Ordering::Relaxed) == MAGIC_WORD
            && w[HEADER_EPOCH_WORD].load(perfabi::sync::Ordering::Relaxed) == self.layout.epoch
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.raw.map.len()
    }
}

/// The offset of the first hole of `file` (`len` if it has none, or if the
/// filesystem cannot tell).
fn first_hole(file: &File, len: u64) -> io::Result<u64> {
    match rustix::fs::seek(file, rustix::fs::SeekFrom::Hole(0)) {
        Ok(at) => Ok(at.min(len)),
        // Filesystems without SEEK_HOLE support report none this way.
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOTSUP) => Ok(len),
        Err(e) => Err(e.into()),
    }
}

fn page_size() -> usize {
    rustix::param::page_size().max(4096)
}
