//! Typed errors of validation, reading and writing.

use core::fmt;

/// Which part of a segment an [`Error`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// The header page.
    Header,
    /// The instance table.
    Instances,
    /// The per-CPU blocks.
    CpuArea,
    /// The head of a per-CPU block (its sequence word and DAMON ring state).
    BlockHead,
    /// The counter array inside a per-CPU block.
    Counters,
    /// The DAMON region ring inside a per-CPU block.
    Damon,
    /// The family table (ABI 1.1).
    Families,
    /// The member table (ABI 1.1).
    Members,
}

impl Section {
    /// Lower-case name used in messages and test vectors.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Header => "header",
            Self::Instances => "instances",
            Self::CpuArea => "cpu-area",
            Self::BlockHead => "block-head",
            Self::Counters => "counters",
            Self::Damon => "damon",
            Self::Families => "families",
            Self::Members => "members",
        }
    }
}

/// A field of an instance table entry (spec §5), named in
/// [`Error::BadEntry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryField {
    /// `state`: neither FREE nor LIVE.
    State,
    /// `name`: no NUL, not UTF-8, or breaks the naming rule.
    Name,
    /// `unit`: no NUL, or bytes a unit may not hold.
    Unit,
    /// `reg_id`: 0, or the same as another live entry's.
    RegId,
    /// `semantics`: a value this version does not define.
    Semantics,
    /// `value_type`: a value this version does not define.
    ValueType,
}

impl EntryField {
    /// What is wrong with the field, in words.
    pub fn problem(self) -> &'static str {
        match self {
            Self::State => "undefined state (neither free nor live)",
            Self::Name => "bad name (1-63 bytes of dot-separated [A-Za-z0-9_] parts, the first starting with a letter, NUL-terminated)",
            Self::Unit => "bad unit (at most 15 printable ASCII bytes, NUL-terminated)",
            Self::RegId => "registration id 0, or the same as another live slot's",
            Self::Semantics => "undefined semantics",
            Self::ValueType => "undefined value type",
        }
    }
}

/// A field of a family table entry (spec §5.1), named in
/// [`Error::BadFamily`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FamilyField {
    /// `state`: neither FREE nor LIVE.
    State,
    /// `name`: no NUL, or breaks the naming rule of §5.
    Name,
    /// `help`: no NUL, or a byte that is not printable ASCII.
    Help,
    /// `dimension`: no NUL, or not a label key (§5.3).
    Dimension,
    /// `reg_id`: 0, or the same as another live family's.
    RegId,
    /// `kind`: a value this version does not define.
    Kind,
    /// `unit`: an encoding §5.2 does not allow.
    Unit,
    /// `value_type`: undefined, or not allowed for the kind.
    ValueType,
    /// `nr_buckets`, `bucket_layout`, `log2_first`: not a histogram's, or a
    /// histogram's out of range.
    Buckets,
    /// `bounds`: not strictly increasing, or non-zero past the last bound.
    Bounds,
    /// `gauge_mode` (a gauge's word at 256): a value this version does not
    /// define.
    GaugeMode,
}

impl FamilyField {
    /// What is wrong with the field, in words.
    pub fn problem(self) -> &'static str {
        match self {
            Self::State => "undefined state (neither free nor live)",
            Self::Name => "bad name (the naming rule of spec section 5)",
            Self::Help => "bad help (at most 127 printable ASCII bytes, NUL-terminated)",
            Self::Dimension => "bad dimension (empty, or a label key: [a-z][a-z0-9_]*, at most 31 bytes, not cpu, le, lower_bound or upper_bound)",
            Self::RegId => "registration id 0, or the same as another live family's",
            Self::Kind => "undefined kind",
            Self::Unit => "unit encoding not allowed (spec section 5.2)",
            Self::ValueType => "undefined value type, or one the kind does not allow",
            Self::Buckets => "bucket count or layout out of range for the kind",
            Self::Bounds => "bucket bounds not strictly increasing, or set past the last bound",
            Self::GaugeMode => "undefined gauge mode (0 sum, 1 max, 2 min, 3 all)",
        }
    }
}

