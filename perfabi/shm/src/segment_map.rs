//! A reader's read-only, SIGBUS-guarded mapping of a whole segment.
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

use std::sync::atomic::Ordering;

use perfabi::layout::{HEADER_EPOCH_WORD, HEADER_SIZE_V1_0, HEADER_SIZE_V1_1, MAGIC_WORD};
use perfabi::trust::Origin;
use perfabi::Layout;

use crate::mapping::Mapping;
use crate::safe_open::{Entry, FileId};

/// The header's segment size, validated against an unbounded length.
fn segment_size(words: &[perfabi::Word]) -> Result<u64, perfabi::Error> {
    let h = perfabi::load_header(words)?;
    let fh = perfabi::load_family_header(words, &h);
    Ok(perfabi::validate_header(&h, &fh, u64::MAX)?.segment_size as u64)
}

/// A reader's read-only mapping of a whole segment, the file it maps,
/// and its validated layout.
pub struct SegmentMap {
    map: Mapping,
    id: FileId,
    file_len: Option<u64>,
    layout: Layout,
    /// `layout`'s value blocks, for [`Self::values`].
    blocks: perfabi::Blocks,
    /// How [`Self::view`] copies value words (chosen once per mapping).
    copy: perfabi::CopyWords,
}

/// Why a mapping could not be made.
#[derive(Debug)]
pub enum MapError {
    /// A system call failed.
    Io(io::Error),
    /// The header is invalid.
    Abi(perfabi::Error),
    /// A hole at this offset, inside the segment.
    Sparse(u64),
    /// The declared segment size, over the limit.
    TooLarge(u64),
    /// The header changed between the checks and the mapping.
    Changed,
    /// A file too short to hold a header.
    TooShort,
    /// A file that holds fewer bytes than its size says: a pseudo-file of
    /// `/sys` or `/proc` (a sysfs attribute says 4096 and holds a line).
    ShortRead {
        /// The size `fstat` gave.
        len: u64,
        /// The bytes a read found.
        got: usize,
    },
}

impl SegmentMap {
    /// Maps `file` (described by `md`, found at `origin`) read-only and
    /// validates it. A file's header is read with `pread` (which allocates
    /// nothing, even from a hole); nothing is mapped until the segment is
    /// known to be at most `limit` bytes and, for a file, hole-free. Only
    /// the declared segment is mapped.
    pub fn new(file: File, md: &Metadata, origin: Origin, limit: u64) -> Result<Self, MapError> {
        let file_len = (origin == Origin::File).then_some(md.len());
        Self::map(file, FileId::of(md), file_len, None, limit)
    }

    /// Maps the segment held in a BPF map (`file` its descriptor, checked
    /// by [`crate::bpf_pin::open_map`]; `pin` the identity of the pin it
    /// was found at; `map_bytes` what the map holds) read-only and
    /// validates it. Like a device, its first page tells the segment's
    /// size, which must fit in the map: a mapping past a map's end is
    /// refused by the kernel, never a page that faults later.
    pub fn new_bpf_map(
        file: File,
        pin: FileId,
        map_bytes: u64,
        limit: u64,
    ) -> Result<Self, MapError> {
        Self::map(file, pin, None, Some(map_bytes), limit)
    }

