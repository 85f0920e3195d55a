/*
 * many-hosts.c -- many forwarders into one cluster and one collector,
 * timed and checked record for record (make bench-hosts;
 * docs/BENCHMARKS.md, "Many hosts").
 *
 * Before any clock starts, --hosts log directories (host-00, host-01,
 * ...; --shards shards each, 2 by default; --records records of 128
 * bytes each, record i on route key i) are written with the engine.
 * Then, in each of --runs rounds, on a fresh 3-node cluster on
 * 127.0.0.1 (ports picked free, JetStream with file storage) and its
 * stream LOGS (subjects logs.>, 3 replicas, made here so that no
 * forwarders race to make it):
 *
 *   ship     every `logengine forward --once --host host-NN DIR` started
 *            at once (each publishing on logs.host-NN.SHARD); the clock
 *            stops when the last one exits: the aggregate rate is all
 *            records over that time
 *   collect  `logengine collect --once DST` of the whole stream
 *            (--hosts x --shards origins) into a fresh store, once
 *            shipping is over, so that its rate is its own
 *   --live   instead: the collector (without --once) runs from before
 *            the first forwarder starts (once its durable exists); the
 *            clock stops when its consumer has nothing pending or
 *            awaiting its ack, then it is stopped with SIGTERM: the
 *            end-to-end rate, while the forwarders and the collector
 *            share the CPUs
 *   verify   each origin (host, shard) of the store against its source,
 *            record for record: sequence 1..N, each once, timestamp,
 *            level, flags and bytes equal, and no origin but these
 *
 * Each process's wall time, CPU (user + system) and peak RSS come from
 * wait4; the servers' CPU over each phase from /proc.  Output:
 * OUT/hosts.md and OUT/hosts.json (OUT: $OUT, else perf/results/hosts),
 * the table also on stdout: medians with min-max over the rounds, and
 * over every forwarder of every round; a line "exactly once: PASS" or
 * "FAIL" (exit 1 on FAIL, 2 when the run could not be made).
 *
 *   build/many-hosts [--hosts N] [--shards N] [--records N] [--runs N]
 *                    [--live]
 *
 * Each forwarder takes an inotify instance: more of them at once than
 * fs.inotify.max_user_instances (often 128) fail with "Too many open
 * files" (said before the start).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <inttypes.h>
#include <sys/utsname.h>

#include "logengine.h"
#include "natsrv.h"
#include "ship_bench.h"

#define PAYLOAD 128
#define MAXHOSTS 1000
#define MAXROUNDS 15
#define STREAM "LOGS"
#define DURABLE "logengine-collect" /* collect's default */
#define PROC_TIMEOUT_S 1200

/* Shards of each host's log (--shards). */
static int nshards = 2;

static char base[256];
static const char *tool = "build/logengine";

/* One child: a forwarder or the collector. */
struct proc {
	pid_t pid;     /* 0 once reaped */
	double t0;     /* started (t_now) */
	double secs;   /* wall time to its exit */
	double cpu;    /* user + system, from wait4 */
	long rss_kib;  /* peak */
	int status;    /* exit status, 128 + signal, -1 killed at the deadline */
};

/* One round's figures. */
struct round {
	double ship_secs, ship_cpu, ship_srv; /* last forwarder out; all
	                                         forwarders' CPU; servers' */
	double col_secs, col_srv;             /* collector (--live: start to
	                                         caught up) and servers' CPU */
	struct proc col;
	int fwd_failed;                       /* forwarders not exiting 0 */
	long verified;                        /* records found once; -1 bad */
};

/* ---- the servers ---- */

static t_nats three[3];
static int nsrv;

static double srv_cpu(void)
{
	double c = 0;
	for (int i = 0; i < nsrv; i++)
		c += t_proc_cpu(three[i].pid);
	return c;
}

static void cluster_stop(void)
{
	for (int k = 0; k < nsrv; k++) {
		t_nats_stop(&three[k]);
		sb_sh("rm -rf '%s'%s", three[k].dir, "");
	}
	nsrv = 0;
}

