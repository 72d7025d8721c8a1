/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * perfabi.h - C view of the perfabi ABI, versions 1.0 and 1.1.
 *
 * The normative text is spec/PERFABI.md; this header and the Rust crate
 * `perfabi` (perfabi/src/layout.rs) describe the same bytes, and the test
 * perfabi/tests/c_layout.rs checks every field offset and struct size, every
 * constant, and the placement, header and address helpers at the end of this
 * file against their Rust twins over a grid of geometries.
 *
 * A segment is:
 *
 *   offset 0                 header page: struct perfabi_header
 *   instances_offset         instance table: max_instances x struct perfabi_instance
 *   cpu_area_offset          nr_cpus per-CPU blocks, cpu_block_size apart, each:
 *     +0                       struct perfabi_cpu_head (seq alone on its cache line)
 *     +counters_offset         max_instances x __u64 values (slot i = instance i)
 *     +damon_offset            damon_capacity x struct perfabi_damon_record (a ring)
 *   families_offset          ABI 1.1 only: max_families x struct perfabi_family
 *   members_offset           ABI 1.1 only: max_members x struct perfabi_member
 *
 * ABI 1.1 (metric families) appends struct perfabi_family_header to the
 * header (at byte 192; abi_minor 1, header_size 256) and puts the family and
 * member tables after the per-CPU area, where a 1.0 reader does not look. A
 * member's values are value_slot .. value_slot + words - 1 of every CPU's
 * counter array (slots whose 1.0 instance entries are FREE): one word, or
 * for a histogram count, sum and one word per bucket. A writer without
 * families writes a 1.0 segment, byte for byte as before.
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
 * Writer side, per-CPU (with preemption disabled, or in an rseq section;
 * in the kernel perfabi_seq_write_begin() and perfabi_seq_write_end() below;
 * a histogram observation is one multi-word update of count, sum, bucket;
 * a peak only ever stores a larger observation, in one word):
 *
 *	single counter:   WRITE_ONCE(val[i], val[i] + delta);   // no seq change
 *	multi-word:       s = head->seq; WRITE_ONCE(head->seq, s + 1); smp_wmb();
 *	                  write the words; smp_wmb(); WRITE_ONCE(head->seq, s + 2);
 *
 * Writer side, metadata (one writer at a time, under a mutex; in the kernel
 * perfabi_gen_write_begin() and perfabi_gen_write_end() below):
 *
 *	g = hdr->gen1 + 1; WRITE_ONCE(hdr->gen1, g); smp_wmb();
 *	change entries, zero a reused slot on every CPU, instances_used;
 *	smp_wmb(); WRITE_ONCE(hdr->gen2, g);
 */
#ifndef _PERFABI_H
#define _PERFABI_H

/*
 * Kernel and userspace C include this header alike: it needs only the
 * fixed-width types of <linux/types.h> (the uapi header in userspace), no
 * libc. The writer's protocol steps at the end use the kernel's WRITE_ONCE()
 * and smp_wmb() and exist only under __KERNEL__.
 */
#include <linux/types.h>
#ifdef __KERNEL__
#include <linux/compiler.h>		/* WRITE_ONCE() */
#include <asm/barrier.h>		/* smp_wmb() */
#endif

#define PERFABI_MAGIC		"PERFABI"	/* 8 bytes with the NUL */
#define PERFABI_ABI_MAJOR	1
#define PERFABI_ABI_MINOR	1	/* newest minor described here (1.1: families); a
					 * segment without family tables is written as minor 0 */
#define PERFABI_BYTE_ORDER_MARK	0x01020304u
#define PERFABI_CACHE_LINE	64

#define PERFABI_HEADER_SIZE_V1_0	192	/* struct perfabi_header */
#define PERFABI_HEADER_SIZE_V1_1	256	/* ... + struct perfabi_family_header */

#define PERFABI_NAME_LEN	64	/* at most 63 bytes + NUL */
#define PERFABI_UNIT_LEN	16	/* at most 15 bytes + NUL */

/* ABI 1.1: metric families (PERFABI.md 5.1-5.4) */
#define PERFABI_HELP_LEN	128	/* family help: at most 127 bytes + NUL */
#define PERFABI_DIMENSION_LEN	32	/* family dimension (a label key): at most 31 + NUL */
#define PERFABI_INSTANCE_LEN	64	/* member instance string: at most 63 + NUL */
#define PERFABI_MAX_LABELS	4	/* extra labels of a member */
#define PERFABI_LABEL_KEY_LEN	16	/* label key: at most 15 bytes + NUL */
#define PERFABI_LABEL_VALUE_LEN	48	/* label value: at most 47 bytes + NUL */
#define PERFABI_MIN_BUCKETS	2u	/* a histogram: one finite bound and +Inf */
#define PERFABI_MAX_BUCKETS	32u	/* a histogram's buckets, +Inf included */
#define PERFABI_MAX_FAMILIES	65536u	/* family table capacity limit */
#define PERFABI_MAX_MEMBERS	65536u	/* member table capacity limit */

