// SPDX-License-Identifier: GPL-2.0
/*
 * ABI 1.1 metric families (spec/PERFABI.md 5.1-5.4): the family and member
 * tables, and the kernel API of perfabi_kapi.h that fills them.
 *
 * Every check of the Rust reader (perfabi::family::decode_family,
 * decode_member, assemble) holds after every call, so that a consistent
 * snapshot always decodes: input is checked against the same rules before
 * anything is written, and refused input changes nothing. Each change is
 * one metadata generation change (spec 7.3) under perfabi_meta_lock.
 *
 * Value words: a member takes `words` consecutive words of the counter
 * arrays (1, or 2 + buckets for a histogram) that no 1.0 instance or other
 * member holds (perfabi_seg.vused), zeroed on every CPU inside the
 * generation change that makes it live; instances_used covers them.
 */
#include <linux/bitmap.h>
#include <linux/err.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "perfabi.h"
#include "perfabi_kapi.h"
#include "perfabi_internal.h"

/*
 * A family handle: (slot + 1) in bits 0..16 and the low 32 bits of the
 * family's registration id above them; never NULL, never an ERR_PTR(),
 * never dereferenced. Checked against perfabi_kfamily.handle.
 */
#define FAMILY_SLOT_BITS 17
#define FAMILY_SLOT_MASK ((1UL << FAMILY_SLOT_BITS) - 1)

/* Most instance strings a family remembers (for their instance numbers). */
#define MAX_NAMES 65536

