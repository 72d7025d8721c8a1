//! A read-only, SIGBUS-guarded mapping of a whole segment.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use memmap2::{MmapOptions, MmapRaw};
use perfabi::layout::HEADER_SIZE_V1_0;
use perfabi::sync::AtomicU64;
use perfabi::Layout;

use perfabi::sigbus::Guard;

/// Identity of the object behind a file descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

impl FileId {
    pub(crate) fn of(md: &std::fs::Metadata) -> Self {
        Self {
            dev: md.dev(),
            ino: md.ino(),
        }
    }
}

/// A read-only mapping registered with the SIGBUS guard.
struct Raw {
    // Field order: the guard must be dropped before the mapping it guards.
    guard: Option<Guard>,
    map: MmapRaw,
}

impl Raw {
    fn new(file: &File, len: usize) -> io::Result<Self> {
        let map = MmapOptions::new().len(len).map_raw_read_only(file)?;
        let guard = Guard::register(map.as_ptr() as usize, map.len(), false);
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
        self.guard.as_ref().is_some_and(Guard::faulted)
    }

    /// Validates the header (against an unbounded length) to learn the
    /// segment's size.
    fn segment_size(&self) -> Result<u64, perfabi::Error> {
        let mut h = [0u64; perfabi::layout::HEADER_WORDS];
        perfabi::protocol::load_words(self.words(), 0, &mut h);
        Ok(
            perfabi::validate_header(&perfabi::layout::header_from_words(h), u64::MAX)?.segment_size
                as u64,
        )
    }
}

/// The mapping, the file it maps, and its validated layout.
pub(crate) struct Mapping {
    raw: Raw,
    pub(crate) id: FileId,
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
}

impl Mapping {
    /// Maps `file` read-only and validates it. A regular file is mapped at
    /// its length; a device (the kernel module's `/dev/perfabi`, whose length
    /// is not known from `stat`) is mapped in two steps: its first page, to
    /// read `segment_size`, then the whole segment.
    pub(crate) fn new(file: File) -> Result<Self, MapError> {
        let md = file.metadata().map_err(MapError::Io)?;
        let id = FileId::of(&md);
        let len = if md.file_type().is_char_device() || md.file_type().is_block_device() {
            let probe = Raw::new(&file, page_size()).map_err(MapError::Io)?;
            probe.segment_size().map_err(MapError::Abi)?
        } else {
            md.len()
        };
        if len < HEADER_SIZE_V1_0 as u64 {
            return Err(MapError::Abi(perfabi::Error::Truncated {
                needed: HEADER_SIZE_V1_0 as u64,
                have: len,
            }));
        }
        let len = usize::try_from(len).map_err(|_| MapError::Abi(perfabi::Error::BadConfig))? & !7;
        let raw = Raw::new(&file, len).map_err(MapError::Io)?;
        let layout = *perfabi::SegmentView::new(raw.words())
            .map_err(MapError::Abi)?
            .layout();
        if raw.faulted() {
            return Err(MapError::Abi(perfabi::Error::Truncated {
                needed: len as u64,
                have: 0,
            }));
        }
        Ok(Self { raw, id, layout })
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

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.raw.map.len()
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}