/* perfabi_family.kind (1 and 2 are what 1.0 entries' semantics read as) */
#define PERFABI_KIND_COUNTER	1	/* monotonic count; total = sum over CPUs */
#define PERFABI_KIND_GAUGE	2	/* a level; total = sum of per-CPU contributions */
#define PERFABI_KIND_PEAK	3	/* high-water mark per CPU; total = max over CPUs */
#define PERFABI_KIND_HISTOGRAM	4	/* count, sum, buckets per CPU (U64 only) */

/* perfabi_family.bucket_layout */
#define PERFABI_BUCKETS_NONE	 0	/* not a histogram */
#define PERFABI_BUCKETS_LOG2	 1	/* bound k = 2^(log2_first + k) */
#define PERFABI_BUCKETS_EXPLICIT 2	/* bounds[0 .. nr_buckets - 2], strictly increasing */

/* perfabi_family.bucket_layout of a GAUGE is its gauge_mode (spec 15.4):
 * how its values merge across the writers of a segment directory */
#define PERFABI_GAUGE_SUM	0	/* sum of the live writers' values (default) */
#define PERFABI_GAUGE_MAX	1	/* the largest live writer's value */
#define PERFABI_GAUGE_MIN	2	/* the smallest live writer's value */
#define PERFABI_GAUGE_ALL	3	/* not merged: one series per live writer */

/* perfabi_unit.quantity */
#define PERFABI_QUANTITY_PLAIN	0	/* a plain value of the unit's dimensions */
#define PERFABI_QUANTITY_PAGES	1	/* a count of memory pages (dim_count 1, nothing else) */
#define PERFABI_QUANTITY_RATIO	2	/* a dimensionless fraction, 1 = all (no dimensions) */

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
#define PERFABI_FLAG_LIVE_LOCK	(1ull << 2)	/* writer holds an OFD write lock on
						 * bytes 0..8 of its file while it
						 * lives: no lock, no writer
						 * (PERFABI.md 10) */

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

/*
 * ABI 1.1: at byte 192 of the header (header_size >= 256, abi_minor >= 1).
 * 64 bytes. The tables sit after the per-CPU area (PERFABI.md 4.1).
 */
struct perfabi_family_header {
	__u64 families_offset;		/* page aligned, >= the per-CPU area's end */
	__u64 families_size;		/* whole pages, >= max_families * 512 */
	__u64 members_offset;		/* page aligned, >= families_offset + families_size */
	__u64 members_size;		/* whole pages, >= max_members * 384 */
	__u32 max_families;		/* 0..PERFABI_MAX_FAMILIES; 0 (with max_members 0): no tables */
	__u32 max_members;		/* 0..PERFABI_MAX_MEMBERS; 0 if max_families is 0 */
	__u32 family_entry_size;	/* 512 */
	__u32 member_entry_size;	/* 384 */
	/* The words below change while the segment lives, under gen1/gen2. */
	__u64 families_used;		/* family slots [0, families_used) may be live */
	__u64 members_used;		/* member slots [0, members_used) may be live */
};

/*
 * A unit, after PCP's pmUnits (PERFABI.md 5.2). 8 bytes. A scale is 0 when
 * its dimension is 0. Initialise with PERFABI_UNIT() or PERFABI_UNIT_*.
 */
struct perfabi_unit {
	__s8  dim_space;		/* power of space (bytes), -3..3 */
	__s8  dim_time;			/* power of time, -3..3 */
	__s8  dim_count;		/* power of count, -3..3 */
	__u8  scale_space;		/* 0 byte, 1 KiB, 2 MiB, 3 GiB, 4 TiB, 5 PiB, 6 EiB */
	__u8  scale_time;		/* 0 ns, 1 us, 2 ms, 3 s, 4 min, 5 h */
	__s8  scale_count;		/* a power of ten, -8..7 */
	__u8  quantity;			/* PERFABI_QUANTITY_* */
	__u8  reserved;			/* zero */
};

