// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources, irq: kernel.interrupts.count and .handler_time per IRQ
 * that has an action, instance "N:name1,name2" (README.md), from
 * irq_handler_entry and irq_handler_exit.
 *
 * The count is the entries of the IRQ's first action's handler only, so
 * that a shared IRQ counts once per interrupt, as /proc/interrupts does;
 * the handler time is every action's entry to exit, timed with a per-CPU
 * stamp. Hard IRQ handlers of one CPU do not nest (they run with
 * interrupts off), but to be safe the exit is matched against the stamp's
 * IRQ and action: a stamp another entry overwrote, or one left by a CPU
 * that went offline, is discarded, never misattributed.
 *
 * IRQs: there is no exported irq_to_desc() nor an IRQ notifier. A
 * periodic scan walks 0..nr_irqs-1 with irq_get_irq_data() (exported)
 * under rcu_read_lock() (descriptors are freed after a grace period) and
 * reads the action list under desc->lock, as /proc/interrupts does: a new
 * IRQ, a gone one, and a changed action list (a new instance name) appear
 * within one scan. Probes index an RCU array of this module's entries by
 * IRQ number and compare the action pointer with the first action the
 * scan saw (compared, never dereferenced).
 */
#include <linux/irq.h>
#include <linux/irqdesc.h>
#include <linux/interrupt.h>
#include <linux/irqnr.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/tracepoint.h>
#include <linux/percpu.h>
#include <linux/string.h>

#include "perfabi_src.h"

enum { I_COUNT, I_TIME, I_NR };
static const enum perfabi_fam irq_fams[I_NR] = { PERFABI_FAM_IRQ_COUNT, PERFABI_FAM_IRQ_TIME };

struct src_irq {
	const void *first;		/* the first action's address, a key */
	bool skipped;			/* no room: not published, not retried */
	struct perfabi_member_handle *m[I_NR];
	char name[SRC_INSTANCE_LEN];
	struct rcu_head rcu;
};

/* A CPU's handler in progress. */
struct src_irq_stamp {
	const void *action;
	int irq;
	u64 ts;
};

struct src_irq_ctx {
	struct src_irq __rcu **irqs;	/* published entries, by IRQ number */
	unsigned int nr;
	struct src_irq_stamp __percpu *stamp;
};

static struct src_irq_ctx irq_ctx;
static struct src_irq **irq_seen;	/* the scan's: published and skipped entries */
static DEFINE_MUTEX(irq_lock);
static bool beyond_warned;

/* irq_handler_entry: count the first action, stamp every one. */
static void probe_entry(void *data, int irq, struct irqaction *action)
{
	struct src_irq_ctx *c = data;
	struct src_irq_stamp *s = this_cpu_ptr(c->stamp);
	struct src_irq *e;

	if (unlikely((unsigned int)irq >= c->nr))
		return;
	e = rcu_dereference_sched(c->irqs[irq]);
	if (!e)
		return;
	if (action == READ_ONCE(e->first))
		perfabi_member_add(e->m[I_COUNT], 1);
	s->irq = irq;
	s->action = action;
	s->ts = src_now();
}

/* irq_handler_exit: the handler's time, if the stamp is this handler's. */
static void probe_exit(void *data, int irq, struct irqaction *action, int ret)
{
	struct src_irq_ctx *c = data;
	struct src_irq_stamp *s = this_cpu_ptr(c->stamp);
	struct src_irq *e;
	u64 ts = s->ts;

	if (s->action != action || s->irq != irq)
		return;
	s->action = NULL;
	if (unlikely((unsigned int)irq >= c->nr))
		return;
	e = rcu_dereference_sched(c->irqs[irq]);
	if (e)
		perfabi_observe(e->m[I_TIME], src_since(ts, src_now()));
}

static struct src_tp irq_tps[] = {
	{ .name = "irq_handler_entry", .probe = probe_entry },
	{ .name = "irq_handler_exit", .probe = probe_exit },
};

/*
 * IRQ @irq's instance name "N:a,b" (sanitized, at most 63 bytes) and
 * first action, read under its descriptor's lock. Returns false if the IRQ
 * has no descriptor or no action.
 */
static bool irq_state(unsigned int irq, char *name, const void **first)
{
	char raw[SRC_INSTANCE_LEN + 1];
	struct irq_data *data;
	struct irqaction *a;
	bool found = false;
	unsigned long flags;
	size_t len;

	len = scnprintf(raw, sizeof(raw), "%u:", irq);
	rcu_read_lock();
	data = irq_get_irq_data(irq);
	if (data) {
		struct irq_desc *desc = irq_data_to_desc(data);

		raw_spin_lock_irqsave(&desc->lock, flags);
		*first = desc->action;
		for (a = desc->action; a; a = a->next) {
			len += scnprintf(raw + len, sizeof(raw) - len, "%s%s",
					 a == desc->action ? "" : ",", a->name ?: "");
			found = true;
		}
		raw_spin_unlock_irqrestore(&desc->lock, flags);
	}
	rcu_read_unlock();
	if (found)
		src_instance_name(name, raw);
	return found;
}

static void irq_remove(unsigned int irq)
{
	struct src_irq *e = irq_seen[irq];

	irq_seen[irq] = NULL;
	if (!e->skipped) {
		RCU_INIT_POINTER(irq_ctx.irqs[irq], NULL);
		src_instances_del(e->m, I_NR);
	}
	kfree_rcu(e, rcu);
}

