/*
 * perf_engine.h -- the engine the throughput and latency programs of perf/
 * measure: a fresh directory ($TMPDIR/NAME, removed first), durability
 * none (the page cache, as in the benchmark), overflow block (nothing
 * dropped, so every record is measured).
 */
#ifndef LE_PERF_ENGINE_H
#define LE_PERF_ENGINE_H

#include <stdio.h>
#include <stdlib.h>

#include "logengine.h"

/* rm -rf dir.  @return 0, or -1 when it failed. */
static inline int perf_rmrf(const char *dir)
{
	char cmd[1024];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Fill c for dir (a buffer of cap bytes it names NAME under $TMPDIR, or
 * the caller's own when dir[0] is set); the caller may change fields
 * before perf_open.  @return 0, or -1 when the old directory stays. */
static inline int perf_config(le_config *c, char *dir, size_t cap,
                              const char *name)
{
	const char *tmp = getenv("TMPDIR");

	if (!dir[0])
		snprintf(dir, cap, "%s/%s", tmp ? tmp : "/tmp", name);
	if (perf_rmrf(dir) < 0)
		return -1;
	le_config_init(c);
	c->dir = dir;
	c->create_dir = 1;
	c->durability = LE_SYNC_NONE;
	c->overflow = LE_OVERFLOW_BLOCK;
	return 0;
}

/* le_open, saying why on stderr when it fails.  @return 0 or -1. */
static inline int perf_open(le_engine **e, const le_config *c)
{
	if (le_open(e, c) == 0)
		return 0;
	fprintf(stderr, "le_open: %s\n", le_errmsg());
	return -1;
}

#endif
