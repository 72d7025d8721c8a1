// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources.ko: the kernel sources of README.md's "Families out of
 * the box", from the kernel's own tracepoints, per CPU, written only
 * through the perfabi module's exported API (perfabi_kapi.h) and symbols
 * the kernel exports (no kallsyms, no kernel patch).
 *
 *	block: block_rq_issue, block_rq_complete	disk.dev.*
 *	net:   netif_receive_skb, net_dev_xmit		network.interface.*
 *	irq:   irq_handler_entry, irq_handler_exit	kernel.interrupts.*
 *	sched: sched_switch, sched_wakeup(_new),	kernel.all.pswitch,
 *	       sched_migrate_task			kernel.sched.*
 *
 * Module parameters block, net, irq and sched (default on) choose the
 * subsystems. A subsystem whose tracepoints this kernel lacks (or whose
 * prototypes differ from those the probes were written for, checked by
 * Kbuild in the target kernel's headers) is skipped with one dmesg line:
 * its families are absent, never published as zeros. An instance that
 * finds no room in the segment (-ENOSPC) is skipped with one dmesg line
 * and counted in perfabi_sources.dropped{reason="no_room"}; the load
 * never fails for it.
 *
 * Disks and IRQs are found by a periodic scan (scan_ms, delayed work);
 * network devices by the netdevice notifier. See each subsystem's file.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/tracepoint.h>
#include <linux/workqueue.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/string.h>
#include <linux/err.h>
#include <linux/percpu.h>

#include "perfabi_src.h"

static bool block = true;
module_param(block, bool, 0444);
MODULE_PARM_DESC(block, "publish disk.dev.* from the block tracepoints");
static bool net = true;
module_param(net, bool, 0444);
MODULE_PARM_DESC(net, "publish network.interface.* from the net tracepoints (initial namespace)");
static bool irq = true;
module_param(irq, bool, 0444);
MODULE_PARM_DESC(irq, "publish kernel.interrupts.* from the irq tracepoints");
static bool sched = true;
module_param(sched, bool, 0444);
MODULE_PARM_DESC(sched, "publish kernel.all.pswitch and kernel.sched.* from the sched tracepoints");
static unsigned int scan_ms = 250;
module_param(scan_ms, uint, 0444);
MODULE_PARM_DESC(scan_ms, "interval of the disk and IRQ scans, ms (100..1000)");
static unsigned int measure;
module_param(measure, uint, 0444);
MODULE_PARM_DESC(measure, "at load, time each probe N times (at most 10^6) on a scratch instance and log PERFABI-MEASURE lines");

#define HIST(n, h, dim)							\
	{ .name = (n), .help = (h), .dimension = (dim),			\
	  .kind = PERFABI_KIND_HISTOGRAM, .unit = PERFABI_UNIT_NS,	\
	  .nr_buckets = SRC_HIST_BUCKETS, .bucket_layout = PERFABI_BUCKETS_LOG2, \
	  .log2_first = SRC_HIST_LOG2_FIRST }
#define COUNTER(n, h, dim, u)						\
	{ .name = (n), .help = (h), .dimension = (dim),			\
	  .kind = PERFABI_KIND_COUNTER, .unit = u }

/* README.md's table, the rows with a kernel source: names, kinds, units, dimensions. */
static const struct perfabi_family_desc src_descs[SRC_NR_FAMILIES] = {
	[SRC_DISK_READ] = COUNTER("disk.dev.read", "Reads completed", "device",
				  PERFABI_UNIT_COUNT),
	[SRC_DISK_WRITE] = COUNTER("disk.dev.write", "Writes completed", "device",
				   PERFABI_UNIT_COUNT),
	[SRC_DISK_DISCARD] = COUNTER("disk.dev.discard", "Discards completed", "device",
				     PERFABI_UNIT_COUNT),
	[SRC_DISK_FLUSH] = COUNTER("disk.dev.flush", "Flush requests completed", "device",
				   PERFABI_UNIT_COUNT),
	[SRC_DISK_READ_BYTES] = COUNTER("disk.dev.read_bytes", "Bytes read", "device",
					PERFABI_UNIT_BYTES),
	[SRC_DISK_WRITE_BYTES] = COUNTER("disk.dev.write_bytes", "Bytes written", "device",
					 PERFABI_UNIT_BYTES),
	[SRC_DISK_DISCARD_BYTES] = COUNTER("disk.dev.discard_bytes", "Bytes discarded",
					   "device", PERFABI_UNIT_BYTES),
	[SRC_DISK_LATENCY] = HIST("disk.dev.request_latency",
				  "Request time from issue to the driver to completion", "device"),
	[SRC_NET_IN_PACKETS] = COUNTER("network.interface.in.packets", "Packets received",
				       "interface", PERFABI_UNIT_COUNT),
	[SRC_NET_IN_BYTES] = COUNTER("network.interface.in.bytes",
				     "Bytes received, link-layer header included", "interface",
				     PERFABI_UNIT_BYTES),
	[SRC_NET_OUT_PACKETS] = COUNTER("network.interface.out.packets",
					"Packets transmitted", "interface", PERFABI_UNIT_COUNT),
	[SRC_NET_OUT_BYTES] = COUNTER("network.interface.out.bytes", "Bytes transmitted",
				      "interface", PERFABI_UNIT_BYTES),
	[SRC_IRQ_COUNT] = COUNTER("kernel.interrupts.count",
				  "Interrupts, per IRQ (its first action's handler runs)", "irq",
				  PERFABI_UNIT_COUNT),
	[SRC_IRQ_TIME] = HIST("kernel.interrupts.handler_time",
			      "Time in each action's hard IRQ handler", "irq"),
	[SRC_SCHED_PSWITCH] = COUNTER("kernel.all.pswitch", "Context switches", NULL,
				      PERFABI_UNIT_COUNT),
	[SRC_SCHED_WAKEUPS] = COUNTER("kernel.sched.wakeups", "Task wakeups, new tasks included",
				      NULL, PERFABI_UNIT_COUNT),
	[SRC_SCHED_MIGRATIONS] = COUNTER("kernel.sched.migrations", "Task migrations between CPUs",
					 NULL, PERFABI_UNIT_COUNT),
	[SRC_SCHED_LATENCY] = HIST("kernel.sched.wakeup_latency",
				   "Time from a task's wakeup to its switch onto a CPU", NULL),
};

static struct perfabi_family_handle *src_fams[SRC_NR_FAMILIES];

static const struct perfabi_family_desc dropped_desc =
	COUNTER("perfabi_sources.dropped", "Observations or instances perfabi_sources lost",
		"reason", PERFABI_UNIT_COUNT);
static const char *const drop_names[SRC_NR_DROPS] = {
	[SRC_DROP_REQUEST_TABLE] = "request_table_full",
	[SRC_DROP_WAKEUP_TABLE] = "wakeup_table_full",
	[SRC_DROP_NO_ROOM] = "no_room",
};
static struct perfabi_family_handle *dropped_fam;
struct perfabi_member_handle *src_dropped[SRC_NR_DROPS];

/**
 * src_families_add() - register the families @first..@last
 * @first: the first family (enum src_family)
 * @last: the last one, included
 *
 * Context: process context; may sleep.
 * Return: 0, or the first error (logged; the families added are deleted).
 */
int src_families_add(enum src_family first, enum src_family last)
{
	enum src_family i;

	for (i = first; i <= last; i++) {
		struct perfabi_family_handle *f = perfabi_family_add(&src_descs[i]);

		if (IS_ERR(f)) {
			pr_warn(SRC_PFX "cannot add family %s: %ld\n", src_descs[i].name,
				PTR_ERR(f));
			if (i > first)
				src_families_del(first, i - 1);
			return PTR_ERR(f);
		}
		src_fams[i] = f;
	}
	return 0;
}

/**
 * src_families_del() - delete the families @first..@last and their instances
 * @first: the first family (enum src_family)
 * @last: the last one, included
 *
 * Context: process context; may sleep.
 */
void src_families_del(enum src_family first, enum src_family last)
{
	enum src_family i;

	for (i = first; i <= last; i++) {
		if (src_fams[i])
			perfabi_family_del(src_fams[i]);
		src_fams[i] = NULL;
	}
}

/**
 * src_instances_add() - add one instance string to several families
 * @fams: the families
 * @nr: how many
 * @inst: the instance string (src_instance_name()), or "" for no dimension
 * @m: where the @nr member handles go
 *
 * All or nothing: on an error the members added are deleted. No room in
 * the segment (-ENOSPC) is logged once here and counted in
 * perfabi_sources.dropped{reason="no_room"}; the caller skips the instance
 * (and remembers it, so as not to log it again).
 *
 * Context: process context; may sleep.
 * Return: 0 or a negative errno.
 */
int src_instances_add(const enum src_family *fams, unsigned int nr, const char *inst,
		      struct perfabi_member_handle **m)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		m[i] = perfabi_instance_add(src_fams[fams[i]], inst, NULL, 0);
		if (IS_ERR(m[i])) {
			long err = PTR_ERR(m[i]);

			m[i] = NULL;
			src_instances_del(m, i);
			if (err == -ENOSPC) {
				pr_info(SRC_PFX "no room for %s \"%s\": instance skipped\n",
					src_descs[fams[i]].name, inst);
				perfabi_member_add(src_dropped[SRC_DROP_NO_ROOM], 1);
			} else {
				pr_warn(SRC_PFX "cannot add %s \"%s\": %ld\n",
					src_descs[fams[i]].name, inst, err);
			}
			return err;
		}
	}
	return 0;
}

