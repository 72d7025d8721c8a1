//! Validation of a segment header against the number of bytes mapped.
//!
//! Nothing else in this crate touches a section before [`validate_header`]
//! has checked its offset and length: every index computed by a [`Layout`]
//! lies inside the mapped bytes.

use crate::error::{Error, Section};
use crate::geometry::check_limits;
use crate::layout::*;

/// The validated geometry of a segment. Every offset and size is checked
/// against the mapped length, so indexing with them cannot go out of bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// ABI major version (always [`ABI_MAJOR`]).
    pub abi_major: u16,
    /// ABI minor version of the writer (may be newer than [`ABI_MINOR`]).
    pub abi_minor: u16,
    /// Page size used by the writer.
    pub page_size: usize,
    /// Number of per-CPU blocks.
    pub nr_cpus: usize,
    /// Instance table capacity.
    pub max_instances: usize,
    /// DAMON ring slots per CPU.
    pub damon_capacity: usize,
    /// Total segment bytes (never more than mapped).
    pub segment_size: usize,
    /// Byte offset of the instance table.
    pub instances_offset: usize,
    /// Byte offset of CPU 0's block.
    pub cpu_area_offset: usize,
    /// Bytes between consecutive per-CPU blocks.
    pub cpu_block_size: usize,
    /// Offset of the counter array inside a block.
    pub counters_offset: usize,
    /// Offset of the DAMON ring inside a block.
    pub damon_offset: usize,
    /// Random id of this incarnation of the segment.
    pub epoch: u64,
    /// Writer's process id (0: kernel).
    pub writer_pid: u64,
    /// Writer process's start time (`CLOCK_BOOTTIME` ns).
    pub writer_start_ns: u64,
    /// Promised heartbeat interval (0: none).
    pub heartbeat_interval_ns: u64,
    /// The family and member tables of ABI 1.1; `None` when the segment
    /// has none (ABI 1.0, or `max_families` 0).
    pub families: Option<FamilyTables>,
}

/// The validated family and member tables of a segment (spec §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilyTables {
    /// Byte offset of the family table.
    pub families_offset: usize,
    /// Family table capacity (≥ 1).
    pub max_families: usize,
    /// Byte offset of the member table.
    pub members_offset: usize,
    /// Member table capacity (0: families of no instance only).
    pub max_members: usize,
}

impl FamilyTables {
    /// Word index of family entry `slot`.
    pub fn family_word(&self, slot: usize) -> usize {
        (self.families_offset + slot * FAMILY_ENTRY_SIZE) / 8
    }
    /// Word index of member entry `slot`.
    pub fn member_word(&self, slot: usize) -> usize {
        (self.members_offset + slot * MEMBER_ENTRY_SIZE) / 8
    }
}

impl Layout {
    /// Word index (8-byte units from the segment start) of CPU `cpu`'s block.
    /// `cpu < nr_cpus` is the caller's job; the result is then in bounds.
    pub fn cpu_block_word(&self, cpu: usize) -> usize {
        (self.cpu_area_offset + cpu * self.cpu_block_size) / 8
    }
    /// Word index of counter `slot` of CPU `cpu`.
    pub fn counter_word(&self, cpu: usize, slot: usize) -> usize {
        self.cpu_block_word(cpu) + self.counters_offset / 8 + slot
    }
    /// Word index of DAMON ring slot `slot` of CPU `cpu`.
    pub fn damon_word(&self, cpu: usize, slot: usize) -> usize {
        self.cpu_block_word(cpu) + (self.damon_offset + slot * DAMON_RECORD_SIZE) / 8
    }
    /// Word index of instance entry `slot`.
    pub fn instance_word(&self, slot: usize) -> usize {
        (self.instances_offset + slot * INSTANCE_ENTRY_SIZE) / 8
    }
}

