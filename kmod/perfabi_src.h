/* SPDX-License-Identifier: GPL-2.0 */
/*
 * perfabi_src.h - shared parts of perfabi_sources.ko, the kernel sources of
 * the families in README.md's "Families out of the box": block, net, irq
 * and sched tracepoint probes writing through perfabi_kapi.h only.
 *
 * Each unit either provides or uses: the helpers every subsystem calls
 * live in files of their own (perfabi_src_families.c, _tp.c, _stamps.c,
 * _report.c) that call no subsystem; perfabi_src_main.c starts and stops
 * the subsystems, and no subsystem calls it (tests/architecture).
 *
 * Every probe runs in whatever context its tracepoint fires in (hard IRQ,
 * softirq, the scheduler with a runqueue lock held): probes use plain
 * atomics, this_cpu operations and RCU-sched lookups only, never a lock,
 * an allocation or anything that could wake a task.
 */
#ifndef _PERFABI_SRC_H
#define _PERFABI_SRC_H

#include <linux/types.h>
#include <linux/compiler.h>
#include <linux/hash.h>
#include <linux/atomic.h>
#include <linux/ktime.h>
#include <linux/timekeeping.h>
#include <linux/sched/clock.h>
#include <linux/irqflags.h>
#include <linux/math64.h>
#include <asm/barrier.h>

#include "perfabi_kapi.h"

#define SRC_PFX "perfabi_sources: "

/* An instance string, NUL included (perfabi: 1..63 bytes). */
#define SRC_INSTANCE_LEN 64
/*
 * The families, defined once (kmod/families, README.md's table):
 * enum perfabi_fam, each subsystem's PERFABI_FAM_*_FIRST..LAST, and the
 * descriptors (PERFABI_FAMILIES()). Histograms: PERFABI_FAM_HIST_BUCKETS
 * log2 buckets of ns from 2^PERFABI_FAM_HIST_LOG2_FIRST, the last +Inf.
 */
#include "perfabi_families.h"

/* A descriptor of the module's own families (dropped, the scratch ones). */
#define SRC_HIST(n, h, dim)						\
	{ .name = (n), .help = (h), .dimension = (dim),			\
	  .kind = PERFABI_KIND_HISTOGRAM, .unit = PERFABI_UNIT_NS,	\
	  .nr_buckets = PERFABI_FAM_HIST_BUCKETS, .bucket_layout = PERFABI_BUCKETS_LOG2, \
	  .log2_first = PERFABI_FAM_HIST_LOG2_FIRST }
#define SRC_COUNTER(n, h, dim, u)					\
	{ .name = (n), .help = (h), .dimension = (dim),			\
	  .kind = PERFABI_KIND_COUNTER, .unit = u }

/* Instances of the perfabi_sources.dropped family: what was lost, counted. */
enum src_drop {
	SRC_DROP_REQUEST_TABLE,	/* a block request's issue time: no free slot */
	SRC_DROP_WAKEUP_TABLE,	/* a task's wakeup time: no free slot */
	SRC_DROP_NO_ROOM,	/* an instance skipped: no room in the segment */
	SRC_NR_DROPS
};

/* perfabi_src_families.c: the families, their instances, what was lost. */
extern struct perfabi_member_handle *src_dropped[SRC_NR_DROPS];
int src_dropped_add(void);
void src_dropped_del(void);
int src_families_add(enum perfabi_fam first, enum perfabi_fam last);
void src_families_del(enum perfabi_fam first, enum perfabi_fam last);
int src_instances_add(const enum perfabi_fam *fams, unsigned int nr, const char *inst,
		      struct perfabi_member_handle **m);
void src_instances_del(struct perfabi_member_handle **m, unsigned int nr);
void src_instance_name(char *dst, const char *src);

/* perfabi_src_tp.c: tracepoints of one subsystem, found by name and registered together. */
struct src_tp {
	const char *name;
	void *probe;
	struct tracepoint *tp;
};
int src_tps_find(struct src_tp *tps, unsigned int nr, const char *subsys);
int src_tps_register(struct src_tp *tps, unsigned int nr, void *data, const char *subsys);
void src_tps_unregister(struct src_tp *tps, unsigned int nr, void *data);

/*
 * The clock of every interval: local_clock(), the scheduler's own clock
 * (sched_clock, the TSC on x86), callable in any context. With a stable
 * TSC it is one clock on every CPU; otherwise the scheduler keeps the
 * CPUs' clocks within a tick of each other, and measures its own
 * cross-CPU waits (schedstats, delay accounting) with it too; an interval
 * that comes out negative counts as 0. A clocksource read
 * (ktime_get_mono_fast_ns()) would be the same on every CPU always, but
 * costs an MMIO read where the TSC is not the clocksource (HPET,
 * acpi_pm): measured in qemu, ten times the rest of a probe.
 */
static __always_inline u64 src_now(void)
{
	return local_clock();
}

static __always_inline u64 src_since(u64 ts, u64 now)
{
	return now > ts ? now - ts : 0;
}

