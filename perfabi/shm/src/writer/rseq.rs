//! Restartable sequences (Linux rseq) for per-CPU updates from userspace.
//!
//! The kernel module updates a CPU's block with preemption disabled. A
//! userspace thread cannot disable preemption, so it runs each update as an
//! rseq critical section: if the thread is preempted, migrated or signalled
//! before the section's single commit store, the kernel moves it to the abort
//! handler and the update is retried from the start. All sections that write
//! CPU `c`'s block run on CPU `c`, so they exclude each other exactly like
//! preemption-disabled kernel code (spec: "Userspace writers").
//!
//! glibc (2.35 and later) registers an rseq area for every thread; we only
//! use it, through `__rseq_offset` and `__rseq_size`.
//!
//! Three sections exist:
//!
//! * [`adjust`]: `counter += delta` on the current CPU, committed by the store
//!   of the counter itself. It refuses (status [`Status::Recover`]) when the
//!   block's sequence is odd, so it never runs inside an interrupted
//!   multi-word update.
//! * [`multi`]: a multi-word update behind the sequence word. Before the
//!   sequence goes odd it saves the old value of every word it will write in
//!   a per-CPU undo journal (process-private memory). If an earlier section
//!   was aborted while the sequence was odd, the next section on that CPU
//!   first restores the journal and makes the sequence even again: an aborted
//!   update leaves no trace, and its thread retries it whole.
//! * [`records`]: DAMON records built from regions into contiguous ring
//!   slots, journaled and undone like [`multi`] (the journal then holds one
//!   contiguous range); one call runs a section per batch of records.

use core::arch::asm;
use core::sync::atomic::{AtomicU32, Ordering};

use perfabi::damon::Region;
use perfabi::layout::{DamonRecord, CPU_DAMON_NEXT_WORD};

/// Outcome of one attempt at a critical section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// The update was committed.
    Done,
    /// The section was aborted or the thread is on another CPU: retry.
    Aborted,
    /// `adjust`: refused without a write, because the block's sequence is
    /// odd (an aborted multi-word update must be undone first) or the
    /// thread has no registered rseq area (`cpu_id` is no CPU's); the
    /// caller tells which.
    Recover,
}

/// The status a section left in its status register.
#[inline(always)]
fn status(v: u32) -> Status {
    match v {
        0 => Status::Done,
        1 => Status::Aborted,
        _ => Status::Recover,
    }
}

#[allow(non_upper_case_globals)]
extern "C" {
    static __rseq_offset: isize;
    static __rseq_size: u32;
}

