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
 *
 * ABI 1.1 families (checked from the guest by perfabi-guest-check
 * families, against the values set here):
 *
 *  selftest.disk_ops       counter by device: sda 5 (labels model, bus),
 *                          sdb deleted and added again (instance number 1
 *                          kept, a new reg_id) then 17, sdc deleted, sdd 13
 *  selftest.queue_depth    i64 gauge of one instance: +10 - 15 = -5
 *  selftest.lat_log2       log2 histogram (ns, bounds 8..1024) by op: read
 *                          and write get the observations lat_read[] and
 *                          lat_write[]
 *  selftest.size_explicit  explicit histogram (bytes, bounds 10, 100, 1000,
 *                          10000): size_obs[]
 *  selftest.max_latency    peak (us) by queue: q0 reset after 1000000 on
 *                          every CPU, then 100 * (cpu + 1) on each CPU
 *  selftest.gone           added with instances, then deleted
 *  selftest.nest           log2 histogram by context, observed from a
 *                          thread and from a hard IRQ timer at once while
 *                          the stress_ms parameter runs (interrupted
 *                          updates nest), with selftest.nest_thread_calls
 *                          and selftest.nest_irq_calls counting the calls
 *  selftest.cost           gauge by op: picoseconds per call of every hot
 *                          path call and of a plain this_cpu_add() (best of
 *                          RUNS loops of `loops`)
 *  selftest.bench_*        the members those loops use
 */
#include <linux/module.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/kthread.h>
#include <linux/wait.h>
#include <linux/jiffies.h>
#include <linux/smp.h>
#include <linux/err.h>

#include "perfabi.h"
#include "perfabi_kapi.h"

static unsigned int loops = 200000;
module_param(loops, uint, 0444);
MODULE_PARM_DESC(loops, "iterations of the cost measurement at load");

static long ticks_id, hot_id, adjust_ps_id, this_cpu_ps_id, adjust_mem_ps_id, this_cpu_mem_ps_id;
static long probe_ns_id, probe_events_id;
static long nest_thread_calls_id, nest_irq_calls_id;
static u64 __percpu *hot_counter;
static struct hrtimer timer;

/* Families and members (ABI 1.1). */
static struct perfabi_family_handle *fam_disk, *fam_queue, *fam_lat, *fam_size, *fam_peak;
static struct perfabi_family_handle *fam_nest, *fam_cost, *fam_bench_add, *fam_bench_log2;
static struct perfabi_family_handle *fam_bench_explicit, *fam_bench_peak;
static struct perfabi_member_handle *m_nest_irq, *m_nest_thread;

/* Observations of selftest.lat_log2 and selftest.size_explicit (the guest has them too). */
static const u64 lat_read[] = { 0, 1, 7, 8, 9, 16, 17, 100, 512, 513, 1000, 1024, 1025,
				1ULL << 40, U64_MAX };
static const u64 lat_write[] = { 3, 300, 300 };
static const u64 size_obs[] = { 5, 10, 11, 100, 101, 999, 1000, 1001, 10000, 10001, 1ULL << 63 };
static const u64 size_bounds[] = { 10, 100, 1000, 10000 };

/* stress_ms: writing N runs the nesting stress for N ms (then reads 0 again). */
static unsigned int stress_ms;
static bool stressing;
static DECLARE_WAIT_QUEUE_HEAD(stress_wq);
static struct task_struct *stress_task;

static int stress_set(const char *val, const struct kernel_param *kp)
{
	int err = param_set_uint(val, kp);

	if (!err)
		wake_up(&stress_wq);
	return err;
}

static const struct kernel_param_ops stress_ops = {
	.set = stress_set,
	.get = param_get_uint,
};
module_param_cb(stress_ms, &stress_ops, &stress_ms, 0644);
MODULE_PARM_DESC(stress_ms, "write N: observe selftest.nest from a thread and a 1 ms hard IRQ timer for N ms");

#ifdef PERFABI_HAVE_DAMON_TP
extern u64 perfabi_damon_probe_ns;
extern u64 perfabi_damon_probe_events;
#endif

static s64 last_probe_ns, last_probe_events;

static enum hrtimer_restart tick(struct hrtimer *t)
{
	bool stress = READ_ONCE(stressing);

