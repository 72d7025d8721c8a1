/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * perfabi.h - C view of the perfabi ABI, version 1.0.
 *
 * The normative text is spec/PERFABI.md; this header and the Rust crate
 * `perfabi` (perfabi/src/layout.rs) describe the same bytes, and the test
 * perfabi/tests/c_layout.rs checks every field offset and struct size.
 *
 * A segment is:
 *
 *   offset 0                 header page: struct perfabi_header
 *   instances_offset         instance table: max_instances x struct perfabi_instance
 *   cpu_area_offset          nr_cpus per-CPU blocks, cpu_block_size apart, each:
 *     +0                       struct perfabi_cpu_head (seq alone on its cache line)
 *     +counters_offset         max_instances x __u64 values (slot i = instance i)
 *     +damon_offset            damon_capacity x struct perfabi_damon_record (a ring)
 *
 * All fields are in the writer's native byte order. Every field that changes
 * while the segment lives is an aligned 8-byte word and is only read and
 * written whole (READ_ONCE/WRITE_ONCE in C, atomic loads/stores in Rust).
 *
 * Reading one CPU's block consistently (multi-word records, counter groups):
 *
 *	for (tries = 0; tries < MAX_TRIES; tries++) {
 *		s1 = READ_ONCE(head->seq);
 *		smp_rmb();			// fence(Acquire)
 *		if (s1 & 1)
 *			continue;		// update in progress (or writer died)
 *		copy the words you need with READ_ONCE;
 *		smp_rmb();			// fence(Acquire)
 *		if (READ_ONCE(head->seq) == s1)
 *			return OK;		// the copy is consistent
 *	}
 *	return BUSY;				// never spin forever
 *
 * Reading metadata consistently (names with the values laid out for them):
 *
 *	for (tries = 0; tries < MAX_TRIES; tries++) {
 *		g2 = READ_ONCE(hdr->gen2);	// gen2 FIRST
 *		smp_rmb();
 *		copy instance entries (and values);
 *		smp_rmb();
 *		if (READ_ONCE(hdr->gen1) == g2)	// gen1 LAST
 *			return OK;
 *	}
 *	return BUSY;
 *
 * Writer side, per-CPU (with preemption disabled, or in an rseq section):
 *
 *	single counter:   WRITE_ONCE(val[i], val[i] + delta);   // no seq change
 *	multi-word:       s = head->seq; WRITE_ONCE(head->seq, s + 1); smp_wmb();
 *	                  write the words; smp_wmb(); WRITE_ONCE(head->seq, s + 2);
 *
 * Writer side, metadata (one writer at a time, under a mutex):
 *
 *	g = hdr->gen1 + 1; WRITE_ONCE(hdr->gen1, g); smp_wmb();
 *	change entries, zero a reused slot on every CPU, instances_used;
 *	smp_wmb(); WRITE_ONCE(hdr->gen2, g);
 */
#ifndef _PERFABI_H
#define _PERFABI_H

#include <linux/types.h>

#define PERFABI_MAGIC		"PERFABI"	/* 8 bytes with the NUL */
#define PERFABI_ABI_MAJOR	1
#define PERFABI_ABI_MINOR	0
#define PERFABI_BYTE_ORDER_MARK	0x01020304u
#define PERFABI_CACHE_LINE	64

#define PERFABI_NAME_LEN	64	/* at most 63 bytes + NUL */
#define PERFABI_UNIT_LEN	16	/* at most 15 bytes + NUL */

#define PERFABI_MIN_PAGE_SIZE	4096u
#define PERFABI_MAX_PAGE_SIZE	65536u
#define PERFABI_MAX_CPUS	8192u
#define PERFABI_MAX_INSTANCES	65536u
#define PERFABI_MAX_DAMON_CAPACITY (1u << 20)

/* header.flags */
#define PERFABI_FLAG_CLOSED	(1ull << 0)	/* writer closed the segment cleanly */
#define PERFABI_FLAG_KERNEL	(1ull << 1)	/* writer is the kernel module; readers
						 * believe it only from the module's
						 * root-owned device (PERFABI.md 11.3) */

/* perfabi_instance.state */
#define PERFABI_SLOT_FREE	0
#define PERFABI_SLOT_LIVE	1

/* perfabi_instance.semantics */
#define PERFABI_COUNTER		1	/* monotonic count */
#define PERFABI_INSTANT		2	/* level: sum of per-CPU contributions */

/* perfabi_instance.value_type */
#define PERFABI_TYPE_U64	1
#define PERFABI_TYPE_I64	2

