/*
 * progress.c -- the progress line (progress.h).
 */
#define _GNU_SOURCE
#include "progress.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000ull
#define REDRAW_NS (200 * MS)

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* "1.2M", "999" (no unit); "150 MB", "100 B": three figures at most. */
static void si(char *b, size_t cap, double v, const char *unit)
{
	static const char *const pre[] = {"", "K", "M", "G", "T", "P"};
	int i = 0;
	while (v >= 999.5 && i < 5) {
		v /= 1000;
		i++;
	}
	snprintf(b, cap, "%.*f%s%s%s", i && v < 9.95 ? 1 : 0, v,
	         *unit ? " " : "", pre[i], unit);
}

size_t progress_format(char *buf, size_t cap, const char *what,
                       uint64_t records, uint64_t bytes, uint64_t total,
                       double secs)
{
	char r[32], b[32], t[32], rate[32], left[32] = "";
	si(r, sizeof r, (double)records, "");
	si(b, sizeof b, (double)bytes, "B");
	double bps = secs > 0 ? (double)bytes / secs : 0;
	si(rate, sizeof rate, bps, "B/s");
	int n;
	if (total && bytes <= total) {
		si(t, sizeof t, (double)total, "B");
		if (bps > 0) {
			uint64_t s = (uint64_t)((double)(total - bytes) / bps + 0.5);
			snprintf(left, sizeof left, ", %" PRIu64 ":%02" PRIu64
			         " left", s / 60, s % 60);
		}
		n = snprintf(buf, cap, "%s: %s records, %s of %s (%.0f%%), %s%s",
		             what, r, b, t, 100.0 * (double)bytes / (double)total,
		             rate, left);
	} else {
		n = snprintf(buf, cap, "%s: %s records, %s, %s", what, r, b, rate);
	}
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* Bytes of the segment files of every shard of dir. */
static uint64_t dir_bytes(const char *dir)
{
	char path[4096];
	uint64_t sum = 0;
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "shard-", 6) != 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		DIR *s = opendir(path);
		struct dirent *se;
		struct stat st;
		while (s && (se = readdir(s)) != NULL) {
			size_t n = strlen(se->d_name);
			if (((n > 4 && !strcmp(se->d_name + n - 4, ".seg")) ||
			     (n > 8 && !strcmp(se->d_name + n - 8, ".seg.zst"))) &&
			    fstatat(dirfd(s), se->d_name, &st, 0) == 0)
				sum += (uint64_t)st.st_size;
		}
		if (s)
			closedir(s);
	}
	closedir(d);
	return sum;
}

void progress_start_fd(struct progress *p, int fd, const char *what,
                       uint64_t total)
{
	memset(p, 0, sizeof *p);
	p->fd = fd;
	p->what = what;
	p->total = total;
	p->t0 = mono_ns();
	const char *after = getenv("LE_PROGRESS_AFTER_MS");
	p->after_ns = (after && *after ? strtoull(after, NULL, 10) : 1000) * MS;
	p->next = p->t0 + p->after_ns;
	pthread_mutex_init(&p->mu, NULL);
}

/* Is fd the same terminal as stderr? */
static int same_tty(int fd)
{
	struct stat a, b;
	return isatty(fd) && fstat(fd, &a) == 0 && fstat(2, &b) == 0 &&
	       a.st_rdev == b.st_rdev;
}

void progress_start(struct progress *p, const char *what, const char *dir,
                    int stdout_busy)
{
	int on = isatty(2) && !(stdout_busy && same_tty(1));
	progress_start_fd(p, on ? 2 : -1, what, on && dir ? dir_bytes(dir) : 0);
}

static void draw(struct progress *p, const char *text, size_t n)
{
	char line[320];
	int k = snprintf(line, sizeof line, "\r%.*s\033[K", (int)n, text);
	if (k > 0 && write(p->fd, line, (size_t)k) == k)
		p->shown = 1;
}

void progress_update(struct progress *p, uint64_t records, uint64_t bytes)
{
	if (p->fd < 0)
		return;
	uint64_t now = mono_ns();
	if (now < p->next)
		return;
	p->next = now + REDRAW_NS;
	char text[256];
	size_t n = progress_format(text, sizeof text, p->what, records, bytes,
	                           p->total, (double)(now - p->t0) / 1e9);
	pthread_mutex_lock(&p->mu);
	draw(p, text, n);
	pthread_mutex_unlock(&p->mu);
}

void progress_reader(struct progress *p, const le_reader *r)
{
	le_reader_stats st;
	if (p->fd < 0 || (++p->calls & 1023) != 0)
		return;
	if (le_reader_stats_get(r, &st) == 0)
		progress_update(p, st.records, st.bytes);
}

static void *ticker(void *arg)
{
	struct progress *p = arg;
	struct timespec ts = {0, (long)REDRAW_NS};
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		uint64_t now = mono_ns();
		if (now >= p->next) {
			char text[256];
			int n = snprintf(text, sizeof text, "%s: %.1f s", p->what,
			                 (double)(now - p->t0) / 1e9);
			if (n > 0)
				draw(p, text, (size_t)n);
		}
		pthread_mutex_unlock(&p->mu);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

void progress_tick(struct progress *p)
{
	if (p->fd >= 0 && pthread_create(&p->ticker, NULL, ticker, p) == 0)
		p->ticking = 1;
}

void progress_done(struct progress *p)
{
	if (p->ticking) {
		pthread_mutex_lock(&p->mu);
		p->stop = 1;
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->ticker, NULL);
		p->ticking = 0;
	}
	if (p->shown && write(p->fd, "\r\033[K", 4) == 4)
		p->shown = 0;
	pthread_mutex_destroy(&p->mu);
	p->fd = -1;
}
