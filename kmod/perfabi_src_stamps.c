// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources, timestamp tables: their allocation (the lock-free put
 * and take are inline, perfabi_src.h).
 */
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/log2.h>
#include <linux/minmax.h>

#include "perfabi_src.h"

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
