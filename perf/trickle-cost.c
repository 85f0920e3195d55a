/*
 * trickle-cost.c -- what a stream-only engine costs per line when records
 * trickle in (an access log), in process CPU (docs/BENCHMARKS.md,
 * "perf/"): a writer that spins while producers are slow shows here.
 *
 *   build/trickle-cost MODE RATE SECONDS [FLUSH_MS] > /dev/null
 *
 * MODE 0: the pacing loop alone (the baseline); 1: the same loop writing
 * RATE lines/s (in bursts once a millisecond) through an engine with
 * store = 0 and the text stream on stdout, queue 16 MiB as the gateway's.
 * Prints, on stderr, the process CPU per line; the cost of logging is
 * mode 1 minus mode 0.  Built by `make perf-tools`.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "logengine.h"

static double cpu_s(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
	       (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: trickle-cost MODE RATE SECONDS "
		                "[FLUSH_MS]\n");
		return 2;
	}
	int mode = atoi(argv[1]), rate = atoi(argv[2]), secs = atoi(argv[3]);
	le_engine *e = NULL;
	le_config c;
	le_config_init(&c);
	c.store = 0;
	c.stream_fd = 1;
	c.stream_format = LE_STREAM_TEXT;
	c.queue_capacity_bytes = 16u << 20;
	if (argc > 4)
		c.flush_ms = (uint32_t)atoi(argv[4]);
	if (mode && le_open(&e, &c) < 0) {
		fprintf(stderr, "le_open: %s\n", le_errmsg());
		return 1;
	}
	const char *line = "127.0.0.1 \"GET /api/v1/items HTTP/1.1\" 200 2 "
	                   "rt_us=1234 upstream_us=1100 conn=17";
	size_t len = strlen(line);
	int per_tick = rate / 1000;
	long n = 0;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	double c0 = cpu_s();
	for (int tick = 0; tick < secs * 1000; tick++) {
		t.tv_nsec += 1000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_nsec -= 1000000000;
			t.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		for (int i = 0; i < per_tick; i++, n++)
			if (e)
				le_write(e, 0, LE_INFO, line, len);
	}
	if (e)
		le_flush(e, -1);
	double c1 = cpu_s();
	le_close(e);
	fprintf(stderr, "mode %d: %ld lines, CPU %.3f s, %.2f us/line\n", mode,
	        n, c1 - c0, n ? (c1 - c0) * 1e6 / (double)n : 0.0);
	return 0;
}
