//! The segment the BPF programs write, laid out in memory before it is
//! copied into the map: the core's own geometry ([`perfabi::Geometry`]),
//! header ([`perfabi::Geometry::header`]) and table encoders
//! ([`perfabi::FamilySpec::entry`], [`perfabi::family::member_entry`]), so
//! there is no second layout implementation. The families come from
//! [`crate::families`].

use perfabi::layout::{FamilyHeader, Header, FLAG_KERNEL, HEADER_SIZE_V1_0, MEMBER_ENTRY_SIZE};
use perfabi::{Geometry, WriterIdentity};
use perfabi_families::table::Group;

use crate::families;

/// Page size of a segment held in a BPF map: the map's value size, one
/// element per page (`spec/PERFABI.md` §9.1).
pub const PAGE: u32 = 4096;

/// Family table capacity: room for every family of the definition.
const MAX_FAMILIES: u32 = 32;

/// Room for value slots and members (the segment's `max_instances` and
/// `max_members`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Value slots per CPU.
    pub values: u32,
    /// Member entries.
    pub members: u32,
    /// DAMON region records per CPU ring (0: no ring).
    pub damon: u32,
}

impl Capacity {
    /// Room for the scheduler group and `runs` (each group's instances
    /// found at start, as `(group, how many)`), twice over with some to
    /// spare, for instances that come later.
    pub fn for_start(runs: &[(Group, usize)]) -> Self {
        let mut values = Group::Sched.words();
        let mut members = families::SCHED.len() as u32;
        for &(g, n) in runs {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            values = values.saturating_add(g.words().saturating_mul(n));
            members = members.saturating_add((g.families().count() as u32).saturating_mul(n));
        }
        Self {
            values: values
                .saturating_mul(2)
                .saturating_add(1024)
                .min(perfabi::layout::MAX_INSTANCES),
            members: members.saturating_mul(2).saturating_add(64).min(1 << 16),
            damon: 0,
        }
    }
}

/// A laid-out segment, and where the BPF programs find their words.
#[derive(Clone, Debug)]
pub struct Image {
    /// The segment, as native-endian words.
    pub words: Vec<u64>,
    /// The geometry it was laid out with.
    pub geometry: Geometry,
    /// The validated layout.
    pub layout: perfabi::Layout,
    /// The value slot of the scheduler group's run.
    pub sched_slot: u32,
    /// Member entries laid out (the scheduler group's, slots from 0).
    pub sched_members: u32,
    /// Word index of the member table.
    pub members_word: u32,
    /// The words `control` may store into: `[table_lo, table_hi)`, the
    /// family and member tables.
    pub table_lo: u32,
    /// See [`Self::table_lo`].
    pub table_hi: u32,
    /// The next `reg_id` to give.
    pub next_reg: u64,
}

impl Image {
    /// Lays out a segment for `nr_cpus` CPUs, written by the kernel
    /// (`writer_pid` 0, `FLAG_KERNEL`) with the heartbeat promise
    /// `heartbeat_interval_ns`, created at `now_ns` (`CLOCK_BOOTTIME`):
    /// every family of the definition in the family table (slot = its
    /// index in [`families::FAMILIES`]), and the scheduler group's members
    /// and run; the `*_used` counts 0 until the loader publishes them
    /// ([`crate::tables::Tables::counts`]).
    pub fn new(
        nr_cpus: u32,
        epoch: u64,
        now_ns: u64,
        heartbeat_interval_ns: u64,
        capacity: Capacity,
    ) -> Result<Self, perfabi::Error> {
        let geometry = Geometry {
            page_size: PAGE,
            nr_cpus,
            max_instances: capacity.values,
            damon_capacity: capacity.damon,
            max_families: MAX_FAMILIES,
            max_members: capacity.members,
        };
        let sizes = geometry.sizes()?;
        let mut header: Header = geometry.header(&WriterIdentity {
            epoch,
            pid: 0,
            start_ns: now_ns,
            heartbeat_interval_ns,
            first_heartbeat_ns: now_ns,
        })?;
        header.flags = FLAG_KERNEL;
        let len = usize::try_from(sizes.segment_size / 8).map_err(|_| perfabi::Error::BadConfig)?;
        let mut words = vec![0u64; len];
        put(&mut words, 0, bytemuck::bytes_of(&header));
        let fh: FamilyHeader = sizes.families;
        put(&mut words, HEADER_SIZE_V1_0 / 8, bytemuck::bytes_of(&fh));

        let mut reg = 1u64;
        for (slot, fam) in families::FAMILIES.iter().enumerate() {
            let entry = fam.spec().entry(reg)?;
            reg += 1;
            let at = (fh.families_offset as usize + slot * perfabi::layout::FAMILY_ENTRY_SIZE) / 8;
            put(&mut words, at, bytemuck::bytes_of(&entry));
        }
        let sched_slot = 0;
        for (m, &fam) in families::SCHED.iter().enumerate() {
            let f = families::FAMILIES[fam];
            let entry = perfabi::family::member_entry(
                fam as u32,
                reg,
                "",
                0,
                sched_slot + f.at(),
                &[],
                f.dimension,
            )?;
            reg += 1;
            let at = (fh.members_offset as usize + m * MEMBER_ENTRY_SIZE) / 8;
            put(&mut words, at, bytemuck::bytes_of(&entry));
        }
        let view_words: Vec<perfabi::Word> = words.iter().map(|&w| perfabi::Word::new(w)).collect();
        let layout = *perfabi::SegmentView::new(&view_words)?.layout();
        let members_end =
            fh.members_offset as usize + capacity.members as usize * MEMBER_ENTRY_SIZE;
        if layout.counters_offset / 8 + Group::Sched.words() as usize > PAGE as usize / 8 {
            return Err(perfabi::Error::BadCapacity);
        }
        Ok(Self {
            words,
            geometry,
            layout,
            sched_slot,
            sched_members: families::SCHED.len() as u32,
            members_word: (fh.members_offset / 8) as u32,
            table_lo: (fh.families_offset / 8) as u32,
            table_hi: (members_end / 8) as u32,
            next_reg: reg,
        })
    }