/// The calling thread's rseq area, or `None` when glibc did not register
/// one (rseq disabled by `GLIBC_TUNABLES=glibc.pthread.rseq=0`, or a kernel
/// without rseq).
#[inline]
pub(crate) fn area() -> Option<*const u8> {
    let offset = registered_offset()?;
    let tp: usize;
    // SAFETY: on x86_64 Linux, %fs:0 holds the thread pointer (the TCB's
    // self pointer); the load has no side effects.
    unsafe {
        asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    Some(tp.wrapping_add_signed(offset) as *const u8)
}

/// The CPU the kernel last reported in `area`, or `None` if rseq is not
/// registered for this thread (`cpu_id` is `u32::MAX` or `u32::MAX - 1`).
#[inline]
pub(crate) fn cpu(area: *const u8) -> Option<u32> {
    // SAFETY: `area` comes from `area()` for the calling thread: it points at
    // the thread's `struct rseq`, 32-byte aligned, whose `cpu_id` field
    // (pinned below) the kernel updates. An atomic relaxed load reads it.
    let c = unsafe {
        AtomicU32::from_ptr(area.add(core::mem::offset_of!(KernelRseq, cpu_id)) as *mut u32)
    }
    .load(Ordering::Relaxed);
    (c < u32::MAX - 1).then_some(c)
}

/// Per-CPU undo journal of [`multi`] and [`records`] (process-private).
///
/// `n` counts the saved words. If its top bit is set, they are one
/// contiguous range starting at `addr[0]` (a [`records`]); otherwise word `i`
/// was at `addr[i]` (a [`multi`]). `old[i]` holds the word's value before
/// the update.
#[repr(C, align(64))]
pub(crate) struct Journal {
    n: u64,
    /// Undo passes run on this CPU (diagnostic; an undo pass that is itself
    /// aborted counts again).
    undos: u64,
    _pad: [u64; 6],
    /// On its own cache lines, from the journal's second one: a record's
    /// eight words are one line here as in the ring, so [`records`] saves
    /// them with two 32-byte stores that never split a line.
    old: [u64; JOURNAL_WORDS],
    addr: [u64; JOURNAL_WORDS],
}

/// Most words one update may write: 32 DAMON records.
pub(crate) const JOURNAL_WORDS: usize = 256;
/// The top bit of `Journal::n`: the saved words are contiguous.
const CONTIGUOUS: u64 = 1 << 63;
const UNDOS_OFF: usize = core::mem::offset_of!(Journal, undos);
const ADDR_OFF: usize = core::mem::offset_of!(Journal, addr);
const OLD_OFF: usize = core::mem::offset_of!(Journal, old);
const _: () = assert!(CONTIGUOUS > JOURNAL_WORDS as u64 && OLD_OFF.is_multiple_of(64));

impl Journal {
    /// Undo passes so far. Read racily: only the CPU's sections write it.
    pub(crate) fn undos(this: *const Self) -> u64 {
        // SAFETY: `this` points at a live journal; the field is an aligned
        // u64 written only by sections on its CPU with plain 8-byte stores,
        // so an atomic relaxed load reads a whole value.
        unsafe {
            core::sync::atomic::AtomicU64::from_ptr(core::ptr::addr_of!((*this).undos) as *mut u64)
        }
        .load(Ordering::Relaxed)
    }

    pub(crate) const fn new() -> Self {
        Self {
            n: 0,
            undos: 0,
            _pad: [0; 6],
            addr: [0; JOURNAL_WORDS],
            old: [0; JOURNAL_WORDS],
        }
    }
}

/// The critical-section descriptor of the Linux rseq ABI (x86_64), shared
/// by every section: the section runs from label `2` up to label `3` (the
/// post-commit point); an abort resumes at label `4`. Label `6` names the
/// descriptor, which the section stores in the thread's `rseq_cs` first.
macro_rules! rseq_descriptor {
    () => {
        concat!(
            ".pushsection __rseq_cs, \"aw\"\n",
            ".balign 32\n",
            "6:\n",
            ".long 0, 0\n",
            ".quad 2f, (3f - 2f), 4f\n",
            ".popsection\n",
        )
    };
}

/// The abort address of every section, label `4`, in `__rseq_failure`
/// (left open: the handler follows): the signature the kernel checks right
/// before it (`RSEQ_SIG`, 0x53053053, behind an `ud1` prefix).
macro_rules! rseq_abort_address {
    () => {
        concat!(
            ".pushsection __rseq_failure, \"ax\"\n",
            ".byte 0x0f, 0xb9, 0x3d\n",
            ".long 0x53053053\n",
            "4:\n",
        )
    };
}

/// The abort handler of [`multi`] and [`records`]: at the abort address,
/// status 1 (aborted) into `{st}` and a jump to the end, `5`.
macro_rules! rseq_abort_handler {
    () => {
        concat!(
            rseq_abort_address!(),
            "mov {st:e}, 1\n",
            "jmp 5f\n",
            ".popsection\n",
            "5:\n",
        )
    };
}

/// The undo pass, shared by [`multi`] and [`records`]: entered with `{b}` the
/// block, `{j}` the journal and `{s}` the odd sequence; restores every saved
/// word and makes the sequence even. Uses `{k}`, `{a}`, `{v}`.
macro_rules! undo_pass {
    () => {
        concat!(
            "inc qword ptr [{j} + {undos}]\n",
            "mov {k}, qword ptr [{j}]\n",
            "btr {k}, {contiguous}\n",
            "jnc 8f\n",
            // Contiguous range at addr[0].
            "mov {a}, qword ptr [{j} + {addr}]\n",
            "19:\n",
            "test {k}, {k}\n",
            "jz 9f\n",
            "dec {k}\n",
            "mov {v}, qword ptr [{j} + {old} + {k}*8]\n",
            "mov qword ptr [{a} + {k}*8], {v}\n",
            "jmp 19b\n",
            // Scattered words.
            "8:\n",
            "test {k}, {k}\n",
            "jz 9f\n",
            "dec {k}\n",
            "mov {a}, qword ptr [{j} + {addr} + {k}*8]\n",
            "mov {v}, qword ptr [{j} + {old} + {k}*8]\n",
            "mov qword ptr [{a}], {v}\n",
            "jmp 8b\n",
            "9:\n",
            "add {s}, 1\n",
            "mov qword ptr [{b}], {s}\n",
        )
    };
}

/// Saves the record at `[{a} + {t}*8]` (8 words, one cache line) in the
/// journal's `old[{t}..{t} + 8]` with 16-byte moves through `xmm0..xmm3`.
/// Wide moves are sound here: the loads read ring slots of the CPU the
/// section runs on, which only sections on that CPU write (never during
/// this one), and the stores go to the process-private journal; the shared
/// words themselves are stored by [`records`] (8 bytes at a time, or as
/// aligned 16-byte pairs where those stores are atomic, spec §7) and by
/// the undo pass (8 bytes at a time).
///
/// The processor's store throughput bounds a publication (every word of
/// the range is stored twice: into the journal, then its new value into
/// the ring), so on processors with AVX [`journal_record_avx`] saves the
/// same line with two 32-byte moves instead.
macro_rules! journal_record {
    () => {
        concat!(
            "movups xmm0, xmmword ptr [{a} + {t}*8]\n",
            "movups xmm1, xmmword ptr [{a} + {t}*8 + 16]\n",
            "movups xmm2, xmmword ptr [{a} + {t}*8 + 32]\n",
            "movups xmm3, xmmword ptr [{a} + {t}*8 + 48]\n",
            "movups xmmword ptr [{j} + {old} + {t}*8], xmm0\n",
            "movups xmmword ptr [{j} + {old} + {t}*8 + 16], xmm1\n",
            "movups xmmword ptr [{j} + {old} + {t}*8 + 32], xmm2\n",
            "movups xmmword ptr [{j} + {old} + {t}*8 + 48], xmm3\n",
        )
    };
}

/// [`journal_record`] with two 32-byte moves through `ymm0` and `ymm1`: the
/// same line, half the stores (AVX only: [`records`] uses it where `wide`
/// is set, which [`wide_stores_atomic`] allows only with AVX). `old` is
/// 64-byte aligned, so neither store splits a line. The reasons wide moves
/// are sound are those of [`journal_record`]: the 32-byte loads read ring
/// words no one writes meanwhile, and the stores go to private memory.
macro_rules! journal_record_avx {
    () => {
        concat!(
            "vmovups ymm0, ymmword ptr [{a} + {t}*8]\n",
            "vmovups ymm1, ymmword ptr [{a} + {t}*8 + 32]\n",
            "vmovups ymmword ptr [{j} + {old} + {t}*8], ymm0\n",
            "vmovups ymmword ptr [{j} + {old} + {t}*8 + 32], ymm1\n",
        )
    };
}

/// One word of a multi-word update: byte offset in the block, and the delta
/// to add to it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Op {
    pub(crate) off: u64,
    pub(crate) val: u64,
}

