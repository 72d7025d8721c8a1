// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi's eBPF writer: the scheduler families of perfabi_sources.ko
 * (kernel.all.pswitch, kernel.sched.wakeups, kernel.sched.migrations,
 * kernel.sched.wakeup_latency) written into a perfabi segment that lives in
 * the BPF_F_MMAPABLE array map `segment` (value_size 4096: element i is page
 * i of the segment, spec/PERFABI.md §9.1).
 *
 * The loader (perfabi-bpfd, src/segment.rs) lays the segment out with the
 * Rust core's own geometry before loading, fills the map, freezes it
 * (BPF_MAP_FREEZE: no process writes it from then on) and pins it. Only
 * BPF writes it after that: the tracepoint programs below, per CPU, and the
 * BPF_PROG_TYPE_SYSCALL program `control` (heartbeat, close, metadata
 * generations), which the loader runs with BPF_PROG_TEST_RUN.
 *
 * Where things are comes from read-only globals the loader sets before
 * load (STYLE.md 13): the verifier sees them as constants.
 *
 * Ordering: every read-modify-write here is a BPF atomic whose result is
 * used (BPF_FETCH, or cmpxchg), which the kernel makes fully ordered on
 * every architecture; an atomic add whose result is unused is relaxed
 * (FACTS.md), so use() below keeps each result alive. clang 19 cannot
 * emit load-acquire/store-release; plain loads are 8-byte aligned single
 * loads (READ_ONCE).
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "perfabi_families.h"

char LICENSE[] SEC("license") = "GPL";

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

/* kernel.sched.wakeup_latency's words: count, sum and its log2 ns
 * buckets, as the one definition of the families gives them
 * (perfabi_families.h, generated from kmod/families). */
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

/* When each woken task was woken (CLOCK_MONOTONIC ns), by pid. LRU: the
 * stamp of a task that exited unseen is the one evicted, never a new one
 * refused. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} woken SEC(".maps");

/* Set by the loader before load (src/loader.rs). */
const volatile __u32 nr_cpus = 1;
/* Page index of CPU 0's block, and pages per block. */
const volatile __u32 cpu_page0 = 1;
const volatile __u32 pages_per_cpu = 1;
/* Word index, in a block's first page, of each family's first value word. */
const volatile __u32 w_pswitch = 16;
const volatile __u32 w_wakeups = 17;
const volatile __u32 w_migrations = 18;
const volatile __u32 w_latency = 19;
/* The heartbeat is refreshed when older than this (half the promise). */
const volatile __u64 beat_every_ns = 500000000ULL;

/* Observations made and wakeups not recorded (no stamp stored):
 * read by the loader's tests, not part of the segment. */
__u64 nr_observed = 0;
__u64 nr_unrecorded = 0;

/* Keeps an atomic's result in a register, so that clang emits the
 * BPF_FETCH form, which is fully ordered (the unused-result add is not). */
#define use(v) asm volatile("" : : "r"(v))

static __always_inline __u64 *block_page(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	__u32 key;

	if (cpu >= nr_cpus)
		return 0;
	key = cpu_page0 + cpu * pages_per_cpu;
	struct page_words *p = bpf_map_lookup_elem(&segment, &key);
	return p ? p->w : 0;
}

static __always_inline __u64 *header_page(void)
{
	__u32 key = 0;
	struct page_words *p = bpf_map_lookup_elem(&segment, &key);

	return p ? p->w : 0;
}

/* One counter word of this CPU: one atomic add, no sequence change (§7.1:
 * an 8-byte word is never torn; the atomic keeps a nested program's add). */
static __always_inline void counter_add(__u32 word, __u64 delta)
{
	__u64 *w = block_page();
	__u64 old;

	if (!w || word >= PAGE_WORDS)
		return;
	old = __sync_fetch_and_add(&w[word], delta);
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

	if (*(volatile __u64 *)seq & 1)
		return false;
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

/* One observation of kernel.sched.wakeup_latency on this CPU: count + 1,
 * sum + v, bucket + 1 under the block's seq, so every consistent copy of a
 * CPU's values has count == the sum of the buckets (§5.1). */
static __always_inline void observe_latency(__u64 v)
{
	__u64 *w = block_page();
	__u32 c = ceil_log2(v), b, at = w_latency;
	__u64 old;
	bool outer;

	if (!w || at + HIST_WORDS > PAGE_WORDS)
		return;
	b = c > PERFABI_FAM_HIST_LOG2_FIRST ? c - PERFABI_FAM_HIST_LOG2_FIRST : 0;
	if (b > PERFABI_FAM_HIST_BUCKETS - 1)
		b = PERFABI_FAM_HIST_BUCKETS - 1;
	outer = seq_nest_begin(&w[0]);
	old = __sync_fetch_and_add(&w[at], 1);
	use(old);
	old = __sync_fetch_and_add(&w[at + 1], v);
	use(old);
	old = __sync_fetch_and_add(&w[at + 2 + b], 1);
	use(old);
	seq_nest_end(&w[0], outer);
	old = __sync_fetch_and_add(&nr_observed, 1);
	use(old);
}

/* The heartbeat, kept from the kernel side: refreshed by the context
 * switch handler when older than beat_every_ns, forward only (cmpxchg), so
 * it stops when the programs are detached (the loader killed, its links
 * closed) and readers then see the writer silent. */
static __always_inline void beat(void)
{
	__u64 *h = header_page();
	__u64 now = bpf_ktime_get_boot_ns(), last;

	if (!h)
		return;
	last = *(volatile __u64 *)&h[HDR_HEARTBEAT];
	if (now - last < beat_every_ns || (__s64)(now - last) < 0)
		return;
	use(__sync_val_compare_and_swap(&h[HDR_HEARTBEAT], last, now));
}

static __always_inline void record_wakeup(struct task_struct *p)
{
	__u32 pid = BPF_CORE_READ(p, pid);
	__u64 ts = bpf_ktime_get_ns(), old;

	counter_add(w_wakeups, 1);
	if (!pid)
		return;
	if (bpf_map_update_elem(&woken, &pid, &ts, BPF_ANY)) {
		old = __sync_fetch_and_add(&nr_unrecorded, 1);
		use(old);
	}
}

/* A task's state (0: runnable), under its name of this kernel: `__state`
 * since 5.14, `state` before (the one place that knows). */
static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___pre_5_14 *)t, state);
}

