//! Byte layout of a perfabi v1 segment: constants and plain-old-data structs.
//!
//! Every struct here mirrors a table of `spec/PERFABI.md` and a struct of
//! `spec/perfabi.h`; `tests/c_layout.rs` proves that both agree field by field.
//! All multi-byte fields are in the writer's native byte order (the header's
//! `byte_order` word tells a reader which one). Every struct is a multiple of
//! 8 bytes and 8-byte aligned, so a reader can copy it out of shared memory
//! with 8-byte atomic loads only (see [`crate::protocol`]).

use bytemuck::{Pod, Zeroable};

/// The first 8 bytes of every segment.
pub const MAGIC: [u8; 8] = *b"PERFABI\0";
/// ABI major version this crate reads and writes. A different major is refused.
pub const ABI_MAJOR: u16 = 1;
/// ABI minor version of a segment with metric families (spec §4.1). A
/// writer that uses no families writes a 1.0 segment (minor 0, 192-byte
/// header); readers accept any minor.
pub const ABI_MINOR: u16 = 1;
/// Written as a native `u32`: a reader on the other byte order sees it swapped.
pub const BYTE_ORDER_MARK: u32 = 0x0102_0304;
/// Cache line size assumed by the layout (the sequence word sits alone on one).
pub const CACHE_LINE: usize = 64;

/// Size of [`Header`] in ABI 1.0; `header_size` in a segment is at least this.
pub const HEADER_SIZE_V1_0: usize = core::mem::size_of::<Header>();
/// Size of the header of ABI 1.1: [`Header`] followed by [`FamilyHeader`].
pub const HEADER_SIZE_V1_1: usize = HEADER_SIZE_V1_0 + core::mem::size_of::<FamilyHeader>();
/// Size of one [`FamilyEntry`].
pub const FAMILY_ENTRY_SIZE: usize = core::mem::size_of::<FamilyEntry>();
/// Size of one [`MemberEntry`].
pub const MEMBER_ENTRY_SIZE: usize = core::mem::size_of::<MemberEntry>();
/// Size of one [`InstanceEntry`].
pub const INSTANCE_ENTRY_SIZE: usize = core::mem::size_of::<InstanceEntry>();
/// Size of one [`DamonRecord`].
pub const DAMON_RECORD_SIZE: usize = core::mem::size_of::<DamonRecord>();
/// Size of the [`CpuBlockHead`] at the start of every per-CPU block.
pub const CPU_BLOCK_HEAD_SIZE: usize = core::mem::size_of::<CpuBlockHead>();

/// Bytes of an instance name field; names hold at most `NAME_LEN - 1` bytes.
pub const NAME_LEN: usize = 64;
/// Bytes of a unit field; units hold at most `UNIT_LEN - 1` bytes.
pub const UNIT_LEN: usize = 16;

/// Bytes of a family's help field; help holds at most `HELP_LEN - 1` bytes.
pub const HELP_LEN: usize = 128;
/// Bytes of a family's instance dimension field (a label key).
pub const DIMENSION_LEN: usize = 32;
/// Bytes of a member's instance field; at most `INSTANCE_LEN - 1` bytes.
pub const INSTANCE_LEN: usize = 64;
/// Extra labels a member may carry.
pub const MAX_LABELS: usize = 4;
/// Bytes of a label key field; keys hold at most `LABEL_KEY_LEN - 1` bytes.
pub const LABEL_KEY_LEN: usize = 16;
/// Bytes of a label value field; at most `LABEL_VALUE_LEN - 1` bytes.
pub const LABEL_VALUE_LEN: usize = 48;
/// Most buckets of a histogram, the last one (`+Inf`) included.
pub const MAX_BUCKETS: u32 = 32;
/// Fewest buckets of a histogram: one finite bound and `+Inf`.
pub const MIN_BUCKETS: u32 = 2;
/// Largest family table capacity a segment may declare.
pub const MAX_FAMILIES: u32 = 1 << 16;
/// Largest member table capacity a segment may declare.
pub const MAX_MEMBERS: u32 = 1 << 16;