/* 1 when the stream has a leader and both other replicas are current. */
static int stream_whole(jsCtx *js)
{
	jsStreamInfo *si = NULL;
	int ok = 0;

	if (js_GetStreamInfo(&si, js, STREAM, NULL, NULL) == NATS_OK &&
	    si->Cluster && si->Cluster->Leader && *si->Cluster->Leader &&
	    si->Cluster->ReplicasLen == 2)
		ok = si->Cluster->Replicas[0]->Current &&
		     si->Cluster->Replicas[1]->Current;
	jsStreamInfo_Destroy(si);
	return ok;
}

/* Wait (up to 30 s) until the new stream is whole: a consumer made on a
 * stream whose group is still forming can be refused, and what is timed
 * here is shipping, not the cluster's start.  @return 0, -1. */
static int stream_ready(const char *urls)
{
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	double end = t_now() + 30;
	int ok = 0;

	if (natsConnection_ConnectTo(&nc, urls) == NATS_OK &&
	    natsConnection_JetStream(&js, nc, NULL) == NATS_OK)
		while (!(ok = stream_whole(js)) && t_now() < end)
			t_sleep_ms(50);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return ok ? 0 : -1;
}

/* A fresh cluster and its stream LOGS, whole.  @return 0, -1. */
static int cluster_start(char *urls)
{
	const char *subj[1] = {"logs.>"};

	nsrv = 3;
	if (t_nats_cluster(three, base) < 0 ||
	    sb_make_stream(t_nats_urls(three, urls), STREAM, subj, 1, 3) < 0 ||
	    stream_ready(urls) < 0) {
		fprintf(stderr, "many-hosts: the cluster did not start (%s, %s, "
		        "%s)\n", three[0].dir, three[1].dir, three[2].dir);
		cluster_stop();
		return -1;
	}
	return 0;
}

/* ---- the source logs ---- */

/* Host h's name, "host-NN" (also its subject token: no dot). */
static void host_name(char *buf, size_t cap, int h)
{
	snprintf(buf, cap, "host-%02d", h);
}

/* Host h's log directory, BASE/src/host-NN. */
static void src_dir(char *buf, size_t cap, int h)
{
	char name[32];
	host_name(name, sizeof name, h);
	snprintf(buf, cap, "%s/src/%s", base, name);
}

/* n records of PAYLOAD bytes into host h's log, record i on route key i.
 * @return 0, -1. */
static int write_host(int h, long n)
{
	le_config c;
	le_engine *e;
	char dir[400], p[PAYLOAD];
	int bad = 0;

	src_dir(dir, sizeof dir, h);
	le_config_init(&c);
	c.dir = dir;
	c.create_dir = 1;
	c.shards = nshards;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.queue_capacity_bytes = 8u << 20;
	c.durability = LE_SYNC_NONE;
	if (le_open(&e, &c) < 0)
		return -1;
	for (long i = 0; i < n; i++) {
		int k = snprintf(p, sizeof p, "host-%02d request %ld served in "
		                 "%ld us ", h, i, i % 977);
		memset(p + k, 'x', sizeof p - (size_t)k);
		bad |= le_write(e, (uint64_t)i, LE_INFO, p, sizeof p) < 0;
	}
	return le_close(e) < 0 || bad ? -1 : 0;
}

/* ---- children ---- */

/* The tool with argv[1..] = args (NULL-terminated), stderr to
 * BASE/log/NAME.err. */
