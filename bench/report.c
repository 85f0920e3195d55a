/*
 * report.c -- what the runs gave, summarized: medians with min and max,
 * the machine they ran on, one JSON file per preset and per soak, and the
 * Markdown tables (BENCH.md, also printed).  Layout of a preset's JSON:
 *
 *   {"suite":"logengine-bench","format":1,"preset":..,"repeats":..,
 *    "machine":{cpu,cpus,mem_mb,kernel,fs,clocksource,compiler,commit,
 *               versions{logengine,spdlog,glog}},"date":..,"timer_ns":..,
 *    "points":[{"label":..,"untimed":..,"workload":"raw"|"formatted"|"kv",
 *               "records":..,
 *               "payload":..,"threads":..,"route_keys":..,
 *               "logengine":{the le_config knobs},
 *               "results":[{"target":..,"version":..,"valid":..,
 *                           "runs":[{"valid":..,FIGURES,"why"?}],
 *                           "median":{FIGURES},"min":{..},"max":{..}}]}]}
 *
 * FIGURES: msgs_per_s, mb_per_s, p50_ns, p99_ns, p999_ns, max_ns, cpu_s,
 * rss_mb, secs, dropped, bytes, records_found, page_faults,
 * voluntary_switches, involuntary_switches.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"

/* ---- statistics ---- */

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}


static const char *const fname[NF] = {
	"msgs_per_s", "mb_per_s", "p50_ns", "p99_ns", "p999_ns", "max_ns",
	"cpu_s", "rss_mb", "secs", "dropped", "bytes", "records_found",
	"page_faults", "voluntary_switches", "involuntary_switches"};

static double field(const struct run_result *r, int f)
{
	switch (f) {
	case F_MSGS: return r->msgs;
	case F_MBS: return r->mbs;
	case F_P50: return r->p50;
	case F_P99: return r->p99;
	case F_P999: return r->p999;
	case F_MAX: return r->max;
	case F_CPU: return r->cpu;
	case F_RSS: return r->rss_mb;
	case F_SECS: return r->secs;
	case F_DROPPED: return (double)r->dropped;
	case F_BYTES: return (double)r->bytes;
	case F_FOUND: return (double)r->found;
	case F_MINFLT: return (double)r->minflt;
	case F_VCSW: return (double)r->vcsw;
	default: return (double)r->ivcsw;
	}
}

/* Median (the lower middle for an even count), min and max of the valid
 * runs of a point's target. */
void summarize(const struct point *p, int t, struct summary *s)
{
	double v[MAXREP];
	memset(s, 0, sizeof *s);
	s->runs = p->nres[t];
	for (int f = 0; f < NF; f++) {
		int n = 0;
		for (int i = 0; i < p->nres[t]; i++)
			if (p->res[t][i].valid)
				v[n++] = field(&p->res[t][i], f);
		s->valid = n;
		if (!n)
			continue;
		qsort(v, (size_t)n, sizeof *v, cmp_d);
		s->med[f] = v[(n - 1) / 2];
		s->min[f] = v[0];
		s->max[f] = v[n - 1];
	}
}

/* ---- the machine ---- */

static char m_cpu[128], m_kernel[160], m_fs[32], m_clock[32], m_commit[64],
	m_glog[64], m_date[32], m_stamp[32], m_load0[64], m_load1[64];
static long m_ncpu, m_mem_mb;

static void read_line(const char *cmd, char *out, size_t cap)
{
	FILE *f = popen(cmd, "r");
	out[0] = '\0';
	if (!f)
		return;
	if (fgets(out, (int)cap, f))
		out[strcspn(out, "\n")] = '\0';
	pclose(f);
}