/// Arguments of [`multi`], read by the section from memory (too many for
/// registers).
#[repr(C)]
pub(crate) struct MultiArgs {
    /// Base of the CPU's block (its sequence word).
    pub(crate) base: *mut u64,
    /// The CPU's journal.
    pub(crate) journal: *mut Journal,
    /// The words to change.
    pub(crate) ops: *const Op,
    /// Number of ops, at most [`JOURNAL_WORDS`].
    pub(crate) n: u64,
}

/// Word `index` of the block at `block0 + cpu * stride` (`cpu` being the
/// CPU the section runs on) gets `+= delta`, as an rseq section whose
/// commit is the `add` instruction itself.
///
/// The CPU is read inside the section, so the address is computed for the
/// CPU the commit runs on: a migration after the read aborts the section.
/// A thread whose rseq area is not registered (`cpu_id >= nr_cpus`) gets
/// [`Status::Recover`] without any write, as a block whose sequence is odd.
///
/// This is the writer's fast path, inlined into every caller of
/// `Writer::adjust` and `Counter::adjust`: the rseq area is addressed as
/// `fs:[offset + field]` (glibc's thread pointer is the `fs` base, and
/// `offset` is `__rseq_offset`, read once when the writer was created), and
/// a commit falls through to the code after the block, so the committed
/// path is one straight line of 10 instructions (store the descriptor,
/// read `cpu_id`, compare it with `nr_cpus`, find the block, test its
/// sequence, add) with no taken branch and no status to set or test. Every
/// other outcome jumps straight to the caller's code for it (`asm goto`:
/// the `label` operands), which the compiler places out of line; the
/// abort handler (in `__rseq_failure`) is one jump there.
///
/// # Safety
///
/// `offset` is glibc's `__rseq_offset`; for every `cpu < nr_cpus`,
/// `block0 + cpu * stride` is CPU `cpu`'s block (its first word is its
/// sequence word) and word `index` of it a counter or head word, in a live
/// writable mapping; every other write to the block is made by sections of
/// this module running on that CPU (or, for words no section writes at that
/// time, by the metadata writer).
#[inline(always)]
pub(crate) unsafe fn adjust(
    offset: isize,
    nr_cpus: u32,
    block0: *mut u64,
    index: usize,
    stride: usize,
    delta: u64,
) -> Status {
    // SAFETY: the caller's contract above. The section writes only word
    // `index` of the block of the CPU it runs on, only while that block's
    // sequence is even; the kernel aborts it before the `add` if the thread
    // is preempted, migrated or signalled. `fs:[offset]` is the calling
    // thread's rseq area (the `fs` base is the thread pointer on x86_64
    // Linux, and glibc puts the area at `__rseq_offset` from it), so the
    // section stores its descriptor in the calling thread's `rseq_cs` and
    // reads its `cpu_id`. The descriptor and abort signature follow the
    // Linux rseq ABI for x86_64. Leaving the section by a jump (to a
    // `label`) before its commit is allowed: the kernel only acts on a
    // preemption inside [`2`, `3`).
    unsafe {
        asm!(
            rseq_descriptor!(),
            "lea {t}, [rip + 6b]",
            "mov qword ptr fs:[{offset} + 8], {t}",
            "2:",
            "mov {t:e}, dword ptr fs:[{offset} + 4]",
            "cmp {t:e}, {ncpu:e}",
            "jae {refused}",
            "imul {t}, {stride}",
            "add {t}, {block0}",
            "test byte ptr [{t}], 1",
            "jnz {refused}",
            "add qword ptr [{t} + {index} * 8], {delta}",
            "3:",
            rseq_abort_address!(),
            "jmp {aborted}",
            ".popsection",
            offset = in(reg) offset,
            ncpu = in(reg) nr_cpus,
            block0 = in(reg) block0,
            index = in(reg) index,
            stride = in(reg) stride,
            delta = in(reg) delta,
            t = out(reg) _,
            // The thread has no rseq area, or the block's sequence is odd.
            refused = label { return Status::Recover },
            // The kernel aborted the section.
            aborted = label { return Status::Aborted },
            options(nostack),
        );
    }
    Status::Done
}