static void spawn(struct proc *p, const char *name, const char **args)
{
	const char *argv[32];
	char err[400];
	int n = 0;

	argv[n++] = tool;
	for (; n < 31 && args[n - 1]; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	snprintf(err, sizeof err, "%s/log/%s.err", base, name);
	memset(p, 0, sizeof *p);
	p->t0 = t_now();
	p->pid = t_spawn(err, (char *const *)argv);
}

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

/* Record child pid's end in whichever of p[0..n) it is; a server that
 * ends is said (its pid forgotten, so that stopping it does not wait).
 * @return 1 when it was one of p, else 0. */
static int record_exit(struct proc *p, int n, pid_t pid, int st,
                       const struct rusage *ru)
{
	for (int i = 0; i < n; i++)
		if (p[i].pid == pid) {
			p[i].pid = 0;
			p[i].secs = t_now() - p[i].t0;
			p[i].cpu = sb_tv(ru->ru_utime) + sb_tv(ru->ru_stime);
			p[i].rss_kib = ru->ru_maxrss;
			p[i].status = WIFEXITED(st) ? WEXITSTATUS(st)
			                            : 128 + WTERMSIG(st);
			return 1;
		}
	for (int k = 0; k < nsrv; k++)
		if (three[k].pid == pid) {
			fprintf(stderr, "many-hosts: server %s ended\n",
			        three[k].url);
			three[k].pid = 0;
		}
	return 0;
}

/* Reap children until every one of p[0..n) has exited, blocked in wait4
 * meanwhile (no polling: 64 processes share the CPUs with us).  Those
 * still running after timeout_s are killed and get status -1.  A child
 * outside p (the live collector, a server) is recorded in other[0..no)
 * or said.  @return the t_now() of the last exit. */
static double reap(struct proc *p, int n, struct proc *other, int no,
                   int timeout_s)
{
	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
	double last = t_now();
	int left = 0;

	for (int i = 0; i < n; i++)
		left += p[i].pid > 0;
	alarmed = 0;
	sigaction(SIGALRM, &sa, NULL);
	alarm((unsigned)timeout_s);
	while (left > 0) {
		struct rusage ru;
		int st;
		pid_t r = wait4(-1, &st, 0, &ru);
		if (r > 0 && record_exit(p, n, r, st, &ru)) {
			left--;
			last = t_now();
		} else if (r > 0) {
			record_exit(other, no, r, st, &ru);
		} else if (errno == ECHILD) {
			break; /* not ours to wait for: cannot happen */
		} else if (alarmed) {
			for (int i = 0; i < n; i++)
				if (p[i].pid > 0)
					kill(p[i].pid, SIGKILL);
			alarmed = 0;
		}
	}
	alarm(0);
	for (int i = 0; i < n; i++)
		if (p[i].status == 128 + SIGKILL && p[i].secs >= timeout_s)
			p[i].status = -1;
	return last;
}

/* ---- live: when the collector is ready, and has caught up ---- */

/* 1 when the durable has every message of the stream delivered and
 * acknowledged (the collector acknowledges a message once its records
 * are stored), 0 not yet or not known. */
static int caught_up(jsCtx *js)
{
	jsConsumerInfo *ci = NULL;
	jsStreamInfo *si = NULL;
	int ok = 0;

	if (js_GetStreamInfo(&si, js, STREAM, NULL, NULL) == NATS_OK &&
	    js_GetConsumerInfo(&ci, js, STREAM, DURABLE, NULL, NULL) ==
	            NATS_OK)
		ok = ci->NumPending == 0 && ci->NumAckPending == 0 &&
		     ci->Delivered.Stream >= si->State.LastSeq;
	jsConsumerInfo_Destroy(ci);
	jsStreamInfo_Destroy(si);
	return ok;
}

/* 1 when the collector's durable exists: it is ready to fetch. */
static int consumer_made(jsCtx *js)
{
	jsConsumerInfo *ci = NULL;
	int ok = js_GetConsumerInfo(&ci, js, STREAM, DURABLE, NULL, NULL) ==
	         NATS_OK;
	jsConsumerInfo_Destroy(ci);
	return ok;
}

/* 1 while p runs (an ended child is left unreaped, for reap's wait4). */
static int alive(const struct proc *p)
{
	siginfo_t si;

	memset(&si, 0, sizeof si);
	return p->pid > 0 &&
	       waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT)
	               == 0 && si.si_pid == 0;
}

/* Wait (polling every 20 ms, up to timeout_s) until done(js) or the
 * collector has ended.  @return t_now() when done, or -1. */
static double wait_for(const char *urls, const struct proc *col,
                       int timeout_s, int (*done)(jsCtx *))
{
	natsConnection *nc = NULL;
	jsCtx *js = NULL;
	double end = t_now() + timeout_s, at = -1;

	if (natsConnection_ConnectTo(&nc, urls) == NATS_OK &&
	    natsConnection_JetStream(&js, nc, NULL) == NATS_OK)
		while (t_now() < end && alive(col)) {
			if (done(js)) {
				at = t_now();
				break;
			}
			t_sleep_ms(20);
		}
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return at;
}

/* ---- verify ---- */

static le_reader *reader(const char *dir, int shard)
{
	le_reader_opts o;
	le_reader *r = NULL;

	le_reader_opts_init(&o);
	o.mode = LE_RECOVER_TOLERATE_TAIL;
	o.shard = shard;
	if (le_reader_open(&r, dir, &o) < 0)
		return NULL;
	return r;
}

