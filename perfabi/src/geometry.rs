//! The canonical geometry of a segment: where a writer puts every section
//! for a given page size, CPU count and capacities, and the header of a new
//! segment. Every writer uses [`Geometry::sizes`] (the kernel module's C
//! twin in `spec/perfabi.h` is checked against it by `tests/c_layout.rs`);
//! readers accept any layout [`crate::validate_header`] accepts.

use crate::error::Error;
use crate::layout::*;

/// Inputs of a segment geometry: what a writer chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Page size (power of two, 4 KiB..=64 KiB).
    pub page_size: u32,
    /// Number of per-CPU blocks.
    pub nr_cpus: u32,
    /// Instance table capacity.
    pub max_instances: u32,
    /// DAMON ring slots per CPU.
    pub damon_capacity: u32,
    /// Family table capacity; 0 (with `max_members` 0) lays out an ABI 1.0
    /// segment without family tables.
    pub max_families: u32,
    /// Member table capacity.
    pub max_members: u32,
}

/// Derived sizes of a [`Geometry`], as the writer lays them out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Bytes of the instance table (whole pages).
    pub instances_size: u64,
    /// Offset of the instance table.
    pub instances_offset: u64,
    /// Offset of the counter array inside a block.
    pub counters_offset: u32,
    /// Offset of the DAMON ring inside a block.
    pub damon_offset: u32,
    /// Pages in one per-CPU block.
    pub pages_per_cpu: u32,
    /// Offset of CPU 0's block.
    pub cpu_area_offset: u64,
    /// Bytes of one per-CPU block.
    pub cpu_block_size: u64,
    /// Bytes of the whole segment.
    pub segment_size: u64,
    /// The ABI 1.1 header fields (family and member tables after the
    /// per-CPU area); all zero for a 1.0 segment.
    pub families: FamilyHeader,
}

impl Geometry {
    /// Computes the canonical layout (the one every writer of ABI 1.0 uses),
    /// refusing values the ABI cannot describe.
    pub fn sizes(&self) -> Result<Sizes, Error> {
        check_limits(
            self.page_size,
            self.nr_cpus,
            self.max_instances,
            self.damon_capacity,
        )?;
        let page = u64::from(self.page_size);
        let instances_offset = page;
        let instances_size = align_up(
            u64::from(self.max_instances) * INSTANCE_ENTRY_SIZE as u64,
            page,
        )
        .ok_or(Error::BadConfig)?;
        let counters_offset = CPU_BLOCK_HEAD_SIZE as u64;
        let damon_offset = align_up(
            counters_offset + 8 * u64::from(self.max_instances),
            CACHE_LINE as u64,
        )
        .ok_or(Error::BadConfig)?;
        let block_end = damon_offset + u64::from(self.damon_capacity) * DAMON_RECORD_SIZE as u64;
        let cpu_block_size = align_up(block_end, page).ok_or(Error::BadConfig)?;
        let cpu_area_offset = instances_offset + instances_size;
        let cpu_area_end = cpu_block_size
            .checked_mul(u64::from(self.nr_cpus))
            .and_then(|s| s.checked_add(cpu_area_offset))
            .ok_or(Error::BadConfig)?;
        let (families, segment_size) = self.family_tables(cpu_area_end)?;
        Ok(Sizes {
            instances_size,
            instances_offset,
            counters_offset: u32::try_from(counters_offset).map_err(|_| Error::BadConfig)?,
            damon_offset: u32::try_from(damon_offset).map_err(|_| Error::BadConfig)?,
            pages_per_cpu: u32::try_from(cpu_block_size / page).map_err(|_| Error::BadConfig)?,
            cpu_area_offset,
            cpu_block_size,
            segment_size,
            families,
        })
    }