    /// Page `i` of the segment, as the bytes of map element `i`.
    pub fn page(&self, i: usize) -> &[u8] {
        let w = PAGE as usize / 8;
        bytemuck::cast_slice(&self.words[i * w..(i + 1) * w])
    }

    /// Pages (map elements).
    pub fn pages(&self) -> u32 {
        (self.words.len() * 8 / PAGE as usize) as u32
    }

    /// Page index of CPU 0's block.
    pub fn cpu_page0(&self) -> u32 {
        (self.layout.cpu_area_offset / PAGE as usize) as u32
    }

    /// Word, in a block, of the DAMON ring's slot 0.
    pub fn damon_word(&self) -> u32 {
        (self.layout.damon_offset / 8) as u32
    }

    /// Pages per CPU block.
    pub fn pages_per_cpu(&self) -> u32 {
        (self.layout.cpu_block_size / PAGE as usize) as u32
    }
}

/// Stores `bytes` (a whole number of words) at word `at`.
fn put(words: &mut [u64], at: usize, bytes: &[u8]) {
    for (k, chunk) in bytes.chunks_exact(8).enumerate() {
        words[at + k] = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The image, once the loader has published its counts, is a valid
    /// segment with every family of the definition and the scheduler's
    /// members where the programs are told their run is.
    #[test]
    fn image_is_a_segment_with_the_families() {
        let cap = Capacity::for_start(&[(Group::Block, 2), (Group::Irq, 10)]);
        let img = Image::new(3, 0x1234, 5_000, 1_000_000_000, cap).unwrap();
        let published = crate::tables::published(&img);
        let words: Vec<perfabi::Word> = published.iter().map(|&w| perfabi::Word::new(w)).collect();
        let view = perfabi::SegmentView::new(&words).unwrap();
        let info = view.info();
        assert_eq!((info.writer_pid, info.flags), (0, FLAG_KERNEL));
        let (fams, _) = view.families(64).unwrap();
        let names: Vec<&str> = fams.iter().map(|f| f.name.as_str()).collect();
        let want: Vec<&str> = families::FAMILIES.iter().map(|f| f.name).collect();
        assert_eq!(names, want);
        let lat = fams
            .iter()
            .find(|f| f.name == "kernel.sched.wakeup_latency")
            .unwrap();
        assert_eq!(lat.buckets.as_ref().map(|b| b.count()), Some(24));
        assert_eq!(lat.members[0].value_slot, img.sched_slot + 3);
        assert!(fams
            .iter()
            .filter(|f| !f.dimension.is_empty())
            .all(|f| f.members.is_empty()));
        assert_eq!(
            img.pages() as usize * PAGE as usize,
            img.layout.segment_size
        );
        assert!(cap.values >= 2 * (29 + 2 * 33 + 10 * 27));
        // Before publication, a reader sees no family.
        let unpublished: Vec<perfabi::Word> =
            img.words.iter().map(|&w| perfabi::Word::new(w)).collect();
        let view = perfabi::SegmentView::new(&unpublished).unwrap();
        assert!(view.families(64).unwrap().0.is_empty());
    }
}
