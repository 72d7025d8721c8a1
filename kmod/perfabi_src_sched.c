// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources, sched: kernel.all.pswitch, kernel.sched.wakeups,
 * .migrations and .wakeup_latency (no dimension: one instance "").
 *
 * sched_switch fires only where the scheduler counts a context switch for
 * /proc/stat's ctxt (rq->nr_switches, prev != next); the probe checks it
 * too. Wakeups are sched_wakeup and sched_wakeup_new. The wakeup latency
 * is from a task's wakeup to the sched_switch onto it, the wakeup's time
 * kept in a lock-free table keyed by the task pointer (compared, never
 * dereferenced). Both events of a task run under its runqueue's lock, so
 * they are ordered. A task woken while it still runs (and never switched
 * onto) would leave a stamp that a later switch-in after a preemption
 * would take for a wakeup: a switch away from a task that stays runnable
 * discards its stamp. The probes run in the scheduler with a runqueue lock held: they
 * use atomics and this_cpu operations only, take no lock, wake nothing.
 */
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/tracepoint.h>

#include "perfabi_src.h"

static unsigned int wakeup_slots = 4096;
module_param(wakeup_slots, uint, 0444);
MODULE_PARM_DESC(wakeup_slots, "slots of the woken-task table (wakeup times), a power of 2");

/* A wakeup stamp older than 10 s (its task exited unseen): its slot is reusable. */
#define SRC_WAKEUP_STALE_NS (10ULL * NSEC_PER_SEC)

struct src_sched_ctx {
	struct perfabi_member_handle *pswitch, *wakeups, *migrations, *latency, *drop;
	struct src_stamps wake;
};

static struct src_sched_ctx sched_ctx;
static struct perfabi_member_handle *sched_m[4];
static const enum perfabi_fam sched_fams[4] = {
	PERFABI_FAM_SCHED_PSWITCH, PERFABI_FAM_SCHED_WAKEUPS, PERFABI_FAM_SCHED_MIGRATIONS,
	PERFABI_FAM_SCHED_LATENCY,
};

static __always_inline void sched_woken(struct src_sched_ctx *c, struct task_struct *p)
{
	perfabi_member_add(c->wakeups, 1);
	if (unlikely(!src_stamp_put(&c->wake, (unsigned long)p, src_now())))
		perfabi_member_add(c->drop, 1);
}

static void probe_wakeup(void *data, struct task_struct *p)
{
	sched_woken(data, p);
}

static void probe_wakeup_new(void *data, struct task_struct *p)
{
	sched_woken(data, p);
}

static void probe_switch(void *data, bool preempt, struct task_struct *prev,
			 struct task_struct *next, unsigned int prev_state)
{
	struct src_sched_ctx *c = data;
	u64 ts;

	if (unlikely(prev == next))
		return;
	perfabi_member_add(c->pswitch, 1);
	if (src_stamp_take(&c->wake, (unsigned long)next, &ts))
		perfabi_observe(c->latency, src_since(ts, src_now()));
	/*
	 * A stamp of prev's is from a wakeup while it ran. If prev stays
	 * runnable (preempted, or never went to sleep), its next switch-in
	 * follows no wakeup: drop the stamp. If it sleeps, its next wakeup
	 * overwrites the stamp first: no need to look it up.
	 */
	if (preempt || !prev_state)
		src_stamp_take(&c->wake, (unsigned long)prev, &ts);
}

static void probe_migrate(void *data, struct task_struct *p, int dest_cpu)
{
	struct src_sched_ctx *c = data;

	perfabi_member_add(c->migrations, 1);
}

static struct src_tp sched_tps[] = {
	{ .name = "sched_switch", .probe = probe_switch },
	{ .name = "sched_wakeup", .probe = probe_wakeup },
	{ .name = "sched_wakeup_new", .probe = probe_wakeup_new },
	{ .name = "sched_migrate_task", .probe = probe_migrate },
};