/// Smallest page size a segment may declare.
pub const MIN_PAGE_SIZE: u32 = 4096;
/// Largest page size a segment may declare.
pub const MAX_PAGE_SIZE: u32 = 65536;
/// Largest CPU count a segment may declare (Linux's largest `NR_CPUS`).
pub const MAX_CPUS: u32 = 8192;
/// Largest instance table capacity a segment may declare.
pub const MAX_INSTANCES: u32 = 1 << 16;
/// Largest per-CPU DAMON region ring a segment may declare.
pub const MAX_DAMON_CAPACITY: u32 = 1 << 20;

/// `flags` bit: the writer closed the segment cleanly; values are final.
pub const FLAG_CLOSED: u64 = 1 << 0;
/// `flags` bit: the writer is the kernel module (no pid, no process to check).
pub const FLAG_KERNEL: u64 = 1 << 1;
/// `flags` bit: the writer holds an open-file-description write lock on
/// bytes 0..8 of the segment file for as long as it lives (§10): a file
/// whose bytes nobody write-locks has lost its writer, in whatever pid or
/// time namespace it ran.
pub const FLAG_LIVE_LOCK: u64 = 1 << 2;

/// The segment header, at offset 0 of the header page.
///
/// Fields up to `heartbeat_interval_ns` are written once, before the segment
/// becomes visible, and never change. `gen1`, `gen2`, `heartbeat_ns`, `flags`
/// and `instances_used` change while the segment lives and are only ever
/// read and written as whole 8-byte atomic words.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// ABI major version ([`ABI_MAJOR`]).
    pub abi_major: u16,
    /// ABI minor version; fields appended by newer minors are ignored.
    pub abi_minor: u16,
    /// Bytes of header the writer filled in; at least [`HEADER_SIZE_V1_0`].
    pub header_size: u32,
    /// [`BYTE_ORDER_MARK`] in the writer's byte order.
    pub byte_order: u32,
    /// Page size the writer used for alignment, a power of two.
    pub page_size: u32,
    /// Number of per-CPU blocks.
    pub nr_cpus: u32,
    /// Pages in one per-CPU block.
    pub pages_per_cpu: u32,
    /// Capacity of the instance table (and of the counter array of each CPU).
    pub max_instances: u32,
    /// DAMON region records in the ring of each CPU.
    pub damon_capacity: u32,
    /// Size of one instance entry ([`INSTANCE_ENTRY_SIZE`]).
    pub instance_entry_size: u32,
    /// Size of one DAMON record ([`DAMON_RECORD_SIZE`]).
    pub damon_record_size: u32,
    /// Offset of the counter array inside each per-CPU block.
    pub counters_offset: u32,
    /// Offset of the DAMON region ring inside each per-CPU block.
    pub damon_offset: u32,
    /// Total bytes of the segment.
    pub segment_size: u64,
    /// Offset of the instance table (page aligned).
    pub instances_offset: u64,
    /// Bytes reserved for the instance table (whole pages).
    pub instances_size: u64,
    /// Offset of the block of CPU 0 (page aligned).
    pub cpu_area_offset: u64,
    /// Distance between consecutive per-CPU blocks: `pages_per_cpu * page_size`.
    pub cpu_block_size: u64,
    /// Random non-zero value, new each time a writer creates the segment.
    pub epoch: u64,
    /// Process id of the writer; 0 for the kernel module.
    pub writer_pid: u64,
    /// `CLOCK_BOOTTIME` nanoseconds at which the writer process started
    /// (kernel module: when it was loaded); with `writer_pid` it tells the
    /// writer from a later process that reuses its pid.
    pub writer_start_ns: u64,
    /// How often the writer promises to refresh `heartbeat_ns`; 0 = never.
    pub heartbeat_interval_ns: u64,
    /// Metadata generation, incremented *before* a metadata change.
    pub gen1: u64,
    /// Metadata generation, incremented *after* a metadata change.
    pub gen2: u64,
    /// `CLOCK_BOOTTIME` nanoseconds of the writer's last heartbeat.
    pub heartbeat_ns: u64,
    /// [`FLAG_CLOSED`], [`FLAG_KERNEL`], [`FLAG_LIVE_LOCK`].
    pub flags: u64,
    /// Instance slots `0..instances_used` may be live; the rest are free.
    pub instances_used: u64,
    /// Zero in ABI 1.0.
    pub reserved: [u64; 3],
}

