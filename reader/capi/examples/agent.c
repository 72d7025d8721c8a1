/*
 * agent.c - a small monitoring agent on libperfabi: it lists a segment's
 * metric families with their units and instances, then reads one counter
 * a few times through a handle and prints its rate.
 *
 *   cc agent.c $(pkg-config --cflags --libs perfabi) -o agent
 *   ./agent [SEGMENT [FAMILY [INSTANCE]]]
 *
 * SEGMENT defaults to /dev/shm/perfabi.seg (where perfabi-exportd writes),
 * FAMILY to kernel.all.pswitch (context switches), INSTANCE to none (a
 * family of one instance, or a 1.0 counter such as exportd.refreshes).
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <perfabi.h>

/* Prints what the failed call says (with the path and what to do). */
static int fail(const char *what)
{
	fprintf(stderr, "agent: %s: %s [%s]\n", what, perfabi_last_error_message(),
		perfabi_last_error_code_name());
	return 1;
}

static const char *kind_name(perfabi_metric_kind k)
{
	switch (k) {
	case PERFABI_METRIC_COUNTER: return "counter";
	case PERFABI_METRIC_GAUGE: return "gauge";
	case PERFABI_METRIC_PEAK: return "peak";
	case PERFABI_METRIC_HISTOGRAM: return "histogram";
	}
	return "?";
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Every family of one consistent snapshot: name, kind, unit, instances. */
static int list_families(perfabi_segment *seg)
{
	perfabi_snapshot *snap;
	if (perfabi_snapshot_take(seg, &snap) != PERFABI_OK)
		return fail("snapshot");
	size_t n = perfabi_snapshot_nr_families(snap);
	printf("families %zu generation %" PRIu64 "\n", n, perfabi_snapshot_generation(snap));
	for (size_t i = 0; i < n; i++) {
		const perfabi_family_info *f = perfabi_snapshot_family(snap, i);
		size_t members = perfabi_family_nr_members(f);
		printf("family %s kind=%s unit=%s instances=%zu", perfabi_family_name(f),
		       kind_name(perfabi_family_kind(f)), perfabi_family_unit_text(f), members);
		for (size_t k = 0; k < members; k++) {
			const char *instance = perfabi_family_member_instance(f, k);
			if (instance[0] != '\0') /* "": the one instance of a plain counter */
				printf(" %s", instance);
		}
		printf("\n");
	}
	perfabi_snapshot_free(snap);
	return 0;
}

/* The hot path: one look-up, then reads with no system call. */
static int watch(perfabi_segment *seg, const char *family, const char *instance)
{
	perfabi_counter *h;
	if (perfabi_counter_lookup(seg, family, instance, &h) != PERFABI_OK)
		return fail(family);
	int peak = perfabi_counter_kind(h) == PERFABI_METRIC_PEAK;
	size_t cpus = perfabi_nr_cpus(seg);
	uint64_t *per_cpu = calloc(cpus, sizeof *per_cpu);
	if (per_cpu == NULL) {
		perfabi_counter_free(h);
		fprintf(stderr, "agent: out of memory\n");
		return 1;
	}
	uint64_t last = 0;
	double then = 0;
	int status = 0;
	for (int i = 0; i < 4; i++) {
		if (perfabi_read(seg, h, per_cpu, cpus, NULL) != PERFABI_OK) {
			status = fail(family);
			break;
		}
		double t = now_s();
		uint64_t total = 0;
		for (size_t c = 0; c < cpus; c++)
			total = peak ? (per_cpu[c] > total ? per_cpu[c] : total) : total + per_cpu[c];
		if (i == 0)
			printf("read %s total=%" PRIu64 "\n", family, total);
		else
			printf("read %s total=%" PRIu64 " rate=%.1f/s\n", family, total,
			       (double)(total - last) / (t - then));
		last = total;
		then = t;
		struct timespec pause = { 0, 300 * 1000 * 1000 };
		nanosleep(&pause, NULL);
	}
	free(per_cpu);
	perfabi_counter_free(h);
	return status;
}

int main(int argc, char **argv)
{
	char found[4096]; /* where readers look by default (the module, the eBPF pin, /dev/shm) */
	const char *path = argc > 1 ? argv[1] : (perfabi_default_path(found, sizeof(found)), found);
	const char *family = argc > 2 ? argv[2] : "kernel.all.pswitch";
	const char *instance = argc > 3 ? argv[3] : NULL;

	perfabi_segment *seg;
	if (perfabi_open(path, NULL, &seg) != PERFABI_OK)
		return fail("open");
	perfabi_segment_info info;
	if (perfabi_info(seg, &info) != PERFABI_OK) {
		perfabi_close(seg);
		return fail("info");
	}
	printf("segment %s abi %u.%u cpus %u writer %" PRIu64 " %s\n", path,
	       (unsigned)info.abi_major, (unsigned)info.abi_minor, (unsigned)info.nr_cpus,
	       info.writer_pid, info.liveness == PERFABI_LIVENESS_ALIVE ? "alive" : "not alive");
	int status = list_families(seg);
	if (status == 0)
		status = watch(seg, family, instance);
	perfabi_close(seg);
	return status;
}