/// A field of a member table entry (spec §5.3), named in
/// [`Error::BadMember`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberField {
    /// `state`: neither FREE nor LIVE.
    State,
    /// `instance`: no NUL, bytes an instance may not hold, empty in a
    /// family with a dimension (or not empty in one without), or the same
    /// as another live member's of the family.
    Instance,
    /// `reg_id`: 0, or the same as another live member's.
    RegId,
    /// `family`: not a live family.
    Family,
    /// `value_slot`: the member's values reach past `instances_used`, or
    /// share a slot with a live entry or another live member.
    ValueSlot,
    /// `instance_id`: the same as another live member's of the family.
    InstanceId,
    /// `labels`: a key or value breaks §5.3, keys repeat or name the
    /// family's dimension, or a used label follows an unused one.
    Labels,
    /// A reserved field is not zero.
    Reserved,
}

impl MemberField {
    /// What is wrong with the field, in words.
    pub fn problem(self) -> &'static str {
        match self {
            Self::State => "undefined state (neither free nor live)",
            Self::Instance => "bad instance (1-63 bytes of printable ASCII without spaces, quotes or backslashes; empty only in a family without dimension; unique in its family)",
            Self::RegId => "registration id 0, or the same as another live member's",
            Self::Family => "not the slot of a live family",
            Self::ValueSlot => "values past instances_used, or sharing a slot with another live entry or member",
            Self::InstanceId => "instance number the same as another live member's of the family",
            Self::Labels => "bad labels (keys [a-z][a-z0-9_]*, distinct, not the dimension, cpu, le, lower_bound or upper_bound; values 1-47 printable ASCII bytes without quotes or backslashes; used ones first)",
            Self::Reserved => "reserved field not zero",
        }
    }
}

/// Where a live name is: an instance table entry or a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Named {
    /// Instance table slot.
    Entry(u32),
    /// Family table slot.
    Family(u32),
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Entry(s) => write!(f, "instance slot {s}"),
            Self::Family(s) => write!(f, "family slot {s}"),
        }
    }
}

