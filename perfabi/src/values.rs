//! The hot read paths: a segment's per-CPU value blocks as a few words of
//! geometry ([`Blocks`], taken from a validated [`Layout`] once and kept
//! beside a mapping), and the reads that need nothing else ([`Values`]:
//! chosen slots, or runs of slots, of every CPU inside one generation).
//!
//! A [`SegmentView`](crate::SegmentView) carries the whole [`Layout`]
//! (about 180 bytes); a reader that made one per read copied it each time,
//! which was a third of reading one counter at 2 CPUs. [`Values`] is three
//! words and a [`Blocks`]; [`SegmentView`](crate::SegmentView)'s own
//! `read_slots_at` and `read_ranges` are these, so there is one
//! implementation of each.

use crate::error::{Error, Section};
use crate::layout::{
    InstanceEntry, SlotState, CPU_SEQ_WORD, HEADER_GEN1_WORD, HEADER_GEN2_WORD,
    INSTANCE_ENTRY_WORDS,
};
use crate::protocol::{gen_read, seq_read, Sound};
use crate::sync::{AtomicU64, Ordering};
use crate::validate::Layout;

/// How a view copies a run of value words out of the segment:
/// `copy(words, start, out)` fills `out` with `words[start..][..out.len()]`
/// and panics if that range is out of bounds, as
/// [`load_words`](crate::protocol::load_words) (the default) does.
///
/// A replacement must leave in `out` only what some sequence of `Relaxed`
/// loads of the words, in any order, could have returned (each word whole),
/// and must not write the segment: then every rule the protocol's loom
/// checks prove for `load_words` holds for it too. `perfabi-shm` gives a
/// mapped segment one that loads aligned word pairs with one 16-byte load
/// where the processor makes such loads single-copy atomic (spec §7).
pub type CopyWords = fn(&[AtomicU64], usize, &mut [u64]);

/// Up to this many slots, [`Values::read_slots_at`] writes `out` a value
/// at a time: that many rows' cache lines stay in any L1 cache's ways even
/// when they all fall in one set.
const TILE_DIRECT: usize = 8;
/// Words of the stack tile of [`Values::read_slots_at`] (4 KiB); more
/// slots than this are written a value at a time.
const TILE_WORDS: usize = 512;
/// CPUs per tile at most: one 64-byte cache line of each `out` row.
const TILE_CPUS: usize = 8;
/// Below this many CPUs [`Values::read_slots_at`] writes `out` a value
/// at a time: `out`'s rows are under 1 KiB apart, so 30 of them spread
/// over at least 4 of an L1 cache's sets (set index: address bits 6-11),
/// within its 8 or 12 ways, and the tile's 4 KiB of zeros would cost
/// more than it saves.
const TILE_MIN_CPUS: usize = 128;

/// Where a validated segment's per-CPU sequence words and value slots
/// are, as word indexes (spec §4.3): CPU `c`'s sequence word is
/// `seq0 + c * stride`, its value slot `s` is `values0 + c * stride + s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    nr_cpus: usize,
    max_instances: usize,
    seq0: usize,
    values0: usize,
    stride: usize,
    instances0: usize,
    /// One past the last word a read through the blocks loads (the last
    /// CPU's last value slot, the last instance entry, the header's
    /// generation words), `usize::MAX` if that overflows: a [`Values`]
    /// checks it against its words once.
    end: usize,
}

/// Word of an instance entry holding its registration id.
const REG_WORD: usize = core::mem::offset_of!(InstanceEntry, reg_id) / 8;
/// Word of an instance entry whose first 4 bytes (native order) are its
/// `state`.
const STATE_WORD: usize = core::mem::offset_of!(InstanceEntry, state) / 8;
const _: () = assert!(core::mem::offset_of!(InstanceEntry, state) % 8 == 0);

impl Blocks {
    /// The blocks of `layout` (validated: every offset a multiple of 8,
    /// every block inside `segment_size`).
    pub fn of(layout: &Layout) -> Self {
        let mut b = Self {
            nr_cpus: layout.nr_cpus,
            max_instances: layout.max_instances,
            seq0: layout.cpu_block_word(0) + CPU_SEQ_WORD,
            values0: layout.counter_word(0, 0),
            stride: layout.cpu_block_size / 8,
            instances0: layout.instance_word(0),
            end: 0,
        };
        let values = layout
            .nr_cpus
            .checked_sub(1)
            .and_then(|c| c.checked_mul(b.stride))
            .and_then(|w| w.checked_add(b.values0))
            .and_then(|w| w.checked_add(b.max_instances));
        let entries = b
            .max_instances
            .checked_mul(INSTANCE_ENTRY_WORDS)
            .and_then(|w| w.checked_add(b.instances0));
        b.end = match (values, entries) {
            (Some(v), Some(e)) => v.max(e).max(HEADER_GEN2_WORD + 1),
            _ => usize::MAX,
        };
        b
    }

