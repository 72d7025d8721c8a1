/*
 * checks.c - drives libperfabi from C for reader/capi/tests/c_api.rs,
 * which compiles it against the installed library and compares what it
 * prints with what the Rust reader reads.
 *
 *   checks dump PATH      every family, member and value of a snapshot, the
 *                         same through family and counter handles, and the
 *                         DAMON aggregations
 *   checks open PATH      the result of perfabi_open
 *   checks misuse PATH    NULL pointers, bad UTF-8, small buffers, wrong
 *                         types: one line per call
 *   checks truncate PATH  reads counter capi.test, prints "ready", waits
 *                         for a line on stdin (the test truncates the file
 *                         meanwhile), reads again
 *   checks reread PATH    looks family capi.reread up, then until stdin
 *                         ends: what the handle's accessors give, "ready",
 *                         a line on stdin (the test changes the segment
 *                         meanwhile), a perfabi_family_read()
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <perfabi.h>

static void report(const char *call, perfabi_error e)
{
	printf("%s code=%d name=%s message=%s\n", call, (int)e,
	       e == PERFABI_OK ? "" : perfabi_last_error_code_name(),
	       e == PERFABI_OK ? "" : perfabi_last_error_message());
}

#define CHECK(call) report(#call, (call))

static int die(const char *what)
{
	fprintf(stderr, "checks: %s: %s [%s]\n", what, perfabi_last_error_message(),
		perfabi_last_error_code_name());
	return 1;
}

/*
 * Member k's value on cpu (or PERFABI_TOTAL) from snapshot s, or from
 * family handle fh if s is NULL: "V", or "count=C sum=S buckets=B,B".
 */
static void print_value(const perfabi_snapshot *s, const perfabi_family_handle *fh,
			const perfabi_family_info *f, size_t k, uint32_t cpu)
{
	uint64_t u = 0, b[64];
	int64_t i = 0;
	perfabi_histogram h = { 0, 0, 0 };
	perfabi_error e;
	if (perfabi_family_kind(f) == PERFABI_METRIC_HISTOGRAM) {
		e = s ? perfabi_snapshot_histogram(s, f, k, cpu, &h, b, 64)
		      : perfabi_family_handle_histogram(fh, k, cpu, &h, b, 64);
		if (e == PERFABI_OK) {
			printf("count=%" PRIu64 " sum=%" PRIu64 " buckets=", h.count, h.sum);
			for (size_t j = 0; j < h.nr_buckets; j++)
				printf("%s%" PRIu64, j ? "," : "", b[j]);
		}
	} else if (perfabi_family_value_type(f) == PERFABI_VALUE_I64) {
		e = s ? perfabi_snapshot_i64(s, f, k, cpu, &i) : perfabi_family_handle_i64(fh, k, cpu, &i);
		if (e == PERFABI_OK)
			printf("%" PRId64, i);
	} else {
		e = s ? perfabi_snapshot_u64(s, f, k, cpu, &u) : perfabi_family_handle_u64(fh, k, cpu, &u);
		if (e == PERFABI_OK)
			printf("%" PRIu64, u);
	}
	if (e != PERFABI_OK)
		printf("error:%s", perfabi_last_error_code_name());
}

static void describe(const perfabi_family_info *f)
{
	perfabi_units u = perfabi_family_unit(f);
	printf("family %s kind=%d type=%s unit=%s units=%d,%d,%d,%u,%u,%d,%u dimension=%s help=%s\n",
	       perfabi_family_name(f), (int)perfabi_family_kind(f),
	       perfabi_family_value_type(f) == PERFABI_VALUE_I64 ? "i64" : "u64",
	       perfabi_family_unit_text(f), u.dim_space, u.dim_time, u.dim_count,
	       (unsigned)u.scale_space, (unsigned)u.scale_time, u.scale_count,
	       (unsigned)u.quantity, perfabi_family_dimension(f), perfabi_family_help(f));
	size_t nb = perfabi_family_nr_buckets(f);
	if (nb > 0) {
		printf(" buckets");
		for (size_t j = 0; j < nb; j++) {
			uint64_t bound;
			perfabi_family_bucket_bound(f, j, &bound);
			if (j + 1 == nb)
				printf(" inf\n");
			else
				printf(" %" PRIu64, bound);
		}
	}
}