static void machine(void)
{
	struct utsname u;
	struct statfs sf;
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(m_date, sizeof m_date, "%Y-%m-%d %H:%M:%S", &tm);
	strftime(m_stamp, sizeof m_stamp, "%Y%m%d-%H%M%S", &tm);
	read_line("sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1",
	          m_cpu, sizeof m_cpu);
	/* A VM's model name ("AMD EPYC") hides which CPU the host has, and
	 * one model name covers hosts whose figures differ: the family,
	 * model and clock tell them apart. */
	char id[64];
	read_line("awk -F': *' '/^cpu family/{f=$2} $1 ~ /^model[ \\t]*$/ && m==\"\"{m=$2}"
	          " /^cpu MHz/{h=$2} END{if(f!=\"\")printf \"family %s, model "
	          "%s, %.0f MHz\", f, m, h}' /proc/cpuinfo", id, sizeof id);
	size_t k = strlen(m_cpu);
	if (id[0])
		snprintf(m_cpu + k, sizeof m_cpu - k, " (%s)", id);
	m_ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	m_mem_mb = sysconf(_SC_PHYS_PAGES) / 1024 * sysconf(_SC_PAGESIZE) /
	           1024;
	if (uname(&u) == 0)
		snprintf(m_kernel, sizeof m_kernel, "%s %s", u.sysname,
		         u.release);
	snprintf(m_fs, sizeof m_fs, "?");
	if (statfs(O.work, &sf) == 0)
		snprintf(m_fs, sizeof m_fs, "%s",
		         sf.f_type == 0xEF53 ? "ext4"
		         : sf.f_type == 0x58465342 ? "xfs"
		         : sf.f_type == 0x9123683E ? "btrfs"
		         : sf.f_type == 0x01021994 ? "tmpfs"
		         : sf.f_type == 0x794c7630 ? "overlayfs" : "other");
	read_line("cat /sys/devices/system/clocksource/clocksource0/"
	          "current_clocksource 2>/dev/null", m_clock, sizeof m_clock);
	read_line("git rev-parse --short HEAD 2>/dev/null", m_commit,
	          sizeof m_commit);
	char dirty[16];
	read_line("git status --porcelain 2>/dev/null | wc -l", dirty,
	          sizeof dirty);
	if (m_commit[0] && atoi(dirty) > 0)
		strcat(m_commit, "+dirty");
	read_line("dpkg-query -W -f='${Version}' libgoogle-glog-dev "
	          "2>/dev/null", m_glog, sizeof m_glog);
	/* Other work on the machine is the first suspect for odd numbers. */
	read_line("cut -d' ' -f1-3 /proc/loadavg", m_load0, sizeof m_load0);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, double v)
{
	if (!isfinite(v))
		fputs("null", f);
	else if (v == floor(v) && fabs(v) < 1e15)
		fprintf(f, "%.0f", v);
	else
		fprintf(f, "%.3f", v);
}

static void json_machine(FILE *f)
{
	fprintf(f, "\"machine\":{\"cpu\":");
	json_str(f, m_cpu);
	fprintf(f, ",\"cpus\":%ld,\"mem_mb\":%ld,\"kernel\":", m_ncpu,
	        m_mem_mb);
	json_str(f, m_kernel);
	fprintf(f, ",\"fs\":");
	json_str(f, m_fs);
	fprintf(f, ",\"clocksource\":");
	json_str(f, m_clock);
	fprintf(f, ",\"compiler\":");
	json_str(f, "gcc " __VERSION__);
	fprintf(f, ",\"commit\":");
	json_str(f, m_commit);
	fprintf(f, ",\"versions\":{\"logengine\":\"%s\",\"spdlog\":\"%s\","
	        "\"glog\":", le_version(), bench_spdlog.version);
	json_str(f, m_glog[0] ? m_glog : bench_glog.version);
	char now[64];
	read_line("cut -d' ' -f1-3 /proc/loadavg", now, sizeof now);
	fprintf(f, "},\"loadavg_start\":\"%s\",\"loadavg_written\":\"%s\"},"
	        "\"date\":\"%s\",\"timer_ns\":%.1f,\"tsc_per_ns\":%.3f",
	        m_load0, now, m_date, timer_ns, tsc_per_ns);
}

static const char *sync_name(int d)
{
	return d == LE_SYNC_BATCH ? "batch"
	       : d == LE_SYNC_INTERVAL ? "interval" : "none";
}

static void json_run(FILE *f, const struct run_result *r)
{
	fprintf(f, "{\"valid\":%s", r->valid ? "true" : "false");
	for (int k = 0; k < NF; k++) {
		fprintf(f, ",\"%s\":", fname[k]);
		json_num(f, field(r, k));
	}
	fprintf(f, ",\"submitted\":%" PRIu64, r->submitted);
	if (!r->valid) {
		fprintf(f, ",\"why\":");
		json_str(f, r->why);
	}
	fputc('}', f);
}

static void json_stat(FILE *f, const char *name, const double *v)
{
	fprintf(f, ",\"%s\":{", name);
	for (int k = 0; k < NF; k++) {
		fprintf(f, "%s\"%s\":", k ? "," : "", fname[k]);
		json_num(f, v[k]);
	}
	fputc('}', f);
}

