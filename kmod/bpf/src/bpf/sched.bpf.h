/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The scheduler group (kernel.all.pswitch, kernel.sched.wakeups,
 * kernel.sched.migrations, kernel.sched.wakeup_latency), per CPU with no
 * dimension: one run of words at sched_slot. As perfabi_sources.ko's
 * kmod/perfabi_src_sched.c.
 */
#ifndef __PERFABI_SCHED_BPF_H
#define __PERFABI_SCHED_BPF_H

/* When each woken task was woken (CLOCK_MONOTONIC ns), by pid. LRU: the
 * stamp of a task that exited unseen is the one evicted, never a new one
 * refused. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} woken SEC(".maps");

/* Wakeup latency observations made and wakeups not recorded (no stamp
 * stored): read by the loader's tests, not part of the segment. */
__u64 nr_observed = 0;
__u64 nr_unrecorded = 0;

static __always_inline void record_wakeup(bool btf, struct task_struct *p)
{
	__u32 pid = KREAD(btf, p, pid);
	__u64 ts = bpf_ktime_get_ns();

	value_add(sched_slot + PERFABI_FAM_SCHED_WAKEUPS_AT, 1);
	if (!pid)
		return;
	if (bpf_map_update_elem(&woken, &pid, &ts, BPF_ANY))
		count(nr_unrecorded);
}

/* A task's state (0: runnable), under its name of this kernel: `__state`
 * since 5.14, `state` before (the one place that knows). */
static __always_inline long task_state(bool btf, struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return KREAD(btf, t, __state);
	return BPF_CORE_READ((struct task_struct___pre_5_14 *)t, state);
}

/* As the module's probe_switch() (kmod/perfabi_src_sched.c). */
static __always_inline void handle_switch(bool btf, bool preempt, struct task_struct *prev,
					  struct task_struct *next)
{
	__u32 pid = KREAD(btf, next, pid), prev_pid;
	__u64 *ts;

	value_add(sched_slot + PERFABI_FAM_SCHED_PSWITCH_AT, 1);
	beat();
	/*
	 * A stamp of prev's is from a wakeup while it ran. If prev stays
	 * runnable (preempted, or never went to sleep), its next switch-in
	 * follows no wakeup: drop the stamp. If it sleeps, its next wakeup
	 * overwrites the stamp first.
	 */
	prev_pid = KREAD(btf, prev, pid);
	if (prev_pid && (preempt || !task_state(btf, prev)))
		bpf_map_delete_elem(&woken, &prev_pid);
	if (!pid)
		return;
	ts = bpf_map_lookup_elem(&woken, &pid);
	if (!ts)
		return;
	__u64 delta = bpf_ktime_get_ns() - *ts;

	bpf_map_delete_elem(&woken, &pid);
	if ((__s64)delta >= 0) {
		hist_observe(sched_slot + PERFABI_FAM_SCHED_LATENCY_AT, delta);
		count(nr_observed);
	}
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
	handle_switch(true, preempt, prev, next);
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(raw_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	handle_switch(false, preempt, prev, next);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(tp_wakeup, struct task_struct *p)
{
	record_wakeup(true, p);
	return 0;
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(raw_wakeup, struct task_struct *p)
{
	record_wakeup(false, p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(tp_wakeup_new, struct task_struct *p)
{
	record_wakeup(true, p);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(raw_wakeup_new, struct task_struct *p)
{
	record_wakeup(false, p);
	return 0;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(tp_migrate, struct task_struct *p, int dest_cpu)
{
	value_add(sched_slot + PERFABI_FAM_SCHED_MIGRATIONS_AT, 1);
	return 0;
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(raw_migrate, struct task_struct *p, int dest_cpu)
{
	value_add(sched_slot + PERFABI_FAM_SCHED_MIGRATIONS_AT, 1);
	return 0;
}

#endif /* __PERFABI_SCHED_BPF_H */