    /// Number of per-CPU blocks.
    #[inline]
    pub fn nr_cpus(&self) -> usize {
        self.nr_cpus
    }

    /// Value slots per block (the instance table's capacity).
    #[inline]
    pub fn max_instances(&self) -> usize {
        self.max_instances
    }
}

/// The value blocks of a segment held in shared atomic words, for reads
/// of values only: every word they load is a `Relaxed` load through the
/// protocol ([`gen_read`], [`seq_read`]), as [`SegmentView`](crate::SegmentView)'s.
#[derive(Clone, Copy, Debug)]
pub struct Values<'a> {
    words: &'a [AtomicU64],
    blocks: Blocks,
    copy: CopyWords,
}

impl<'a> Values<'a> {
    /// The blocks `blocks` of `words`, copying runs of value words with
    /// `copy` (see [`CopyWords`]). Refuses blocks that do not fit in
    /// `words` (or a table without the instance entries' words), so no
    /// read through it can index outside them.
    #[inline]
    pub fn new(words: &'a [AtomicU64], blocks: Blocks, copy: CopyWords) -> Result<Self, Error> {
        if blocks.end > words.len() {
            return Err(Error::OutOfBounds(Section::Counters));
        }
        Ok(Self {
            words,
            blocks,
            copy,
        })
    }

    /// The geometry read.
    #[inline]
    pub fn blocks(&self) -> &Blocks {
        &self.blocks
    }

    /// Reads the per-CPU values of the instances in `slots` (with their
    /// registration ids) into `out` (`slots.len() * nr_cpus` values, slot
    /// major), inside one generation, each CPU's values between two equal
    /// even loads of its sequence word (so a group update is seen whole).
    /// Fails with [`Error::UnknownInstance`] if a slot no longer holds
    /// that registration, [`Error::OutOfBounds`] for a slot beyond the
    /// table or an `out` of another length. Returns the generation.
    ///
    /// `verified`: a generation at which a read of the same slots found
    /// them live (the generation an earlier read returned). While the
    /// metadata generation is still `verified` (every change of the
    /// instance table moves it, spec §7.3; §7.4 lets a reader keep what
    /// it decoded at a generation while it stays) the slots still hold
    /// them, and their entries are not loaded again, which is most of a
    /// small read's cost (an entry's cache line per slot, beside a few
    /// value words per CPU). At any other generation the entries are
    /// checked. `None`: always checked.
    #[inline]
    pub fn read_slots_at(
        &self,
        slots: &[(u32, u64)],
        verified: Option<u64>,
        out: &mut [u64],
        retries: u32,
    ) -> Result<u64, Error> {
        if let [key] = slots {
            return self.read_slot_at(*key, verified, out, retries);
        }
        let n = self.blocks.nr_cpus;
        let max = self.blocks.max_instances;
        let oob = Error::OutOfBounds(Section::Counters);
        let tiled = n >= TILE_MIN_CPUS && slots.len() > TILE_DIRECT && slots.len() <= TILE_WORDS;
        // A slot beyond the table is refused before its entry or a value
        // is read. Only the tiled loop looks at every slot first (a pass
        // its CPUs amortise); the others check each slot where they use
        // it, so a small read of verified slots makes no pass of its own.
        if slots.len().checked_mul(n) != Some(out.len())
            || (tiled && slots.iter().any(|&(s, _)| s as usize >= max))
        {
            return Err(oob);
        }
        let (gen1, gen2) = (&self.words[HEADER_GEN1_WORD], &self.words[HEADER_GEN2_WORD]);
        let r = gen_read::<Sound, _, Error>(gen1, gen2, retries, |g| {
            let live = self.live_at(slots, verified, g)?;
            if tiled {
                self.read_tiled(slots, out, retries)?;
            } else {
                self.read_direct(slots, out, retries)?;
            }
            Ok(live)
        })?;
        live_generation(r)
    }

