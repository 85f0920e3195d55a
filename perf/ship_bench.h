/*
 * ship_bench.h -- what the shipping benchmarks (forward-bench.c,
 * many-hosts.c) share: a stream made on a fresh server or cluster,
 * median (min-max) of a series, and its markdown and JSON forms.
 * Include after natsrv.h.
 */
#ifndef LE_PERF_SHIP_BENCH_H
#define LE_PERF_SHIP_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <nats/nats.h>

static inline double sb_tv(struct timeval t)
{
	return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

/* A shell command made of fmt and two strings; a failure is reported,
 * not fatal (a cleanup that fails must not lose the figures). */
static inline void sb_sh(const char *fmt, const char *a, const char *b)
{
	char cmd[1200];
	snprintf(cmd, sizeof cmd, fmt, a, b);
	if (system(cmd) != 0)
		fprintf(stderr, "bench: failed: %s\n", cmd);
}

/* Stream `name` taking the nsubj subjects, file storage, `replicas`
 * copies, at url.  A new cluster may refuse one of several replicas
 * until its peers know each other: tried again for up to 30 s.
 * @return 0, -1 (said on stderr). */
static inline int sb_make_stream(const char *url, const char *name,
                                 const char **subj, int nsubj, int replicas)
{
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	jsStreamConfig sc;
	int rc = -1;

	if (natsConnection_ConnectTo(&nc, url) == NATS_OK &&
	    natsConnection_JetStream(&js, nc, NULL) == NATS_OK) {
		jsStreamConfig_Init(&sc);
		sc.Name = name;
		sc.Subjects = subj;
		sc.SubjectsLen = nsubj;
		sc.Storage = js_FileStorage;
		sc.Replicas = replicas;
		for (int i = 0; i < 60 && rc < 0; i++) {
			jsErrCode je = 0;
			rc = js_AddStream(NULL, js, &sc, NULL, &je) == NATS_OK
			             ? 0 : -1;
			if (rc < 0 && i == 59)
				fprintf(stderr, "bench: stream %s: %s\n", name,
				        nats_GetLastError(NULL));
			if (rc < 0)
				t_sleep_ms(500);
		}
	}
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return rc;
}

/* ---- median (min-max) ---- */

struct m3 {
	double med, lo, hi;
};

static int sb_cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median, min and max of v[0..n) (v is left as it was; all 0 when n
 * is 0 or memory is short). */
static inline struct m3 m3_of(const double *v, int n)
{
	struct m3 m = {0, 0, 0};
	double *s = n > 0 ? malloc((size_t)n * sizeof *s) : NULL;

	if (!s)
		return m;
	memcpy(s, v, (size_t)n * sizeof *s);
	qsort(s, (size_t)n, sizeof *s, sb_cmp_d);
	m.med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	m.lo = s[0];
	m.hi = s[n - 1];
	free(s);
	return m;
}

/* " MED (LO-HI) |", each printed with fmt. */
static inline void md_m3(FILE *md, struct m3 m, const char *fmt)
{
	fputc(' ', md);
	fprintf(md, fmt, m.med);
	fputs(" (", md);
	fprintf(md, fmt, m.lo);
	fputc('-', md);
	fprintf(md, fmt, m.hi);
	fputs(") |", md);
}

/* "KEY":{"median":..,"min":..,"max":..}, after a comma when asked. */
static inline void js_m3(FILE *js, const char *key, struct m3 m, int comma)
{
	fprintf(js, "%s\"%s\":{\"median\":%.4g,\"min\":%.4g,\"max\":%.4g}",
	        comma ? "," : "", key, m.med, m.lo, m.hi);
}

#endif
