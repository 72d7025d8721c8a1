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
 *
 * ABI 1.1 metric families (spec/PERFABI.md 5.1-5.4): a family has a name,
 * help, unit, kind and the dimension its instances vary along; each
 * instance (a member) has its own values and up to 4 extra labels.
 *
 *	static const struct perfabi_family_desc d = {
 *		.name = "blk.io_latency", .help = "Time from submit to completion",
 *		.dimension = "device", .kind = PERFABI_KIND_HISTOGRAM,
 *		.unit = PERFABI_UNIT_NS, .nr_buckets = 24,
 *		.bucket_layout = PERFABI_BUCKETS_LOG2, .log2_first = 10,
 *	};
 *	struct perfabi_family_handle *f = perfabi_family_add(&d);
 *	struct perfabi_member_handle *m = perfabi_instance_add(f, "sda", NULL, 0);
 *	perfabi_observe(m, ns);		// any context, including hard IRQ and NMI
 *	...
 *	perfabi_family_del(f);		// deletes its instances too
 *
 * Handles are opaque and never dereferenced by the module: a stale handle
 * (after its deletion), and any value that was never a handle, is refused
 * (-ENOENT) as a stale id is, by the same table check. A member handle is
 * an id as above (its first value word's per-CPU address and a
 * registration number) whose two low bits, always zero in an address, say
 * which hot-path call it is for (PERFABI_TAG_*): each call checks it
 * against perfabi_keys[] with the tag that call wants, so a handle given to
 * the wrong call is refused like a stale one, in the same single check.
 */
#ifndef _PERFABI_KAPI_H
#define _PERFABI_KAPI_H

#include <linux/types.h>
#include <linux/compiler.h>
#include <linux/bitops.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/err.h>
#include <asm/barrier.h>

#include "perfabi.h"

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

/*
 * ABI 1.1: metric families.
 */

/**
 * struct perfabi_family_desc - a metric family, as perfabi_family_add() takes it
 * @name: the naming rule of perfabi_add(); shares the namespace with perfabi_add()'s
 *	names (distinct clash keys), and no live family name may be a dotted
 *	prefix of another live name ("a.b" and "a.b.c"), nor the other way
 * @help: one line, 0..127 printable ASCII bytes (spaces allowed); NULL: none
 * @dimension: what the instances vary along, a label key ([a-z][a-z0-9_]*,
 *	at most 31 bytes, not "cpu", "le", "lower_bound" or "upper_bound"); NULL or "": the family has one
 *	instance, whose instance string is ""
 * @kind: PERFABI_KIND_COUNTER, _GAUGE (perfabi_member_add()), _PEAK
 *	(perfabi_peak()) or _HISTOGRAM (perfabi_observe())
 * @value_type: PERFABI_TYPE_U64 (also 0) or PERFABI_TYPE_I64 (counters and
 *	gauges only: a peak compares, and a histogram sums, unsigned values)
 * @unit: the values' unit (PERFABI_UNIT_NS, PERFABI_UNIT() ...)
 * @nr_buckets: histogram: its buckets, the last one +Inf, 2..PERFABI_MAX_BUCKETS;
 *	else 0
 * @bucket_layout: histogram: PERFABI_BUCKETS_LOG2 or _EXPLICIT; else 0
 * @log2_first: LOG2: bucket k holds values up to 2^(log2_first + k)
 *	(log2_first + nr_buckets - 2 <= 63); else 0
 * @bounds: EXPLICIT: the nr_buckets - 1 inclusive upper bounds, strictly
 *	increasing; else NULL
 */
struct perfabi_family_desc {
	const char *name;
	const char *help;
	const char *dimension;
	u32 kind;
	u32 value_type;
	struct perfabi_unit unit;
	u32 nr_buckets;
	u32 bucket_layout;
	u32 log2_first;
	const u64 *bounds;
};

/* Opaque handles: never dereferenced, checked by value (see the top). */
struct perfabi_family_handle;
struct perfabi_member_handle;

/* The two low bits of a member handle: which hot-path call it is for. */
#define PERFABI_TAG_ADD		0	/* counter or gauge: perfabi_member_add() */
#define PERFABI_TAG_PEAK	1	/* peak: perfabi_peak() */
#define PERFABI_TAG_LOG2	2	/* histogram, log2 buckets: perfabi_observe() */
#define PERFABI_TAG_EXPLICIT	3	/* histogram, explicit bounds: perfabi_observe() */
#define PERFABI_TAG_MASK	3L