/* Which store shard directory holds each origin: dirs[h * nshards + s]
 * (-1: none), found from the first record of each (through the public
 * reader: what it reports is what a user would read).  @return 0, or -1
 * when a directory holds an origin that is not ours, one already seen,
 * or cannot be read. */
static int map_origins(const char *dst, int hosts, int *dirs)
{
	DIR *d = opendir(dst);
	struct dirent *de;
	int rc = 0;

	for (int i = 0; i < hosts * nshards; i++)
		dirs[i] = -1;
	while (d && (de = readdir(d)) != NULL) {
		int n, h;
		char tail;
		le_record rec;
		if (sscanf(de->d_name, "shard-%d%c", &n, &tail) != 1)
			continue;
		le_reader *r = reader(dst, n);
		if (!r || le_reader_next(r, &rec) != 1 || !rec.host ||
		    sscanf(rec.host, "host-%d%c", &h, &tail) != 1 || h < 0 ||
		    h >= hosts || rec.origin_shard >= (uint32_t)nshards ||
		    dirs[h * nshards + rec.origin_shard] >= 0) {
			fprintf(stderr, "many-hosts: %s/%s: no record, a foreign "
			        "origin, or one already met (%s)\n", dst,
			        de->d_name, r ? "read" : le_errmsg());
			rc = -1;
		} else {
			dirs[h * nshards + rec.origin_shard] = n;
		}
		le_reader_close(r);
	}
	if (d)
		closedir(d);
	return d ? rc : -1;
}

/* Host h's shard s in the source against store shard directory d: the
 * same records, one for one, and nothing after.  @return how many, or
 * -1 (said on stderr). */
static long compare_origin(const char *dst, int h, int s, int d)
{
	char src[400], name[32];
	le_record a, b;
	long n = 0;
	int ra = -1, rb = -1;

	src_dir(src, sizeof src, h);
	host_name(name, sizeof name, h);
	le_reader *x = reader(src, s), *y = d >= 0 ? reader(dst, d) : NULL;
	while (x && y && (ra = le_reader_next(x, &a)) == 1 &&
	       (rb = le_reader_next(y, &b)) == 1) {
		if (a.seq != b.origin_seq || a.ts_ns != b.ts_ns ||
		    a.level != b.level || a.flags != b.flags || a.len != b.len ||
		    memcmp(a.payload, b.payload, a.len) != 0 ||
		    strcmp(b.host, name) != 0 || b.origin_shard != (uint32_t)s)
			break;
		n++;
	}
	if (ra == 0)
		rb = le_reader_next(y, &b);
	if (d < 0) {
		fprintf(stderr, "many-hosts: %s/%d: not in the store\n", name, s);
		n = -1;
	} else if (ra != 0 || rb != 0) {
		fprintf(stderr, "many-hosts: %s/%d: after %ld records equal, "
		        "source %s, store %s\n", name, s, n,
		        ra == 1 ? "has more or differs" : ra ? "unreadable"
		        : "ended", rb == 1 ? "has more or differs" : rb
		        ? "unreadable" : "ended");
		n = -1;
	}
	le_reader_close(x);
	le_reader_close(y);
	return n;
}

/* Every origin of every host in the store dst, exactly once.  @return
 * the records found, or -1 on any mismatch. */
static long verify(const char *dst, int hosts, long want)
{
	int *dirs = malloc((size_t)hosts * nshards * sizeof *dirs);
	long total = 0;
	int bad = !dirs || map_origins(dst, hosts, dirs) < 0;

	for (int i = 0; dirs && i < hosts * nshards; i++) {
		long n = compare_origin(dst, i / nshards, i % nshards, dirs[i]);
		bad |= n < 0;
		total += n > 0 ? n : 0;
	}
	free(dirs);
	if (total != want && !bad)
		fprintf(stderr, "many-hosts: %ld records in the store, %ld "
		        "written\n", total, want);
	return bad || total != want ? -1 : total;
}

/* ---- one round ---- */

/* Start every forwarder, reap them (and the live collector, should it
 * end).  Fills x's ship figures. */