/// Validates a header (copied out of the segment) and the fields ABI 1.1
/// appended to it (`fh`: zero for a 1.0 header, see
/// [`crate::view::load_family_header`]) against `mapped_len`, the number of
/// bytes the reader can access. Checks in the order of spec §8: magic, byte
/// order, major version, page size, CPU count, capacities, header size,
/// entry sizes, then every section's alignment, order and bounds, then the
/// family tables (step 14).
pub fn validate_header(h: &Header, fh: &FamilyHeader, mapped_len: u64) -> Result<Layout, Error> {
    if h.magic != MAGIC {
        return Err(Error::BadMagic);
    }
    if h.byte_order != BYTE_ORDER_MARK {
        return Err(if h.byte_order == BYTE_ORDER_MARK.swap_bytes() {
            Error::ForeignByteOrder
        } else {
            Error::BadByteOrder
        });
    }
    if h.abi_major != ABI_MAJOR {
        return Err(Error::UnsupportedMajor(h.abi_major));
    }
    check_limits(h.page_size, h.nr_cpus, h.max_instances, h.damon_capacity)?;
    if (h.header_size as usize) < HEADER_SIZE_V1_0
        || h.header_size > h.page_size
        || !h.header_size.is_multiple_of(8)
    {
        return Err(Error::BadHeaderSize(h.header_size));
    }
    if h.instance_entry_size as usize != INSTANCE_ENTRY_SIZE
        || h.damon_record_size as usize != DAMON_RECORD_SIZE
    {
        return Err(Error::BadRecordSize);
    }
    let page = u64::from(h.page_size);
    if h.segment_size > mapped_len {
        return Err(Error::Truncated {
            needed: h.segment_size,
            have: mapped_len,
        });
    }
    let seg = h.segment_size;
    // Instance table: page aligned, after the header page, big enough.
    if !h.instances_offset.is_multiple_of(page) {
        return Err(Error::Misaligned(Section::Instances));
    }
    if h.instances_offset < page {
        return Err(Error::Overlap(Section::Header, Section::Instances));
    }
    let table_need = u64::from(h.max_instances) * INSTANCE_ENTRY_SIZE as u64;
    if h.instances_size < table_need || !h.instances_size.is_multiple_of(page) {
        return Err(Error::BadTableSize);
    }
    let table_end = h
        .instances_offset
        .checked_add(h.instances_size)
        .filter(|&e| e <= seg)
        .ok_or(Error::OutOfBounds(Section::Instances))?;
    // Per-CPU area: page aligned, after the table, blocks of whole pages.
    if !h.cpu_area_offset.is_multiple_of(page) {
        return Err(Error::Misaligned(Section::CpuArea));
    }
    if h.cpu_area_offset < table_end {
        return Err(Error::Overlap(Section::Instances, Section::CpuArea));
    }
    if h.pages_per_cpu == 0
        || Some(h.cpu_block_size) != u64::from(h.pages_per_cpu).checked_mul(page)
    {
        return Err(Error::BadBlockSize);
    }
    let cpu_area_end = h
        .cpu_block_size
        .checked_mul(u64::from(h.nr_cpus))
        .and_then(|a| a.checked_add(h.cpu_area_offset))
        .filter(|&e| e <= seg)
        .ok_or(Error::OutOfBounds(Section::CpuArea))?;
    // Inside a block: head, counters, DAMON ring, in this order.
    let counters_offset = u64::from(h.counters_offset);
    let damon_offset = u64::from(h.damon_offset);
    if counters_offset % CACHE_LINE as u64 != 0 {
        return Err(Error::Misaligned(Section::Counters));
    }
    if counters_offset < CPU_BLOCK_HEAD_SIZE as u64 {
        return Err(Error::Overlap(Section::BlockHead, Section::Counters));
    }
    if damon_offset % CACHE_LINE as u64 != 0 {
        return Err(Error::Misaligned(Section::Damon));
    }
    if damon_offset < counters_offset + 8 * u64::from(h.max_instances) {
        return Err(Error::Overlap(Section::Counters, Section::Damon));
    }
    if damon_offset + u64::from(h.damon_capacity) * DAMON_RECORD_SIZE as u64 > h.cpu_block_size {
        return Err(Error::OutOfBounds(Section::Damon));
    }
    let families = if h.abi_minor >= 1 {
        validate_families(h, fh, cpu_area_end)?
    } else {
        None
    };
    let seg_usize = usize::try_from(seg).map_err(|_| Error::OutOfBounds(Section::CpuArea))?;
    Ok(Layout {
        abi_major: h.abi_major,
        abi_minor: h.abi_minor,
        page_size: h.page_size as usize,
        nr_cpus: h.nr_cpus as usize,
        max_instances: h.max_instances as usize,
        damon_capacity: h.damon_capacity as usize,
        segment_size: seg_usize,
        // All below are <= seg, which fits in usize.
        instances_offset: h.instances_offset as usize,
        cpu_area_offset: h.cpu_area_offset as usize,
        cpu_block_size: h.cpu_block_size as usize,
        counters_offset: h.counters_offset as usize,
        damon_offset: h.damon_offset as usize,
        epoch: h.epoch,
        writer_pid: h.writer_pid,
        writer_start_ns: h.writer_start_ns,
        heartbeat_interval_ns: h.heartbeat_interval_ns,
        families,
    })
}