static void describe_member(const perfabi_family_info *f, size_t k)
{
	uint32_t id = 0;
	perfabi_family_member_instance_id(f, k, &id);
	printf(" member %s id=%u labels=", perfabi_family_member_instance(f, k), (unsigned)id);
	for (size_t j = 0; j < perfabi_family_member_nr_labels(f, k); j++) {
		const char *key, *value;
		perfabi_family_member_label(f, k, j, &key, &value);
		printf("%s%s=%s", j ? "," : "", key, value);
	}
	printf("\n");
}

static int dump(const char *path)
{
	perfabi_segment *seg;
	if (perfabi_open(path, NULL, &seg) != PERFABI_OK)
		return die("open");
	perfabi_snapshot *s;
	if (perfabi_snapshot_take(seg, &s) != PERFABI_OK) {
		int failed = die("snapshot");
		perfabi_close(seg);
		return failed;
	}
	uint32_t cpus = (uint32_t)perfabi_snapshot_nr_cpus(s);
	printf("cpus %u\n", (unsigned)cpus);
	for (size_t i = 0; i < perfabi_snapshot_nr_families(s); i++) {
		const perfabi_family_info *f = perfabi_snapshot_family(s, i);
		describe(f);
		for (size_t k = 0; k < perfabi_family_nr_members(f); k++) {
			describe_member(f, k);
			printf("  total=");
			print_value(s, NULL, f, k, PERFABI_TOTAL);
			for (uint32_t c = 0; c < cpus; c++) {
				printf(" cpu%u=", (unsigned)c);
				print_value(s, NULL, f, k, c);
			}
			printf("\n");
		}
	}
	/* The same families through handles, as the hot path reads them. */
	for (size_t i = 0; i < perfabi_snapshot_nr_families(s); i++) {
		const char *name = perfabi_family_name(perfabi_snapshot_family(s, i));
		perfabi_family_handle *fh;
		uint64_t g;
		if (perfabi_family_handle_lookup(seg, name, &fh) != PERFABI_OK ||
		    perfabi_family_read(seg, fh, &g) != PERFABI_OK)
			return die(name);
		const perfabi_family_info *f = perfabi_family_handle_info(fh);
		for (size_t k = 0; k < perfabi_family_nr_members(f); k++) {
			const char *instance = perfabi_family_member_instance(f, k);
			printf("handle %s %s total=", name, instance);
			print_value(NULL, fh, f, k, PERFABI_TOTAL);
			printf("\n");
			if (perfabi_family_kind(f) == PERFABI_METRIC_HISTOGRAM)
				continue;
			perfabi_counter *h;
			uint64_t v[256];
			if (perfabi_counter_lookup(seg, name, instance, &h) != PERFABI_OK ||
			    perfabi_read(seg, h, v, 256, &g) != PERFABI_OK)
				return die(name);
			printf("counter %s %s", name, instance);
			for (uint32_t c = 0; c < cpus; c++)
				printf(" %" PRIu64, v[c]);
			printf("\n");
			perfabi_counter_free(h);
		}
		perfabi_family_handle_free(fh);
	}
	perfabi_snapshot_free(s);
	perfabi_damon *d;
	if (perfabi_damon_read(seg, &d) != PERFABI_OK)
		return die("damon");
	for (size_t k = 0; k < perfabi_damon_nr_aggregations(d); k++) {
		perfabi_aggregation a;
		perfabi_damon_aggregation(d, k, &a);
		printf("damon monitor=%" PRIu64 " target=%" PRIu64 " aggregation=%" PRIu64
		       " sample_us=%u aggr_us=%u regions=%zu\n",
		       a.monitor_id, a.target_id, a.aggregation, (unsigned)a.sample_us,
		       (unsigned)a.aggr_us, a.nr_regions);
		for (size_t r = 0; r < a.nr_regions; r++)
			printf(" region %" PRIx64 "-%" PRIx64 " accesses=%u age=%u frequency=%.3f\n",
			       a.regions[r].start, a.regions[r].end, (unsigned)a.regions[r].nr_accesses,
			       (unsigned)a.regions[r].age,
			       perfabi_damon_frequency(&a, a.regions[r].nr_accesses));
	}
	size_t busy;
	perfabi_damon_busy_cpus(d, &busy);
	printf("busy cpus %zu\n", busy);
	perfabi_damon_free(d);
	perfabi_close(seg);
	return 0;
}