static void ship(struct round *x, struct proc *fwd, int hosts, int rno,
                 const char *urls)
{
	char dir[400], host[32], name[48];
	double t0 = t_now(), s0 = srv_cpu();

	for (int h = 0; h < hosts; h++) {
		src_dir(dir, sizeof dir, h);
		host_name(host, sizeof host, h);
		snprintf(name, sizeof name, "fwd-%s-%d", host, rno);
		const char *args[] = {"forward", "--once", "--nats", urls,
		                      "--host", host, "--replicas", "3", dir,
		                      NULL};
		spawn(&fwd[h], name, args);
	}
	double last = reap(fwd, hosts, &x->col, 1, PROC_TIMEOUT_S);
	x->ship_secs = last - t0;
	x->ship_srv = srv_cpu() - s0;
	for (int h = 0; h < hosts; h++) {
		x->ship_cpu += fwd[h].cpu;
		x->fwd_failed += fwd[h].status != 0;
		if (fwd[h].status)
			fprintf(stderr, "many-hosts: round %d: host-%02d: exit %d "
			        "(see its .err)\n", rno, h, fwd[h].status);
	}
}

/* Start the collector into dst: `--once` after shipping, or following
 * the stream (live) until stopped. */
static void collect_start(struct round *x, const char *urls,
                          const char *dst, int rno, int live)
{
	char name[32];
	const char *once[] = {"collect", "--once", "--verbose", "--nats", urls,
	                      dst, NULL};
	const char *follow[] = {"collect", "--verbose", "--nats", urls, dst,
	                        NULL};

	snprintf(name, sizeof name, "collect-%d", rno);
	spawn(&x->col, name, live ? follow : once);
}

/* One round: cluster, ship, collect, verify.  @return 0, -1 when the
 * cluster did not start. */
static int round_run(struct round *x, struct proc *fwd, int hosts,
                     long want, int rno, int live)
{
	char urls[256], dst[300];

	memset(x, 0, sizeof *x);
	if (cluster_start(urls) < 0)
		return -1;
	snprintf(dst, sizeof dst, "%s/dst", base);
	sb_sh("rm -rf '%s' '%s'/src/host-*/shard-*/FORWARD", dst, base);
	double s0 = srv_cpu();
	if (live) {
		/* The clock starts once the collector can fetch: its own
		 * start is not shipping. */
		collect_start(x, urls, dst, rno, 1);
		wait_for(urls, &x->col, 60, consumer_made);
	}
	double t0 = t_now();
	ship(x, fwd, hosts, rno, urls);
	if (live) {
		double at = wait_for(urls, &x->col, PROC_TIMEOUT_S, caught_up);
		x->col_secs = at > 0 ? at - t0 : -1;
		if (x->col.pid > 0)
			kill(x->col.pid, SIGTERM);
	} else {
		s0 = srv_cpu();
		collect_start(x, urls, dst, rno, 0);
	}
	reap(&x->col, 1, NULL, 0, PROC_TIMEOUT_S);
	if (!live)
		x->col_secs = x->col.secs;
	x->col_srv = srv_cpu() - s0;
	if (x->col.status)
		fprintf(stderr, "many-hosts: round %d: collect: exit %d (see "
		        "collect-%d.err)\n", rno, x->col.status, rno);
	cluster_stop();
	x->verified = verify(dst, hosts, want);
	fprintf(stderr, "many-hosts: round %d: exactly once: %s\n", rno,
	        x->verified == want ? "PASS" : "FAIL");
	return 0;
}

/* ---- report ---- */

struct setup {
	int hosts, rounds, live;
	long per_host, want;    /* records per host, in all */
	double load0;           /* load average before the run */
};

/* f over the rounds. */
static struct m3 over_rounds(const struct round *r, int n,
                             double (*f)(const struct round *, long),
                             long want)
{
	double v[MAXROUNDS];
	for (int i = 0; i < n; i++)
		v[i] = f(&r[i], want);
	return m3_of(v, n);
}

static double ship_rps(const struct round *x, long w)
{
	return x->ship_secs > 0 ? (double)w / x->ship_secs : 0;
}
static double ship_secs(const struct round *x, long w)
{
	(void)w;
	return x->ship_secs;
}
static double ship_cpu_m(const struct round *x, long w)
{
	return x->ship_cpu * 1e6 / (double)w;
}
static double ship_srv_m(const struct round *x, long w)
{
	return x->ship_srv * 1e6 / (double)w;
}
static double col_rps(const struct round *x, long w)
{
	return x->col_secs > 0 ? (double)w / x->col_secs : 0;
}
static double col_secs(const struct round *x, long w)
{
	(void)w;
	return x->col_secs;
}
static double col_cpu_m(const struct round *x, long w)
{
	return x->col.cpu * 1e6 / (double)w;
}
static double col_srv_m(const struct round *x, long w)
{
	return x->col_srv * 1e6 / (double)w;
}
static double col_rss(const struct round *x, long w)
{
	(void)w;
	return x->col.rss_kib / 1024.0;
}

