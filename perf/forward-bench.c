/*
 * forward-bench.c -- shipping a backlog to NATS JetStream, measured
 * (make bench-forward; docs/BENCHMARKS.md, "Forwarding").
 *
 * One backlog of 128-byte records (one shard, every field: 156-byte
 * frames) is written with the engine, then, in each of --runs rounds
 * (a fresh single server and a fresh 3-node cluster on 127.0.0.1, ports
 * picked free, JetStream with file storage):
 *
 *   plain     the segment files' bytes in 256 KiB messages, js_PublishAsync
 *             with a 16 MiB window: the transport's limit for these bytes
 *             (the reference the forwarder is judged against)
 *   forward   logengine forward --once --max-batch-bytes 256K (frames as
 *             stored, each CRC checked, cursor kept)
 *   json      logengine cat -o json (each record decoded by the reader,
 *             re-encoded as JSON) piped to a publisher of whole lines in
 *             256 KiB messages, same window: a forwarder that does not
 *             ship stored bytes; CPU of both processes
 *   collect   logengine collect --once of what forward shipped (synced
 *             before each ack; collect-nosync: --sync none)
 *   scan      no transport: frames read and checked (CRC, size, sequence)
 *             in 256 KiB batches, as forward does before it publishes
 *   encode    no transport: logengine cat -o json DIR > /dev/null (what
 *             json does before it publishes)
 *   plain-r3  plain into a stream of 3 replicas on the cluster
 *   r3        logengine forward --once --replicas 3 into the cluster
 *
 * Each runs as a child process: wall time, CPU (user + system, from
 * wait4) and peak RSS are its own; the servers' CPU over the run is read
 * from /proc.  Output: OUT/forward.json and OUT/forward.md (OUT: $OUT,
 * else perf/results/forward): medians with min-max over the rounds, the
 * table also on stdout, with the goals checked (ratios paired
 * within a round):
 *   forward >= 65% of plain's records/s; r3 >= 500 k records/s;
 *   json CPU per record >= 8x forward's (and encode's >= 8x scan's);
 *   collect >= 1 M records/s.
 *
 *   build/forward-bench [--records N] [--runs N] [--quick]
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/utsname.h>
#include <string.h>

#include "logengine.h"
#include "natsrv.h"
#include "store/segment.h"
#include "ship_bench.h"

#define PAYLOAD 128
#define BATCH (256u << 10)
#define WINDOW (16u << 20)

static char base[256];
static const char *tool = "build/logengine";

#define MAXROUNDS 15

struct run {
	const char *name;
	double secs, cpu;   /* wall, user + system of the child */
	double srv_cpu;     /* the servers' CPU meanwhile (-1: no server) */
	long rss_kib;       /* its peak */
	long records;
	double bytes;       /* what it moved */
	int status;
};

enum { R_PLAIN, R_FORWARD, R_JSON, R_COLLECT, R_NOSYNC, R_SCAN, R_ENCODE,
       R_PLAIN3, R_R3, NKIND };
static const char *const kind_name[NKIND] = {
	"plain", "forward", "json", "collect", "collect-nosync", "scan",
	"encode", "plain-r3", "r3"};

/* The servers a run's server CPU is taken from. */
static pid_t srv_pid[3];
static int nsrv;

static double srv_cpu(void)
{
	double c = 0;
	for (int i = 0; i < nsrv; i++)
		c += t_proc_cpu(srv_pid[i]);
	return c;
}

/* ---- the backlog ---- */

static int write_backlog(const char *dir, long n)
{
	le_config c;
	le_engine *e;
	char p[PAYLOAD];

	le_config_init(&c);
	c.dir = dir;
	c.create_dir = 1;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.queue_capacity_bytes = 8u << 20;
	c.durability = LE_SYNC_NONE;
	if (le_open(&e, &c) < 0)
		return -1;
	for (long i = 0; i < n; i++) {
		int k = snprintf(p, sizeof p, "request %ld served in %ld us ", i,
		                 i % 977);
		memset(p + k, 'x', sizeof p - (size_t)k);
		le_write(e, 0, LE_INFO, p, sizeof p);
	}
	return le_close(e);
}