/// glibc's `__rseq_offset`, if glibc registered rseq for its threads.
pub(crate) fn registered_offset() -> Option<isize> {
    // SAFETY: glibc defines both symbols as constants set once at start-up,
    // before `main`; reading them is a plain load of immutable data.
    let (size, offset) = unsafe { (__rseq_size, __rseq_offset) };
    (size >= 20).then_some(offset)
}

/// A multi-word update of CPU `cpu`'s block as an rseq section (see the
/// module documentation). With `n == 0` it only undoes an aborted update.
///
/// # Safety
///
/// As for [`adjust`]; moreover `args` points at valid arguments: `base` is
/// the block, `journal` the CPU's journal, `ops[..n]` offsets inside the block
/// and `n <= JOURNAL_WORDS`.
#[inline]
pub(crate) unsafe fn multi(area: *const u8, cpu: u32, args: &MultiArgs) -> Status {
    let st: u32;
    // SAFETY: the caller's contract. Before the sequence goes odd the journal
    // holds the old value of every word the section writes, so an abort
    // anywhere after that point is undone by the next section on this CPU.
    unsafe {
        asm!(
            rseq_descriptor!(),
            "lea {t}, [rip + 6b]",
            "mov qword ptr [{rseq} + 8], {t}",
            "2:",
            "cmp dword ptr [{rseq} + 4], {cpu:e}",
            "jne 4f",
            "mov {b}, qword ptr [{args}]",
            "mov {j}, qword ptr [{args} + 8]",
            "mov {s}, qword ptr [{b}]",
            "test {s}, 1",
            "jz 7f",
            // An earlier section was aborted mid-update: undo it.
            undo_pass!(),
            "7:",
            // Journal the old values.
            "mov {t}, qword ptr [{args} + 16]",
            "xor {k:e}, {k:e}",
            "13:",
            "cmp {k}, qword ptr [{args} + 24]",
            "jae 14f",
            "mov {a}, qword ptr [{t}]",
            "add {a}, {b}",
            "mov qword ptr [{j} + {addr} + {k}*8], {a}",
            "mov {v}, qword ptr [{a}]",
            "mov qword ptr [{j} + {old} + {k}*8], {v}",
            "add {t}, 16",
            "inc {k}",
            "jmp 13b",
            "14:",
            "mov qword ptr [{j}], {k}",
            // Sequence odd; on x86 (TSO) stores become visible in order,
            // which is the fence(Release) of the spec.
            "lea {v}, [{s} + 1]",
            "mov qword ptr [{b}], {v}",
            // Apply.
            "mov {t}, qword ptr [{args} + 16]",
            "xor {k:e}, {k:e}",
            "16:",
            "cmp {k}, qword ptr [{j}]",
            "jae 17f",
            "mov {a}, qword ptr [{j} + {addr} + {k}*8]",
            "mov {v}, qword ptr [{t} + 8]",
            "add {v}, qword ptr [{a}]",
            "mov qword ptr [{a}], {v}",
            "add {t}, 16",
            "inc {k}",
            "jmp 16b",
            "17:",
            // Commit: sequence even again.
            "add {s}, 2",
            "mov qword ptr [{b}], {s}",
            "3:",
            "xor {st:e}, {st:e}",
            "jmp 5f",
            rseq_abort_handler!(),
            rseq = in(reg) area,
            cpu = in(reg) cpu,
            args = in(reg) args as *const MultiArgs,
            b = out(reg) _,
            j = out(reg) _,
            s = out(reg) _,
            k = out(reg) _,
            a = out(reg) _,
            v = out(reg) _,
            t = out(reg) _,
            st = lateout(reg) st,
            undos = const UNDOS_OFF,
            contiguous = const CONTIGUOUS.trailing_zeros(),
            addr = const ADDR_OFF,
            old = const OLD_OFF,
            options(nostack),
        );
    }
    status(st)
}