/**
 * src_instances_del() - delete members src_instances_add() added
 * @m: their handles (NULL ones are skipped); cleared
 * @nr: how many
 *
 * Context: process context; may sleep.
 */
void src_instances_del(struct perfabi_member_handle **m, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		if (m[i])
			perfabi_instance_del(m[i]);
		m[i] = NULL;
	}
}

/**
 * src_instance_name() - make an instance string of a kernel name
 * @dst: SRC_INSTANCE_LEN bytes
 * @src: the name (NUL-terminated)
 *
 * Bytes other than printable ASCII, and space, '"' and '\\', become '_'
 * (README.md); at most 63 bytes are kept; an empty name becomes "_".
 */
void src_instance_name(char *dst, const char *src)
{
	size_t i;

	for (i = 0; i < SRC_INSTANCE_LEN - 1 && src[i]; i++) {
		char c = src[i];

		dst[i] = (c > ' ' && c < 0x7f && c != '"' && c != '\\') ? c : '_';
	}
	if (!i)
		dst[i++] = '_';
	dst[i] = '\0';
}

struct src_tp_find {
	struct src_tp *tps;
	unsigned int nr;
};

static void src_tp_match(struct tracepoint *tp, void *priv)
{
	struct src_tp_find *f = priv;
	unsigned int i;

	for (i = 0; i < f->nr; i++)
		if (!f->tps[i].tp && !strcmp(tp->name, f->tps[i].name))
			f->tps[i].tp = tp;
}

