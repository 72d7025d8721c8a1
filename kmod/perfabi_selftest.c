// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_selftest: a companion module that uses the perfabi kernel API the
 * way other modules would, and measures it.
 *
 *  selftest.hrtimer_ticks  +1 every 10 ms from an hrtimer (hard IRQ context)
 *  selftest.hot_path       adjusted N times in a loop at load
 *  selftest.adjust_ps      picoseconds per perfabi_adjust() in that loop,
 *                          the id held in a register
 *  selftest.this_cpu_ps    picoseconds per plain this_cpu_add() on the same
 *                          counter, its per-CPU address held in a register
 *  selftest.adjust_mem_ps, selftest.this_cpu_mem_ps
 *                          the same two, each loading its handle (the id, the
 *                          counter's address) from memory at every call
 *  selftest.damon_probe_ns / selftest.damon_probe_events
 *                          the DAMON probe's total cost and event count
 */
#include <linux/module.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/percpu.h>
#include <linux/preempt.h>

#include "perfabi.h"
#include "perfabi_kapi.h"

static unsigned int loops = 200000;
module_param(loops, uint, 0444);
MODULE_PARM_DESC(loops, "iterations of the cost measurement at load");

static long ticks_id, hot_id, adjust_ps_id, this_cpu_ps_id, adjust_mem_ps_id, this_cpu_mem_ps_id;
static long probe_ns_id, probe_events_id;
static u64 __percpu *hot_counter;
static struct hrtimer timer;

#ifdef PERFABI_HAVE_DAMON_TP
extern u64 perfabi_damon_probe_ns;
extern u64 perfabi_damon_probe_events;
#endif

static s64 last_probe_ns, last_probe_events;

static enum hrtimer_restart tick(struct hrtimer *t)
{
	perfabi_adjust(ticks_id, 1);
#ifdef PERFABI_HAVE_DAMON_TP
	{
		s64 ns = READ_ONCE(perfabi_damon_probe_ns);
		s64 ev = READ_ONCE(perfabi_damon_probe_events);

		perfabi_adjust(probe_ns_id, ns - last_probe_ns);
		perfabi_adjust(probe_events_id, ev - last_probe_events);
		last_probe_ns = ns;
		last_probe_events = ev;
	}
#endif
	hrtimer_forward_now(t, ms_to_ktime(10));
	return HRTIMER_RESTART;
}

/* Picoseconds per execution of `body`, over `loops` executions, preemption off. */
#define MEASURE_PS(body) ({						\
	unsigned int __i, __n = loops;	/* a register, not a load */	\
	u64 __t0, __dt;							\
									\
	preempt_disable();						\
	__t0 = ktime_get_ns();						\
	for (__i = 0; __i < __n; __i++) {				\
		body;							\
	}								\
	__dt = ktime_get_ns() - __t0;					\
	preempt_enable();						\
	__dt * 1000 / __n;						\
})

/* Measurement runs; the two loops alternate, and each keeps its best run. */
#define RUNS 25

static long add_or_warn(const char *name, const char *unit, u32 sem)
{
	long id = perfabi_add(name, unit, sem);

	if (id < 0)
		pr_err("perfabi_selftest: perfabi_add(%s): %ld\n", name, id);
	return id;
}

/* Bad arguments are refused and change nothing; a deleted id stays dead. */
static bool bad_arguments_refused(void)
{
	long old, again;
	bool ok;

	if (perfabi_add("bad name", "", PERFABI_COUNTER) != -EINVAL ||
	    perfabi_add("_starts_with_underscore", "", PERFABI_COUNTER) != -EINVAL ||
	    perfabi_add("selftest.hot_path", "", PERFABI_COUNTER) != -EEXIST ||
	    perfabi_add("selftest_hot_path", "", PERFABI_COUNTER) != -EEXIST ||
	    perfabi_add("selftest.hot_path_total", "", PERFABI_COUNTER) != -EEXIST ||
	    perfabi_adjust(-1, 1) != -ENOENT || perfabi_adjust(0, 1) != -ENOENT ||
	    perfabi_adjust(hot_id ^ (1L << PERFABI_ID_PTR_BITS), 1) != -ENOENT || perfabi_del(12345L << 16) != -ENOENT)
		return false;
	old = perfabi_add("selftest.reused", "count", PERFABI_COUNTER);
	if (old < 0 || perfabi_del(old) != 0)
		return false;
	ok = perfabi_adjust(old, 1) == -ENOENT && perfabi_del(old) == -ENOENT;
	/* The slot is free again: a new registration gets it with a new id. */
	again = perfabi_add("selftest.reused", "count", PERFABI_COUNTER);
	ok = ok && again >= 0 && again != old && perfabi_adjust(old, 1) == -ENOENT &&
	     perfabi_adjust(again, 1) == 0;
	return perfabi_del(again) == 0 && ok;
}