/* A unit's initializer: dimensions, scales, quantity (reserved 0). */
#define PERFABI_UNIT(ds, dt, dc, ss, st, sc, q) { (ds), (dt), (dc), (ss), (st), (sc), (q), 0 }
/* The units perfabi::Unit names (perfabi/src/unit.rs). */
#define PERFABI_UNIT_NONE	PERFABI_UNIT(0, 0, 0, 0, 0, 0, PERFABI_QUANTITY_PLAIN)
#define PERFABI_UNIT_BYTES	PERFABI_UNIT(1, 0, 0, 0, 0, 0, PERFABI_QUANTITY_PLAIN)
#define PERFABI_UNIT_KIB	PERFABI_UNIT(1, 0, 0, 1, 0, 0, PERFABI_QUANTITY_PLAIN)
#define PERFABI_UNIT_NS		PERFABI_UNIT(0, 1, 0, 0, 0, 0, PERFABI_QUANTITY_PLAIN)
#define PERFABI_UNIT_US		PERFABI_UNIT(0, 1, 0, 0, 1, 0, PERFABI_QUANTITY_PLAIN)
#define PERFABI_UNIT_MS		PERFABI_UNIT(0, 1, 0, 0, 2, 0, PERFABI_QUANTITY_PLAIN)
#define PERFABI_UNIT_SECONDS	PERFABI_UNIT(0, 1, 0, 0, 3, 0, PERFABI_QUANTITY_PLAIN)
#define PERFABI_UNIT_COUNT	PERFABI_UNIT(0, 0, 1, 0, 0, 0, PERFABI_QUANTITY_PLAIN)
#define PERFABI_UNIT_PAGES	PERFABI_UNIT(0, 0, 1, 0, 0, 0, PERFABI_QUANTITY_PAGES)
#define PERFABI_UNIT_RATIO	PERFABI_UNIT(0, 0, 0, 0, 0, 0, PERFABI_QUANTITY_RATIO)
#define PERFABI_UNIT_BYTES_PER_SECOND PERFABI_UNIT(1, -1, 0, 0, 3, 0, PERFABI_QUANTITY_PLAIN)

/* One slot of the family table (ABI 1.1). 512 bytes. */
struct perfabi_family {
	char  name[PERFABI_NAME_LEN];	/* the naming rule of 1.0 names; clash keys unique among
					 * live entries and families, and no live family name a
					 * dotted prefix of another live name (5.1) */
	char  help[PERFABI_HELP_LEN];	/* one line: printable ASCII (spaces allowed), NUL padded */
	char  dimension[PERFABI_DIMENSION_LEN]; /* [a-z][a-z0-9_]*, not "cpu"/"le"; empty:
					 * one instance, whose instance string is empty */
	__u64 reg_id;			/* non-zero, unique among families, never reused */
	__u32 state;			/* PERFABI_SLOT_* */
	__u32 kind;			/* PERFABI_KIND_* */
	struct perfabi_unit unit;	/* the values' unit */
	__u32 value_type;		/* PERFABI_TYPE_*; a histogram: PERFABI_TYPE_U64 */
	__u32 nr_buckets;		/* histogram: 2..32, +Inf included; else 0 */
	__u32 bucket_layout;		/* PERFABI_BUCKETS_*; a gauge's PERFABI_GAUGE_*; else 0 */
	__u32 log2_first;		/* LOG2: first bound's exponent, log2_first + nr_buckets - 2
					 * <= 63; else 0 */
	__u64 bounds[PERFABI_MAX_BUCKETS - 1]; /* EXPLICIT: nr_buckets - 1 finite inclusive upper
					 * bounds, strictly increasing; every other word 0 */
};

/* One key=value label of a member. 64 bytes; unused: all zero. */
struct perfabi_label {
	char  key[PERFABI_LABEL_KEY_LEN];	/* [a-z][a-z0-9_]*, not "cpu"/"le", nor the
						 * family's dimension; NUL padded */
	char  value[PERFABI_LABEL_VALUE_LEN];	/* 1..47 printable ASCII (spaces allowed), no '"'
						 * or backslash; NUL padded */
};

/* One slot of the member table (ABI 1.1): an instance of a family. 384 bytes. */
struct perfabi_member {
	char  instance[PERFABI_INSTANCE_LEN]; /* printable ASCII, no space, '"', backslash; unique in
					 * its family; empty iff the family's dimension is */
	__u64 reg_id;			/* non-zero, unique among members, never reused */
	__u32 state;			/* PERFABI_SLOT_* */
	__u32 family;			/* slot of its (live) family in the family table */
	__u32 value_slot;		/* first of its words in every CPU's counter array; the
					 * words [value_slot, value_slot + words) lie below
					 * instances_used and belong to no other live entry */
	__u32 instance_id;		/* instance number: stable for one instance string in its
					 * family, a returning string gets its old number back */
	__u64 reserved0;		/* zero */
	struct perfabi_label labels[PERFABI_MAX_LABELS]; /* used ones first, keys distinct */
	__u64 reserved[4];		/* zero */
};