    fn map(
        file: File,
        id: FileId,
        file_len: Option<u64>,
        map_bytes: Option<u64>,
        limit: u64,
    ) -> Result<Self, MapError> {
        let declared = match file_len {
            Some(len) => {
                if len < HEADER_SIZE_V1_0 as u64 {
                    return Err(MapError::TooShort);
                }
                // The 1.1 header's 256 bytes where the file has them.
                let mut h = [0u8; HEADER_SIZE_V1_1];
                let n = (len.min(HEADER_SIZE_V1_1 as u64)) as usize;
                let got = read_at_most(&file, &mut h[..n]).map_err(MapError::Io)?;
                if got < n {
                    return Err(MapError::ShortRead { len, got });
                }
                perfabi::validate_prefix(&h[..n], u64::MAX)
                    .map_err(MapError::Abi)?
                    .segment_size as u64
            }
            // A device (the kernel module's) or a BPF map: its first page
            // tells.
            None => {
                let probe = Mapping::read_only(&file, page_size()).map_err(MapError::Io)?;
                segment_size(probe.words()).map_err(MapError::Abi)?
            }
        };
        if declared > limit {
            return Err(MapError::TooLarge(declared));
        }
        if let Some(have) = map_bytes.filter(|&have| declared > have) {
            return Err(MapError::Abi(perfabi::Error::Truncated {
                needed: declared,
                have,
            }));
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
        let map = Mapping::read_only(&file, len).map_err(MapError::Io)?;
        let layout = *perfabi::SegmentView::new(map.words())
            .map_err(MapError::Abi)?
            .layout();
        if map.faulted() {
            return Err(MapError::Abi(perfabi::Error::Truncated {
                needed: declared,
                have: 0,
            }));
        }
        if layout.segment_size as u64 != declared {
            return Err(MapError::Changed);
        }
        Ok(Self {
            map,
            id,
            file_len,
            layout,
            blocks: perfabi::Blocks::of(&layout),
            copy: crate::pair_loads::copier(),
        })
    }

    /// Whether the file now holds less than its segment: shorter than it,
    /// or (judged from the blocks `lstat` counts, and then confirmed with
    /// `SEEK_HOLE`) holed. Its readers would read fresh zero pages there,
    /// allocating them.
    pub fn lost_data(&self, now: &Entry, reopen: impl FnOnce() -> Option<File>) -> bool {
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

    /// The identity of the file mapped.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// The file's length when it was mapped (`None`: a device or a BPF
    /// map, whose size never changes).
    pub fn file_len(&self) -> Option<u64> {
        self.file_len
    }

    /// The layout validated for this mapping.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The header as it is now, unvalidated (its geometry fields are the
    /// validated layout's; the others may have moved on).
    pub fn header(&self) -> Result<perfabi::layout::Header, perfabi::Error> {
        perfabi::load_header(self.map.words())
    }

    /// The header fields ABI 1.1 appended (all zero for a 1.0 segment), as
    /// they are now, unvalidated, like [`Self::header`]
    /// ([`perfabi::load_family_header`]).
    pub fn family_header(&self) -> Result<perfabi::layout::FamilyHeader, perfabi::Error> {
        let h = perfabi::load_header(self.map.words())?;
        Ok(perfabi::load_family_header(self.map.words(), &h))
    }

    /// A view of the segment through the protocol. It copies runs of
    /// value words with [`pair_loads::copier`](crate::pair_loads::copier)'s
    /// copier: one 16-byte load per aligned pair where the processor makes
    /// those atomic.
    #[inline]
    pub fn view(&self) -> perfabi::SegmentView<'_> {
        perfabi::SegmentView::from_validated(self.map.words(), self.layout)
            .expect("layout validated for this mapping")
            .with_copy(self.copy)
    }

    /// The value blocks of the segment, for the hot read paths (a few
    /// words, where [`view`](Self::view) copies the whole layout), with
    /// [`view`](Self::view)'s copier.
    #[inline]
    pub fn values(&self) -> perfabi::Values<'_> {
        perfabi::Values::new(self.map.words(), self.blocks, self.copy)
            .expect("layout validated for this mapping")
    }

    /// The mapped words, read-only and atomic: for code that reads the
    /// segment's bytes itself (a benchmark's floors), outside the protocol
    /// [`view`](Self::view) follows. A read that hits a truncated page
    /// returns zeros and sets [`faulted`](Self::faulted).
    pub fn words(&self) -> &[perfabi::Word] {
        self.map.words()
    }

    /// Whether a read hit a truncated page (the data read is then void).
    #[inline]
    pub fn faulted(&self) -> bool {
        self.map.faulted()
    }

    /// Whether what was read from the mapping since the last look stands:
    /// no read of it hit a truncated page ([`faulted`](Self::faulted))
    /// and it is [`intact`](Self::intact).
    #[inline]
    pub fn sound(&self) -> bool {
        !self.faulted() && self.intact()
    }

    /// Whether the header still shows the segment this mapping validated:
    /// the magic and the epoch are where they were. A file truncated to
    /// nothing and grown again reads as zeros; a writer that created its
    /// segment again in the same file wrote a new epoch.
    #[inline]
    pub fn intact(&self) -> bool {
        let w = self.map.words();
        w[0].load(Ordering::Relaxed) == MAGIC_WORD
            && w[HEADER_EPOCH_WORD].load(Ordering::Relaxed) == self.layout.epoch
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is mapped (never true: a segment is not empty).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// The offset of the first hole of `file` (`len` if it has none, or if the
/// filesystem cannot tell).
/// Fills `buf` from the start of `file` with `pread`, stopping early at
/// the end of the file; returns the bytes read.
fn read_at_most(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

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