    /// [`read_slots_at`](Self::read_slots_at) of one slot (`key`: the
    /// slot and its registration id), the read of one counter: no loop
    /// over slots, no index worked out per CPU but two additions.
    #[inline]
    pub fn read_slot_at(
        &self,
        key: (u32, u64),
        verified: Option<u64>,
        out: &mut [u64],
        retries: u32,
    ) -> Result<u64, Error> {
        let b = &self.blocks;
        let oob = Error::OutOfBounds(Section::Counters);
        if out.len() != b.nr_cpus || key.0 as usize >= b.max_instances {
            return Err(oob);
        }
        let (gen1, gen2) = (&self.words[HEADER_GEN1_WORD], &self.words[HEADER_GEN2_WORD]);
        let r = gen_read::<Sound, _, Error>(gen1, gen2, retries, |g| {
            let live = self.live_at(core::slice::from_ref(&key), verified, g)?;
            // Word indexes of this CPU's sequence word and value.
            let (mut seq, mut value) = (b.seq0, b.values0 + key.0 as usize);
            for (cpu, o) in out.iter_mut().enumerate() {
                let (Some(s), Some(v)) = (self.words.get(seq), self.words.get(value)) else {
                    return Err(oob);
                };
                *o = seq_read::<Sound, _>(s, retries, || v.load(Ordering::Relaxed))
                    .ok_or(Error::BusyCpu(cpu as u32))?;
                seq = seq.wrapping_add(b.stride);
                value = value.wrapping_add(b.stride);
            }
            Ok(live)
        })?;
        live_generation(r)
    }

    /// Whether every one of `slots` holds its registration, live, at
    /// generation `g`: entries found live at `verified` hold the same
    /// registrations while the generation is still `verified`, so only
    /// at another generation are they loaded ([`live`](Self::live)).
    #[inline]
    fn live_at(&self, slots: &[(u32, u64)], verified: Option<u64>, g: u64) -> Result<bool, Error> {
        if verified == Some(g) {
            return Ok(true);
        }
        self.live(slots)
    }

    /// Whether every one of `slots` holds its registration, live (each
    /// entry's `state` and `reg_id`, one relaxed load each); a slot beyond
    /// the table is an error.
    #[inline(never)]
    fn live(&self, slots: &[(u32, u64)]) -> Result<bool, Error> {
        let mut live = true;
        for &(slot, reg) in slots {
            if slot as usize >= self.blocks.max_instances {
                return Err(Error::OutOfBounds(Section::Counters));
            }
            let e = self.blocks.instances0 + slot as usize * INSTANCE_ENTRY_WORDS;
            // `state` is the first 4 bytes of its word, in native order.
            let w = self.words[e + STATE_WORD]
                .load(Ordering::Relaxed)
                .to_ne_bytes();
            let state = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
            live &= self.words[e + REG_WORD].load(Ordering::Relaxed) == reg
                && state == SlotState::Live as u32;
        }
        Ok(live)
    }

    /// The sequence word of `cpu` and its value slots (`cpu < nr_cpus`:
    /// in bounds, as [`new`](Self::new) checked).
    #[inline]
    fn block(&self, cpu: usize) -> (&'a AtomicU64, &'a [AtomicU64]) {
        let at = cpu * self.blocks.stride;
        let seq = &self.words[self.blocks.seq0 + at];
        let values = &self.words[self.blocks.values0 + at..][..self.blocks.max_instances];
        (seq, values)
    }

    /// `slots` of every CPU into `out` (slot major), a value at a time.
    #[inline]
    fn read_direct(
        &self,
        slots: &[(u32, u64)],
        out: &mut [u64],
        retries: u32,
    ) -> Result<(), Error> {
        let b = &self.blocks;
        let oob = Error::OutOfBounds(Section::Counters);
        // Word indexes of this CPU's sequence word and first value slot.
        let (mut seq, mut first) = (b.seq0, b.values0);
        for cpu in 0..b.nr_cpus {
            let end = first.wrapping_add(b.max_instances);
            let (Some(s), Some(values)) = (self.words.get(seq), self.words.get(first..end)) else {
                return Err(oob);
            };
            // The CPU's values as one slice, and its place in `out`
            // stepped by `nr_cpus` (one row per slot): no address is
            // worked out again per value, and no division
            // (`chunks_exact_mut(n)` divides by `n` each time it is made),
            // only the two index checks, which end the copy.
            let within = seq_read::<Sound, _>(s, retries, || {
                let mut at = cpu;
                for &(slot, _) in slots {
                    let (Some(v), Some(o)) = (values.get(slot as usize), out.get_mut(at)) else {
                        return false;
                    };
                    *o = v.load(Ordering::Relaxed);
                    at = at.wrapping_add(b.nr_cpus);
                }
                true
            })
            .ok_or(Error::BusyCpu(cpu as u32))?;
            if !within {
                return Err(oob);
            }
            seq = seq.wrapping_add(b.stride);
            first = first.wrapping_add(b.stride);
        }
        Ok(())
    }