_Static_assert(sizeof(struct perfabi_header) == 192, "perfabi_header size");
_Static_assert(sizeof(struct perfabi_instance) == 128, "perfabi_instance size");
_Static_assert(sizeof(struct perfabi_cpu_head) == 128, "perfabi_cpu_head size");
_Static_assert(sizeof(struct perfabi_damon_record) == 64, "perfabi_damon_record size");
_Static_assert(sizeof(struct perfabi_family_header) == 64, "perfabi_family_header size");
_Static_assert(sizeof(struct perfabi_unit) == 8, "perfabi_unit size");
_Static_assert(sizeof(struct perfabi_family) == 512, "perfabi_family size");
_Static_assert(sizeof(struct perfabi_label) == 64, "perfabi_label size");
_Static_assert(sizeof(struct perfabi_member) == 384, "perfabi_member size");

/*
 * The canonical placement (PERFABI.md section 3): the one layout every
 * writer uses, computed here once for C (the kernel module's layout() and
 * header_init() call these functions) and checked against its Rust twin
 * perfabi::Geometry::sizes() and perfabi::Geometry::header() by
 * perfabi/tests/c_layout.rs. With max_families and max_members both 0 it is
 * ABI 1.0's; otherwise the family and member tables follow the per-CPU
 * area (ABI 1.1). Readers MUST NOT assume it: they use the header's own
 * values once validated (section 8).
 */

/**
 * struct perfabi_geometry - a segment's canonical placement (not ABI: never in a segment)
 * @page_size: page size, a power of two in PERFABI_MIN_PAGE_SIZE..PERFABI_MAX_PAGE_SIZE
 * @nr_cpus: per-CPU blocks, 1..PERFABI_MAX_CPUS
 * @max_instances: instance table capacity, 1..PERFABI_MAX_INSTANCES
 * @damon_capacity: DAMON ring slots per CPU, 0..PERFABI_MAX_DAMON_CAPACITY
 * @max_families: family table capacity, 0..PERFABI_MAX_FAMILIES; 0 with
 *	@max_members 0: no family tables (ABI 1.0)
 * @max_members: member table capacity, 0..PERFABI_MAX_MEMBERS; 0 if @max_families is
 * @pages_per_cpu: pages in one per-CPU block, cpu_block_size / page_size
 * @counters_offset: counter array in a block: sizeof(struct perfabi_cpu_head)
 * @damon_offset: DAMON ring in a block: the counters' end rounded up to a cache line
 * @instances_offset: instance table in the segment: page_size (after the header page)
 * @instances_size: instance table bytes: max_instances entries in whole pages
 * @cpu_area_offset: CPU 0's block: instances_offset + instances_size
 * @cpu_block_size: bytes of one block: the DAMON ring's end in whole pages
 * @segment_size: bytes of the segment: the per-CPU area's end, or with family
 *	tables members_offset + members_size
 * @families_offset: family table: the per-CPU area's end (0 without tables)
 * @families_size: family table bytes: max_families entries in whole pages
 * @members_offset: member table: families_offset + families_size
 * @members_size: member table bytes: max_members entries in whole pages
 *
 * The first six fields are what a writer chooses (perfabi::Geometry); the
 * others are derived by perfabi_geometry_init() (perfabi::Sizes, its
 * families being the last four), and named as the header fields they are
 * written to.
 */
struct perfabi_geometry {
	__u32 page_size;
	__u32 nr_cpus;
	__u32 max_instances;
	__u32 damon_capacity;
	__u32 max_families;
	__u32 max_members;
	__u32 pages_per_cpu;
	__u32 counters_offset;
	__u32 damon_offset;
	__u64 instances_offset;
	__u64 instances_size;
	__u64 cpu_area_offset;
	__u64 cpu_block_size;
	__u64 segment_size;
	__u64 families_offset;
	__u64 families_size;
	__u64 members_offset;
	__u64 members_size;
};

/*
 * Results of perfabi_geometry_init(), in the order it checks; each names the
 * perfabi::Error code that perfabi::Geometry::sizes() returns for it.
 */
enum perfabi_geometry_status {
	PERFABI_GEOMETRY_OK = 0,
	PERFABI_GEOMETRY_BAD_PAGE_SIZE,	/* "bad-page-size" */
	PERFABI_GEOMETRY_BAD_CPU_COUNT,	/* "bad-cpu-count" */
	PERFABI_GEOMETRY_BAD_CAPACITY,	/* "bad-capacity" (max_instances, damon_capacity,
					 * max_families or max_members) */
	PERFABI_GEOMETRY_STATUS_MAX	/* non-ABI sentinel */
};

