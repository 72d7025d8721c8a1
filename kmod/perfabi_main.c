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

/* The slot of a registered id. */
static unsigned int id_slot(struct perfabi_seg *s, long id)
{
	return ((unsigned long)perfabi_id_counter(id) - (unsigned long)perfabi_slot_counter(s, 0)) / 8;
}

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
static void header_init(struct perfabi_seg *s)
{
	u64 now = ktime_get_boottime_ns();

	perfabi_header_init(s->hdr, &s->geo, get_random_u64() | 1, 0, now, 0, now);
	if (s->fh)
		perfabi_family_header_init(s->fh, &s->geo);
	WRITE_ONCE(s->hdr->flags, PERFABI_FLAG_KERNEL);
}

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

static void seg_free(struct perfabi_seg *s)
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
	perfabi_families_free(s);
	if (s->anchor)
		fput(s->anchor);
	memset(s, 0, sizeof(*s));
}

static int seg_alloc(struct perfabi_seg *s)
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
	seg_free(&perfabi_seg);
	pr_info("perfabi: unloaded\n");
}

module_init(perfabi_init);
module_exit(perfabi_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("perfabi: per-CPU counters and DAMON regions in a read-only mmap segment");