/* Wall s (0), records/s (1), CPU s (2) or peak RSS MiB (3) of every
 * forwarder of every round. */
static struct m3 over_fwd(const struct proc *f, int n, int what, long each)
{
	double *v = malloc((size_t)n * sizeof *v);
	struct m3 m = {0, 0, 0};

	if (!v)
		return m;
	for (int i = 0; i < n; i++)
		v[i] = what == 0 ? f[i].secs
		     : what == 1 ? (f[i].secs > 0 ? (double)each / f[i].secs : 0)
		     : what == 2 ? f[i].cpu : f[i].rss_kib / 1024.0;
	m = m3_of(v, n);
	free(v);
	return m;
}

/* The sum of the forwarders' peak RSS, MiB, per round. */
static struct m3 rss_sum(const struct proc *f, const struct setup *s)
{
	double v[MAXROUNDS];
	for (int i = 0; i < s->rounds; i++) {
		v[i] = 0;
		for (int h = 0; h < s->hosts; h++)
			v[i] += f[i * s->hosts + h].rss_kib / 1024.0;
	}
	return m3_of(v, s->rounds);
}

/* PASS when every round stored every record once and every process
 * exited 0. */
static int passed(const struct round *r, const struct setup *s)
{
	for (int i = 0; i < s->rounds; i++)
		if (r[i].verified != s->want || r[i].fwd_failed ||
		    r[i].col.status != 0 || r[i].col_secs <= 0)
			return 0;
	return 1;
}

static void md_phase(FILE *md, const char *name, const struct round *r,
                     const struct setup *s, int collect, struct m3 rss)
{
	int n = s->rounds;
	long w = s->want;
	fprintf(md, "| %s |", name);
	md_m3(md, over_rounds(r, n, collect ? col_rps : ship_rps, w), "%.0f");
	md_m3(md, over_rounds(r, n, collect ? col_secs : ship_secs, w), "%.2f");
	md_m3(md, over_rounds(r, n, collect ? col_cpu_m : ship_cpu_m, w),
	      "%.3f");
	md_m3(md, over_rounds(r, n, collect ? col_srv_m : ship_srv_m, w),
	      "%.2f");
	md_m3(md, rss, "%.1f");
	fprintf(md, "\n");
}

static void write_md(FILE *md, const struct round *r, const struct proc *f,
                     const struct setup *s, double load1, int ok)
{
	struct utsname u;
	int nf = s->hosts * s->rounds;

	uname(&u);
	fprintf(md, "%d forwarders (%d shards, %ld records of %d bytes each: "
	        "%ld in all) into a 3-node cluster (stream of 3 replicas) and "
	        "one collector%s; Linux %s, %ld CPUs, load average %.2f "
	        "before, %.2f at the end; median (min-max) of %d rounds.\n\n"
	        "| phase | records/s | wall s | CPU s per M records | "
	        "servers' CPU s per M | peak RSS MiB |\n"
	        "|---|---:|---:|---:|---:|---:|\n", s->hosts, nshards,
	        s->per_host, PAYLOAD, s->want,
	        s->live ? " running throughout (--live)" : " after them",
	        u.release, sysconf(_SC_NPROCESSORS_ONLN), s->load0, load1,
	        s->rounds);
	md_phase(md, "ship: every forwarder at once, to the last one's exit "
	         "(CPU: all of them; RSS: each)", r, s, 0,
	         over_fwd(f, nf, 3, s->per_host));
	md_phase(md, s->live ? "collect: from the first forwarder's start "
	         "to the last record stored" : "collect --once", r, s, 1,
	         over_rounds(r, s->rounds, col_rss, s->want));
	fprintf(md, "\n| each forwarder (%d) | median (min-max) |\n"
	        "|---|---:|\n| wall s |", nf);
	md_m3(md, over_fwd(f, nf, 0, s->per_host), "%.2f");
	fprintf(md, "\n| records/s |");
	md_m3(md, over_fwd(f, nf, 1, s->per_host), "%.0f");
	fprintf(md, "\n| CPU s |");
	md_m3(md, over_fwd(f, nf, 2, s->per_host), "%.3f");
	fprintf(md, "\n| peak RSS MiB |");
	md_m3(md, over_fwd(f, nf, 3, s->per_host), "%.1f");
	fprintf(md, "\n| all %d forwarders' peak RSS added, MiB |", s->hosts);
	md_m3(md, rss_sum(f, s), "%.0f");
	fprintf(md, "\n\nexactly once: %s (%d origins, each record of each "
	        "once, from sequence 1, bytes equal to the source, in %s)\n",
	        ok ? "PASS" : "FAIL", s->hosts * nshards,
	        s->rounds > 1 ? "every round" : "the round");
}

