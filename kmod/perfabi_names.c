// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi, names: the naming rule of spec 5 and the clash check against
 * the live names of the 1.0 table and the family table (spec 5, 5.1),
 * for perfabi_add() and perfabi_family_add() alike.
 */
#include <linux/kernel.h>
#include <linux/string.h>

#include "perfabi.h"
#include "perfabi_internal.h"

/*
 * ASCII only: the kernel's isalpha() and isalnum() also take Latin-1
 * letters (0xc0..0xff), which the spec's names do not allow.
 */
static bool ascii_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool ascii_alnum(char c)
{
	return ascii_alpha(c) || (c >= '0' && c <= '9');
}

bool perfabi_name_ok(const char *n)
{
	size_t len = strnlen(n, PERFABI_NAME_LEN);
	bool part_start = true;
	size_t i;

	if (len == 0 || len >= PERFABI_NAME_LEN || !ascii_alpha(n[0]))
		return false;
	for (i = 0; i < len; i++) {
		char c = n[i];

		if (c == '.') {
			if (part_start)
				return false;
			part_start = true;
			continue;
		}
		if (part_start ? !(ascii_alpha(c) || c == '_') : !(ascii_alnum(c) || c == '_'))
			return false;
		part_start = false;
	}
	return !part_start;
}

/*
 * The key under which live names must be unique (spec §5, the Rust
 * perfabi::name::clash_key): dots as underscores, then every trailing
 * OpenMetrics sample suffix taken off, so that "a.b" and "a_b", "x" and
 * "x_total" never both live. @key holds PERFABI_NAME_LEN bytes.
 */
static void clash_key(const char *name, char *key)
{
	static const char *const reserved[] = {
		"_total", "_created", "_count", "_sum", "_bucket", "_gcount", "_gsum", "_info",
	};
	size_t len = strnlen(name, PERFABI_NAME_LEN - 1);
	size_t i;
	bool cut = true;

	for (i = 0; i < len; i++)
		key[i] = name[i] == '.' ? '_' : name[i];
	key[len] = 0;
	while (cut) {
		cut = false;
		for (i = 0; i < ARRAY_SIZE(reserved); i++) {
			size_t n = strlen(reserved[i]);

			if (len > n && !memcmp(key + len - n, reserved[i], n)) {
				len -= n;
				key[len] = 0;
				cut = true;
				break;
			}
		}
	}
}

/* perfabi::name::dotted_prefix(a, b): b is "a." followed by more. */
static bool dotted_prefix(const char *a, const char *b)
{
	size_t n = strlen(a);

	return !strncmp(a, b, n) && b[n] == '.';
}

/*
 * Whether @name clashes with a live name (spec 5, 5.1): a live 1.0 entry
 * or family has its clash key, or, when a family is involved (@family: the
 * new name is one), one name is a dotted prefix of the other. Two 1.0
 * entries may be dotted prefixes of each other, as in ABI 1.0.
 */
bool perfabi_name_taken(struct perfabi_seg *s, const char *name, bool family)
{
	char key[PERFABI_NAME_LEN], other[PERFABI_NAME_LEN];
	u32 i;

	clash_key(name, key);
	for (i = 0; i < s->used; i++) {
		const struct perfabi_instance *e = &s->instances[i];

		if (e->state != PERFABI_SLOT_LIVE)
			continue;
		clash_key(e->name, other);
		if (!strcmp(key, other) ||
		    (family && (dotted_prefix(e->name, name) || dotted_prefix(name, e->name))))
			return true;
	}
	for (i = 0; i < s->fams_used; i++) {
		const struct perfabi_family *f = &s->families[i];

		if (f->state != PERFABI_SLOT_LIVE)
			continue;
		clash_key(f->name, other);
		if (!strcmp(key, other) || dotted_prefix(f->name, name) || dotted_prefix(name, f->name))
			return true;
	}
	return false;
}