/**
 * src_tps_find() - find a subsystem's tracepoints by name
 * @tps: the tracepoints (names and probes; the tp fields are filled)
 * @nr: how many
 * @subsys: the subsystem's name, for the log line
 *
 * Return: 0 if all are there, else -ENOENT (one dmesg line).
 */
int src_tps_find(struct src_tp *tps, unsigned int nr, const char *subsys)
{
	struct src_tp_find f = { tps, nr };
	unsigned int i;

	for (i = 0; i < nr; i++)
		tps[i].tp = NULL;
	for_each_kernel_tracepoint(src_tp_match, &f);
	for (i = 0; i < nr; i++) {
		if (!tps[i].tp) {
			pr_info(SRC_PFX "%s source off: this kernel has no %s tracepoint\n",
				subsys, tps[i].name);
			return -ENOENT;
		}
	}
	return 0;
}

/**
 * src_tps_register() - attach a subsystem's probes (src_tps_find() first)
 * @tps: the tracepoints
 * @nr: how many
 * @data: the probes' first argument
 * @subsys: the subsystem's name, for the log line
 *
 * All or nothing: on an error, the probes attached are detached and
 * waited for, so the caller may free what they use.
 *
 * Context: process context; may sleep.
 * Return: 0 or the error (logged).
 */