/// `magic` as the native 8-byte word it is read as.
pub const MAGIC_WORD: u64 = u64::from_ne_bytes(MAGIC);
/// Word index of `epoch`.
pub const HEADER_EPOCH_WORD: usize = core::mem::offset_of!(Header, epoch) / 8;
/// Word index (8-byte units from the start of the header) of `gen1`.
pub const HEADER_GEN1_WORD: usize = core::mem::offset_of!(Header, gen1) / 8;
/// Word index of `gen2`.
pub const HEADER_GEN2_WORD: usize = core::mem::offset_of!(Header, gen2) / 8;
/// Word index of `heartbeat_ns`.
pub const HEADER_HEARTBEAT_WORD: usize = core::mem::offset_of!(Header, heartbeat_ns) / 8;
/// Word index of `flags`.
pub const HEADER_FLAGS_WORD: usize = core::mem::offset_of!(Header, flags) / 8;
/// Word index of `instances_used`.
pub const HEADER_USED_WORD: usize = core::mem::offset_of!(Header, instances_used) / 8;

/// Header fields appended by ABI 1.1 (at byte [`HEADER_SIZE_V1_0`] of the
/// header, present when `abi_minor >= 1`): where the family and member
/// tables are and how many of their slots are in use. The tables sit after
/// the per-CPU area (spec §4.1), where a 1.0 reader does not look.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct FamilyHeader {
    /// Offset of the family table (page aligned); ignored if `max_families` is 0.
    pub families_offset: u64,
    /// Bytes of the family table (whole pages).
    pub families_size: u64,
    /// Offset of the member table (page aligned); ignored if `max_members` is 0.
    pub members_offset: u64,
    /// Bytes of the member table (whole pages).
    pub members_size: u64,
    /// Family table capacity, 0..=[`MAX_FAMILIES`].
    pub max_families: u32,
    /// Member table capacity, 0..=[`MAX_MEMBERS`]; 0 if `max_families` is 0.
    pub max_members: u32,
    /// Size of one family entry ([`FAMILY_ENTRY_SIZE`]).
    pub family_entry_size: u32,
    /// Size of one member entry ([`MEMBER_ENTRY_SIZE`]).
    pub member_entry_size: u32,
    /// **Dynamic, under gen1/gen2.** Family slots `0..families_used` may be live.
    pub families_used: u64,
    /// **Dynamic, under gen1/gen2.** Member slots `0..members_used` may be live.
    pub members_used: u64,
}

/// Number of 8-byte words in [`FamilyHeader`].
pub const FAMILY_HEADER_WORDS: usize = core::mem::size_of::<FamilyHeader>() / 8;
/// Word index (from the segment start) of `families_used`.
pub const HEADER_FAMILIES_USED_WORD: usize =
    (HEADER_SIZE_V1_0 + core::mem::offset_of!(FamilyHeader, families_used)) / 8;
/// Word index (from the segment start) of `members_used`.
pub const HEADER_MEMBERS_USED_WORD: usize =
    (HEADER_SIZE_V1_0 + core::mem::offset_of!(FamilyHeader, members_used)) / 8;

/// What a family's values are (spec §5.1). The values 1 and 2 are the
/// [`Semantics`] of ABI 1.0 entries, which read as families of these kinds.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Monotonic count; the total is the sum over CPUs.
    Counter = 1,
    /// A level; the total is the sum of the per-CPU contributions.
    Gauge = 2,
    /// A high-water mark per CPU; the total is the maximum over CPUs.
    Peak = 3,
    /// Observations in fixed buckets, with their count and sum, per CPU.
    Histogram = 4,
}

