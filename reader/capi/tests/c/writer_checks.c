/*
 * writer_checks.c - drives libperfabi's writer from C for
 * reader/capi/tests/c_writer.rs, which compiles it against the installed
 * library (and under ASan and UBSan) and reads the segment it writes with
 * the Rust reader.
 *
 *   writer_checks write DIR   writes families of every kind in the segment
 *                             directory DIR, reads each value back with
 *                             libperfabi's reader (a mismatch is printed
 *                             "MISMATCH ..." and fails), prints the path,
 *                             "ready", and waits for stdin to end (the test
 *                             reads the segment meanwhile); then deletes a
 *                             member and a family and checks the handles
 *   writer_checks misuse DIR  every error path of the writer: one line per
 *                             call, "CALL code=N name=X message=M"
 *   writer_checks threads DIR 4 threads add to one counter member and
 *                             observe into one histogram member at once,
 *                             each through the same handles; prints the
 *                             totals libperfabi's reader reads after them
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <perfabi.h>

static int failures;

static void report(const char *call, perfabi_error e)
{
	printf("%s code=%d name=%s message=%s\n", call, (int)e,
	       e == PERFABI_OK ? "" : perfabi_last_error_code_name(),
	       e == PERFABI_OK ? "" : perfabi_last_error_message());
}

#define CHECK(call) report(#call, (call))
/* A call repeated with other arguments: reported under `label`. */
#define CASE(label, call) report(label, (call))

