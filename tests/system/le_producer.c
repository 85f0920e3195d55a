/*
 * le_producer.c -- an application for the system tests: it logs into one
 * or more directories at a paced rate while the tests watch it from
 * outside (serve, stats --live, prometheus, a browser), and takes
 * commands on stdin:
 *
 *   rate N              records per second from now on, all directories
 *                       together (0: pause)
 *   log LEVEL TEXT...   one record (level 0..5) into every directory, then
 *                       le_flush; answers {"logged":...}
 *   logger NAME TEXT... one WARN record of logger NAME with the fields
 *                       user="ann" attempt=3, the same way
 *   kept N              N le_debug records on each engine's root (kept
 *                       when LOGENGINE_BACKTRACE=debug), then
 *                       le_dump_backtrace and le_flush; answers
 *                       {"kept":N,"written":W}, W written out in all
 *   stats               {"records":N,"seconds":S,"rate":R}: what the
 *                       pacing thread wrote so far, over its running time
 *   every N             N calls of one rate-limited call site (10 a
 *                       minute) into the first directory
 *   close               stop, le_close_stats each engine, answer
 *                       {"closed":[{"dir":..,"accepted":..,...}],...}, exit
 *
 *   le_producer [--shards N] [--rate N] [--queue N] DIR...
 *   prints {"ready":PID}.  --queue: queue_capacity (small: drops).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "logengine.h"

#define MAX_DIRS 8

static le_engine *eng[MAX_DIRS];
static const char *dirs[MAX_DIRS];
static int ndirs;
static _Atomic uint64_t rate, written, refused;
static _Atomic int stop;
static uint64_t t_first, t_last; /* pacing thread: first and last write */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Every 10 ms, the records due since the start of the current rate. */
static void *pace(void *arg)
{
	(void)arg;
	uint64_t n = 0, cur = 0, from = now_ns(), done_at_from = 0;
	char msg[160];
	while (!atomic_load(&stop)) {
		uint64_t r = atomic_load(&rate);
		if (r != cur) {
			cur = r;
			from = now_ns();
			done_at_from = n;
		}
		uint64_t due = done_at_from + (now_ns() - from) * cur / 1000000000u;
		for (; n < due && !atomic_load(&stop); n++) {
			int lvl = n % 97 == 0 ? LE_WARN : n % 991 == 0 ? LE_ERROR
			                                                : LE_INFO;
			int len = snprintf(msg, sizeof msg,
			                   "GET /api/items/%" PRIu64 " status=200 "
			                   "bytes=%" PRIu64 " us=%" PRIu64, n,
			                   512 + n % 4096, 80 + n % 700);
			int rc = le_write(eng[n % (uint64_t)ndirs],
			                  n / (uint64_t)ndirs, lvl, msg,
			                  (size_t)len);
			if (rc < 0)
				atomic_fetch_add(&refused, 1);
			if (!t_first)
				t_first = now_ns();
			t_last = now_ns();
			atomic_fetch_add(&written, 1);
		}
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void stats_line(void)
{
	uint64_t w = atomic_load(&written);
	double secs = t_last > t_first ? (double)(t_last - t_first) / 1e9 : 0;
	printf("{\"records\":%" PRIu64 ",\"seconds\":%.3f,\"rate\":%.1f}\n", w,
	       secs, secs > 0 ? (double)w / secs : 0);
}

static void close_all(void)
{
	printf("{\"closed\":[");
	for (int i = 0; i < ndirs; i++) {
		le_stats st;
		int rc = le_close_stats(eng[i], &st);
		printf("%s{\"dir\":\"%s\",\"rc\":%d,\"accepted\":%" PRIu64
		       ",\"written\":%" PRIu64 ",\"dropped\":%" PRIu64
		       ",\"bytes_written\":%" PRIu64 ",\"markers\":%" PRIu64
		       ",\"segments_created\":%" PRIu64 ",\"syncs\":%" PRIu64
		       ",\"checkpoints\":%" PRIu64 ",\"truncated\":%" PRIu64
		       ",\"suppressed\":%" PRIu64 ",\"levels\":[",
		       i ? "," : "", dirs[i], rc, st.accepted, st.written,
		       st.dropped, st.bytes_written, st.markers,
		       st.segments_created, st.syncs, st.checkpoints,
		       st.truncated, st.suppressed);
		for (int lv = LE_TRACE; lv <= LE_FATAL; lv++)
			printf("%s%" PRIu64, lv ? "," : "", st.level_records[lv]);
		printf("]}");
	}
	printf("],\"refused\":%" PRIu64 "}\n", atomic_load(&refused));
}

/* The "kept" command: below-threshold records for the flight recorder. */
static void kept(int n)
{
	int w = 0;
	for (int i = 0; i < ndirs; i++) {
		for (int k = 0; k < n; k++)
			le_debug(eng[i], "kept %d", k);
		int rc = le_dump_backtrace(eng[i]);
		w += rc > 0 ? rc : 0;
		le_flush(eng[i], 5000);
	}
	printf("{\"kept\":%d,\"written\":%d}\n", n, w);
}

int main(int argc, char **argv)
{
	unsigned shards = 2, queue = 0;
	char line[4096];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--shards") && i + 1 < argc)
			shards = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--queue") && i + 1 < argc)
			queue = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			atomic_store(&rate, strtoull(argv[++i], NULL, 10));
		else if (ndirs < MAX_DIRS)
			dirs[ndirs++] = argv[i];
	}
	if (!ndirs) {
		fprintf(stderr, "usage: le_producer [--shards N] [--rate N] DIR...\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < ndirs; i++) {
		le_config c;
		le_config_init(&c);
		c.dir = dirs[i];
		c.create_dir = 1;
		c.shards = shards;
		c.flush_ms = 20;
		if (queue)
			c.queue_capacity = queue;
		int rc = le_open(&eng[i], &c);
		if (rc < 0) {
			fprintf(stderr, "le_producer: %s: %s %s\n", dirs[i],
			        le_strerror(rc), le_errmsg());
			return 1;
		}
	}
	pthread_t t;
	pthread_create(&t, NULL, pace, NULL);
	printf("{\"ready\":%d}\n", (int)getpid());
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "rate ", 5)) {
			atomic_store(&rate, strtoull(line + 5, NULL, 10));
			printf("{\"rate\":%s}\n", line + 5);
		} else if (!strncmp(line, "log ", 4) && strlen(line) > 6) {
			int lvl = line[4] - '0';
			const char *text = line + 6;
			for (int i = 0; i < ndirs; i++) {
				le_write(eng[i], 0, lvl, text, strlen(text));
				le_flush(eng[i], 5000);
			}
			printf("{\"logged\":\"%s\"}\n", text);
		} else if (!strncmp(line, "logger ", 7) && strchr(line + 7, ' ')) {
			char *text = strchr(line + 7, ' ');
			*text++ = '\0';
			for (int i = 0; i < ndirs; i++) {
				le_logger *lg = le_logger_get(eng[i], line + 7);
				le_warn_kv(lg, LE_FIELDS(LE_STR("user", "ann"),
				                         LE_I64("attempt", 3)),
				           "%s", text);
				le_flush(eng[i], 5000);
			}
			printf("{\"logged\":\"%s\"}\n", text);
		} else if (!strncmp(line, "every ", 6)) {
			long n = atol(line + 6);
			for (long k = 0; k < n; k++)
				le_warn_every(eng[0], 60000, 10, "limited %ld", k);
			printf("{\"every\":%ld}\n", n);
		} else if (!strncmp(line, "kept ", 5)) {
			kept(atoi(line + 5));
		} else if (!strcmp(line, "stats")) {
			stats_line();
		} else if (!strcmp(line, "close")) {
			break;
		}
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	close_all();
	return 0;
}