/// Everything that can go wrong when decoding, reading or writing a segment.
///
/// Each variant has a stable short [`code`](Error::code), used by the test
/// vectors in `spec/vectors/` and by tools that print machine-readable errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Fewer bytes are mapped than the header or the declared sections need.
    Truncated {
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        have: u64,
    },
    /// The first 8 bytes are not `PERFABI\0`.
    BadMagic,
    /// The byte-order mark is swapped: the segment was written on a machine of
    /// the other byte order.
    ForeignByteOrder,
    /// The byte-order mark is neither native nor swapped.
    BadByteOrder,
    /// The ABI major version is not one this reader knows.
    UnsupportedMajor(u16),
    /// `header_size` is smaller than ABI 1.0's header or larger than a page.
    BadHeaderSize(u32),
    /// The page size is not a power of two in 4 KiB..=64 KiB.
    BadPageSize(u32),
    /// The CPU count is 0 or larger than [`crate::layout::MAX_CPUS`].
    BadCpuCount(u32),
    /// A capacity (instances, DAMON ring) is 0 or absurdly large.
    BadCapacity,
    /// An entry or record size is not the one this major version defines.
    BadRecordSize,
    /// A section lies (partly) outside the segment, or its size overflows.
    OutOfBounds(Section),
    /// Two sections overlap or are out of order.
    Overlap(Section, Section),
    /// An offset is not aligned as the spec requires.
    Misaligned(Section),
    /// A consistent read did not succeed within its retry bound: a writer is
    /// updating (or died while updating) the given CPU's block.
    BusyCpu(u32),
    /// Metadata kept changing (or a writer died mid-change) for the whole
    /// retry bound.
    BusyMetadata,
    /// An instance name or unit is empty, too long or has a forbidden byte.
    BadName,
    /// A unit string has a forbidden byte or is too long, or a family's
    /// structured unit breaks §5.2 (a dimension, scale or quantity out of
    /// range).
    BadUnit,
    /// A live instance table entry breaks a rule of spec §5 (the slot, and
    /// which field).
    BadEntry {
        /// The entry's slot.
        slot: u32,
        /// The field that breaks its rule.
        field: EntryField,
    },
    /// Two live entries' names are one name to consumers (spec §5: equal
    /// [`clash_key`](crate::name::clash_key)s).
    NameClash {
        /// The later slot.
        slot: u32,
        /// The earlier slot it clashes with.
        other: u32,
    },
    /// A live family table entry breaks a rule of spec §5.1 (its slot, and
    /// which field).
    BadFamily {
        /// The entry's slot.
        slot: u32,
        /// The field that breaks its rule.
        field: FamilyField,
    },
    /// A live member table entry breaks a rule of spec §5.3 (its slot, and
    /// which field).
    BadMember {
        /// The entry's slot.
        slot: u32,
        /// The field that breaks its rule.
        field: MemberField,
    },
    /// A live family's name is one name to consumers with another live
    /// family's or entry's (spec §5: the same clash key), or one is the
    /// other's dotted prefix.
    FamilyClash {
        /// The family.
        family: u32,
        /// What it clashes with.
        other: Named,
    },
    /// In a consistent copy of a CPU's values, a histogram member's `count`
    /// is not the wrapping sum of its buckets (spec §5.1): a broken or
    /// hostile writer, since one observation is one multi-word update.
    BadHistogram {
        /// The member's slot in the member table.
        slot: u32,
        /// The CPU whose copy breaks the rule.
        cpu: u32,
    },
    /// `instances_size` is smaller than `max_instances` entries or not whole
    /// pages.
    BadTableSize,
    /// A family or member table (the section) is smaller than its
    /// capacity's entries or not whole pages; code `bad-table-size`.
    BadFamilyTableSize(Section),
    /// `pages_per_cpu` is 0, or `cpu_block_size` is not `pages_per_cpu`
    /// pages.
    BadBlockSize,
    /// The instance table is full.
    TableFull,
    /// A name is already registered, or a live name clashes with it (spec
    /// §5: the same [`clash_key`](crate::name::clash_key)).
    DuplicateName,
    /// An instance id does not name a live instance (never registered, or
    /// deleted).
    UnknownInstance,
    /// `set` was given an instance whose semantics is not `instant` (only
    /// an instantaneous value can be set; a counter only moves by deltas).
    NotInstant,
    /// A DAMON aggregation is malformed (no regions, overlapping regions,
    /// zero intervals, more regions than a ring can hold).
    BadAggregation,
    /// A counter group has more members than a single update can carry.
    GroupTooLarge,
    /// The configuration asks for a segment this ABI cannot describe.
    BadConfig,
    /// Help text too long or not printable ASCII (writer side).
    BadHelp,
    /// An instance dimension or label key is not a label key (writer side).
    BadLabelKey,
    /// An instance string or label value breaks §5.3 (writer side).
    BadInstance,
    /// Too many labels, or a label key repeated (writer side).
    BadLabels,
    /// Bucket count out of range, bounds not strictly increasing, or a
    /// log2 bound past 2^63 (writer side).
    BadBuckets,
    /// The family's kind does not allow the operation (observe on a
    /// counter, a peak update on a histogram) or the value type.
    WrongKind,
    /// A live instance of the family has this instance string already.
    DuplicateInstance,
    /// The segment has no family tables (a 1.0 segment) or they are full.
    NoFamilyRoom,
    /// The segment was closed by its writer.
    Closed,
    /// The calling thread has no rseq registration but the segment's writer
    /// updates per-CPU blocks with rseq (a thread created outside glibc).
    NoRseq,
}