/* A call that must succeed. */
#define MUST(call)                                                                   \
	do {                                                                         \
		perfabi_error e_ = (call);                                           \
		if (e_ != PERFABI_OK) {                                              \
			fprintf(stderr, "writer_checks: %s: %s [%s]\n", #call,       \
				perfabi_last_error_message(),                        \
				perfabi_last_error_code_name());                     \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

static void expect(const char *what, int64_t got, int64_t want)
{
	if (got != want) {
		printf("MISMATCH %s got=%" PRId64 " want=%" PRId64 "\n", what, got, want);
		failures++;
	}
}

/* The total of member `instance` of family `name` in snapshot s. */
static int64_t total(const perfabi_snapshot *s, const char *name, const char *instance)
{
	const perfabi_family_info *f = perfabi_snapshot_find_family(s, name);
	size_t k = 0;
	if (!f || perfabi_family_find_member(f, instance, &k) != PERFABI_OK) {
		printf("MISMATCH %s{%s} missing: %s\n", name, instance, perfabi_last_error_message());
		failures++;
		return -1;
	}
	if (perfabi_family_value_type(f) == PERFABI_VALUE_I64) {
		int64_t v = 0;
		MUST(perfabi_snapshot_i64(s, f, k, PERFABI_TOTAL, &v));
		return v;
	}
	uint64_t v = 0;
	MUST(perfabi_snapshot_u64(s, f, k, PERFABI_TOTAL, &v));
	return (int64_t)v;
}

/* Checks a histogram member's total count, sum and buckets. */
static void histogram(const perfabi_snapshot *s, const char *name, uint64_t count, uint64_t sum,
		      const uint64_t *buckets, size_t n)
{
	const perfabi_family_info *f = perfabi_snapshot_find_family(s, name);
	perfabi_histogram h = { 0, 0, 0 };
	uint64_t b[64];
	if (!f) {
		printf("MISMATCH %s missing\n", name);
		failures++;
		return;
	}
	MUST(perfabi_snapshot_histogram(s, f, 0, PERFABI_TOTAL, &h, b, 64));
	expect(name, (int64_t)h.count, (int64_t)count);
	expect(name, (int64_t)h.sum, (int64_t)sum);
	expect(name, (int64_t)h.nr_buckets, (int64_t)n);
	for (size_t j = 0; j < n && j < h.nr_buckets; j++)
		expect(name, (int64_t)b[j], (int64_t)buckets[j]);
}

static perfabi_writer_family *family(perfabi_writer *w, perfabi_family_spec spec)
{
	perfabi_writer_family *f = NULL;
	MUST(perfabi_writer_add_family(w, &spec, &f));
	return f;
}

static perfabi_member *member(perfabi_writer_family *f, const char *instance)
{
	perfabi_member *m = NULL;
	MUST(perfabi_writer_family_add_member(f, instance, NULL, 0, &m));
	return m;
}

static int write_all(const char *dir)
{
	perfabi_writer_options o = perfabi_writer_options_default();
	o.nr_cpus = 4;
	perfabi_writer *w = NULL;
	MUST(perfabi_writer_create_in(dir, "cwriter", &o, &w));

	perfabi_writer_family *req = family(w, (perfabi_family_spec){
		.name = "app.requests", .help = "Requests served", .dimension = "code",
		.kind = PERFABI_METRIC_COUNTER });
	perfabi_label get[] = { { "method", "GET" } };
	perfabi_member *ok = NULL;
	MUST(perfabi_writer_family_add_member(req, "200", get, 1, &ok));
	perfabi_member *err = member(req, "500");
	for (int i = 0; i < 3; i++)
		MUST(perfabi_member_add(ok, 1));
	MUST(perfabi_member_add(ok, 10));
	MUST(perfabi_member_add(err, 2));

	perfabi_writer_family *bytes = family(w, (perfabi_family_spec){
		.name = "app.bytes", .help = "Bytes sent", .kind = PERFABI_METRIC_COUNTER,
		.unit = { .dim_space = 1 } });
	perfabi_member *sent = member(bytes, NULL);
	MUST(perfabi_member_add(sent, 4096));
	MUST(perfabi_member_add(sent, 4096));

	perfabi_writer_family *inflight = family(w, (perfabi_family_spec){
		.name = "app.inflight", .help = "Requests in flight", .dimension = "pool",
		.kind = PERFABI_METRIC_GAUGE, .gauge_mode = PERFABI_GAUGE_MAX,
		.value_type = PERFABI_VALUE_I64 });
	perfabi_member *pool = member(inflight, "a");
	MUST(perfabi_member_set(pool, 5));
	MUST(perfabi_member_add(pool, -7));

	perfabi_writer_family *peak = family(w, (perfabi_family_spec){
		.name = "app.queue_peak", .help = "Longest queue", .dimension = "queue",
		.kind = PERFABI_METRIC_PEAK });
	perfabi_member *q1 = member(peak, "q1"), *q2 = member(peak, "q2");
	MUST(perfabi_member_peak(q1, 7));
	MUST(perfabi_member_peak(q1, 3));
	MUST(perfabi_member_peak(q1, 9));
	MUST(perfabi_member_peak(q2, 4));
	MUST(perfabi_member_reset_peak(q2));

	perfabi_writer_family *lat = family(w, (perfabi_family_spec){
		.name = "app.latency", .help = "Request latency", .kind = PERFABI_METRIC_HISTOGRAM,
		.unit = { .dim_time = 1 }, .buckets = PERFABI_BUCKETS_LOG2, .log2_first = 10,
		.log2_buckets = 4 });
	perfabi_member *l = member(lat, NULL);
	const uint64_t lat_seen[] = { 1000, 2000, 5000, 1u << 20 };
	for (size_t i = 0; i < 4; i++)
		MUST(perfabi_member_observe(l, lat_seen[i]));

	const uint64_t bounds[] = { 10, 100, 1000 };
	perfabi_writer_family *size = family(w, (perfabi_family_spec){
		.name = "app.size", .help = "Response size", .kind = PERFABI_METRIC_HISTOGRAM,
		.unit = { .dim_space = 1 }, .buckets = PERFABI_BUCKETS_EXPLICIT, .bounds = bounds,
		.nr_bounds = 3 });
	perfabi_member *sz = member(size, NULL);
	const uint64_t size_seen[] = { 5, 50, 500, 5000 };
	for (size_t i = 0; i < 4; i++)
		MUST(perfabi_member_observe(sz, size_seen[i]));

	/* Read back with libperfabi's reader, in the same program. */
	perfabi_segment *seg = NULL;
	MUST(perfabi_open(perfabi_writer_path(w), NULL, &seg));
	perfabi_snapshot *s = NULL;
	MUST(perfabi_snapshot_take(seg, &s));
	expect("app.requests{200}", total(s, "app.requests", "200"), 13);
	expect("app.requests{500}", total(s, "app.requests", "500"), 2);
	expect("app.bytes", total(s, "app.bytes", ""), 8192);
	expect("app.inflight{a}", total(s, "app.inflight", "a"), -2);
	expect("app.queue_peak{q1}", total(s, "app.queue_peak", "q1"), 9);
	expect("app.queue_peak{q2}", total(s, "app.queue_peak", "q2"), 0);
	const uint64_t lat_buckets[] = { 1, 1, 0, 2 };
	histogram(s, "app.latency", 4, 1000 + 2000 + 5000 + (1u << 20), lat_buckets, 4);
	const uint64_t size_buckets[] = { 1, 1, 1, 1 };
	histogram(s, "app.size", 4, 5555, size_buckets, 4);
	perfabi_snapshot_free(s);

	printf("path %s\nready\n", perfabi_writer_path(w));
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin))
		;

	/* Deleted: the handles stay valid, their updates are refused. */
	MUST(perfabi_member_delete(err));
	CHECK(perfabi_member_add(err, 1));
	CHECK(perfabi_member_delete(err));
	MUST(perfabi_writer_family_delete(peak));
	CHECK(perfabi_member_peak(q1, 1));
	perfabi_member *q3 = NULL;
	CHECK(perfabi_writer_family_add_member(peak, "q3", NULL, 0, &q3));
	MUST(perfabi_snapshot_take(seg, &s));
	expect("app.queue_peak deleted", perfabi_snapshot_find_family(s, "app.queue_peak") == NULL, 1);
	size_t k = 0;
	expect("app.requests{500} deleted",
	       perfabi_family_find_member(perfabi_snapshot_find_family(s, "app.requests"), "500", &k),
	       PERFABI_E_NO_SUCH_COUNTER);
	expect("app.requests{200} kept", total(s, "app.requests", "200"), 13);
	perfabi_snapshot_free(s);
	perfabi_close(seg);

	/* Closed first, handles freed after: the handles still count. */
	perfabi_writer_close(w);
	MUST(perfabi_member_add(ok, 1));
	perfabi_member *all[] = { ok, err, sent, pool, q1, q2, l, sz };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		perfabi_member_free(all[i]);
	perfabi_writer_family *fams[] = { req, bytes, inflight, peak, lat, size };
	for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++)
		perfabi_writer_family_free(fams[i]);
	printf("done failures=%d\n", failures);
	return failures != 0;
}