    /// The family and member tables, placed after the per-CPU area (which
    /// ends at `cpu_area_end`): the header fields and the segment's end.
    fn family_tables(&self, cpu_area_end: u64) -> Result<(FamilyHeader, u64), Error> {
        if self.max_families == 0 && self.max_members == 0 {
            return Ok((FamilyHeader::default(), cpu_area_end));
        }
        if self.max_families == 0
            || self.max_families > MAX_FAMILIES
            || self.max_members > MAX_MEMBERS
        {
            return Err(Error::BadCapacity);
        }
        let page = u64::from(self.page_size);
        let families_size = align_up(
            u64::from(self.max_families) * FAMILY_ENTRY_SIZE as u64,
            page,
        )
        .ok_or(Error::BadConfig)?;
        let members_offset = cpu_area_end + families_size;
        let members_size = align_up(u64::from(self.max_members) * MEMBER_ENTRY_SIZE as u64, page)
            .ok_or(Error::BadConfig)?;
        let end = members_offset
            .checked_add(members_size)
            .ok_or(Error::BadConfig)?;
        Ok((
            FamilyHeader {
                families_offset: cpu_area_end,
                families_size,
                members_offset,
                members_size,
                max_families: self.max_families,
                max_members: self.max_members,
                family_entry_size: FAMILY_ENTRY_SIZE as u32,
                member_entry_size: MEMBER_ENTRY_SIZE as u32,
                families_used: 0,
                members_used: 0,
            },
            end,
        ))
    }

    /// Whether the geometry has family tables (an ABI 1.1 segment).
    pub fn has_families(&self) -> bool {
        self.max_families != 0 || self.max_members != 0
    }
}

/// Who writes a segment: the header fields that identify the writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterIdentity {
    /// Random non-zero id of this incarnation.
    pub epoch: u64,
    /// Writer's pid (0: kernel).
    pub pid: u64,
    /// `CLOCK_BOOTTIME` ns at which the writer process started (the kernel
    /// module: when it was loaded).
    pub start_ns: u64,
    /// Promised heartbeat interval (0: none).
    pub heartbeat_interval_ns: u64,
    /// `CLOCK_BOOTTIME` ns of the first heartbeat (the creation time).
    pub first_heartbeat_ns: u64,
}

impl Geometry {
    /// The header of a new, empty segment of this geometry (generation 0,
    /// no instances, not closed), laid out canonically. A geometry with
    /// family tables also needs [`Sizes::families`] written after it (ABI
    /// 1.1, minor 1, 256-byte header); one without is ABI 1.0.
    pub fn header(&self, id: &WriterIdentity) -> Result<Header, Error> {
        let s = self.sizes()?;
        Ok(Header {
            magic: MAGIC,
            abi_major: ABI_MAJOR,
            abi_minor: if self.has_families() { ABI_MINOR } else { 0 },
            header_size: if self.has_families() {
                HEADER_SIZE_V1_1
            } else {
                HEADER_SIZE_V1_0
            } as u32,
            byte_order: BYTE_ORDER_MARK,
            page_size: self.page_size,
            nr_cpus: self.nr_cpus,
            pages_per_cpu: s.pages_per_cpu,
            max_instances: self.max_instances,
            damon_capacity: self.damon_capacity,
            instance_entry_size: INSTANCE_ENTRY_SIZE as u32,
            damon_record_size: DAMON_RECORD_SIZE as u32,
            counters_offset: s.counters_offset,
            damon_offset: s.damon_offset,
            segment_size: s.segment_size,
            instances_offset: s.instances_offset,
            instances_size: s.instances_size,
            cpu_area_offset: s.cpu_area_offset,
            cpu_block_size: s.cpu_block_size,
            epoch: id.epoch,
            writer_pid: id.pid,
            writer_start_ns: id.start_ns,
            heartbeat_interval_ns: id.heartbeat_interval_ns,
            gen1: 0,
            gen2: 0,
            heartbeat_ns: id.first_heartbeat_ns,
            flags: 0,
            instances_used: 0,
            reserved: [0; 3],
        })
    }
}

pub(crate) fn check_limits(
    page_size: u32,
    nr_cpus: u32,
    max_instances: u32,
    damon_capacity: u32,
) -> Result<(), Error> {
    if !page_size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
        return Err(Error::BadPageSize(page_size));
    }
    if nr_cpus == 0 || nr_cpus > MAX_CPUS {
        return Err(Error::BadCpuCount(nr_cpus));
    }
    if max_instances == 0 || max_instances > MAX_INSTANCES || damon_capacity > MAX_DAMON_CAPACITY {
        return Err(Error::BadCapacity);
    }
    Ok(())
}
