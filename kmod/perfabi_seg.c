// SPDX-License-Identifier: GPL-2.0
/*
 * perfabi, the segment: its state (the pages, the id and key tables the
 * hot path reads, the metadata lock), its layout from the module
 * parameters, its allocation, header and freeing. Every other part of the
 * module uses it; it uses none of them.
 */
#include <linux/module.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/shmem_fs.h>
#include <linux/vmalloc.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/mutex.h>
#include <linux/random.h>
#include <linux/timekeeping.h>
#include <linux/bitmap.h>
#include <linux/slab.h>
#include <linux/err.h>

#include "perfabi.h"
#include "perfabi_kapi.h"
#include "perfabi_internal.h"

static unsigned int max_instances = 1024;
module_param(max_instances, uint, 0444);
MODULE_PARM_DESC(max_instances, "instance table capacity (1..4080: a CPU's counters share one 32 KiB per-CPU area)");

static unsigned int damon_capacity = 4096;
module_param(damon_capacity, uint, 0444);
MODULE_PARM_DESC(damon_capacity, "DAMON region records per CPU ring (0..1048576)");

static unsigned int max_families = 64;
module_param(max_families, uint, 0444);
MODULE_PARM_DESC(max_families, "family table capacity (0..65536; 0 with max_members=0: an ABI 1.0 segment, no families)");

static unsigned int max_members = 1024;
module_param(max_members, uint, 0444);
MODULE_PARM_DESC(max_members, "family instance table capacity (0..65536; 0 if max_families is 0); their values share the max_instances value words");

/* The most counters one per-CPU area holds after the block head. */
#define KMOD_MAX_INSTANCES ((PCPU_MIN_UNIT_SIZE - sizeof(struct perfabi_cpu_head)) / 8)

struct perfabi_seg perfabi_seg;
long perfabi_ids[PERFABI_ID_TABLE_SIZE];
EXPORT_SYMBOL_GPL(perfabi_ids);
DEFINE_PER_CPU(u64, perfabi_sink);
EXPORT_PER_CPU_SYMBOL_GPL(perfabi_sink);
struct perfabi_key perfabi_keys[PERFABI_ID_TABLE_SIZE];
EXPORT_SYMBOL_GPL(perfabi_keys);
u64 __percpu *perfabi_cpu_seq;
EXPORT_SYMBOL_GPL(perfabi_cpu_seq);

DEFINE_MUTEX(perfabi_meta_lock);

/*
 * The canonical layout of spec/PERFABI.md section 3: perfabi.h's
 * perfabi_geometry_init(), the C twin of perfabi::Geometry::sizes() (the
 * test perfabi/tests/c_layout.rs compares them), for this machine's page
 * size and possible CPUs. The module parameters are checked first, against
 * the module's own, tighter, bound on max_instances.
 */
static int layout(struct perfabi_seg *s)
{
	enum perfabi_geometry_status st;

	if (max_instances < 1 || max_instances > KMOD_MAX_INSTANCES) {
		pr_err("perfabi: max_instances=%u: must be 1..%lu\n", max_instances,
		       (unsigned long)KMOD_MAX_INSTANCES);
		return -EINVAL;
	}
	if (damon_capacity > PERFABI_MAX_DAMON_CAPACITY) {
		pr_err("perfabi: damon_capacity=%u: must be 0..%u\n", damon_capacity,
		       PERFABI_MAX_DAMON_CAPACITY);
		return -EINVAL;
	}
	if (max_families > PERFABI_MAX_FAMILIES || max_members > PERFABI_MAX_MEMBERS ||
	    (max_families == 0 && max_members != 0)) {
		pr_err("perfabi: max_families=%u max_members=%u: must be 0..%u and 0..%u, max_members 0 if max_families is\n",
		       max_families, max_members, PERFABI_MAX_FAMILIES, PERFABI_MAX_MEMBERS);
		return -EINVAL;
	}
	st = perfabi_geometry_init(&s->geo, PAGE_SIZE, nr_cpu_ids, max_instances, damon_capacity,
				   max_families, max_members);
	if (st != PERFABI_GEOMETRY_OK) {
		pr_err("perfabi: no segment layout for %u CPUs and %lu-byte pages: %s\n",
		       nr_cpu_ids, PAGE_SIZE, perfabi_geometry_status_code(st));
		return -EINVAL;
	}
	/* Head and counters: the per-CPU area. */
	s->pcpu_pages = perfabi_align_up(s->geo.counters_offset + 8ULL * s->geo.max_instances,
					 PAGE_SIZE) >> PAGE_SHIFT;
	s->nr_pages = s->geo.segment_size >> PAGE_SHIFT;
	return 0;
}

