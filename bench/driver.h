/*
 * driver.h -- what the driver's three files share: bench.c (runs and the
 * soak), presets.c (the named presets, as points), report.c (statistics,
 * JSON, Markdown).  The competitors see only bench.h.
 */
#ifndef LE_BENCH_DRIVER_H
#define LE_BENCH_DRIVER_H

#include <stdio.h>

#include "bench.h"

#define NCOMP 4       /* logengine, spdlog, glog, raw: comps[] order */
#define MAXREP 32
#define MAXTHREADS 64

enum { T_LE = 1, T_SPD = 2, T_GLOG = 4, T_RAW = 8, T_ALL = 15 };

extern const struct competitor *const comps[NCOMP];

/* One measured run, as its child process reports it. */
struct run_result {
	int valid;          /* every record not reported dropped was found */
	double secs;        /* first call to "everything is in its file" */
	double msgs, mbs;   /* records/s; payload (or message text) MB/s */
	double p50, p99, p999, max; /* per-call submit latency, ns */
	double cpu;         /* user + sys seconds of the process, timed part */
	double rss_mb;      /* peak RSS of the process */
	uint64_t submitted, dropped, found, bytes; /* bytes: in the files */
	uint64_t minflt, vcsw, ivcsw; /* page faults, context switches */
	char why[200];      /* why it is invalid */
};

/* A configuration to measure, and what its runs gave. */
/* compare's points of logengine with its default durability, and its
 * burst with the default overflow policy (presets.c) */
#define VARIANT_DEFAULTS 2
#define VARIANT_BURST 3

struct point {
	const char *preset;
	char label[80];
	struct bench_cfg cfg;  /* cfg.dir is set when it runs */
	unsigned targets;      /* T_* bits */
	int variant;           /* compare: 1 = logengine with a small queue,
	                          VARIANT_DEFAULTS, VARIANT_BURST */
	struct run_result res[NCOMP][MAXREP];
	int nres[NCOMP];
};

/* One soak interval (last = 1: the totals of the whole soak). */
struct soak_iv {
	int last, index, valid;
	double t, msgs, p50, p99, p999, max, cpu, rss_mb;
	uint64_t records, written, dropped, queued;
	uint64_t minflt;    /* page faults of the process in the interval */
	char why[160];
};

struct soak_run {
	const struct competitor *c;
	struct soak_iv *iv;
	int n;
	struct soak_iv total;
	int done;
};

enum { IN_QUICK = 1, IN_SCAN = 2, IN_CUSTOM = 4 };

struct preset {
	const char *name;
	int in;                          /* IN_*: which runs include it */
	void (*build)(const char *name); /* adds its points; NULL: soak */
	const char *what;
};

extern const struct preset presets[];
extern const size_t npresets;

/* Command-line options (bench.c parses them). */
struct opts {
	long records;
	int repeats, threads, route_keys, formatted, untimed, custom, list,
	    quiet;
	uint32_t payload;
	unsigned targets, soak_targets;
	int mode; /* 0 quick, 1 scan, 2 full */
	double soak, soak_rate, soak_iv;
	const char *out, *work, *only;
	le_config le;
};

extern struct opts O;
extern struct point *pts;
extern size_t npts;
extern struct soak_run soaks[NCOMP];
extern int nsoaks;
extern double tsc_per_ns, timer_ns;

/* presets.c */
struct bench_cfg preset_base(void); /* every preset's starting point */
int preset_selected(const struct preset *p);
unsigned parse_targets(const char *list);

/* report.c: statistics */
enum { F_MSGS, F_MBS, F_P50, F_P99, F_P999, F_MAX, F_CPU, F_RSS, F_SECS,
       F_DROPPED, F_BYTES, F_FOUND, F_MINFLT, F_VCSW, F_IVCSW, NF };

struct summary {
	int valid, runs;
	double med[NF], min[NF], max[NF];
};

void summarize(const struct point *p, int t, struct summary *s);

/* report.c: output, all under outdir (O.out/<date>) */
void report_init(void);                 /* the machine, the date */
const char *report_dir(void);
int report_preset_json(const char *preset);
void report_soak_json(const struct soak_run *sr);
void report_md(FILE *f);
const char *fmt_rate(double v, char *b, size_t n);  /* "7.85 M" */
const char *fmt_dur(double ns, char *b, size_t n);  /* "60 ns", "1.2 µs" */

#endif /* LE_BENCH_DRIVER_H */