/**
 * struct perfabi_key - the hot path's view of one live member
 * @handle: the member's handle while it is live; a free entry holds a
 *	negative value whose own index is another entry (as perfabi_ids[])
 * @info: a histogram's buckets: LOG2 log2_first | nr_buckets << 8;
 *	EXPLICIT the address of PERFABI_MAX_BUCKETS bounds, the finite ones
 *	then U64_MAX to the end; else 0
 *
 * perfabi_keys[perfabi_id_index(handle)] is the entry of a live handle
 * (members' first value words are distinct words of one per-CPU area).
 * @info is written before @handle is published (smp_store_release()), and
 * stays until a grace period after the member is deleted.
 */
struct perfabi_key {
	long handle;
	unsigned long info;
};

/* Owned by the perfabi module; read by the inline hot-path calls below. */
extern struct perfabi_key perfabi_keys[PERFABI_ID_TABLE_SIZE];

/*
 * The sequence word of every CPU's block (spec 6.1), as per-CPU memory:
 * this_cpu_*() on it reaches the current CPU's. Set once at load.
 */
extern u64 __percpu *perfabi_cpu_seq;

/**
 * perfabi_family_add() - register a metric family
 * @desc: the family (struct perfabi_family_desc); copied, need not outlive the call
 *
 * The family and every change to it are published in one metadata
 * generation change each (spec 7.3). Refused input changes nothing.
 *
 * Context: process context; may sleep.
 * Return: the family's handle, or ERR_PTR(): -EINVAL (bad name, help,
 * dimension, unit, kind or value type; a histogram's layout, fewer than 2
 * buckets, log2 bounds past 2^63 or explicit bounds not strictly
 * increasing; bucket fields set on another kind), -E2BIG (more than
 * PERFABI_MAX_BUCKETS buckets), -EEXIST (a live name or family has the same
 * clash key, "a.b"/"a_b", "x"/"x_total", or one is the dotted prefix of
 * the other and a family), -ENOSPC (the family table is full, or the
 * segment has none: the module's max_families=0).
 */
struct perfabi_family_handle *perfabi_family_add(const struct perfabi_family_desc *desc);

/**
 * perfabi_family_del() - unregister a family and every instance of it
 * @f: a handle perfabi_family_add() returned
 *
 * The family and its instances go in one generation change: no reader
 * sees the instances without their family. Their member handles are
 * refused from then on. Stop using them first: see perfabi_del() for
 * calls racing with a deletion.
 *
 * Context: process context; may sleep.
 * Return: 0, or -ENOENT (not a live family's handle).
 */
int perfabi_family_del(struct perfabi_family_handle *f);

/**
 * perfabi_instance_add() - add an instance to a family
 * @f: the family's handle
 * @instance: the instance's value of the family's dimension ("sda"): 1..63
 *	printable ASCII bytes, no space, '"' or backslash; NULL or "" exactly
 *	when the family has no dimension
 * @labels: @nr extra labels (NUL-terminated key and value in their fields;
 *	keys as the dimension's rule, distinct, not the dimension; values
 *	1..47 printable ASCII, spaces allowed, no '"' or backslash), or NULL
 * @nr: number of @labels, 0..PERFABI_MAX_LABELS
 *
 * The instance's values (one word; a histogram's count, sum and buckets)
 * start at zero on every CPU. An instance string that was in the family
 * before gets its old instance number back, and a new registration id.
 *
 * Context: process context; may sleep.
 * Return: the member's handle for perfabi_member_add(), perfabi_peak() or
 * perfabi_observe() (as the family's kind), or ERR_PTR(): -ENOENT (@f is
 * not a live family), -EINVAL (bad instance string or label), -E2BIG (more
 * than PERFABI_MAX_LABELS labels), -EEXIST (the family has a live instance
 * of that string), -ENOSPC (no member slot, no room for its values
 * among the max_instances value words, or the family has numbered 65,536
 * distinct instance strings: it remembers every string's number for its
 * life, so that a returning instance keeps it; delete and add the family
 * again to start over).
 */
struct perfabi_member_handle *perfabi_instance_add(struct perfabi_family_handle *f,
						   const char *instance,
						   const struct perfabi_label *labels,
						   unsigned int nr);

/**
 * perfabi_instance_del() - remove an instance
 * @m: a handle perfabi_instance_add() returned
 *
 * The handle is refused from then on. Stop using it first: a
 * perfabi_member_add() or perfabi_peak() racing with the deletion is
 * waited out before the instance's value words are reused as
 * perfabi_del() says for perfabi_adjust(); a perfabi_observe() always is
 * (it runs with preemption off).
 *
 * Context: process context; may sleep.
 * Return: 0, or -ENOENT (not a live member's handle).
 */