static void json_point(FILE *f, const struct point *p)
{
	const le_config *c = &p->cfg.le;
	fprintf(f, "{\"label\":");
	json_str(f, p->label);
	fprintf(f, ",\"untimed\":%s", p->cfg.untimed ? "true" : "false");
	fprintf(f, ",\"workload\":\"%s\",\"records\":%ld,\"payload\":%u,"
	        "\"threads\":%d,\"route_keys\":%d,\"logengine\":{\"shards\":%u,"
	        "\"fields\":%u,\"batch_size\":%u,\"queue_capacity\":%u,"
	        "\"queue_capacity_bytes\":%" PRIu64 ",\"max_pending_bytes\":%u,"
	        "\"flush_ms\":%u,\"durability\":\"%s\",\"checkpoint_ms\":%u,"
	        "\"direct_io\":%d,\"overflow\":\"%s\"},\"results\":[",
	        p->cfg.workload == BENCH_FORMATTED ? "formatted"
	        : p->cfg.workload == BENCH_DEFERRED ? "deferred"
	        : p->cfg.workload == BENCH_KV     ? "kv"
	                                          : "raw",
	        p->cfg.records, p->cfg.payload, p->cfg.threads,
	        p->cfg.route_keys, c->shards, c->fields, c->batch_size,
	        c->queue_capacity, c->queue_capacity_bytes,
	        c->max_pending_bytes, c->flush_ms, sync_name(c->durability),
	        c->checkpoint_ms, c->direct_io,
	        c->overflow == LE_OVERFLOW_DROP ? "drop" : "block");
	int first = 1;
	for (int t = 0; t < NCOMP; t++) {
		if (!(p->targets & (1u << t)))
			continue;
		struct summary s;
		summarize(p, t, &s);
		fprintf(f, "%s{\"target\":\"%s\",\"version\":\"%s\","
		        "\"valid\":%s,\"runs\":[", first ? "" : ",",
		        comps[t]->name, comps[t]->version,
		        s.valid == s.runs && s.runs ? "true" : "false");
		first = 0;
		for (int i = 0; i < p->nres[t]; i++) {
			if (i)
				fputc(',', f);
			json_run(f, &p->res[t][i]);
		}
		fputc(']', f);
		json_stat(f, "median", s.med);
		json_stat(f, "min", s.min);
		json_stat(f, "max", s.max);
		fputc('}', f);
	}
	fputs("]}", f);
}

static char outdir[1024];

