//! The per-CPU update engine of the userspace writer.
//!
//! Two methods implement the same writer side of the protocol:
//!
//! * [`Method::Rseq`] (x86_64, glibc with rseq): every write to CPU `c`'s block
//!   is an rseq critical section running on CPU `c` (see [`super::rseq`]);
//! * [`Method::Lock`] (anywhere): a single counter is changed with
//!   `fetch_add`, and multi-word updates take a process-private per-block
//!   lock and use [`perfabi::protocol::seq_write_begin`]/`seq_write_end`.
//!
//! One process uses one method for a segment, chosen when it is created.

use core::sync::atomic::{AtomicBool, Ordering};
use std::cell::UnsafeCell;

use crossbeam_utils::CachePadded;

use perfabi::damon::Region;
use perfabi::layout::{DamonRecord, CPU_DAMON_NEXT_WORD, CPU_SEQ_WORD, DAMON_RECORD_WORDS};
use perfabi::protocol::{seq_write_begin, seq_write_end, Sound};
use perfabi::Error;
use std::sync::atomic::AtomicU64;

use perfabi::validate::Layout;

#[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
use super::rseq;

/// How the writer makes per-CPU updates exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Restartable sequences: the cheapest, and per-CPU attribution is exact.
    Rseq,
    /// `fetch_add` and per-block locks: portable, a few ns more per update.
    Lock,
}

/// Which [`Method`] to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MethodChoice {
    /// Rseq where available, else Lock.
    #[default]
    Auto,
    /// Always Lock (for comparison and for hosts where rseq misbehaves).
    Lock,
}

/// One word of a multi-word update: its word index inside the block.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WordDelta {
    pub(crate) index: usize,
    pub(crate) val: u64,
}

/// One word of every CPU's block, with everything the fast path needs to
/// reach the current CPU's copy of it: made by [`Engine::word`], used by
/// [`Engine::add`] of the same engine. Copied into every handle
/// (`Counter`), so that an adjust through a handle loads these from the
/// handle, not through the writer's state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Word {
    /// CPU 0's block, in the writer's mapping (the engine's `block0`).
    block0: *mut u64,
    /// The word's index in a block (`< cpu_block_size / 8`).
    index: usize,
    /// Bytes from one CPU's block to the next.
    stride: usize,
    /// glibc's `__rseq_offset` (meaningful when `rseq_cpus` is not 0).
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    rseq_offset: isize,
    /// The engine's `rseq_cpus`: `nr_cpus` if the method is rseq, else 0.
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    rseq_cpus: u32,
}

// SAFETY: a `Word` is an address in the writer's mapping and numbers; only
// the engine that made it writes through it, under the same rules as
// through its own `block0` (rseq sections on the block's CPU, or atomic
// `fetch_add`), from whichever thread: see the engine's `Send`/`Sync`.
unsafe impl Send for Word {}
// SAFETY: as above; sharing a `Word` shares no mutable state.
unsafe impl Sync for Word {}

/// The word of a block where its counters start: right after the head, in
/// every segment this writer lays out (asserted by [`Engine::new`]).
const COUNTERS_WORD: usize = perfabi::layout::CPU_BLOCK_HEAD_SIZE / 8;

/// Most words one multi-word update may carry.
pub(crate) const MAX_WORDS: usize = 16;
#[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
const _: () = assert!(MAX_WORDS <= rseq::JOURNAL_WORDS);

struct PerCpuState {
    lock: AtomicBool,
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    journal: UnsafeCell<rseq::Journal>,
    #[cfg(not(all(target_arch = "x86_64", target_env = "gnu")))]
    _journal: UnsafeCell<()>,
}

/// Counts of the update engine's slow paths (process-private diagnostics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpdateStats {
    /// Rseq sections the kernel aborted (preemption, migration, signal), or
    /// that found the thread on another CPU; each was retried.
    pub aborts: u64,
    /// Undo passes: multi-word updates interrupted with the sequence odd,
    /// rolled back by the next section on that CPU.
    pub undos: u64,
    /// Blocks repaired by a thread that pinned itself to their CPU, because
    /// the aborted update's thread had moved on to another CPU.
    pub repairs: u64,
}

