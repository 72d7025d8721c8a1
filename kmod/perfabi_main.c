// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi: the kernel writer of the perfabi ABI (spec/PERFABI.md).
 *
 * The segment lives in a kernel-internal shmem file, vmap()ed for the
 * module's own writes. mmap() of /dev/perfabi (mode 0444) hands the VMA over
 * to that shmem file, so a mapping holds no reference to this module: the
 * module can be unloaded while readers still map the segment (it marks it
 * closed first), and the memory lives until the last unmap.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/shmem_fs.h>
#include <linux/vmalloc.h>
#include <linux/mutex.h>
#include <linux/random.h>
#include <linux/timekeeping.h>
#include <linux/string.h>
#include <linux/preempt.h>
#include <asm/local64.h>

#include "perfabi.h"
#include "perfabi_kapi.h"
#include "perfabi_internal.h"

static unsigned int max_instances = 1024;
module_param(max_instances, uint, 0444);
MODULE_PARM_DESC(max_instances, "instance table capacity (1..65536)");

static unsigned int damon_capacity = 4096;
module_param(damon_capacity, uint, 0444);
MODULE_PARM_DESC(damon_capacity, "DAMON region records per CPU ring (0..1048576)");

struct perfabi_seg perfabi_seg;
struct perfabi_fast perfabi_fast;
EXPORT_SYMBOL_GPL(perfabi_fast);

static DEFINE_MUTEX(meta_lock);

#define ID_SLOT_BITS PERFABI_ID_SLOT_BITS
#define ID_SLOT_MASK PERFABI_ID_SLOT_MASK