static FILE *open_out(const char *name)
{
	char path[1200];
	snprintf(path, sizeof path, "%s/%s", outdir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		perror(path);
	return f;
}

int report_preset_json(const char *preset)
{
	char name[80];
	snprintf(name, sizeof name, "%s.json", preset);
	FILE *f = open_out(name);
	if (!f)
		return -1;
	fprintf(f, "{\"suite\":\"logengine-bench\",\"format\":1,"
	        "\"preset\":\"%s\",\"repeats\":%d,", preset, O.repeats);
	json_machine(f);
	fprintf(f, ",\"points\":[");
	int first = 1;
	for (size_t i = 0; i < npts; i++) {
		if (strcmp(pts[i].preset, preset))
			continue;
		if (!first)
			fputc(',', f);
		first = 0;
		json_point(f, &pts[i]);
	}
	fputs("]}\n", f);
	return fclose(f) == 0 ? 0 : -1;
}

/* ---- Markdown ---- */

const char *fmt_rate(double v, char *b, size_t n)
{
	if (v >= 1e6)
		snprintf(b, n, "%.2f M", v / 1e6);
	else if (v >= 1e3)
		snprintf(b, n, "%.0f k", v / 1e3);
	else
		snprintf(b, n, "%.0f", v);
	return b;
}

const char *fmt_dur(double ns, char *b, size_t n)
{
	if (isnan(ns))
		snprintf(b, n, "–"); /* not timed */
	else if (ns < 1e3)
		snprintf(b, n, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(b, n, "%.1f µs", ns / 1e3);
	else
		snprintf(b, n, "%.1f ms", ns / 1e6);
	return b;
}

static void md_machine(FILE *f)
{
	fprintf(f, "Machine: %s, %ld CPUs, %ld MiB RAM, %s, work dir on %s, "
	        "clocksource %s; gcc %s; logengine %s (commit %s), "
	        "spdlog %s, glog %s.\n\n", m_cpu, m_ncpu, m_mem_mb, m_kernel,
	        m_fs, m_clock, __VERSION__, le_version(),
	        m_commit[0] ? m_commit : "?", bench_spdlog.version,
	        m_glog[0] ? m_glog : bench_glog.version);
	fprintf(f, "Load average (1, 5, 15 min) at the start %s, at the end "
	        "%s: the machine's other work shares its two CPUs.\n\n",
	        m_load0, m_load1);
	fprintf(f, "Method: every run in a process of its own; the clock "
	        "stops when every record is in its file, and the files are "
	        "counted. %d repeats, interleaved; medians with (min–max). "
	        "Submit latency is per call and includes the timer (%.0f ns). "
	        "CPU = user+sys seconds of the whole process while timed.\n\n",
	        O.repeats, timer_ns);
}

static void md_header(FILE *f, int with_point)
{
	fprintf(f, "| %starget | msg/s | rel. | MB/s | submit p50 | p99 | "
	        "p99.9 | max | CPU s | peak RSS MB | dropped | file MB |\n",
	        with_point ? "point | " : "");
	fprintf(f, "|%s---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
	        with_point ? "---|" : "");
}

/* "median (min–max)" of figure k, as a rate or a duration. */
static void md_cell(FILE *f, const struct summary *s, int k, int is_rate)
{
	char a[32], b[32], c[32];
	const char *(*fmt)(double, char *, size_t) = is_rate ? fmt_rate
	                                                     : fmt_dur;

	if (isnan(s->med[k]))
		fputs(" – |", f);
	else
		fprintf(f, " %s (%s–%s) |", fmt(s->med[k], a, 32),
		        fmt(s->min[k], b, 32), fmt(s->max[k], c, 32));
}

static void md_row(FILE *f, const struct point *p, int t, int with_point,
                   double ref)
{
	struct summary s;
	char a[32], b[32];

	summarize(p, t, &s);
	if (with_point)
		fprintf(f, "| %s ", p->label);
	if (!s.valid) {
		fprintf(f, "| %s | INVALID: %s |||||||||||\n", comps[t]->name,
		        p->nres[t] ? p->res[t][0].why : "not run");
		return;
	}
	fprintf(f, "| %s%s |", comps[t]->name,
	        s.valid < s.runs ? " (some runs INVALID)" : "");
	md_cell(f, &s, F_MSGS, 1);
	if (ref > 0)
		fprintf(f, " %.2f |", s.med[F_MSGS] / ref);
	else
		fputs(" |", f);
	fprintf(f, " %.0f |", s.med[F_MBS]);
	md_cell(f, &s, F_P50, 0);
	fprintf(f, " %s |", fmt_dur(s.med[F_P99], a, 32));
	md_cell(f, &s, F_P999, 0);
	fprintf(f, " %s | %.2f | %.0f | %.0f | %.0f |\n",
	        fmt_dur(s.med[F_MAX], b, 32), s.med[F_CPU], s.med[F_RSS],
	        s.med[F_DROPPED], s.med[F_BYTES] / 1e6);
}

static const struct point *find_point(const char *preset)
{
	for (size_t i = 0; i < npts; i++)
		if (!strcmp(pts[i].preset, preset))
			return &pts[i];
	return NULL;
}

static double med(const struct point *p, int t, int f)
{
	struct summary s;
	if (!p || !(p->targets & (1u << t)))
		return NAN;
	summarize(p, t, &s);
	return s.valid ? s.med[f] : NAN;
}

/* The four judged targets, from the compare and formatted presets. */
/* The compare point with these flags, or NULL. */
static const struct point *find_compare(int untimed, int variant)
{
	for (size_t i = 0; i < npts; i++)
		if (!strcmp(pts[i].preset, "compare") &&
		    pts[i].cfg.untimed == untimed &&
		    pts[i].variant == variant)
			return &pts[i];
	return NULL;
}

/*
 * The repeats run interleaved (every competitor once, then again), so
 * repeat r of one point and repeat r of another ran minutes apart at
 * most, under the same load: a pair.  How many pairs meet "x >= k * y"
 * (ge) or "x < k * y" (!ge), of the pairs where both runs are valid; the
 * medians alone hide how often a target that sits in the machine's noise
 * is met.  Written as " (k of n paired repeats)", or nothing.
 */
static void paired(FILE *f, const struct point *px, int tx, int fx,
                   const struct point *py, int ty, int fy, double k, int ge)
{
	int n = 0, met = 0;

	if (!px || !py)
		return;
	for (int r = 0; r < px->nres[tx] && r < py->nres[ty]; r++) {
		const struct run_result *a = &px->res[tx][r], *b = &py->res[ty][r];
		if (!a->valid || !b->valid)
			continue;
		double x = field(a, fx), y = k * field(b, fy);
		n++;
		met += ge ? x >= y : x < y;
	}
	if (n > 1)
		fprintf(f, " (%d of %d paired repeats)", met, n);
}

/* The three judged targets of the compare preset, for logengine as
 * configured in variant v (spdlog and raw from the main points). */
static void judge(FILE *f, int v, const char *how)
{
	const struct point *c = find_compare(0, 0), *u = find_compare(1, 0),
	                   *lc = find_compare(0, v), *lu = find_compare(1, v);
	double le = med(lc, 0, F_MSGS), sp = med(c, 1, F_MSGS),
	       leu = med(lu, 0, F_MSGS), raw = med(u, 3, F_MSGS),
	       spu,
	       le999 = med(lc, 0, F_P999), sp50 = med(c, 1, F_P50);
	char a[32], b[32];

	if (!lc)
		return;
	if (isnan(raw) || isnan(leu)) { /* no untimed run: compare timed */
		leu = le;
		raw = med(c, 3, F_MSGS);
		lu = lc;
		u = c;
	}
	spu = u == c ? NAN : med(u, 1, F_MSGS); /* spdlog untimed, if run */
	/* Throughput untimed, where the run has spdlog untimed: the timer
	 * around each call would be most of what a le_write costs.  The
	 * ratio with every call timed follows, for comparison. */
	const struct point *tu = isnan(spu) ? lc : lu, *su = isnan(spu) ? c : u;
	double let = isnan(spu) ? le : leu, spt = isnan(spu) ? sp : spu;
	if (!isnan(let) && !isnan(spt)) {
		fprintf(f, "- logengine (%s) throughput at least 10x spdlog's%s: "
		        "%s vs %s msg/s = **%.1fx** — %s", how,
		        isnan(spu) ? "" : ", calls not timed",
		        fmt_rate(let, a, 32), fmt_rate(spt, b, 32), let / spt,
		        let >= 10 * spt ? "met" : "NOT met");
		paired(f, tu, 0, F_MSGS, su, 1, F_MSGS, 10, 1);
		if (!isnan(spu) && !isnan(le) && !isnan(sp))
			fprintf(f, "; with every call timed %s vs %s = %.1fx",
			        fmt_rate(le, a, 32), fmt_rate(sp, b, 32),
			        le / sp);
		fputc('\n', f);
	}
	if (!isnan(leu) && !isnan(raw)) {
		fprintf(f, "- logengine (%s) within 2x of the raw write() "
		        "baseline, calls not timed: %s vs %s msg/s = **%.2fx** "
		        "slower — %s", how, fmt_rate(leu, a, 32),
		        fmt_rate(raw, b, 32), raw / leu,
		        raw <= 2 * leu ? "met" : "NOT met");
		paired(f, lu, 0, F_MSGS, u, 3, F_MSGS, 0.5, 1);
		fputc('\n', f);
	}
	if (!isnan(le999) && !isnan(sp50)) {
		fprintf(f, "- logengine (%s) submit p99.9 below spdlog's p50: "
		        "%s vs %s — %s", how, fmt_dur(le999, a, 32),
		        fmt_dur(sp50, b, 32), le999 < sp50 ? "met" : "NOT met");
		paired(f, lc, 0, F_P999, c, 1, F_P50, 1, 0);
		fputc('\n', f);
	}
}

static void md_judged(FILE *f)
{
	const struct point *fm = find_point("formatted");
	double lef = med(fm, 0, F_MSGS), spf = med(fm, 1, F_MSGS);
	char a[32], b[32];

	if (!find_compare(0, 0) && !fm)
		return;
	fprintf(f, "### Targets (medians of this run)\n\n");
	judge(f, 0, "defaults");
	judge(f, 1, "queue sized like spdlog's");
	if (!isnan(lef) && !isnan(spf)) {
		fprintf(f, "- le_logf throughput at least 3x spdlog's "
		        "formatted: %s vs %s msg/s = **%.1fx** — %s",
		        fmt_rate(lef, a, 32), fmt_rate(spf, b, 32), lef / spf,
		        lef >= 3 * spf ? "met" : "NOT met");
		paired(f, fm, 0, F_MSGS, fm, 1, F_MSGS, 3, 1);
		fputc('\n', f);
	}
	fputc('\n', f);
}

/* rel. compares with logengine in the same point when a point has several
 * competitors, else with the preset's first point. */
static double rel_base(const struct point *p, const struct point *first,
                       int t)
{
	if (__builtin_popcount(p->targets) > 1)
		return med(p, 0, F_MSGS);
	return med(first, t, F_MSGS);
}

/* Under compare's table: which rows sync, and the burst's share kept. */
static void md_compare_notes(FILE *f)
{
	const struct point *d = find_compare(0, VARIANT_DEFAULTS),
	                   *n = find_compare(0, 0),
	                   *b = find_compare(0, VARIANT_BURST);
	double dm = med(d, 0, F_MSGS), nm = med(n, 0, F_MSGS);
	char a[32], c[32];

	fprintf(f, "spdlog and glog never call fsync: their rows compare with "
	        "logengine's durability-none rows. logengine's defaults sync "
	        "every second on a thread of their own");
	if (!isnan(dm) && !isnan(nm))
		fprintf(f, ": %s msg/s against %s with durability none "
		        "(**%.0f%%**)", fmt_rate(dm, a, 32), fmt_rate(nm, c, 32),
		        100 * dm / nm);
	fputs(".\n", f);
	if (b && !isnan(med(b, 0, F_DROPPED)))
		fprintf(f, "Burst of %ld records with the default overflow "
		        "policy (drop) and durability: **%.1f%%** kept "
		        "(median).\n", b->cfg.records,
		        100.0 * (1.0 - med(b, 0, F_DROPPED) /
		                           (double)b->cfg.records));
	fputc('\n', f);
}

/* The producers point with this many threads and shards, timed or not. */
static const struct point *find_producers(int threads, unsigned shards,
                                          int untimed)
{
	for (size_t i = 0; i < npts; i++)
		if (!strcmp(pts[i].preset, "producers") &&
		    pts[i].cfg.threads == threads &&
		    pts[i].cfg.le.shards == shards &&
		    pts[i].cfg.untimed == untimed)
			return &pts[i];
	return NULL;
}

/* CPU seconds of the whole process (producers, writer) per record of
 * point p, in ns: contention (a line passed between cores, a CAS tried
 * again) costs CPU where other load on the machine mostly costs time. */
static double cpu_ns_per_record(const struct point *p)
{
	return med(p, 0, F_CPU) * 1e9 / (double)p->cfg.records;
}

/* Under producers' table: the lowest untimed point against the single
 * producer on one shard (the goal: none below it), paired repeat by
 * repeat; CPU per record, the highest against the single producer's;
 * the highest p99.9 of the timed points. */
static void md_producers_notes(FILE *f)
{
	const struct point *one = find_producers(1, 1, 1), *lo = NULL,
	                   *hi = NULL, *dear = NULL;
	double base = med(one, 0, F_MSGS), low = INFINITY, tail = 0, cpu = 0;
	char a[32], b[32];

	for (size_t i = 0; i < npts; i++) {
		const struct point *p = &pts[i];
		double m = med(p, 0, F_MSGS), t = med(p, 0, F_P999);
		if (strcmp(p->preset, "producers"))
			continue;
		if (p->cfg.untimed && !isnan(m) && m < low)
			low = m, lo = p;
		if (p->cfg.untimed && cpu_ns_per_record(p) > cpu)
			cpu = cpu_ns_per_record(p), dear = p;
		if (!p->cfg.untimed && !isnan(t) && t > tail)
			tail = t, hi = p;
	}
	if (lo && !isnan(base)) {
		fprintf(f, "- no configuration below the single producer's "
		        "rate, calls not timed: lowest %s (%s msg/s) = "
		        "**%.2fx** of producers=1 shards=1 (%s) — %s", lo->label,
		        fmt_rate(low, a, 32), low / base, fmt_rate(base, b, 32),
		        low >= base ? "met" : "NOT met");
		paired(f, lo, 0, F_MSGS, one, 0, F_MSGS, 1, 1);
		fputc('\n', f);
	}
	if (dear && one)
		fprintf(f, "- CPU per record (all threads), calls not timed: "
		        "%.0f ns with producers=1 shards=1, highest %.0f ns "
		        "(%s) = %.2fx\n", cpu_ns_per_record(one), cpu,
		        dear->label, cpu / cpu_ns_per_record(one));
	if (hi)
		fprintf(f, "- highest p99.9 of the timed points: %s (%s)\n",
		        fmt_dur(tail, a, 32), hi->label);
	fputc('\n', f);
}

static void md_preset(FILE *f, const struct preset *pr)
{
	int with_point = 0, n = 0, multi = 0;
	for (size_t i = 0; i < npts; i++)
		if (!strcmp(pts[i].preset, pr->name)) {
			n++;
			multi |= __builtin_popcount(pts[i].targets) > 1;
		}
	with_point = n > 1;
	fprintf(f, "## %s — %s\n\n", pr->name, pr->what);
	const struct point *first = find_point(pr->name);
	if (first)
		fprintf(f, "%ld records%s, %d producer%s; logengine: %u "
		        "shard%s, fields 0x%02x, batch %u, queue %u records / "
		        "%" PRIu64 " MiB, durability %s, checkpoint %u ms, "
		        "overflow %s (unless the point says otherwise).%s\n\n",
		        first->cfg.records,
		        first->cfg.workload == BENCH_FORMATTED ? " (formatted)"
		        : first->cfg.workload == BENCH_DEFERRED ? " (deferred)"
		        : first->cfg.workload == BENCH_KV     ? " (three fields)"
		                                              : "",
		        first->cfg.threads, first->cfg.threads > 1 ? "s" : "",
		        first->cfg.le.shards,
		        first->cfg.le.shards > 1 ? "s" : "",
		        first->cfg.le.fields, first->cfg.le.batch_size,
		        first->cfg.le.queue_capacity,
		        first->cfg.le.queue_capacity_bytes >> 20,
		        sync_name(first->cfg.le.durability),
		        first->cfg.le.checkpoint_ms,
		        first->cfg.le.overflow ? "block" : "drop",
		        multi ? " rel. = msg/s against logengine's in the "
		                "same row group." :
		                " rel. = msg/s against the first point.");
	md_header(f, with_point);
	for (size_t i = 0; i < npts; i++) {
		const struct point *p = &pts[i];
		if (strcmp(p->preset, pr->name))
			continue;
		for (int t = 0; t < NCOMP; t++)
			if (p->targets & (1u << t))
				md_row(f, p, t, with_point,
				       rel_base(p, first, t));
	}
	fputc('\n', f);
	if (!strcmp(pr->name, "compare"))
		md_compare_notes(f);
	if (!strcmp(pr->name, "producers"))
		md_producers_notes(f);
}

/* ---- soak ---- */

void report_soak_json(const struct soak_run *sr)
{
	char name[80];
	snprintf(name, sizeof name, "soak-%s.json", sr->c->name);
	FILE *f = open_out(name);
	if (!f)
		return;
	fprintf(f, "{\"suite\":\"logengine-bench\",\"format\":1,"
	        "\"preset\":\"soak\",\"target\":\"%s\",\"seconds\":%.0f,"
	        "\"rate\":%.0f,\"interval_s\":%.3f,\"payload\":%u,"
	        "\"threads\":%d,", sr->c->name, O.soak, O.soak_rate, O.soak_iv,
	        O.payload, O.threads);
	json_machine(f);
	fprintf(f, ",\"valid\":%s,\"total\":{\"secs\":%.3f,\"records\":%"
	        PRIu64 ",\"msgs_per_s\":%.0f,\"cpu_s\":%.3f,\"rss_mb\":%.1f,"
	        "\"written\":%" PRIu64 ",\"dropped\":%" PRIu64 "}",
	        sr->total.valid ? "true" : "false", sr->total.t,
	        sr->total.records, sr->total.msgs, sr->total.cpu,
	        sr->total.rss_mb, sr->total.written, sr->total.dropped);
	if (!sr->total.valid) {
		fprintf(f, ",\"why\":");
		json_str(f, sr->total.why);
	}
	fprintf(f, ",\"intervals\":[");
	for (int i = 0; i < sr->n; i++) {
		const struct soak_iv *v = &sr->iv[i];
		fprintf(f, "%s{\"t\":%.1f,\"records\":%" PRIu64
		        ",\"msgs_per_s\":%.0f,\"p50_ns\":%.0f,\"p99_ns\":%.0f,"
		        "\"p999_ns\":%.0f,"
		        "\"max_ns\":%.0f,\"cpu_s\":%.3f,\"rss_mb\":%.2f,"
		        "\"written\":%" PRIu64 ",\"dropped\":%" PRIu64
		        ",\"queued\":%" PRIu64 ",\"page_faults\":%" PRIu64 "}",
		        i ? "," : "", v->t, v->records, v->msgs, v->p50, v->p99,
		        v->p999, v->max, v->cpu, v->rss_mb, v->written,
		        v->dropped, v->queued, v->minflt);
	}
	fputs("]}\n", f);
	fclose(f);
}

/* Median of one figure over intervals [a, b). */
static double iv_median(const struct soak_iv *iv, int a, int b, int which)
{
	double v[4096];
	int n = 0;
	for (int i = a; i < b && n < 4096; i++)
		v[n++] = which == 0 ? iv[i].msgs : which == 1 ? iv[i].p99
		                                             : iv[i].p999;
	if (!n)
		return NAN;
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return v[(n - 1) / 2];
}

static void md_soak(FILE *f, const struct soak_run *sr)
{
	char a[32], b[32], c[32], d[32];
	int n = sr->n;

	fprintf(f, "## soak — %s, %.0f s, %s, intervals of %.0f s\n\n",
	        sr->c->name, O.soak,
	        O.soak_rate > 0 ? fmt_rate(O.soak_rate, a, 32)
	                        : "as fast as it goes", O.soak_iv);
	if (O.soak_rate > 0)
		fprintf(f, "Offered load %s msg/s, %u-byte payloads, %d "
		        "producer(s).  ", a, O.payload, O.threads);
	else
		fprintf(f, "Producers log as fast as the logger takes records, "
		        "%u-byte payloads, %d producer(s).  ", O.payload,
		        O.threads);
	fprintf(f, "Files bounded (logengine: retention 1 GiB; spdlog: "
	        "4 rotating files of 256 MiB).\n\n");
	if (!sr->total.valid)
		fprintf(f, "**INVALID**: %s\n\n", sr->total.why);
	if (n >= 3) {
		int tenth = n / 10 ? n / 10 : 1;
		double t0 = iv_median(sr->iv, 0, tenth, 0),
		       t1 = iv_median(sr->iv, n - tenth, n, 0);
		double worst = 0;
		for (int i = 0; i < n; i++)
			if (sr->iv[i].p999 > worst)
				worst = sr->iv[i].p999;
		fprintf(f, "- throughput, median of the first and last tenth: "
		        "%s → %s msg/s (%+.1f%%)\n", fmt_rate(t0, a, 32),
		        fmt_rate(t1, b, 32), 100.0 * (t1 - t0) / t0);
		fprintf(f, "- p99 median over intervals %s; p99.9 median %s, "
		        "worst interval %s\n",
		        fmt_dur(iv_median(sr->iv, 0, n, 1), c, 32),
		        fmt_dur(iv_median(sr->iv, 0, n, 2), d, 32),
		        fmt_dur(worst, a, 32));
		fprintf(f, "- RSS after the first interval %.1f MB, at the end "
		        "%.1f MB; peak %.1f MB\n", sr->iv[0].rss_mb,
		        sr->iv[n - 1].rss_mb, sr->total.rss_mb);
		fprintf(f, "- %" PRIu64 " records in %.0f s, %.1f CPU s; "
		        "written %" PRIu64 ", dropped %" PRIu64 "\n\n",
		        sr->total.records, sr->total.t, sr->total.cpu,
		        sr->total.written, sr->total.dropped);
	}
	fprintf(f, "| t (s) | msg/s | p50 | p99 | p99.9 | max | CPU (%% of "
	        "a core) | RSS MB | page faults |\n"
	        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
	int step = n > 15 ? (n + 11) / 12 : 1;
	for (int i = 0; i < n; i++) {
		if (i % step && i != n - 1)
			continue;
		const struct soak_iv *v = &sr->iv[i];
		char e[32];
		fprintf(f, "| %g | %s | %s | %s | %s | %s | %.0f | %.1f | "
		        "%" PRIu64 " |\n", v->t, fmt_rate(v->msgs, a, 32),
		        fmt_dur(v->p50, b, 32), fmt_dur(v->p99, c, 32),
		        fmt_dur(v->p999, d, 32), fmt_dur(v->max, e, 32),
		        100.0 * v->cpu / O.soak_iv, v->rss_mb, v->minflt);
	}
	fputc('\n', f);
}


/* ---- the whole report ---- */

void report_init(void)
{
	char cmd[1200];

	machine();
	snprintf(outdir, sizeof outdir, "%s/%s", O.out, m_stamp);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", outdir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench: cannot make %s\n", outdir);
}

const char *report_dir(void)
{
	return outdir;
}

/* BENCH.md: the machine and method, the targets, a table per preset, a
 * section per soak; "latest" points at this run's directory. */
void report_md(FILE *out)
{
	char path[1200];
	FILE *f = open_out("BENCH.md");

	read_line("cut -d' ' -f1-3 /proc/loadavg", m_load1, sizeof m_load1);
	for (int pass = 0; pass < 2; pass++) {
		FILE *to = pass ? out : f;
		if (!to)
			continue;
		fprintf(to, "# logengine benchmark, %s\n\n", m_date);
		md_machine(to);
		md_judged(to);
		for (size_t i = 0; i < npresets; i++)
			if (find_point(presets[i].name))
				md_preset(to, &presets[i]);
		for (int i = 0; i < nsoaks; i++)
			md_soak(to, &soaks[i]);
	}
	if (f)
		fclose(f);
	snprintf(path, sizeof path, "%s/latest", O.out);
	unlink(path);
	if (symlink(m_stamp, path) < 0)
		perror(path);
}
