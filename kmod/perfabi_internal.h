/* SPDX-License-Identifier: GPL-2.0 */
/* Shared between the parts of the perfabi module. */
#ifndef _PERFABI_INTERNAL_H
#define _PERFABI_INTERNAL_H

#include <linux/types.h>
#include <linux/fs.h>
#include "perfabi.h"

/*
 * The segment's pages: the header and instance table, and per CPU a block
 * whose first pcpu_pages pages are that CPU's share of one __alloc_percpu()
 * area (head and counters, where perfabi_adjust() adds) and the rest the
 * DAMON ring. All of it is vmap()ed once for the module's own writes and
 * inserted page by page into readers' mappings.
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
	u16 *id_gen;			/* registration number of each slot's last id */
	bool reuse_needs_gp;		/* a slot was freed since the last grace period */
	u64 next_reg;
	u32 used;			/* instances_used */
	struct perfabi_geometry geo;	/* the layout: perfabi_geometry_init() */
};

extern struct perfabi_seg perfabi_seg;

/* The head of a CPU's block, once header_init() has written the header. */
static inline struct perfabi_cpu_head *perfabi_cpu_block(struct perfabi_seg *s, unsigned int cpu)
{
	return s->base + perfabi_cpu_block_offset(s->hdr, cpu);
}

void perfabi_damon_start(void);
void perfabi_damon_stop(void);

#endif /* _PERFABI_INTERNAL_H */