/*
 * Within the limits every size is below 2^41 bytes (the largest segment,
 * 8192 CPUs x 65536 instances x 2^20 DAMON slots, with the largest family
 * tables 56 MiB more, is under 517 GiB) and a block below 2^27, so no step
 * of perfabi_geometry_init() overflows and every derived 32-bit field fits:
 * the "bad-config" (overflow) results of the Rust twin cannot happen, and
 * the C has none.
 */
_Static_assert((__u64)PERFABI_MAX_CPUS *
	       (128ull + 8ull * PERFABI_MAX_INSTANCES + 64ull * PERFABI_MAX_DAMON_CAPACITY +
		PERFABI_MAX_PAGE_SIZE) + 4ull * PERFABI_MAX_PAGE_SIZE +
	       128ull * PERFABI_MAX_INSTANCES +
	       (__u64)PERFABI_MAX_FAMILIES * sizeof(struct perfabi_family) +
	       (__u64)PERFABI_MAX_MEMBERS * sizeof(struct perfabi_member) < (1ull << 41),
	       "perfabi geometry fits 41 bits");

/**
 * perfabi_geometry_status_code() - the perfabi::Error code of a geometry result
 * @status: a result of perfabi_geometry_init()
 *
 * Return: "ok", or the code perfabi::Geometry::sizes() reports for the same
 * inputs ("bad-page-size", "bad-cpu-count", "bad-capacity").
 */
static inline const char *perfabi_geometry_status_code(enum perfabi_geometry_status status)
{
	switch (status) {
	case PERFABI_GEOMETRY_OK:
		return "ok";
	case PERFABI_GEOMETRY_BAD_PAGE_SIZE:
		return "bad-page-size";
	case PERFABI_GEOMETRY_BAD_CPU_COUNT:
		return "bad-cpu-count";
	case PERFABI_GEOMETRY_BAD_CAPACITY:
		return "bad-capacity";
	default:
		return "unknown";
	}
}

/**
 * perfabi_align_up() - round up to a multiple of a power of two
 * @v: the value
 * @align: a power of two
 *
 * Return: the least multiple of @align that is >= @v. The caller keeps
 * @v + @align below 2^64 (perfabi_geometry_init() does, by its limits).
 */
static inline __u64 perfabi_align_up(__u64 v, __u64 align)
{
	return (v + align - 1) & ~(align - 1);
}

/**
 * perfabi_geometry_init() - compute the canonical placement of a segment
 * @g: filled in: the four inputs, and on success every derived field
 * @page_size: page size, a power of two in PERFABI_MIN_PAGE_SIZE..PERFABI_MAX_PAGE_SIZE
 * @nr_cpus: per-CPU blocks, 1..PERFABI_MAX_CPUS
 * @max_instances: instance table capacity, 1..PERFABI_MAX_INSTANCES
 * @damon_capacity: DAMON ring slots per CPU, 0..PERFABI_MAX_DAMON_CAPACITY
 * @max_families: family table capacity, 0..PERFABI_MAX_FAMILIES (0 and
 *	@max_members 0: an ABI 1.0 segment, without family tables)
 * @max_members: member table capacity, 0..PERFABI_MAX_MEMBERS; 0 if @max_families is
 *
 * The C twin of perfabi::Geometry::sizes(): the same checks in the same
 * order, the same results. No division and no libc: usable in the kernel
 * and in userspace.
 *
 * Context: any.
 * Return: PERFABI_GEOMETRY_OK, or the first limit the inputs break (the
 * derived fields are then zero).
 */