/*
 * A timestamp table: fixed size, open addressed, lock-free, keyed by a
 * pointer (a request, a task) that is only ever compared, never
 * dereferenced. A key's slots are SRC_STAMP_PROBES consecutive slots from
 * its hash. Put claims a free slot with cmpxchg() (or one whose stamp is
 * older than @stale_ns: its owner never came back, a request a driver
 * freed without completing it, a task woken while running that exited);
 * take reads the stamp and frees the slot with a release store. A key is
 * put and taken by events the kernel orders (a task's wakeup and its
 * switch-in under its runqueue lock; a request's issue and completion),
 * so a key never races with itself; different keys race only on cmpxchg.
 * Nothing allocates: a full window is a drop, counted by the caller.
 *
 * The one known inexactness: a stale slot's stamp is read before the
 * cmpxchg that takes it over, so a slot claimed by another CPU a few
 * nanoseconds before (its new stamp not yet written) can be taken over
 * as stale; that costs one observation, only with a full window.
 */
#define SRC_STAMP_PROBES 8

struct src_stamp {
	unsigned long key;	/* 0: free */
	u64 ts;
};

struct src_stamps {
	struct src_stamp *slot;
	unsigned int bits;	/* 1 << bits slots */
	u64 stale_ns;
};

/* perfabi_src_stamps.c */
int src_stamps_init(struct src_stamps *t, unsigned int slots, u64 stale_ns);
void src_stamps_free(struct src_stamps *t);

static __always_inline struct src_stamp *src_stamp_at(const struct src_stamps *t,
						      unsigned long h, unsigned int i)
{
	return &t->slot[(h + i) & ((1UL << t->bits) - 1)];
}

/* Stamps @key with @now. Returns false if every slot of its window is taken. */
static __always_inline bool src_stamp_put(const struct src_stamps *t, unsigned long key, u64 now)
{
	unsigned long h = hash_long(key, t->bits);
	unsigned int i, free = SRC_STAMP_PROBES;

	for (i = 0; i < SRC_STAMP_PROBES; i++) {
		struct src_stamp *s = src_stamp_at(t, h, i);
		unsigned long k = READ_ONCE(s->key);

		if (k == key) {
			WRITE_ONCE(s->ts, now);
			return true;
		}
		if (!k && free == SRC_STAMP_PROBES)
			free = i;
	}
	/* Not there: claim the first free (or stale) slot of the window. */
	for (i = free == SRC_STAMP_PROBES ? 0 : free; i < SRC_STAMP_PROBES; i++) {
		struct src_stamp *s = src_stamp_at(t, h, i);
		unsigned long k = READ_ONCE(s->key);

		if (k && src_since(READ_ONCE(s->ts), now) <= t->stale_ns)
			continue;
		if (cmpxchg(&s->key, k, key) == k) {
			WRITE_ONCE(s->ts, now);
			return true;
		}
	}
	return false;
}

/* Takes @key's stamp into *@ts and frees its slot. Returns false if absent. */
static __always_inline bool src_stamp_take(const struct src_stamps *t, unsigned long key, u64 *ts)
{
	unsigned long h = hash_long(key, t->bits);
	unsigned int i;

	for (i = 0; i < SRC_STAMP_PROBES; i++) {
		struct src_stamp *s = src_stamp_at(t, h, i);

		if (READ_ONCE(s->key) == key) {
			*ts = READ_ONCE(s->ts);
			/* The stamp is read before the slot can be claimed again. */
			smp_store_release(&s->key, 0);
			return true;
		}
	}
	return false;
}

/*
 * Probe cost measurement (module parameter measure=N): each probe is
 * called N times with interrupts off on a scratch instance (a family of
 * its own, deleted afterwards), against a this_cpu_add() loop.
 */
struct src_measure {
	struct perfabi_member_handle *cnt;	/* a scratch counter member */
	struct perfabi_member_handle *hist;	/* a scratch histogram member */
	unsigned int n;
	u64 base_ps;				/* this_cpu_add(), ps per call */
};

/* perfabi_src_report.c */
void src_report(const struct src_measure *m, const char *probe, u64 ps);

/* Picoseconds per execution of @stmt, run @n times with interrupts off. */
#define SRC_TIME_PS(n, stmt) ({						\
	unsigned long __flags;						\
	unsigned int __i;						\
	u64 __t0, __t;							\
									\
	local_irq_save(__flags);					\
	__t0 = ktime_get_ns();						\
	for (__i = 0; __i < (n); __i++) {				\
		stmt;							\
	}								\
	__t = ktime_get_ns() - __t0;					\
	local_irq_restore(__flags);					\
	div_u64(__t * 1000, (n) ? (n) : 1);				\
})

/*
 * The subsystems (perfabi_src_{block,net,irq,sched}.c), called by
 * perfabi_src_main.c only. start: 0, or the subsystem is off (logged once).
 */
int src_block_start(void);
void src_block_stop_probes(void);
void src_block_scan(void);
void src_block_free(void);
void src_block_measure(const struct src_measure *m);

int src_net_start(void);
void src_net_stop_probes(void);
void src_net_free(void);
void src_net_measure(const struct src_measure *m);

int src_irq_start(void);
void src_irq_stop_probes(void);
void src_irq_scan(void);
void src_irq_free(void);
void src_irq_measure(const struct src_measure *m);

int src_sched_start(void);
void src_sched_stop_probes(void);
void src_sched_free(void);
void src_sched_measure(const struct src_measure *m);

#endif /* _PERFABI_SRC_H */
