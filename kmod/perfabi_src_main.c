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

static DEFINE_PER_CPU(u64, measure_word);

static const struct perfabi_family_desc scratch_cnt_desc =
	SRC_COUNTER("perfabi_sources.scratch.count", "Probe cost measurement only", "x",
		    PERFABI_UNIT_COUNT);
static const struct perfabi_family_desc scratch_hist_desc =
	SRC_HIST("perfabi_sources.scratch.time", "Probe cost measurement only", "x");

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
	src_dropped_del();
}

static int __init src_init(void)
{
	int err;

	scan_ms = clamp(scan_ms, 100U, 1000U);
	err = src_dropped_add();
	if (err)
		return err;
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