int src_tps_register(struct src_tp *tps, unsigned int nr, void *data, const char *subsys)
{
	unsigned int i;
	int err;

	for (i = 0; i < nr; i++) {
		err = tracepoint_probe_register(tps[i].tp, tps[i].probe, data);
		if (err) {
			pr_warn(SRC_PFX "%s source off: cannot attach to %s: %d\n", subsys,
				tps[i].name, err);
			src_tps_unregister(tps, i, data);
			/*
			 * The probes attached until now may be running on
			 * other CPUs: the caller frees what they use next.
			 */
			tracepoint_synchronize_unregister();
			return err;
		}
	}
	return 0;
}

/**
 * src_tps_unregister() - detach probes src_tps_register() attached
 * @tps: the tracepoints
 * @nr: how many
 * @data: the probes' first argument, as registered
 *
 * The caller waits for running probes (tracepoint_synchronize_unregister())
 * before freeing anything they use.
 *
 * Context: process context; may sleep.
 */
void src_tps_unregister(struct src_tp *tps, unsigned int nr, void *data)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		tracepoint_probe_unregister(tps[i].tp, tps[i].probe, data);
}

/**
 * src_stamps_init() - allocate a timestamp table
 * @t: the table
 * @slots: its size, rounded up to a power of 2 (at least 64)
 * @stale_ns: age after which a slot may be taken over
 *
 * Context: process context; may sleep.
 * Return: 0 or -ENOMEM.
 */
int src_stamps_init(struct src_stamps *t, unsigned int slots, u64 stale_ns)
{
	t->bits = ilog2(roundup_pow_of_two(max(slots, 64U)));
	t->stale_ns = stale_ns;
	t->slot = kvcalloc(1UL << t->bits, sizeof(*t->slot), GFP_KERNEL);
	return t->slot ? 0 : -ENOMEM;
}

/**
 * src_stamps_free() - free a timestamp table (no probe may use it any more)
 * @t: the table
 */
void src_stamps_free(struct src_stamps *t)
{
	kvfree(t->slot);
	t->slot = NULL;
}

/* The scans of disks and IRQs: a delayed work, every scan_ms. */
static bool block_on, net_on, irq_on, sched_on;
static bool scanning;
static void src_scan(struct work_struct *w);
static DECLARE_DELAYED_WORK(scan_work, src_scan);

static void src_scan(struct work_struct *w)
{
	if (block_on)
		src_block_scan();
	if (irq_on)
		src_irq_scan();
	if (READ_ONCE(scanning))
		schedule_delayed_work(&scan_work, msecs_to_jiffies(scan_ms));
}

/**
 * src_report() - log one probe's measured cost against this_cpu_add()
 * @m: the measurement
 * @probe: the probe's name (the marker's key)
 * @ps: picoseconds per call
 */
void src_report(const struct src_measure *m, const char *probe, u64 ps)
{
	u64 r = m->base_ps ? div64_u64(ps * 100, m->base_ps) : 0;

	pr_info("PERFABI-MEASURE sources_%s_ps=%llu this_cpu_add_ps=%llu ratio=%llu.%02llu n=%u\n",
		probe, ps, m->base_ps, div_u64(r, 100), r % 100, m->n);
}

static DEFINE_PER_CPU(u64, measure_word);

static const struct perfabi_family_desc scratch_cnt_desc =
	COUNTER("perfabi_sources.scratch.count", "Probe cost measurement only", "x",
		PERFABI_UNIT_COUNT);
static const struct perfabi_family_desc scratch_hist_desc =
	HIST("perfabi_sources.scratch.time", "Probe cost measurement only", "x");

/*
 * Calls every probe N times on scratch instances (a family of their own,
 * deleted afterwards: no real counter is touched), through the same probe
 * functions the tracepoints call, with lookup tables that hold only the
 * scratch instance.
 */
