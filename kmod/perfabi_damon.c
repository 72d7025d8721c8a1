// SPDX-License-Identifier: GPL-2.0
/*
 * DAMON source: a probe on the damon_aggregated tracepoint writes every
 * region into the current CPU's ring, so that readers rebuild complete
 * aggregations per (kdamond thread, target) (spec/PERFABI.md 6.3, 6.4).
 *
 * No DAMON symbol is exported: the tracepoint is found by name. Its
 * prototype differs between kernels; Kbuild selects the one of the kernel
 * being built for from that kernel's own trace/events/damon.h.
 */
#include <linux/module.h>
#include <linux/tracepoint.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <asm/local64.h>

#include "perfabi.h"
#include "perfabi_internal.h"

static unsigned int damon_sample_us = 5000;
module_param(damon_sample_us, uint, 0644);
MODULE_PARM_DESC(damon_sample_us, "DAMON sampling interval recorded with regions (the tracepoint does not carry it)");

static unsigned int damon_aggr_us = 100000;
module_param(damon_aggr_us, uint, 0644);
MODULE_PARM_DESC(damon_aggr_us, "DAMON aggregation interval recorded with regions");

#ifdef PERFABI_HAVE_DAMON_TP
#include <linux/damon.h>

/* Aggregation state per (kdamond, target): index and next region index. */
#define STREAMS 64
struct stream {
	pid_t monitor;
	unsigned int target;
	unsigned int next_region;
	u64 aggregation;
};
static struct stream streams[STREAMS];
static DEFINE_RAW_SPINLOCK(streams_lock);

static struct tracepoint *damon_tp;

/* Probe cost, exported as perfabi counters by the self-test module. */
u64 perfabi_damon_probe_ns;
u64 perfabi_damon_probe_events;
EXPORT_SYMBOL_GPL(perfabi_damon_probe_ns);
EXPORT_SYMBOL_GPL(perfabi_damon_probe_events);

static struct stream *stream_of(pid_t monitor, unsigned int target)
{
	struct stream *free = NULL;
	int i;

	for (i = 0; i < STREAMS; i++) {
		if (streams[i].monitor == monitor && streams[i].target == target)
			return &streams[i];
		if (!free && !streams[i].monitor)
			free = &streams[i];
	}
	if (!free) /* Reuse the first slot: an old kdamond's stream. */
		free = &streams[0];
	memset(free, 0, sizeof(*free));
	free->monitor = monitor;
	free->target = target;
	return free;
}

static void record_region(unsigned int target_id, struct damon_region *r, unsigned int nr_regions)
{
	struct perfabi_seg *s = &perfabi_seg;
	struct perfabi_damon_record rec;
	struct perfabi_cpu_head *head;
	struct perfabi_damon_record *slot;
	struct stream *st;
	unsigned long flags;
	u64 t0 = ktime_get_ns();
	unsigned int cpu;
	bool outer;

	raw_spin_lock_irqsave(&streams_lock, flags);
	st = stream_of(current->pid, target_id);
	if (st->next_region == 0 || st->next_region >= nr_regions) {
		st->aggregation++;
		st->next_region = 0;
	}
	rec.monitor_id = current->pid;
	rec.target_id = target_id;
	rec.aggregation = st->aggregation;
	rec.region_index = st->next_region++;
	if (st->next_region >= nr_regions)
		st->next_region = 0;
	raw_spin_unlock_irqrestore(&streams_lock, flags);

	rec.nr_regions = nr_regions;
	rec.start = r->ar.start;
	rec.end = r->ar.end;
	rec.nr_accesses = r->nr_accesses;
	rec.age = r->age;
	rec.sample_us = READ_ONCE(damon_sample_us);
	rec.aggr_us = READ_ONCE(damon_aggr_us);

	/*
	 * Tracepoint probes run with preemption disabled: this CPU's block is
	 * ours. Interrupts may run perfabi_adjust() here, which only adds to a
	 * counter word, or perfabi_observe(), a multi-word update of the same
	 * block: both updates use the nesting sequence steps of perfabi_kapi.h,
	 * so an observation in the middle of this record lands inside its odd
	 * window (and the other way round never happens: this is no interrupt).
	 */
	cpu = smp_processor_id();
	head = perfabi_cpu_block(s, cpu);
	if (nr_regions > s->geo.damon_capacity) {
		local64_add(1, (local64_t *)&head->damon_dropped);
		return;
	}
	slot = s->base + perfabi_damon_record_offset(s->hdr, cpu,
						     head->damon_next % s->geo.damon_capacity);
	/* spec 7.1, multi-word update */
	outer = perfabi_seq_nest_begin(perfabi_cpu_seq);
	WRITE_ONCE(slot->monitor_id, rec.monitor_id);
	WRITE_ONCE(slot->target_id, rec.target_id);
	WRITE_ONCE(slot->aggregation, rec.aggregation);
	WRITE_ONCE(slot->region_index, rec.region_index);
	WRITE_ONCE(slot->nr_regions, rec.nr_regions);
	WRITE_ONCE(slot->start, rec.start);
	WRITE_ONCE(slot->end, rec.end);
	WRITE_ONCE(slot->nr_accesses, rec.nr_accesses);
	WRITE_ONCE(slot->age, rec.age);
	WRITE_ONCE(slot->sample_us, rec.sample_us);
	WRITE_ONCE(slot->aggr_us, rec.aggr_us);
	WRITE_ONCE(head->damon_next, (head->damon_next + 1) % s->geo.damon_capacity);
	perfabi_seq_nest_end(perfabi_cpu_seq, outer);
	WRITE_ONCE(perfabi_damon_probe_ns, perfabi_damon_probe_ns + (ktime_get_ns() - t0));
	WRITE_ONCE(perfabi_damon_probe_events, perfabi_damon_probe_events + 1);
}

#ifdef PERFABI_DAMON_TP_TARGET_ARG
/* Linux < 6.7: (struct damon_target *t, unsigned int target_id, ...) */
static void probe(void *data, struct damon_target *t, unsigned int target_id,
		  struct damon_region *r, unsigned int nr_regions)
{
	record_region(target_id, r, nr_regions);
}
#else
/* Linux >= 6.7: (unsigned int target_id, struct damon_region *r, ...) */
static void probe(void *data, unsigned int target_id, struct damon_region *r,
		  unsigned int nr_regions)
{
	record_region(target_id, r, nr_regions);
}
#endif

static void find_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "damon_aggregated"))
		*(struct tracepoint **)priv = tp;
}

void perfabi_damon_start(void)
{
	int err;

	for_each_kernel_tracepoint(find_tp, &damon_tp);
	if (!damon_tp) {
		pr_info("perfabi: DAMON source absent (no damon_aggregated tracepoint in this kernel)\n");
		return;
	}
	err = tracepoint_probe_register(damon_tp, probe, NULL);
	if (err) {
		pr_warn("perfabi: cannot attach to damon_aggregated: %d; DAMON source off\n", err);
		damon_tp = NULL;
		return;
	}
	pr_info("perfabi: DAMON source attached to damon_aggregated\n");
}

void perfabi_damon_stop(void)
{
	if (!damon_tp)
		return;
	tracepoint_probe_unregister(damon_tp, probe, NULL);
	tracepoint_synchronize_unregister();
	damon_tp = NULL;
}
#else
void perfabi_damon_start(void)
{
	pr_info("perfabi: DAMON source absent (built for a kernel without the damon_aggregated tracepoint)\n");
}

void perfabi_damon_stop(void)
{
}
#endif
