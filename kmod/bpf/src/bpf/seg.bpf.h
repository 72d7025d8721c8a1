/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The segment as the programs see it: the map, where things are (read-only
 * globals the loader sets before load, STYLE.md 13), and the per-CPU
 * updates every group uses: value_add() and hist_observe() (spec §7.1).
 *
 * A CPU's block is pages_per_cpu map elements from element
 * cpu_page0 + cpu * pages_per_cpu; its head (seq at word 0) is on its first
 * page, value slot s at word counters_word + s of the block. The loader
 * places every instance's run of words (PERFABI_FAM_<group>_WORDS) inside
 * one page, so a histogram's words are on one page and an update looks up
 * at most two elements (the run's and the head's).
 *
 * Ordering: every read-modify-write here is a BPF atomic whose result is
 * used (BPF_FETCH, or cmpxchg), which the kernel makes fully ordered on
 * every architecture; an atomic add whose result is unused is relaxed
 * (FACTS.md), so use() keeps each result alive. clang 19 cannot emit
 * load-acquire/store-release; plain loads are 8-byte aligned single loads.
 */
#ifndef __PERFABI_SEG_BPF_H
#define __PERFABI_SEG_BPF_H

#define PAGE_WORDS 512

/* Header words (spec §4, perfabi::layout::HEADER_*_WORD). */
#define HDR_GEN1 16
#define HDR_GEN2 17
#define HDR_HEARTBEAT 18
#define HDR_FLAGS 19
#define HDR_INSTANCES_USED 20
#define HDR_FAMILIES_USED 30
#define HDR_MEMBERS_USED 31
#define FLAG_CLOSED (1ULL << 0)

/* A histogram's words: count, sum and its log2 ns buckets, as the one
 * definition of the families gives them (perfabi_families.h). */
#define HIST_WORDS (2 + PERFABI_FAM_HIST_BUCKETS)

struct page_words {
	__u64 w[PAGE_WORDS];
};

/* The segment: one page per element; max_entries set by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct page_words);
} segment SEC(".maps");

/* The value of a group's instance map (filled by the loader only): the
 * value slot of the instance's first word. */
struct inst {
	__u32 slot;
};

/* Set by the loader before load (src/writer.rs). */
const volatile __u32 nr_cpus = 1;
/* Element of CPU 0's block, and elements per block. */
const volatile __u32 cpu_page0 = 1;
const volatile __u32 pages_per_cpu = 1;
/* Word, in a block, of value slot 0 (counters_offset / 8). */
const volatile __u32 counters_word = 16;
/* The value slot of the scheduler families' run. */
const volatile __u32 sched_slot = 0;
/* The heartbeat is refreshed when older than this (half the promise). */
const volatile __u64 beat_every_ns = 500000000ULL;

/* Updates that found their CPU's seq odd (nested inside another
 * program's update on the same CPU): read by the loader's tests, not part
 * of the segment. */
__u64 nr_nested = 0;

/* count(x): one more of a program's own .bss counts (not in the segment). */
#define count(x) use(__sync_fetch_and_add(&(x), 1))

/* Keeps an atomic's result in a register, so that clang emits the
 * BPF_FETCH form, which is fully ordered (the unused-result add is not). */
#define use(v) asm volatile("" : : "r"(v))

/*
 * A field of a kernel struct: in a tp_btf program (btf true) a direct
 * load, which the verifier allows on the tracepoint's BTF-typed pointers
 * and turns into a fault-safe load (PROBE_MEM); in a raw_tp program, whose
 * arguments are plain numbers, bpf_probe_read_kernel() (BPF_CORE_READ).
 * Both are CO-RE relocated. `btf` is a constant in each program once the
 * handler is inlined, so each program keeps one of the two. A direct load
 * costs what any load does; bpf_probe_read_kernel() is a helper call
 * (14-16 ns each on this machine, kmod/bpf/bench/cost). Every handler
 * takes `btf` and reads kernel memory through this. A chain of pointers is
 * one KREAD per pointer (`a.b` is a member, not a pointer).
 */
#define KREAD(btf, src, a, ...) \
	((btf) ? (src)->a __VA_OPT__(.) __VA_ARGS__ : BPF_CORE_READ(src, a __VA_OPT__(,) __VA_ARGS__))

/* Element `page` (0-based) of this CPU's block, or NULL. */
static __always_inline __u64 *block_page(__u32 page)
{
	__u32 cpu = bpf_get_smp_processor_id(), key;
	struct page_words *p;

	if (cpu >= nr_cpus || page >= pages_per_cpu)
		return 0;
	key = cpu_page0 + cpu * pages_per_cpu + page;
	p = bpf_map_lookup_elem(&segment, &key);
	return p ? p->w : 0;
}

static __always_inline __u64 *header_page(void)
{
	__u32 key = 0;
	struct page_words *p = bpf_map_lookup_elem(&segment, &key);

	return p ? p->w : 0;
}

