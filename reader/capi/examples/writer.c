/* writer.c - a C program counts its requests in perfabi (README "Writing from C"). */
#include <stdio.h>
#include <perfabi.h>

int main(void)
{
	perfabi_writer *w; /* a segment of our own in the default segment directory */
	perfabi_writer_family *requests, *latency;
	perfabi_member *ok, *lat;
	perfabi_family_spec r = { .name = "myapp.requests", .help = "Requests served",
				  .dimension = "code", .kind = PERFABI_METRIC_COUNTER };
	perfabi_family_spec l = { .name = "myapp.latency", .help = "Request latency",
				  .kind = PERFABI_METRIC_HISTOGRAM, .unit = { .dim_time = 1 },
				  .buckets = PERFABI_BUCKETS_LOG2, .log2_first = 10, .log2_buckets = 16 };
	if (perfabi_writer_create_in(NULL, "myapp", NULL, &w) ||
	    perfabi_writer_add_family(w, &r, &requests) || perfabi_writer_add_family(w, &l, &latency) ||
	    perfabi_writer_family_add_member(requests, "200", NULL, 0, &ok) ||
	    perfabi_writer_family_add_member(latency, NULL, NULL, 0, &lat)) {
		fprintf(stderr, "myapp: %s\n", perfabi_last_error_message());
		return 1;
	}
	for (int i = 0; i < 1000; i++) {                  /* the program's work */
		perfabi_member_add(ok, 1);                /* a few ns: no lock, no lookup */
		perfabi_member_observe(lat, 50000 + i * 100); /* nanoseconds */
	}
	printf("%s\n", perfabi_writer_path(w));
	fflush(stdout);
	getchar(); /* runs until Enter: read it meanwhile */
	perfabi_member_free(ok);
	perfabi_member_free(lat);
	perfabi_writer_family_free(requests);
	perfabi_writer_family_free(latency);
	perfabi_writer_close(w);
	return 0;
}