/* ---- a window of async publishes (plain and json) ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static uint64_t inflight, failed;

static void on_ack(jsCtx *js, natsMsg *m, jsPubAck *pa, jsPubAckErr *pae,
                   void *cl)
{
	(void)js;
	(void)pae;
	(void)cl;
	pthread_mutex_lock(&mu);
	inflight -= (uint64_t)natsMsg_GetDataLength(m);
	failed += pa == NULL;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	natsMsg_Destroy(m);
}

static jsCtx *js_open(const char *url, natsConnection **nc)
{
	jsOptions jo;
	jsCtx *js = NULL;

	if (natsConnection_ConnectTo(nc, url) != NATS_OK)
		return NULL;
	jsOptions_Init(&jo);
	jo.PublishAsync.AckHandler = on_ack;
	jo.PublishAsync.MaxPending = 4096;
	natsConnection_JetStream(&js, *nc, &jo);
	return js;
}

static void publish(jsCtx *js, const char *subj, const void *p, size_t n)
{
	natsMsg *m = NULL;

	pthread_mutex_lock(&mu);
	while (inflight + n > WINDOW)
		pthread_cond_wait(&cv, &mu);
	inflight += n;
	pthread_mutex_unlock(&mu);
	natsMsg_Create(&m, subj, NULL, p, (int)n);
	if (js_PublishMsgAsync(js, &m, NULL) != NATS_OK) {
		pthread_mutex_lock(&mu);
		inflight -= n;
		failed++;
		pthread_mutex_unlock(&mu);
		natsMsg_Destroy(m);
	}
}

static int drain(jsCtx *js)
{
	jsPubOptions po;
	jsPubOptions_Init(&po);
	po.MaxWait = 60000;
	return js_PublishAsyncComplete(js, &po) == NATS_OK && failed == 0 ? 0
	                                                                 : 1;
}

/* plain: the segment files' bytes as they are, in BATCH messages. */
static int run_plain(const char *url, const char *dir, const char *subj)
{
	natsConnection *nc = NULL;
	jsCtx *js = js_open(url, &nc);
	char sdir[512], path[600];
	uint64_t *segs;
	size_t nseg;
	static unsigned char buf[BATCH];

	if (!js)
		return 1;
	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	if (le__seg_list(sdir, &segs, &nseg) < 0)
		return 1;
	for (size_t i = 0; i < nseg; i++) {
		le__seg_path(path, sizeof path, sdir, segs[i]);
		FILE *f = fopen(path, "rb");
		size_t n;
		while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
			publish(js, subj, buf, n);
		if (f)
			fclose(f);
	}
	free(segs);
	int rc = drain(js);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return rc;
}

/* scan: what forward does to the backlog before publishing, and no
 * more: runs of whole frames of up to BATCH bytes taken by the segment
 * scanner (each frame's size, sequence and CRC checked, CRCs side by
 * side), each batch's bytes touched once (forward hands them to libnats
 * from the scanner's window). */
static int run_scan(const char *dir)
{
	char sdir[512], path[600];
	uint64_t *segs;
	size_t nseg;
	uint64_t frames = 0, sum = 0;

	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	if (le__seg_list(sdir, &segs, &nseg) < 0)
		return 1;
	for (size_t i = 0; i < nseg; i++) {
		le__scan sc;
		const char *why;
		uint64_t got;
		int64_t k;
		le__seg_path(path, sizeof path, sdir, segs[i]);
		if (le__scan_open(&sc, path, 0, &why) < 0)
			return 1;
		while ((k = le__scan_many(&sc, BATCH, &got)) > 0) {
			frames += (uint64_t)k;
			sum += sc.buf[sc.off - sc.win_off - 1];
		}
		le__scan_close(&sc);
	}
	free(segs);
	return frames && sum != 1 ? 0 : 1;
}

/* json: the lines of `logengine cat -o json DIR` (each record decoded
 * by the reader and re-encoded as JSON) on stdin, whole lines in
 * messages of at most BATCH bytes. */
static int run_json(const char *url, const char *dir, const char *subj)
{
	natsConnection *nc = NULL;
	jsCtx *js = js_open(url, &nc);
	static char buf[2 * BATCH];
	size_t len = 0;
	ssize_t n;

	(void)dir;
	if (!js)
		return 1;
	while ((n = read(0, buf + len, sizeof buf - len)) > 0) {
		len += (size_t)n;
		while (len >= BATCH) {
			char *nl = memrchr(buf, '\n', BATCH);
			size_t cut = nl ? (size_t)(nl - buf) + 1 : BATCH;
			publish(js, subj, buf, cut);
			memmove(buf, buf + cut, len - cut);
			len -= cut;
		}
	}
	if (len)
		publish(js, subj, buf, len);
	int rc = drain(js);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return rc;
}