/* Adds delta to value slot `slot` of this CPU's counter array: one atomic,
 * no sequence change (§7.1: an 8-byte word is never torn; the atomic keeps
 * a nested program's add). */
static __always_inline void value_add(__u32 slot, __u64 delta)
{
	__u32 at = counters_word + slot;
	__u64 *w = block_page(at / PAGE_WORDS), old;

	at %= PAGE_WORDS;
	if (!w)
		return;
	old = __sync_fetch_and_add(&w[at], delta);
	use(old);
}

/*
 * seq_nest_begin() / seq_nest_end(): a multi-word update of this CPU's
 * block, safe when programs nest on one CPU (an IRQ-context tracepoint
 * inside a task-context one, a perf-event program inside either); the
 * scheme of kmod/include/perfabi_kapi.h's perfabi_seq_nest_begin(), spec
 * §7.1 "Nesting". The outermost update makes seq odd and even again; one
 * that finds seq odd interrupted an update in progress on this CPU, which
 * cannot resume before it returns, so it adds its words inside that odd
 * window and leaves seq alone. A program runs with preemption off here
 * (tracepoints), so updates on one CPU nest strictly. seq only grows.
 */
static __always_inline bool seq_nest_begin(__u64 *seq)
{
	__u64 old;

	if (*(volatile __u64 *)seq & 1) {
		old = __sync_fetch_and_add(&nr_nested, 1);
		use(old);
		return false;
	}
	/* Fully ordered: seq odd before the words (pairs with the reader's
	 * fence(Acquire) after its first load of seq, §7.2). */
	old = __sync_fetch_and_add(seq, 1);
	use(old);
	return true;
}

static __always_inline void seq_nest_end(__u64 *seq, bool outer)
{
	__u64 old;

	if (!outer)
		return;
	/* Fully ordered: the words before seq even (pairs with the reader's
	 * fence(Acquire) before its second load of seq, §7.2). */
	old = __sync_fetch_and_add(seq, 1);
	use(old);
}

/* ceil(log2(v)) for v >= 2, 0 for v <= 1 (as perfabi_bucket_log2). */
static __always_inline __u32 ceil_log2(__u64 v)
{
	__u32 r = 0;

	if (v <= 1)
		return 0;
	v -= 1;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r + 1;
}

/* One observation v (ns) of the histogram whose first value word is slot
 * `slot` on this CPU: count + 1, sum + v, bucket + 1 under the block's seq,
 * so every consistent copy of a CPU's values has count == the sum of the
 * buckets (§5.1). */
static __always_inline void hist_observe(__u32 slot, __u64 v)
{
	__u32 at = counters_word + slot, c = ceil_log2(v), b;
	__u64 *head = block_page(0), *w, old;
	bool outer;

	/* The run's page: the head's own (one lookup) when it is the first. */
	w = at < PAGE_WORDS ? head : block_page(at / PAGE_WORDS);

	at %= PAGE_WORDS;
	if (!head || !w || at + HIST_WORDS > PAGE_WORDS)
		return;
	b = c > PERFABI_FAM_HIST_LOG2_FIRST ? c - PERFABI_FAM_HIST_LOG2_FIRST : 0;
	if (b > PERFABI_FAM_HIST_BUCKETS - 1)
		b = PERFABI_FAM_HIST_BUCKETS - 1;
	outer = seq_nest_begin(&head[0]);
	old = __sync_fetch_and_add(&w[at], 1);
	use(old);
	old = __sync_fetch_and_add(&w[at + 1], v);
	use(old);
	old = __sync_fetch_and_add(&w[at + 2 + b], 1);
	use(old);
	seq_nest_end(&head[0], outer);
}

/* The jiffy at which beat() last read the clock (a hint: racy stores of
 * it only cost a clock read more). */
__u64 beat_jiffies = 0;

/* The heartbeat, kept from the kernel side: refreshed by the context
 * switch handler when older than beat_every_ns, forward only (cmpxchg), so
 * it stops when the programs are detached (the loader killed, its links
 * closed) and readers then see the writer silent. The boot clock is read
 * at most once a jiffy (1 to 10 ms), not at every switch: the cost bench
 * measured the read at 31-43 ns of sched_switch's program. */
static __always_inline void beat(void)
{
	__u64 *h, now, last, j = bpf_jiffies64();

	if (j == *(volatile __u64 *)&beat_jiffies)
		return;
	*(volatile __u64 *)&beat_jiffies = j;
	h = header_page();
	now = bpf_ktime_get_boot_ns();
	if (!h)
		return;
	last = *(volatile __u64 *)&h[HDR_HEARTBEAT];
	if (now - last < beat_every_ns || (__s64)(now - last) < 0)
		return;
	use(__sync_val_compare_and_swap(&h[HDR_HEARTBEAT], last, now));
}

#endif /* __PERFABI_SEG_BPF_H */