static void js_phase(FILE *js, const char *key, const struct round *r,
                     const struct setup *s, int collect)
{
	int n = s->rounds;
	long w = s->want;
	fprintf(js, ",\"%s\":{", key);
	js_m3(js, "records_per_s",
	      over_rounds(r, n, collect ? col_rps : ship_rps, w), 0);
	js_m3(js, "wall_s", over_rounds(r, n, collect ? col_secs : ship_secs,
	                                w), 1);
	js_m3(js, "cpu_s_per_million",
	      over_rounds(r, n, collect ? col_cpu_m : ship_cpu_m, w), 1);
	js_m3(js, "servers_cpu_s_per_million",
	      over_rounds(r, n, collect ? col_srv_m : ship_srv_m, w), 1);
	if (collect)
		js_m3(js, "peak_rss_mib", over_rounds(r, n, col_rss, w), 1);
	fprintf(js, "}");
}

static void write_json(FILE *js, const struct round *r, const struct proc *f,
                       const struct setup *s, double load1, int ok)
{
	struct utsname u;
	int nf = s->hosts * s->rounds;

	uname(&u);
	fprintf(js, "{\"machine\":\"%s %s, %ld CPUs\",\"load1_before\":%.2f,"
	        "\"load1_after\":%.2f,\"hosts\":%d,\"shards\":%d,"
	        "\"records_per_host\":%ld,\"payload\":%d,\"rounds\":%d,"
	        "\"live\":%d,\"exactly_once\":%s", u.nodename, u.release,
	        sysconf(_SC_NPROCESSORS_ONLN), s->load0, load1, s->hosts,
	        nshards, s->per_host, PAYLOAD, s->rounds, s->live,
	        ok ? "true" : "false");
	js_phase(js, "ship", r, s, 0);
	js_phase(js, "collect", r, s, 1);
	fprintf(js, ",\"forwarder\":{");
	js_m3(js, "wall_s", over_fwd(f, nf, 0, s->per_host), 0);
	js_m3(js, "records_per_s", over_fwd(f, nf, 1, s->per_host), 1);
	js_m3(js, "cpu_s", over_fwd(f, nf, 2, s->per_host), 1);
	js_m3(js, "peak_rss_mib", over_fwd(f, nf, 3, s->per_host), 1);
	js_m3(js, "peak_rss_sum_mib", rss_sum(f, s), 1);
	fprintf(js, "}}\n");
}

/* OUT/hosts.md (also on stdout) and OUT/hosts.json.  @return 0, -1. */
static int report(const struct round *r, const struct proc *f,
                  const struct setup *s, const char *out, int ok)
{
	char path[600];
	double load[3] = {-1, -1, -1};
	FILE *md, *js;

	getloadavg(load, 3);
	snprintf(path, sizeof path, "%s/hosts.json", out);
	js = fopen(path, "w");
	snprintf(path, sizeof path, "%s/hosts.md", out);
	md = fopen(path, "w");
	if (!md || !js) {
		fprintf(stderr, "many-hosts: cannot write in %s\n", out);
		return -1;
	}
	write_json(js, r, f, s, load[0], ok);
	write_md(md, r, f, s, load[0], ok);
	fclose(js);
	fclose(md);
	snprintf(path, sizeof path, "cat '%s/hosts.md'", out);
	return system(path) == 0 ? 0 : -1;
}

/* ---- main ---- */