pub(crate) struct Engine {
    method: Method,
    /// CPU 0's block (its sequence word), in the writer's mapping.
    block0: *mut u64,
    /// Bytes from one CPU's block to the next (`cpu_block_size`).
    stride: usize,
    /// glibc's `__rseq_offset` (meaningful when `method` is Rseq).
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    rseq_offset: isize,
    /// DAMON records may be stored 16 bytes at a time (see
    /// [`rseq::wide_stores_atomic`]).
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    wide_stores: bool,
    /// `nr_cpus` if `method` is Rseq, else 0: adjust's test of the method
    /// and the bound its section checks `cpu_id` against, in one load.
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    rseq_cpus: u32,
    aborts: AtomicU64,
    repairs: AtomicU64,
    nr_cpus: usize,
    per_cpu: Box<[CachePadded<PerCpuState>]>,
}

// SAFETY: the journals are only touched by rseq sections of the CPU they
// belong to, which exclude each other (see `rseq`); everything else is atomic.
unsafe impl Sync for Engine {}
// SAFETY: as above; the engine holds no thread-bound state.
unsafe impl Send for Engine {}

impl Engine {
    /// An engine for the segment mapped at `words`, which must outlive it.
    pub(crate) fn new(words: &[AtomicU64], layout: &Layout, choice: MethodChoice) -> Self {
        // Writers lay counters out right after the block's head; the fast
        // path relies on it (`COUNTERS_WORD`).
        assert_eq!(layout.counters_offset, COUNTERS_WORD * 8);
        let method = match choice {
            MethodChoice::Lock => Method::Lock,
            MethodChoice::Auto => Self::probe_rseq(layout.nr_cpus),
        };
        let per_cpu = (0..layout.nr_cpus)
            .map(|_| {
                CachePadded::new(PerCpuState {
                    lock: AtomicBool::new(false),
                    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
                    journal: UnsafeCell::new(rseq::Journal::new()),
                    #[cfg(not(all(target_arch = "x86_64", target_env = "gnu")))]
                    _journal: UnsafeCell::new(()),
                })
            })
            .collect();
        Self {
            method,
            // From a sub-slice, so that the pointer may reach every block (a
            // pointer from one word's `as_ptr` covers that word only).
            block0: words[layout.cpu_block_word(0)..].as_ptr() as *mut u64,
            stride: layout.cpu_block_size,
            #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
            rseq_offset: rseq::registered_offset().unwrap_or(0),
            #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
            wide_stores: rseq::wide_stores_atomic(),
            rseq_cpus: if method == Method::Rseq {
                u32::try_from(layout.nr_cpus).expect("the ABI bounds nr_cpus")
            } else {
                0
            },
            aborts: AtomicU64::new(0),
            repairs: AtomicU64::new(0),
            nr_cpus: layout.nr_cpus,
            per_cpu,
        }
    }

    pub(crate) fn stats(&self) -> UpdateStats {
        #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
        let undos = self
            .per_cpu
            .iter()
            .map(|s| rseq::Journal::undos(s.journal.get()))
            .sum();
        #[cfg(not(all(target_arch = "x86_64", target_env = "gnu")))]
        let undos = 0;
        UpdateStats {
            aborts: self.aborts.load(Ordering::Relaxed),
            undos,
            repairs: self.repairs.load(Ordering::Relaxed),
        }
    }

    #[cold]
    fn aborted(&self) {
        self.aborts.fetch_add(1, Ordering::Relaxed);
    }

    /// Rseq is usable when this thread has an rseq area and every CPU the
    /// kernel may report has a block (blocks cover all possible CPUs).
    fn probe_rseq(nr_cpus: usize) -> Method {
        #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
        if let Some(area) = rseq::area() {
            let possible = crate::host::possible_cpus().unwrap_or(usize::MAX);
            if rseq::cpu(area).is_some() && possible <= nr_cpus {
                return Method::Rseq;
            }
        }
        let _ = nr_cpus;
        Method::Lock
    }

    pub(crate) fn method(&self) -> Method {
        self.method
    }