    /// [`read_direct`](Self::read_direct), a tile of CPUs at a time: each
    /// CPU's values (between two equal even loads of its sequence word, as
    /// there) go to a tile on the stack, CPU major, and the tile then to
    /// `out` a row segment at a time, so `out` is written in runs of
    /// [`TILE_CPUS`] consecutive words. Written a value at a time, CPU
    /// after CPU, `out`'s rows (`nr_cpus` words apart) are the same cache
    /// set in every row when `nr_cpus` is a multiple of 512 (a row stride
    /// of 4 KiB): more slots than the cache has ways then miss it at
    /// every store, 10x slower per value than at any other CPU count.
    /// `TILE_DIRECT < slots.len() <= TILE_WORDS`, every slot below
    /// `max_instances`, `out.len() == slots.len() * nr_cpus`.
    #[inline(never)]
    fn read_tiled(&self, slots: &[(u32, u64)], out: &mut [u64], retries: u32) -> Result<(), Error> {
        let n = self.blocks.nr_cpus;
        let per = slots.len();
        let g = (TILE_WORDS / per).clamp(1, TILE_CPUS);
        let mut tile = [0u64; TILE_WORDS];
        for c0 in (0..n).step_by(g) {
            let cpus = g.min(n - c0);
            for (i, row) in tile.chunks_exact_mut(per).take(cpus).enumerate() {
                let cpu = c0 + i;
                let (seq, values) = self.block(cpu);
                seq_read::<Sound, _>(seq, retries, || {
                    for (v, &(slot, _)) in row.iter_mut().zip(slots) {
                        *v = values[slot as usize].load(Ordering::Relaxed);
                    }
                })
                .ok_or(Error::BusyCpu(cpu as u32))?;
            }
            for (k, dst) in out.chunks_exact_mut(n).enumerate() {
                for (i, d) in dst[c0..c0 + cpus].iter_mut().enumerate() {
                    *d = tile[i * per + k];
                }
            }
        }
        Ok(())
    }

    /// Copies runs of value slots of every CPU inside one metadata
    /// generation: run `(src, len)` of CPU `cpu` goes to
    /// `out[cpu * stride + dst..][..len]`, where `dst` is the sum of the
    /// earlier runs' lengths and `stride` the sum of all (so `out` holds
    /// `nr_cpus * stride` words). Each CPU's runs are one consistent copy
    /// (between two equal even loads of its sequence word), so a
    /// histogram observation is seen whole. Returns the generation; the
    /// caller checks that its runs still describe that generation's
    /// members, and checks the histogram values it serves from them with
    /// [`family::check_histograms`](crate::family::check_histograms). The
    /// cost is the runs' words, not the slots before them.
    #[inline]
    pub fn read_ranges(
        &self,
        runs: &[(usize, usize)],
        out: &mut [u64],
        retries: u32,
    ) -> Result<u64, Error> {
        let n = self.blocks.nr_cpus;
        let stride: usize = runs.iter().map(|&(_, len)| len).sum();
        let in_table = runs.iter().all(|&(src, len)| {
            src.checked_add(len)
                .is_some_and(|e| e <= self.blocks.max_instances)
        });
        if stride.checked_mul(n) != Some(out.len()) || !in_table {
            return Err(Error::OutOfBounds(Section::Counters));
        }
        let b = &self.blocks;
        let (gen1, gen2) = (&self.words[HEADER_GEN1_WORD], &self.words[HEADER_GEN2_WORD]);
        let r = gen_read::<Sound, _, Error>(gen1, gen2, retries, |_| {
            // Word indexes of this CPU's sequence word and first value
            // slot, and its row's place in `out`: stepped, not worked
            // out per CPU (and no division, as `chunks_exact_mut` makes).
            let (mut seq, mut first, mut at) = (b.seq0, b.values0, 0usize);
            for cpu in 0..b.nr_cpus {
                let next = at.wrapping_add(stride);
                let (Some(s), Some(row)) = (self.words.get(seq), out.get_mut(at..next)) else {
                    return Err(Error::OutOfBounds(Section::Counters));
                };
                seq_read::<Sound, _>(s, retries, || {
                    let mut dst = 0;
                    for &(src, len) in runs {
                        (self.copy)(self.words, first + src, &mut row[dst..dst + len]);
                        dst += len;
                    }
                })
                .ok_or(Error::BusyCpu(cpu as u32))?;
                seq = seq.wrapping_add(b.stride);
                first = first.wrapping_add(b.stride);
                at = next;
            }
            Ok(())
        })?;
        r.map(|((), g)| g).ok_or(Error::BusyMetadata)
    }
}

/// What a read of slots inside one generation ([`gen_read`]) returns:
/// the generation when every slot held its registration, live.
#[inline]
fn live_generation(r: Option<(bool, u64)>) -> Result<u64, Error> {
    match r {
        Some((true, g)) => Ok(g),
        Some((false, _)) => Err(Error::UnknownInstance),
        None => Err(Error::BusyMetadata),
    }
}
