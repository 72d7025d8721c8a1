// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi_sources, block: disk.dev.* per whole disk from block_rq_issue
 * and block_rq_complete.
 *
 * Counting as /proc/diskstats does: bytes at every completion event, as
 * the block layer adds sectors at every blk_update_request() (a partial
 * completion included); a request's count once, when it completes fully
 * (the event's nr_bytes covers the bytes it had left, blk_rq_bytes(), not
 * yet reduced when the tracepoint fires), as diskstats counts ios at
 * blk_account_io_done(). The op group is diskstats' op_stat_group(): flush,
 * discard, write (any op that writes), read. Passthrough requests are not
 * counted (diskstats does not either). Unlike diskstats, a queue with
 * iostats turned off is still counted. The request latency is from the
 * request's (last) issue to its full completion. A data request of a
 * flush sequence (PREFLUSH/FUA on a write-back cache) completes twice, its
 * data and then the sequence's end: it is counted once, at the end, as
 * diskstats does.
 *
 * Disks: the kernel exports no way to walk disks or hear of new ones
 * (block_class and the disk list are private, there is no disk notifier).
 * A periodic scan reads /sys/block, which is exactly the whole disks
 * (partitions are not there) under the names README.md wants: for each
 * entry its "size" (0: no medium, no instance), its "mq" folder (none: a
 * bio-based disk, which block_rq_* never see, no instance), "dev"
 * (major:minor) and "diskseq" files, through filp_open(), kern_path(),
 * iterate_dir() and kernel_read(), all exported. A disk's key is
 * (dev_t, diskseq): diskseq is never reused, so a disk removed and another
 * created with the same name or number between two scans is a new
 * instance, never the old one's. Probes compute the key from
 * rq->q->disk (alive while the request is in flight) and look it up in
 * an RCU hash of this module's own entries (freed after a grace period):
 * no probe ever dereferences an object this module does not own or the
 * request does not pin. This needs sysfs mounted at /sys (always so on a
 * running system; the scan logs once if it is not). A disk is counted
 * from the scan that finds it, within scan_ms of its appearance: I/O
 * before that (a new disk's partition scan: 3 reads of null_blk in the
 * guest test) is not in its instance, as I/O before the module's load is
 * not; compare increments with /proc/diskstats, not totals.
 */
#include <linux/blkdev.h>
#include <linux/blk-mq.h>
#include <linux/fs.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/rculist.h>
#include <linux/tracepoint.h>
#include <linux/kdev_t.h>
#include <linux/kernel.h>
#include <linux/string.h>

#include "perfabi_src.h"

static unsigned int request_slots = 4096;
module_param(request_slots, uint, 0444);
MODULE_PARM_DESC(request_slots, "slots of the in-flight request table (issue times), a power of 2");

/* A request issued more than 60 s ago and not completed: its slot is reusable. */
#define SRC_REQUEST_STALE_NS (60ULL * NSEC_PER_SEC)
#define SRC_DISK_HASH_BITS 6
#define SRC_MAX_DISKS 1024

enum { D_READ, D_WRITE, D_DISCARD, D_FLUSH, D_READ_B, D_WRITE_B, D_DISCARD_B, D_LAT, D_NR };
static const enum perfabi_fam disk_fams[D_NR] = {
	PERFABI_FAM_DISK_READ, PERFABI_FAM_DISK_WRITE, PERFABI_FAM_DISK_DISCARD,
	PERFABI_FAM_DISK_FLUSH, PERFABI_FAM_DISK_READ_BYTES, PERFABI_FAM_DISK_WRITE_BYTES,
	PERFABI_FAM_DISK_DISCARD_BYTES, PERFABI_FAM_DISK_LATENCY,
};

struct src_disk {
	struct hlist_node node;		/* in src_block_ctx.disks (RCU), if !skipped */
	struct list_head list;		/* in disk_list (the scan's, under disk_lock) */
	dev_t devt;
	u64 seq;
	bool skipped;			/* no room: not published, not retried */
	bool seen;
	struct perfabi_member_handle *m[D_NR];
	char name[SRC_INSTANCE_LEN];
	struct rcu_head rcu;
};

struct src_block_ctx {
	struct hlist_head disks[1 << SRC_DISK_HASH_BITS];
	struct src_stamps req;
	struct perfabi_member_handle *drop;
};

static struct src_block_ctx block_ctx;
static LIST_HEAD(disk_list);
static DEFINE_MUTEX(disk_lock);
static bool sysfs_warned, too_many_warned;

static __always_inline u32 disk_hash(dev_t devt, u64 seq)
{
	return hash_32(devt ^ (u32)seq, SRC_DISK_HASH_BITS);
}

static __always_inline u64 disk_seq(const struct gendisk *disk)
{
#ifdef PERFABI_SRC_HAVE_DISKSEQ
	return disk->diskseq;
#else
	return 0;
#endif
}