/// Arguments of [`records`], read by its sections from memory; it
/// advances `regions`, `left` and `index` past every batch it commits.
#[repr(C)]
pub(crate) struct RecordArgs {
    /// Base of the CPU's block (its sequence word).
    pub(crate) base: *mut u64,
    /// The CPU's journal.
    pub(crate) journal: *mut Journal,
    /// The regions still to store, one record each.
    pub(crate) regions: *const Region,
    /// How many: at least 1.
    pub(crate) left: u64,
    /// Byte offset in the block of the ring (`damon_offset`).
    pub(crate) ring_off: u64,
    /// Ring slots (`damon_capacity`).
    pub(crate) cap: u64,
    /// Scratch of the section: words of its batch.
    pub(crate) words: u64,
    /// Scratch of the section: `damon_next` after its batch.
    pub(crate) after: u64,
    /// Words 0..3 of every record (`monitor_id`, `target_id`,
    /// `aggregation`).
    pub(crate) head: [u64; 3],
    /// Word 3 of the next record (`region_index` in its low half, which
    /// counts up by 1 per record, and `nr_regions`).
    pub(crate) index: u64,
    /// Word 7 of every record (`sample_us`, `aggr_us`).
    pub(crate) tail: u64,
    /// Non-zero: store each record as four aligned 16-byte pairs of words
    /// (only on a processor whose aligned 16-byte stores are atomic, see
    /// [`wide_stores_atomic`]), and journal it with 32-byte moves (AVX,
    /// which `wide` implies); zero: eight 8-byte stores, and 16-byte moves
    /// into the journal.
    pub(crate) wide: u64,
}

/// Most records one section of [`records`] stores: its batch.
pub(crate) const RECORD_BATCH: usize = 32;
const _: () = assert!(RECORD_BATCH * 8 <= JOURNAL_WORDS);

/// True if this processor's aligned 16-byte SSE stores (`movaps`) are
/// single-copy atomic: Intel SDM vol. 3A §9.1.1 and AMD APM vol. 2 §7.3.2
/// guarantee it on processors that support AVX. Such a store writes both
/// of its 8-byte words whole, which is all spec §7 asks of a store of a
/// word; without AVX only 8-byte stores are documented atomic.
pub(crate) fn wide_stores_atomic() -> bool {
    std::arch::is_x86_feature_detected!("avx")
}

/// The start of the kernel's `struct rseq` (`include/uapi/linux/rseq.h`,
/// copied here field for field), with the fields the sections read or
/// write: `cpu_id` (read) and `rseq_cs` (the section descriptor pointer,
/// written). Never constructed: glibc owns the area. The offsets the
/// assembly uses are derived from this copy, so they follow the uapi
/// header's field order and types as written here.
#[repr(C, align(32))]
#[allow(dead_code)]
struct KernelRseq {
    cpu_id_start: u32,
    cpu_id: u32,
    rseq_cs: u64,
    flags: u32,
}

// Every offset the assembly of this module writes as a number, pinned to
// the struct it reads (a change of field order or type fails to compile):
// `fs:[{offset} + 4]`/`[{rseq} + 4]` and `+ 8` into the rseq area,
// `[{args} + N]` into the argument structs, `[{t} + 8]` into an `Op`,
// `[{j}]` into a `Journal`. Fields the assembly names through `const` operands (`{undos}`,
// `{addr}`, `{old}`) need no pin.
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(KernelRseq, cpu_id) == 4);
    assert!(offset_of!(KernelRseq, rseq_cs) == 8);
    assert!(offset_of!(Journal, n) == 0);
    assert!(offset_of!(Op, off) == 0 && offset_of!(Op, val) == 8);
    assert!(core::mem::size_of::<Op>() == 16);
    assert!(offset_of!(MultiArgs, base) == 0);
    assert!(offset_of!(MultiArgs, journal) == 8);
    assert!(offset_of!(MultiArgs, ops) == 16);
    assert!(offset_of!(MultiArgs, n) == 24);
    assert!(offset_of!(RecordArgs, base) == 0);
    assert!(offset_of!(RecordArgs, journal) == 8);
    assert!(offset_of!(RecordArgs, regions) == 16);
    assert!(offset_of!(RecordArgs, left) == 24);
    assert!(offset_of!(RecordArgs, ring_off) == 32);
    assert!(offset_of!(RecordArgs, cap) == 40);
    assert!(offset_of!(RecordArgs, words) == 48);
    assert!(offset_of!(RecordArgs, after) == 56);
    assert!(offset_of!(RecordArgs, head) == 64);
    assert!(offset_of!(RecordArgs, index) == 88);
    assert!(offset_of!(RecordArgs, tail) == 96);
    assert!(offset_of!(RecordArgs, wide) == 104);
    // [`records`] builds a record from a region: words 0..3 and 7 from the
    // arguments, word 3 counting up in its low half (`region_index`; x86_64
    // is little-endian), and words 4, 5, 6 are the region's three words
    // (`start`, `end`, then `nr_accesses` and `age` in the same order and
    // halves as in the record).
    assert!(offset_of!(DamonRecord, monitor_id) == 0);
    assert!(offset_of!(DamonRecord, target_id) == 8);
    assert!(offset_of!(DamonRecord, aggregation) == 16);
    assert!(offset_of!(DamonRecord, region_index) == 24);
    assert!(offset_of!(DamonRecord, nr_regions) == 28);
    assert!(offset_of!(DamonRecord, start) == 32);
    assert!(offset_of!(DamonRecord, end) == 40);
    assert!(offset_of!(DamonRecord, nr_accesses) == 48);
    assert!(offset_of!(DamonRecord, age) == 52);
    assert!(offset_of!(DamonRecord, sample_us) == 56);
    assert!(offset_of!(DamonRecord, aggr_us) == 60);
    assert!(core::mem::size_of::<DamonRecord>() == 64);
    assert!(offset_of!(Region, start) == 0);
    assert!(offset_of!(Region, end) == 8);
    assert!(offset_of!(Region, nr_accesses) == 16);
    assert!(offset_of!(Region, age) == 20);
    assert!(core::mem::size_of::<Region>() == 24);
    assert!(cfg!(target_endian = "little"));
};

