//! The update protocol: per-CPU sequence words and the `gen1`/`gen2` pair.
//!
//! Written once against `crate::sync` (a facade over `std` or `loom` atomics), so loom checks exactly this code.
//! Every function takes the shared words as `&AtomicU64`; readers only ever
//! use `Relaxed` loads followed by `fence(Acquire)` — no acquire loads and no
//! read-modify-write, because the reader's mapping is read-only (Rust permits
//! relaxed atomic loads of at most 8 bytes on read-only memory, and nothing
//! else).
//!
//! # Per-CPU sequence (multi-word records of one CPU's block)
//!
//! ```text
//! writer (owns the CPU's block)        reader
//! s = seq                              loop (bounded):
//! seq = s + 1        (Relaxed)           s1 = seq            (Relaxed)
//! fence(Release)                         fence(Acquire)
//! data stores        (Relaxed)           if s1 odd: retry
//! seq = s + 2        (Release)           copy data           (Relaxed)
//!                                        fence(Acquire)
//!                                        s2 = seq            (Relaxed)
//!                                        if s1 == s2: done
//! ```
//!
//! A reader may enclose the copies of several blocks in one window
//! ([`seq_read_group`]): every block's `s1` first, one fence, the copies,
//! one fence, every block's `s2`, each equal to its `s1`.
//!
//! # Metadata generation (instance table)
//!
//! ```text
//! writer (one at a time)               reader
//! g = gen1 + 1                         loop (bounded):
//! gen1 = g           (Relaxed)           g2 = gen2           (Relaxed)
//! fence(Release)                         fence(Acquire)
//! metadata stores    (Relaxed)           copy metadata, values
//! gen2 = g           (Release)           fence(Acquire)
//!                                        g1 = gen1           (Relaxed)
//!                                        if g1 == g2: done
//! ```
//!
//! The [`Policy`] parameter exists so the loom tests can run the very same
//! functions with one ordering weakened or one check removed and show that
//! loom then finds a torn read. Production code uses [`Sound`].

use crate::sync::{fence, spin, AtomicU64, Ordering};

/// Largest number of counters one group update may change at once.
pub const MAX_GROUP: usize = 8;

/// Default retry bound of a consistent read. A reader that sees the word
/// move this many times in a row reports busy instead of waiting longer.
pub const DEFAULT_RETRIES: u32 = 1024;

/// The orderings and checks of the protocol. Only [`Sound`] is correct; the
/// other implementations exist under `cfg(loom)` to prove that each part of
/// it is needed.
pub trait Policy {
    /// Writer: `fence(Release)` after making the sequence odd.
    const WRITER_FENCE: bool = true;
    /// Writer: the closing store of the sequence is `Release`.
    const WRITER_END_RELEASE: bool = true;
    /// Writer: sequence counts up monotonically (false: 2001-style 1/0 flag).
    const MONOTONIC: bool = true;
    /// Reader: `fence(Acquire)` after the first load of the word.
    const READER_FIRST_FENCE: bool = true;
    /// Reader: `fence(Acquire)` before the second load of the word.
    const READER_SECOND_FENCE: bool = true;
    /// Reader: an odd first sequence means "retry".
    const CHECK_ODD: bool = true;
    /// Reader: read `gen2` first and `gen1` last (false: the reverse).
    const GEN2_FIRST: bool = true;
    /// Reader: the 2001 proposal's inverted loop, which accepts the copy
    /// when the word *changed* (false: accept when it is unchanged).
    const INVERTED_LOOP: bool = false;
    /// Peak writer: the larger value is stored with a compare-and-exchange
    /// (false: a plain load, compare and store, which can lose a maximum).
    const PEAK_ATOMIC: bool = true;
    /// Peak reset: the zeroing stores are a metadata change between
    /// `gen1` and `gen2` (false: stored without a generation change).
    const RESET_IN_GENERATION: bool = true;
    /// Histogram writer: an observation is one sequence update of the block
    /// (false: its three words are changed with no sequence update).
    const HISTOGRAM_IN_SEQ: bool = true;
    /// Nesting writer: an update that finds the sequence odd leaves it
    /// alone (false: every update, nested or not, makes it odd and even).
    const NEST_CHECKS_ODD: bool = true;
    /// Reader of several blocks in one window ([`seq_read_group`]): every
    /// block's sequence is loaded again after the copy (false: only the
    /// first block's).
    const GROUP_RECHECKS_EVERY: bool = true;
}