	perfabi_adjust(ticks_id, 1);
	if (stress) {
		/* Lands in the middle of the thread's updates: they nest. */
		perfabi_observe(m_nest_irq, ktime_get_ns() & 0xfffff);
		perfabi_adjust(nest_irq_calls_id, 1);
	}
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
	hrtimer_forward_now(t, ms_to_ktime(stress ? 1 : 10));
	return HRTIMER_RESTART;
}

/* Observes selftest.nest from a thread while stress_ms asks for it. */
static int stress_fn(void *unused)
{
	while (!kthread_should_stop()) {
		unsigned long end;
		u64 n = 0;
		int i;

		wait_event_interruptible(stress_wq, READ_ONCE(stress_ms) || kthread_should_stop());
		if (kthread_should_stop())
			break;
		end = jiffies + msecs_to_jiffies(READ_ONCE(stress_ms));
		WRITE_ONCE(stressing, true);
		while (time_before(jiffies, end) && !kthread_should_stop()) {
			for (i = 0; i < 1000; i++)
				perfabi_observe(m_nest_thread, n + i);
			n += 1000;
			cond_resched();
		}
		WRITE_ONCE(stressing, false);
		perfabi_adjust(nest_thread_calls_id, n);
		pr_info("perfabi_selftest: stress done: %llu observations from a thread\n", n);
		WRITE_ONCE(stress_ms, 0);
	}
	return 0;
}

/* The errno of a call returning a handle or ERR_PTR(): 0 if it succeeded. */
static long err_of(const void *p)
{
	return IS_ERR(p) ? PTR_ERR(p) : 0;
}

/* A family, or NULL (logged). */
static struct perfabi_family_handle *family(const struct perfabi_family_desc *d)
{
	struct perfabi_family_handle *f = perfabi_family_add(d);

	if (IS_ERR(f)) {
		pr_err("perfabi_selftest: perfabi_family_add(%s): %ld\n", d->name, PTR_ERR(f));
		return NULL;
	}
	return f;
}

/* A member, or NULL (logged). */
static struct perfabi_member_handle *member(struct perfabi_family_handle *f, const char *inst,
					    const struct perfabi_label *labels, unsigned int nr)
{
	struct perfabi_member_handle *m = perfabi_instance_add(f, inst, labels, nr);

	if (IS_ERR(m)) {
		pr_err("perfabi_selftest: perfabi_instance_add(\"%s\"): %ld\n", inst ?: "",
		       PTR_ERR(m));
		return NULL;
	}
	return m;
}