    /// The block of the CPU the thread runs on (or, if the segment has
    /// fewer blocks than the machine CPUs, of that CPU modulo their
    /// number): a hint, as every block is a correct home for the lock
    /// method's updates. Where glibc registered rseq for the thread (the
    /// lock method was asked for, or the blocks do not cover every CPU),
    /// the kernel keeps the CPU in the thread's rseq area: one load, not a
    /// call of `getcpu`.
    #[inline]
    fn current_cpu(&self) -> usize {
        #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
        if let Some(cpu) = rseq::area().and_then(rseq::cpu) {
            return cpu as usize % self.nr_cpus;
        }
        rustix::thread::sched_getcpu() % self.nr_cpus
    }

    /// Word `index` of every CPU's block, as the fast path reaches the
    /// current CPU's copy (see [`Word`]).
    ///
    /// # Safety
    ///
    /// `index` is a word of a block: `index < layout.cpu_block_size / 8`,
    /// for the layout this engine was made for.
    #[inline(always)]
    pub(crate) unsafe fn word(&self, index: usize) -> Word {
        debug_assert!(index < self.stride / 8, "a word of a block");
        Word {
            block0: self.block0,
            index,
            stride: self.stride,
            #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
            rseq_offset: self.rseq_offset,
            #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
            rseq_cpus: self.rseq_cpus,
        }
    }

    /// Counter `slot` of every CPU's block (see [`Self::word`]).
    ///
    /// # Safety
    ///
    /// `slot < layout.max_instances`, for the layout this engine was made
    /// for.
    #[inline(always)]
    pub(crate) unsafe fn counter(&self, slot: usize) -> Word {
        // SAFETY: a word of every block: `slot < max_instances` (the
        // caller's contract) and every block's counter array, from
        // `COUNTERS_WORD`, holds `max_instances` words.
        unsafe { self.word(COUNTERS_WORD + slot) }
    }