static int __init selftest_init(void)
{
	u64 a = U64_MAX, p = U64_MAX, am = U64_MAX, pm = U64_MAX;
	u64 __percpu *counter;
	long id;
	int run;

	ticks_id = add_or_warn("selftest.hrtimer_ticks", "count", PERFABI_COUNTER);
	hot_id = add_or_warn("selftest.hot_path", "count", PERFABI_COUNTER);
	adjust_ps_id = add_or_warn("selftest.adjust_ps", "ps", PERFABI_INSTANT);
	this_cpu_ps_id = add_or_warn("selftest.this_cpu_ps", "ps", PERFABI_INSTANT);
	adjust_mem_ps_id = add_or_warn("selftest.adjust_mem_ps", "ps", PERFABI_INSTANT);
	this_cpu_mem_ps_id = add_or_warn("selftest.this_cpu_mem_ps", "ps", PERFABI_INSTANT);
	probe_ns_id = add_or_warn("selftest.damon_probe_ns", "ns", PERFABI_COUNTER);
	probe_events_id = add_or_warn("selftest.damon_probe_events", "count", PERFABI_COUNTER);
	if (ticks_id < 0 || hot_id < 0 || adjust_ps_id < 0 || this_cpu_ps_id < 0 ||
	    adjust_mem_ps_id < 0 || this_cpu_mem_ps_id < 0 ||
	    probe_ns_id < 0 || probe_events_id < 0)
		return -EINVAL;

	if (bad_arguments_refused())
		pr_info("perfabi_selftest: PERFABI-TEST bad-arguments PASS\n");
	else
		pr_err("perfabi_selftest: PERFABI-TEST bad-arguments FAIL\n");

	/*
	 * perfabi_adjust() against the least a counter update can cost: a
	 * this_cpu_add() on the very same counter. Once with both handles in
	 * registers (a caller's loop), once with each loaded from memory at
	 * every call (a caller that keeps its id, or its per-CPU pointer, in a
	 * structure).
	 */
	id = hot_id;
	counter = perfabi_id_counter(id);
	hot_counter = counter;
	for (run = 0; run < RUNS; run++) {
		a = min(a, MEASURE_PS(perfabi_adjust(id, 1)));
		p = min(p, MEASURE_PS(this_cpu_add(*counter, 1)));
		am = min(am, MEASURE_PS(perfabi_adjust(READ_ONCE(hot_id), 1)));
		pm = min(pm, MEASURE_PS(this_cpu_add(*READ_ONCE(hot_counter), 1)));
	}
	perfabi_adjust(adjust_ps_id, a);
	perfabi_adjust(this_cpu_ps_id, p);
	perfabi_adjust(adjust_mem_ps_id, am);
	perfabi_adjust(this_cpu_mem_ps_id, pm);
	pr_info("perfabi_selftest: perfabi_adjust %llu ps/op, this_cpu_add %llu ps/op; handles loaded from memory: %llu and %llu ps/op (%u loops, best of %d)\n",
		a, p, am, pm, loops, RUNS);

	hrtimer_init(&timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	timer.function = tick;
	hrtimer_start(&timer, ms_to_ktime(10), HRTIMER_MODE_REL_HARD);
	return 0;
}

static void __exit selftest_exit(void)
{
	hrtimer_cancel(&timer);
	perfabi_del(ticks_id);
	perfabi_del(hot_id);
	perfabi_del(adjust_ps_id);
	perfabi_del(this_cpu_ps_id);
	perfabi_del(adjust_mem_ps_id);
	perfabi_del(this_cpu_mem_ps_id);
	perfabi_del(probe_ns_id);
	perfabi_del(probe_events_id);
}

module_init(selftest_init);
module_exit(selftest_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("perfabi self-test: the kernel API from a timer and a hot path, measured");
