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
use crate::protocol::{gen_read, seq_read, seq_read_group, Sound};
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

/// CPUs whose values [`Values::read_slots_at`] reads in one window at
/// most: it writes each of `out`'s rows a run of this many words (one
/// 64-byte cache line) at a time. Written a value at a time, CPU after
/// CPU, `out`'s rows (`nr_cpus` words apart) are the same cache set in
/// every row when `nr_cpus` is a multiple of 512 (a row stride of 4 KiB):
/// more slots than the cache has ways then missed it at every store, 10x
/// slower per value than at any other CPU count.
const GROUP_CPUS: usize = 8;

/// Runs of up to this many words [`Values::read_ranges`] copies with its own
/// loads, not through the copier: a call costs more than it saves there.
const INLINE_RUN: usize = 16;

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
/// protocol ([`gen_read`], [`seq_read`], [`seq_read_group`]), as
/// [`SegmentView`](crate::SegmentView)'s.
#[derive(Clone, Copy, Debug)]
pub struct Values<'a> {
    words: &'a [AtomicU64],
    blocks: Blocks,
    copy: CopyWords,
}

impl<'a> Values<'a> {
    /// The blocks `blocks` of `words`, copying runs of more than 16 value
    /// words with `copy` (see [`CopyWords`]; shorter ones with a relaxed
    /// load a word). Refuses blocks that do not fit in
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
    ///
    /// Slots verified at the current generation, in a segment of up to 8
    /// CPUs, are read first in one attempt with every CPU in one window
    /// (no entry loaded, no window worked out); if the generation moved, a
    /// CPU was busy or a slot is beyond the table, the read is made as
    /// above, with its `retries` (so it may make one attempt more than
    /// `retries`).
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
        // A slot beyond the table is never read: `live` refuses it before
        // its entry is loaded, and each window's loop checks every slot
        // where it uses it (so a small read of verified slots makes no pass
        // of its own; there, a CPU left busy is reported before the bound).
        if slots.len().checked_mul(self.blocks.nr_cpus) != Some(out.len()) {
            return Err(Error::OutOfBounds(Section::Counters));
        }
        if let (Some(v), 1.., ..=GROUP_CPUS) = (verified, retries, self.blocks.nr_cpus) {
            if let Some(g) = self.read_verified_in_one_window(slots, v, out) {
                return Ok(g);
            }
        }
        let (gen1, gen2) = (&self.words[HEADER_GEN1_WORD], &self.words[HEADER_GEN2_WORD]);
        let r = gen_read::<Sound, _, Error>(gen1, gen2, retries, |g| {
            let live = self.live_at(slots, verified, g)?;
            self.read_groups(slots, out, retries)?;
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

    /// [`read_verified`](Self::read_verified) of a segment of up to
    /// [`GROUP_CPUS`] CPUs, every CPU in one window (`None` for more).
    #[inline(never)]
    fn read_verified_in_one_window(
        &self,
        slots: &[(u32, u64)],
        g: u64,
        out: &mut [u64],
    ) -> Option<u64> {
        match self.blocks.nr_cpus {
            1 => self.read_verified::<1>(slots, g, out),
            2 => self.read_verified::<2>(slots, g, out),
            3 => self.read_verified::<3>(slots, g, out),
            4 => self.read_verified::<4>(slots, g, out),
            5 => self.read_verified::<5>(slots, g, out),
            6 => self.read_verified::<6>(slots, g, out),
            7 => self.read_verified::<7>(slots, g, out),
            GROUP_CPUS => self.read_verified::<GROUP_CPUS>(slots, g, out),
            _ => None,
        }
    }

    /// One attempt of [`read_slots_at`](Self::read_slots_at) of slots
    /// found live at generation `verified`, all `G` CPUs (`nr_cpus`) in
    /// one window: `Some(generation)` if the generation was still
    /// `verified`, every CPU quiet and every slot inside the table, else
    /// `None` (the general path then reads, and retries, and reports what
    /// it finds). `out` holds a row of `G` words per slot, as
    /// `read_slots_at` checked.
    #[inline]
    fn read_verified<const G: usize>(
        &self,
        slots: &[(u32, u64)],
        verified: u64,
        out: &mut [u64],
    ) -> Option<u64> {
        debug_assert!(G == self.blocks.nr_cpus && Some(out.len()) == slots.len().checked_mul(G));
        let (gen1, gen2) = (
            self.words.get(HEADER_GEN1_WORD)?,
            self.words.get(HEADER_GEN2_WORD)?,
        );
        let (seqs, blocks) = self.group::<G>(0).ok()?;
        let r = gen_read::<Sound, _, ()>(gen1, gen2, 1, |g| {
            if g != verified {
                return Err(());
            }
            seq_read_group::<Sound, G, _>(seqs, 1, || self.copy_window(&blocks, slots, 0, out))
                .map_err(drop)
        });
        match r {
            Ok(Some((true, g))) => Some(g),
            _ => None,
        }
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

    /// `slots` of every CPU into `out` (slot major), in groups of up to
    /// [`GROUP_CPUS`] CPUs, each group in one window
    /// ([`seq_read_group`]).
    #[inline]
    fn read_groups(
        &self,
        slots: &[(u32, u64)],
        out: &mut [u64],
        retries: u32,
    ) -> Result<(), Error> {
        let n = self.blocks.nr_cpus;
        // CPUs before the first 64-byte boundary of `out`: the groups
        // after them write whole cache lines of each row when the rows'
        // starts are aligned alike (`nr_cpus` a multiple of 8), and a
        // line a group leaves half written is not evicted by 30 other
        // rows in the same cache set before the next group completes it.
        let lead = (out.as_ptr() as usize / 8).wrapping_neg() % GROUP_CPUS;
        let mut c0 = 0;
        while c0 < n {
            let left = if c0 < lead { lead.min(n) - c0 } else { n - c0 };
            c0 += match left {
                1 => self.read_group::<1>(c0, slots, out, retries)?,
                2 => self.read_group::<2>(c0, slots, out, retries)?,
                3 => self.read_group::<3>(c0, slots, out, retries)?,
                4..GROUP_CPUS => self.read_group::<4>(c0, slots, out, retries)?,
                _ => self.read_group::<GROUP_CPUS>(c0, slots, out, retries)?,
            };
        }
        Ok(())
    }

    /// The sequence words of CPUs `c0..c0 + G` and their value slots,
    /// each block's as a slice of exactly `max_instances` words (so one
    /// comparison of a slot covers its loads on every CPU of the group).
    /// A CPU whose block is not inside the words (none below `nr_cpus`,
    /// as [`new`](Self::new) checked) is an error, not a panic.
    #[inline]
    #[allow(clippy::type_complexity)]
    fn group<const G: usize>(
        &self,
        c0: usize,
    ) -> Result<([&'a AtomicU64; G], [&'a [AtomicU64]; G]), Error> {
        let b = &self.blocks;
        let mut seqs = [&self.words[HEADER_GEN1_WORD]; G];
        let mut blocks: [&[AtomicU64]; G] = [&[]; G];
        for (i, (seq, values)) in seqs.iter_mut().zip(&mut blocks).enumerate() {
            let at = (c0 + i).wrapping_mul(b.stride);
            let first = b.values0.wrapping_add(at);
            let (Some(s), Some(v)) = (
                self.words.get(b.seq0.wrapping_add(at)),
                self.words
                    .get(first..)
                    .and_then(|v| v.get(..b.max_instances)),
            ) else {
                return Err(Error::OutOfBounds(Section::Counters));
            };
            (*seq, *values) = (s, v);
        }
        Ok((seqs, blocks))
    }

    /// `slots` of CPUs `c0..c0 + G` into `out` (slot major, `nr_cpus`
    /// words a row), in one window: a slot at a time, its `G` values
    /// written to its row as one run. Each block is taken as a slice of
    /// exactly `max_instances` words, so one comparison of a slot covers
    /// its `G` loads, and one check of the run its `G` stores. Returns `G`.
    #[inline]
    fn read_group<const G: usize>(
        &self,
        c0: usize,
        slots: &[(u32, u64)],
        out: &mut [u64],
        retries: u32,
    ) -> Result<usize, Error> {
        debug_assert!(c0 + G <= self.blocks.nr_cpus, "a group past the last CPU");
        debug_assert_eq!(
            Some(out.len()),
            slots.len().checked_mul(self.blocks.nr_cpus)
        );
        let (seqs, blocks) = self.group::<G>(c0)?;
        let r = seq_read_group::<Sound, G, _>(seqs, retries, || {
            self.copy_window(&blocks, slots, c0, out)
        });
        // A window of several CPUs needs them all quiet at once: when
        // writers kept one of them busy, each CPU is read alone (as a
        // reader of one block would), so a busy read is no likelier than
        // with a window per CPU, and the CPU it names is the one that
        // stayed busy.
        let within = match r {
            Ok(within) => within,
            Err(_) => self.read_apart(c0, G, slots, out, retries)?,
        };
        if !within {
            return Err(Error::OutOfBounds(Section::Counters));
        }
        Ok(G)
    }

    /// The copy inside a window of CPUs `c0..c0 + G` (their value
    /// blocks `blocks`, each a slice of `max_instances` words): slot `i`'s
    /// `G` values to `out[i * nr_cpus + c0..][..G]`. `false`: a slot beyond
    /// the table, or a run past a row. The group's run in each row is
    /// checked once here. `out` holds a row (`nr_cpus` words) per slot, as
    /// `read_slots_at` checked before any window: zipped with the slots,
    /// the rows need no check of their own as the loop goes.
    #[inline]
    fn copy_window<const G: usize>(
        &self,
        blocks: &[&[AtomicU64]; G],
        slots: &[(u32, u64)],
        c0: usize,
        out: &mut [u64],
    ) -> bool {
        let (n, max) = (self.blocks.nr_cpus, self.blocks.max_instances);
        if c0 > n || n - c0 < G {
            return false;
        }
        let mut within = true;
        for (&(slot, _), row) in slots.iter().zip(out.chunks_exact_mut(n)) {
            let s = slot as usize;
            if s >= max {
                within = false;
                break;
            }
            let run = &mut row[c0..c0 + G];
            for (o, values) in run.iter_mut().zip(blocks) {
                *o = values[s].load(Ordering::Relaxed);
            }
        }
        within
    }

    /// [`read_group`](Self::read_group) of CPUs `c0..c0 + g`, a window per
    /// CPU: what a busy group falls back to. `Ok(false)`: a slot beyond
    /// the table (or an `out` too short).
    #[cold]
    #[inline(never)]
    fn read_apart(
        &self,
        c0: usize,
        g: usize,
        slots: &[(u32, u64)],
        out: &mut [u64],
        retries: u32,
    ) -> Result<bool, Error> {
        for cpu in c0..c0 + g {
            let ([seq], [values]) = self.group::<1>(cpu)?;
            let within = seq_read::<Sound, _>(seq, retries, || {
                let mut at = cpu;
                for &(slot, _) in slots {
                    let (Some(v), Some(o)) = (values.get(slot as usize), out.get_mut(at)) else {
                        return false;
                    };
                    *o = v.load(Ordering::Relaxed);
                    at += self.blocks.nr_cpus;
                }
                true
            })
            .ok_or(Error::BusyCpu(cpu as u32))?;
            if !within {
                return Ok(false);
            }
        }
        Ok(true)
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
        // Every run inside the table, and the sum of their lengths (one
        // pass over the runs).
        let max = self.blocks.max_instances;
        let stride = runs.iter().try_fold(0usize, |sum, &(src, len)| {
            src.checked_add(len).filter(|&end| end <= max)?;
            sum.checked_add(len)
        });
        let Some(stride) = stride.filter(|s| s.checked_mul(n) == Some(out.len())) else {
            return Err(Error::OutOfBounds(Section::Counters));
        };
        let b = &self.blocks;
        let oob = Error::OutOfBounds(Section::Counters);
        let (gen1, gen2) = (&self.words[HEADER_GEN1_WORD], &self.words[HEADER_GEN2_WORD]);
        let r = gen_read::<Sound, _, Error>(gen1, gen2, retries, |_| {
            // Word indexes of this CPU's sequence word and first value
            // slot, stepped, not worked out per CPU; its row split off
            // `out` in turn (no division, as `chunks_exact_mut` makes).
            let (mut seq, mut first) = (b.seq0, b.values0);
            if let [(src, len)] = *runs {
                // One run (a family whose members are adjacent): each
                // CPU's run and row taken as slices of one length, so the
                // copy checks nothing per word.
                first = first.wrapping_add(src);
                let mut rows = &mut *out;
                for cpu in 0..b.nr_cpus {
                    let (Some(s), Some(words), Some((row, more))) = (
                        self.words.get(seq),
                        self.words.get(first..first.wrapping_add(len)),
                        rows.split_at_mut_checked(len),
                    ) else {
                        return Err(oob);
                    };
                    seq_read::<Sound, _>(s, retries, || self.copy_run(words, row))
                        .ok_or(Error::BusyCpu(cpu as u32))?;
                    seq = seq.wrapping_add(b.stride);
                    first = first.wrapping_add(b.stride);
                    rows = more;
                }
                return Ok(());
            }
            let mut rows = &mut *out;
            for cpu in 0..b.nr_cpus {
                let (Some(s), Some((row, more))) =
                    (self.words.get(seq), rows.split_at_mut_checked(stride))
                else {
                    return Err(oob);
                };
                let within = seq_read::<Sound, _>(s, retries, || {
                    let mut dst = 0;
                    for &(src, len) in runs {
                        let from = first.wrapping_add(src);
                        let (Some(words), Some(to)) = (
                            self.words.get(from..from.wrapping_add(len)),
                            row.get_mut(dst..dst + len),
                        ) else {
                            return false;
                        };
                        self.copy_run(words, to);
                        dst += len;
                    }
                    true
                })
                .ok_or(Error::BusyCpu(cpu as u32))?;
                if !within {
                    return Err(oob);
                }
                seq = seq.wrapping_add(b.stride);
                first = first.wrapping_add(b.stride);
                rows = more;
            }
            Ok(())
        })?;
        r.map(|((), g)| g).ok_or(Error::BusyMetadata)
    }

    /// Copies `words` into `to` (of the same length): a short run with
    /// one relaxed load a word, here, a longer one with the copier.
    #[inline]
    fn copy_run(&self, words: &[AtomicU64], to: &mut [u64]) {
        if to.len() <= INLINE_RUN {
            for (o, w) in to.iter_mut().zip(words) {
                *o = w.load(Ordering::Relaxed);
            }
        } else {
            (self.copy)(words, 0, to);
        }
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