static void irq_add(unsigned int irq, const char *name, const void *first)
{
	struct src_irq *e = kzalloc(sizeof(*e), GFP_KERNEL);

	if (!e)
		return;
	e->first = first;
	strscpy(e->name, name, sizeof(e->name));
	irq_seen[irq] = e;
	if (src_instances_add(irq_fams, I_NR, e->name, e->m)) {
		e->skipped = true;
		return;
	}
	rcu_assign_pointer(irq_ctx.irqs[irq], e);
}

/**
 * src_irq_scan() - bring the IRQ instances in line with the IRQs' actions
 *
 * Context: process context (the scan work); may sleep.
 */
void src_irq_scan(void)
{
	unsigned int irq, nr = READ_ONCE(nr_irqs);

	if (nr > irq_ctx.nr && !beyond_warned) {
		pr_warn(SRC_PFX "nr_irqs grew to %u: IRQs from %u on are not published\n", nr,
			irq_ctx.nr);
		beyond_warned = true;
	}
	mutex_lock(&irq_lock);
	for (irq = 0; irq < irq_ctx.nr; irq++) {
		char name[SRC_INSTANCE_LEN];
		const void *first = NULL;
		struct src_irq *e = irq_seen[irq];
		bool live = irq < nr && irq_state(irq, name, &first);

		if (e && live && !strcmp(e->name, name)) {
			/* Same actions by name: follow a re-requested first one. */
			WRITE_ONCE(e->first, first);
			continue;
		}
		if (e)
			irq_remove(irq);
		if (live)
			irq_add(irq, name, first);
		cond_resched();
	}
	mutex_unlock(&irq_lock);
}

/**
 * src_irq_start() - the irq source: families, IRQs, probes
 *
 * Context: process context (module load); may sleep.
 * Return: 0, or an error: the source is off (logged).
 */
int src_irq_start(void)
{
	int err;

#ifndef PERFABI_SRC_IRQ_PROTO
	pr_info(SRC_PFX "irq source off: built for a kernel whose irq_handler_entry/irq_handler_exit prototypes differ from the probes'\n");
	return -EOPNOTSUPP;
#endif
	err = src_tps_find(irq_tps, ARRAY_SIZE(irq_tps), "irq");
	if (err)
		return err;
	irq_ctx.nr = READ_ONCE(nr_irqs);
	irq_ctx.irqs = kvcalloc(irq_ctx.nr, sizeof(*irq_ctx.irqs), GFP_KERNEL);
	irq_seen = kvcalloc(irq_ctx.nr, sizeof(*irq_seen), GFP_KERNEL);
	irq_ctx.stamp = alloc_percpu(struct src_irq_stamp);
	err = -ENOMEM;
	if (!irq_ctx.irqs || !irq_seen || !irq_ctx.stamp)
		goto free;
	err = src_families_add(PERFABI_FAM_IRQ_FIRST, PERFABI_FAM_IRQ_LAST);
	if (err)
		goto free;
	src_irq_scan();
	err = src_tps_register(irq_tps, ARRAY_SIZE(irq_tps), &irq_ctx, "irq");
	if (err)
		goto free;
	return 0;
free:
	src_irq_free();
	return err;
}

/** src_irq_stop_probes() - detach the irq probes (the caller waits for them) */
void src_irq_stop_probes(void)
{
	src_tps_unregister(irq_tps, ARRAY_SIZE(irq_tps), &irq_ctx);
}

/**
 * src_irq_free() - delete the irq families and free everything
 *
 * Context: process context, no probe running any more; may sleep.
 */
void src_irq_free(void)
{
	unsigned int irq;

	mutex_lock(&irq_lock);
	for (irq = 0; irq_seen && irq < irq_ctx.nr; irq++)
		if (irq_seen[irq])
			irq_remove(irq);
	mutex_unlock(&irq_lock);
	src_families_del(PERFABI_FAM_IRQ_FIRST, PERFABI_FAM_IRQ_LAST);
	kvfree(irq_seen);
	irq_seen = NULL;
	kvfree(irq_ctx.irqs);
	irq_ctx.irqs = NULL;
	free_percpu(irq_ctx.stamp);
	irq_ctx.stamp = NULL;
}

/**
 * src_irq_measure() - time the irq probes on a scratch IRQ
 * @m: the scratch members and iterations
 *
 * A scratch context of one IRQ (number 0) whose first action is a
 * scratch key: one entry and exit per iteration, as one handler runs.
 */
void src_irq_measure(const struct src_measure *m)
{
	static const char fake_action;
	struct irqaction *action = (struct irqaction *)&fake_action;
	struct src_irq_ctx c = { .nr = 1 };
	struct src_irq *e = kzalloc(sizeof(*e), GFP_KERNEL);
	u64 ps;

	c.irqs = kcalloc(1, sizeof(*c.irqs), GFP_KERNEL);
	c.stamp = alloc_percpu(struct src_irq_stamp);
	if (!e || !c.irqs || !c.stamp)
		goto out;
	e->first = action;
	e->m[I_COUNT] = m->cnt;
	e->m[I_TIME] = m->hist;
	rcu_assign_pointer(c.irqs[0], e);
	ps = SRC_TIME_PS(m->n, probe_entry(&c, 0, action); probe_exit(&c, 0, action, 1));
	src_report(m, "irq_handler_entry_exit", ps);
out:
	free_percpu(c.stamp);
	kfree(c.irqs);
	kfree(e);
}