static const struct perfabi_family_desc disk_desc = {
	.name = "selftest.disk_ops", .help = "Operations per device (self-test)",
	.dimension = "device", .kind = PERFABI_KIND_COUNTER, .unit = PERFABI_UNIT_COUNT,
};
static const struct perfabi_family_desc queue_desc = {
	.name = "selftest.queue_depth", .help = "A signed level of one instance",
	.kind = PERFABI_KIND_GAUGE, .value_type = PERFABI_TYPE_I64, .unit = PERFABI_UNIT_NONE,
};
static const struct perfabi_family_desc lat_desc = {
	.name = "selftest.lat_log2", .help = "Latency by operation, log2 buckets",
	.dimension = "op", .kind = PERFABI_KIND_HISTOGRAM, .unit = PERFABI_UNIT_NS,
	.nr_buckets = 8, .bucket_layout = PERFABI_BUCKETS_LOG2, .log2_first = 3,
};
static const struct perfabi_family_desc size_desc = {
	.name = "selftest.size_explicit", .help = "Sizes, explicit buckets",
	.kind = PERFABI_KIND_HISTOGRAM, .unit = PERFABI_UNIT_BYTES,
	.nr_buckets = ARRAY_SIZE(size_bounds) + 1, .bucket_layout = PERFABI_BUCKETS_EXPLICIT,
	.bounds = size_bounds,
};
static const struct perfabi_family_desc peak_desc = {
	.name = "selftest.max_latency", .help = "Worst latency per queue since reset",
	.dimension = "queue", .kind = PERFABI_KIND_PEAK, .unit = PERFABI_UNIT_US,
};
static const struct perfabi_family_desc gone_desc = {
	.name = "selftest.gone", .help = "Deleted with its instances",
	.dimension = "x", .kind = PERFABI_KIND_COUNTER, .unit = PERFABI_UNIT_COUNT,
};
static const struct perfabi_family_desc nest_desc = {
	.name = "selftest.nest", .help = "Observed from a thread and a hard IRQ at once",
	.dimension = "context", .kind = PERFABI_KIND_HISTOGRAM, .unit = PERFABI_UNIT_NONE,
	.nr_buckets = 21, .bucket_layout = PERFABI_BUCKETS_LOG2, .log2_first = 0,
};
static const struct perfabi_family_desc cost_desc = {
	.name = "selftest.cost", .help = "Picoseconds per call in a loop, best of the runs",
	.dimension = "op", .kind = PERFABI_KIND_GAUGE, .unit = PERFABI_UNIT_NONE,
};
static const struct perfabi_family_desc bench_add_desc = {
	.name = "selftest.bench_add", .kind = PERFABI_KIND_COUNTER, .unit = PERFABI_UNIT_COUNT,
};
static const struct perfabi_family_desc bench_log2_desc = {
	.name = "selftest.bench_log2", .kind = PERFABI_KIND_HISTOGRAM, .unit = PERFABI_UNIT_NS,
	.nr_buckets = 32, .bucket_layout = PERFABI_BUCKETS_LOG2,
};
static u64 bench_bounds[31];
static struct perfabi_family_desc bench_explicit_desc = {
	.name = "selftest.bench_explicit", .kind = PERFABI_KIND_HISTOGRAM,
	.unit = PERFABI_UNIT_NS, .nr_buckets = 32, .bucket_layout = PERFABI_BUCKETS_EXPLICIT,
	.bounds = bench_bounds,
};
static const struct perfabi_family_desc bench_peak_desc = {
	.name = "selftest.bench_peak", .dimension = "path", .kind = PERFABI_KIND_PEAK,
	.unit = PERFABI_UNIT_NS,
};

/* Runs on every CPU: this CPU's peak mark, per CPU. */
static void peak_on_cpu(void *m)
{
	unsigned int cpu = smp_processor_id();

	perfabi_peak(m, 100ULL * (cpu + 1));
	perfabi_peak(m, 50);		/* no new maximum: changes nothing */
}

static void peak_huge(void *m)
{
	perfabi_peak(m, 1000000);
}

/*
 * The families the guest checks, in their final state. Each step that
 * fails is logged; returns whether all went as the kernel API promises.
 */
