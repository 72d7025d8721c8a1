// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources, families: the families of the kernel sources, their
 * descriptors generated from the one definition (perfabi_families.h, from
 * kmod/families), registered a subsystem's range at a time; the
 * instances the subsystems add and delete; and perfabi_sources.dropped,
 * where what was lost is counted. Every subsystem calls these; they call
 * no subsystem.
 */
#include <linux/build_bug.h>
#include <linux/err.h>
#include <linux/printk.h>

#include "perfabi_src.h"

/* The definition's descriptors, at their indices. */
#define SRC_DESC(id, n, h, dim, k, u, layout, nb, l2, writers)			\
	[PERFABI_FAM_##id] = { .name = (n), .help = (h), .dimension = (dim),	\
			       .kind = (k), .unit = u, .bucket_layout = (layout),	\
			       .nr_buckets = (nb), .log2_first = (l2) },
static const struct perfabi_family_desc src_descs[PERFABI_FAM_MAX] = {
	PERFABI_FAMILIES(SRC_DESC)
};

/* Every family of the definition is the module's: its subsystems register them all. */
#define SRC_BY_MODULE(id, n, h, dim, k, u, layout, nb, l2, writers)		\
	&& ((writers) & PERFABI_FAM_BY_MODULE)
static_assert(1 PERFABI_FAMILIES(SRC_BY_MODULE),
	      "perfabi_families.h has a family perfabi_sources.ko does not publish");

static struct perfabi_family_handle *src_fams[PERFABI_FAM_MAX];

static const struct perfabi_family_desc dropped_desc =
	SRC_COUNTER("perfabi_sources.dropped", "Observations or instances perfabi_sources lost",
		    "reason", PERFABI_UNIT_COUNT);
static const char *const drop_names[SRC_NR_DROPS] = {
	[SRC_DROP_REQUEST_TABLE] = "request_table_full",
	[SRC_DROP_WAKEUP_TABLE] = "wakeup_table_full",
	[SRC_DROP_NO_ROOM] = "no_room",
};
static struct perfabi_family_handle *dropped_fam;
struct perfabi_member_handle *src_dropped[SRC_NR_DROPS];

/**
 * src_families_add() - register the families @first..@last
 * @first: the first family (enum perfabi_fam)
 * @last: the last one, included
 *
 * Context: process context; may sleep.
 * Return: 0, or the first error (logged; the families added are deleted).
 */
int src_families_add(enum perfabi_fam first, enum perfabi_fam last)
{
	enum perfabi_fam i;

	for (i = first; i <= last; i++) {
		struct perfabi_family_handle *f = perfabi_family_add(&src_descs[i]);

		if (IS_ERR(f)) {
			pr_warn(SRC_PFX "cannot add family %s: %ld\n", src_descs[i].name,
				PTR_ERR(f));
			if (i > first)
				src_families_del(first, i - 1);
			return PTR_ERR(f);
		}
		src_fams[i] = f;
	}
	return 0;
}

/**
 * src_families_del() - delete the families @first..@last and their instances
 * @first: the first family (enum perfabi_fam)
 * @last: the last one, included
 *
 * Context: process context; may sleep.
 */
void src_families_del(enum perfabi_fam first, enum perfabi_fam last)
{
	enum perfabi_fam i;

	for (i = first; i <= last; i++) {
		if (src_fams[i])
			perfabi_family_del(src_fams[i]);
		src_fams[i] = NULL;
	}
}

/**
 * src_instances_add() - add one instance string to several families
 * @fams: the families
 * @nr: how many
 * @inst: the instance string (src_instance_name()), or "" for no dimension
 * @m: where the @nr member handles go
 *
 * All or nothing: on an error the members added are deleted. No room in
 * the segment (-ENOSPC) is logged once here and counted in
 * perfabi_sources.dropped{reason="no_room"}; the caller skips the instance
 * (and remembers it, so as not to log it again).
 *
 * Context: process context; may sleep.
 * Return: 0 or a negative errno.
 */
int src_instances_add(const enum perfabi_fam *fams, unsigned int nr, const char *inst,
		      struct perfabi_member_handle **m)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		m[i] = perfabi_instance_add(src_fams[fams[i]], inst, NULL, 0);
		if (IS_ERR(m[i])) {
			long err = PTR_ERR(m[i]);

			m[i] = NULL;
			src_instances_del(m, i);
			if (err == -ENOSPC) {
				pr_info(SRC_PFX "no room for %s \"%s\": instance skipped\n",
					src_descs[fams[i]].name, inst);
				perfabi_member_add(src_dropped[SRC_DROP_NO_ROOM], 1);
			} else {
				pr_warn(SRC_PFX "cannot add %s \"%s\": %ld\n",
					src_descs[fams[i]].name, inst, err);
			}
			return err;
		}
	}
	return 0;
}

/**
 * src_instances_del() - delete members src_instances_add() added
 * @m: their handles (NULL ones are skipped); cleared
 * @nr: how many
 *
 * Context: process context; may sleep.
 */
void src_instances_del(struct perfabi_member_handle **m, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		if (m[i])
			perfabi_instance_del(m[i]);
		m[i] = NULL;
	}
}

/**
 * src_instance_name() - make an instance string of a kernel name
 * @dst: SRC_INSTANCE_LEN bytes
 * @src: the name (NUL-terminated)
 *
 * Bytes other than printable ASCII, and space, '"' and '\\', become '_'
 * (README.md); at most 63 bytes are kept; an empty name becomes "_".
 */
void src_instance_name(char *dst, const char *src)
{
	size_t i;

	for (i = 0; i < SRC_INSTANCE_LEN - 1 && src[i]; i++) {
		char c = src[i];

		dst[i] = (c > ' ' && c < 0x7f && c != '"' && c != '\\') ? c : '_';
	}
	if (!i)
		dst[i++] = '_';
	dst[i] = '\0';
}

/**
 * src_dropped_add() - register perfabi_sources.dropped and its instances
 *
 * An instance that cannot be added is left NULL: perfabi_member_add()
 * refuses a NULL handle, so counting it is a no-op.
 *
 * Context: process context; may sleep.
 * Return: 0, or the error of the family (logged).
 */
int src_dropped_add(void)
{
	unsigned int i;

	dropped_fam = perfabi_family_add(&dropped_desc);
	if (IS_ERR(dropped_fam)) {
		long err = PTR_ERR(dropped_fam);

		pr_err(SRC_PFX "cannot add perfabi_sources.dropped: %ld\n", err);
		dropped_fam = NULL;
		return err;
	}
	for (i = 0; i < SRC_NR_DROPS; i++) {
		src_dropped[i] = perfabi_instance_add(dropped_fam, drop_names[i], NULL, 0);
		/* A NULL handle is refused by perfabi_member_add(): a no-op. */
		if (IS_ERR(src_dropped[i]))
			src_dropped[i] = NULL;
	}
	return 0;
}

/**
 * src_dropped_del() - delete perfabi_sources.dropped (no probe may count any more)
 *
 * Context: process context; may sleep.
 */
void src_dropped_del(void)
{
	if (dropped_fam)
		perfabi_family_del(dropped_fam);
	dropped_fam = NULL;
}
