// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi: the kernel writer of the perfabi ABI (spec/PERFABI.md).
 *
 * Each CPU's counters are that CPU's share of one per-CPU area, so that
 * perfabi_adjust() is one this_cpu_add(); the other pages (header, instance
 * table, DAMON rings) are ordinary pages. The module writes everything
 * through one vmap() of all the pages.
 *
 * mmap() of /dev/perfabi (mode 0444) inserts every page into the reader's
 * VMA at once, each holding a page reference, and hands the VMA over to an
 * internal shmem file with the kernel's own (empty) vm_ops: a mapping holds
 * no reference to this module. The module can therefore be unloaded while
 * readers still map the segment (it marks it closed first). Ordinary pages
 * live until the last unmap; the per-CPU area is not given back to the
 * per-CPU allocator while any of its pages is still referenced (it is
 * leaked, with a warning), so no reader ever sees other kernel data.
 *
 * With max_families (and max_members) non-zero the segment is ABI 1.1: the
 * family and member tables follow the per-CPU area, and members' values
 * take value words of the same counter arrays (perfabi_kapi.h). With both 0
 * it is ABI 1.0, byte for byte as before families.
 *
 * The parts: perfabi_seg.c (the segment's state, layout and memory),
 * perfabi_names.c (the naming rule and clash check), this file (the 1.0
 * API, the device and its mmap, load and unload), perfabi_families.c (the
 * 1.1 API) and perfabi_damon.c (DAMON): each uses the ones before it and
 * none uses one after it (tests/architecture).
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/shmem_fs.h>
#include <linux/vmalloc.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/mutex.h>
#include <linux/random.h>
#include <linux/timekeeping.h>
#include <linux/string.h>
#include <linux/bitmap.h>
#include <linux/slab.h>
#include <linux/err.h>

#include "perfabi.h"
#include "perfabi_kapi.h"
#include "perfabi_internal.h"

/* The slot of a registered id. */
static unsigned int id_slot(struct perfabi_seg *s, long id)
{
	return ((unsigned long)perfabi_id_counter(id) - (unsigned long)perfabi_slot_counter(s, 0)) / 8;
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
	unsigned int slot, cpu;
	u64 g, reg;
	long id;

	if (!name || !unit || !perfabi_name_ok(name) || !unit_ok(unit) ||
	    (semantics != PERFABI_COUNTER && semantics != PERFABI_INSTANT))
		return -EINVAL;
	mutex_lock(&perfabi_meta_lock);
	if (perfabi_name_taken(s, name, false)) {
		mutex_unlock(&perfabi_meta_lock);
		return -EEXIST;
	}
	/* The first value word no instance or member holds. */
	slot = find_first_zero_bit(s->vused, s->geo.max_instances);
	if (slot >= s->geo.max_instances) {
		mutex_unlock(&perfabi_meta_lock);
		return -ENOSPC;
	}
	if (slot < s->used)
		perfabi_reuse_after_gp(s);
	reg = ++s->next_reg;
	s->id_gen[slot] = s->id_gen[slot] % PERFABI_ID_GEN_MAX + 1;
	id = (long)s->id_gen[slot] << PERFABI_ID_PTR_BITS |
	     (long)((unsigned long)perfabi_slot_counter(s, slot) & PERFABI_ID_PTR_MASK);

	/* gen1 first (spec 7.3). */
	g = perfabi_gen_write_begin(h);
	/* The slot is free: no adjust writes it, zeroing it cannot race. */
	for_each_possible_cpu(cpu)
		WRITE_ONCE(*per_cpu_ptr(perfabi_slot_counter(s, slot), cpu), 0);
	e = &s->instances[slot];
	memset(e, 0, sizeof(*e));
	strscpy(e->name, name, sizeof(e->name));
	strscpy(e->unit, unit, sizeof(e->unit));
	e->reg_id = reg;
	e->semantics = semantics;
	e->value_type = PERFABI_TYPE_U64;
	e->state = PERFABI_SLOT_LIVE;
	if (slot >= s->used) {
		s->used = slot + 1;
		WRITE_ONCE(h->instances_used, s->used);
	}
	perfabi_gen_write_end(h, g);
	__set_bit(slot, s->vused);
	/* Adjusts may use the id from now on. */
	smp_store_release(&perfabi_ids[perfabi_id_index(id)], id);
	mutex_unlock(&perfabi_meta_lock);
	return id;
}
EXPORT_SYMBOL_GPL(perfabi_add);

int perfabi_del(long id)
{
	struct perfabi_seg *s = &perfabi_seg;
	struct perfabi_header *h = s->hdr;
	unsigned int slot;
	u64 g;

	mutex_lock(&perfabi_meta_lock);
	if (perfabi_ids[perfabi_id_index(id)] != id) {
		mutex_unlock(&perfabi_meta_lock);
		return -ENOENT;
	}
	slot = id_slot(s, id);
	WRITE_ONCE(perfabi_ids[perfabi_id_index(id)], perfabi_id_empty(perfabi_id_index(id)));
	s->reuse_needs_gp = true;
	g = perfabi_gen_write_begin(h);
	WRITE_ONCE(s->instances[slot].state, PERFABI_SLOT_FREE);
	perfabi_gen_write_end(h, g);
	__clear_bit(slot, s->vused);
	mutex_unlock(&perfabi_meta_lock);
	return 0;
}
EXPORT_SYMBOL_GPL(perfabi_del);


static void vma_flags_mod(struct vm_area_struct *vma, vm_flags_t set, vm_flags_t clear)
{
#ifdef PERFABI_HAVE_VM_FLAGS_CLEAR
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

static int perfabi_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct perfabi_seg *s = &perfabi_seg;
	unsigned long pages = vma_pages(vma);
	unsigned long left = pages;
	int err;

	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	if (vma->vm_pgoff >= s->nr_pages || pages > s->nr_pages - vma->vm_pgoff)
		return -EINVAL;
	/* No mprotect(PROT_WRITE) later, no mremap() past the segment. */
	vma_flags_mod(vma, VM_DONTEXPAND, VM_MAYWRITE);
	/* Every page now: the VMA needs no fault handler of this module. */
	err = vm_insert_pages(vma, vma->vm_start, s->pages + vma->vm_pgoff, &left);
	if (err)
		return err;
	/* The mapping now holds the anchor file, not this module's device. */
	vma_set_file(vma, s->anchor);
	return 0;
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

static int __init perfabi_init(void)
{
	int err = perfabi_seg_alloc(&perfabi_seg);

	if (err) {
		pr_err("perfabi: cannot allocate the segment: %d\n", err);
		return err;
	}
	perfabi_seg_header_init(&perfabi_seg);
	err = misc_register(&perfabi_misc);
	if (err) {
		perfabi_seg_free(&perfabi_seg);
		return err;
	}
	perfabi_damon_start();
	pr_info("perfabi: /dev/perfabi ready: ABI 1.%u, %u CPUs, %u instances, %u DAMON records per CPU, %u families, %u members, %llu bytes\n",
		perfabi_seg.hdr->abi_minor, perfabi_seg.geo.nr_cpus, perfabi_seg.geo.max_instances,
		perfabi_seg.geo.damon_capacity, perfabi_seg.geo.max_families,
		perfabi_seg.geo.max_members, perfabi_seg.geo.segment_size);
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
	perfabi_seg_free(&perfabi_seg);
	pr_info("perfabi: unloaded\n");
}

module_init(perfabi_init);
module_exit(perfabi_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("perfabi: per-CPU counters and DAMON regions in a read-only mmap segment");