static inline enum perfabi_geometry_status
perfabi_geometry_init(struct perfabi_geometry *g, __u32 page_size, __u32 nr_cpus,
		      __u32 max_instances, __u32 damon_capacity, __u32 max_families,
		      __u32 max_members)
{
	__u64 page = page_size, counters_end, block_end, cpu_area_end;
	unsigned int page_shift = 0;

	g->page_size = page_size;
	g->nr_cpus = nr_cpus;
	g->max_instances = max_instances;
	g->damon_capacity = damon_capacity;
	g->max_families = max_families;
	g->max_members = max_members;
	g->families_offset = 0;
	g->families_size = 0;
	g->members_offset = 0;
	g->members_size = 0;
	g->pages_per_cpu = 0;
	g->counters_offset = 0;
	g->damon_offset = 0;
	g->instances_offset = 0;
	g->instances_size = 0;
	g->cpu_area_offset = 0;
	g->cpu_block_size = 0;
	g->segment_size = 0;
	if ((page_size & (page_size - 1)) != 0 || page_size < PERFABI_MIN_PAGE_SIZE ||
	    page_size > PERFABI_MAX_PAGE_SIZE)
		return PERFABI_GEOMETRY_BAD_PAGE_SIZE;
	if (nr_cpus == 0 || nr_cpus > PERFABI_MAX_CPUS)
		return PERFABI_GEOMETRY_BAD_CPU_COUNT;
	if (max_instances == 0 || max_instances > PERFABI_MAX_INSTANCES ||
	    damon_capacity > PERFABI_MAX_DAMON_CAPACITY)
		return PERFABI_GEOMETRY_BAD_CAPACITY;
	while ((1ull << page_shift) != page)
		page_shift++;

	g->instances_offset = page;
	g->instances_size = perfabi_align_up((__u64)max_instances * sizeof(struct perfabi_instance),
					     page);
	g->counters_offset = sizeof(struct perfabi_cpu_head);
	counters_end = g->counters_offset + 8ull * max_instances;
	g->damon_offset = (__u32)perfabi_align_up(counters_end, PERFABI_CACHE_LINE);
	block_end = g->damon_offset +
		    (__u64)damon_capacity * sizeof(struct perfabi_damon_record);
	g->cpu_block_size = perfabi_align_up(block_end, page);
	g->pages_per_cpu = (__u32)(g->cpu_block_size >> page_shift);
	g->cpu_area_offset = g->instances_offset + g->instances_size;
	cpu_area_end = g->cpu_area_offset + (__u64)nr_cpus * g->cpu_block_size;
	g->segment_size = cpu_area_end;
	if (max_families == 0 && max_members == 0)
		return PERFABI_GEOMETRY_OK;
	/* ABI 1.1: the family and member tables after the per-CPU area. */
	if (max_families == 0 || max_families > PERFABI_MAX_FAMILIES ||
	    max_members > PERFABI_MAX_MEMBERS) {
		g->pages_per_cpu = 0;
		g->counters_offset = 0;
		g->damon_offset = 0;
		g->instances_offset = 0;
		g->instances_size = 0;
		g->cpu_area_offset = 0;
		g->cpu_block_size = 0;
		g->segment_size = 0;
		return PERFABI_GEOMETRY_BAD_CAPACITY;
	}
	g->families_offset = cpu_area_end;
	g->families_size = perfabi_align_up((__u64)max_families * sizeof(struct perfabi_family),
					    page);
	g->members_offset = g->families_offset + g->families_size;
	g->members_size = perfabi_align_up((__u64)max_members * sizeof(struct perfabi_member),
					   page);
	g->segment_size = g->members_offset + g->members_size;
	return PERFABI_GEOMETRY_OK;
}

/**
 * perfabi_geometry_has_families() - whether a geometry has family tables
 * @g: a geometry perfabi_geometry_init() accepted
 *
 * The twin of perfabi::Geometry::has_families().
 *
 * Return: true for an ABI 1.1 segment (max_families or max_members non-zero).
 */
static inline int perfabi_geometry_has_families(const struct perfabi_geometry *g)
{
	return g->max_families != 0 || g->max_members != 0;
}

/**
 * perfabi_header_init() - fill in the header of a new, empty segment
 * @h: the header to write; no reader may see it yet (PERFABI.md section 10)
 * @g: a geometry perfabi_geometry_init() accepted
 * @epoch: random, non-zero, new for this incarnation of the segment
 * @writer_pid: the writer's process id; 0 for the kernel module
 * @writer_start_ns: CLOCK_BOOTTIME ns at which the writer started (module: loaded)
 * @heartbeat_interval_ns: the writer's promised heartbeat period; 0 = none
 * @heartbeat_ns: the first heartbeat: the creation time (CLOCK_BOOTTIME ns)
 *
 * The C twin of perfabi::Geometry::header() (its WriterIdentity is the
 * last five arguments): every field of the 192-byte header is written, the
 * generations, flags and instances_used are 0, the reserved words zero.
 * A geometry with family tables gets abi_minor 1 and header_size 256: its
 * writer also writes perfabi_family_header_init()'s 64 bytes right after
 * the 192 (perfabi_family_header_of()). A kernel writer then sets
 * PERFABI_FLAG_KERNEL in flags.
 *
 * Context: any; plain stores, before the segment is published.
 */
