/* SPDX-License-Identifier: GPL-2.0 */
/*
 * DAMON regions (spec §6.3) from damon:damon_aggregated, as the module's
 * kmod/perfabi_damon.c writes them: every region into the ring of the CPU
 * the kdamond thread runs on, numbered per (kdamond thread, target) so
 * that readers rebuild complete aggregations (§6.4). The tracepoint
 * carries neither intervals nor an aggregation index: the intervals are
 * the loader's (damon_sample_us, damon_aggr_us, as the module's
 * parameters), the index counts the aggregations seen per stream.
 *
 * The tracepoint's arguments changed in Linux 6.7 (the target pointer
 * dropped); the loader reads the running kernel's BTF and loads the
 * matching programs (src/damon.rs), or none where DAMON has no such
 * tracepoint.
 */
#ifndef __PERFABI_DAMON_BPF_H
#define __PERFABI_DAMON_BPF_H

/* The DAMON ring: word, in a block, of slot 0 (damon_offset / 8), and
 * slots per CPU (0: no ring, nothing recorded). */
const volatile __u32 damon_word = 0;
const volatile __u32 damon_capacity = 0;
const volatile __u32 damon_sample_us = 5000;
const volatile __u32 damon_aggr_us = 100000;

/* struct perfabi_cpu_head's damon_next and damon_dropped words (§6.1). */
#define CPU_DAMON_NEXT 8
#define CPU_DAMON_DROPPED 9
/* A record's words (struct perfabi_damon_record, 64 bytes). */
#define DAMON_RECORD_WORDS 8

struct damon_stream_key {
	__u32 monitor;	/* the kdamond thread */
	__u32 target;
};

struct damon_stream {
	__u64 aggregation;
	__u32 next_region;
	__u32 pad;
};

/* Each stream's aggregation index and next region index. A stream is one
 * kdamond thread's, so only that thread updates it. LRU: an old kdamond's
 * stream is the one evicted. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 256);
	__type(key, struct damon_stream_key);
	__type(value, struct damon_stream);
} damon_streams SEC(".maps");

/* Regions recorded: the loader's tests read it. */
__u64 nr_damon_regions = 0;

static __always_inline void record_region(bool btf, __u32 target_id, struct damon_region *r,
					  __u32 nr_regions)
{
	struct damon_stream_key k = {
		.monitor = (__u32)bpf_get_current_pid_tgid(),
		.target = target_id,
	};
	struct damon_stream fresh = {}, *st;
	__u64 *head = block_page(0), *w, old, aggregation;
	__u32 at, slot, region;
	bool outer;

	if (!head || !damon_capacity)
		return;
	if (nr_regions > damon_capacity) {
		/* An aggregation that cannot fit is never stored (§6.3). */
		old = __sync_fetch_and_add(&head[CPU_DAMON_DROPPED], 1);
		use(old);
		return;
	}
	st = bpf_map_lookup_elem(&damon_streams, &k);
	if (!st) {
		bpf_map_update_elem(&damon_streams, &k, &fresh, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&damon_streams, &k);
		if (!st)
			return;
	}
	if (st->next_region == 0 || st->next_region >= nr_regions) {
		st->aggregation++;
		st->next_region = 0;
	}
	aggregation = st->aggregation;
	region = st->next_region++;
	if (st->next_region >= nr_regions)
		st->next_region = 0;

	slot = *(volatile __u64 *)&head[CPU_DAMON_NEXT] % damon_capacity;
	at = damon_word + slot * DAMON_RECORD_WORDS;
	w = block_page(at / PAGE_WORDS);
	at %= PAGE_WORDS;
	barrier_var(at);
	if (!w || at > PAGE_WORDS - DAMON_RECORD_WORDS)
		return;
	/* §7.1, a multi-word update, nest-aware. */
	outer = seq_nest_begin(&head[0]);
	*(volatile __u64 *)&w[at + 0] = k.monitor;
	*(volatile __u64 *)&w[at + 1] = target_id;
	*(volatile __u64 *)&w[at + 2] = aggregation;
	*(volatile __u64 *)&w[at + 3] = region | (__u64)nr_regions << 32;
	*(volatile __u64 *)&w[at + 4] = KREAD(btf, r, ar.start);
	*(volatile __u64 *)&w[at + 5] = KREAD(btf, r, ar.end);
	*(volatile __u64 *)&w[at + 6] =
		KREAD(btf, r, nr_accesses) | (__u64)KREAD(btf, r, age) << 32;
	*(volatile __u64 *)&w[at + 7] = damon_sample_us | (__u64)damon_aggr_us << 32;
	*(volatile __u64 *)&head[CPU_DAMON_NEXT] = (slot + 1) % damon_capacity;
	seq_nest_end(&head[0], outer);
	count(nr_damon_regions);
}

/* Linux 6.7 and later: (unsigned int target_id, struct damon_region *r,
 * unsigned int nr_regions). */
SEC("tp_btf/damon_aggregated")
int BPF_PROG(tp_damon, unsigned int target_id, struct damon_region *r, unsigned int nr_regions)
{
	record_region(true, target_id, r, nr_regions);
	return 0;
}

SEC("raw_tp/damon_aggregated")
int BPF_PROG(raw_damon, unsigned int target_id, struct damon_region *r, unsigned int nr_regions)
{
	record_region(false, target_id, r, nr_regions);
	return 0;
}

/* Before 6.7: (struct damon_target *t, unsigned int target_id, struct
 * damon_region *r, unsigned int nr_regions). */
SEC("tp_btf/damon_aggregated")
int BPF_PROG(tp_damon_pre_6_7, void *t, unsigned int target_id, struct damon_region *r,
	     unsigned int nr_regions)
{
	record_region(true, target_id, r, nr_regions);
	return 0;
}

SEC("raw_tp/damon_aggregated")
int BPF_PROG(raw_damon_pre_6_7, void *t, unsigned int target_id, struct damon_region *r,
	     unsigned int nr_regions)
{
	record_region(false, target_id, r, nr_regions);
	return 0;
}

#endif /* __PERFABI_DAMON_BPF_H */
