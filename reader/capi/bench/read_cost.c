/*
 * read_cost.c - the C side of bench/read-cost: times perfabi_read() of one
 * counter handle, N calls in 100 batches, and prints the nanoseconds per
 * call of the fastest batch (as the Rust side does).
 *
 *   read_cost SEGMENT COUNTER N
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <perfabi.h>

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: read_cost SEGMENT COUNTER N\n");
		return 2;
	}
	long n = atol(argv[3]);
	perfabi_segment *seg;
	perfabi_counter *h;
	if (perfabi_open(argv[1], NULL, &seg) != PERFABI_OK ||
	    perfabi_counter_lookup(seg, argv[2], NULL, &h) != PERFABI_OK) {
		fprintf(stderr, "read_cost: %s\n", perfabi_last_error_message());
		return 1;
	}
	size_t cpus = perfabi_nr_cpus(seg);
	uint64_t *v = calloc(cpus, sizeof *v);
	uint64_t sum = 0;
	for (long i = 0; i < n / 100; i++) /* warm up */
		if (perfabi_read(seg, h, v, cpus, NULL) != PERFABI_OK)
			return 1;
	double ns = 1e300;
	for (int b = 0; b < 100; b++) {
		double start = now_ns();
		for (long i = 0; i < n / 100; i++) {
			if (perfabi_read(seg, h, v, cpus, NULL) != PERFABI_OK) {
				fprintf(stderr, "read_cost: %s\n", perfabi_last_error_message());
				return 1;
			}
			sum += v[0];
		}
		double batch = (now_ns() - start) / (double)(n / 100);
		ns = batch < ns ? batch : ns;
	}
	printf("ns=%.2f cpus=%zu sum=%" PRIu64 "\n", ns, cpus, sum);
	free(v);
	perfabi_counter_free(h);
	perfabi_close(seg);
	return 0;
}