impl Kind {
    /// Decodes the `kind` field.
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Counter),
            2 => Some(Self::Gauge),
            3 => Some(Self::Peak),
            4 => Some(Self::Histogram),
            _ => None,
        }
    }
    /// Lower-case name as used in text output and the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Peak => "peak",
            Self::Histogram => "histogram",
        }
    }
}

impl From<Semantics> for Kind {
    fn from(s: Semantics) -> Self {
        match s {
            Semantics::Counter => Self::Counter,
            Semantics::Instant => Self::Gauge,
        }
    }
}

/// How a histogram's bucket bounds are given (spec §5.1).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BucketLayout {
    /// Not a histogram.
    None = 0,
    /// Bound `k` is `2^(log2_first + k)`.
    Log2 = 1,
    /// Bounds are listed in `bounds`.
    Explicit = 2,
}

/// How the gauges of one family merge across the writers of a segment
/// directory (spec §5.1, §15.4): stored in a gauge family's word at 256
/// (`gauge_mode`, a histogram's `bucket_layout`). Only live writers' gauges
/// count in every mode: a dead writer's gauge is gone.
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GaugeMode {
    /// The sum of the live writers' values (the default, and every 1.1
    /// gauge's).
    #[default]
    Sum = 0,
    /// The largest live writer's value.
    Max = 1,
    /// The smallest live writer's value.
    Min = 2,
    /// Never merged: one series per live writer, labelled by the writer.
    All = 3,
}

impl GaugeMode {
    /// The mode stored as `v`, if this version defines it.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Sum,
            1 => Self::Max,
            2 => Self::Min,
            3 => Self::All,
            _ => return None,
        })
    }

    /// Its name in the spec and in text formats: `sum`, `max`, `min`, `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Max => "max",
            Self::Min => "min",
            Self::All => "all",
        }
    }
}

/// A unit: dimensions and scales of space, time and count, after PCP's
/// `pmUnits`, plus what a count counts (spec §5.2). 8 bytes, one word.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct Unit {
    /// Power of space (bytes), -3..=3.
    pub dim_space: i8,
    /// Power of time, -3..=3.
    pub dim_time: i8,
    /// Power of count, -3..=3.
    pub dim_count: i8,
    /// Space scale: 0 byte, 1 KiB, 2 MiB, 3 GiB, 4 TiB, 5 PiB, 6 EiB; 0 if
    /// `dim_space` is 0.
    pub scale_space: u8,
    /// Time scale: 0 ns, 1 µs, 2 ms, 3 s, 4 min, 5 h; 0 if `dim_time` is 0.
    pub scale_time: u8,
    /// Count scale: a power of ten, -8..=7; 0 if `dim_count` is 0.
    pub scale_count: i8,
    /// What the value is beyond its dimensions: 0 plain, 1 pages (a count of
    /// memory pages), 2 ratio (a dimensionless fraction, 1 = all).
    pub quantity: u8,
    /// Zero.
    pub reserved: u8,
}

/// One metric family (spec §5.1): name, help, kind, unit, the dimension its
/// instances vary along, and a histogram's buckets.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct FamilyEntry {
    /// Family name, NUL padded (the naming rule of §5).
    pub name: [u8; NAME_LEN],
    /// One line of help: printable ASCII, NUL padded.
    pub help: [u8; HELP_LEN],
    /// Name of the instance dimension (a label key such as `device`); empty
    /// for a family of a single instance.
    pub dimension: [u8; DIMENSION_LEN],
    /// Registration id: non-zero, unique among families, never reused.
    pub reg_id: u64,
    /// [`SlotState`].
    pub state: u32,
    /// [`Kind`].
    pub kind: u32,
    /// [`Unit`].
    pub unit: Unit,
    /// [`ValueType`].
    pub value_type: u32,
    /// Buckets of a histogram, `+Inf` included (2..=[`MAX_BUCKETS`]); else 0.
    pub nr_buckets: u32,
    /// A histogram's [`BucketLayout`]; a gauge's [`GaugeMode`] (`gauge_mode`
    /// in the spec: the same word); 0 for the other kinds.
    pub bucket_layout: u32,
    /// Log2 layout: exponent of the first bound; else 0.
    pub log2_first: u32,
    /// Explicit layout: the `nr_buckets - 1` finite upper bounds, strictly
    /// increasing; every other word 0.
    pub bounds: [u64; MAX_BUCKETS as usize - 1],
}