static int misuse(const char *dir)
{
	char path[4096];
	perfabi_writer *w = NULL;
	perfabi_writer_options o = perfabi_writer_options_default();
	perfabi_writer_options small = o;
	small.max_families = 1;
	small.max_members = 1;

	CHECK(perfabi_writer_create(NULL, NULL, &w));
	CHECK(perfabi_writer_create("/dev/shm/x", NULL, NULL));
	CHECK(perfabi_writer_create("\xff\xfe", NULL, &w));
	CHECK(perfabi_writer_create(dir, NULL, &w));
	snprintf(path, sizeof path, "%s/no/such/folder/seg", dir);
	CHECK(perfabi_writer_create(path, NULL, &w));
	perfabi_writer_options bad = o;
	bad.nr_cpus = 100000;
	snprintf(path, sizeof path, "%s/bad.seg", dir);
	CHECK(perfabi_writer_create(path, &bad, &w));
	CHECK(perfabi_writer_create_in(dir, NULL, NULL, &w));
	CHECK(perfabi_writer_create_in(dir, "no/slash", NULL, &w));
	CHECK(perfabi_writer_create_in(dir, "", NULL, &w));
	CHECK(perfabi_writer_create_in(dir, "a-name-longer-than-sixty-four-bytes-is-refused-by-the-writer-xxxxx",
				       NULL, &w));
	CHECK(perfabi_writer_create_in("\xff", "w", NULL, &w));
	CHECK(perfabi_writer_create_in(dir, "w", NULL, NULL));
	CHECK(perfabi_writer_create_in(dir, "w", &small, &w));
	if (!w)
		return 1;

	/* At a path: the file is the segment, read back at once. */
	perfabi_writer *at = NULL;
	snprintf(path, sizeof path, "%s/at-path.seg", dir);
	MUST(perfabi_writer_create(path, &o, &at));
	perfabi_writer_family *one = family(at, (perfabi_family_spec){
		.name = "at.path", .kind = PERFABI_METRIC_COUNTER });
	perfabi_member *only = member(one, NULL);
	MUST(perfabi_member_add(only, 5));
	perfabi_segment *seg = NULL;
	perfabi_snapshot *snap = NULL;
	MUST(perfabi_open(path, NULL, &seg));
	MUST(perfabi_snapshot_take(seg, &snap));
	printf("at-path %s total %" PRId64 "\n", perfabi_writer_path(at), total(snap, "at.path", ""));
	perfabi_snapshot_free(snap);
	perfabi_close(seg);
	perfabi_member_free(only);
	perfabi_writer_family_free(one);
	perfabi_writer_close(at);

	printf("perfabi_writer_path(NULL) %s\n", perfabi_writer_path(NULL) ? "non-NULL" : "NULL");

	perfabi_writer_family *f = NULL, *g = NULL;
	perfabi_family_spec counter = { .name = "m.count", .kind = PERFABI_METRIC_COUNTER,
					.dimension = "k" };
	CHECK(perfabi_writer_add_family(NULL, &counter, &f));
	CHECK(perfabi_writer_add_family(w, NULL, &f));
	CHECK(perfabi_writer_add_family(w, &counter, NULL));
	perfabi_family_spec s = counter;
	s.name = NULL;
	CASE("spec name NULL", perfabi_writer_add_family(w, &s, &f));
	s.name = "bad name!";
	CASE("spec name bad", perfabi_writer_add_family(w, &s, &f));
	s.name = "a.name.of.more.than.sixty.three.bytes.is.refused.by.the.writer.xx";
	CASE("spec name long", perfabi_writer_add_family(w, &s, &f));
	s.name = "\xc3\x28";
	CASE("spec name not UTF-8", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.help = "tab\tin help";
	CASE("spec help bad", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.dimension = "bad key";
	CASE("spec dimension bad", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.kind = 9;
	CASE("spec kind 9", perfabi_writer_add_family(w, &s, &f));
	s.kind = 0;
	CASE("spec kind 0", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.gauge_mode = 7;
	CASE("spec gauge_mode 7", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.value_type = 5;
	CASE("spec value_type 5", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.buckets = 9;
	CASE("spec buckets 9", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.gauge_mode = PERFABI_GAUGE_MAX;
	CASE("spec counter with a gauge mode", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.buckets = PERFABI_BUCKETS_LOG2;
	s.log2_buckets = 4;
	CASE("spec counter with buckets", perfabi_writer_add_family(w, &s, &f));
	s = counter;
	s.unit.dim_space = 9;
	CASE("spec unit bad", perfabi_writer_add_family(w, &s, &f));
	perfabi_family_spec h = { .name = "m.hist", .kind = PERFABI_METRIC_HISTOGRAM };
	CASE("spec histogram without buckets", perfabi_writer_add_family(w, &h, &f));
	h.buckets = PERFABI_BUCKETS_EXPLICIT;
	h.nr_bounds = 3;
	CASE("spec bounds NULL", perfabi_writer_add_family(w, &h, &f));
	h.nr_bounds = (size_t)1 << 40;
	CASE("spec bounds too many", perfabi_writer_add_family(w, &h, &f));
	h.nr_bounds = 0;
	CASE("spec bounds none", perfabi_writer_add_family(w, &h, &f));
	const uint64_t down[] = { 10, 5 };
	h.bounds = down;
	h.nr_bounds = 2;
	CASE("spec bounds decreasing", perfabi_writer_add_family(w, &h, &f));
	h.buckets = PERFABI_BUCKETS_LOG2;
	h.log2_buckets = 1;
	CASE("spec log2 one bucket", perfabi_writer_add_family(w, &h, &f));
	perfabi_family_spec p = { .name = "m.peak", .kind = PERFABI_METRIC_PEAK,
				  .value_type = PERFABI_VALUE_I64 };
	CASE("spec signed peak", perfabi_writer_add_family(w, &p, &f));

	MUST(perfabi_writer_add_family(w, &counter, &f));
	CASE("family again", perfabi_writer_add_family(w, &counter, &g));
	perfabi_family_spec prefix = { .name = "m.count.sub", .kind = PERFABI_METRIC_COUNTER };
	CASE("family under a family", perfabi_writer_add_family(w, &prefix, &g));
	perfabi_family_spec other = { .name = "m.other", .kind = PERFABI_METRIC_COUNTER };
	CASE("family table full", perfabi_writer_add_family(w, &other, &g));

	perfabi_member *m = NULL, *n = NULL;
	CHECK(perfabi_writer_family_add_member(NULL, "a", NULL, 0, &m));
	CHECK(perfabi_writer_family_add_member(f, "a", NULL, 0, NULL));
	CHECK(perfabi_writer_family_add_member(f, NULL, NULL, 0, &m));
	CHECK(perfabi_writer_family_add_member(f, "\xff", NULL, 0, &m));
	CHECK(perfabi_writer_family_add_member(f, "a", NULL, 1, &m));
	perfabi_label labels[5] = { { "a", "1" }, { "b", "2" }, { "c", "3" }, { "d", "4" },
				    { "e", "5" } };
	CHECK(perfabi_writer_family_add_member(f, "a", labels, 5, &m));
	CHECK(perfabi_writer_family_add_member(f, "a", labels, (size_t)1 << 40, &m));
	perfabi_label nul[] = { { NULL, "1" } };
	CHECK(perfabi_writer_family_add_member(f, "a", nul, 1, &m));
	perfabi_label badkey[] = { { "bad key", "1" } };
	CHECK(perfabi_writer_family_add_member(f, "a", badkey, 1, &m));
	perfabi_label dup[] = { { "k", "1" } };
	CHECK(perfabi_writer_family_add_member(f, "a", dup, 1, &m));
	MUST(perfabi_writer_family_add_member(f, "a", NULL, 0, &m));
	CASE("member again", perfabi_writer_family_add_member(f, "a", NULL, 0, &n));
	CHECK(perfabi_writer_family_add_member(f, "b", NULL, 0, &n));

	CHECK(perfabi_member_add(NULL, 1));
	CHECK(perfabi_member_set(NULL, 1));
	CHECK(perfabi_member_observe(NULL, 1));
	CHECK(perfabi_member_peak(NULL, 1));
	CHECK(perfabi_member_reset_peak(NULL));
	CHECK(perfabi_member_delete(NULL));
	CHECK(perfabi_writer_family_delete(NULL));
	CHECK(perfabi_member_set(m, 1));
	CHECK(perfabi_member_observe(m, 1));
	CHECK(perfabi_member_peak(m, 1));
	CHECK(perfabi_member_reset_peak(m));
	CASE("add live", perfabi_member_add(m, 1));
	MUST(perfabi_writer_family_delete(f));
	CHECK(perfabi_writer_family_delete(f));
	CASE("add deleted", perfabi_member_add(m, 1));
	CHECK(perfabi_member_delete(m));
	perfabi_member_free(NULL);
	perfabi_writer_family_free(NULL);
	perfabi_writer_close(NULL);
	perfabi_member_free(m);
	perfabi_writer_family_free(f);
	perfabi_writer_close(w);
	printf("strerror %d %s\n", PERFABI_E_TABLE_FULL, perfabi_strerror(PERFABI_E_TABLE_FULL));
	return 0;
}

enum { THREADS = 4, PER_THREAD = 200000 };

struct shared {
	perfabi_member *count, *hist;
};

static void *work(void *arg)
{
	struct shared *s = arg;
	for (int i = 0; i < PER_THREAD; i++) {
		if (perfabi_member_add(s->count, 3) != PERFABI_OK ||
		    perfabi_member_observe(s->hist, (uint64_t)i % 100) != PERFABI_OK) {
			fprintf(stderr, "writer_checks: %s\n", perfabi_last_error_message());
			exit(1);
		}
	}
	return NULL;
}

static int threads(const char *dir)
{
	perfabi_writer *w = NULL;
	MUST(perfabi_writer_create_in(dir, "threads", NULL, &w));
	perfabi_writer_family *c = family(w, (perfabi_family_spec){
		.name = "t.adds", .kind = PERFABI_METRIC_COUNTER });
	const uint64_t bounds[] = { 49 };
	perfabi_writer_family *h = family(w, (perfabi_family_spec){
		.name = "t.seen", .kind = PERFABI_METRIC_HISTOGRAM,
		.buckets = PERFABI_BUCKETS_EXPLICIT, .bounds = bounds, .nr_bounds = 1 });
	struct shared s = { member(c, NULL), member(h, NULL) };
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, work, &s) != 0)
			return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	perfabi_segment *seg = NULL;
	perfabi_snapshot *snap = NULL;
	MUST(perfabi_open(perfabi_writer_path(w), NULL, &seg));
	MUST(perfabi_snapshot_take(seg, &snap));
	const perfabi_family_info *f = perfabi_snapshot_find_family(snap, "t.seen");
	perfabi_histogram hist = { 0, 0, 0 };
	uint64_t b[2] = { 0, 0 };
	if (!f)
		return 1;
	MUST(perfabi_snapshot_histogram(snap, f, 0, PERFABI_TOTAL, &hist, b, 2));
	printf("adds %" PRId64 " count %" PRIu64 " sum %" PRIu64 " buckets %" PRIu64 ",%" PRIu64
	       "\n",
	       total(snap, "t.adds", ""), hist.count, hist.sum, b[0], b[1]);
	printf("path %s\n", perfabi_writer_path(w));
	perfabi_snapshot_free(snap);
	perfabi_close(seg);
	perfabi_member_free(s.count);
	perfabi_member_free(s.hist);
	perfabi_writer_family_free(c);
	perfabi_writer_family_free(h);
	perfabi_writer_close(w);
	return failures != 0;
}

/* Label series (spec §9.2): values with commas get distinct instances by
 * the writers' one rule, each a member of its own with its labels; misuse
 * is refused. Prints each instance for the Rust side to compare. */
static int series(const char *dir)
{
	perfabi_writer *w = NULL;
	MUST(perfabi_writer_create_in(dir, "cseries", NULL, &w));
	perfabi_writer_family *hits = family(w, (perfabi_family_spec){
		.name = "app.hits", .help = "Hits", .dimension = "series",
		.kind = PERFABI_METRIC_COUNTER });
	const char *rows[][2] = { { "x,y", "z" }, { "x", "y,z" }, { "50%", "a b" },
				  { "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",
				    "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww" } };
	perfabi_member *m[4] = { NULL };
	for (int i = 0; i < 4; i++) {
		char instance[64];
		MUST(perfabi_series_instance(rows[i], 2, instance, sizeof instance));
		printf("instance %s\n", instance);
		perfabi_label l[] = { { "a", rows[i][0] }, { "b", rows[i][1] } };
		MUST(perfabi_writer_family_add_member(hits, instance, l, 2, &m[i]));
		MUST(perfabi_member_add(m[i], i + 1));
	}
	/* Misuse: refused, nothing written. */
	char small[4] = "abc";
	const char *one[] = { "x" }, *nulls[] = { "x", NULL };
	CHECK(perfabi_series_instance(one, 1, small, sizeof small));
	CHECK(perfabi_series_instance(rows[0], 5, small, sizeof small));
	CHECK(perfabi_series_instance(nulls, 2, small, sizeof small));
	CHECK(perfabi_series_instance(NULL, 2, small, sizeof small));
	CHECK(perfabi_series_instance(rows[0], 2, NULL, 64));
	CHECK(perfabi_series_instance(rows[0], 2, small, sizeof small));
	expect("a short buffer is left as it was", strcmp(small, "abc") == 0, 1);
	printf("path %s\n", perfabi_writer_path(w));
	for (int i = 0; i < 4; i++)
		perfabi_member_free(m[i]);
	perfabi_writer_family_free(hits);
	perfabi_writer_close(w);
	printf("done failures=%d\n", failures);
	return failures != 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "write") == 0)
		return write_all(argv[2]);
	if (argc == 3 && strcmp(argv[1], "misuse") == 0)
		return misuse(argv[2]);
	if (argc == 3 && strcmp(argv[1], "threads") == 0)
		return threads(argv[2]);
	if (argc == 3 && strcmp(argv[1], "series") == 0)
		return series(argv[2]);
	fprintf(stderr, "usage: writer_checks write|misuse|threads|series DIR\n");
	return 2;
}
