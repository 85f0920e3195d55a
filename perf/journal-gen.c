/*
 * journal-gen.c -- the log perf/journal-bench.py reads: an access-log-like
 * workload (128-byte payloads, mostly INFO, some WARN and ERROR, route
 * keys spread over the shards) written at full speed until the segment
 * files hold BYTES, then closed; waits for the time indexes of the sealed
 * segments, so that the log is what an engine leaves after running long.
 *
 *   build/journal-gen DIR BYTES [SHARDS] [SEGMENT_BYTES]
 *
 * DIR is created (it must not hold a log already).  Prints the records
 * written and the seconds taken as one JSON line on stdout.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "perf_engine.h"
#include "store/index.h"

#define PAYLOAD 128

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DIR BYTES [SHARDS] [SEGMENT_BYTES]\n",
		        argv[0]);
		return 2;
	}
	uint64_t bytes = strtoull(argv[2], NULL, 10);
	le_config c;
	le_engine *e;
	le_config_init(&c);
	c.dir = argv[1];
	c.create_dir = 1;
	c.shards = argc > 3 ? (unsigned)atoi(argv[3]) : 4;
	c.segment_bytes = argc > 4 ? strtoull(argv[4], NULL, 10) : 64u << 20;
	c.durability = LE_SYNC_NONE;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.queue_capacity_bytes = 16u << 20;
	int rc = le_open(&e, &c);
	if (rc < 0) {
		fprintf(stderr, "%s: %s: %s %s\n", argv[0], argv[1],
		        le_strerror(rc), le_errmsg());
		return 2;
	}
	/* each record: its payload and a 28-byte frame header */
	uint64_t n = bytes / (PAYLOAD + 28) + 1;
	static const char *const paths[] = {"/api/v1/items", "/api/v1/users",
	                                    "/static/app.js", "/healthz"};
	char p[PAYLOAD + 1];
	double t0 = now_s();
	for (uint64_t i = 0; i < n; i++) {
		int st = i % 97 == 0 ? 503 : i % 13 == 0 ? 404 : 200;
		int lv = st == 503 ? LE_ERROR : st == 404 ? LE_WARN : LE_INFO;
		int len = snprintf(p, sizeof p, "GET %s/%" PRIu64 " HTTP/1.1 %d "
		                   "%" PRIu64 "us client=10.0.%d.%d ",
		                   paths[i % 4], i, st, 200 + i % 9973,
		                   (int)(i % 200), (int)(i % 251));
		while (len < PAYLOAD)
			p[len++] = (char)('a' + i % 26);
		le_write(e, i, lv, p, PAYLOAD);
		if ((i & 0xfffff) == 0 && i)
			fprintf(stderr, "\r%" PRIu64 " MB", i * (PAYLOAD + 28) >> 20);
	}
	rc = le_close(e);
	double t1 = now_s();
	fprintf(stderr, "\n");
	/* the indexes of the last sealed segments are being built */
	le__index_idle(600000);
	printf("{\"records\":%" PRIu64 ",\"write_s\":%.3f,\"index_wait_s\":%.3f,"
	       "\"shards\":%u,\"segment_bytes\":%" PRIu64 "}\n", n, t1 - t0,
	       now_s() - t1, c.shards, c.segment_bytes);
	return rc < 0 ? 1 : 0;
}