/*
 * perfabi.h's perfabi_header_init() (the twin of perfabi::Geometry::header())
 * with the kernel's identity: no pid, loaded now, no heartbeat promised;
 * with family tables also perfabi_family_header_init() (Sizes.families).
 * Runs before misc_register(): no reader sees the header yet.
 */
void perfabi_seg_header_init(struct perfabi_seg *s)
{
	u64 now = ktime_get_boottime_ns();

	perfabi_header_init(s->hdr, &s->geo, get_random_u64() | 1, 0, now, 0, now);
	if (s->fh)
		perfabi_family_header_init(s->fh, &s->geo);
	WRITE_ONCE(s->hdr->flags, PERFABI_FLAG_KERNEL);
}

/*
 * Whether segment page i is per-CPU memory, and then whose (*cpu) and which
 * page of that CPU's share (*pg).
 */
static bool page_is_pcpu(struct perfabi_seg *s, unsigned long i, unsigned int *cpu,
			 unsigned long *pg)
{
	unsigned long first = s->geo.cpu_area_offset >> PAGE_SHIFT;
	unsigned long per_cpu = s->geo.cpu_block_size >> PAGE_SHIFT;

	if (i < first || i - first >= per_cpu * s->geo.nr_cpus)
		return false;	/* the header, the instance or the family tables */
	*cpu = (i - first) / per_cpu;
	*pg = (i - first) % per_cpu;
	return *pg < s->pcpu_pages && cpu_possible(*cpu);
}

/* The page behind a per-CPU address (linear map or vmalloc space). */
static struct page *pcpu_page(void *addr)
{
	if (is_vmalloc_addr(addr))
		return vmalloc_to_page(addr);
	return virt_addr_valid(addr) ? virt_to_page(addr) : NULL;
}

/* The module's own family and member tables, and each family's instance names. */
static void kfam_free(struct perfabi_seg *s)
{
	u32 i;

	for (i = 0; s->kfam && i < s->geo.max_families; i++)
		kvfree(s->kfam[i].names);
	kvfree(s->kfam);
	kvfree(s->kmem);
}

void perfabi_seg_free(struct perfabi_seg *s)
{
	unsigned long i, pg, held = 0;
	unsigned int cpu;

	if (s->base)
		vunmap(s->base);
	for (i = 0; s->pages && i < s->nr_pages; i++) {
		if (!s->pages[i])
			continue;
		if (!page_is_pcpu(s, i, &cpu, &pg))
			put_page(s->pages[i]);
		else if (page_count(s->pages[i]) != s->pcpu_refs[i])
			held++;
	}
	if (s->pcpu && held)
		pr_warn("perfabi: %lu per-CPU pages are still mapped by readers: leaving the per-CPU area (%u pages per CPU) allocated\n",
			held, s->pcpu_pages);
	else
		free_percpu(s->pcpu);
	kvfree(s->pages);
	kvfree(s->pcpu_refs);
	kvfree(s->id_gen);
	bitmap_free(s->vused);
	kfam_free(s);
	if (s->anchor)
		fput(s->anchor);
	memset(s, 0, sizeof(*s));
}

