/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The IRQ group, kernel.interrupts.count and kernel.interrupts.handler_time
 * per IRQ that has an action, from irq_handler_entry and irq_handler_exit,
 * as perfabi_sources.ko counts them (read the header comment of
 * kmod/perfabi_src_irq.c):
 *
 * The count is the entries of the IRQ's first action's handler only, so
 * that a shared IRQ counts once per interrupt, as /proc/interrupts does;
 * the handler time is every action's entry to exit, timed with a per-CPU
 * stamp whose exit is matched against its IRQ and action: a stamp another
 * entry overwrote is discarded, never misattributed.
 *
 * The first action: the module compares the action with the IRQ's first
 * one, which its scan reads under the descriptor's lock; a BPF program
 * cannot reach the descriptor from the tracepoint's arguments, and the
 * loader cannot see kernel addresses. But one interrupt's actions run one
 * after the other on one CPU with interrupts off (__handle_irq_event_percpu
 * walks desc->action's list: entry, handler, exit, then action->next), so
 * an entry is a later action of the same interrupt exactly when the exit
 * just before it on this CPU was of the same IRQ and its ->next is this
 * action. Every other entry is a first action's: counted.
 *
 * IRQs are found by the loader (src/irq.rs: /sys/kernel/irq, every
 * 250 ms) and put in `irqs` under their number; an IRQ whose actions
 * change keeps its key and gets a new instance string (N:names).
 */
#ifndef __PERFABI_IRQ_BPF_H
#define __PERFABI_IRQ_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);	/* the IRQ number */
	__type(value, struct inst);
} irqs SEC(".maps");

/* A CPU's handler in progress, and the action that would continue the
 * interrupt whose handler exited last. Addresses are compared, never
 * dereferenced. */
struct irq_stamp {
	__u64 action;	/* the action entered, 0 once it exited */
	__u64 ts;	/* its entry (CLOCK_MONOTONIC ns) */
	__u64 next;	/* ->next of the action that exited last */
	__s32 irq;	/* the IRQ entered */
	__s32 next_irq;	/* the IRQ that exited last */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_stamp);
} irq_stamps SEC(".maps");

/* irq_handler_entry: count a first action, stamp every one. */
static __always_inline void handle_irq_entry(int irq, struct irqaction *action)
{
	__u32 zero = 0, key = irq;
	struct irq_stamp *s = bpf_map_lookup_elem(&irq_stamps, &zero);
	struct inst *i;
	bool later;

	if (!s)
		return;
	later = s->next_irq == irq && s->next == (__u64)action;
	s->next = 0;
	s->irq = irq;
	s->action = (__u64)action;
	s->ts = bpf_ktime_get_ns();
	if (later)
		return;
	i = bpf_map_lookup_elem(&irqs, &key);
	if (!i)
		return;
	value_add(i->slot + PERFABI_FAM_IRQ_COUNT_AT, 1);
}

/* irq_handler_exit: the handler's time, if the stamp is this handler's.
 * action->next: a direct (fault-safe) load in a tp_btf program (btf true),
 * whose arguments are BTF pointers; bpf_probe_read_kernel() in a raw_tp
 * one. */
static __always_inline void handle_irq_exit(bool btf, int irq, struct irqaction *action)
{
	__u32 zero = 0, key = irq;
	struct irq_stamp *s = bpf_map_lookup_elem(&irq_stamps, &zero);
	__u64 now = bpf_ktime_get_ns(), ts;
	struct inst *i;
	bool mine;

	if (!s)
		return;
	ts = s->ts;
	mine = s->action == (__u64)action && s->irq == irq;
	s->action = 0;
	s->next = (__u64)KREAD(btf, action, next);
	s->next_irq = irq;
	if (!mine || (__s64)(now - ts) < 0)
		return;
	i = bpf_map_lookup_elem(&irqs, &key);
	if (!i)
		return;
	hist_observe(i->slot + PERFABI_FAM_IRQ_TIME_AT, now - ts);
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(tp_irq_entry, int irq, struct irqaction *action)
{
	handle_irq_entry(irq, action);
	return 0;
}

SEC("raw_tp/irq_handler_entry")
int BPF_PROG(raw_irq_entry, int irq, struct irqaction *action)
{
	handle_irq_entry(irq, action);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(tp_irq_exit, int irq, struct irqaction *action, int ret)
{
	handle_irq_exit(true, irq, action);
	return 0;
}

SEC("raw_tp/irq_handler_exit")
int BPF_PROG(raw_irq_exit, int irq, struct irqaction *action, int ret)
{
	handle_irq_exit(false, irq, action);
	return 0;
}

#endif /* __PERFABI_IRQ_BPF_H */