/* As the module's probe_switch() (kmod/perfabi_src_sched.c). */
static __always_inline void handle_switch(bool preempt, struct task_struct *prev,
					  struct task_struct *next)
{
	__u32 pid = BPF_CORE_READ(next, pid), prev_pid;
	__u64 *ts;

	counter_add(w_pswitch, 1);
	beat();
	/*
	 * A stamp of prev's is from a wakeup while it ran. If prev stays
	 * runnable (preempted, or never went to sleep), its next switch-in
	 * follows no wakeup: drop the stamp. If it sleeps, its next wakeup
	 * overwrites the stamp first.
	 */
	prev_pid = BPF_CORE_READ(prev, pid);
	if (prev_pid && (preempt || !task_state(prev)))
		bpf_map_delete_elem(&woken, &prev_pid);
	if (!pid)
		return;
	ts = bpf_map_lookup_elem(&woken, &pid);
	if (!ts)
		return;
	__u64 delta = bpf_ktime_get_ns() - *ts;

	bpf_map_delete_elem(&woken, &pid);
	if ((__s64)delta >= 0)
		observe_latency(delta);
}

/*
 * sched_switch: (bool preempt, struct task_struct *prev, struct task_struct
 * *next, unsigned int prev_state) since 5.18 (commit fa2c3254d7cf,
 * "sched/tracing: Don't re-read p->state when emitting sched_switch
 * event"); (preempt, prev, next) before. The first three, the only ones
 * read, are the same in both; prev's state is read from the task
 * (task_state()), not from the fourth argument older kernels lack.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(tp_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	handle_switch(preempt, prev, next);
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(raw_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	handle_switch(preempt, prev, next);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(tp_wakeup, struct task_struct *p)
{
	record_wakeup(p);
	return 0;
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(raw_wakeup, struct task_struct *p)
{
	record_wakeup(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(tp_wakeup_new, struct task_struct *p)
{
	record_wakeup(p);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(raw_wakeup_new, struct task_struct *p)
{
	record_wakeup(p);
	return 0;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(tp_migrate, struct task_struct *p, int dest_cpu)
{
	counter_add(w_migrations, 1);
	return 0;
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(raw_migrate, struct task_struct *p, int dest_cpu)
{
	counter_add(w_migrations, 1);
	return 0;
}

/* What the loader asks of `control` (src/control.rs mirrors it). */
enum control_op {
	CONTROL_BEAT = 1,	/* heartbeat_ns = now */
	CONTROL_CLOSE = 2,	/* heartbeat_ns = now, flags |= CLOSED */
	CONTROL_META = 3,	/* gen1 + 1, store the *_used words, gen2 = gen1 (§7.3) */
};

#define CONTROL_MAX_WORDS 8

struct control_args {
	__u32 op;
	__u32 nr_words;
	/* CONTROL_META: header words to store (instances_used, families_used,
	 * members_used only), and their values. */
	__u32 word[CONTROL_MAX_WORDS];
	__u64 value[CONTROL_MAX_WORDS];
};

/*
 * Metadata after freezing, from BPF only: run by the loader with
 * BPF_PROG_TEST_RUN. One caller at a time (the loader's mutex): §7.3's
 * single metadata writer. Returns 0, or 1 if the arguments are refused.
 */
SEC("syscall")
int control(struct control_args *ctx)
{
	/* A copy on the stack: the verifier lets the context be read at fixed
	 * offsets only, the words are indexed. */
	struct control_args a = *ctx, *args = &a;
	__u64 *h = header_page();
	__u64 now = bpf_ktime_get_boot_ns(), g, old;
	__u32 n;

	if (!h)
		return 1;
	switch (args->op) {
	case CONTROL_BEAT:
		*(volatile __u64 *)&h[HDR_HEARTBEAT] = now;
		return 0;
	case CONTROL_CLOSE:
		*(volatile __u64 *)&h[HDR_HEARTBEAT] = now;
		old = __sync_fetch_and_or(&h[HDR_FLAGS], FLAG_CLOSED);
		use(old);
		return 0;
	case CONTROL_META:
		n = args->nr_words;
		if (n > CONTROL_MAX_WORDS)
			return 1;
		/* gen1 before the change, fully ordered (fence(Release)). */
		g = __sync_fetch_and_add(&h[HDR_GEN1], 1) + 1;
		for (__u32 i = 0; i < CONTROL_MAX_WORDS; i++) {
			__u32 at;

			if (i >= n)
				break;
			at = args->word[i];
			/* Only the dynamic counts of §4 and §4.1. */
			if (at != HDR_INSTANCES_USED && at != HDR_FAMILIES_USED &&
			    at != HDR_MEMBERS_USED)
				return 1;
			*(volatile __u64 *)&h[at] = args->value[i];
		}
		/* gen2 after the change, fully ordered (Release). */
		old = __sync_lock_test_and_set(&h[HDR_GEN2], g);
		use(old);
		return 0;
	}
	return 1;
}
