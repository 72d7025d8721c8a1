/*
 * at_exit.c - libperfabi called while a thread or the program ends, for
 * reader/capi/tests/c_api.rs: a call that fails once the thread's
 * thread-local storage is gone (its last error with it) must still return
 * its code, and the last-error getters must still answer, not abort.
 *
 *   at_exit MISSING   MISSING is a path where no segment is
 *
 * Each failing perfabi_open() prints one line:
 *   WHEN open=CODE seg=NULL|set last=CODE name="NAME" message="MESSAGE"
 * in order: on the main thread; on a worker thread; in a pthread key's
 * destructor when the worker ends (glibc runs those after the thread's
 * thread-local destructors); in an atexit() handler (glibc runs those
 * after the main thread's thread-local destructors).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <perfabi.h>

static const char *missing;
static pthread_key_t key;

static void fail_open(const char *when)
{
	perfabi_segment *seg = (perfabi_segment *)&seg; /* not NULL: open must clear it */
	perfabi_error e = perfabi_open(missing, NULL, &seg);
	printf("%s open=%d seg=%s last=%d name=\"%s\" message=\"%s\"\n", when, (int)e,
	       seg == NULL ? "NULL" : "set", (int)perfabi_last_error_code(),
	       perfabi_last_error_code_name(), perfabi_last_error_message());
	fflush(stdout);
}

static void at_thread_exit(void *value)
{
	(void)value;
	fail_open("thread-key-destructor");
}

static void at_program_exit(void)
{
	fail_open("atexit");
}

static void *worker(void *arg)
{
	(void)arg;
	/* A failure first, so that the thread has a last error to destroy. */
	fail_open("thread");
	pthread_setspecific(key, &key); /* non-NULL: the destructor runs */
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: at_exit MISSING\n");
		return 2;
	}
	missing = argv[1];
	fail_open("main");
	pthread_t t;
	if (atexit(at_program_exit) != 0 || pthread_key_create(&key, at_thread_exit) != 0 ||
	    pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0) {
		fprintf(stderr, "at_exit: setup failed\n");
		return 2;
	}
	return 0;
}
