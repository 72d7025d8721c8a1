/*
 * read_directory.c - every family of a segment directory, merged over its
 * writer processes: read_directory [DIR] (default: $PERFABI_DIR, else
 * /dev/shm/perfabi-<uid>).
 *
 *   cc read_directory.c $(pkg-config --cflags --libs perfabi)
 */
#include <inttypes.h>
#include <stdio.h>

#include <perfabi.h>

int main(int argc, char **argv)
{
	perfabi_directory *d = NULL;
	perfabi_scrape *s = NULL;
	if (perfabi_directory_open(argc > 1 ? argv[1] : NULL, NULL, &d) != PERFABI_OK ||
	    perfabi_directory_read(d, &s) != PERFABI_OK) {
		fprintf(stderr, "read_directory: %s\n", perfabi_last_error_message());
		perfabi_directory_close(d);
		return 1;
	}
	for (size_t i = 0; i < perfabi_scrape_nr_families(s); i++) {
		const perfabi_family_info *f = perfabi_scrape_family(s, i);
		for (size_t k = 0; k < perfabi_family_nr_members(f); k++) {
			printf("%s{%s} ", perfabi_family_name(f), perfabi_family_member_instance(f, k));
			uint64_t v = 0, b[64];
			int64_t x = 0;
			perfabi_histogram h = { 0, 0, 0 };
			if (perfabi_family_kind(f) == PERFABI_METRIC_HISTOGRAM) {
				perfabi_scrape_histogram(s, f, k, &h, b, 64);
				printf("count=%" PRIu64 " sum=%" PRIu64 "\n", h.count, h.sum);
			} else if (perfabi_family_value_type(f) == PERFABI_VALUE_I64) {
				perfabi_scrape_i64(s, f, k, &x);
				printf("%" PRId64 "\n", x);
			} else {
				perfabi_scrape_u64(s, f, k, &v);
				printf("%" PRIu64 "\n", v);
			}
		}
	}
	for (size_t i = 0; i < perfabi_scrape_nr_problems(s); i++) /* each alone */
		fprintf(stderr, "left out: %s\n", perfabi_scrape_problem_message(s, i));
	perfabi_scrape_free(s);
	perfabi_directory_close(d);
	return 0;
}
