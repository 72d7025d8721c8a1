/* SPDX-License-Identifier: GPL-2.0 */
/* Shared between the parts of the perfabi module. */
#ifndef _PERFABI_INTERNAL_H
#define _PERFABI_INTERNAL_H

#include <linux/types.h>
#include <linux/fs.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include "perfabi.h"
#include "perfabi_kapi.h"

/*
 * The module's own view of a live family (ABI 1.1), by family slot. Its
 * bounds are read by perfabi_observe() through perfabi_key.info: a slot
 * is reused only after a grace period (reuse_needs_gp).
 */
struct perfabi_kfamily {
	long handle;			/* the family handle while live, else 0 */
	u32 words;			/* value words of each member */
	u32 tag;			/* its members' handle tag (PERFABI_TAG_*) */
	unsigned long info;		/* its members' perfabi_key.info */
	u64 bounds[PERFABI_MAX_BUCKETS]; /* EXPLICIT: the bounds, then U64_MAX */
	char (*names)[PERFABI_INSTANCE_LEN]; /* every instance string it had: the
					 * instance number is the index */
	u32 nr_names, cap_names;
};

/* The module's own view of a live member, by member slot. */
struct perfabi_kmember {
	long handle;			/* the member handle while live, else 0 */
	u32 family;			/* family slot */
	u32 value_slot;			/* first value word */
	u32 words;
};

/*
 * The segment's pages: the header and instance table, and per CPU a block
 * whose first pcpu_pages pages are that CPU's share of one __alloc_percpu()
 * area (head and counters, where perfabi_adjust() adds) and the rest the
 * DAMON ring; with ABI 1.1 families, then the family and member tables.
 * All of it is vmap()ed once for the module's own writes and inserted page
 * by page into readers' mappings.
 *
 * Value words (the counter array's slots) belong to 1.0 instances (slot i
 * is instance entry i) or to members (value_slot .. + words): @vused has a
 * bit set for every word either holds.
 */
struct perfabi_seg {
	struct page **pages;		/* every page of the segment, in order */
	int *pcpu_refs;			/* per-CPU pages: refcount when taken */
	unsigned long nr_pages;
	void *base;			/* vmap of the pages: the module writes here */
	void __percpu *pcpu;		/* the per-CPU area: block head + counters */
	unsigned int pcpu_pages;	/* its pages per CPU */
	struct file *anchor;		/* the file readers' mappings hold */
	struct perfabi_header *hdr;
	struct perfabi_instance *instances;
	u16 *id_gen;			/* registration number of each value word's last
					 * id or member handle starting there */
	unsigned long *vused;		/* value words in use (max_instances bits) */
	bool reuse_needs_gp;		/* a value word or family slot was freed since
					 * the last grace period */
	u64 next_reg;			/* the last registration id given (all tables) */
	u32 used;			/* instances_used */
	struct perfabi_geometry geo;	/* the layout: perfabi_geometry_init() */
	/* ABI 1.1; NULL, 0 without family tables */
	struct perfabi_family_header *fh;
	struct perfabi_family *families;
	struct perfabi_member *members;
	struct perfabi_kfamily *kfam;	/* max_families */
	struct perfabi_kmember *kmem;	/* max_members */
	u32 fams_used;			/* families_used */
	u32 mems_used;			/* members_used */
};

/* perfabi_seg.c: the segment, and its lock. */
extern struct perfabi_seg perfabi_seg;
/* Held by every metadata change: the one metadata writer of spec 7.3. */
extern struct mutex perfabi_meta_lock;

#define PERFABI_ID_PTR_MASK ((1UL << PERFABI_ID_PTR_BITS) - 1)
#define PERFABI_ID_GEN_MAX 32767	/* registration numbers: bits 48..62 */

/* What a free perfabi_ids[] or perfabi_keys[] entry holds: negative, and indexing elsewhere. */
static inline long perfabi_id_empty(unsigned long index)
{
	return LONG_MIN | (long)(((index + 1) & (PERFABI_ID_TABLE_SIZE - 1)) << 3);
}

/* The per-CPU address of value word @slot (of the counter array). */
static inline u64 __percpu *perfabi_slot_counter(struct perfabi_seg *s, unsigned int slot)
{
	return (u64 __percpu *)((char __percpu *)s->pcpu + s->geo.counters_offset) + slot;
}

/* perfabi_seg.c */
int perfabi_seg_alloc(struct perfabi_seg *s);
void perfabi_seg_header_init(struct perfabi_seg *s);
void perfabi_seg_free(struct perfabi_seg *s);
void perfabi_reuse_after_gp(struct perfabi_seg *s);
/* perfabi_names.c */
bool perfabi_name_ok(const char *n);
bool perfabi_name_taken(struct perfabi_seg *s, const char *name, bool family);

/* The head of a CPU's block, once header_init() has written the header. */
static inline struct perfabi_cpu_head *perfabi_cpu_block(struct perfabi_seg *s, unsigned int cpu)
{
	return s->base + perfabi_cpu_block_offset(s->hdr, cpu);
}

/* perfabi_damon.c */
void perfabi_damon_start(void);
void perfabi_damon_stop(void);

#endif /* _PERFABI_INTERNAL_H */