impl Error {
    /// Stable, lower-case, hyphenated code of the variant (no payload).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Truncated { .. } => "truncated",
            Self::BadMagic => "bad-magic",
            Self::ForeignByteOrder => "foreign-byte-order",
            Self::BadByteOrder => "bad-byte-order",
            Self::UnsupportedMajor(_) => "unsupported-major",
            Self::BadHeaderSize(_) => "bad-header-size",
            Self::BadPageSize(_) => "bad-page-size",
            Self::BadCpuCount(_) => "bad-cpu-count",
            Self::BadCapacity => "bad-capacity",
            Self::BadRecordSize => "bad-record-size",
            Self::OutOfBounds(_) => "out-of-bounds",
            Self::Overlap(..) => "overlap",
            Self::Misaligned(_) => "misaligned",
            Self::BusyCpu(_) => "busy-cpu",
            Self::BusyMetadata => "busy-metadata",
            Self::BadName => "bad-name",
            Self::BadUnit => "bad-unit",
            Self::BadEntry { .. } => "bad-entry",
            Self::NameClash { .. } | Self::FamilyClash { .. } => "name-clash",
            Self::BadFamily { .. } => "bad-family",
            Self::BadMember { .. } => "bad-member",
            Self::BadHistogram { .. } => "bad-histogram",
            Self::BadHelp => "bad-help",
            Self::BadLabelKey => "bad-label-key",
            Self::BadInstance => "bad-instance",
            Self::BadLabels => "bad-labels",
            Self::BadBuckets => "bad-buckets",
            Self::WrongKind => "wrong-kind",
            Self::DuplicateInstance => "duplicate-instance",
            Self::NoFamilyRoom => "no-family-room",
            Self::BadTableSize | Self::BadFamilyTableSize(_) => "bad-table-size",
            Self::BadBlockSize => "bad-block-size",
            Self::TableFull => "table-full",
            Self::DuplicateName => "duplicate-name",
            Self::UnknownInstance => "unknown-instance",
            Self::NotInstant => "not-instant",
            Self::BadAggregation => "bad-aggregation",
            Self::GroupTooLarge => "group-too-large",
            Self::BadConfig => "bad-config",
            Self::Closed => "closed",
            Self::NoRseq => "no-rseq",
        }
    }

    /// True for errors that a later retry may not see (a writer was busy).
    pub fn is_busy(&self) -> bool {
        matches!(self, Self::BusyCpu(_) | Self::BusyMetadata)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { needed, have } => write!(
                f,
                "segment truncated: {needed} bytes needed, {have} mapped"
            ),
            Self::BadMagic => f.write_str("not a perfabi segment (bad magic)"),
            Self::ForeignByteOrder => {
                f.write_str("segment was written with the other byte order")
            }
            Self::BadByteOrder => f.write_str("corrupt byte-order mark"),
            Self::UnsupportedMajor(m) => write!(
                f,
                "ABI major version {m} is not supported (this reader knows {})",
                crate::layout::ABI_MAJOR
            ),
            Self::BadHeaderSize(s) => write!(f, "invalid header size {s}"),
            Self::BadPageSize(s) => write!(f, "invalid page size {s}"),
            Self::BadCpuCount(n) => write!(f, "invalid CPU count {n}"),
            Self::BadCapacity => f.write_str("invalid capacity in header"),
            Self::BadRecordSize => f.write_str("invalid entry or record size in header"),
            Self::OutOfBounds(s) => write!(f, "{} section lies outside the segment", s.as_str()),
            Self::Overlap(a, b) => {
                write!(f, "{} and {} sections overlap", a.as_str(), b.as_str())
            }
            Self::Misaligned(s) => write!(f, "{} section is misaligned", s.as_str()),
            Self::BusyCpu(c) => write!(
                f,
                "CPU {c}'s block stayed busy for the whole retry bound (writer updating or dead mid-update)"
            ),
            Self::BusyMetadata => f.write_str(
                "metadata stayed busy for the whole retry bound (writer changing it or dead mid-change)",
            ),
            Self::BadName => f.write_str(
                "bad instance name: 1-63 bytes, dot-separated parts of [A-Za-z0-9_] each starting with a letter or _, the first with a letter",
            ),
            Self::BadUnit => f.write_str(
                "bad unit: a unit string is at most 15 printable ASCII bytes; \
                 a family's unit has dimensions in -3..=3, scales in range and \
                 0 where their dimension is, and a known quantity (spec §5.2)",
            ),
            Self::BadEntry { slot, field } => write!(f, "instance slot {slot}: {}", field.problem()),
            Self::NameClash { slot, other } => write!(
                f,
                "instance slots {other} and {slot} have names that are one name to consumers (same once dots are underscores and _total, _count, ... are taken off)"
            ),
            Self::BadFamily { slot, field } => write!(f, "family slot {slot}: {}", field.problem()),
            Self::BadMember { slot, field } => write!(f, "member slot {slot}: {}", field.problem()),
            Self::BadHistogram { slot, cpu } => write!(
                f,
                "member slot {slot}: histogram count is not the sum of its buckets in CPU {cpu}'s consistent copy (the writer is broken or hostile)"
            ),
            Self::FamilyClash { family, other } => write!(
                f,
                "family slot {family} and {other} have names that are one name to consumers (same once dots are underscores and _total, _count, ... are taken off, or one is a dotted prefix of the other)"
            ),
            Self::BadTableSize => f.write_str(
                "invalid instances_size: less than max_instances entries, or not whole pages",
            ),
            Self::BadFamilyTableSize(s) => write!(
                f,
                "invalid {} table size: less than its capacity's entries, or not whole pages",
                s.as_str()
            ),
            Self::BadHelp => f.write_str("bad help: at most 127 printable ASCII bytes"),
            Self::BadLabelKey => f.write_str(
                "bad dimension or label key: [a-z][a-z0-9_]*, at most 31 (dimension) or 15 (label) bytes, not cpu, le, lower_bound or upper_bound",
            ),
            Self::BadInstance => f.write_str(
                "bad instance or label value: printable ASCII without spaces (instances), quotes or backslashes, at most 63 (instance) or 47 (label) bytes",
            ),
            Self::BadLabels => write!(
                f,
                "bad labels: at most {} per instance, keys distinct and not the family's dimension",
                crate::layout::MAX_LABELS
            ),
            Self::BadBuckets => write!(
                f,
                "bad buckets: {}..={} buckets (+Inf included), bounds strictly increasing, log2 bounds at most 2^63",
                crate::layout::MIN_BUCKETS,
                crate::layout::MAX_BUCKETS
            ),
            Self::WrongKind => f.write_str(
                "the family's kind does not allow this (observe needs a histogram, peak a peak, adjust a counter or gauge)",
            ),
            Self::DuplicateInstance => {
                f.write_str("a live instance of the family has this name already")
            }
            Self::NoFamilyRoom => f.write_str(
                "no room for a family or instance: the segment has no family tables (max_families 0) or they are full",
            ),
            Self::BadBlockSize => f.write_str(
                "invalid per-CPU block size: pages_per_cpu is 0 or cpu_block_size is not pages_per_cpu pages",
            ),
            Self::TableFull => f.write_str("instance table is full"),
            Self::DuplicateName => f.write_str(
                "an instance with this name, or one that is the same name to consumers (a.b and a_b; x and x_total), exists already",
            ),
            Self::UnknownInstance => f.write_str("no live instance with this id"),
            Self::NotInstant => f.write_str(
                "only an instance of semantics instant can be set; adjust a counter instead",
            ),
            Self::BadAggregation => f.write_str(
                "bad DAMON aggregation: needs 1..=ring capacity sorted, non-overlapping, non-empty regions and non-zero intervals",
            ),
            Self::GroupTooLarge => write!(
                f,
                "a counter group holds at most {} members",
                crate::protocol::MAX_GROUP
            ),
            Self::BadConfig => f.write_str("configuration outside what the ABI can describe"),
            Self::Closed => f.write_str("segment was closed by its writer"),
            Self::NoRseq => f.write_str(
                "this thread has no rseq registration; create the writer with MethodChoice::Lock",
            ),
        }
    }
}

impl core::error::Error for Error {}
