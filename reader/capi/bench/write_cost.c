/*
 * write_cost.c - the C side of bench/write-cost: creates a segment at
 * PATH with one counter family of one member, times perfabi_member_add()
 * of that member, N calls in 100 batches, and prints the nanoseconds per
 * call of the fastest batch (as the Rust side does).
 *
 *   write_cost PATH N
 */
#define _POSIX_C_SOURCE 200809L
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

static int fail(void)
{
	fprintf(stderr, "write_cost: %s\n", perfabi_last_error_message());
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: write_cost PATH N\n");
		return 2;
	}
	long n = atol(argv[2]);
	perfabi_writer *w;
	perfabi_writer_family *f;
	perfabi_member *m;
	perfabi_family_spec spec = { .name = "bench.adds", .kind = PERFABI_METRIC_COUNTER };
	if (perfabi_writer_create(argv[1], NULL, &w) != PERFABI_OK ||
	    perfabi_writer_add_family(w, &spec, &f) != PERFABI_OK ||
	    perfabi_writer_family_add_member(f, NULL, NULL, 0, &m) != PERFABI_OK)
		return fail();
	for (long i = 0; i < n / 100; i++) /* warm up */
		if (perfabi_member_add(m, 1) != PERFABI_OK)
			return fail();
	double ns = 1e300;
	for (int b = 0; b < 100; b++) {
		double start = now_ns();
		for (long i = 0; i < n / 100; i++)
			if (perfabi_member_add(m, 1) != PERFABI_OK)
				return fail();
		double batch = (now_ns() - start) / (double)(n / 100);
		ns = batch < ns ? batch : ns;
	}
	printf("ns=%.2f\n", ns);
	perfabi_member_free(m);
	perfabi_writer_family_free(f);
	perfabi_writer_close(w);
	return 0;
}
