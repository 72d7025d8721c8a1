/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The block group, disk.dev.* per whole disk from block_rq_issue and
 * block_rq_complete, counted as perfabi_sources.ko counts them (read
 * kmod/perfabi_src_block.c's header comment: as /proc/diskstats does):
 * bytes at every completion event; a request's count and latency once,
 * when it completes fully; the op group is diskstats' op_stat_group()
 * (flush, discard, write, read); passthrough requests are not counted; a
 * data request of a flush sequence is counted at the sequence's end. The
 * latency is observed of every request issued to the driver and
 * completed (flushes included); a request the block layer completes
 * itself, never issued (the data-less write of a flush sequence: the
 * queue's own flush request goes to the driver in its place), is counted
 * but has no latency.
 *
 * Disks are found by the loader (src/block.rs, /sys/block, every 250 ms)
 * and put in `disks` under their key (dev_t, diskseq): diskseq is never
 * reused, so a disk removed and another created with the same number is
 * a new instance. A request of a disk not (yet) in `disks` is not counted.
 */
#ifndef __PERFABI_BLOCK_BPF_H
#define __PERFABI_BLOCK_BPF_H

/* Each op's bytes family is as far from its count family as read's. */
#define BYTES_FROM_COUNT (PERFABI_FAM_DISK_READ_BYTES_AT - PERFABI_FAM_DISK_READ_AT)
_Static_assert(PERFABI_FAM_DISK_WRITE_BYTES_AT - PERFABI_FAM_DISK_WRITE_AT == BYTES_FROM_COUNT &&
	       PERFABI_FAM_DISK_DISCARD_BYTES_AT - PERFABI_FAM_DISK_DISCARD_AT == BYTES_FROM_COUNT,
	       "disk.dev.*_bytes follow their counts at one distance");

/* A disk's key in `disks` (src/block.rs builds the same bytes). */
struct disk_key {
	__u32 devt;	/* MKDEV(major, first_minor): major << 20 | minor */
	__u32 pad;	/* 0 */
	__u64 seq;	/* diskseq, 0 where the kernel has none */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct disk_key);
	__type(value, struct inst);
} disks SEC(".maps");

/* Issue time (CLOCK_MONOTONIC ns) of each request in flight, by its
 * address. LRU: a request never completed (a device gone) is evicted
 * rather than a new one refused. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} issued SEC(".maps");

/* Full completions seen of known disks, and of those the requests without
 * an issue stamp (never issued, issued before the programs were attached,
 * or evicted: the latency not observed): the loader's tests read them. */
__u64 nr_disk_done = 0;
__u64 nr_disk_unstamped = 0;

/* The request ops diskstats groups by (enum req_op; CO-RE, with the
 * values every kernel since 4.10 has as fallbacks). */
static __always_inline __u32 op_value(__u32 which)
{
	switch (which) {
	case 0:
		if (bpf_core_enum_value_exists(enum req_op, REQ_OP_FLUSH))
			return bpf_core_enum_value(enum req_op, REQ_OP_FLUSH);
		return 2;
	case 1:
		if (bpf_core_enum_value_exists(enum req_op, REQ_OP_DISCARD))
			return bpf_core_enum_value(enum req_op, REQ_OP_DISCARD);
		return 3;
	case 2:
		if (bpf_core_enum_value_exists(enum req_op, REQ_OP_DRV_IN))
			return bpf_core_enum_value(enum req_op, REQ_OP_DRV_IN);
		return 34;
	default:
		if (bpf_core_enum_value_exists(enum req_op, REQ_OP_DRV_OUT))
			return bpf_core_enum_value(enum req_op, REQ_OP_DRV_OUT);
		return 35;
	}
}

/* The bit of RQF_FLUSH_SEQ in rq_flags, set by the loader from the
 * kernel's BTF (src/block.rs: an anonymous enum's in 6.12, which no CO-RE
 * relocation names; the macro (1 << 4) in 6.1). */
const volatile __u32 rqf_flush_seq_bit = 4;

static __always_inline __u32 rqf_flush_seq(void)
{
	return 1U << (rqf_flush_seq_bit & 31);
}

/* The request's op (REQ_OP_MASK: its low 8 bits). */
static __always_inline __u32 rq_op(bool btf, struct request *rq)
{
	return KREAD(btf, rq, cmd_flags) & 0xff;
}

/* Whether rq is counted at all: it has a disk, and is no passthrough. */
static __always_inline struct gendisk *rq_disk(bool btf, struct request *rq)
{
	__u32 op = rq_op(btf, rq);
	struct request_queue *q;

	if (op == op_value(2) || op == op_value(3))
		return 0;
	q = KREAD(btf, rq, q);
	return q ? KREAD(btf, q, disk) : 0;
}

static __always_inline struct inst *disk_find(bool btf, struct gendisk *disk)
{
	struct disk_key k = {};

	k.devt = ((__u32)KREAD(btf, disk, major) << 20) | (__u32)KREAD(btf, disk, first_minor);
	if (bpf_core_field_exists(disk->diskseq))
		k.seq = KREAD(btf, disk, diskseq);
	return bpf_map_lookup_elem(&disks, &k);
}

/* block_rq_issue: stamp the request (every issue: a requeued one is
 * issued again). */
static __always_inline void handle_issue(bool btf, struct request *rq)
{
	__u64 key = (__u64)rq, now = bpf_ktime_get_ns();

	if (!rq_disk(btf, rq))
		return;
	bpf_map_update_elem(&issued, &key, &now, BPF_ANY);
}

/* block_rq_complete: bytes always, the count and latency at the full
 * completion. */
static __always_inline void handle_complete(bool btf, struct request *rq,
					    unsigned int nr_bytes)
{
	struct gendisk *disk = rq_disk(btf, rq);
	__u64 key = (__u64)rq, *ts, now;
	__u32 op, at, slot;
	struct inst *d;
	bool done;

	if (!disk)
		return;
	op = rq_op(btf, rq);
	done = nr_bytes >= KREAD(btf, rq, __data_len);
	/* A data request inside a flush sequence completes twice: its data
	 * (RQF_FLUSH_SEQ set), then the sequence's end (flag cleared, 0
	 * bytes); count it at the end, as diskstats does. */
	if (done && (KREAD(btf, rq, rq_flags) & rqf_flush_seq()) && op != op_value(0))
		done = false;
	d = disk_find(btf, disk);
	if (!d) {
		/* Not (yet) a known disk: still free its stamp. */
		if (done)
			bpf_map_delete_elem(&issued, &key);
		return;
	}
	slot = d->slot;
	if (op == op_value(0))
		at = PERFABI_FAM_DISK_FLUSH_AT;
	else if (op == op_value(1))
		at = PERFABI_FAM_DISK_DISCARD_AT;
	else if (op & 1)	/* op_is_write() */
		at = PERFABI_FAM_DISK_WRITE_AT;
	else
		at = PERFABI_FAM_DISK_READ_AT;
	if (at != PERFABI_FAM_DISK_FLUSH_AT && nr_bytes)
		value_add(slot + at + BYTES_FROM_COUNT, nr_bytes);
	if (!done)
		return;
	value_add(slot + at, 1);
	count(nr_disk_done);
	ts = bpf_map_lookup_elem(&issued, &key);
	if (!ts) {
		count(nr_disk_unstamped);
		return;
	}
	now = bpf_ktime_get_ns() - *ts;
	bpf_map_delete_elem(&issued, &key);
	if ((__s64)now >= 0)
		hist_observe(slot + PERFABI_FAM_DISK_LATENCY_AT, now);
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(tp_rq_issue, struct request *rq)
{
	handle_issue(true, rq);
	return 0;
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(raw_rq_issue, struct request *rq)
{
	handle_issue(false, rq);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(tp_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	handle_complete(true, rq, nr_bytes);
	return 0;
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(raw_rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	handle_complete(false, rq, nr_bytes);
	return 0;
}

#endif /* __PERFABI_BLOCK_BPF_H */