/* The stream that takes plain's and json's messages. */
static int make_stream(const char *url, const char *name, const char *a,
                       const char *b, int replicas)
{
	const char *subj[2] = {a, b};
	return sb_make_stream(url, name, subj, 2, replicas);
}

/* ---- children ---- */

static double srv0; /* the servers' CPU when the run began */
static int round_no; /* names the runs' stderr files: BASE/RUN-ROUND.err */

/* A run begins: @return the time. */
static double begin(void)
{
	fflush(NULL);
	srv0 = srv_cpu();
	return t_now();
}

static void measure(struct run *x, pid_t pid, double t0)
{
	struct rusage ru;

	x->status = t_wait(pid, 1800, &ru);
	x->secs = t_now() - t0;
	x->cpu = sb_tv(ru.ru_utime) + sb_tv(ru.ru_stime);
	x->srv_cpu = nsrv ? srv_cpu() - srv0 : -1;
	x->rss_kib = ru.ru_maxrss;
}

/* `logengine cat -o json dir | run_json`: the two children's wall time,
 * CPU added up, the larger peak RSS. */
static void json_pipeline(struct run *x, const char *url, const char *dir,
                          const char *subj)
{
	struct rusage ru;
	int p[2];
	double t0 = begin();

	if (pipe(p) < 0) {
		x->status = -1;
		return;
	}
	pid_t cat = fork();
	if (cat == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl(tool, tool, "cat", "-o", "json", dir, (char *)NULL);
		_exit(127);
	}
	pid_t pub = fork();
	if (pub == 0) {
		dup2(p[0], 0);
		close(p[0]);
		close(p[1]);
		execl("/proc/self/exe", "forward-bench", "--child", "json", url,
		      dir, subj, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	close(p[1]);
	int st = t_wait(cat, 1800, &ru);
	measure(x, pub, t0);
	x->cpu += sb_tv(ru.ru_utime) + sb_tv(ru.ru_stime);
	if (ru.ru_maxrss > x->rss_kib)
		x->rss_kib = ru.ru_maxrss;
	if (st)
		x->status = st;
}

/* "forward-bench --child MODE URL DIR SUBJ" in a process of its own: a
 * fork of this one would inherit libnats's state without its threads. */
static void child(struct run *x, const char *mode, const char *url,
                  const char *dir, const char *subj)
{
	double t0 = begin();
	pid_t pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", "forward-bench", "--child", mode, url,
		      dir, subj, (char *)NULL);
		_exit(127);
	}
	measure(x, pid, t0);
}

/* The tool with these arguments (NULL-terminated); stdout to out (NULL:
 * /dev/null), stderr to BASE/NAME.err. */