static u64 align_up(u64 v, u64 a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The canonical layout of spec/PERFABI.md section 3 (perfabi::Geometry). */
static int layout(struct perfabi_seg *s)
{
	u64 page = PAGE_SIZE;

	if (max_instances < 1 || max_instances > PERFABI_MAX_INSTANCES ||
	    damon_capacity > PERFABI_MAX_DAMON_CAPACITY)
		return -EINVAL;
	s->nr_cpus = nr_cpu_ids;
	s->max_instances = max_instances;
	s->damon_capacity = damon_capacity;
	s->instances_offset = page;
	s->instances_size = align_up((u64)max_instances * sizeof(struct perfabi_instance), page);
	s->counters_offset = sizeof(struct perfabi_cpu_head);
	s->damon_offset = align_up(s->counters_offset + 8ULL * max_instances, PERFABI_CACHE_LINE);
	s->cpu_block_size = align_up(s->damon_offset +
				     (u64)damon_capacity * sizeof(struct perfabi_damon_record), page);
	s->cpu_area_offset = s->instances_offset + s->instances_size;
	s->size = s->cpu_area_offset + s->cpu_block_size * s->nr_cpus;
	s->nr_pages = s->size >> PAGE_SHIFT;
	return 0;
}

static void header_init(struct perfabi_seg *s)
{
	struct perfabi_header *h = s->hdr;

	memcpy(h->magic, PERFABI_MAGIC, sizeof(h->magic));
	h->abi_major = PERFABI_ABI_MAJOR;
	h->abi_minor = PERFABI_ABI_MINOR;
	h->header_size = sizeof(*h);
	h->byte_order = PERFABI_BYTE_ORDER_MARK;
	h->page_size = PAGE_SIZE;
	h->nr_cpus = s->nr_cpus;
	h->pages_per_cpu = s->cpu_block_size >> PAGE_SHIFT;
	h->max_instances = s->max_instances;
	h->damon_capacity = s->damon_capacity;
	h->instance_entry_size = sizeof(struct perfabi_instance);
	h->damon_record_size = sizeof(struct perfabi_damon_record);
	h->counters_offset = s->counters_offset;
	h->damon_offset = s->damon_offset;
	h->segment_size = s->size;
	h->instances_offset = s->instances_offset;
	h->instances_size = s->instances_size;
	h->cpu_area_offset = s->cpu_area_offset;
	h->cpu_block_size = s->cpu_block_size;
	h->epoch = get_random_u64() | 1;
	h->writer_pid = 0;
	h->writer_start_ns = ktime_get_boottime_ns();
	h->heartbeat_interval_ns = 0;
	h->heartbeat_ns = h->writer_start_ns;
	WRITE_ONCE(h->flags, PERFABI_FLAG_KERNEL);
}

static bool name_ok(const char *n)
{
	size_t len = strnlen(n, PERFABI_NAME_LEN);
	bool part_start = true;
	size_t i;

	if (len == 0 || len >= PERFABI_NAME_LEN)
		return false;
	for (i = 0; i < len; i++) {
		char c = n[i];

		if (c == '.') {
			if (part_start)
				return false;
			part_start = true;
			continue;
		}
		if (part_start ? !(isalpha(c) || c == '_') : !(isalnum(c) || c == '_'))
			return false;
		part_start = false;
	}
	return !part_start;
}

static bool unit_ok(const char *u)
{
	size_t len = strnlen(u, PERFABI_UNIT_LEN);
	size_t i;

	if (len >= PERFABI_UNIT_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (u[i] <= ' ' || u[i] > '~')
			return false;
	return true;
}

long perfabi_add(const char *name, const char *unit, u32 semantics)
{
	struct perfabi_seg *s = &perfabi_seg;
	struct perfabi_header *h = s->hdr;
	struct perfabi_instance *e;
	unsigned int slot, cpu, i;
	u64 g, reg;

	if (!name || !unit || !name_ok(name) || !unit_ok(unit) ||
	    (semantics != PERFABI_COUNTER && semantics != PERFABI_INSTANT))
		return -EINVAL;
	mutex_lock(&meta_lock);
	slot = s->max_instances;
	for (i = 0; i < s->used; i++) {
		e = &s->instances[i];
		if (e->state == PERFABI_SLOT_LIVE && !strncmp(e->name, name, PERFABI_NAME_LEN)) {
			mutex_unlock(&meta_lock);
			return -EEXIST;
		}
		if (e->state == PERFABI_SLOT_FREE && slot == s->max_instances)
			slot = i;
	}
	if (slot == s->max_instances) {
		if (s->used == s->max_instances) {
			mutex_unlock(&meta_lock);
			return -ENOSPC;
		}
		slot = s->used;
	}
	reg = ++s->next_reg;

	/* gen1 first (spec 7.3). */
	g = h->gen1 + 1;
	WRITE_ONCE(h->gen1, g);
	smp_wmb();
	/* The slot is free: no adjust writes it, zeroing it cannot race. */
	for_each_possible_cpu(cpu)
		WRITE_ONCE(*perfabi_counter(s, cpu, slot), 0);
	e = &s->instances[slot];
	memset(e, 0, sizeof(*e));
	strscpy(e->name, name, sizeof(e->name));
	strscpy(e->unit, unit, sizeof(e->unit));
	e->reg_id = reg;
	e->semantics = semantics;
	e->value_type = PERFABI_TYPE_U64;
	e->state = PERFABI_SLOT_LIVE;
	if (slot == s->used) {
		s->used++;
		WRITE_ONCE(h->instances_used, s->used);
	}
	smp_wmb();
	WRITE_ONCE(h->gen2, g);
	/* Adjusts may use the id from now on. */
	smp_store_release(&s->live[slot], reg);
	mutex_unlock(&meta_lock);
	return (long)(reg << ID_SLOT_BITS) | slot;
}
EXPORT_SYMBOL_GPL(perfabi_add);

static bool id_live(struct perfabi_seg *s, long id, unsigned int *slot)
{
	unsigned long sl = id & ID_SLOT_MASK;

	if (id < 0 || sl >= s->max_instances)
		return false;
	*slot = sl;
	return READ_ONCE(s->live[sl]) == ((u64)id >> ID_SLOT_BITS);
}

int perfabi_del(long id)
{
	struct perfabi_seg *s = &perfabi_seg;
	struct perfabi_header *h = s->hdr;
	unsigned int slot;
	u64 g;

	mutex_lock(&meta_lock);
	if (!id_live(s, id, &slot)) {
		mutex_unlock(&meta_lock);
		return -ENOENT;
	}
	WRITE_ONCE(s->live[slot], 0);
	g = h->gen1 + 1;
	WRITE_ONCE(h->gen1, g);
	smp_wmb();
	WRITE_ONCE(s->instances[slot].state, PERFABI_SLOT_FREE);
	smp_wmb();
	WRITE_ONCE(h->gen2, g);
	mutex_unlock(&meta_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(perfabi_del);


static int perfabi_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct perfabi_seg *s = &perfabi_seg;
	unsigned long pages = vma_pages(vma);

	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	if (vma->vm_pgoff >= s->nr_pages || pages > s->nr_pages - vma->vm_pgoff)
		return -EINVAL;
	/* No mprotect(PROT_WRITE) later. */
#ifdef PERFABI_HAVE_VM_FLAGS_CLEAR
	vm_flags_clear(vma, VM_MAYWRITE);
#else
	vma->vm_flags &= ~VM_MAYWRITE;
#endif
	/* The mapping now belongs to the shmem file, not to this module. */
	vma_set_file(vma, s->shm);
	return s->shm->f_op->mmap(s->shm, vma);
}

static const struct file_operations perfabi_fops = {
	.owner = THIS_MODULE,
	.mmap = perfabi_mmap,
	.llseek = noop_llseek,
};

static struct miscdevice perfabi_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "perfabi",
	.fops = &perfabi_fops,
	.mode = 0444,
};

static void seg_free(struct perfabi_seg *s)
{
	unsigned long i;

	if (s->base)
		vunmap(s->base);
	if (s->pages)
		for (i = 0; i < s->nr_pages; i++)
			if (s->pages[i])
				put_page(s->pages[i]);
	kvfree(s->pages);
	memset(&perfabi_fast, 0, sizeof(perfabi_fast));
	kvfree(s->live);
	if (s->shm)
		fput(s->shm);
	memset(s, 0, sizeof(*s));
}

static int seg_alloc(struct perfabi_seg *s)
{
	unsigned long i;
	int err = layout(s);

	if (err)
		return err;
	s->shm = shmem_file_setup("perfabi", s->size, VM_NORESERVE);
	if (IS_ERR(s->shm)) {
		err = PTR_ERR(s->shm);
		s->shm = NULL;
		return err;
	}
	s->pages = kvcalloc(s->nr_pages, sizeof(*s->pages), GFP_KERNEL);
	s->live = kvcalloc(s->max_instances, sizeof(*s->live), GFP_KERNEL);
	if (!s->pages || !s->live)
		goto nomem;
	for (i = 0; i < s->nr_pages; i++) {
		struct page *p = shmem_read_mapping_page(s->shm->f_mapping, i);

		if (IS_ERR(p)) {
			err = PTR_ERR(p);
			goto fail;
		}
		s->pages[i] = p;
	}
	s->base = vmap(s->pages, s->nr_pages, VM_MAP, PAGE_KERNEL);
	if (!s->base)
		goto nomem;
	memset(s->base, 0, s->size);
	s->hdr = s->base;
	s->instances = s->base + s->instances_offset;
	perfabi_fast.live = s->live;
	perfabi_fast.cpu0_counters = (u8 *)perfabi_counter(s, 0, 0);
	perfabi_fast.cpu_stride = s->cpu_block_size;
	perfabi_fast.max_instances = s->max_instances;
	return 0;
nomem:
	err = -ENOMEM;
fail:
	seg_free(s);
	return err;
}

static int __init perfabi_init(void)
{
	int err = seg_alloc(&perfabi_seg);

	if (err) {
		pr_err("perfabi: cannot allocate the segment: %d\n", err);
		return err;
	}
	header_init(&perfabi_seg);
	err = misc_register(&perfabi_misc);
	if (err) {
		seg_free(&perfabi_seg);
		return err;
	}
	perfabi_damon_start();
	pr_info("perfabi: /dev/perfabi ready: %u CPUs, %u instances, %u DAMON records per CPU, %llu bytes\n",
		perfabi_seg.nr_cpus, perfabi_seg.max_instances, perfabi_seg.damon_capacity,
		perfabi_seg.size);
	return 0;
}

static void __exit perfabi_exit(void)
{
	misc_deregister(&perfabi_misc);
	perfabi_damon_stop();
	/* Readers that still map the segment see it closed, values final. */
	WRITE_ONCE(perfabi_seg.hdr->heartbeat_ns, ktime_get_boottime_ns());
	smp_wmb();
	WRITE_ONCE(perfabi_seg.hdr->flags, PERFABI_FLAG_KERNEL | PERFABI_FLAG_CLOSED);
	seg_free(&perfabi_seg);
	pr_info("perfabi: unloaded\n");
}

module_init(perfabi_init);
module_exit(perfabi_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("perfabi: per-CPU counters and DAMON regions in a read-only mmap segment");