/// The protocol as specified.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sound;
impl Policy for Sound {}

/// Deliberately broken variants, for the loom tests that must fail.
#[cfg(loom)]
pub mod weakened {
    use super::Policy;
    /// The writer omits `fence(Release)` after the odd sequence store.
    pub struct NoWriterFence;
    impl Policy for NoWriterFence {
        const WRITER_FENCE: bool = false;
    }
    /// The writer's closing sequence store is `Relaxed`.
    pub struct RelaxedWriterEnd;
    impl Policy for RelaxedWriterEnd {
        const WRITER_END_RELEASE: bool = false;
    }
    /// The reader omits the fence before its second sequence load.
    pub struct NoReaderSecondFence;
    impl Policy for NoReaderSecondFence {
        const READER_SECOND_FENCE: bool = false;
    }
    /// The reader accepts an odd sequence.
    pub struct NoOddCheck;
    impl Policy for NoOddCheck {
        const CHECK_ODD: bool = false;
    }
    /// The 2001 proposal's flag: set to 1, then back to 0 (ABA).
    pub struct UpDownFlag;
    impl Policy for UpDownFlag {
        const MONOTONIC: bool = false;
    }
    /// The 2001 proposal's reader loop: accepts when the word changed.
    pub struct InvertedLoop;
    impl Policy for InvertedLoop {
        const INVERTED_LOOP: bool = true;
    }
    /// The reader reads `gen1` first and `gen2` last.
    pub struct GenWrongOrder;
    impl Policy for GenWrongOrder {
        const GEN2_FIRST: bool = false;
    }
    /// A peak update loads, compares and stores without an atomic
    /// read-modify-write.
    pub struct NonAtomicPeak;
    impl Policy for NonAtomicPeak {
        const PEAK_ATOMIC: bool = false;
    }
    /// A peak reset zeroes the words without changing the generation.
    pub struct ResetOutsideGeneration;
    impl Policy for ResetOutsideGeneration {
        const RESET_IN_GENERATION: bool = false;
    }
    /// A histogram observation changes count, sum and bucket without a
    /// sequence update.
    pub struct HistogramWithoutSeq;
    impl Policy for HistogramWithoutSeq {
        const HISTOGRAM_IN_SEQ: bool = false;
    }
    /// A nested update makes the sequence odd and even again although the
    /// update it interrupted is in progress.
    pub struct NestWithoutOddCheck;
    impl Policy for NestWithoutOddCheck {
        const NEST_CHECKS_ODD: bool = false;
    }
    /// A reader of several blocks in one window checks only the first
    /// block's sequence after the copy.
    pub struct GroupRechecksFirstOnly;
    impl Policy for GroupRechecksFirstOnly {
        const GROUP_RECHECKS_EVERY: bool = false;
    }
}

/// Writer: begins a multi-word update of a block the caller owns exclusively.
/// Returns the token for [`seq_write_end`].
#[inline]
pub fn seq_write_begin<P: Policy>(seq: &AtomicU64) -> u64 {
    let s = seq.load(Ordering::Relaxed);
    seq.store(
        if P::MONOTONIC { s.wrapping_add(1) } else { 1 },
        Ordering::Relaxed,
    );
    if P::WRITER_FENCE {
        fence(Ordering::Release);
    }
    s
}

/// Writer: ends the update begun by [`seq_write_begin`].
#[inline]
pub fn seq_write_end<P: Policy>(seq: &AtomicU64, token: u64) {
    let v = if P::MONOTONIC {
        token.wrapping_add(2)
    } else {
        0
    };
    let o = if P::WRITER_END_RELEASE {
        Ordering::Release
    } else {
        Ordering::Relaxed
    };
    seq.store(v, o);
}