static __always_inline struct src_disk *disk_find(const struct src_block_ctx *c,
						  const struct gendisk *disk)
{
	dev_t devt = disk_devt((struct gendisk *)disk);
	u64 seq = disk_seq(disk);
	struct src_disk *d;

	hlist_for_each_entry_rcu(d, &c->disks[disk_hash(devt, seq)], node)
		if (d->devt == devt && d->seq == seq)
			return d;
	return NULL;
}

/* diskstats' op_stat_group(), and flush: D_READ .. D_FLUSH. */
static __always_inline unsigned int op_group(const struct request *rq)
{
	enum req_op op = req_op(rq);

	if (op == REQ_OP_FLUSH)
		return D_FLUSH;
	if (op_is_discard(op))
		return D_DISCARD;
	return op_is_write(op) ? D_WRITE : D_READ;
}

/* block_rq_issue: stamp the request (every issue: a requeued one is issued again). */
static void probe_issue(void *data, struct request *rq)
{
	struct src_block_ctx *c = data;

	if (!rq->q->disk || blk_rq_is_passthrough(rq))
		return;
	if (unlikely(!src_stamp_put(&c->req, (unsigned long)rq, src_now())))
		perfabi_member_add(c->drop, 1);
}

/* block_rq_complete: bytes always, the count and latency at the full completion. */
static void probe_complete(void *data, struct request *rq, blk_status_t error,
			   unsigned int nr_bytes)
{
	struct src_block_ctx *c = data;
	struct gendisk *disk = rq->q->disk;
	bool done = nr_bytes >= blk_rq_bytes(rq);
	struct src_disk *d;
	unsigned int g;
	u64 ts;

	if (!disk || blk_rq_is_passthrough(rq))
		return;
	/*
	 * A data request inside a flush sequence (PREFLUSH or emulated FUA
	 * on a disk with a volatile write cache) completes twice: its data
	 * (RQF_FLUSH_SEQ set, all its bytes), then, after the post-flush,
	 * the sequence's end (flag cleared, 0 bytes). diskstats counts it
	 * once, at the end (blk_account_io_done() skips RQF_FLUSH_SEQ): so
	 * do the count and latency here. The flush request itself
	 * (REQ_OP_FLUSH) carries the flag too and is counted as a flush.
	 */
	if (done && (rq->rq_flags & RQF_FLUSH_SEQ) && req_op(rq) != REQ_OP_FLUSH)
		done = false;
	d = disk_find(c, disk);
	if (unlikely(!d)) {
		/* Not (yet) a known disk: still free its stamp. */
		if (done)
			src_stamp_take(&c->req, (unsigned long)rq, &ts);
		return;
	}
	g = op_group(rq);
	if (g != D_FLUSH && nr_bytes)
		perfabi_member_add(d->m[D_READ_B + g], nr_bytes);
	if (!done)
		return;
	perfabi_member_add(d->m[g], 1);
	if (src_stamp_take(&c->req, (unsigned long)rq, &ts))
		perfabi_observe(d->m[D_LAT], src_since(ts, src_now()));
}

static struct src_tp block_tps[] = {
	{ .name = "block_rq_issue", .probe = probe_issue },
	{ .name = "block_rq_complete", .probe = probe_complete },
};

/* A small sysfs file's text, NUL-terminated and trimmed. */
static int read_small(const char *path, char *buf, size_t len)
{
	struct file *f = filp_open(path, O_RDONLY, 0);
	loff_t pos = 0;
	ssize_t n;

	if (IS_ERR(f))
		return PTR_ERR(f);
	n = kernel_read(f, buf, len - 1, &pos);
	filp_close(f, NULL);
	if (n < 0)
		return n;
	buf[n] = '\0';
	strim(buf);
	return 0;
}

struct disk_names {
	struct dir_context ctx;
	char (*name)[DISK_NAME_LEN];
	unsigned int nr;
	bool overflow;
};

static struct disk_names scan_names;

#ifdef PERFABI_SRC_FILLDIR_BOOL
#define FILLDIR_CONTINUE true
static bool
#else
#define FILLDIR_CONTINUE 0
static int
#endif
disk_filldir(struct dir_context *ctx, const char *name, int len, loff_t off, u64 ino,
	     unsigned int type)
{
	struct disk_names *s = container_of(ctx, struct disk_names, ctx);

	if (name[0] == '.' || len <= 0 || len >= DISK_NAME_LEN)
		return FILLDIR_CONTINUE;
	if (s->nr >= SRC_MAX_DISKS) {
		s->overflow = true;
		return FILLDIR_CONTINUE;
	}
	memcpy(s->name[s->nr], name, len);
	s->name[s->nr][len] = '\0';
	s->nr++;
	return FILLDIR_CONTINUE;
}

