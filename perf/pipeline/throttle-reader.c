/*
 * throttle-reader.c -- the "throttled" sink of compare-log-pipeline.sh:
 * reads its stdin at no more than RATE bytes per second (default 4096) and
 * throws the bytes away, like a log shipper that cannot keep up.
 *
 *   usage: throttle-reader [RATE]
 *
 * A token bucket refilled every 10 ms, holding at most a tenth of a
 * second's worth, so the reader never takes a burst larger than RATE/10
 * bytes: the pipe in front of it stays full.  Prints the bytes it read on
 * stderr at EOF.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long rate = argc > 1 ? atol(argv[1]) : 4096;
	double tokens = 0, cap = rate / 10.0;
	long long total = 0;
	char buf[65536];
	struct timespec tick = {0, 10 * 1000 * 1000};

	if (rate <= 0 || cap < 1)
		cap = 1;
	for (;;) {
		nanosleep(&tick, NULL);
		tokens += rate / 100.0;
		if (tokens > cap)
			tokens = cap;
		size_t want = (size_t)tokens;
		if (want == 0)
			continue;
		if (want > sizeof buf)
			want = sizeof buf;
		ssize_t n = read(0, buf, want);
		if (n <= 0)
			break;
		tokens -= (double)n;
		total += n;
	}
	fprintf(stderr, "throttle-reader: %lld bytes\n", total);
	return 0;
}