int perfabi_instance_del(struct perfabi_member_handle *m);

/**
 * perfabi_peak_reset() - start a peak's high-water marks again from 0
 * @m: a peak member's handle
 *
 * A metadata change (spec 7.3): 0 is stored to the member's word on every
 * CPU between gen1 and gen2, so that no consistent snapshot mixes marks
 * from before and after the reset. A perfabi_peak() racing with it lands
 * before or after it, whole.
 *
 * Context: process context; may sleep.
 * Return: 0, -ENOENT (not a live member's handle) or -EINVAL (not a peak).
 */
int perfabi_peak_reset(struct perfabi_member_handle *m);

/**
 * perfabi_generation() - the segment's metadata generation
 *
 * Return: gen2: it moves with every metadata change (perfabi_add(),
 * perfabi_family_add(), ...), and not otherwise.
 */
u64 perfabi_generation(void);

/* The counter a member handle names (tag bits cleared). Live handles only. */
static __always_inline u64 __percpu *perfabi_member_counter(long handle)
{
	return perfabi_id_counter(handle & ~PERFABI_TAG_MASK);
}

/**
 * perfabi_member_add() - add to a counter's or gauge's value on this CPU
 * @m: a counter or gauge member's handle
 * @delta: the amount, wrapping (negative for a gauge going down)
 *
 * As perfabi_adjust(): one check of the handle against its perfabi_keys[]
 * entry, with the counter tag forced (so a peak's or histogram's handle
 * fails it), then one this_cpu_add(); a refused handle's delta goes to
 * perfabi_sink, branch-free.
 *
 * Context: any, including hard IRQ and NMI.
 * Return: 0, or -ENOENT (not a live counter or gauge member).
 */
static __always_inline int perfabi_member_add(struct perfabi_member_handle *m, s64 delta)
{
	long h = (long)m & ~PERFABI_TAG_MASK;
	bool known = READ_ONCE(perfabi_keys[perfabi_id_index(h)].handle) == h;

	this_cpu_add(*(known ? perfabi_id_counter(h) : &perfabi_sink), (u64)delta);
	return known ? 0 : -ENOENT;
}

/**
 * perfabi_peak() - raise a peak's high-water mark on this CPU
 * @m: a peak member's handle
 * @v: the observation
 *
 * Stores @v to this CPU's word only if it is larger than what the word
 * holds, and never anything else: one this_cpu_read(), and only for a new
 * maximum a this_cpu_cmpxchg() (interrupt safe, no lock prefix), retried
 * if an interrupt on this CPU raised the word in between. Readers report
 * the maximum over CPUs. The check is perfabi_member_add()'s with the peak
 * tag.
 *
 * Context: any, including hard IRQ and NMI.
 * Return: 0, or -ENOENT (not a live peak member).
 */
static __always_inline int perfabi_peak(struct perfabi_member_handle *m, u64 v)
{
	long h = ((long)m & ~PERFABI_TAG_MASK) | PERFABI_TAG_PEAK;
	bool known = READ_ONCE(perfabi_keys[perfabi_id_index(h)].handle) == h;
	u64 __percpu *w = known ? perfabi_member_counter(h) : &perfabi_sink;
	u64 cur = this_cpu_read(*w);

	while (unlikely(v > cur)) {
		u64 old = this_cpu_cmpxchg(*w, cur, v);

		if (old == cur)
			break;
		cur = old;
	}
	return known ? 0 : -ENOENT;
}

/* The log2 bucket of v: ceil(log2(v)) - log2_first, clamped to 0..nr_buckets-1. */
static __always_inline unsigned int perfabi_bucket_log2(unsigned long info, u64 v)
{
	unsigned int first = info & 0xff, last = (info >> 8) - 1;
	unsigned int c = fls64(v - (v != 0));	/* ceil(log2(v)); 0 for v <= 1 */

	c = c > first ? c - first : 0;
	return c < last ? c : last;
}

/*
 * The explicit bucket of v: how many bounds are < v (the first bound >= v
 * is its bucket's). Branch-free binary search over the 32 padded bounds:
 * the pad (U64_MAX) is never < v, so the result is at most nr_buckets - 1,
 * the +Inf bucket.
 */
