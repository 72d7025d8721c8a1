/* SPDX-License-Identifier: GPL-2.0 */
/* Shared between the parts of the perfabi module. */
#ifndef _PERFABI_INTERNAL_H
#define _PERFABI_INTERNAL_H

#include <linux/types.h>
#include <linux/fs.h>
#include "perfabi.h"

struct perfabi_seg {
	struct file *shm;		/* the memory, as a shmem file */
	struct page **pages;		/* its pages, pinned */
	unsigned long nr_pages;
	void *base;			/* vmap of the pages: the module writes here */
	struct perfabi_header *hdr;
	struct perfabi_instance *instances;
	u64 *live;			/* live[slot]: registration id, 0 = free */
	u64 next_reg;
	u32 used;			/* instances_used */
	u32 nr_cpus, max_instances, damon_capacity;
	u64 size, instances_offset, instances_size, cpu_area_offset, cpu_block_size;
	u32 counters_offset, damon_offset;
};

extern struct perfabi_seg perfabi_seg;

static inline void *perfabi_cpu_block(struct perfabi_seg *s, unsigned int cpu)
{
	return s->base + s->cpu_area_offset + (u64)cpu * s->cpu_block_size;
}

static inline u64 *perfabi_counter(struct perfabi_seg *s, unsigned int cpu, unsigned int slot)
{
	return (u64 *)(perfabi_cpu_block(s, cpu) + s->counters_offset) + slot;
}

void perfabi_damon_start(void);
void perfabi_damon_stop(void);

#endif /* _PERFABI_INTERNAL_H */