/// Reader: runs `copy` until it ran entirely between two equal, even loads
/// of `seq`, at most `retries` times. `None` means busy: the block's writer
/// kept updating, or died mid-update (odd sequence forever).
///
/// `copy` must only perform `Relaxed` loads of the shared words; its result is
/// discarded when the attempt fails, so it must have no other effect.
#[inline]
pub fn seq_read<P: Policy, T>(seq: &AtomicU64, retries: u32, copy: impl FnMut() -> T) -> Option<T> {
    seq_read_group::<P, 1, T>([seq], retries, copy).ok()
}

/// Reader: [`seq_read`] of `N` blocks in one window (spec §7.2): loads
/// every block's sequence, one `fence(Acquire)`, runs `copy` (the words of
/// all `N` blocks) unless a sequence was odd, one `fence(Acquire)`, loads
/// every sequence again, and returns the copy when each equals its first
/// load. Each block's words were then copied between two equal, even loads
/// of its own sequence, as [`seq_read`] copies one block; the window spares
/// a reader of a few words of many blocks a window (and a loop) per block.
///
/// At most `retries` attempts, each of the whole group. `Err(i)`: busy,
/// block `i` being the one found odd or moved at the last attempt.
/// `copy` as for [`seq_read`].
#[inline]
pub fn seq_read_group<P: Policy, const N: usize, T>(
    seqs: [&AtomicU64; N],
    retries: u32,
    mut copy: impl FnMut() -> T,
) -> Result<T, usize> {
    let mut busy = 0;
    for _ in 0..retries {
        let s1: [u64; N] = core::array::from_fn(|i| seqs[i].load(Ordering::Relaxed));
        if P::READER_FIRST_FENCE {
            fence(Ordering::Acquire);
        }
        if P::CHECK_ODD {
            if let Some(i) = s1.iter().position(|s| s & 1 == 1) {
                busy = i;
                spin();
                continue;
            }
        }
        let v = copy();
        if P::READER_SECOND_FENCE {
            fence(Ordering::Acquire);
        }
        let checked = if P::GROUP_RECHECKS_EVERY { N } else { 1 };
        let moved = (0..N.min(checked))
            .find(|&i| (seqs[i].load(Ordering::Relaxed) == s1[i]) == P::INVERTED_LOOP);
        match moved {
            None => return Ok(v),
            Some(i) => busy = i,
        }
        spin();
    }
    Err(busy)
}

/// Metadata writer: begins a change. Only one metadata writer may run at a
/// time (the caller holds a lock). Returns the new generation.
#[inline]
pub fn gen_write_begin<P: Policy>(gen1: &AtomicU64) -> u64 {
    let g = gen1.load(Ordering::Relaxed).wrapping_add(1);
    gen1.store(g, Ordering::Relaxed);
    if P::WRITER_FENCE {
        fence(Ordering::Release);
    }
    g
}

/// Metadata writer: publishes the change begun by [`gen_write_begin`].
#[inline]
pub fn gen_write_end<P: Policy>(gen2: &AtomicU64, g: u64) {
    let o = if P::WRITER_END_RELEASE {
        Ordering::Release
    } else {
        Ordering::Relaxed
    };
    gen2.store(g, o);
}

/// Reader: runs `copy(generation)` until it ran entirely inside one metadata
/// generation, at most `retries` times. `copy` may itself fail (a nested
/// per-CPU read that was busy): its error ends the read at once.
/// `Ok(None)` means the metadata stayed busy for the whole bound.
#[inline]
pub fn gen_read<P: Policy, T, E>(
    gen1: &AtomicU64,
    gen2: &AtomicU64,
    retries: u32,
    mut copy: impl FnMut(u64) -> Result<T, E>,
) -> Result<Option<(T, u64)>, E> {
    let (first, last) = if P::GEN2_FIRST {
        (gen2, gen1)
    } else {
        (gen1, gen2)
    };
    for _ in 0..retries {
        let g_first = first.load(Ordering::Relaxed);
        if P::READER_FIRST_FENCE {
            fence(Ordering::Acquire);
        }
        let v = copy(g_first)?;
        if P::READER_SECOND_FENCE {
            fence(Ordering::Acquire);
        }
        if last.load(Ordering::Relaxed) == g_first {
            return Ok(Some((v, g_first)));
        }
        spin();
    }
    Ok(None)
}