/// One `key=value` label of a member.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct Label {
    /// Key, NUL padded; empty = unused.
    pub key: [u8; LABEL_KEY_LEN],
    /// Value, NUL padded.
    pub value: [u8; LABEL_VALUE_LEN],
}

/// One instance of a family (spec §5.3): its value of the family's
/// dimension, its labels, and where its values are.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct MemberEntry {
    /// The instance's value of the family's dimension (`sda`), NUL padded.
    pub instance: [u8; INSTANCE_LEN],
    /// Registration id: non-zero, unique among members, never reused.
    pub reg_id: u64,
    /// [`SlotState`].
    pub state: u32,
    /// Slot of the member's family in the family table.
    pub family: u32,
    /// First value slot of the member in every per-CPU counter array.
    pub value_slot: u32,
    /// Instance number, stable for one instance string within the family.
    pub instance_id: u32,
    /// Zero.
    pub reserved0: u64,
    /// Extra labels; unused ones all zero, used ones first.
    pub labels: [Label; MAX_LABELS],
    /// Zero.
    pub reserved: [u64; 4],
}

/// Number of 8-byte words in one [`FamilyEntry`].
pub const FAMILY_ENTRY_WORDS: usize = FAMILY_ENTRY_SIZE / 8;
/// Number of 8-byte words in one [`MemberEntry`].
pub const MEMBER_ENTRY_WORDS: usize = MEMBER_ENTRY_SIZE / 8;

/// State of an instance slot.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Never used, or deleted: readers skip it.
    Free = 0,
    /// Registered: name, unit, semantics, type and values are meaningful.
    Live = 1,
}

/// How a value evolves.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Semantics {
    /// Monotonic count; readers compute rates from differences.
    Counter = 1,
    /// Level (gauge); the value is the sum of the per-CPU contributions.
    Instant = 2,
}

/// How the 8 bytes of a value are interpreted.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// Unsigned 64-bit; arithmetic wraps modulo 2^64.
    U64 = 1,
    /// Signed 64-bit two's complement; arithmetic wraps.
    I64 = 2,
}

impl Semantics {
    /// Decodes the `semantics` field.
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Counter),
            2 => Some(Self::Instant),
            _ => None,
        }
    }
    /// Lower-case name as used in text output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Instant => "instant",
        }
    }
}

impl ValueType {
    /// Decodes the `value_type` field.
    pub fn from_raw(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::U64),
            2 => Some(Self::I64),
            _ => None,
        }
    }
    /// Lower-case name as used in text output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::U64 => "u64",
            Self::I64 => "i64",
        }
    }
}

/// One slot of the instance table. Slot `i` names the counter at index `i` of
/// every per-CPU counter array.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct InstanceEntry {
    /// UTF-8 name, NUL padded, 1..=63 bytes (rules in [`crate::name`]).
    pub name: [u8; NAME_LEN],
    /// Unit such as `bytes`, `ns`, `count`; ASCII, NUL padded, 0..=15 bytes.
    pub unit: [u8; UNIT_LEN],
    /// Registration id: unique within an epoch, never reused, 0 when never
    /// registered. A reused slot gets a new id.
    pub reg_id: u64,
    /// [`SlotState`].
    pub state: u32,
    /// [`Semantics`].
    pub semantics: u32,
    /// [`ValueType`].
    pub value_type: u32,
    /// Zero in ABI 1.0.
    pub reserved0: u32,
    /// Zero in ABI 1.0.
    pub reserved: [u64; 3],
}

/// First 128 bytes of every per-CPU block.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct CpuBlockHead {
    /// Update sequence: odd while a multi-word update of this block is in
    /// progress, +2 per update. Alone on its cache line.
    pub seq: u64,
    /// Padding that keeps `seq` alone on its cache line.
    pub seq_pad: [u64; 7],
    /// Index of the ring slot the writer fills next (informative for readers).
    pub damon_next: u64,
    /// DAMON region records this CPU's writer could not store.
    pub damon_dropped: u64,
    /// Zero in ABI 1.0.
    pub reserved: [u64; 6],
}