/// Stores DAMON records, one per region of `args.regions`, in the ring of
/// CPU `cpu` from its `damon_next` on, in batches of up to
/// [`RECORD_BATCH`] contiguous slots (a batch stops at the end of the
/// ring; the next starts at slot 0). Each batch is one section, one update
/// behind the sequence word, that also advances `damon_next`; the batches
/// run one after the other in this one call, which returns when all are
/// stored ([`Status::Done`]) or a section was aborted or found the thread
/// on another CPU ([`Status::Aborted`]; `args` then describes the regions
/// not yet stored, for a new call on the thread's CPU).
///
/// A section reads `damon_next` itself (after undoing an aborted update),
/// so no other section can have moved it between the read and the
/// stores; a value outside the ring counts as 0. Each record is built in
/// the section, a record (one cache line) per turn: the constant words
/// from the arguments, `region_index` counting up, the region's words
/// copied; no encoded copy of the records is written first. Where
/// aligned 16-byte stores are atomic, a record is stored as four of them.
/// The old words of the batch are journaled first as one contiguous range.
/// `damon_next` is not journaled: it only says where the next records go,
/// and an aborted update that advanced it merely skips slots that keep
/// their (restored) older records.
///
/// Between two batches the thread is outside any section (the kernel may
/// preempt or migrate it there without an abort); the next batch stores
/// the descriptor in `rseq_cs` again and checks the CPU again, as every
/// section does.
///
/// # Safety
///
/// As for [`multi`]; `args` points at valid arguments: `base` is the block
/// of CPU `cpu`, `journal` that CPU's journal, the ring of `cap > 0`
/// slots of 64 bytes at byte `ring_off` of the block (64-byte aligned, as
/// the block) lies inside it, `left >= 1`, `regions` holds `left` regions,
/// and `index` leaves room to count up `left` times in its low half;
/// `wide` is non-zero only if [`wide_stores_atomic`].
#[inline]
pub(crate) unsafe fn records(area: *const u8, cpu: u32, args: &mut RecordArgs) -> Status {
    debug_assert!(args.left > 0 && args.cap > 0);
    debug_assert!((args.base as u64 + args.ring_off).is_multiple_of(64));
    let st: u32;
    // SAFETY: the caller's contract. Before the sequence goes odd the journal
    // holds the old value of every word of the batch, so an abort anywhere
    // after that point is undone by the next section on this CPU. Outside
    // the sections only the private `args` is written.
    unsafe {
        asm!(
            rseq_descriptor!(),
            // For the 16-byte stores: xmm4 holds words 0-1, xmm6 word 7,
            // xmm7 adds 1 to word 3 (xmm5, words 2-3, is loaded per batch).
            "movups xmm4, xmmword ptr [{args} + 64]",
            "movq xmm6, qword ptr [{args} + 96]",
            "mov {v}, 1",
            "movq xmm7, {v}",
            "pslldq xmm7, 8",
            // Each batch.
            "22:",
            "lea {t}, [rip + 6b]",
            "mov qword ptr [{rseq} + 8], {t}",
            "2:",
            "cmp dword ptr [{rseq} + 4], {cpu:e}",
            "jne 4f",
            "mov {b}, qword ptr [{args}]",
            "mov {j}, qword ptr [{args} + 8]",
            "mov {s}, qword ptr [{b}]",
            "test {s}, 1",
            "jz 7f",
            undo_pass!(),
            "7:",
            // The first slot `{k}`: `damon_next`, or 0 if outside the ring.
            "mov {k}, qword ptr [{b} + {next}]",
            "xor {t:e}, {t:e}",
            "cmp {k}, qword ptr [{args} + 40]",
            "cmovae {k}, {t}",
            // Records `{t}`: the fewest of those left, the batch, and the
            // slots up to the end of the ring.
            "mov {v}, qword ptr [{args} + 40]",
            "sub {v}, {k}",
            "mov {t}, qword ptr [{args} + 24]",
            "cmp {t}, {v}",
            "cmova {t}, {v}",
            "mov {v}, {batch}",
            "cmp {t}, {v}",
            "cmova {t}, {v}",
            // `damon_next` after the batch (0 at the end of the ring).
            "lea {v}, [{k} + {t}]",
            "xor {a:e}, {a:e}",
            "cmp {v}, qword ptr [{args} + 40]",
            "cmove {v}, {a}",
            "mov qword ptr [{args} + 56], {v}",
            "shl {t}, 3",
            "mov qword ptr [{args} + 48], {t}",
            // The range: `{a}`, journaled as one.
            "shl {k}, 6",
            "add {k}, qword ptr [{args} + 32]",
            "lea {a}, [{b} + {k}]",
            "mov qword ptr [{j} + {addr}], {a}",
            "xor {t:e}, {t:e}",
            "cmp qword ptr [{args} + 104], 0",
            "jne 20f",
            "12:",
            "cmp {t}, qword ptr [{args} + 48]",
            "jae 13f",
            journal_record!(),
            "add {t}, 8",
            "jmp 12b",
            // With AVX: 32-byte moves, then the upper halves cleared (no
            // penalty for the SSE code after this).
            "20:",
            "cmp {t}, qword ptr [{args} + 48]",
            "jae 21f",
            journal_record_avx!(),
            "add {t}, 8",
            "jmp 20b",
            "21:",
            "vzeroupper",
            "13:",
            "mov {k}, qword ptr [{args} + 48]",
            "bts {k}, {contiguous}",
            "mov qword ptr [{j}], {k}",
            // Sequence odd (x86 TSO: stores visible in order).
            "lea {v}, [{s} + 1]",
            "mov qword ptr [{b}], {v}",
            // Store the records: `{j}` walks the regions, `{t}` the words.
            "mov {k}, qword ptr [{args} + 48]",
            "mov {j}, qword ptr [{args} + 16]",
            "xor {t:e}, {t:e}",
            "cmp qword ptr [{args} + 104], 0",
            "jne 17f",
            // 8-byte stores.
            "14:",
            "cmp {t}, {k}",
            "jae 16f",
            "mov {v}, qword ptr [{args} + 64]",
            "mov qword ptr [{a} + {t}*8], {v}",
            "mov {v}, qword ptr [{args} + 72]",
            "mov qword ptr [{a} + {t}*8 + 8], {v}",
            "mov {v}, qword ptr [{args} + 80]",
            "mov qword ptr [{a} + {t}*8 + 16], {v}",
            "mov {v}, {t}",
            "shr {v}, 3",
            "add {v}, qword ptr [{args} + 88]",
            "mov qword ptr [{a} + {t}*8 + 24], {v}",
            "mov {v}, qword ptr [{j}]",
            "mov qword ptr [{a} + {t}*8 + 32], {v}",
            "mov {v}, qword ptr [{j} + 8]",
            "mov qword ptr [{a} + {t}*8 + 40], {v}",
            "mov {v}, qword ptr [{j} + 16]",
            "mov qword ptr [{a} + {t}*8 + 48], {v}",
            "mov {v}, qword ptr [{args} + 96]",
            "mov qword ptr [{a} + {t}*8 + 56], {v}",
            "add {j}, 24",
            "add {t}, 8",
            "jmp 14b",
            // Aligned 16-byte stores (ring slots are 64-byte aligned); words
            // 4-5 and 6 come from the region.
            "17:",
            "movups xmm5, xmmword ptr [{args} + 80]",
            "18:",
            "cmp {t}, {k}",
            "jae 16f",
            "movaps xmmword ptr [{a} + {t}*8], xmm4",
            "movaps xmmword ptr [{a} + {t}*8 + 16], xmm5",
            "paddq xmm5, xmm7",
            "movups xmm0, xmmword ptr [{j}]",
            "movaps xmmword ptr [{a} + {t}*8 + 32], xmm0",
            "movq xmm1, qword ptr [{j} + 16]",
            "punpcklqdq xmm1, xmm6",
            "movaps xmmword ptr [{a} + {t}*8 + 48], xmm1",
            "add {j}, 24",
            "add {t}, 8",
            "jmp 18b",
            "16:",
            "mov {v}, qword ptr [{args} + 56]",
            "mov qword ptr [{b} + {next}], {v}",
            // Commit: sequence even again.
            "add {s}, 2",
            "mov qword ptr [{b}], {s}",
            "3:",
            // Committed (outside the section): past the batch's records,
            // and on to the next batch if any are left.
            "mov {k}, qword ptr [{args} + 48]",
            "shr {k}, 3",
            "sub qword ptr [{args} + 24], {k}",
            "add qword ptr [{args} + 88], {k}",
            "lea {k}, [{k} + {k}*2]",
            "shl {k}, 3",
            "add qword ptr [{args} + 16], {k}",
            "cmp qword ptr [{args} + 24], 0",
            "jne 22b",
            "xor {st:e}, {st:e}",
            "jmp 5f",
            rseq_abort_handler!(),
            // An abort between the 32-byte moves and the `vzeroupper` above
            // leaves the upper halves dirty (a penalty for SSE code after
            // this on Intel): clear them here too. `{st}` is an early
            // output, so `{args}` is still intact.
            "cmp qword ptr [{args} + 104], 0",
            "je 23f",
            "vzeroupper",
            "23:",
            rseq = in(reg) area,
            cpu = in(reg) cpu,
            args = in(reg) args as *mut RecordArgs,
            // `vzeroupper` (the AVX journal) clears the upper halves of
            // every ymm register: all sixteen are clobbered, not only the
            // ones the moves name.
            out("ymm0") _,
            out("ymm1") _,
            out("ymm2") _,
            out("ymm3") _,
            out("ymm4") _,
            out("ymm5") _,
            out("ymm6") _,
            out("ymm7") _,
            out("ymm8") _,
            out("ymm9") _,
            out("ymm10") _,
            out("ymm11") _,
            out("ymm12") _,
            out("ymm13") _,
            out("ymm14") _,
            out("ymm15") _,
            b = out(reg) _,
            j = out(reg) _,
            s = out(reg) _,
            k = out(reg) _,
            a = out(reg) _,
            v = out(reg) _,
            t = out(reg) _,
            st = out(reg) st,
            undos = const UNDOS_OFF,
            contiguous = const CONTIGUOUS.trailing_zeros(),
            addr = const ADDR_OFF,
            old = const OLD_OFF,
            next = const CPU_DAMON_NEXT_WORD * 8,
            batch = const RECORD_BATCH,
            options(nostack),
        );
    }
    status(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::arch::x86_64::{_mm256_loadu_pd, _mm256_storeu_pd};

    #[repr(C, align(4096))]
    struct Block([u64; 1024]);

    /// Publishes with [`records`] while a 256-bit value is live in a
    /// register (AVX code, as a caller built with `target-cpu=native`
    /// would be), and returns that value.
    #[target_feature(enable = "avx")]
    unsafe fn publish_keeping_a_ymm_value(
        area: *const u8,
        args: &mut RecordArgs,
        x: &[f64; 4],
    ) -> [f64; 4] {
        // SAFETY: AVX is enabled for this function; `x` holds 4 f64.
        let v = unsafe { _mm256_loadu_pd(x.as_ptr()) };
        loop {
            let cpu = cpu(area).expect("rseq registered");
            // SAFETY: `args` describes a private, page-aligned block with
            // an 8-slot ring at byte 1024 and this thread's own journal;
            // `wide` is set only where AVX was detected (the caller).
            if unsafe { records(area, cpu, args) } == Status::Done {
                break;
            }
        }
        let mut o = [0.0; 4];
        // SAFETY: as above, `o` holds 4 f64.
        unsafe { _mm256_storeu_pd(o.as_mut_ptr(), v) };
        o
    }

    /// The section's `vzeroupper` clears the upper half of every ymm
    /// register: the asm declares them all, so a caller's 256-bit value
    /// survives a publication.
    #[test]
    fn a_ymm_value_live_across_records_keeps_its_upper_half() {
        const TEST: &str = "rseq::tests::a_ymm_value_live_across_records_keeps_its_upper_half";
        if !std::arch::is_x86_feature_detected!("avx") {
            perfabi_test_harness::skip(TEST, "this processor has no AVX");
            return;
        }
        let Some(area) = area() else {
            perfabi_test_harness::skip(TEST, "rseq is not registered for this thread");
            return;
        };
        let mut block = Box::new(Block([0; 1024]));
        let mut journal = Box::new(Journal::new());
        let region = Region {
            start: 0x1000,
            end: 0x2000,
            nr_accesses: 3,
            age: 1,
        };
        let regions = [region; 3];
        let mut args = RecordArgs {
            base: block.0.as_mut_ptr(),
            journal: &mut *journal,
            regions: regions.as_ptr(),
            left: 3,
            ring_off: 1024,
            cap: 8,
            words: 0,
            after: 0,
            head: [1, 2, 3],
            index: 3 << 32,
            tail: 0,
            wide: 1,
        };
        let x = [1.0, 2.0, 3.0, 4.0];
        // SAFETY: AVX was detected above.
        let got = unsafe { publish_keeping_a_ymm_value(area, &mut args, &x) };
        assert_eq!(block.0[CPU_DAMON_NEXT_WORD], 3, "the records were stored");
        assert_eq!(
            got, x,
            "records zeroed the upper half of a ymm register it did not declare"
        );
    }
}