/* Help: 0..127 printable ASCII bytes, spaces allowed (perfabi::name::check_help). */
static bool help_ok(const char *h)
{
	size_t len = strnlen(h, PERFABI_HELP_LEN), i;

	if (len >= PERFABI_HELP_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (h[i] < ' ' || h[i] > '~')
			return false;
	return true;
}

/*
 * A label key or dimension: [a-z][a-z0-9_]*, shorter than @size, not "cpu"
 * or "le" (perfabi::name::check_label_key, check_dimension).
 */
static bool key_ok(const char *k, size_t size)
{
	size_t len = strnlen(k, size), i;

	if (len == 0 || len >= size || k[0] < 'a' || k[0] > 'z')
		return false;
	for (i = 1; i < len; i++)
		if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
			return false;
	/* The keys readers add themselves (perfabi::name::RESERVED_LABEL_KEYS). */
	return strcmp(k, "cpu") && strcmp(k, "le") && strcmp(k, "lower_bound") &&
	       strcmp(k, "upper_bound");
}

/*
 * An instance string: at most 63 bytes of printable ASCII without space,
 * '"' or backslash (perfabi::name::check_instance); empty is the family's
 * rule.
 */
static bool instance_ok(const char *v)
{
	size_t len = strnlen(v, PERFABI_INSTANCE_LEN), i;

	if (len >= PERFABI_INSTANCE_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (v[i] <= ' ' || v[i] > '~' || v[i] == '"' || v[i] == '\\')
			return false;
	return true;
}

/* A label value: 1..47 printable ASCII, spaces allowed, no '"' or backslash. */
static bool label_value_ok(const char *v)
{
	size_t len = strnlen(v, PERFABI_LABEL_VALUE_LEN), i;

	if (len == 0 || len >= PERFABI_LABEL_VALUE_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (v[i] < ' ' || v[i] > '~' || v[i] == '"' || v[i] == '\\')
			return false;
	return true;
}

/* perfabi::Unit::check(). */
static bool unit_ok(const struct perfabi_unit *u)
{
	int ds = u->dim_space, dt = u->dim_time, dc = u->dim_count;

	if (ds < -3 || ds > 3 || dt < -3 || dt > 3 || dc < -3 || dc > 3)
		return false;
	if (u->scale_space > 6 || u->scale_time > 5 || u->scale_count < -8 || u->scale_count > 7)
		return false;
	if ((!ds && u->scale_space) || (!dt && u->scale_time) || (!dc && u->scale_count) ||
	    u->reserved)
		return false;
	switch (u->quantity) {
	case PERFABI_QUANTITY_PLAIN:
		return true;
	case PERFABI_QUANTITY_PAGES:
		return !ds && !dt && dc == 1 && !u->scale_count;
	case PERFABI_QUANTITY_RATIO:
		return !ds && !dt && !dc;
	default:
		return false;
	}
}

/*
 * A family's name (spec §5.1, perfabi::name::check_family_name): the 1.0
 * rule, and every part starts with a letter (a PCP name component).
 */
static bool family_name_ok(const char *n)
{
	size_t i, len = strnlen(n, PERFABI_NAME_LEN);

	if (!perfabi_name_ok(n))
		return false;
	for (i = 0; i + 1 < len; i++)
		if (n[i] == '.' && !((n[i + 1] >= 'a' && n[i + 1] <= 'z') ||
				     (n[i + 1] >= 'A' && n[i + 1] <= 'Z')))
			return false;
	return true;
}

/*
 * perfabi::FamilySpec::entry()'s checks (and the kernel's: a peak is
 * unsigned), as errno: -E2BIG for too many buckets, else -EINVAL.
 */
static int desc_check(const struct perfabi_family_desc *d, const char *help, const char *dim,
		      u32 value_type)
{
	u32 i;

	if (!family_name_ok(d->name) || !help_ok(help) ||
	    (dim[0] && !key_ok(dim, PERFABI_DIMENSION_LEN)) || !unit_ok(&d->unit))
		return -EINVAL;
	if (value_type != PERFABI_TYPE_U64 && value_type != PERFABI_TYPE_I64)
		return -EINVAL;
	switch (d->kind) {
	case PERFABI_KIND_COUNTER:
	case PERFABI_KIND_GAUGE:
		break;
	case PERFABI_KIND_PEAK:
		if (value_type != PERFABI_TYPE_U64)
			return -EINVAL;
		break;
	case PERFABI_KIND_HISTOGRAM:
		if (value_type != PERFABI_TYPE_U64)
			return -EINVAL;
		if (d->nr_buckets > PERFABI_MAX_BUCKETS)
			return -E2BIG;
		if (d->nr_buckets < PERFABI_MIN_BUCKETS)
			return -EINVAL;
		if (d->bucket_layout == PERFABI_BUCKETS_LOG2)
			return d->bounds || d->log2_first + (u64)d->nr_buckets - 2 > 63 ? -EINVAL : 0;
		if (d->bucket_layout != PERFABI_BUCKETS_EXPLICIT || !d->bounds || d->log2_first)
			return -EINVAL;
		for (i = 1; i + 1 < d->nr_buckets; i++)
			if (d->bounds[i - 1] >= d->bounds[i])
				return -EINVAL;
		return 0;
	default:
		return -EINVAL;
	}
	/* Not a histogram: no bucket fields. */
	return d->nr_buckets || d->bucket_layout || d->log2_first || d->bounds ? -EINVAL : 0;
}

/* The live family a handle names, with its slot; NULL for any other value. */
static struct perfabi_kfamily *family_of(struct perfabi_seg *s, struct perfabi_family_handle *f,
					 u32 *slot)
{
	unsigned long h = (unsigned long)f, i = (h & FAMILY_SLOT_MASK) - 1;

	if (!s->kfam || i >= s->geo.max_families || s->kfam[i].handle != (long)h || !h)
		return NULL;
	*slot = i;
	return &s->kfam[i];
}

/* The member slot of a live member handle, or -1. */
static long member_of(struct perfabi_seg *s, struct perfabi_member_handle *m)
{
	long h = (long)m;
	u32 i;

	if (!s->kmem || !h)
		return -1;
	for (i = 0; i < s->mems_used; i++)
		if (s->kmem[i].handle == h)
			return i;
	return -1;
}

/*
 * Takes a live member out: its key no longer matches (hot-path calls are
 * refused from now on), its entry FREE, its value words free for reuse
 * after a grace period. Inside a generation change.
 */
static void member_free(struct perfabi_seg *s, u32 slot)
{
	struct perfabi_kmember *km = &s->kmem[slot];
	unsigned long index = perfabi_id_index(km->handle);

	WRITE_ONCE(perfabi_keys[index].handle, perfabi_id_empty(index));
	WRITE_ONCE(s->members[slot].state, PERFABI_SLOT_FREE);
	bitmap_clear(s->vused, km->value_slot, km->words);
	km->handle = 0;
	s->reuse_needs_gp = true;
}

struct perfabi_family_handle *perfabi_family_add(const struct perfabi_family_desc *d)
{
	struct perfabi_seg *s = &perfabi_seg;
	struct perfabi_kfamily *kf;
	struct perfabi_family *e;
	const char *help, *dim;
	u32 slot, value_type, i;
	int err;
	u64 g;

	if (!d || !d->name)
		return ERR_PTR(-EINVAL);
	help = d->help ?: "";
	dim = d->dimension ?: "";
	value_type = d->value_type ?: PERFABI_TYPE_U64;
	err = desc_check(d, help, dim, value_type);
	if (err)
		return ERR_PTR(err);
	mutex_lock(&perfabi_meta_lock);
	if (perfabi_name_taken(s, d->name, true)) {
		err = -EEXIST;
		goto out;
	}
	for (slot = 0; slot < s->fams_used && s->kfam[slot].handle; slot++)
		;
	if (slot >= s->geo.max_families) {	/* also: no family tables */
		err = -ENOSPC;
		goto out;
	}
	if (slot < s->fams_used)
		perfabi_reuse_after_gp(s);	/* observers may read its old bounds */

	kf = &s->kfam[slot];
	memset(kf, 0, sizeof(*kf));
	kf->words = 1;
	switch (d->kind) {
	case PERFABI_KIND_PEAK:
		kf->tag = PERFABI_TAG_PEAK;
		break;
	case PERFABI_KIND_HISTOGRAM:
		kf->words = 2 + d->nr_buckets;
		if (d->bucket_layout == PERFABI_BUCKETS_LOG2) {
			kf->tag = PERFABI_TAG_LOG2;
			kf->info = d->log2_first | (unsigned long)d->nr_buckets << 8;
		} else {
			kf->tag = PERFABI_TAG_EXPLICIT;
			for (i = 0; i < PERFABI_MAX_BUCKETS; i++)
				kf->bounds[i] = i + 1 < d->nr_buckets ? d->bounds[i] : U64_MAX;
			kf->info = (unsigned long)kf->bounds;
		}
		break;
	default:
		kf->tag = PERFABI_TAG_ADD;
	}

	g = perfabi_gen_write_begin(s->hdr);
	e = &s->families[slot];
	memset(e, 0, sizeof(*e));
	strscpy(e->name, d->name, sizeof(e->name));
	strscpy(e->help, help, sizeof(e->help));
	strscpy(e->dimension, dim, sizeof(e->dimension));
	e->reg_id = ++s->next_reg;
	e->kind = d->kind;
	e->unit = d->unit;
	e->value_type = value_type;
	if (d->kind == PERFABI_KIND_HISTOGRAM) {
		e->nr_buckets = d->nr_buckets;
		e->bucket_layout = d->bucket_layout;
		e->log2_first = d->log2_first;
		if (d->bucket_layout == PERFABI_BUCKETS_EXPLICIT)
			memcpy(e->bounds, d->bounds, (d->nr_buckets - 1) * sizeof(u64));
	}
	e->state = PERFABI_SLOT_LIVE;
	if (slot == s->fams_used) {
		s->fams_used++;
		WRITE_ONCE(s->fh->families_used, s->fams_used);
	}
	perfabi_gen_write_end(s->hdr, g);
	kf->handle = (long)((e->reg_id & 0xffffffffULL) << FAMILY_SLOT_BITS | (slot + 1));
	mutex_unlock(&perfabi_meta_lock);
	return (struct perfabi_family_handle *)kf->handle;
out:
	mutex_unlock(&perfabi_meta_lock);
	return ERR_PTR(err);
}
EXPORT_SYMBOL_GPL(perfabi_family_add);

int perfabi_family_del(struct perfabi_family_handle *f)
{
	struct perfabi_seg *s = &perfabi_seg;
	struct perfabi_kfamily *kf;
	u32 slot, i;
	u64 g;

	mutex_lock(&perfabi_meta_lock);
	kf = family_of(s, f, &slot);
	if (!kf) {
		mutex_unlock(&perfabi_meta_lock);
		return -ENOENT;
	}
	/* The family and its instances in one generation change. */
	g = perfabi_gen_write_begin(s->hdr);
	for (i = 0; i < s->mems_used; i++)
		if (s->kmem[i].handle && s->kmem[i].family == slot)
			member_free(s, i);
	WRITE_ONCE(s->families[slot].state, PERFABI_SLOT_FREE);
	perfabi_gen_write_end(s->hdr, g);
	kf->handle = 0;
	kvfree(kf->names);
	kf->names = NULL;
	kf->nr_names = 0;
	kf->cap_names = 0;
	s->reuse_needs_gp = true;
	mutex_unlock(&perfabi_meta_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(perfabi_family_del);

/*
 * The instance number of @instance in family @kf: the one it had before,
 * or the next one, remembered. -ENOSPC past MAX_NAMES, -ENOMEM.
 */
static long instance_number(struct perfabi_kfamily *kf, const char *instance)
{
	u32 i;

	for (i = 0; i < kf->nr_names; i++)
		if (!strcmp(kf->names[i], instance))
			return i;
	if (kf->nr_names == MAX_NAMES)
		return -ENOSPC;
	if (kf->nr_names == kf->cap_names) {
		u32 cap = kf->cap_names ? 2 * kf->cap_names : 8;
		char (*names)[PERFABI_INSTANCE_LEN] = kvmalloc_array(cap, sizeof(*names), GFP_KERNEL);

		if (!names)
			return -ENOMEM;
		if (kf->nr_names)
			memcpy(names, kf->names, kf->nr_names * sizeof(*names));
		kvfree(kf->names);
		kf->names = names;
		kf->cap_names = cap;
	}
	strscpy(kf->names[kf->nr_names], instance, PERFABI_INSTANCE_LEN);
	return kf->nr_names++;
}

struct perfabi_member_handle *perfabi_instance_add(struct perfabi_family_handle *f,
						   const char *instance,
						   const struct perfabi_label *labels,
						   unsigned int nr)
{
	struct perfabi_seg *s = &perfabi_seg;
	struct perfabi_kfamily *kf;
	struct perfabi_member *e;
	struct perfabi_key *key;
	unsigned long start;
	u32 fslot, mslot, i, j, cpu;
	long id, handle;
	int err;
	u64 g;

	if (!instance)
		instance = "";
	if (nr > PERFABI_MAX_LABELS)
		return ERR_PTR(-E2BIG);
	if ((nr && !labels) || !instance_ok(instance))
		return ERR_PTR(-EINVAL);
	for (i = 0; i < nr; i++) {
		if (!key_ok(labels[i].key, PERFABI_LABEL_KEY_LEN) ||
		    !label_value_ok(labels[i].value))
			return ERR_PTR(-EINVAL);
		for (j = 0; j < i; j++)
			if (!strcmp(labels[i].key, labels[j].key))
				return ERR_PTR(-EINVAL);
	}
	mutex_lock(&perfabi_meta_lock);
	kf = family_of(s, f, &fslot);
	if (!kf) {
		err = -ENOENT;
		goto out;
	}
	/* The instance string is empty exactly when the family has no dimension. */
	if (!s->families[fslot].dimension[0] != !instance[0]) {
		err = -EINVAL;
		goto out;
	}
	for (i = 0; i < nr; i++)
		if (!strcmp(labels[i].key, s->families[fslot].dimension)) {
			err = -EINVAL;
			goto out;
		}
	mslot = s->mems_used;
	for (i = 0; i < s->mems_used; i++) {
		if (!s->kmem[i].handle) {
			mslot = min(mslot, i);
			continue;
		}
		if (s->kmem[i].family == fslot && !strcmp(s->members[i].instance, instance)) {
			err = -EEXIST;
			goto out;
		}
	}
	if (mslot >= s->geo.max_members) {
		err = -ENOSPC;
		goto out;
	}
	start = bitmap_find_next_zero_area(s->vused, s->geo.max_instances, 0, kf->words, 0);
	if (start + kf->words > s->geo.max_instances) {
		err = -ENOSPC;
		goto out;
	}
	id = instance_number(kf, instance);
	if (id < 0) {
		err = id;
		goto out;
	}
	if (start < s->used)
		perfabi_reuse_after_gp(s);	/* a racing call may still write its old words */

	s->id_gen[start] = s->id_gen[start] % PERFABI_ID_GEN_MAX + 1;
	handle = (long)s->id_gen[start] << PERFABI_ID_PTR_BITS |
		 (long)((unsigned long)perfabi_slot_counter(s, start) & PERFABI_ID_PTR_MASK) |
		 kf->tag;
	key = &perfabi_keys[perfabi_id_index(handle)];
	/* Nothing matches the entry yet: @info before the handle is published. */
	WRITE_ONCE(key->info, kf->info);

	g = perfabi_gen_write_begin(s->hdr);
	/* The words are free: no hot-path call writes them, zeroing cannot race. */
	for (i = 0; i < kf->words; i++)
		for_each_possible_cpu(cpu)
			WRITE_ONCE(*per_cpu_ptr(perfabi_slot_counter(s, start + i), cpu), 0);
	e = &s->members[mslot];
	memset(e, 0, sizeof(*e));
	strscpy(e->instance, instance, sizeof(e->instance));
	e->reg_id = ++s->next_reg;
	e->family = fslot;
	e->value_slot = start;
	e->instance_id = id;
	for (i = 0; i < nr; i++) {
		strscpy(e->labels[i].key, labels[i].key, sizeof(e->labels[i].key));
		strscpy(e->labels[i].value, labels[i].value, sizeof(e->labels[i].value));
	}
	e->state = PERFABI_SLOT_LIVE;
	if (mslot == s->mems_used) {
		s->mems_used++;
		WRITE_ONCE(s->fh->members_used, s->mems_used);
	}
	if (start + kf->words > s->used) {
		s->used = start + kf->words;
		WRITE_ONCE(s->hdr->instances_used, s->used);
	}
	perfabi_gen_write_end(s->hdr, g);
	bitmap_set(s->vused, start, kf->words);
	s->kmem[mslot] = (struct perfabi_kmember) {
		.handle = handle, .family = fslot, .value_slot = start, .words = kf->words,
	};
	/* Hot-path calls may use the handle from now on. */
	smp_store_release(&key->handle, handle);
	mutex_unlock(&perfabi_meta_lock);
	return (struct perfabi_member_handle *)handle;
out:
	mutex_unlock(&perfabi_meta_lock);
	return ERR_PTR(err);
}
EXPORT_SYMBOL_GPL(perfabi_instance_add);

int perfabi_instance_del(struct perfabi_member_handle *m)
{
	struct perfabi_seg *s = &perfabi_seg;
	long slot;
	u64 g;

	mutex_lock(&perfabi_meta_lock);
	slot = member_of(s, m);
	if (slot < 0) {
		mutex_unlock(&perfabi_meta_lock);
		return -ENOENT;
	}
	g = perfabi_gen_write_begin(s->hdr);
	member_free(s, slot);
	perfabi_gen_write_end(s->hdr, g);
	mutex_unlock(&perfabi_meta_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(perfabi_instance_del);

int perfabi_peak_reset(struct perfabi_member_handle *m)
{
	struct perfabi_seg *s = &perfabi_seg;
	u64 __percpu *w;
	unsigned int cpu;
	long slot;
	u64 g;

	mutex_lock(&perfabi_meta_lock);
	slot = member_of(s, m);
	if (slot < 0 || (s->kmem[slot].handle & PERFABI_TAG_MASK) != PERFABI_TAG_PEAK) {
		mutex_unlock(&perfabi_meta_lock);
		return slot < 0 ? -ENOENT : -EINVAL;
	}
	w = perfabi_member_counter(s->kmem[slot].handle);
	/* All CPUs' marks to 0 in one generation change (spec 7.3). */
	g = perfabi_gen_write_begin(s->hdr);
	for_each_possible_cpu(cpu)
		WRITE_ONCE(*per_cpu_ptr(w, cpu), 0);
	perfabi_gen_write_end(s->hdr, g);
	mutex_unlock(&perfabi_meta_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(perfabi_peak_reset);

u64 perfabi_generation(void)
{
	return READ_ONCE(perfabi_seg.hdr->gen2);
}
EXPORT_SYMBOL_GPL(perfabi_generation);
