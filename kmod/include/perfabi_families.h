/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * perfabi_families.h - the families the kernel-side writers publish
 * (README.md, "Families out of the box"): their indices, subsystems and
 * descriptors, for the kernel module and the eBPF programs alike.
 *
 * GENERATED from kmod/families/src/table.rs by
 * `cargo run -p perfabi-families -- --write`: do not edit. tests/run fails
 * when it is not current (perfabi-families --check).
 *
 * Plain C: an enum and macros, no type and nothing kernel-only. The
 * descriptors use perfabi.h's PERFABI_KIND_*, PERFABI_UNIT_* and
 * PERFABI_BUCKETS_*: include perfabi.h (spec/) before expanding them.
 */
#ifndef _PERFABI_FAMILIES_H
#define _PERFABI_FAMILIES_H

/* Histograms: log2 buckets of ns, bucket k up to 2^(10 + k), the last +Inf. */
#define PERFABI_FAM_HIST_BUCKETS	24
#define PERFABI_FAM_HIST_LOG2_FIRST	10

/* The writers: bits of PERFABI_FAMILIES()'s @writers. */
#define PERFABI_FAM_BY_MODULE	0x1	/* perfabi_sources.ko */
#define PERFABI_FAM_BY_BPF	0x2	/* the eBPF writer */
#define PERFABI_FAM_BY_EXPORTD	0x4	/* perfabi-exportd, from /proc */

/* The families' indices, each subsystem's consecutive. */
enum perfabi_fam {
	PERFABI_FAM_DISK_READ,	/* disk.dev.read */
	PERFABI_FAM_DISK_WRITE,	/* disk.dev.write */
	PERFABI_FAM_DISK_DISCARD,	/* disk.dev.discard */
	PERFABI_FAM_DISK_FLUSH,	/* disk.dev.flush */
	PERFABI_FAM_DISK_READ_BYTES,	/* disk.dev.read_bytes */
	PERFABI_FAM_DISK_WRITE_BYTES,	/* disk.dev.write_bytes */
	PERFABI_FAM_DISK_DISCARD_BYTES,	/* disk.dev.discard_bytes */
	PERFABI_FAM_DISK_LATENCY,	/* disk.dev.request_latency */
	PERFABI_FAM_NET_IN_PACKETS,	/* network.interface.in.packets */
	PERFABI_FAM_NET_IN_BYTES,	/* network.interface.in.bytes */
	PERFABI_FAM_NET_OUT_PACKETS,	/* network.interface.out.packets */
	PERFABI_FAM_NET_OUT_BYTES,	/* network.interface.out.bytes */
	PERFABI_FAM_IRQ_COUNT,	/* kernel.interrupts.count */
	PERFABI_FAM_IRQ_TIME,	/* kernel.interrupts.handler_time */
	PERFABI_FAM_SCHED_PSWITCH,	/* kernel.all.pswitch */
	PERFABI_FAM_SCHED_WAKEUPS,	/* kernel.sched.wakeups */
	PERFABI_FAM_SCHED_MIGRATIONS,	/* kernel.sched.migrations */
	PERFABI_FAM_SCHED_LATENCY,	/* kernel.sched.wakeup_latency */
	PERFABI_FAM_MAX	/* non-ABI: the number of families */
};

/* Each subsystem's first and last family (inclusive). */
#define PERFABI_FAM_BLOCK_FIRST	PERFABI_FAM_DISK_READ
#define PERFABI_FAM_BLOCK_LAST	PERFABI_FAM_DISK_LATENCY
#define PERFABI_FAM_NET_FIRST	PERFABI_FAM_NET_IN_PACKETS
#define PERFABI_FAM_NET_LAST	PERFABI_FAM_NET_OUT_BYTES
#define PERFABI_FAM_IRQ_FIRST	PERFABI_FAM_IRQ_COUNT
#define PERFABI_FAM_IRQ_LAST	PERFABI_FAM_IRQ_TIME
#define PERFABI_FAM_SCHED_FIRST	PERFABI_FAM_SCHED_PSWITCH
#define PERFABI_FAM_SCHED_LAST	PERFABI_FAM_SCHED_LATENCY

/*
 * An instance's run of value words, for a writer that keeps one run per
 * instance (the eBPF writer): its subsystem's families in index order, each
 * family's words consecutive (a counter 1, a histogram 2 + its buckets).
 * PERFABI_FAM_<id>_AT is where family id's words start in the run,
 * PERFABI_FAM_<subsystem>_WORDS the run's length.
 */