static inline void perfabi_header_init(struct perfabi_header *h, const struct perfabi_geometry *g,
				       __u64 epoch, __u64 writer_pid, __u64 writer_start_ns,
				       __u64 heartbeat_interval_ns, __u64 heartbeat_ns)
{
	unsigned int i;

	for (i = 0; i < sizeof(h->magic); i++)
		h->magic[i] = (__u8)PERFABI_MAGIC[i];
	h->abi_major = PERFABI_ABI_MAJOR;
	h->abi_minor = perfabi_geometry_has_families(g) ? PERFABI_ABI_MINOR : 0;
	h->header_size = perfabi_geometry_has_families(g) ? PERFABI_HEADER_SIZE_V1_1
							   : PERFABI_HEADER_SIZE_V1_0;
	h->byte_order = PERFABI_BYTE_ORDER_MARK;
	h->page_size = g->page_size;
	h->nr_cpus = g->nr_cpus;
	h->pages_per_cpu = g->pages_per_cpu;
	h->max_instances = g->max_instances;
	h->damon_capacity = g->damon_capacity;
	h->instance_entry_size = sizeof(struct perfabi_instance);
	h->damon_record_size = sizeof(struct perfabi_damon_record);
	h->counters_offset = g->counters_offset;
	h->damon_offset = g->damon_offset;
	h->segment_size = g->segment_size;
	h->instances_offset = g->instances_offset;
	h->instances_size = g->instances_size;
	h->cpu_area_offset = g->cpu_area_offset;
	h->cpu_block_size = g->cpu_block_size;
	h->epoch = epoch;
	h->writer_pid = writer_pid;
	h->writer_start_ns = writer_start_ns;
	h->heartbeat_interval_ns = heartbeat_interval_ns;
	h->gen1 = 0;
	h->gen2 = 0;
	h->heartbeat_ns = heartbeat_ns;
	h->flags = 0;
	h->instances_used = 0;
	for (i = 0; i < sizeof(h->reserved) / sizeof(h->reserved[0]); i++)
		h->reserved[i] = 0;
}

/**
 * perfabi_family_header_init() - fill in the ABI 1.1 header fields of a new segment
 * @fh: the 64 bytes after the 192-byte header (perfabi_family_header_of())
 * @g: a geometry perfabi_geometry_init() accepted
 *
 * The C twin of perfabi::Sizes::families: the tables' offsets, sizes,
 * capacities and entry sizes, nothing used yet. All zero for a geometry
 * without family tables (whose segment is 1.0 and has no such fields).
 *
 * Context: any; plain stores, before the segment is published.
 */
static inline void perfabi_family_header_init(struct perfabi_family_header *fh,
					      const struct perfabi_geometry *g)
{
	int on = perfabi_geometry_has_families(g);

	fh->families_offset = g->families_offset;
	fh->families_size = g->families_size;
	fh->members_offset = g->members_offset;
	fh->members_size = g->members_size;
	fh->max_families = g->max_families;
	fh->max_members = g->max_members;
	fh->family_entry_size = on ? sizeof(struct perfabi_family) : 0;
	fh->member_entry_size = on ? sizeof(struct perfabi_member) : 0;
	fh->families_used = 0;
	fh->members_used = 0;
}

/**
 * perfabi_family_header_of() - where the ABI 1.1 header fields are
 * @h: the header at the start of a segment (of at least 256 mapped bytes)
 *
 * Return: the struct perfabi_family_header right after @h (byte 192).
 * Meaningful when abi_minor >= 1 and header_size >= 256.
 */
static inline struct perfabi_family_header *perfabi_family_header_of(struct perfabi_header *h)
{
	return (struct perfabi_family_header *)(h + 1);
}

/*
 * Addresses, as byte offsets from the start of the segment, computed from a
 * header (a copy of the segment's, validated as PERFABI.md section 8 says,
 * or one perfabi_header_init() wrote). The C twins of perfabi::Layout's
 * instance_word(), cpu_block_word(), counter_word() and damon_word(), which
 * count 8-byte words instead of bytes. Indexes in range are the caller's
 * job: slot < max_instances (damon_capacity for a ring slot), cpu < nr_cpus.
 */

/**
 * perfabi_instance_offset() - where an instance table entry is
 * @h: a validated header
 * @slot: the entry, < max_instances
 *
 * Return: the byte offset of struct perfabi_instance number @slot.
 */
static inline __u64 perfabi_instance_offset(const struct perfabi_header *h, __u32 slot)
{
	return h->instances_offset + (__u64)slot * sizeof(struct perfabi_instance);
}

/**
 * perfabi_cpu_block_offset() - where a CPU's block (its struct perfabi_cpu_head) is
 * @h: a validated header
 * @cpu: the CPU, < nr_cpus
 *
 * Return: the byte offset of CPU @cpu's block.
 */
static inline __u64 perfabi_cpu_block_offset(const struct perfabi_header *h, __u32 cpu)
{
	return h->cpu_area_offset + (__u64)cpu * h->cpu_block_size;
}

/**
 * perfabi_counter_offset() - where a CPU's value of an instance is
 * @h: a validated header
 * @cpu: the CPU, < nr_cpus
 * @slot: the instance's slot, < max_instances
 *
 * Return: the byte offset of the __u64 value @slot of CPU @cpu.
 */
static inline __u64 perfabi_counter_offset(const struct perfabi_header *h, __u32 cpu, __u32 slot)
{
	return perfabi_cpu_block_offset(h, cpu) + h->counters_offset + 8ull * slot;
}