/**
 * src_sched_start() - the sched source: families, instances, probes
 *
 * Context: process context (module load); may sleep.
 * Return: 0, or an error: the source is off (logged).
 */
int src_sched_start(void)
{
	int err;

#ifndef PERFABI_SRC_SCHED_PROTO
	pr_info(SRC_PFX "sched source off: built for a kernel whose sched tracepoint prototypes differ from the probes'\n");
	return -EOPNOTSUPP;
#endif
	err = src_tps_find(sched_tps, ARRAY_SIZE(sched_tps), "sched");
	if (err)
		return err;
	err = src_stamps_init(&sched_ctx.wake, wakeup_slots, SRC_WAKEUP_STALE_NS);
	if (err)
		return err;
	err = src_families_add(PERFABI_FAM_SCHED_FIRST, PERFABI_FAM_SCHED_LAST);
	if (err)
		goto free;
	err = src_instances_add(sched_fams, ARRAY_SIZE(sched_fams), "", sched_m);
	if (err)
		goto free;
	sched_ctx.pswitch = sched_m[0];
	sched_ctx.wakeups = sched_m[1];
	sched_ctx.migrations = sched_m[2];
	sched_ctx.latency = sched_m[3];
	sched_ctx.drop = src_dropped[SRC_DROP_WAKEUP_TABLE];
	err = src_tps_register(sched_tps, ARRAY_SIZE(sched_tps), &sched_ctx, "sched");
	if (err)
		goto free;
	return 0;
free:
	src_sched_free();
	return err;
}

/** src_sched_stop_probes() - detach the sched probes (the caller waits for them) */
void src_sched_stop_probes(void)
{
	src_tps_unregister(sched_tps, ARRAY_SIZE(sched_tps), &sched_ctx);
}

/**
 * src_sched_free() - delete the sched families and free everything
 *
 * Context: process context, no probe running any more; may sleep.
 */
void src_sched_free(void)
{
	src_families_del(PERFABI_FAM_SCHED_FIRST, PERFABI_FAM_SCHED_LAST);
	memset(sched_m, 0, sizeof(sched_m));
	src_stamps_free(&sched_ctx.wake);
}

/**
 * src_sched_measure() - time the sched probes on scratch members
 * @m: the scratch members and iterations
 *
 * Two scratch task keys (never dereferenced, as by the real probes) in a
 * scratch context with a table of its own.
 */
void src_sched_measure(const struct src_measure *m)
{
	static const char fake_tasks[2];
	struct task_struct *a = (struct task_struct *)&fake_tasks[0];
	struct task_struct *b = (struct task_struct *)&fake_tasks[1];
	struct src_sched_ctx *c = kzalloc(sizeof(*c), GFP_KERNEL);
	u64 ps;

	if (!c || src_stamps_init(&c->wake, 256, SRC_WAKEUP_STALE_NS))
		goto out;
	c->pswitch = c->wakeups = c->migrations = c->drop = m->cnt;
	c->latency = m->hist;
	ps = SRC_TIME_PS(m->n, probe_wakeup(c, b));
	src_report(m, "sched_wakeup", ps);
	/* A switch from a task going to sleep onto one nobody woke: a miss. */
	ps = SRC_TIME_PS(m->n, probe_switch(c, false, a, b, TASK_INTERRUPTIBLE));
	src_report(m, "sched_switch", ps);
	/* A preemption onto a task nobody woke: two misses. */
	ps = SRC_TIME_PS(m->n, probe_switch(c, true, a, b, 0));
	src_report(m, "sched_switch_preempt", ps);
	ps = SRC_TIME_PS(m->n, probe_wakeup(c, b); probe_switch(c, false, a, b, TASK_INTERRUPTIBLE));
	src_report(m, "sched_wakeup_switch", ps);
	ps = SRC_TIME_PS(m->n, probe_migrate(c, b, 1));
	src_report(m, "sched_migrate_task", ps);
	src_stamps_free(&c->wake);
out:
	kfree(c);
}