/// Word index, inside a per-CPU block, of `seq`.
pub const CPU_SEQ_WORD: usize = core::mem::offset_of!(CpuBlockHead, seq) / 8;
/// Word index, inside a per-CPU block, of `damon_next`.
pub const CPU_DAMON_NEXT_WORD: usize = core::mem::offset_of!(CpuBlockHead, damon_next) / 8;
/// Word index, inside a per-CPU block, of `damon_dropped`.
pub const CPU_DAMON_DROPPED_WORD: usize = core::mem::offset_of!(CpuBlockHead, damon_dropped) / 8;

/// One DAMON region of one aggregation of one (monitor, target), as stored in
/// a per-CPU ring. A slot whose `aggregation` is 0 is empty.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct DamonRecord {
    /// Monitor id: the kdamond thread id for the kernel module, a writer
    /// chosen id for userspace writers.
    pub monitor_id: u64,
    /// DAMON target id (index of the target in its context, or a pid).
    pub target_id: u64,
    /// Aggregation index: 1, 2, 3… per (monitor, target); 0 = empty slot.
    pub aggregation: u64,
    /// Index of this region in its aggregation, `0..nr_regions`.
    pub region_index: u32,
    /// Number of regions in the aggregation.
    pub nr_regions: u32,
    /// First address of the region.
    pub start: u64,
    /// One past the last address of the region.
    pub end: u64,
    /// Samples in the aggregation interval that saw an access.
    pub nr_accesses: u32,
    /// Aggregation intervals the region kept its access pattern.
    pub age: u32,
    /// Sampling interval, microseconds.
    pub sample_us: u32,
    /// Aggregation interval, microseconds.
    pub aggr_us: u32,
}

/// Number of 8-byte words in one [`DamonRecord`].
pub const DAMON_RECORD_WORDS: usize = DAMON_RECORD_SIZE / 8;
/// Number of 8-byte words in one [`InstanceEntry`].
pub const INSTANCE_ENTRY_WORDS: usize = INSTANCE_ENTRY_SIZE / 8;
/// Number of 8-byte words in [`Header`] (ABI 1.0).
pub const HEADER_WORDS: usize = HEADER_SIZE_V1_0 / 8;

/// A header from its bytes (read with `pread` from a file, say).
pub fn header_from_bytes(b: &[u8; HEADER_SIZE_V1_0]) -> Header {
    bytemuck::pod_read_unaligned(b)
}

/// A header from the words it was copied out of a segment with.
pub fn header_from_words(words: [u64; HEADER_WORDS]) -> Header {
    bytemuck::cast(words)
}

/// Rounds `v` up to a multiple of `align` (a power of two); `None` on overflow.
pub const fn align_up(v: u64, align: u64) -> Option<u64> {
    match v.checked_add(align - 1) {
        Some(x) => Some(x & !(align - 1)),
        None => None,
    }
}

const _: () = {
    assert!(HEADER_SIZE_V1_0 == 192);
    assert!(HEADER_SIZE_V1_1 == 256);
    assert!(FAMILY_ENTRY_SIZE == 512);
    assert!(MEMBER_ENTRY_SIZE == 384);
    assert!(core::mem::size_of::<Unit>() == 8);
    assert!(core::mem::offset_of!(FamilyEntry, unit) % 8 == 0);
    assert!(core::mem::offset_of!(FamilyEntry, bounds) == 264);
    assert!(core::mem::offset_of!(MemberEntry, labels) == 96);
    assert!(INSTANCE_ENTRY_SIZE == 128);
    assert!(DAMON_RECORD_SIZE == 64);
    assert!(CPU_BLOCK_HEAD_SIZE == 128);
    assert!(CPU_SEQ_WORD == 0);
    assert!(core::mem::offset_of!(CpuBlockHead, damon_next) == CACHE_LINE);
};
