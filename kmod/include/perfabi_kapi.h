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
 * Each CPU's counters live in per-CPU memory (one __alloc_percpu() area,
 * which is also what /dev/perfabi maps), so that perfabi_adjust() is an id
 * check and one this_cpu_add(): no preemption toggling, no CPU number.
 *
 * An id is the counter's per-CPU address (bits 0..47, sign-extended) and a
 * registration number of its slot (bits 48..62); it is >= 0. The id is
 * valid while perfabi_ids[] holds it: perfabi_del() clears the entry, so an
 * id kept after perfabi_del() is refused with -ENOENT, and so is any value
 * that was never an id. A slot reused 32767 times wraps its registration
 * number: only then could a stale id be taken for the new instance.
 */
#ifndef _PERFABI_KAPI_H
#define _PERFABI_KAPI_H

#include <linux/types.h>
#include <linux/compiler.h>
#include <linux/bitops.h>
#include <linux/percpu.h>

/* Bits of an id that hold the counter's per-CPU address. */
#define PERFABI_ID_PTR_BITS 48
/* Entries of perfabi_ids[]: more than the counters of one per-CPU area. */
#define PERFABI_ID_TABLE_SIZE 4096

/*
 * perfabi_ids[perfabi_id_index(id)] == id while id is registered. A free
 * entry holds a negative value whose own index is another entry, so no value
 * passed to perfabi_adjust() matches a free entry. Owned by the perfabi
 * module; read by the inline perfabi_adjust() of its callers.
 */
extern long perfabi_ids[PERFABI_ID_TABLE_SIZE];

/* Where perfabi_adjust() adds for an id that is not registered: no reader sees it. */
DECLARE_PER_CPU(u64, perfabi_sink);

/*
 * The table entry of an id: its counter's 8-byte word index, modulo the
 * table size. The counters of one area are fewer than PERFABI_ID_TABLE_SIZE
 * consecutive words, so no two live ids share an entry.
 */
static __always_inline unsigned long perfabi_id_index(long id)
{
	return ((unsigned long)id >> 3) & (PERFABI_ID_TABLE_SIZE - 1);
}

/* The per-CPU counter an id names. Meaningful only for a registered id. */
static __always_inline u64 __percpu *perfabi_id_counter(long id)
{
	return (u64 __percpu __force *)sign_extend64((u64)id, PERFABI_ID_PTR_BITS - 1);
}

/*
 * Registers a u64 instance (PERFABI_COUNTER or PERFABI_INSTANT from
 * perfabi.h). Returns its id (>= 0), or -EINVAL (bad name, unit or
 * semantics), -EEXIST (the name is taken, or a live name is the same name
 * to consumers: "a.b" and "a_b", "x" and "x_total"; spec §5), -ENOSPC
 * (table full). May sleep.
 */
long perfabi_add(const char *name, const char *unit, u32 semantics);

/*
 * Unregisters an instance. Returns 0 or -ENOENT. May sleep.
 *
 * Stop adjusting an id before deleting it. An adjust that races with its
 * perfabi_del() from a context that cannot be preempted (hard or soft IRQ,
 * preemption or interrupts off, or any context on a kernel without
 * CONFIG_PREEMPT) is waited out (synchronize_rcu()) before the slot is
 * given to a new instance; from preemptible task context on a preemptible
 * kernel it could land on that new instance.
 */
int perfabi_del(long id);

/*
 * Adds delta (wrapping) to the instance's value on the current CPU.
 * Callable from any context. Returns 0 or -ENOENT for an unknown id.
 *
 * Inline: one load of the id's table entry, then this_cpu_add(), a single
 * interrupt-safe instruction on x86 (spec 7.1, single counter). Branch-free:
 * an unknown id is never dereferenced, its delta goes to perfabi_sink.
 */
static __always_inline int perfabi_adjust(long id, s64 delta)
{
	bool known = READ_ONCE(perfabi_ids[perfabi_id_index(id)]) == id;

	this_cpu_add(*(known ? perfabi_id_counter(id) : &perfabi_sink), (u64)delta);
	return known ? 0 : -ENOENT;
}

#endif /* _PERFABI_KAPI_H */
