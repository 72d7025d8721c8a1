/* SPDX-License-Identifier: GPL-2.0 */
/*
 * perfabi_kapi.h - the in-kernel API of the perfabi module.
 *
 *	long id = perfabi_add("net.rx_bytes", "bytes", PERFABI_COUNTER);
 *	if (id < 0)
 *		return id;
 *	perfabi_adjust(id, len);	// any context, including hard IRQ
 *	...
 *	perfabi_del(id);
 *
 * An id carries the slot and its registration id: an id kept after
 * perfabi_del() is refused with -ENOENT, never applied to a reused slot.
 */
#ifndef _PERFABI_KAPI_H
#define _PERFABI_KAPI_H

#include <linux/types.h>
#include <linux/compiler.h>
#include <linux/preempt.h>
#include <linux/smp.h>
#include <asm/local64.h>

/* An id: the registration id above the slot. */
#define PERFABI_ID_SLOT_BITS 16
#define PERFABI_ID_SLOT_MASK ((1L << PERFABI_ID_SLOT_BITS) - 1)

/* What the inline perfabi_adjust() needs; owned by the perfabi module. */
struct perfabi_fast {
	u64 *live;		/* live[slot]: registration id, 0 = free */
	u8 *cpu0_counters;	/* CPU 0's counter array (kernel mapping) */
	u64 cpu_stride;		/* distance between CPUs' counter arrays */
	u32 max_instances;
};
extern struct perfabi_fast perfabi_fast;

/*
 * Registers a u64 instance (PERFABI_COUNTER or PERFABI_INSTANT from
 * perfabi.h). Returns its id (>= 0), or -EINVAL (bad name, unit or
 * semantics), -EEXIST (name taken), -ENOSPC (table full). May sleep.
 */
long perfabi_add(const char *name, const char *unit, u32 semantics);

/* Unregisters an instance. Returns 0 or -ENOENT. May sleep. */
int perfabi_del(long id);

/*
 * Adds delta (wrapping) to the instance's value on the current CPU.
 * Callable from any context. Returns 0 or -ENOENT for an unknown id.
 *
 * Inline, so that the cost is an id check and one interrupt-safe add to
 * this CPU's slot (spec 7.1, single counter) with preemption off.
 */
static __always_inline int perfabi_adjust(long id, s64 delta)
{
	unsigned long slot = (unsigned long)id & PERFABI_ID_SLOT_MASK;
	u64 *v;

	if (unlikely(id < 0 || slot >= perfabi_fast.max_instances ||
		     READ_ONCE(perfabi_fast.live[slot]) != ((u64)id >> PERFABI_ID_SLOT_BITS)))
		return -ENOENT;
	preempt_disable_notrace();
	v = (u64 *)(perfabi_fast.cpu0_counters + raw_smp_processor_id() * perfabi_fast.cpu_stride) + slot;
	local64_add(delta, (local64_t *)v);
	preempt_enable_notrace();
	return 0;
}

#endif /* _PERFABI_KAPI_H */