static bool families_set_up(void)
{
	static const struct perfabi_label sda_labels[] = {
		{ .key = "model", .value = "virtio disk" },
		{ .key = "bus", .value = "pci" },
	};
	static const struct perfabi_label sdb_labels[] = { { .key = "rack", .value = "r1" } };
	struct perfabi_member_handle *sda, *sdb, *sdc, *sdd, *sdb2, *q, *rd, *wr, *sz, *q0, *g1;
	struct perfabi_family_handle *gone;
	unsigned int i;
	bool ok = true;

	fam_disk = family(&disk_desc);
	fam_queue = family(&queue_desc);
	fam_lat = family(&lat_desc);
	fam_size = family(&size_desc);
	fam_peak = family(&peak_desc);
	fam_nest = family(&nest_desc);
	if (!fam_disk || !fam_queue || !fam_lat || !fam_size || !fam_peak || !fam_nest)
		return false;

	sda = member(fam_disk, "sda", sda_labels, ARRAY_SIZE(sda_labels));
	sdb = member(fam_disk, "sdb", sdb_labels, ARRAY_SIZE(sdb_labels));
	sdc = member(fam_disk, "sdc", NULL, 0);
	if (!sda || !sdb || !sdc)
		return false;
	ok &= perfabi_member_add(sda, 5) == 0 && perfabi_member_add(sdb, 7) == 0 &&
	      perfabi_member_add(sdc, 11) == 0;
	/* sdb goes; its handle is dead; sdd is instance number 3. */
	ok &= perfabi_instance_del(sdb) == 0 && perfabi_member_add(sdb, 1) == -ENOENT &&
	      perfabi_instance_del(sdb) == -ENOENT;
	sdd = member(fam_disk, "sdd", NULL, 0);
	/* sdb returns: number 1 again, a new handle, values from 0. */
	sdb2 = member(fam_disk, "sdb", sdb_labels, ARRAY_SIZE(sdb_labels));
	if (!sdd || !sdb2)
		return false;
	ok &= sdb2 != sdb && perfabi_member_add(sdb, 1) == -ENOENT;
	ok &= perfabi_member_add(sdd, 13) == 0 && perfabi_member_add(sdb2, 17) == 0;
	ok &= perfabi_instance_del(sdc) == 0;

	q = member(fam_queue, NULL, NULL, 0);
	rd = member(fam_lat, "read", NULL, 0);
	wr = member(fam_lat, "write", NULL, 0);
	sz = member(fam_size, "", NULL, 0);
	q0 = member(fam_peak, "q0", NULL, 0);
	m_nest_thread = member(fam_nest, "thread", NULL, 0);
	m_nest_irq = member(fam_nest, "irq", NULL, 0);
	if (!q || !rd || !wr || !sz || !q0 || !m_nest_thread || !m_nest_irq)
		return false;
	ok &= perfabi_member_add(q, 10) == 0 && perfabi_member_add(q, -15) == 0;
	for (i = 0; i < ARRAY_SIZE(lat_read); i++)
		ok &= perfabi_observe(rd, lat_read[i]) == 0;
	for (i = 0; i < ARRAY_SIZE(lat_write); i++)
		ok &= perfabi_observe(wr, lat_write[i]) == 0;
	for (i = 0; i < ARRAY_SIZE(size_obs); i++)
		ok &= perfabi_observe(sz, size_obs[i]) == 0;
	/* A reset forgets 1000000 on every CPU; then each CPU's own mark. */
	on_each_cpu(peak_huge, q0, 1);
	ok &= perfabi_peak_reset(q0) == 0;
	on_each_cpu(peak_on_cpu, q0, 1);

	/* A family deleted with its instances in one generation change. */
	gone = family(&gone_desc);
	g1 = gone ? member(gone, "one", NULL, 0) : NULL;
	ok &= g1 && member(gone, "two", NULL, 0) && perfabi_family_del(gone) == 0 &&
	      perfabi_member_add(g1, 1) == -ENOENT && perfabi_family_del(gone) == -ENOENT &&
	      err_of(perfabi_instance_add(gone, "three", NULL, 0)) == -ENOENT;
	return ok;
}

static bool refused_(int line, long got, long want, u64 gen0)
{
	u64 gen = perfabi_generation();

	if (got == want && gen == gen0)
		return true;
	pr_err("perfabi_selftest: line %d: got %ld, want %ld; generation %llu -> %llu\n",
	       line, got, want, gen0, gen);
	return false;
}

/* expr is refused with errno want, and the segment's metadata did not change. */
#define REFUSED(expr, want) do {					\
	u64 __g = perfabi_generation();					\
									\
	ok &= refused_(__LINE__, (expr), (want), __g);			\
	n++;								\
} while (0)

/*
 * Bad input to every family call is refused with its errno and leaves the
 * segment as it was (its generation unchanged; the guest then checks that
 * it decodes). Returns whether all were; *count says how many.
 */
