// SPDX-License-Identifier: GPL-2.0
/*
 * The floor the eBPF writer's programs are measured against (issue 31
 * item 6; the bench is kmod/bpf/bench/cost): on each tracepoint the
 * writer uses, a program that does the least a per-CPU counter can do,
 * one atomic add into a BPF_MAP_TYPE_PERCPU_ARRAY, so that the kernel's
 * own statistics (run_time_ns / run_cnt, BPF_ENABLE_STATS) of the two,
 * attached side by side to the same events, give the writer's cost as a
 * multiple of the cheapest counter BPF offers.
 *
 * Why PERCPU_ARRAY, not an ARRAY indexed by the CPU number: its lookup
 * with a constant key is inlined by the verifier into this CPU's copy of
 * the value (no helper call, no bounds check on a CPU number), and it is
 * what BPF tools use for a per-CPU count (bcc's libbpf-tools). An ARRAY
 * indexed by CPU is the writer's own addressing (a block per CPU in the
 * segment map); taking it as the floor would hide what that addressing
 * costs inside the floor.
 *
 * The add is the form the writer uses (BPF_FETCH, the result kept: fully
 * ordered, see perfabi.bpf.c's header comment), so the ratio measures what
 * the writer does beyond it, not a cheaper instruction.
 *
 * One slot per tracepoint, so the floors' adds never share a word. Each
 * floor has a tp_btf/ program and a raw_tp/ twin: the bench loads the
 * flavour the writer runs.
 *
 * Beside the floors, the writer's histogram update alone (hist_*): the
 * writer's own hist_observe() (seg.bpf.h, included, not copied) into a
 * scratch segment map of this object's (neither frozen nor pinned; the
 * bench sets its geometry), on sched_switch, where the writer's program
 * does much more (hash operations on a stamp table) than its histogram
 * update: so the update's cost is seen apart from the rest; and the floor
 * with the clock read that update observes (clock_*), to tell the two
 * apart. The writer reads kernel structs with BPF_CORE_READ (a
 * bpf_probe_read_kernel() call per field, what a raw_tp/ program needs);
 * core_* and direct_* are the floor with one such read, and with the same
 * field loaded directly as a tp_btf/ program may (a CO-RE-relocated load,
 * no call).
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "perfabi_families.h"
#include "seg.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* One slot per tracepoint of the module's sources (kmod/perfabi_src_*.c),
 * those the eBPF writer has and those it will have. */
enum floor_slot {
	SLOT_SCHED_SWITCH,
	SLOT_SCHED_WAKEUP,
	SLOT_SCHED_WAKEUP_NEW,
	SLOT_SCHED_MIGRATE_TASK,
	SLOT_BLOCK_RQ_ISSUE,
	SLOT_BLOCK_RQ_COMPLETE,
	SLOT_NET_DEV_XMIT,
	SLOT_NETIF_RECEIVE_SKB,
	SLOT_IRQ_HANDLER_ENTRY,
	SLOT_IRQ_HANDLER_EXIT,
	SLOT_DAMON_AGGREGATED,
	SLOT_CLOCK_SCHED_SWITCH,	/* clock_sched_switch's */
	SLOT_CORE_SCHED_SWITCH,		/* core_sched_switch's */
	SLOT_DIRECT_SCHED_SWITCH,	/* direct_sched_switch's */
	SLOTS
};

/* The floors' counts, a slot each. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} floor_count SEC(".maps");

/* The floor: one atomic add into this CPU's slot (the fetching form: use()
 * of seg.bpf.h keeps the result). */
static __always_inline void floor_add(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&floor_count, &slot);
	__u64 old;

	if (!v)
		return;
	old = __sync_fetch_and_add(v, 1);
	use(old);
}

/* A floor on tracepoint `tp` (a tp_btf/ program and its raw_tp/ twin),
 * reading none of its arguments. */
#define FLOOR(tp, slot)                                                  \
	SEC("tp_btf/" #tp)                                               \
	int BPF_PROG(floor_##tp)                                         \
	{                                                                \
		floor_add(slot);                                         \
		return 0;                                                \
	}                                                                \
	SEC("raw_tp/" #tp)                                               \
	int BPF_PROG(raw_floor_##tp)                                     \
	{                                                                \
		floor_add(slot);                                         \
		return 0;                                                \
	}

FLOOR(sched_switch, SLOT_SCHED_SWITCH)
FLOOR(sched_wakeup, SLOT_SCHED_WAKEUP)
FLOOR(sched_wakeup_new, SLOT_SCHED_WAKEUP_NEW)
FLOOR(sched_migrate_task, SLOT_SCHED_MIGRATE_TASK)
FLOOR(block_rq_issue, SLOT_BLOCK_RQ_ISSUE)
FLOOR(block_rq_complete, SLOT_BLOCK_RQ_COMPLETE)
FLOOR(net_dev_xmit, SLOT_NET_DEV_XMIT)
FLOOR(netif_receive_skb, SLOT_NETIF_RECEIVE_SKB)
FLOOR(irq_handler_entry, SLOT_IRQ_HANDLER_ENTRY)
FLOOR(irq_handler_exit, SLOT_IRQ_HANDLER_EXIT)
FLOOR(damon_aggregated, SLOT_DAMON_AGGREGATED)

/*
 * One observation of a histogram whose first value slot is 0 in the
 * scratch segment, as the writer observes a latency: the value is a clock
 * read (its low 20 bits: buckets up to 2^20 ns), since every latency the
 * writer observes costs it one clock read for the delta.
 */
static __always_inline void hist_alone(void)
{
	hist_observe(0, bpf_ktime_get_ns() & 0xfffff);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(hist_sched_switch)
{
	hist_alone();
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(raw_hist_sched_switch)
{
	hist_alone();
	return 0;
}

/* The floor plus the clock read hist_alone() makes: what of the histogram
 * update's cost is the clock's. */
static __always_inline void clock_floor(void)
{
	use(bpf_ktime_get_ns());
	floor_add(SLOT_CLOCK_SCHED_SWITCH);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(clock_sched_switch)
{
	clock_floor();
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(raw_clock_sched_switch)
{
	clock_floor();
	return 0;
}

/* The floor and one field read with BPF_CORE_READ, as the writer reads. */
static __always_inline void core_floor(struct task_struct *next)
{
	use(BPF_CORE_READ(next, pid));
	floor_add(SLOT_CORE_SCHED_SWITCH);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(core_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	core_floor(next);
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(raw_core_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	core_floor(next);
	return 0;
}

/* The floor and the same field loaded directly: a tp_btf/ program's
 * arguments are BTF pointers the verifier lets it dereference (no raw_tp/
 * twin: a raw_tp/ program may not). */
SEC("tp_btf/sched_switch")
int BPF_PROG(direct_sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	use(next->pid);
	floor_add(SLOT_DIRECT_SCHED_SWITCH);
	return 0;
}