static void src_measure(unsigned int n)
{
	struct perfabi_family_handle *fc, *fh;
	struct src_measure m = { .n = n };

	fc = perfabi_family_add(&scratch_cnt_desc);
	fh = perfabi_family_add(&scratch_hist_desc);
	if (IS_ERR(fc) || IS_ERR(fh)) {
		pr_warn(SRC_PFX "measure: no scratch families (%ld %ld)\n",
			IS_ERR(fc) ? PTR_ERR(fc) : 0, IS_ERR(fh) ? PTR_ERR(fh) : 0);
		goto out;
	}
	m.cnt = perfabi_instance_add(fc, "m", NULL, 0);
	m.hist = perfabi_instance_add(fh, "m", NULL, 0);
	if (IS_ERR(m.cnt) || IS_ERR(m.hist)) {
		pr_warn(SRC_PFX "measure: no scratch instances\n");
		goto out;
	}
	m.base_ps = SRC_TIME_PS(n, this_cpu_add(measure_word, __i));
	pr_info("PERFABI-MEASURE sources_this_cpu_add_ps=%llu n=%u\n", m.base_ps, n);
	/* The probes' clock, and the clocksource's, for comparison. */
	src_report(&m, "clock_local_clock", SRC_TIME_PS(n, this_cpu_add(measure_word, src_now())));
	src_report(&m, "clock_ktime_get_mono_fast_ns",
		   SRC_TIME_PS(n, this_cpu_add(measure_word, ktime_get_mono_fast_ns())));
	if (block_on)
		src_block_measure(&m);
	if (net_on)
		src_net_measure(&m);
	if (irq_on)
		src_irq_measure(&m);
	if (sched_on)
		src_sched_measure(&m);
out:
	if (!IS_ERR_OR_NULL(fc))
		perfabi_family_del(fc);
	if (!IS_ERR_OR_NULL(fh))
		perfabi_family_del(fh);
}

static void src_stop_probes(void)
{
	if (block_on)
		src_block_stop_probes();
	if (net_on)
		src_net_stop_probes();
	if (irq_on)
		src_irq_stop_probes();
	if (sched_on)
		src_sched_stop_probes();
	/* No probe runs, or will run, past this. */
	tracepoint_synchronize_unregister();
}

static void src_free(void)
{
	if (block_on)
		src_block_free();
	if (net_on)
		src_net_free();
	if (irq_on)
		src_irq_free();
	if (sched_on)
		src_sched_free();
	block_on = net_on = irq_on = sched_on = false;
	if (dropped_fam)
		perfabi_family_del(dropped_fam);
	dropped_fam = NULL;
}

static int __init src_init(void)
{
	unsigned int i;

	scan_ms = clamp(scan_ms, 100U, 1000U);
	dropped_fam = perfabi_family_add(&dropped_desc);
	if (IS_ERR(dropped_fam)) {
		pr_err(SRC_PFX "cannot add perfabi_sources.dropped: %ld\n", PTR_ERR(dropped_fam));
		return PTR_ERR(dropped_fam);
	}
	for (i = 0; i < SRC_NR_DROPS; i++) {
		src_dropped[i] = perfabi_instance_add(dropped_fam, drop_names[i], NULL, 0);
		/* A NULL handle is refused by perfabi_member_add(): a no-op. */
		if (IS_ERR(src_dropped[i]))
			src_dropped[i] = NULL;
	}
	block_on = block && !src_block_start();
	net_on = net && !src_net_start();
	irq_on = irq && !src_irq_start();
	sched_on = sched && !src_sched_start();
	pr_info(SRC_PFX "sources: block %s, net %s, irq %s, sched %s\n",
		block_on ? "on" : "off", net_on ? "on" : "off", irq_on ? "on" : "off",
		sched_on ? "on" : "off");
	/* Each loop runs with interrupts off: at most 10^6 calls of a probe. */
	if (measure)
		src_measure(min(measure, 1000000U));
	if (block_on || irq_on) {
		WRITE_ONCE(scanning, true);
		schedule_delayed_work(&scan_work, msecs_to_jiffies(scan_ms));
	}
	return 0;
}

static void __exit src_exit(void)
{
	WRITE_ONCE(scanning, false);
	cancel_delayed_work_sync(&scan_work);
	src_stop_probes();
	src_free();
}

module_init(src_init);
module_exit(src_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("perfabi kernel sources: disk, network, IRQ and scheduler families from tracepoints");
MODULE_SOFTDEP("pre: perfabi");