static __always_inline unsigned int perfabi_bucket_explicit(const u64 *b, u64 v)
{
	unsigned int k = 0;

	k += b[k + 15] < v ? 16 : 0;
	k += b[k + 7] < v ? 8 : 0;
	k += b[k + 3] < v ? 4 : 0;
	k += b[k + 1] < v ? 2 : 0;
	k += b[k] < v ? 1 : 0;
	return k;
}

/**
 * perfabi_seq_nest_begin() - begin a multi-word update of this CPU's block, nesting
 * @seq: perfabi_cpu_seq
 *
 * perfabi_seq_write_begin() of perfabi.h for a block that interrupts (and
 * NMIs) on its CPU update too: see perfabi_observe() for why this is
 * correct. Every multi-word writer of the module's blocks uses it.
 *
 * Context: preemption off (or any atomic context).
 * Return: whether this is the outermost update, for perfabi_seq_nest_end().
 */
static __always_inline bool perfabi_seq_nest_begin(u64 __percpu *seq)
{
	if (this_cpu_read(*seq) & 1)
		return false;	/* inside an update this one interrupted */
	this_cpu_inc(*seq);
	/* seq odd before the words; pairs with the reader's smp_rmb() (7.2). */
	smp_wmb();
	return true;
}

/**
 * perfabi_seq_nest_end() - end the update perfabi_seq_nest_begin() began
 * @seq: perfabi_cpu_seq
 * @outer: what perfabi_seq_nest_begin() returned
 *
 * Context: as perfabi_seq_nest_begin(), on the same CPU.
 */
static __always_inline void perfabi_seq_nest_end(u64 __percpu *seq, bool outer)
{
	if (!outer)
		return;
	/* The words before seq even again; pairs with the reader's smp_rmb(). */
	smp_wmb();
	this_cpu_inc(*seq);
}

/**
 * perfabi_observe() - record one observation in a histogram, on this CPU
 * @m: a histogram member's handle
 * @v: the observation
 *
 * One multi-word update of this CPU's block (spec 7.1): count + 1, sum + v,
 * bucket + 1, so that every consistent copy of a CPU's values has count ==
 * the sum of the buckets.
 *
 * Nesting: an interrupt (or NMI) on this CPU may observe, or a DAMON
 * record may be written, in the middle of this update. Each word is
 * changed with one interrupt-safe this_cpu_add(), so no add is lost; what
 * must not happen is a reader seeing an even sequence word around a
 * half-done update. The cheapest correct way, cheaper than turning
 * interrupts off and on: the outermost update on a CPU makes seq odd (one
 * this_cpu_inc(), atomic against interrupts) and even again at its end;
 * an update that finds seq already odd interrupted one in progress on this
 * CPU, which cannot resume before it returns, so it adds its words inside
 * that odd window and leaves seq alone. If an interrupt's whole update
 * lands between the outer one's load of seq and its increment, seq just
 * moves on by 2 first: seq only ever goes up, never returning to a value a
 * reader saw (no ABA). Preemption is off across the update (a migration
 * would split it over two CPUs' blocks) and across the handle check (the
 * grace period perfabi_instance_del() waits for before a value word is
 * reused).
 *
 * Context: any, including hard IRQ and NMI.
 * Return: 0, or -ENOENT (not a live histogram member).
 */
static __always_inline int perfabi_observe(struct perfabi_member_handle *m, u64 v)
{
	/* Tags 2 and 3 are the histograms' (see PERFABI_TAG_*): | 2 keeps them. */
	long h = (long)m | PERFABI_TAG_LOG2;
	const struct perfabi_key *k = &perfabi_keys[perfabi_id_index(h)];
	u64 __percpu *seq = perfabi_cpu_seq;
	u64 __percpu *w;
	unsigned long info;
	unsigned int b;
	bool outer;

	preempt_disable_notrace();
	/* Acquire: @info was written before the handle was published. */
	if (unlikely(smp_load_acquire(&k->handle) != h)) {
		preempt_enable_notrace();
		return -ENOENT;
	}
	info = READ_ONCE(k->info);
	b = (h & 1) ? perfabi_bucket_explicit((const u64 *)info, v) : perfabi_bucket_log2(info, v);
	w = perfabi_member_counter(h);
	outer = perfabi_seq_nest_begin(seq);
	this_cpu_inc(w[0]);
	this_cpu_add(w[1], v);
	this_cpu_inc(w[2 + b]);
	perfabi_seq_nest_end(seq, outer);
	preempt_enable_notrace();
	return 0;
}

#endif /* _PERFABI_KAPI_H */