#define PERFABI_FAM_DISK_READ_AT	0
#define PERFABI_FAM_DISK_WRITE_AT	1
#define PERFABI_FAM_DISK_DISCARD_AT	2
#define PERFABI_FAM_DISK_FLUSH_AT	3
#define PERFABI_FAM_DISK_READ_BYTES_AT	4
#define PERFABI_FAM_DISK_WRITE_BYTES_AT	5
#define PERFABI_FAM_DISK_DISCARD_BYTES_AT	6
#define PERFABI_FAM_DISK_LATENCY_AT	7
#define PERFABI_FAM_NET_IN_PACKETS_AT	0
#define PERFABI_FAM_NET_IN_BYTES_AT	1
#define PERFABI_FAM_NET_OUT_PACKETS_AT	2
#define PERFABI_FAM_NET_OUT_BYTES_AT	3
#define PERFABI_FAM_IRQ_COUNT_AT	0
#define PERFABI_FAM_IRQ_TIME_AT	1
#define PERFABI_FAM_SCHED_PSWITCH_AT	0
#define PERFABI_FAM_SCHED_WAKEUPS_AT	1
#define PERFABI_FAM_SCHED_MIGRATIONS_AT	2
#define PERFABI_FAM_SCHED_LATENCY_AT	3
#define PERFABI_FAM_BLOCK_WORDS	33
#define PERFABI_FAM_NET_WORDS	4
#define PERFABI_FAM_IRQ_WORDS	27
#define PERFABI_FAM_SCHED_WORDS	29

/*
 * PERFABI_FAMILIES(X) calls X(id, name, help, dimension, kind, unit,
 * bucket_layout, nr_buckets, log2_first, writers) once per family, in
 * index order:
 *	id: the index's suffix (PERFABI_FAM_##id)
 *	name, help: string literals
 *	dimension: a string literal, "" for a family of one instance
 *	kind, unit: PERFABI_KIND_*, PERFABI_UNIT_*
 *	bucket_layout, nr_buckets, log2_first: a histogram's
 *		(PERFABI_BUCKETS_LOG2), else PERFABI_BUCKETS_NONE, 0, 0
 *	writers: PERFABI_FAM_BY_* bits
 */
#define PERFABI_FAMILIES(X) \
	X(DISK_READ, "disk.dev.read", "Reads completed", "device", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(DISK_WRITE, "disk.dev.write", "Writes completed", "device", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(DISK_DISCARD, "disk.dev.discard", "Discards completed", "device", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(DISK_FLUSH, "disk.dev.flush", "Flush requests completed", "device", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(DISK_READ_BYTES, "disk.dev.read_bytes", "Bytes read", "device", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_BYTES, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(DISK_WRITE_BYTES, "disk.dev.write_bytes", "Bytes written", "device", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_BYTES, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(DISK_DISCARD_BYTES, "disk.dev.discard_bytes", "Bytes discarded", "device", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_BYTES, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(DISK_LATENCY, "disk.dev.request_latency", "Request time from issue to the driver to completion", "device", \
	  PERFABI_KIND_HISTOGRAM, PERFABI_UNIT_NS, PERFABI_BUCKETS_LOG2, 24, 10, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF) \
	X(NET_IN_PACKETS, "network.interface.in.packets", "Packets received", "interface", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(NET_IN_BYTES, "network.interface.in.bytes", "Bytes received, link-layer header included", "interface", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_BYTES, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(NET_OUT_PACKETS, "network.interface.out.packets", "Packets transmitted", "interface", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(NET_OUT_BYTES, "network.interface.out.bytes", "Bytes transmitted", "interface", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_BYTES, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(IRQ_COUNT, "kernel.interrupts.count", "Interrupts, per IRQ (its first action's handler runs)", "irq", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(IRQ_TIME, "kernel.interrupts.handler_time", "Time in each action's hard IRQ handler", "irq", \
	  PERFABI_KIND_HISTOGRAM, PERFABI_UNIT_NS, PERFABI_BUCKETS_LOG2, 24, 10, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF) \
	X(SCHED_PSWITCH, "kernel.all.pswitch", "Context switches", "", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF | PERFABI_FAM_BY_EXPORTD) \
	X(SCHED_WAKEUPS, "kernel.sched.wakeups", "Task wakeups, new tasks included", "", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF) \
	X(SCHED_MIGRATIONS, "kernel.sched.migrations", "Task migrations between CPUs", "", \
	  PERFABI_KIND_COUNTER, PERFABI_UNIT_COUNT, PERFABI_BUCKETS_NONE, 0, 0, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF) \
	X(SCHED_LATENCY, "kernel.sched.wakeup_latency", "Time from a task's wakeup to its switch onto a CPU", "", \
	  PERFABI_KIND_HISTOGRAM, PERFABI_UNIT_NS, PERFABI_BUCKETS_LOG2, 24, 10, \
	  PERFABI_FAM_BY_MODULE | PERFABI_FAM_BY_BPF)

#endif /* _PERFABI_FAMILIES_H */
