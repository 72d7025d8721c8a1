/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `control`: the segment's metadata after freezing, from BPF only
 * (spec §9.1). A BPF_PROG_TYPE_SYSCALL program the loader runs with
 * BPF_PROG_TEST_RUN, one caller at a time (the loader's mutex: §7.3's
 * single metadata writer). src/control.rs is its other half.
 *
 * CONTROL_TABLES applies the change the loader staged in `stage` (a plain
 * array map the loader writes, never the segment): word stores into the
 * family and member tables and the *_used counts, and value runs zeroed on
 * every CPU, all inside one generation change (§7.3): gen1 + 1 before,
 * gen2 = gen1 after, both fully ordered. Every store is checked first;
 * a change with one store outside those words is refused whole.
 */
#ifndef __PERFABI_CONTROL_BPF_H
#define __PERFABI_CONTROL_BPF_H

/* Where control may store: words [table_lo, table_hi) of the segment (the
 * family and member tables), and the *_used header words. */
const volatile __u32 table_lo = 0;
const volatile __u32 table_hi = 0;

#define STAGE_STORES 1024
#define STAGE_ZEROS 64
/* The longest run zeroed (a value run, PERFABI_FAM_<group>_WORDS). */
#define ZERO_MAX_WORDS 64

struct store {
	__u32 at;	/* word index in the segment */
	__u32 pad;
	__u64 value;
};

struct zero_run {
	__u32 slot;	/* first value slot */
	__u32 words;	/* 1..=ZERO_MAX_WORDS */
};

struct stage {
	__u32 nr_stores;
	__u32 nr_zeros;
	struct store store[STAGE_STORES];
	struct zero_run zero[STAGE_ZEROS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stage);
} stage SEC(".maps");

/* What the loader asks of `control` (src/control.rs mirrors it). */
enum control_op {
	CONTROL_BEAT = 1,	/* heartbeat_ns = now */
	CONTROL_CLOSE = 2,	/* heartbeat_ns = now, flags |= CLOSED */
	CONTROL_TABLES = 3,	/* apply `stage` under one generation change */
};

struct control_args {
	__u32 op;
	__u32 pad;
};

static __always_inline struct stage *staged(void)
{
	__u32 key = 0;

	return bpf_map_lookup_elem(&stage, &key);
}

static __always_inline bool store_allowed(__u32 at)
{
	return (at >= table_lo && at < table_hi) || at == HDR_INSTANCES_USED ||
	       at == HDR_FAMILIES_USED || at == HDR_MEMBERS_USED;
}

/* bpf_loop callbacks: ctx is a flag set when something is refused. */
static long check_store(__u64 i, void *ctx)
{
	struct stage *s = staged();

	if (!s || i >= STAGE_STORES || !store_allowed(s->store[i].at)) {
		*(bool *)ctx = true;
		return 1;
	}
	return 0;
}

static long check_zero(__u64 i, void *ctx)
{
	struct stage *s = staged();

	if (!s || i >= STAGE_ZEROS || !s->zero[i].words || s->zero[i].words > ZERO_MAX_WORDS ||
	    (counters_word + s->zero[i].slot) % PAGE_WORDS + s->zero[i].words > PAGE_WORDS ||
	    (counters_word + s->zero[i].slot) / PAGE_WORDS >= pages_per_cpu) {
		*(bool *)ctx = true;
		return 1;
	}
	return 0;
}

static long do_store(__u64 i, void *ctx)
{
	struct stage *s = staged();
	struct page_words *p;
	__u32 at, key;

	if (!s || i >= STAGE_STORES)
		return 1;
	at = s->store[i].at;
	key = at / PAGE_WORDS;
	p = bpf_map_lookup_elem(&segment, &key);
	if (!p)
		return 1;
	*(volatile __u64 *)&p->w[at % PAGE_WORDS] = s->store[i].value;
	return 0;
}

/* Zero run i / nr_cpus on CPU i % nr_cpus. */
static long do_zero(__u64 i, void *ctx)
{
	struct stage *s = staged();
	struct page_words *p;
	__u32 z, cpu, at, key, n;

	if (!s || !nr_cpus)
		return 1;
	z = i / nr_cpus;
	cpu = i % nr_cpus;
	if (z >= STAGE_ZEROS)
		return 1;
	at = counters_word + s->zero[z].slot;
	n = s->zero[z].words;
	key = cpu_page0 + cpu * pages_per_cpu + at / PAGE_WORDS;
	p = bpf_map_lookup_elem(&segment, &key);
	if (!p)
		return 1;
	at %= PAGE_WORDS;
	for (__u32 k = 0; k < ZERO_MAX_WORDS; k++) {
		__u32 w = at + k;

		/* Each index bounded where it is used (not a pointer that
		 * clang would step, whose bounds the verifier loses). */
		barrier_var(w);
		if (k >= n || w >= PAGE_WORDS)
			break;
		*(volatile __u64 *)&p->w[w] = 0;
	}
	return 0;
}

/* Returns 0, or 1 if the arguments are refused (nothing changed). */
SEC("syscall")
int control(struct control_args *ctx)
{
	__u32 op = ctx->op, nr_stores, nr_zeros;
	__u64 *h = header_page();
	__u64 now = bpf_ktime_get_boot_ns(), g, old;
	struct stage *s;
	bool refused = false;

	if (!h)
		return 1;
	switch (op) {
	case CONTROL_BEAT:
		*(volatile __u64 *)&h[HDR_HEARTBEAT] = now;
		return 0;
	case CONTROL_CLOSE:
		*(volatile __u64 *)&h[HDR_HEARTBEAT] = now;
		old = __sync_fetch_and_or(&h[HDR_FLAGS], FLAG_CLOSED);
		use(old);
		return 0;
	case CONTROL_TABLES:
		s = staged();
		if (!s)
			return 1;
		nr_stores = s->nr_stores;
		nr_zeros = s->nr_zeros;
		if (nr_stores > STAGE_STORES || nr_zeros > STAGE_ZEROS)
			return 1;
		bpf_loop(nr_stores, check_store, &refused, 0);
		bpf_loop(nr_zeros, check_zero, &refused, 0);
		if (refused)
			return 1;
		/* gen1 before the change, fully ordered (fence(Release)). */
		g = __sync_fetch_and_add(&h[HDR_GEN1], 1) + 1;
		bpf_loop(nr_stores, do_store, 0, 0);
		bpf_loop(nr_zeros * nr_cpus, do_zero, 0, 0);
		/* gen2 after the change, fully ordered (Release). */
		old = __sync_lock_test_and_set(&h[HDR_GEN2], g);
		use(old);
		return 0;
	}
	return 1;
}

#endif /* __PERFABI_CONTROL_BPF_H */