/* The whole disks /sys/block lists now, into scan_names. */
static int list_disks(void)
{
	struct file *dir = filp_open("/sys/block", O_RDONLY | O_DIRECTORY, 0);
	int err;

	if (IS_ERR(dir))
		return PTR_ERR(dir);
	scan_names.ctx.actor = disk_filldir;
	scan_names.ctx.pos = 0;
	scan_names.nr = 0;
	scan_names.overflow = false;
	err = iterate_dir(dir, &scan_names.ctx);
	filp_close(dir, NULL);
	return err;
}

/*
 * /sys/block/NAME's dev_t and diskseq; -ENODATA for a disk without a
 * medium (size 0: an unbound loop device, an unconfigured zram device, an
 * empty drive), which is no instance (README.md, as perfabi-exportd), and
 * for a bio-based disk.
 */
static int disk_key(const char *name, dev_t *devt, u64 *seq)
{
	char path[32 + DISK_NAME_LEN], buf[32];
	struct path mq;
	unsigned int maj, min;
	int err;

	snprintf(path, sizeof(path), "/sys/block/%s/size", name);
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err;
	if (!strcmp(buf, "0"))
		return -ENODATA;
	/*
	 * Only a request-based (blk-mq) disk, the one kind that has an "mq"
	 * folder, passes block_rq_*: a bio-based one (dm, md, zram, pmem) is
	 * left to perfabi-exportd rather than published as zeros.
	 */
	snprintf(path, sizeof(path), "/sys/block/%s/mq", name);
	err = kern_path(path, LOOKUP_FOLLOW, &mq);
	if (err)
		return -ENODATA;
	path_put(&mq);
	snprintf(path, sizeof(path), "/sys/block/%s/dev", name);
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err;
	if (sscanf(buf, "%u:%u", &maj, &min) != 2)
		return -EINVAL;
	*devt = MKDEV(maj, min);
	*seq = 0;
#ifdef PERFABI_SRC_HAVE_DISKSEQ
	snprintf(path, sizeof(path), "/sys/block/%s/diskseq", name);
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err;
	err = kstrtou64(buf, 10, seq);
#endif
	return err;
}

static void disk_remove(struct src_disk *d)
{
	list_del(&d->list);
	if (!d->skipped) {
		hlist_del_rcu(&d->node);
		/* Probes see no handle of it from now on: their adds go nowhere. */
		src_instances_del(d->m, D_NR);
	}
	kfree_rcu(d, rcu);
}

static void disk_add(const char *name, dev_t devt, u64 seq)
{
	struct src_disk *d = kzalloc(sizeof(*d), GFP_KERNEL);

	if (!d)
		return;
	d->devt = devt;
	d->seq = seq;
	d->seen = true;
	src_instance_name(d->name, name);
	list_add_tail(&d->list, &disk_list);
	if (src_instances_add(disk_fams, D_NR, d->name, d->m)) {
		d->skipped = true;
		return;
	}
	hlist_add_head_rcu(&d->node, &block_ctx.disks[disk_hash(devt, seq)]);
}

/**
 * src_block_scan() - bring the disk instances in line with /sys/block
 *
 * Removes the instances of disks gone (or replaced: another dev_t or
 * diskseq under the name), then adds those of new disks.
 *
 * Context: process context (the scan work); may sleep.
 */
void src_block_scan(void)
{
	struct src_disk *d, *tmp;
	static dev_t devts[SRC_MAX_DISKS];
	static u64 seqs[SRC_MAX_DISKS];
	static bool known[SRC_MAX_DISKS];
	unsigned int i;
	int err;

	mutex_lock(&disk_lock);
	err = list_disks();
	if (err) {
		if (!sysfs_warned)
			pr_warn(SRC_PFX "cannot list /sys/block (%d): disks not updated\n", err);
		sysfs_warned = true;
		goto out;
	}
	if (scan_names.overflow && !too_many_warned) {
		pr_warn(SRC_PFX "more than %d disks: the others are not published\n",
			SRC_MAX_DISKS);
		too_many_warned = true;
	}
	list_for_each_entry(d, &disk_list, list)
		d->seen = false;
	for (i = 0; i < scan_names.nr; i++) {
		char inst[SRC_INSTANCE_LEN];

		known[i] = true;	/* nothing to add (or unreadable: next scan) */
		if (disk_key(scan_names.name[i], &devts[i], &seqs[i]))
			continue;
		src_instance_name(inst, scan_names.name[i]);
		known[i] = false;
		list_for_each_entry(d, &disk_list, list) {
			if (!strcmp(d->name, inst) && d->devt == devts[i] && d->seq == seqs[i]) {
				d->seen = true;
				known[i] = true;
				break;
			}
		}
	}
	list_for_each_entry_safe(d, tmp, &disk_list, list)
		if (!d->seen)
			disk_remove(d);
	for (i = 0; i < scan_names.nr; i++)
		if (!known[i])
			disk_add(scan_names.name[i], devts[i], seqs[i]);
out:
	mutex_unlock(&disk_lock);
}