/// Copies `out.len()` words starting at `words[start]` with `Relaxed` loads.
/// Panics if the range is out of bounds (callers pass validated ranges).
#[inline]
pub fn load_words(words: &[AtomicU64], start: usize, out: &mut [u64]) {
    let src = &words[start..start + out.len()];
    // Eight independent loads per step: atomic loads are never merged or
    // vectorised, so this is what keeps the copy near memory speed.
    let mut o8 = out.chunks_exact_mut(8);
    let mut s8 = src.chunks_exact(8);
    for (o, s) in (&mut o8).zip(&mut s8) {
        for i in 0..8 {
            o[i] = s[i].load(Ordering::Relaxed);
        }
    }
    for (o, s) in o8.into_remainder().iter_mut().zip(s8.remainder()) {
        *o = s.load(Ordering::Relaxed);
    }
}

/// Peak writer: raises `word` to `v` if `v` is larger than its value,
/// compared as `i64` when `signed`, else as `u64`; a smaller or equal `v`
/// leaves it unchanged. Any number of writers may update the same word at
/// once (lock-mode threads on one CPU's block, a task and an interrupt):
/// the word ends at the maximum of everything observed.
#[inline]
pub fn peak_update<P: Policy>(word: &AtomicU64, v: u64, signed: bool) {
    let larger = |cur: u64| {
        if signed {
            v as i64 > cur as i64
        } else {
            v > cur
        }
    };
    // Relaxed throughout: a peak is one word and publishes nothing else, and
    // the modification order of that word alone decides the maximum. (The
    // exchange being a read-modify-write also matters to peak_reset: an
    // update that reads a reset's 0 continues the release sequence of that
    // store, so a reader that copies its value sees the reset's gen1.)
    let mut cur = word.load(Ordering::Relaxed);
    if !P::PEAK_ATOMIC {
        // Weakened: another writer's larger store between this load and
        // this store is overwritten.
        if larger(cur) {
            word.store(v, Ordering::Relaxed);
        }
        return;
    }
    // Fast path: no read-modify-write when `v` is not larger. The loop
    // re-checks against the value the failed exchange saw, so a concurrent
    // larger store ends it without a write.
    while larger(cur) {
        match word.compare_exchange_weak(cur, v, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => cur = now,
        }
    }
}

/// Histogram writer: records the observation `v` in `bucket` of the
/// histogram `words` (`[count, sum, bucket 0 .. bucket n-1]`, the member's
/// values in one CPU's block) as one update of that block's sequence word
/// `seq`: count += 1, sum += v, bucket += 1 (wrapping). A reader that copies
/// the histogram with [`seq_read`] always finds count equal to the sum of
/// the buckets.
///
/// The caller must be the block's only writer for the whole call (it holds
/// the block's lock, or runs as the CPU's restartable sequence). Panics if
/// `2 + bucket` is out of bounds of `words`.
#[inline]
pub fn histogram_observe<P: Policy>(seq: &AtomicU64, words: &[AtomicU64], bucket: usize, v: u64) {
    // Relaxed load and store, not fetch_add: the caller is the block's only
    // writer, and the sequence update orders these stores for readers.
    let add = |w: &AtomicU64, d: u64| {
        w.store(w.load(Ordering::Relaxed).wrapping_add(d), Ordering::Relaxed)
    };
    let token = if P::HISTOGRAM_IN_SEQ {
        Some(seq_write_begin::<P>(seq))
    } else {
        None
    };
    add(&words[0], 1);
    add(&words[1], v);
    add(&words[2 + bucket], 1);
    if let Some(t) = token {
        seq_write_end::<P>(seq, t);
    }
}

/// Writer: begins a multi-word update of a block whose updates nest on
/// its CPU (spec §7.1 "Nesting": the kernel module's interrupts and NMIs,
/// the eBPF writer's programs). The C twins, under the same name:
/// `perfabi_seq_nest_begin()` (`kmod/include/perfabi_kapi.h`) and
/// `seq_nest_begin()` (`kmod/bpf/src/bpf/perfabi.bpf.c`). Returns whether
/// this is the outermost update, for [`seq_nest_end`].
///
/// An update that finds `seq` odd interrupted one in progress on its CPU,
/// which cannot resume before it returns: it adds its words inside that
/// odd window. The increment is a fully ordered read-modify-write in both
/// C writers (BPF's fetching add; the module's `this_cpu_inc` and
/// `smp_wmb`); `AcqRel` is what the reader's pairing needs of it: its
/// release half orders `seq` odd before the words (the writer's
/// `fence(Release)` of §7.1).
#[inline]
pub fn seq_nest_begin<P: Policy>(seq: &AtomicU64) -> bool {
    nest_begin::<P>(seq, || {})
}