static int open_only(const char *path)
{
	perfabi_segment *seg = (perfabi_segment *)&seg; /* not NULL: open must clear it */
	perfabi_error e = perfabi_open(path, NULL, &seg);
	report("perfabi_open", e);
	printf("seg %s\n", seg == NULL ? "NULL" : "set");
	printf("strerror %s\n", perfabi_strerror((int)e));
	perfabi_close(seg);
	return 0;
}

static int misuse(const char *path)
{
	perfabi_segment *seg = NULL;
	perfabi_snapshot *snap = NULL;
	perfabi_counter *h = NULL;
	perfabi_family_handle *fh = NULL;
	perfabi_damon *d = NULL;
	perfabi_segment_info info;
	uint64_t v[256];
	int64_t i64;
	uint32_t id;
	size_t k;
	const char *key, *value;

	CHECK(perfabi_open(NULL, NULL, &seg));
	CHECK(perfabi_open(path, NULL, NULL));
	CHECK(perfabi_open("\xff\xfe", NULL, &seg));
	perfabi_options bad = perfabi_options_default();
	bad.trust = 7;
	CHECK(perfabi_open(path, &bad, &seg));
	CHECK(perfabi_info(NULL, &info));
	CHECK(perfabi_refresh(NULL));
	CHECK(perfabi_snapshot_take(NULL, &snap));
	CHECK(perfabi_counter_lookup(NULL, "capi.test", NULL, &h));
	CHECK(perfabi_read(NULL, NULL, v, 256, NULL));
	CHECK(perfabi_family_handle_lookup(NULL, "capi.bytes", &fh));
	CHECK(perfabi_family_read(NULL, NULL, NULL));
	CHECK(perfabi_damon_read(NULL, &d));
	CHECK(perfabi_snapshot_u64(NULL, NULL, 0, 0, v));
	CHECK(perfabi_family_bucket_bound(NULL, 0, v));
	CHECK(perfabi_family_member_label(NULL, 0, 0, &key, &value));
	CHECK(perfabi_family_handle_u64(NULL, 0, 0, v));
	CHECK(perfabi_damon_aggregation(NULL, 0, NULL));
	/* Accessors: NULL or 0, and the last error set. */
	report("perfabi_family_name(NULL)", perfabi_family_name(NULL) == NULL ? perfabi_last_error_code() : PERFABI_OK);
	report("perfabi_nr_cpus(NULL)", perfabi_nr_cpus(NULL) == 0 ? perfabi_last_error_code() : PERFABI_OK);
	report("perfabi_snapshot_family(NULL, 0)", perfabi_snapshot_family(NULL, 0) == NULL ? perfabi_last_error_code() : PERFABI_OK);

	/* A real segment, used wrongly. */
	if (perfabi_open(path, NULL, &seg) != PERFABI_OK)
		return die("open");
	CHECK(perfabi_counter_lookup(seg, "capi.nothing", NULL, &h));
	CHECK(perfabi_counter_lookup(seg, "capi.bytes", "sdz", &h));
	CHECK(perfabi_counter_lookup(seg, "capi.latency", "get", &h));
	CHECK(perfabi_family_handle_lookup(seg, "capi.nothing", &fh));
	CHECK(perfabi_counter_lookup(seg, "capi.test", NULL, &h));
	CHECK(perfabi_read(seg, h, NULL, 256, NULL));
	CHECK(perfabi_read(seg, h, v, 0, NULL));
	CHECK(perfabi_read(seg, NULL, v, 256, NULL));
	CHECK(perfabi_snapshot_take(seg, &snap));
	const perfabi_family_info *bytes = perfabi_snapshot_find_family(snap, "capi.bytes");
	const perfabi_family_info *lat = perfabi_snapshot_find_family(snap, "capi.latency");
	report("perfabi_snapshot_find_family(capi.nothing)",
	       perfabi_snapshot_find_family(snap, "capi.nothing") == NULL ? perfabi_last_error_code() : PERFABI_OK);
	CHECK(perfabi_snapshot_i64(snap, bytes, 0, PERFABI_TOTAL, &i64));
	CHECK(perfabi_snapshot_u64(snap, lat, 0, PERFABI_TOTAL, v));
	CHECK(perfabi_snapshot_u64(snap, bytes, 99, PERFABI_TOTAL, v));
	CHECK(perfabi_snapshot_u64(snap, bytes, 0, 4096, v));
	perfabi_histogram hist;
	CHECK(perfabi_snapshot_histogram(snap, lat, 0, PERFABI_TOTAL, &hist, v, 2));
	printf("needed buckets %zu\n", hist.nr_buckets);
	CHECK(perfabi_family_bucket_bound(bytes, 0, v));
	CHECK(perfabi_family_member_instance_id(bytes, 99, &id));
	CHECK(perfabi_family_find_member(bytes, "sdz", &k));
	CHECK(perfabi_family_handle_lookup(seg, "capi.bytes", &fh));
	CHECK(perfabi_family_handle_u64(fh, 0, PERFABI_TOTAL, v));
	/* A handle used with another segment than its own. */
	perfabi_segment *other;
	if (perfabi_open(path, NULL, &other) != PERFABI_OK)
		return die("open");
	CHECK(perfabi_read(other, h, v, 256, NULL));
	CHECK(perfabi_family_read(other, fh, NULL));
	perfabi_close(other);
	perfabi_snapshot_free(snap);
	perfabi_family_handle_free(fh);
	perfabi_counter_free(h);
	perfabi_close(seg);
	/* Freeing NULL is nothing. */
	perfabi_close(NULL);
	perfabi_snapshot_free(NULL);
	perfabi_counter_free(NULL);
	perfabi_family_handle_free(NULL);
	perfabi_damon_free(NULL);
	return 0;
}