static void tool_run(struct run *x, ...)
{
	const char *argv[32];
	int n = 0;
	va_list ap;

	argv[n++] = tool;
	va_start(ap, x);
	while (n < 31 && (argv[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	argv[n] = NULL;
	char err[400];
	snprintf(err, sizeof err, "%s/%s-%d.err", base, x->name, round_no);
	double t0 = begin();
	measure(x, t_spawn(err, (char *const *)argv), t0);
	if (x->status)
		fprintf(stderr, "forward-bench: %s: exit %d (see %s)\n", x->name,
		        x->status, err);
}

/* ---- report ---- */

static double rps(const struct run *x)
{
	return x->secs > 0 ? (double)x->records / x->secs : 0;
}

static double mbps(const struct run *x)
{
	return x->secs > 0 ? x->bytes / 1e6 / x->secs : 0;
}

static double cpu_per_m(const struct run *x)
{
	return x->records ? x->cpu * 1e6 / (double)x->records : 0;
}

static double srv_per_m(const struct run *x)
{
	return x->records && x->srv_cpu >= 0
	               ? x->srv_cpu * 1e6 / (double)x->records : -1;
}

static double rss_mib(const struct run *x)
{
	return x->rss_kib / 1024.0;
}

/* One metric of kind k over the rounds. */
static struct m3 metric(struct run (*r)[NKIND], int n, int k,
                        double (*f)(const struct run *))
{
	double v[MAXROUNDS];
	for (int i = 0; i < n; i++)
		v[i] = f(&r[i][k]);
	return m3_of(v, n);
}

/* a / b of each round's runs ka and kb. */
static struct m3 paired(struct run (*r)[NKIND], int n, int ka, int kb,
                        double (*f)(const struct run *))
{
	double v[MAXROUNDS];
	for (int i = 0; i < n; i++) {
		double b = f(&r[i][kb]);
		v[i] = b > 0 ? f(&r[i][ka]) / b : 0;
	}
	return m3_of(v, n);
}

/* What the machine's CPUs could carry for kind k if nothing else ran:
 * CPUs / (the run's CPU + the servers' CPU) per record. */
static double bound(const struct run *x)
{
	double c = x->cpu + (x->srv_cpu > 0 ? x->srv_cpu : 0);
	return c > 0 ? (double)x->records * (double)sysconf(_SC_NPROCESSORS_ONLN)
	                       / c : 0;
}

static const char *met(double got, double want)
{
	return got >= want ? "met" : "missed";
}

static void report(struct run (*r)[NKIND], int n, long records,
                   const char *out)
{
	char path[600];
	struct utsname u;
	FILE *md, *js;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double load[3] = {0, 0, 0};

	uname(&u);
	if (getloadavg(load, 3) < 0)
		load[0] = -1;
	snprintf(path, sizeof path, "%s/forward.md", out);
	md = fopen(path, "w");
	snprintf(path, sizeof path, "%s/forward.json", out);
	js = fopen(path, "w");
	if (!md || !js) {
		fprintf(stderr, "forward-bench: cannot write in %s\n", out);
		exit(2);
	}
	fprintf(js, "{\"machine\":\"%s %s, %ld CPUs\",\"load1\":%.2f,"
	        "\"records\":%ld,\"payload\":%d,\"batch\":%u,\"window\":%u,"
	        "\"rounds\":%d,\"runs\":[", u.nodename, u.release, ncpu,
	        load[0], records, PAYLOAD, BATCH, WINDOW, n);
	fprintf(md, "Forwarding %ld records of %d bytes (one shard, 156-byte "
	        "frames), 256 KiB messages, 16 MiB in flight; Linux %s, %ld "
	        "CPUs, load average %.2f at the end; median (min-max) of %d "
	        "rounds.\n\n| run | records/s | MB/s | CPU s per M records | "
	        "servers' CPU s per M | peak RSS MiB | exit |\n"
	        "|---|---:|---:|---:|---:|---:|---:|\n", records, PAYLOAD,
	        u.release, ncpu, load[0], n);
	for (int k = 0; k < NKIND; k++) {
		int st = 0;
		for (int i = 0; i < n; i++)
			if (r[i][k].status)
				st = r[i][k].status;
		fprintf(js, "%s{\"name\":\"%s\"", k ? "," : "", kind_name[k]);
		js_m3(js, "records_per_s", metric(r, n, k, rps), 1);
		js_m3(js, "mb_per_s", metric(r, n, k, mbps), 1);
		js_m3(js, "cpu_s_per_million", metric(r, n, k, cpu_per_m), 1);
		js_m3(js, "servers_cpu_s_per_million",
		      metric(r, n, k, srv_per_m), 1);
		js_m3(js, "peak_rss_mib", metric(r, n, k, rss_mib), 1);
		fprintf(js, ",\"status\":%d}", st);
		fprintf(md, "| %s |", kind_name[k]);
		md_m3(md, metric(r, n, k, rps), "%.0f");
		md_m3(md, metric(r, n, k, mbps), "%.1f");
		md_m3(md, metric(r, n, k, cpu_per_m), "%.3f");
		if (k == R_SCAN || k == R_ENCODE)
			fprintf(md, " - |");
		else
			md_m3(md, metric(r, n, k, srv_per_m), "%.2f");
		md_m3(md, metric(r, n, k, rss_mib), "%.1f");
		fprintf(md, " %d |\n", st);
	}
	struct m3 fp = paired(r, n, R_FORWARD, R_PLAIN, rps);
	struct m3 r3 = metric(r, n, R_R3, rps);
	struct m3 jf = paired(r, n, R_JSON, R_FORWARD, cpu_per_m);
	struct m3 es = paired(r, n, R_ENCODE, R_SCAN, cpu_per_m);
	struct m3 co = metric(r, n, R_COLLECT, rps);
	struct m3 b3 = metric(r, n, R_R3, bound);
	struct m3 bp3 = metric(r, n, R_PLAIN3, bound);
	struct m3 bc = metric(r, n, R_COLLECT, bound);
	fprintf(js, "],\"goals\":{");
	js_m3(js, "forward_vs_plain", fp, 0);
	js_m3(js, "r3_records_per_s", r3, 1);
	js_m3(js, "json_cpu_vs_forward", jf, 1);
	js_m3(js, "encode_cpu_vs_scan", es, 1);
	js_m3(js, "collect_records_per_s", co, 1);
	fprintf(js, "},\"cpu_bounds\":{");
	js_m3(js, "r3", b3, 0);
	js_m3(js, "plain_r3", bp3, 1);
	js_m3(js, "collect", bc, 1);
	fprintf(js, "}}\n");
	fprintf(md, "\n| goal | wanted | got | |\n|---|---:|---:|---|\n");
	fprintf(md, "| forward / plain records/s (paired) | >= 0.65 |");
	md_m3(md, fp, "%.2f");
	fprintf(md, " %s |\n| r3 records/s | >= 500000 |", met(fp.med, 0.65));
	md_m3(md, r3, "%.0f");
	fprintf(md, " %s |\n| json / forward CPU per record, transport "
	        "included (paired) | >= 8 |", met(r3.med, 500000));
	md_m3(md, jf, "%.1f");
	fprintf(md, " %s |\n| encode / scan CPU per record, before the "
	        "transport (paired) | >= 8 |", met(jf.med, 8));
	md_m3(md, es, "%.1f");
	fprintf(md, " %s |\n| collect records/s | >= 1000000 |",
	        met(es.med, 8));
	md_m3(md, co, "%.0f");
	fprintf(md, " %s |\n", met(co.med, 1e6));
	fprintf(md, "\nRecords/s the %ld CPUs could carry were the run and its "
	        "servers alone on them ((run + servers' CPU) per record): r3",
	        ncpu);
	md_m3(md, b3, "%.0f");
	fprintf(md, " plain-r3");
	md_m3(md, bp3, "%.0f");
	fprintf(md, " collect");
	md_m3(md, bc, "%.0f");
	fprintf(md, "\n");
	fclose(js);
	fclose(md);
	snprintf(path, sizeof path, "cat '%s/forward.md'", out);
	if (system(path) != 0)
		fprintf(stderr, "forward-bench: %s/forward.md\n", out);
}

/* ---- one round ---- */

static void forward_run(struct run *x, const char *url, const char *src,
                        const char *host, const char *batch,
                        const char *replicas)
{
	sb_sh("rm -f '%s'/shard-*/FORWARD%s", src, "");
	tool_run(x, "forward", "--nats", url, "--host", host, "--once",
	         "--replicas", replicas, "--max-batch-bytes", batch, src,
	         (char *)NULL);
}

/* plain, forward, json, collect and collect-nosync on a fresh server;
 * scan and encode with no server.  The order of plain and forward
 * alternates from round to round. */
static int round_single(struct run *r, int i, const char *src)
{
	t_nats one;
	char host[32], subj[48], dst[300], durable[32];

	if (t_nats_start(&one, base, "max_payload: 8MB\n") < 0 ||
	    make_stream(one.url, "BENCH", "plain.>", "json.>", 1) < 0) {
		fprintf(stderr, "forward-bench: the server did not start\n");
		t_nats_stop(&one);
		return -1;
	}
	srv_pid[0] = one.pid;
	nsrv = 1;
	snprintf(host, sizeof host, "bench%d", i);
	snprintf(subj, sizeof subj, "logs.%s.>", host);
	for (int j = 0; j < 2; j++) {
		if ((i + j) % 2 == 0)
			child(&r[R_PLAIN], "plain", one.url, src, "plain.h");
		else
			forward_run(&r[R_FORWARD], one.url, src, host, "256K",
			            "1");
	}
	json_pipeline(&r[R_JSON], one.url, src, "json.h");
	snprintf(dst, sizeof dst, "%s/dst", base);
	tool_run(&r[R_COLLECT], "collect", "--nats", one.url, "--once",
	         "--verbose", "--subject", subj, dst, (char *)NULL);
	snprintf(dst, sizeof dst, "%s/dst-nosync", base);
	snprintf(durable, sizeof durable, "nosync%d", i);
	tool_run(&r[R_NOSYNC], "collect", "--nats", one.url, "--once",
	         "--verbose", "--subject", subj, "--durable", durable, "--sync", "none",
	         dst, (char *)NULL);
	t_nats_stop(&one);
	nsrv = 0;
	sb_sh("rm -rf '%s' '%s'/dst*", one.dir, base);
	child(&r[R_SCAN], "scan", "-", src, "-");
	tool_run(&r[R_ENCODE], "cat", "-o", "json", src, (char *)NULL);
	return 0;
}

/* plain-r3 and r3 on a fresh 3-node cluster. */
static int round_cluster(struct run *r, int i, const char *src,
                         const char *r3_batch)
{
	t_nats three[3];
	char urls[256], host[32];
	int rc = 0;

	if (t_nats_cluster(three, base) < 0 ||
	    make_stream(t_nats_urls(three, urls), "BENCH3", "plain3.>",
	                "json3.>", 3) < 0) {
		fprintf(stderr, "forward-bench: the cluster did not start (%s, "
		        "%s, %s)\n", three[0].dir, three[1].dir, three[2].dir);
		for (int k = 0; k < 3; k++)
			t_nats_stop(&three[k]);
		return -1;
	} else {
		for (int k = 0; k < 3; k++)
			srv_pid[k] = three[k].pid;
		nsrv = 3;
		snprintf(host, sizeof host, "r3bench%d", i);
		child(&r[R_PLAIN3], "plain", urls, src, "plain3.h");
		forward_run(&r[R_R3], urls, src, host, r3_batch, "3");
	}
	nsrv = 0;
	for (int k = 0; k < 3; k++) {
		t_nats_stop(&three[k]);
		sb_sh("rm -rf '%s'%s", three[k].dir, "");
	}
	return rc;
}

int main(int argc, char **argv)
{
	long records = 2000000;
	int rounds = 3;
	static struct run r[MAXROUNDS][NKIND];
	char src[300];
	const char *out = getenv("OUT") ? getenv("OUT")
	                                : "perf/results/forward";
	/* Replication costs a round trip between servers a message: the
	 * cluster run may use larger ones (R3_BATCH, default 256K). */
	const char *r3_batch = getenv("R3_BATCH") ? getenv("R3_BATCH") : "256K";

	if (argc == 6 && !strcmp(argv[1], "--child")) {
		if (!strcmp(argv[2], "plain"))
			return run_plain(argv[3], argv[4], argv[5]);
		if (!strcmp(argv[2], "scan"))
			return run_scan(argv[4]);
		return run_json(argv[3], argv[4], argv[5]);
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			records = 300000;
		else if (!strcmp(argv[i], "--records") && i + 1 < argc)
			records = atol(argv[++i]);
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: forward-bench [--quick] "
			        "[--records N] [--runs N]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAXROUNDS || records < 1) {
		fprintf(stderr, "forward-bench: --runs 1..%d, --records > 0\n",
		        MAXROUNDS);
		return 2;
	}
	if (getenv("LE_CLI"))
		tool = getenv("LE_CLI");
	snprintf(base, sizeof base, "%s/le-fwdbench-XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(base) || access(tool, X_OK) != 0) {
		fprintf(stderr, "forward-bench: %s: %s\n", access(tool, X_OK)
		        ? tool : base, strerror(errno));
		return 2;
	}
	snprintf(src, sizeof src, "%s/src", base);
	sb_sh("mkdir -p '%s'%s", out, "");
	if (write_backlog(src, records) < 0) {
		fprintf(stderr, "forward-bench: writing the backlog failed\n");
		return 2;
	}
	double frame_bytes = (double)records * (PAYLOAD + 28);
	for (int i = 0; i < rounds; i++)
		for (int k = 0; k < NKIND; k++) {
			r[i][k].name = kind_name[k];
			r[i][k].records = records;
			r[i][k].bytes = frame_bytes;
			r[i][k].srv_cpu = -1;
		}
	for (int i = 0; i < rounds; i++) {
		fprintf(stderr, "forward-bench: round %d of %d\n", i + 1, rounds);
		round_no = i + 1;
		if (round_single(r[i], i, src) < 0 ||
		    round_cluster(r[i], i, src, r3_batch) < 0)
			return 2;
	}
	report(r, rounds, records, out);
	/* The runs' stderr (summaries, anything that went wrong) stay. */
	sb_sh("cp '%s'/*.err '%s'/ 2>/dev/null; true", base, out);
	sb_sh("rm -rf '%s'%s", base, "");
	return 0;
}