/**
 * src_block_start() - the block source: families, disks, probes
 *
 * Context: process context (module load); may sleep.
 * Return: 0, or an error: the source is off (logged).
 */
int src_block_start(void)
{
	int err;

#ifndef PERFABI_SRC_BLOCK_PROTO
	pr_info(SRC_PFX "block source off: built for a kernel whose block_rq_issue/block_rq_complete prototypes differ from the probes'\n");
	return -EOPNOTSUPP;
#endif
	err = src_tps_find(block_tps, ARRAY_SIZE(block_tps), "block");
	if (err)
		return err;
	scan_names.name = kvmalloc_array(SRC_MAX_DISKS, DISK_NAME_LEN, GFP_KERNEL);
	if (!scan_names.name)
		return -ENOMEM;
	err = src_stamps_init(&block_ctx.req, request_slots, SRC_REQUEST_STALE_NS);
	if (err)
		goto free_names;
	block_ctx.drop = src_dropped[SRC_DROP_REQUEST_TABLE];
	err = src_families_add(PERFABI_FAM_BLOCK_FIRST, PERFABI_FAM_BLOCK_LAST);
	if (err)
		goto free_stamps;
	src_block_scan();
	err = src_tps_register(block_tps, ARRAY_SIZE(block_tps), &block_ctx, "block");
	if (err)
		goto free_all;
	return 0;
free_all:
	src_block_free();
	return err;
free_stamps:
	src_stamps_free(&block_ctx.req);
free_names:
	kvfree(scan_names.name);
	scan_names.name = NULL;
	return err;
}

/** src_block_stop_probes() - detach the block probes (the caller waits for them) */
void src_block_stop_probes(void)
{
	src_tps_unregister(block_tps, ARRAY_SIZE(block_tps), &block_ctx);
}

/**
 * src_block_free() - delete the block families and free everything
 *
 * Context: process context, no probe running any more; may sleep.
 */
void src_block_free(void)
{
	struct src_disk *d, *tmp;

	mutex_lock(&disk_lock);
	list_for_each_entry_safe(d, tmp, &disk_list, list)
		disk_remove(d);
	mutex_unlock(&disk_lock);
	src_families_del(PERFABI_FAM_BLOCK_FIRST, PERFABI_FAM_BLOCK_LAST);
	src_stamps_free(&block_ctx.req);
	kvfree(scan_names.name);
	scan_names.name = NULL;
}

/**
 * src_block_measure() - time the block probes on a scratch disk
 * @m: the scratch members and iterations
 *
 * A request, queue and disk of this function's own (the probes only read
 * rq->q->disk, the op, the bytes and the disk's dev_t and diskseq), in a
 * scratch context whose hash holds one disk, all of whose members are
 * the scratch ones.
 */
void src_block_measure(const struct src_measure *m)
{
	struct src_block_ctx *c = kzalloc(sizeof(*c), GFP_KERNEL);
	struct request *rq = kzalloc(sizeof(*rq), GFP_KERNEL);
	struct request_queue *q = kzalloc(sizeof(*q), GFP_KERNEL);
	struct gendisk *disk = kzalloc(sizeof(*disk), GFP_KERNEL);
	struct src_disk *d = kzalloc(sizeof(*d), GFP_KERNEL);
	unsigned int i;
	u64 ps;

	if (!c || !rq || !q || !disk || !d || src_stamps_init(&c->req, 256, SRC_REQUEST_STALE_NS))
		goto out;
	disk->major = 0;
	disk->first_minor = 1;
#ifdef PERFABI_SRC_HAVE_DISKSEQ
	disk->diskseq = U64_MAX;
#endif
	q->disk = disk;
	rq->q = q;
	rq->cmd_flags = REQ_OP_READ;
	rq->__data_len = 4096;
	d->devt = disk_devt(disk);
	d->seq = disk_seq(disk);
	for (i = 0; i < D_NR; i++)
		d->m[i] = i == D_LAT ? m->hist : m->cnt;
	c->drop = m->cnt;
	hlist_add_head_rcu(&d->node, &c->disks[disk_hash(d->devt, d->seq)]);
	ps = SRC_TIME_PS(m->n, probe_issue(c, rq));
	src_report(m, "block_rq_issue", ps);
	ps = SRC_TIME_PS(m->n, probe_issue(c, rq); probe_complete(c, rq, 0, 4096));
	src_report(m, "block_rq_issue_complete", ps);
	src_stamps_free(&c->req);
out:
	kfree(d);
	kfree(disk);
	kfree(q);
	kfree(rq);
	kfree(c);
}