    /// Adds `delta` to word `w` of the current CPU's block: the fast path
    /// of `Writer::adjust`, `Counter::adjust` and every other single-word
    /// adjust, inlined into its callers.
    ///
    /// `w` carries everything the committed path needs (`block0`,
    /// `stride`, and for rseq `__rseq_offset` and `rseq_cpus`, whose one
    /// value is both the test of the method and the bound of `cpu_id`).
    /// With rseq the committed path is one straight line: the section of
    /// [`rseq::adjust`], whose other outcomes jump to the slow path (no
    /// status to test after a commit). The segment's words
    /// and layout are needed only off that path (an abort, an odd
    /// sequence), so `segment` is called only there: the inlined code loads
    /// nothing for them.
    ///
    /// # Safety
    ///
    /// `w` was made by this engine ([`Self::word`] or [`Self::counter`]),
    /// and `segment` returns the segment's words and the layout this engine
    /// was made for.
    #[inline(always)]
    pub(crate) unsafe fn add<'a>(
        &self,
        w: Word,
        segment: impl FnOnce() -> (&'a [AtomicU64], &'a Layout),
        delta: u64,
    ) -> Result<(), Error> {
        #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
        if w.rseq_cpus != 0 {
            // SAFETY: `w` is a word of this engine's blocks (the caller's
            // contract), and rseq is its method (`rseq_cpus` is not 0).
            let st = unsafe { Self::try_add(w, delta) };
            // One call of the slow path per outcome, the outcome a constant
            // of the callee: the committed path then sets nothing (with one
            // call taking the outcome, the compiler sets one outcome's
            // value in advance, before the section).
            return match st {
                rseq::Status::Done => Ok(()),
                rseq::Status::Aborted => self.adjust_rseq_slow::<true, _>(segment, w.index, delta),
                rseq::Status::Recover => self.adjust_rseq_slow::<false, _>(segment, w.index, delta),
            };
        }
        let _ = segment;
        // SAFETY: `w.index` is a word of a block (`w` was made by this
        // engine's `word`).
        unsafe { self.adjust_lock(w.index, delta) };
        Ok(())
    }

    /// Adds `delta` to word `index` of the current CPU's block.
    pub(crate) fn adjust(
        &self,
        words: &[AtomicU64],
        layout: &Layout,
        index: usize,
        delta: u64,
    ) -> Result<(), Error> {
        assert!(index < layout.cpu_block_size / 8);
        // SAFETY: `index` is a word of a block (asserted above), the word
        // is this engine's, and `words` and `layout` are the caller's
        // segment, the one this engine was made for.
        unsafe { self.add(self.word(index), || (words, layout), delta) }
    }

    /// The lock method's adjust: one `fetch_add` on word `index` of the
    /// current CPU's block.
    ///
    /// Where rseq may be the method, out of line and cold: the code inlined
    /// into `Writer::adjust`'s callers stays small and the rseq path one
    /// straight line (the call costs the lock method a few instructions
    /// next to its `getcpu`). Elsewhere, the only method, inlined.
    ///
    /// # Safety
    ///
    /// `index` is a word of a block: `index < cpu_block_size / 8`.
    #[cfg_attr(all(target_arch = "x86_64", target_env = "gnu"), cold, inline(never))]
    #[cfg_attr(not(all(target_arch = "x86_64", target_env = "gnu")), inline(always))]
    unsafe fn adjust_lock(&self, index: usize, delta: u64) {
        debug_assert!(index < self.stride / 8);
        let cpu = self.current_cpu();
        // SAFETY: `cpu < nr_cpus` (`current_cpu`), so `block0 + cpu *
        // stride` bytes is CPU `cpu`'s block, inside the mapping, and word
        // `index` of it (the caller's contract) an aligned word of the
        // mapping; the mapping's words are only ever accessed atomically
        // (see `Mapping`), as this `fetch_add` does.
        unsafe { AtomicU64::from_ptr(self.block0.byte_add(cpu * self.stride).add(index)) }
            .fetch_add(delta, Ordering::Relaxed);
    }

    /// One attempt at the rseq section that adds `delta` to word `w` of
    /// the current CPU's block.
    ///
    /// # Safety
    ///
    /// `w` was made by an engine whose method is rseq.
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    #[inline(always)]
    unsafe fn try_add(w: Word, delta: u64) -> rseq::Status {
        debug_assert!(w.index < w.stride / 8, "a word of a block");
        // SAFETY: `w` comes from an engine whose method is rseq (the
        // caller's contract), which it is only if glibc registered rseq
        // (`rseq_offset` is its `__rseq_offset`) and the blocks cover every
        // possible CPU; then `rseq_cpus` is `nr_cpus`, and the section
        // refuses a `cpu_id >= nr_cpus`, so `block0 + cpu * stride` is CPU
        // `cpu`'s block inside the mapping, and word `index` of it (`w` was
        // made by `Engine::word`) a word of that block. Only sections
        // running on `cpu` write that block's words.
        unsafe {
            rseq::adjust(
                w.rseq_offset,
                w.rseq_cpus,
                w.block0,
                w.index,
                w.stride,
                delta,
            )
        }
    }

    /// What follows an attempt of [`Self::try_add`] on word `index` that
    /// did not commit (`ABORTED`: the kernel aborted it; else it refused):
    /// count an abort, or undo an aborted multi-word update, and try again;
    /// or refuse a thread without rseq. Out of line, and called with what
    /// the caller has at hand (the segment is fetched here), so that the
    /// code inlined into `Writer::adjust`'s callers stays small.
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    #[cold]
    #[inline(never)]
    fn adjust_rseq_slow<'a, const ABORTED: bool, S>(
        &self,
        segment: S,
        index: usize,
        delta: u64,
    ) -> Result<(), Error>
    where
        S: FnOnce() -> (&'a [AtomicU64], &'a Layout),
    {
        let mut st = if ABORTED {
            rseq::Status::Aborted
        } else {
            rseq::Status::Recover
        };
        let (words, layout) = segment();
        debug_assert!(index < layout.cpu_block_size / 8);
        loop {
            match st {
                rseq::Status::Done => return Ok(()),
                rseq::Status::Aborted => self.aborted(),
                rseq::Status::Recover => {
                    // Refused: the thread has no rseq area (its `cpu_id` is
                    // no CPU's), or the block's sequence is odd.
                    let area = rseq::area().ok_or(Error::NoRseq)?;
                    let cpu = rseq::cpu(area)
                        .filter(|&c| (c as usize) < self.nr_cpus)
                        .ok_or(Error::NoRseq)?;
                    self.multi_rseq(words, layout, area, cpu, &[]);
                }
            }
            // SAFETY: `index` is a word of a block (this function's callers
            // pass the index of the word they tried), the word is this
            // engine's, and rseq is its method (only its attempts come here).
            st = unsafe { Self::try_add(self.word(index), delta) };
        }
    }

    /// Raises word `index` of the current CPU's block to `v` if `v` is
    /// larger: a peak (spec §5.1). The word is
    /// only ever replaced by a new observation, with an atomic
    /// compare-exchange, so it needs no exclusive block: a thread that
    /// migrated meanwhile updates another CPU's word correctly, and a
    /// concurrent reset (a store of 0) is never undone.
    #[inline]
    pub(crate) fn peak(&self, words: &[AtomicU64], layout: &Layout, index: usize, v: u64) {
        let cpu = self.current_cpu();
        let word = &words[layout.cpu_block_word(cpu) + index];
        perfabi::protocol::peak_update::<Sound>(word, v, false);
    }

    /// Adds each `ops[i].val` to its word of the current CPU's block, as one
    /// update that readers see whole.
    pub(crate) fn group(
        &self,
        words: &[AtomicU64],
        layout: &Layout,
        ops: &[WordDelta],
    ) -> Result<(), Error> {
        debug_assert!(ops.len() <= MAX_WORDS);
        #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
        if self.method == Method::Rseq {
            return self.run_rseq(words, layout, |area, cpu| {
                self.multi_rseq(words, layout, area, cpu, ops)
            });
        }
        self.locked(words, layout, |block| {
            for o in ops {
                // Single adjusts run concurrently with fetch_add, without the lock.
                words[block + o.index].fetch_add(o.val, Ordering::Relaxed);
            }
        });
        Ok(())
    }

    /// Stores one record per region in the next slots of the current
    /// CPU's DAMON ring and advances the ring's `damon_next`: record `i` is
    /// `template` with `region_index` `i` and the fields of `regions[i]`.
    /// With rseq, each batch of up to [`rseq::RECORD_BATCH`] records is one update
    /// that readers see whole (if the thread migrates, later batches go to
    /// another CPU's ring, which readers handle); with the lock method all
    /// records are one update.
    ///
    /// Records are built as they are stored: a publication of thousands
    /// of regions must not first write, then read back, an encoded copy of
    /// all its records.
    pub(crate) fn write_records(
        &self,
        words: &[AtomicU64],
        layout: &Layout,
        regions: &[Region],
        template: &DamonRecord,
    ) -> Result<(), Error> {
        let cap = layout.damon_capacity;
        let n = regions.len();
        debug_assert!(n <= u32::MAX as usize && n <= cap);
        #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
        if self.method == Method::Rseq {
            if n == 0 {
                return Ok(());
            }
            let t: [u64; DAMON_RECORD_WORDS] = bytemuck::cast(*template);
            let first: [u64; DAMON_RECORD_WORDS] = bytemuck::cast(DamonRecord {
                region_index: 0,
                ..*template
            });
            // Set for the thread's CPU before each call; the section
            // advances `regions`, `left` and `index` past what it stored.
            let mut args = rseq::RecordArgs {
                base: core::ptr::null_mut(),
                journal: core::ptr::null_mut(),
                regions: regions.as_ptr(),
                left: n as u64,
                ring_off: layout.damon_offset as u64,
                cap: cap as u64,
                words: 0,
                after: 0,
                head: [t[0], t[1], t[2]],
                index: first[3],
                tail: t[7],
                wide: u64::from(self.wide_stores),
            };
            return self.run_rseq(words, layout, |area, cpu| {
                let block = layout.cpu_block_word(cpu as usize);
                args.base = words[block].as_ptr();
                args.journal = self.per_cpu[cpu as usize].journal.get();
                // SAFETY: `cpu < nr_cpus` (rseq was chosen only if blocks
                // cover every possible CPU), so `base` is CPU `cpu`'s block
                // and `journal` its journal; its ring of `cap >= n > 0`
                // slots at `damon_offset` lies inside it, 64-byte aligned
                // (blocks are page aligned, `damon_offset` a multiple of
                // 64, checked by validation); `regions` holds the `left`
                // regions not yet stored (the section advances both
                // together, and `left > 0`: an earlier call that stored
                // them all returned `Done`); region indices stay below
                // `n <= u32::MAX`; `wide` only if wide stores are atomic.
                unsafe { rseq::records(area, cpu, &mut args) }
            });
        }
        self.locked(words, layout, |block| {
            let ring = block + layout.damon_offset / 8;
            let next_word = &words[block + CPU_DAMON_NEXT_WORD];
            let mut next = (next_word.load(Ordering::Relaxed) % cap as u64) as usize;
            let mut done = 0;
            while done < n {
                // Contiguous slots up to the end of the ring, then from 0.
                let chunk = (n - done).min(cap - next);
                let slots =
                    &words[ring + next * DAMON_RECORD_WORDS..][..chunk * DAMON_RECORD_WORDS];
                for (i, r) in regions[done..done + chunk].iter().enumerate() {
                    let record: [u64; DAMON_RECORD_WORDS] = bytemuck::cast(DamonRecord {
                        region_index: (done + i) as u32,
                        start: r.start,
                        end: r.end,
                        nr_accesses: r.nr_accesses,
                        age: r.age,
                        ..*template
                    });
                    let at = i * DAMON_RECORD_WORDS;
                    for (w, v) in slots[at..at + DAMON_RECORD_WORDS].iter().zip(record) {
                        w.store(v, Ordering::Relaxed);
                    }
                }
                done += chunk;
                next = if next + chunk == cap { 0 } else { next + chunk };
            }
            next_word.store(next as u64, Ordering::Relaxed);
        });
        Ok(())
    }

    /// Runs `attempt(area, cpu)` (one rseq section on `cpu`) until it
    /// commits; a guard mismatch (`Recover`) means "look again and retry".
    ///
    /// An attempt aborted after making its block's sequence odd is undone by
    /// the next section on that CPU. A thread that finds itself on another
    /// CPU after an abort undoes it there first (pinning itself to the old
    /// CPU for one empty section), before it retries: a block never holds
    /// part of an update that is complete on another block, which a fold
    /// of a process killed in between would count twice (spec §15.5). If
    /// it cannot (the old CPU left its affinity mask), it checks again
    /// after its commit, and every CPU it was aborted on (a publication of
    /// many batches may be aborted on several): readers must never see a
    /// quiescent block busy.
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    fn run_rseq(
        &self,
        words: &[AtomicU64],
        layout: &Layout,
        mut attempt: impl FnMut(*const u8, u32) -> rseq::Status,
    ) -> Result<(), Error> {
        let area = rseq::area().ok_or(Error::NoRseq)?;
        // The CPUs attempts were aborted on (an attempt may cover many
        // batches, each aborted somewhere else); past `ABORTED` of them,
        // every block is checked.
        const ABORTED: usize = 4;
        let (mut aborted, mut n, mut many) = ([0u32; ABORTED], 0, false);
        loop {
            let cpu = rseq::cpu(area).ok_or(Error::NoRseq)?;
            match attempt(area, cpu) {
                rseq::Status::Done => {
                    if many {
                        self.sweep(words, layout);
                    }
                    for &old in aborted[..n].iter().filter(|&&c| c != cpu) {
                        if self.seq_odd(words, layout, old as usize) {
                            self.repair(words, layout, old as usize);
                        }
                    }
                    return Ok(());
                }
                rseq::Status::Aborted => {
                    self.aborted();
                    // Moved off `cpu` with its block odd: undo that attempt
                    // there before retrying here, so that no block ever holds
                    // part of an update completed elsewhere (a process killed
                    // in between would leave it for a fold to count twice,
                    // spec §15.5).
                    if rseq::cpu(area) != Some(cpu) && self.seq_odd(words, layout, cpu as usize) {
                        self.repair(words, layout, cpu as usize);
                    }
                    if !aborted[..n].contains(&cpu) {
                        match aborted.get_mut(n) {
                            Some(slot) => {
                                *slot = cpu;
                                n += 1;
                            }
                            None => many = true,
                        }
                    }
                }
                // The guard moved: look again and retry.
                rseq::Status::Recover => {}
            }
        }
    }

    fn seq_odd(&self, words: &[AtomicU64], layout: &Layout, cpu: usize) -> bool {
        words[layout.cpu_block_word(cpu) + CPU_SEQ_WORD].load(Ordering::Relaxed) & 1 == 1
    }

    /// Undoes an aborted multi-word update of CPU `cpu`'s block by running an
    /// empty section on that CPU: the calling thread pins itself to `cpu`
    /// for the moment it takes, then gets its affinity back. If it cannot
    /// (the CPU left its affinity mask), the next section on `cpu` will.
    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    #[cold]
    fn repair(&self, words: &[AtomicU64], layout: &Layout, cpu: usize) {
        use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
        let Some(area) = rseq::area() else { return };
        let Ok(old) = sched_getaffinity(None) else {
            return;
        };
        let mut only = CpuSet::new();
        only.set(cpu);
        if sched_setaffinity(None, &only).is_err() {
            return;
        }
        for _ in 0..1000 {
            if !self.seq_odd(words, layout, cpu) {
                break;
            }
            match rseq::cpu(area) {
                Some(c) if c as usize == cpu => {
                    self.multi_rseq(words, layout, area, c, &[]);
                }
                _ => std::thread::yield_now(), // the migration is pending
            }
        }
        self.repairs.fetch_add(1, Ordering::Relaxed);
        let _ = sched_setaffinity(None, &old);
    }

    /// Repairs every block left with an odd sequence by an aborted update
    /// (see [`Self::run_rseq`]). Called by the writer's heartbeat and close.
    pub(crate) fn sweep(&self, words: &[AtomicU64], layout: &Layout) {
        #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
        if self.method == Method::Rseq {
            for cpu in 0..self.nr_cpus {
                if self.seq_odd(words, layout, cpu) {
                    self.repair(words, layout, cpu);
                }
            }
        }
        let _ = (words, layout);
    }

    #[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
    fn multi_rseq(
        &self,
        words: &[AtomicU64],
        layout: &Layout,
        area: *const u8,
        cpu: u32,
        ops: &[WordDelta],
    ) -> rseq::Status {
        let mut raw = [rseq::Op::default(); MAX_WORDS];
        for (r, o) in raw.iter_mut().zip(ops) {
            *r = rseq::Op {
                off: (o.index * 8) as u64,
                val: o.val,
            };
        }
        let state = &self.per_cpu[cpu as usize];
        let args = rseq::MultiArgs {
            base: words[layout.cpu_block_word(cpu as usize)].as_ptr(),
            journal: state.journal.get(),
            ops: raw.as_ptr(),
            n: ops.len() as u64,
        };
        // SAFETY: `cpu < nr_cpus` (rseq was chosen only if blocks cover every
        // possible CPU); every op indexes a word of the block
        // (callers pass indices below the block size); `n <= MAX_WORDS`
        // (asserted by `multi`); the journal is CPU `cpu`'s.
        unsafe { rseq::multi(area, cpu, &args) }
    }

    /// Runs `write(block_word)` on a block whose lock this thread holds,
    /// between `seq_write_begin` and `seq_write_end`.
    fn locked(&self, words: &[AtomicU64], layout: &Layout, write: impl FnOnce(usize)) {
        let first = self.current_cpu();
        let mut cpu = first;
        // Take the current CPU's lock, or the next free one: any block is a
        // correct home for an update, the current one is just the cheapest.
        let state = loop {
            let s = &self.per_cpu[cpu];
            if s.lock
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                break s;
            }
            cpu = (cpu + 1) % self.nr_cpus;
            if cpu == first {
                std::thread::yield_now();
            }
        };
        let block = layout.cpu_block_word(cpu);
        let seq = &words[block + CPU_SEQ_WORD];
        let token = seq_write_begin::<Sound>(seq);
        write(block);
        seq_write_end::<Sound>(seq, token);
        state.lock.store(false, Ordering::Release);
    }
}