static int truncate_under(const char *path)
{
	perfabi_segment *seg;
	perfabi_counter *h;
	uint64_t v[256];
	if (perfabi_open(path, NULL, &seg) != PERFABI_OK)
		return die("open");
	if (perfabi_counter_lookup(seg, "capi.test", NULL, &h) != PERFABI_OK)
		return die("lookup");
	CHECK(perfabi_read(seg, h, v, 256, NULL));
	printf("ready\n");
	fflush(stdout);
	char line[16];
	if (fgets(line, sizeof line, stdin) == NULL)
		return die("stdin");
	CHECK(perfabi_read(seg, h, v, 256, NULL));
	perfabi_snapshot *snap = NULL;
	CHECK(perfabi_snapshot_take(seg, &snap));
	perfabi_snapshot_free(snap);
	perfabi_counter_free(h);
	perfabi_close(seg);
	return 0;
}

/* What the accessors of family handle fh give for its member 0. */
static void handle_accessors(const perfabi_family_handle *fh)
{
	uint64_t u = 0, b[64];
	int64_t i = 0;
	perfabi_histogram hist;
	perfabi_error e = perfabi_family_handle_u64(fh, 0, PERFABI_TOTAL, &u);
	report("perfabi_family_handle_u64(fh, 0, PERFABI_TOTAL, &u)", e);
	if (e == PERFABI_OK)
		printf("total %" PRIu64 "\n", u);
	CHECK(perfabi_family_handle_u64(fh, 0, 0, &u));
	CHECK(perfabi_family_handle_i64(fh, 0, PERFABI_TOTAL, &i));
	CHECK(perfabi_family_handle_histogram(fh, 0, PERFABI_TOTAL, &hist, b, 64));
	const perfabi_family_info *f = perfabi_family_handle_info(fh);
	printf("info %s %s\n", perfabi_family_name(f), perfabi_family_member_instance(f, 0));
}

static int reread(const char *path)
{
	perfabi_options o = perfabi_options_default();
	o.busy_timeout_ms = 20;
	perfabi_segment *seg;
	perfabi_family_handle *fh;
	char line[16];
	if (perfabi_open(path, &o, &seg) != PERFABI_OK)
		return die("open");
	if (perfabi_family_handle_lookup(seg, "capi.reread", &fh) != PERFABI_OK)
		return die("lookup");
	for (;;) {
		handle_accessors(fh);
		printf("ready\n");
		fflush(stdout);
		if (fgets(line, sizeof line, stdin) == NULL)
			break;
		CHECK(perfabi_family_read(seg, fh, NULL));
	}
	perfabi_family_handle_free(fh);
	perfabi_close(seg);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: checks dump|open|misuse|truncate|reread PATH\n");
		return 2;
	}
	if (strcmp(argv[1], "dump") == 0)
		return dump(argv[2]);
	if (strcmp(argv[1], "open") == 0)
		return open_only(argv[2]);
	if (strcmp(argv[1], "misuse") == 0)
		return misuse(argv[2]);
	if (strcmp(argv[1], "truncate") == 0)
		return truncate_under(argv[2]);
	if (strcmp(argv[1], "reread") == 0)
		return reread(argv[2]);
	fprintf(stderr, "checks: unknown command %s\n", argv[1]);
	return 2;
}
