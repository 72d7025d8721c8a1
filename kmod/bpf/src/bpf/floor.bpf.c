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
 */
#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

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
	SLOTS
};

/* The floors' counts, a slot each. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} floor_count SEC(".maps");

/* As perfabi.bpf.c's use(): keeps the result, so the add is BPF_FETCH. */
#define use(v) asm volatile("" : : "r"(v))

/* The floor: one atomic add into this CPU's slot. */
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
