/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * perfabi.h - C view of the perfabi ABI, version 1.0.
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
 * in the kernel perfabi_seq_write_begin() and perfabi_seq_write_end() below):
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

/*
 * The canonical placement (PERFABI.md section 3): the one layout every
 * writer of ABI 1.0 uses, computed here once for C (the kernel module's
 * layout() and header_init() call these functions) and checked against its
 * Rust twin perfabi::Geometry::sizes() and perfabi::Geometry::header() by
 * perfabi/tests/c_layout.rs. Readers MUST NOT assume it: they use the
 * header's own values once validated (section 8).
 */

/**
 * struct perfabi_geometry - a segment's canonical placement (not ABI: never in a segment)
 * @page_size: page size, a power of two in PERFABI_MIN_PAGE_SIZE..PERFABI_MAX_PAGE_SIZE
 * @nr_cpus: per-CPU blocks, 1..PERFABI_MAX_CPUS
 * @max_instances: instance table capacity, 1..PERFABI_MAX_INSTANCES
 * @damon_capacity: DAMON ring slots per CPU, 0..PERFABI_MAX_DAMON_CAPACITY
 * @pages_per_cpu: pages in one per-CPU block, cpu_block_size / page_size
 * @counters_offset: counter array in a block: sizeof(struct perfabi_cpu_head)
 * @damon_offset: DAMON ring in a block: the counters' end rounded up to a cache line
 * @instances_offset: instance table in the segment: page_size (after the header page)
 * @instances_size: instance table bytes: max_instances entries in whole pages
 * @cpu_area_offset: CPU 0's block: instances_offset + instances_size
 * @cpu_block_size: bytes of one block: the DAMON ring's end in whole pages
 * @segment_size: bytes of the segment: cpu_area_offset + nr_cpus * cpu_block_size
 *
 * The first four fields are what a writer chooses (perfabi::Geometry); the
 * others are derived by perfabi_geometry_init() (perfabi::Sizes), and named
 * as the header fields they are written to.
 */
struct perfabi_geometry {
	__u32 page_size;
	__u32 nr_cpus;
	__u32 max_instances;
	__u32 damon_capacity;
	__u32 pages_per_cpu;
	__u32 counters_offset;
	__u32 damon_offset;
	__u64 instances_offset;
	__u64 instances_size;
	__u64 cpu_area_offset;
	__u64 cpu_block_size;
	__u64 segment_size;
};

/*
 * Results of perfabi_geometry_init(), in the order it checks; each names the
 * perfabi::Error code that perfabi::Geometry::sizes() returns for it.
 */
enum perfabi_geometry_status {
	PERFABI_GEOMETRY_OK = 0,
	PERFABI_GEOMETRY_BAD_PAGE_SIZE,	/* "bad-page-size" */
	PERFABI_GEOMETRY_BAD_CPU_COUNT,	/* "bad-cpu-count" */
	PERFABI_GEOMETRY_BAD_CAPACITY,	/* "bad-capacity" (max_instances or damon_capacity) */
	PERFABI_GEOMETRY_STATUS_MAX	/* non-ABI sentinel */
};

/*
 * Within the limits every size is below 2^41 bytes (the largest segment,
 * 8192 CPUs x 65536 instances x 2^20 DAMON slots, is under 517 GiB) and a block
 * below 2^27, so no step of perfabi_geometry_init() overflows and every
 * derived 32-bit field fits: the "bad-config" (overflow) results of the Rust
 * twin cannot happen, and the C has none.
 */
_Static_assert((__u64)PERFABI_MAX_CPUS *
	       (128ull + 8ull * PERFABI_MAX_INSTANCES + 64ull * PERFABI_MAX_DAMON_CAPACITY +
		PERFABI_MAX_PAGE_SIZE) + 2ull * PERFABI_MAX_PAGE_SIZE +
	       128ull * PERFABI_MAX_INSTANCES < (1ull << 41), "perfabi geometry fits 41 bits");

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
		      __u32 max_instances, __u32 damon_capacity)
{
	__u64 page = page_size, counters_end, block_end;
	unsigned int page_shift = 0;

	g->page_size = page_size;
	g->nr_cpus = nr_cpus;
	g->max_instances = max_instances;
	g->damon_capacity = damon_capacity;
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
	g->segment_size = g->cpu_area_offset + (__u64)nr_cpus * g->cpu_block_size;
	return PERFABI_GEOMETRY_OK;
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
 * A kernel writer then sets PERFABI_FLAG_KERNEL in flags.
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
	h->abi_minor = PERFABI_ABI_MINOR;
	h->header_size = sizeof(*h);
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
