//! Reading a segment whose writer is gone for sure (`spec/PERFABI.md`
//! §15.5, "A dead writer's busy block").
//!
//! A process writer killed inside a multi-word update (a histogram
//! observation, §7.1) leaves its block's sequence word odd for ever, so
//! the reader's protocol (§7.2) never gets a consistent copy of it. Its
//! writer being gone, nothing changes that block any more: its words are
//! settled. Each of them is whole (8-byte stores) and holds every
//! completed update of its block; the one interrupted update (a block has
//! one writer at a time) is in each word or not. So the block is copied
//! as it is, and each histogram of it whose count is not its buckets' sum
//! (the interrupted observation reached one of them only) gets the count
//! its buckets say: count and buckets then hold the completed
//! observations, or those and the interrupted one whole; the sum may hold
//! the interrupted observation's value. Nothing completed is lost, and
//! nothing is counted twice; at most the one interrupted update of each
//! such block is counted (the same as a writer killed just after its
//! update, before it could tell anyone).
//!
//! Only for a writer gone for sure: a live writer's odd block is an
//! update in progress, read by the protocol. The copy still checks that
//! the generation and every sequence word stayed as they were around it
//! (a writer misjudged dead is refused, never read torn).

use crate::family::HistogramPlace;
use crate::layout::{HEADER_GEN1_WORD, HEADER_GEN2_WORD};
use crate::protocol::load_words;
use crate::sync::{fence, Ordering};
use crate::{Error, InstanceTable, Layout, SegmentView, Snapshot};
use alloc::vec::Vec;

/// A snapshot of a dead writer's segment, and how many of its blocks were
/// read settled (their sequence odd).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeadRead {
    /// The values, as [`SegmentView::snapshot`] would give them.
    pub snapshot: Snapshot,
    /// Blocks found odd (a multi-word update interrupted by the writer's
    /// death), read as they are (see the module's text).
    pub settled_blocks: usize,
}

/// A snapshot of the segment in `words` (validated as `layout`), whose
/// writer is gone for sure: the consistent snapshot of §7 if there is one,
/// else (a block busy for ever) the settled copy of this module's text.
/// Fails as [`SegmentView::snapshot`] does otherwise, with
/// [`Error::BusyMetadata`] if the writer died inside a metadata change
/// (§7.3: its tables are half written), and with [`Error::BusyCpu`] if a
/// sequence word or the generation moved during the copy (the writer is
/// not dead).
pub fn snapshot(words: &[crate::Word], layout: Layout, retries: u32) -> Result<DeadRead, Error> {
    let view = SegmentView::from_validated(words, layout)?;
    match view.snapshot(retries) {
        Ok(snapshot) => {
            return Ok(DeadRead {
                snapshot,
                settled_blocks: 0,
            })
        }
        Err(Error::BusyCpu(_)) => {}
        Err(e) => return Err(e),
    }
    let mut table = InstanceTable::default();
    let g = view.instances_into(&mut table, retries)?;
    let InstanceTable {
        instances,
        families,
        ..
    } = table;
    let slots = families
        .iter()
        .flat_map(|f| f.members.iter())
        .map(|m| m.value_slot as usize + m.words as usize)
        .chain(instances.iter().map(|i| i.slot as usize + 1))
        .max()
        .unwrap_or(0)
        .min(layout.max_instances);
    let nr_cpus = layout.nr_cpus;
    let mut values = alloc::vec![0u64; nr_cpus * slots];
    let mut odd = Vec::new();
    for (cpu, row) in values.chunks_exact_mut(slots.max(1)).enumerate() {
        let seq = &words[layout.cpu_block_word(cpu) + crate::layout::CPU_SEQ_WORD];
        let s1 = seq.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        load_words(words, layout.counter_word(cpu, 0), row);
        fence(Ordering::Acquire);
        if seq.load(Ordering::Relaxed) != s1 {
            return Err(Error::BusyCpu(cpu as u32));
        }
        if s1 & 1 == 1 {
            odd.push(cpu);
        }
    }
    fence(Ordering::Acquire);
    let (g1, g2) = (
        words[HEADER_GEN1_WORD].load(Ordering::Relaxed),
        words[HEADER_GEN2_WORD].load(Ordering::Relaxed),
    );
    if g1 != g || g2 != g {
        return Err(Error::BusyMetadata);
    }
    let mut snapshot = Snapshot::default();
    snapshot.generation = g;
    snapshot.epoch = layout.epoch;
    snapshot.instances = instances;
    snapshot.families = families;
    snapshot.nr_cpus = nr_cpus;
    snapshot.slots = slots;
    snapshot.values = values;
    let places: Vec<HistogramPlace> = snapshot.histogram_places().to_vec();
    for &cpu in &odd {
        let row = &mut snapshot.values[cpu * slots..(cpu + 1) * slots];
        for p in &places {
            if let Some([count, _sum, buckets @ ..]) = row.get_mut(p.at..p.at + p.words) {
                *count = buckets.iter().fold(0u64, |a, &b| a.wrapping_add(b));
            }
        }
    }
    crate::family::check_histograms(&places, &snapshot.values, slots)?;
    Ok(DeadRead {
        snapshot,
        settled_blocks: odd.len(),
    })
}