/**
 * perfabi_damon_record_offset() - where a slot of a CPU's DAMON ring is
 * @h: a validated header
 * @cpu: the CPU, < nr_cpus
 * @slot: the ring slot, < damon_capacity
 *
 * Return: the byte offset of struct perfabi_damon_record @slot of CPU @cpu.
 */
static inline __u64 perfabi_damon_record_offset(const struct perfabi_header *h, __u32 cpu,
						__u32 slot)
{
	return perfabi_cpu_block_offset(h, cpu) + h->damon_offset +
	       (__u64)slot * sizeof(struct perfabi_damon_record);
}

/**
 * perfabi_family_offset() - where a family table entry is (ABI 1.1)
 * @fh: validated family header fields
 * @slot: the entry, < max_families
 *
 * The twin of perfabi::FamilyTables::family_word() (in bytes).
 *
 * Return: the byte offset of struct perfabi_family number @slot.
 */
static inline __u64 perfabi_family_offset(const struct perfabi_family_header *fh, __u32 slot)
{
	return fh->families_offset + (__u64)slot * sizeof(struct perfabi_family);
}

/**
 * perfabi_member_offset() - where a member table entry is (ABI 1.1)
 * @fh: validated family header fields
 * @slot: the entry, < max_members
 *
 * The twin of perfabi::FamilyTables::member_word() (in bytes).
 *
 * Return: the byte offset of struct perfabi_member number @slot.
 */
static inline __u64 perfabi_member_offset(const struct perfabi_family_header *fh, __u32 slot)
{
	return fh->members_offset + (__u64)slot * sizeof(struct perfabi_member);
}

#ifdef __KERNEL__
/*
 * The writer's protocol steps (PERFABI.md section 7), one helper each, named
 * after their Rust twins in perfabi/src/protocol.rs (seq_write_begin/end,
 * gen_write_begin/end) and written as the kernel's own
 * raw_write_seqcount_begin()/_end(): WRITE_ONCE() and smp_wmb(). The
 * readers they pair with are the loops at the top of this file.
 */

/**
 * perfabi_seq_write_begin() - begin a multi-word update of a CPU's block
 * @head: the head of the block; the caller owns the block
 *
 * Makes seq odd, then orders that store before the update's stores.
 *
 * Context: the block's own CPU with preemption disabled (single writer).
 * Return: the token for perfabi_seq_write_end().
 */
static inline __u64 perfabi_seq_write_begin(struct perfabi_cpu_head *head)
{
	__u64 s = head->seq;		/* only this writer stores it */

	WRITE_ONCE(head->seq, s + 1);
	/* Pairs with the reader's smp_rmb() before its second load of seq (7.2). */
	smp_wmb();
	return s;
}

/**
 * perfabi_seq_write_end() - end the update perfabi_seq_write_begin() began
 * @head: the head of the block
 * @s: the token perfabi_seq_write_begin() returned
 *
 * Orders the update's stores before making seq even again (s + 2).
 *
 * Context: as perfabi_seq_write_begin(), on the same CPU.
 */
static inline void perfabi_seq_write_end(struct perfabi_cpu_head *head, __u64 s)
{
	/* Pairs with the reader's smp_rmb() after its first load of seq (7.2). */
	smp_wmb();
	WRITE_ONCE(head->seq, s + 2);
}

/**
 * perfabi_gen_write_begin() - begin a metadata change
 * @h: the segment's header
 *
 * Stores gen1 + 1 to gen1, then orders that store before the change's.
 *
 * Context: the one metadata writer (the caller holds its lock).
 * Return: the new generation, for perfabi_gen_write_end().
 */
static inline __u64 perfabi_gen_write_begin(struct perfabi_header *h)
{
	__u64 g = h->gen1 + 1;		/* only this writer stores it */

	WRITE_ONCE(h->gen1, g);
	/* Pairs with the reader's smp_rmb() before it loads gen1 last (7.4). */
	smp_wmb();
	return g;
}

/**
 * perfabi_gen_write_end() - publish the change perfabi_gen_write_begin() began
 * @h: the segment's header
 * @g: the generation perfabi_gen_write_begin() returned
 *
 * Orders the change's stores before storing @g to gen2.
 *
 * Context: as perfabi_gen_write_begin(), still holding the lock.
 */
static inline void perfabi_gen_write_end(struct perfabi_header *h, __u64 g)
{
	/* Pairs with the reader's smp_rmb() after it loads gen2 first (7.4). */
	smp_wmb();
	WRITE_ONCE(h->gen2, g);
}
#endif /* __KERNEL__ */

#endif /* _PERFABI_H */