/// [`seq_nest_begin`] with `between` run between its load and its
/// increment (where an interrupt's whole update moves `seq` on by 2 first).
#[inline]
fn nest_begin<P: Policy>(seq: &AtomicU64, between: impl FnOnce()) -> bool {
    let odd = seq.load(Ordering::Relaxed) & 1 != 0;
    between();
    if P::NEST_CHECKS_ODD && odd {
        return false;
    }
    seq.fetch_add(1, Ordering::AcqRel);
    true
}

/// Writer: ends the update [`seq_nest_begin`] began (`outer`: what it
/// returned): the outermost makes `seq` even again, after the words (its
/// release half: the closing Release store of §7.1).
#[inline]
pub fn seq_nest_end(seq: &AtomicU64, outer: bool) {
    if outer {
        seq.fetch_add(1, Ordering::AcqRel);
    }
}

/// Writer: a histogram observation as the nesting kernel writers make it
/// (`perfabi_observe()`, the eBPF writer's `observe_latency()`): count,
/// sum and bucket each changed with one atomic add (a nested update's adds
/// are never lost) between [`seq_nest_begin`] and [`seq_nest_end`].
/// `interrupt(k)` runs at each point `k` in `0..NEST_POINTS` between two
/// steps, where an interrupt on the CPU may run a whole nested update; a
/// writer passes `|_| {}` (its interrupts come by themselves), the loom
/// model a nested observation at one point.
#[inline]
pub fn histogram_observe_nested<P: Policy>(
    seq: &AtomicU64,
    words: &[AtomicU64],
    bucket: usize,
    v: u64,
    mut interrupt: impl FnMut(u32),
) {
    interrupt(0);
    let outer = nest_begin::<P>(seq, || interrupt(1));
    interrupt(2);
    words[0].fetch_add(1, Ordering::AcqRel);
    interrupt(3);
    words[1].fetch_add(v, Ordering::AcqRel);
    interrupt(4);
    words[2 + bucket].fetch_add(1, Ordering::AcqRel);
    interrupt(5);
    seq_nest_end(seq, outer);
    interrupt(6);
}

/// The points [`histogram_observe_nested`] offers an interrupt.
pub const NEST_POINTS: u32 = 7;

/// Peak reset, a metadata change: stores 0 into each of `words` (the
/// member's word on every CPU) between [`gen_write_begin`] and
/// [`gen_write_end`], so a reader's consistent snapshot ([`gen_read`]) has
/// either every CPU's word before the reset or every one after it. Returns
/// the new generation.
///
/// Only one metadata writer may run at a time (the caller holds the lock).
/// Peak writers may keep updating meanwhile: an observation that lands after
/// a word's zeroing counts as one made after the reset.
#[inline]
pub fn peak_reset<'a, P: Policy>(
    gen1: &AtomicU64,
    gen2: &AtomicU64,
    words: impl IntoIterator<Item = &'a AtomicU64>,
) -> u64 {
    if !P::RESET_IN_GENERATION {
        // Weakened: a reader can see some CPUs zeroed and others not,
        // inside one unchanged generation.
        for w in words {
            w.store(0, Ordering::Relaxed);
        }
        return gen1.load(Ordering::Relaxed);
    }
    let g = gen_write_begin::<P>(gen1);
    // Relaxed stores: gen_write_begin's fence(Release) orders them after
    // the bumped gen1 for a reader that copies one of them (its
    // fence(Acquire) then makes its closing gen1 load see the bump), and
    // gen_write_end's Release store orders them before gen2.
    for w in words {
        w.store(0, Ordering::Relaxed);
    }
    gen_write_end::<P>(gen2, g);
    g
}
