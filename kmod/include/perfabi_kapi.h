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
 */
int perfabi_adjust(long id, s64 delta);

#endif /* _PERFABI_KAPI_H */