/// Step 14 of spec §8, for `abi_minor >= 1`: the family and member tables
/// after the per-CPU area (which ends at `cpu_area_end`), or none when both
/// capacities are 0.
fn validate_families(
    h: &Header,
    fh: &FamilyHeader,
    cpu_area_end: u64,
) -> Result<Option<FamilyTables>, Error> {
    if (h.header_size as usize) < HEADER_SIZE_V1_1 {
        return Err(Error::BadHeaderSize(h.header_size));
    }
    if fh.max_families == 0 && fh.max_members == 0 {
        return Ok(None);
    }
    if fh.family_entry_size as usize != FAMILY_ENTRY_SIZE
        || fh.member_entry_size as usize != MEMBER_ENTRY_SIZE
    {
        return Err(Error::BadRecordSize);
    }
    if fh.max_families == 0 || fh.max_families > MAX_FAMILIES || fh.max_members > MAX_MEMBERS {
        return Err(Error::BadCapacity);
    }
    let page = u64::from(h.page_size);
    let table = |offset: u64, size: u64, n: u32, entry: usize, after: u64, prev, this| {
        if !offset.is_multiple_of(page) {
            return Err(Error::Misaligned(this));
        }
        if offset < after {
            return Err(Error::Overlap(prev, this));
        }
        if size < u64::from(n) * entry as u64 || !size.is_multiple_of(page) {
            return Err(Error::BadFamilyTableSize(this));
        }
        offset
            .checked_add(size)
            .filter(|&e| e <= h.segment_size)
            .ok_or(Error::OutOfBounds(this))
    };
    let families_end = table(
        fh.families_offset,
        fh.families_size,
        fh.max_families,
        FAMILY_ENTRY_SIZE,
        cpu_area_end,
        Section::CpuArea,
        Section::Families,
    )?;
    if fh.max_members > 0 {
        table(
            fh.members_offset,
            fh.members_size,
            fh.max_members,
            MEMBER_ENTRY_SIZE,
            families_end,
            Section::Families,
            Section::Members,
        )?;
    }
    // Both ends are <= segment_size, which the caller checked fits.
    Ok(Some(FamilyTables {
        families_offset: fh.families_offset as usize,
        max_families: fh.max_families as usize,
        members_offset: fh.members_offset as usize,
        max_members: fh.max_members as usize,
    }))
}

/// Validates a segment image held in ordinary memory (a file read into a
/// buffer, a test vector): the header is decoded from the first bytes and
/// checked against `bytes.len()`.
pub fn validate(bytes: &[u8]) -> Result<Layout, Error> {
    validate_prefix(bytes, bytes.len() as u64)
}

/// Validates the header held in `prefix`, the first bytes of a segment
/// (at least [`HEADER_SIZE_V1_0`]; [`HEADER_SIZE_V1_1`] to see the family
/// tables of a 1.1 header), against `mapped_len` bytes of segment.
pub fn validate_prefix(prefix: &[u8], mapped_len: u64) -> Result<Layout, Error> {
    let bytes = prefix;
    let Some(head) = bytes.get(..HEADER_SIZE_V1_0) else {
        return Err(Error::Truncated {
            needed: HEADER_SIZE_V1_0 as u64,
            have: bytes.len() as u64,
        });
    };
    let h: Header = bytemuck::pod_read_unaligned(head);
    let fh = if h.abi_minor >= 1 && h.header_size as usize >= HEADER_SIZE_V1_1 {
        bytes
            .get(HEADER_SIZE_V1_0..HEADER_SIZE_V1_1)
            .map(bytemuck::pod_read_unaligned)
            .unwrap_or_default()
    } else {
        FamilyHeader::default()
    };
    validate_header(&h, &fh, mapped_len)
}