static int usage(void)
{
	fprintf(stderr, "usage: many-hosts [--hosts N] [--shards N] "
	        "[--records N] [--runs N] [--live]\n  --hosts 1..%d (64), "
	        "--shards 1..64 (2), --records per host, at least --shards "
	        "(50000), --runs 1..%d (3)\n", MAXHOSTS, MAXROUNDS);
	return 2;
}

static int parse(struct setup *s, int argc, char **argv)
{
	s->hosts = 64;
	s->per_host = 50000;
	s->rounds = 3;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--live"))
			s->live = 1;
		else if (!strcmp(argv[i], "--hosts") && i + 1 < argc)
			s->hosts = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--shards") && i + 1 < argc)
			nshards = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--records") && i + 1 < argc)
			s->per_host = atol(argv[++i]);
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			s->rounds = atoi(argv[++i]);
		else
			return -1;
	}
	s->want = s->per_host * s->hosts;
	return s->hosts < 1 || s->hosts > MAXHOSTS || s->rounds < 1 ||
	       s->rounds > MAXROUNDS || nshards < 1 || nshards > 64 ||
	       s->per_host < nshards ? -1 : 0;
}

/* Say when the forwarders would need more inotify instances than a
 * user may have (each forwarder takes one, also with --once). */
static void inotify_check(int hosts)
{
	FILE *f = fopen("/proc/sys/fs/inotify/max_user_instances", "r");
	int max = 0;

	if (f && fscanf(f, "%d", &max) == 1 && hosts >= max)
		fprintf(stderr, "many-hosts: %d forwarders need as many inotify "
		        "instances, and fs.inotify.max_user_instances is %d: "
		        "some will fail with \"Too many open files\"\n", hosts,
		        max);
	if (f)
		fclose(f);
}

/* BASE, BASE/log and the source logs.  @return 0, -1. */
static int prepare(const struct setup *s)
{
	char dir[300];
	double t0 = t_now();

	snprintf(base, sizeof base, "%s/le-hosts-XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(base) || access(tool, X_OK) != 0) {
		fprintf(stderr, "many-hosts: %s: %s\n", access(tool, X_OK)
		        ? tool : base, strerror(errno));
		return -1;
	}
	snprintf(dir, sizeof dir, "%s/log", base);
	mkdir(dir, 0755);
	snprintf(dir, sizeof dir, "%s/src", base);
	mkdir(dir, 0755);
	for (int h = 0; h < s->hosts; h++)
		if (write_host(h, s->per_host) < 0) {
			fprintf(stderr, "many-hosts: writing host-%02d's log "
			        "failed: %s\n", h, le_errmsg());
			return -1;
		}
	fprintf(stderr, "many-hosts: %d logs of %ld records written in "
	        "%.1f s\n", s->hosts, s->per_host, t_now() - t0);
	return 0;
}

int main(int argc, char **argv)
{
	struct setup s = {0};
	static struct round r[MAXROUNDS];
	const char *out = getenv("OUT") ? getenv("OUT") : "perf/results/hosts";
	double load[3] = {-1, -1, -1};

	if (parse(&s, argc, argv) < 0)
		return usage();
	if (getenv("LE_CLI"))
		tool = getenv("LE_CLI");
	inotify_check(s.hosts);
	getloadavg(load, 3);
	s.load0 = load[0];
	struct proc *fwd = calloc((size_t)s.hosts * (size_t)s.rounds,
	                          sizeof *fwd);
	if (!fwd || prepare(&s) < 0)
		return 2;
	sb_sh("mkdir -p '%s'%s", out, "");
	for (int i = 0; i < s.rounds; i++) {
		fprintf(stderr, "many-hosts: round %d of %d\n", i + 1, s.rounds);
		if (round_run(&r[i], fwd + i * s.hosts, s.hosts, s.want, i + 1,
		              s.live) < 0)
			return 2;
	}
	int ok = passed(r, &s);
	int rc = report(r, fwd, &s, out, ok) < 0 ? 2 : ok ? 0 : 1;
	/* Every process's stderr (summaries, anything that went wrong)
	 * stays with the figures. */
	sb_sh("rm -rf '%s/log'%s", out, "");
	sb_sh("cp -r '%s/log' '%s'/", base, out);
	sb_sh("rm -rf '%s'%s", base, "");
	free(fwd);
	return rc;
}
