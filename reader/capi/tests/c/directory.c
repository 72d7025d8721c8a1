/*
 * directory.c - reads a segment directory as one through libperfabi, for
 * reader/capi/tests/c_api.rs, which compares what it prints with what the
 * Rust reader's Directory merges and with the values the writers wrote.
 *
 *   directory read DIR [LABEL]  every merged family, member (instance and
 *                               labels) and value, then every problem
 *   directory misuse DIR        NULL pointers, bad indexes, wrong types,
 *                               another read's family: one line per call
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <perfabi.h>

static int die(const char *what)
{
	fprintf(stderr, "directory: %s: %s [%s]\n", what, perfabi_last_error_message(),
		perfabi_last_error_code_name());
	return 1;
}

static void report(const char *call, perfabi_error e)
{
	printf("%s code=%d name=%s\n", call, (int)e,
	       e == PERFABI_OK ? "" : perfabi_last_error_code_name());
}

#define CHECK(call) report(#call, (call))

/* Member k's merged value: "V", or "count=C sum=S buckets=B,B". */
static int print_value(const perfabi_scrape *s, const perfabi_family_info *f, size_t k)
{
	uint64_t u = 0, b[64];
	int64_t i = 0;
	perfabi_histogram h = { 0, 0, 0 };
	if (perfabi_family_kind(f) == PERFABI_METRIC_HISTOGRAM) {
		if (perfabi_scrape_histogram(s, f, k, &h, b, 64) != PERFABI_OK)
			return die("perfabi_scrape_histogram");
		printf("count=%" PRIu64 " sum=%" PRIu64 " buckets=", h.count, h.sum);
		for (size_t j = 0; j < h.nr_buckets; j++)
			printf("%s%" PRIu64, j ? "," : "", b[j]);
	} else if (perfabi_family_value_type(f) == PERFABI_VALUE_I64) {
		if (perfabi_scrape_i64(s, f, k, &i) != PERFABI_OK)
			return die("perfabi_scrape_i64");
		printf("%" PRId64, i);
	} else {
		if (perfabi_scrape_u64(s, f, k, &u) != PERFABI_OK)
			return die("perfabi_scrape_u64");
		printf("%" PRIu64, u);
	}
	return 0;
}

static int open_dir(const char *path, const char *label, perfabi_directory **d)
{
	perfabi_directory_options o = perfabi_directory_options_default();
	o.writer_label = label;
	if (perfabi_directory_open(path, &o, d) != PERFABI_OK)
		return die("perfabi_directory_open");
	return 0;
}

/*
 * "FAMILY name writers=N members=M", then "  instance{k=v,...} = value"
 * per member, then "PROBLEM code file family: message" per problem, then
 * "SEGMENTS n".
 */
static int read_dir(const char *path, const char *label)
{
	perfabi_directory *d = NULL;
	perfabi_scrape *s = NULL;
	if (open_dir(path, label, &d))
		return 1;
	if (perfabi_directory_read(d, &s) != PERFABI_OK) {
		perfabi_directory_close(d);
		return die("perfabi_directory_read");
	}
	/* A read outlives its directory. */
	perfabi_directory_close(d);
	for (size_t i = 0; i < perfabi_scrape_nr_families(s); i++) {
		const perfabi_family_info *f = perfabi_scrape_family(s, i);
		if (!f || perfabi_scrape_find_family(s, perfabi_family_name(f)) != f)
			return die("perfabi_scrape_family");
		size_t n = perfabi_family_nr_members(f);
		printf("FAMILY %s writers=%zu members=%zu\n", perfabi_family_name(f),
		       perfabi_scrape_family_writers(s, f), n);
		for (size_t k = 0; k < n; k++) {
			printf("  %s{", perfabi_family_member_instance(f, k));
			for (size_t l = 0; l < perfabi_family_member_nr_labels(f, k); l++) {
				const char *key = NULL, *value = NULL;
				if (perfabi_family_member_label(f, k, l, &key, &value) != PERFABI_OK)
					return die("perfabi_family_member_label");
				printf("%s%s=%s", l ? "," : "", key, value);
			}
			printf("} = ");
			if (print_value(s, f, k))
				return 1;
			printf("\n");
		}
	}
	for (size_t i = 0; i < perfabi_scrape_nr_problems(s); i++) {
		const char *family = perfabi_scrape_problem_family(s, i);
		printf("PROBLEM %s %s %s: %s\n", perfabi_scrape_problem_code(s, i),
		       perfabi_scrape_problem_file(s, i), family ? family : "-",
		       perfabi_scrape_problem_message(s, i));
	}
	printf("SEGMENTS %zu\n", perfabi_scrape_nr_segments(s));
	perfabi_scrape_free(s);
	return 0;
}