static bool families_bad_input(unsigned int *count)
{
	static const u64 same[] = { 5, 5 };
	struct perfabi_family_desc d;
	struct perfabi_label l[PERFABI_MAX_LABELS + 1];
	struct perfabi_member_handle *m, *fill[64];
	struct perfabi_family_handle *f, *ff[PERFABI_MAX_FAMILIES < 128 ? PERFABI_MAX_FAMILIES : 128];
	unsigned int n = 0, i, k;
	char name[PERFABI_NAME_LEN];
	bool ok = true;
	long err;

	/* Descriptors: each field's rule. */
	REFUSED(err_of(perfabi_family_add(NULL)), -EINVAL);
#define DESC(base, field, value) ({ d = (base); d.field = (value); err_of(perfabi_family_add(&d)); })
	REFUSED(DESC(disk_desc, name, NULL), -EINVAL);
	REFUSED(DESC(disk_desc, name, "bad name"), -EINVAL);
	REFUSED(DESC(disk_desc, name, "_x.y"), -EINVAL);
	REFUSED(DESC(disk_desc, name, "x._y"), -EINVAL);
	REFUSED(DESC(disk_desc, name, "a..b"), -EINVAL);
	/*
	 * Review: bytes 0xc0..0xff are letters to the kernel's isalpha() and
	 * isalnum() (lib/ctype.c is ISO 8859-1), not to the spec (ASCII) nor
	 * to the Rust reader (UTF-8, then ASCII): such a name, once live,
	 * makes every reader refuse the whole segment (bad-family/bad-entry,
	 * name).
	 */
	REFUSED(DESC(disk_desc, name, "selftest.caf\xe9"), -EINVAL);
	REFUSED(DESC(disk_desc, name, "selftest.\xe9t\xe9"), -EINVAL);
	REFUSED(perfabi_add("selftest.na\xefve", "", PERFABI_COUNTER), -EINVAL);
	REFUSED(DESC(disk_desc, name, "selftest.x" "0123456789012345678901234567890123456789012345678901234"),
		-EINVAL);
	REFUSED(DESC(disk_desc, help, "two\nlines"), -EINVAL);
	REFUSED(DESC(disk_desc, help, "0123456789012345678901234567890123456789012345678901234567890123"
					"0123456789012345678901234567890123456789012345678901234567890123"),
		-EINVAL);
	REFUSED(DESC(disk_desc, dimension, "Device"), -EINVAL);
	REFUSED(DESC(disk_desc, dimension, "cpu"), -EINVAL);
	REFUSED(DESC(disk_desc, dimension, "le"), -EINVAL);
	REFUSED(DESC(disk_desc, dimension, "1st"), -EINVAL);
	REFUSED(DESC(disk_desc, dimension, "a_dimension_name_of_32_bytes_xxx"), -EINVAL);
	REFUSED(DESC(disk_desc, unit, ((struct perfabi_unit)PERFABI_UNIT(0, 0, 0, 1, 0, 0, 0))), -EINVAL);
	REFUSED(DESC(disk_desc, unit, ((struct perfabi_unit)PERFABI_UNIT(4, 0, 0, 0, 0, 0, 0))), -EINVAL);
	REFUSED(DESC(disk_desc, unit, ((struct perfabi_unit)PERFABI_UNIT(1, 0, 0, 7, 0, 0, 0))), -EINVAL);
	REFUSED(DESC(disk_desc, unit, ((struct perfabi_unit)PERFABI_UNIT(1, 0, 0, 0, 0, 0,
									PERFABI_QUANTITY_PAGES))), -EINVAL);
	REFUSED(DESC(disk_desc, unit, ((struct perfabi_unit)PERFABI_UNIT(0, 0, 1, 0, 0, 0, 3))), -EINVAL);
	REFUSED(DESC(disk_desc, kind, 0), -EINVAL);
	REFUSED(DESC(disk_desc, kind, 5), -EINVAL);
	REFUSED(DESC(disk_desc, value_type, 3), -EINVAL);
	REFUSED(DESC(disk_desc, nr_buckets, 4), -EINVAL);
	REFUSED(DESC(disk_desc, bounds, size_bounds), -EINVAL);
	REFUSED(DESC(peak_desc, value_type, PERFABI_TYPE_I64), -EINVAL);
	REFUSED(DESC(lat_desc, value_type, PERFABI_TYPE_I64), -EINVAL);
	REFUSED(DESC(lat_desc, nr_buckets, 33), -E2BIG);
	REFUSED(DESC(lat_desc, nr_buckets, 1), -EINVAL);
	REFUSED(DESC(lat_desc, bucket_layout, 0), -EINVAL);
	REFUSED(DESC(lat_desc, bucket_layout, 3), -EINVAL);
	REFUSED(DESC(lat_desc, log2_first, 58), -EINVAL);	/* 58 + 8 - 2 > 63 */
	REFUSED(DESC(size_desc, bounds, same), -EINVAL);
	REFUSED(DESC(size_desc, bounds, NULL), -EINVAL);
	REFUSED(DESC(size_desc, log2_first, 1), -EINVAL);
	/* Names: clash keys and dotted prefixes, against families and 1.0 names. */
	REFUSED(err_of(perfabi_family_add(&disk_desc)), -EEXIST);
	REFUSED(DESC(disk_desc, name, "selftest_disk_ops"), -EEXIST);
	REFUSED(DESC(disk_desc, name, "selftest.disk_ops_total"), -EEXIST);
	REFUSED(DESC(disk_desc, name, "selftest.disk.ops_count"), -EEXIST);
	REFUSED(DESC(disk_desc, name, "selftest.hot_path_sum"), -EEXIST);	/* a 1.0 name */
	REFUSED(DESC(disk_desc, name, "selftest.hot_path.reads"), -EEXIST);	/* below a 1.0 name */
	REFUSED(DESC(disk_desc, name, "selftest.disk_ops.reads"), -EEXIST);	/* below a family */
	REFUSED(DESC(disk_desc, name, "selftest"), -EEXIST);			/* above both */
	REFUSED(perfabi_add("selftest.disk_ops_created", "", PERFABI_COUNTER), -EEXIST);
	REFUSED(perfabi_add("selftest.lat_log2.p99", "ns", PERFABI_INSTANT), -EEXIST);
#undef DESC

	/* Instances. */
	memset(l, 0, sizeof(l));
	for (i = 0; i < ARRAY_SIZE(l); i++) {
		snprintf(l[i].key, sizeof(l[i].key), "k%u", i);
		strscpy(l[i].value, "v", sizeof(l[i].value));
	}
	REFUSED(err_of(perfabi_instance_add(NULL, "x", NULL, 0)), -ENOENT);
	REFUSED(err_of(perfabi_instance_add((void *)12345, "x", NULL, 0)), -ENOENT);
	REFUSED(err_of(perfabi_instance_add(fam_disk, "a b", NULL, 0)), -EINVAL);
	REFUSED(err_of(perfabi_instance_add(fam_disk, "a\"b", NULL, 0)), -EINVAL);
	REFUSED(err_of(perfabi_instance_add(fam_disk, "a\\b", NULL, 0)), -EINVAL);
	REFUSED(err_of(perfabi_instance_add(fam_disk, "", NULL, 0)), -EINVAL);
	REFUSED(err_of(perfabi_instance_add(fam_disk, NULL, NULL, 0)), -EINVAL);
	REFUSED(err_of(perfabi_instance_add(fam_disk, "0123456789012345678901234567890123456789"
						      "012345678901234567890123", NULL, 0)), -EINVAL);
	REFUSED(err_of(perfabi_instance_add(fam_queue, "x", NULL, 0)), -EINVAL);
	REFUSED(err_of(perfabi_instance_add(fam_queue, "", NULL, 0)), -EEXIST);
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sda", NULL, 0)), -EEXIST);
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sdx", l, PERFABI_MAX_LABELS + 1)), -E2BIG);
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sdx", NULL, 1)), -EINVAL);
	strscpy(l[1].key, "cpu", sizeof(l[1].key));
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sdx", l, 2)), -EINVAL);
	strscpy(l[1].key, "device", sizeof(l[1].key));		/* the dimension */
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sdx", l, 2)), -EINVAL);
	strscpy(l[1].key, "k0", sizeof(l[1].key));		/* twice */
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sdx", l, 2)), -EINVAL);
	strscpy(l[1].key, "k1", sizeof(l[1].key));
	l[1].value[0] = 0;					/* empty value */
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sdx", l, 2)), -EINVAL);
	strscpy(l[1].value, "a\\b", sizeof(l[1].value));
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sdx", l, 2)), -EINVAL);
	memset(l[1].key, 'k', sizeof(l[1].key));		/* no NUL in the field */
	strscpy(l[1].value, "v", sizeof(l[1].value));
	REFUSED(err_of(perfabi_instance_add(fam_disk, "sdx", l, 2)), -EINVAL);

	/* Hot-path calls with the wrong kind of handle, or none. */
	m = perfabi_instance_add(fam_disk, "sdx", NULL, 0);
	ok &= !IS_ERR(m);
	if (!IS_ERR(m)) {
		REFUSED(perfabi_observe(m, 1), -ENOENT);
		REFUSED(perfabi_peak(m, 1), -ENOENT);
		REFUSED(perfabi_peak_reset(m), -EINVAL);
		REFUSED(perfabi_adjust((long)m, 1), -ENOENT);
		ok &= perfabi_member_add(m, 1) == 0 && perfabi_instance_del(m) == 0;
		REFUSED(perfabi_member_add(m, 1), -ENOENT);
		REFUSED(perfabi_instance_del(m), -ENOENT);
		REFUSED(perfabi_peak_reset(m), -ENOENT);
	}
	REFUSED(perfabi_member_add(NULL, 1), -ENOENT);
	REFUSED(perfabi_observe(ERR_PTR(-EINVAL), 1), -ENOENT);
	REFUSED(perfabi_peak((void *)-1L, 1), -ENOENT);
	REFUSED(perfabi_instance_del(NULL), -ENOENT);
	REFUSED(perfabi_family_del(NULL), -ENOENT);
	REFUSED(perfabi_family_del((void *)1), -ENOENT);

	/* Full: the value words (histograms of 34 words), then the family table. */
	d = lat_desc;
	d.name = "selftest.fill_values";
	d.nr_buckets = PERFABI_MAX_BUCKETS;
	f = perfabi_family_add(&d);
	ok &= !IS_ERR(f);
	if (!IS_ERR(f)) {
		err = 0;
		for (k = 0; k < ARRAY_SIZE(fill) && !err; k++) {
			snprintf(name, sizeof(name), "i%u", k);
			fill[k] = perfabi_instance_add(f, name, NULL, 0);
			err = err_of(fill[k]);
		}
		REFUSED(err, -ENOSPC);
		REFUSED(err_of(perfabi_instance_add(f, "more", NULL, 0)), -ENOSPC);
		ok &= k > 1 && perfabi_family_del(f) == 0 && perfabi_observe(fill[0], 1) == -ENOENT;
	}
	err = 0;
	for (k = 0; k < ARRAY_SIZE(ff) && !err; k++) {
		d = disk_desc;
		snprintf(name, sizeof(name), "selftest.fill.f%u", k);
		d.name = name;
		ff[k] = perfabi_family_add(&d);
		err = err_of(ff[k]);
	}
	REFUSED(err, -ENOSPC);
	d = disk_desc;
	d.name = "selftest.fill.more";
	REFUSED(err_of(perfabi_family_add(&d)), -ENOSPC);
	for (i = 0; i + 1 < k; i++)
		ok &= perfabi_family_del(ff[i]) == 0;
	*count = n;
	return ok;
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

static void peak_max(void *m)
{
	perfabi_peak(m, U64_MAX);
}

/* One PERFABI-MEASURE line: ps per call of `what` and its ratio to a plain this_cpu_add(). */
static void print_ratio(const char *what, u64 ps, u64 base)
{
	u64 r = ps * 100 / max(base, 1ULL);

	pr_info("perfabi_selftest: PERFABI-MEASURE %s %llu ps/op, this_cpu_add %llu ps/op, ratio %llu.%02llu (target <= 2)\n",
		what, ps, base, r / 100, r % 100);
}

/*
 * The family hot path calls against a plain this_cpu_add() on a member's
 * own counter word, side by side in alternating loops (handles in
 * registers), each keeping its best run; published in selftest.cost.
 */
static bool families_measure(void)
{
	static const char *const ops[] = {
		"this_cpu_add", "member_add", "observe_log2", "observe_explicit", "peak_fast",
		"peak_new",
	};
	struct perfabi_member_handle *madd, *mlog2, *mexpl, *pfast, *pnew, *cost;
	u64 best[ARRAY_SIZE(ops)], base = 0;
	u64 __percpu *counter;
	unsigned int k;
	bool ok = true;
	int run;

	for (k = 0; k < ARRAY_SIZE(bench_bounds); k++)
		bench_bounds[k] = 16ULL << k;
	fam_cost = family(&cost_desc);
	fam_bench_add = family(&bench_add_desc);
	fam_bench_log2 = family(&bench_log2_desc);
	fam_bench_explicit = family(&bench_explicit_desc);
	fam_bench_peak = family(&bench_peak_desc);
	if (!fam_cost || !fam_bench_add || !fam_bench_log2 || !fam_bench_explicit || !fam_bench_peak)
		return false;
	madd = member(fam_bench_add, NULL, NULL, 0);
	mlog2 = member(fam_bench_log2, NULL, NULL, 0);
	mexpl = member(fam_bench_explicit, NULL, NULL, 0);
	pfast = member(fam_bench_peak, "fast", NULL, 0);
	pnew = member(fam_bench_peak, "new", NULL, 0);
	if (!madd || !mlog2 || !mexpl || !pfast || !pnew)
		return false;
	/* No observation is a new maximum for "fast" on any CPU. */
	on_each_cpu(peak_max, pfast, 1);
	counter = perfabi_member_counter((long)madd);
	for (k = 0; k < ARRAY_SIZE(best); k++)
		best[k] = U64_MAX;
	for (run = 0; run < RUNS; run++) {
		best[0] = min(best[0], MEASURE_PS(this_cpu_add(*counter, 1)));
		best[1] = min(best[1], MEASURE_PS(perfabi_member_add(madd, 1)));
		best[2] = min(best[2], MEASURE_PS(perfabi_observe(mlog2, __i)));
		best[3] = min(best[3], MEASURE_PS(perfabi_observe(mexpl, __i)));
		best[4] = min(best[4], MEASURE_PS(perfabi_peak(pfast, __i)));
		/* Every observation a new maximum: above all of the earlier runs'. */
		best[5] = min(best[5], MEASURE_PS(perfabi_peak(pnew, base + __i + 1)));
		base += loops;
	}
	for (k = 0; k < ARRAY_SIZE(ops); k++) {
		cost = member(fam_cost, ops[k], NULL, 0);
		ok &= cost && perfabi_member_add(cost, best[k]) == 0;
		if (k)
			print_ratio(ops[k], best[k], best[0]);
	}
	return ok;
}

static int __init selftest_init(void)
{
	u64 a = U64_MAX, p = U64_MAX, am = U64_MAX, pm = U64_MAX;
	u64 __percpu *counter;
	unsigned int refused = 0;
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
	nest_thread_calls_id = add_or_warn("selftest.nest_thread_calls", "count", PERFABI_COUNTER);
	nest_irq_calls_id = add_or_warn("selftest.nest_irq_calls", "count", PERFABI_COUNTER);
	if (ticks_id < 0 || hot_id < 0 || adjust_ps_id < 0 || this_cpu_ps_id < 0 ||
	    adjust_mem_ps_id < 0 || this_cpu_mem_ps_id < 0 ||
	    probe_ns_id < 0 || probe_events_id < 0 || nest_thread_calls_id < 0 ||
	    nest_irq_calls_id < 0)
		return -EINVAL;

	if (bad_arguments_refused())
		pr_info("perfabi_selftest: PERFABI-TEST bad-arguments PASS\n");
	else
		pr_err("perfabi_selftest: PERFABI-TEST bad-arguments FAIL\n");

	if (families_set_up())
		pr_info("perfabi_selftest: PERFABI-TEST families-api PASS\n");
	else
		pr_err("perfabi_selftest: PERFABI-TEST families-api FAIL\n");
	if (families_bad_input(&refused))
		pr_info("perfabi_selftest: PERFABI-TEST families-bad-input PASS (%u refused, generation unchanged)\n",
			refused);
	else
		pr_err("perfabi_selftest: PERFABI-TEST families-bad-input FAIL\n");
	if (!families_measure())
		pr_err("perfabi_selftest: PERFABI-TEST families-measure FAIL\n");

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
	stress_task = kthread_run(stress_fn, NULL, "perfabi_stress");
	if (IS_ERR(stress_task)) {
		pr_err("perfabi_selftest: no stress thread: %ld\n", PTR_ERR(stress_task));
		stress_task = NULL;
	}
	return 0;
}

static void __exit selftest_exit(void)
{
	struct perfabi_family_handle *fams[] = {
		fam_disk, fam_queue, fam_lat, fam_size, fam_peak, fam_nest, fam_cost,
		fam_bench_add, fam_bench_log2, fam_bench_explicit, fam_bench_peak,
	};
	unsigned int i;

	if (stress_task)
		kthread_stop(stress_task);
	hrtimer_cancel(&timer);
	for (i = 0; i < ARRAY_SIZE(fams); i++)
		if (fams[i])
			perfabi_family_del(fams[i]);
	perfabi_del(nest_thread_calls_id);
	perfabi_del(nest_irq_calls_id);
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