int perfabi_seg_alloc(struct perfabi_seg *s)
{
	unsigned long i, pg, top;
	unsigned int cpu;
	int err = layout(s);

	if (err)
		return err;
	for (i = 0; i < PERFABI_ID_TABLE_SIZE; i++) {
		perfabi_ids[i] = perfabi_id_empty(i);
		perfabi_keys[i].handle = perfabi_id_empty(i);
		perfabi_keys[i].info = 0;
	}
	s->anchor = shmem_file_setup("perfabi", 0, VM_NORESERVE);
	if (IS_ERR(s->anchor)) {
		err = PTR_ERR(s->anchor);
		s->anchor = NULL;
		return err;
	}
	s->pages = kvcalloc(s->nr_pages, sizeof(*s->pages), GFP_KERNEL);
	s->pcpu_refs = kvcalloc(s->nr_pages, sizeof(*s->pcpu_refs), GFP_KERNEL);
	s->id_gen = kvcalloc(s->geo.max_instances, sizeof(*s->id_gen), GFP_KERNEL);
	s->vused = bitmap_zalloc(s->geo.max_instances, GFP_KERNEL);
	s->pcpu = __alloc_percpu(s->pcpu_pages << PAGE_SHIFT, PAGE_SIZE);
	if (!s->pages || !s->pcpu_refs || !s->id_gen || !s->vused || !s->pcpu)
		goto nomem;
	if (perfabi_geometry_has_families(&s->geo)) {
		s->kfam = kvcalloc(s->geo.max_families, sizeof(*s->kfam), GFP_KERNEL);
		s->kmem = kvcalloc(s->geo.max_members, sizeof(*s->kmem), GFP_KERNEL);
		if (!s->kfam || (s->geo.max_members && !s->kmem))
			goto nomem;
	}
	/* Ids carry counter addresses in 48 bits (perfabi_kapi.h). */
	top = (unsigned long)s->pcpu + (s->pcpu_pages << PAGE_SHIFT);
	if (sign_extend64((unsigned long)s->pcpu, PERFABI_ID_PTR_BITS - 1) != (unsigned long)s->pcpu ||
	    sign_extend64(top, PERFABI_ID_PTR_BITS - 1) != top) {
		pr_err("perfabi: per-CPU addresses do not fit the %d bits of an id\n",
		       PERFABI_ID_PTR_BITS);
		err = -EOVERFLOW;
		goto fail;
	}
	for (i = 0; i < s->nr_pages; i++) {
		struct page *p;

		if (page_is_pcpu(s, i, &cpu, &pg)) {
			p = pcpu_page((char *)per_cpu_ptr(s->pcpu, cpu) + (pg << PAGE_SHIFT));
			if (!p) {
				pr_err("perfabi: no page behind CPU %u's per-CPU area\n", cpu);
				err = -EFAULT;
				goto fail;
			}
			s->pcpu_refs[i] = page_count(p);
		} else {
			p = alloc_page(GFP_KERNEL | __GFP_ZERO);
			if (!p)
				goto nomem;
		}
		s->pages[i] = p;
	}
	s->base = vmap(s->pages, s->nr_pages, VM_MAP, PAGE_KERNEL);
	if (!s->base)
		goto nomem;
	s->hdr = s->base;
	s->instances = s->base + s->geo.instances_offset;
	if (s->kfam) {
		s->fh = perfabi_family_header_of(s->hdr);
		s->families = s->base + s->geo.families_offset;
		s->members = s->base + s->geo.members_offset;
	}
	/* The block head is at the start of each CPU's share: seq is word 0. */
	perfabi_cpu_seq = (u64 __percpu *)s->pcpu;
	return 0;
nomem:
	err = -ENOMEM;
fail:
	perfabi_seg_free(s);
	return err;
}

/*
 * Before value words or a family slot freed earlier are used again: a hot
 * path call that checked a deleted handle may still be about to write
 * them (or read the family's buckets). Wait until every CPU has left the
 * non-preemptible section it ran in (perfabi_kapi.h).
 */
void perfabi_reuse_after_gp(struct perfabi_seg *s)
{
	if (s->reuse_needs_gp) {
		synchronize_rcu();
		s->reuse_needs_gp = false;
	}
}