static int misuse(const char *path)
{
	perfabi_directory *d = NULL;
	perfabi_scrape *s = NULL, *t = NULL;
	uint64_t u = 0;
	int64_t i = 0;
	perfabi_histogram h = { 0, 0, 0 };
	uint64_t b[1];
	perfabi_directory_options o = perfabi_directory_options_default();
	char dflt[8];
	size_t n = perfabi_directory_default_path(NULL, 0);
	printf("default dir length: %zu\n", n);
	printf("default dir cut: %s (%zu)\n", dflt, perfabi_directory_default_path(dflt, sizeof dflt));
	CHECK(perfabi_directory_open(path, NULL, NULL));
	o.writer_label = "";
	CHECK(perfabi_directory_open(path, &o, &d));
	printf("after a failed open: %s\n", d ? "not NULL" : "NULL");
	o.writer_label = "\xff";
	CHECK(perfabi_directory_open(path, &o, &d));
	o = perfabi_directory_options_default();
	o.segment.trust = 7;
	CHECK(perfabi_directory_open(path, &o, &d));
	CHECK(perfabi_directory_read(NULL, &s));
	if (open_dir(path, NULL, &d))
		return 1;
	CHECK(perfabi_directory_read(d, NULL));
	CHECK(perfabi_directory_read(d, &s));
	CHECK(perfabi_directory_read(d, &t));
	const perfabi_family_info *req = perfabi_scrape_find_family(s, "app.requests");
	const perfabi_family_info *lat = perfabi_scrape_find_family(s, "app.latency");
	const perfabi_family_info *other = perfabi_scrape_find_family(t, "app.requests");
	const perfabi_family_info *none = perfabi_scrape_find_family(s, "no.such");
	printf("find missing: %s %s\n", none ? "found" : "NULL", perfabi_last_error_code_name());
	printf("family past the last: %s\n",
	       perfabi_scrape_family(s, perfabi_scrape_nr_families(s)) ? "found" : "NULL");
	CHECK(perfabi_scrape_u64(s, req, 0, NULL));
	CHECK(perfabi_scrape_u64(s, req, 99, &u));
	CHECK(perfabi_scrape_u64(s, other, 0, &u));
	CHECK(perfabi_scrape_u64(NULL, req, 0, &u));
	CHECK(perfabi_scrape_i64(s, req, 0, &i));
	CHECK(perfabi_scrape_u64(s, lat, 0, &u));
	CHECK(perfabi_scrape_histogram(s, req, 0, &h, b, 1));
	CHECK(perfabi_scrape_histogram(s, lat, 0, &h, b, 1));
	printf("histogram needs %zu buckets\n", h.nr_buckets);
	CHECK(perfabi_scrape_histogram(s, lat, 0, NULL, b, 1));
	const char *past = perfabi_scrape_problem_code(s, perfabi_scrape_nr_problems(s));
	printf("problem past the last: %s %s\n", past ? "found" : "NULL",
	       perfabi_last_error_code_name());
	printf("writers of another read's family: %zu\n", perfabi_scrape_family_writers(s, other));
	printf("NULL read: %zu %zu %zu\n", perfabi_scrape_nr_families(NULL),
	       perfabi_scrape_nr_problems(NULL), perfabi_scrape_nr_segments(NULL));
	perfabi_scrape_free(t);
	perfabi_scrape_free(s);
	perfabi_scrape_free(NULL);
	perfabi_directory_close(d);
	perfabi_directory_close(NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "read") == 0)
		return read_dir(argv[2], argc >= 4 ? argv[3] : NULL);
	if (argc == 3 && strcmp(argv[1], "misuse") == 0)
		return misuse(argv[2]);
	fprintf(stderr, "usage: directory read DIR [LABEL] | directory misuse DIR\n");
	return 2;
}
