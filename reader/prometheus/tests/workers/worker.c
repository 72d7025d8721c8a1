/* worker.c - a C worker of reader/prometheus/tests/workers.rs.
 *
 * Usage: worker DIR SLOT CHUNK PAUSE_US
 * Writes a segment of its own in DIR through libperfabi's writer API, with
 * the families every worker of the test has (the same names and metadata
 * in C, Python and Rust, so a reader merges them): the counter
 * workers_requests, the histogram workers_latency (bounds 10, 100, 1000)
 * and the gauge workers_slot (mode MAX), set to SLOT + 1. Prints
 * "segment PATH", then for ever: a batch of 10 * CHUNK requests, each one
 * counter add and one observation of (i % 1100) for the i-th request of
 * its life, sleeping PAUSE_US microseconds after every CHUNK of them (a
 * kill lands inside a batch), and "batch N" once batch N is complete. It
 * runs until killed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <perfabi.h>

static void fail(const char *what)
{
	fprintf(stderr, "worker.c: %s: %s\n", what, perfabi_last_error_message());
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: worker DIR SLOT CHUNK PAUSE_US\n");
		return 2;
	}
	long slot = atol(argv[2]), chunk = atol(argv[3]), pause_us = atol(argv[4]);
	struct timespec pause = { .tv_sec = pause_us / 1000000, .tv_nsec = (pause_us % 1000000) * 1000 };
	const uint64_t bounds[] = { 10, 100, 1000 };
	perfabi_family_spec r = { .name = "workers_requests", .help = "Requests served",
				  .kind = PERFABI_METRIC_COUNTER };
	perfabi_family_spec l = { .name = "workers_latency", .help = "Request latency",
				  .kind = PERFABI_METRIC_HISTOGRAM, .buckets = PERFABI_BUCKETS_EXPLICIT,
				  .bounds = bounds, .nr_bounds = 3 };
	perfabi_family_spec s = { .name = "workers_slot", .help = "The highest live worker slot",
				  .kind = PERFABI_METRIC_GAUGE, .gauge_mode = PERFABI_GAUGE_MAX,
				  .value_type = PERFABI_VALUE_I64 };
	perfabi_writer *w;
	perfabi_writer_family *requests, *latency, *slots;
	perfabi_member *req, *lat, *sl;
	if (perfabi_writer_create_in(argv[1], "worker-c", NULL, &w))
		fail("create");
	if (perfabi_writer_add_family(w, &r, &requests) || perfabi_writer_add_family(w, &l, &latency) ||
	    perfabi_writer_add_family(w, &s, &slots))
		fail("add a family");
	if (perfabi_writer_family_add_member(requests, NULL, NULL, 0, &req) ||
	    perfabi_writer_family_add_member(latency, NULL, NULL, 0, &lat) ||
	    perfabi_writer_family_add_member(slots, NULL, NULL, 0, &sl))
		fail("add a member");
	if (perfabi_member_set(sl, slot + 1))
		fail("set the slot");
	printf("segment %s\n", perfabi_writer_path(w));
	fflush(stdout);
	uint64_t i = 0;
	for (unsigned long batch = 1;; batch++) {
		for (long c = 0; c < 10; c++) {
			for (long k = 0; k < chunk; k++, i++) {
				if (perfabi_member_add(req, 1) || perfabi_member_observe(lat, i % 1100))
					fail("update");
			}
			nanosleep(&pause, NULL);
		}
		printf("batch %lu\n", batch);
		fflush(stdout);
	}
}
