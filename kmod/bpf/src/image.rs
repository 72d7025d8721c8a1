//! The segment the BPF programs write, laid out in memory before it is
//! copied into the map: the core's own geometry ([`perfabi::Geometry`]),
//! header ([`perfabi::Geometry::header`]) and table encoders
//! ([`perfabi::FamilySpec::entry`], [`perfabi::family::member_entry`]), so
//! there is no second layout implementation. The families come from
//! [`crate::families`].

use perfabi::layout::{
    FamilyHeader, Header, FLAG_KERNEL, HEADER_FAMILIES_USED_WORD, HEADER_MEMBERS_USED_WORD,
    HEADER_SIZE_V1_0, HEADER_USED_WORD,
};
use perfabi::{Geometry, WriterIdentity};

use crate::families;

/// Page size of a segment held in a BPF map: the map's value size, one
/// element per page (`spec/PERFABI.md` §9.1).
pub const PAGE: u32 = 4096;

/// Value words a block has room for (the counter array): the families'
/// words, with room to spare for the block's first page.
const MAX_VALUES: u32 = 64;
/// Family and member table capacities.
const MAX_FAMILIES: u32 = 16;
const MAX_MEMBERS: u32 = 16;

/// A laid-out segment, and where the BPF programs find their words.
#[derive(Clone, Debug)]
pub struct Image {
    /// The segment, as native-endian words.
    pub words: Vec<u64>,
    /// The geometry it was laid out with.
    pub geometry: Geometry,
    /// The validated layout.
    pub layout: perfabi::Layout,
    /// For each family of [`families::specs`], the word index of its first
    /// value word in a block's first page (`counters_offset / 8 + slot`).
    pub value_word: [u32; 4],
    /// The counts the loader publishes after freezing, under gen1/gen2
    /// (`instances_used`, `families_used`, `members_used`); zero in
    /// [`Self::words`] until then.
    pub used: [(u32, u64); 3],
}

impl Image {
    /// Lays out a segment for `nr_cpus` CPUs, written by the kernel
    /// (`writer_pid` 0, `FLAG_KERNEL`) with the heartbeat promise
    /// `heartbeat_interval_ns`, created at `now_ns` (`CLOCK_BOOTTIME`).
    pub fn new(
        nr_cpus: u32,
        epoch: u64,
        now_ns: u64,
        heartbeat_interval_ns: u64,
    ) -> Result<Self, perfabi::Error> {
        let geometry = Geometry {
            page_size: PAGE,
            nr_cpus,
            max_instances: MAX_VALUES,
            damon_capacity: 0,
            max_families: MAX_FAMILIES,
            max_members: MAX_MEMBERS,
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

        let specs = families::specs();
        let mut value_word = [0u32; 4];
        let mut next_value = 0u32;
        let mut reg = 1u64;
        for (slot, spec) in specs.iter().enumerate() {
            let entry = spec.entry(reg)?;
            reg += 1;
            let at = (fh.families_offset as usize + slot * perfabi::layout::FAMILY_ENTRY_SIZE) / 8;
            put(&mut words, at, bytemuck::bytes_of(&entry));
            let m = perfabi::family::member_entry(
                slot as u32,
                reg,
                "",
                0,
                next_value,
                &[],
                &spec.dimension,
            )?;
            reg += 1;
            let at = (fh.members_offset as usize + slot * perfabi::layout::MEMBER_ENTRY_SIZE) / 8;
            put(&mut words, at, bytemuck::bytes_of(&m));
            value_word[slot] = sizes.counters_offset / 8 + next_value;
            next_value += perfabi::family::value_words(spec.buckets.as_ref()) as u32;
        }
        let block_words = PAGE / 8;
        if next_value > MAX_VALUES
            || value_word.iter().any(|&w| w >= block_words)
            || sizes.counters_offset / 8 + next_value > block_words
        {
            // The programs address one page of each block.
            return Err(perfabi::Error::BadCapacity);
        }
        let view_words: Vec<perfabi::Word> = words.iter().map(|&w| perfabi::Word::new(w)).collect();
        let layout = *perfabi::SegmentView::new(&view_words)?.layout();
        Ok(Self {
            words,
            geometry,
            layout,
            value_word,
            used: [
                (HEADER_USED_WORD as u32, u64::from(next_value)),
                (HEADER_FAMILIES_USED_WORD as u32, specs.len() as u64),
                (HEADER_MEMBERS_USED_WORD as u32, specs.len() as u64),
            ],
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

    /// Pages per CPU block.
    pub fn pages_per_cpu(&self) -> u32 {
        (self.layout.cpu_block_size / PAGE as usize) as u32
    }

    /// The image with the counts of [`Self::used`] stored, as a reader
    /// sees it once the loader has published them.
    pub fn published(&self) -> Vec<u64> {
        let mut w = self.words.clone();
        for &(at, v) in &self.used {
            w[at as usize] = v;
        }
        w
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

    /// The image is a valid segment whose families are the list's, each
    /// value word where the programs are told it is.
    #[test]
    fn image_is_a_segment_with_the_families() {
        let img = Image::new(3, 0x1234, 5_000, 1_000_000_000).unwrap();
        let words: Vec<perfabi::Word> = img
            .published()
            .iter()
            .map(|&w| perfabi::Word::new(w))
            .collect();
        let view = perfabi::SegmentView::new(&words).unwrap();
        let info = view.info();
        assert_eq!((info.writer_pid, info.flags), (0, FLAG_KERNEL));
        let (fams, _) = view.families(16).unwrap();
        let names: Vec<&str> = fams.iter().map(|f| f.name.as_str()).collect();
        let want: Vec<String> = families::specs().iter().map(|s| s.name.clone()).collect();
        assert_eq!(names, want);
        let lat = &fams[families::WAKEUP_LATENCY];
        assert_eq!(lat.buckets.as_ref().map(|b| b.count()), Some(24));
        for (k, f) in fams.iter().enumerate() {
            let slot = f.members[0].value_slot as usize;
            assert!(f.members[0].instance.is_empty());
            assert_eq!(
                img.layout.counters_offset / 8 + slot,
                img.value_word[k] as usize
            );
        }
        assert_eq!(
            img.pages() as usize * PAGE as usize,
            img.layout.segment_size
        );
        assert_eq!(img.pages_per_cpu(), 1);
        // Before publication, a reader sees no family.
        let unpublished: Vec<perfabi::Word> =
            img.words.iter().map(|&w| perfabi::Word::new(w)).collect();
        let view = perfabi::SegmentView::new(&unpublished).unwrap();
        assert!(view.families(16).unwrap().0.is_empty());
    }
}