/* At offset 0 of the header page. 192 bytes in ABI 1.0. */
struct perfabi_header {
	__u8  magic[8];			/* "PERFABI\0" */
	__u16 abi_major;		/* PERFABI_ABI_MAJOR; other majors: refuse */
	__u16 abi_minor;		/* newer minor: accept, ignore appended fields */
	__u32 header_size;		/* bytes of header written, >= 192, <= page_size */
	__u32 byte_order;		/* PERFABI_BYTE_ORDER_MARK, native order */
	__u32 page_size;		/* power of two, 4096..65536 */
	__u32 nr_cpus;			/* 1..PERFABI_MAX_CPUS */
	__u32 pages_per_cpu;		/* cpu_block_size / page_size */
	__u32 max_instances;		/* instance table capacity */
	__u32 damon_capacity;		/* DAMON ring slots per CPU */
	__u32 instance_entry_size;	/* 128 */
	__u32 damon_record_size;	/* 64 */
	__u32 counters_offset;		/* in a CPU block; >= 128, 64-aligned */
	__u32 damon_offset;		/* in a CPU block; after the counters, 64-aligned */
	__u64 segment_size;		/* total bytes */
	__u64 instances_offset;		/* page aligned, >= page_size */
	__u64 instances_size;		/* whole pages, >= max_instances * 128 */
	__u64 cpu_area_offset;		/* page aligned, after the instance table */
	__u64 cpu_block_size;		/* pages_per_cpu * page_size */
	__u64 epoch;			/* random, non-zero, new per incarnation */
	__u64 writer_pid;		/* 0 for the kernel module */
	__u64 writer_start_ns;		/* CLOCK_BOOTTIME when the writer process started (module: loaded) */
	__u64 heartbeat_interval_ns;	/* promised refresh period, 0 = none */
	/* The words below change while the segment lives. */
	__u64 gen1;			/* incremented BEFORE a metadata change */
	__u64 gen2;			/* incremented AFTER a metadata change */
	__u64 heartbeat_ns;		/* CLOCK_BOOTTIME of the last heartbeat */
	__u64 flags;			/* PERFABI_FLAG_* */
	__u64 instances_used;		/* slots [0, instances_used) may be live */
	__u64 reserved[3];		/* zero */
};

/* One slot of the instance table. 128 bytes. */
struct perfabi_instance {
	char  name[PERFABI_NAME_LEN];	/* dot-separated [A-Za-z_][A-Za-z0-9_]*, first a letter; clash keys unique (§5) */
	char  unit[PERFABI_UNIT_LEN];	/* printable ASCII, no spaces, NUL padded */
	__u64 reg_id;			/* unique per epoch, never reused; 0 = never used */
	__u32 state;			/* PERFABI_SLOT_* */
	__u32 semantics;		/* PERFABI_COUNTER / PERFABI_INSTANT */
	__u32 value_type;		/* PERFABI_TYPE_* */
	__u32 reserved0;		/* zero */
	__u64 reserved[3];		/* zero */
};

/* The first 128 bytes of every per-CPU block. */
struct perfabi_cpu_head {
	__u64 seq;			/* odd while a multi-word update is in progress */
	__u64 seq_pad[7];		/* keeps seq alone on its cache line */
	__u64 damon_next;		/* ring slot the writer fills next (informative) */
	__u64 damon_dropped;		/* region records this CPU could not store */
	__u64 reserved[6];		/* zero */
};

/* One DAMON region; a ring slot with aggregation == 0 is empty. 64 bytes. */
struct perfabi_damon_record {
	__u64 monitor_id;		/* kdamond thread id, or writer chosen */
	__u64 target_id;		/* DAMON target id */
	__u64 aggregation;		/* 1, 2, 3... per (monitor, target) */
	__u32 region_index;		/* 0..nr_regions-1 */
	__u32 nr_regions;		/* regions in this aggregation */
	__u64 start;			/* first address */
	__u64 end;			/* one past the last address */
	__u32 nr_accesses;		/* samples that saw an access */
	__u32 age;			/* aggregation intervals without change */
	__u32 sample_us;		/* sampling interval */
	__u32 aggr_us;			/* aggregation interval */
};

_Static_assert(sizeof(struct perfabi_header) == 192, "perfabi_header size");
_Static_assert(sizeof(struct perfabi_instance) == 128, "perfabi_instance size");
_Static_assert(sizeof(struct perfabi_cpu_head) == 128, "perfabi_cpu_head size");
_Static_assert(sizeof(struct perfabi_damon_record) == 64, "perfabi_damon_record size");

#endif /* _PERFABI_H */
