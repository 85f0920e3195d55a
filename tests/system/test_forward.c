/*
 * test_forward.c -- `logengine forward` and `logengine collect` against a
 * real nats-server (JetStream) that each test starts on 127.0.0.1 on a
 * free port and stops.  After every fault, the collector's store must
 * hold every record of the origin exactly once, in origin order, with
 * its bytes intact: compare() walks both logs side by side, record by
 * record.
 *
 * LE_LONG=1 adds the 3-node cluster losing a node, and two of its
 * three nodes for 20 s, and the 1 GB backlog (make check-long).  The
 * tool is $LE_CLI, else $BUILD/logengine.  LE_SAY=1: the outage tests
 * print what the tools said.
 */
#include "harness.h"

#ifdef LE_NO_NATS
/* Built without libnats: every test here needs it. */
TEST(forwarding_needs_nats)
{
	t_need("nats");
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(forwarding_needs_nats);
	return t_done();
}
#else
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/resource.h>

#include "logengine.h"
#include "logtest.h"
#include "base/crc32c.h"
#include "natsrv.h"
#include "base/os.h"
#include "store/segment.h"
#include "ship/ship.h"

static char base[256]; /* this test's directory: logs, stores, servers */

static const char *cli(void)
{
	return t_build_tool("LE_CLI", "logengine");
}

static const char *path(const char *name)
{
	static char p[8][512];
	static int i;
	char *b = p[i++ % 8];
	snprintf(b, 512, "%s/%s", base, name);
	return b;
}

/* ---- logs ---- */

struct wopts {
	unsigned shards;
	int payload;            /* bytes per record */
	uint64_t segment_bytes; /* 0: default */
	uint32_t max_record;    /* 0: default */
	uint64_t retention, margin;
};

/* n records into dir, record i on route key i: "s<key % shards>-<i>"
 * padded with letters to the payload size. */
static void write_log(const char *dir, long n, const struct wopts *w)
{
	le_config c;
	le_engine *e;
	char p[1 << 18];

	le_config_init(&c);
	c.dir = dir;
	c.create_dir = 1;
	c.shards = w->shards ? w->shards : 1;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.queue_capacity_bytes = 8u << 20;
	if (w->segment_bytes)
		c.segment_bytes = w->segment_bytes;
	if (w->max_record)
		c.max_record_bytes = w->max_record;
	c.retention_bytes = w->retention;
	c.retention_unshipped_bytes = w->margin;
	CHECK_RC(le_open(&e, &c));
	int len = w->payload ? w->payload : 100;
	CHECK((size_t)len <= sizeof p);
	for (long i = 0; i < n; i++) {
		int k = snprintf(p, sizeof p, "s%ld-%ld ", i % (long)c.shards, i);
		for (int j = k; j < len; j++)
			p[j] = (char)('a' + (i + j) % 26);
		CHECK_RC(le_write(e, (uint64_t)i, LE_INFO, p, (size_t)len));
	}
	CHECK_RC(le_close(e));
}

/* The dst shard directory holding origin (host, shard), or -1. */
static int origin_dir(const char *dst, const char *host, uint32_t shard)
{
	char sdir[600];
	le__origin o;
	uint32_t *dirs;
	size_t n;
	int found = -1;

	CHECK_RC(le__shard_list(dst, &dirs, &n));
	for (size_t i = 0; i < n && found < 0; i++) {
		le__shard_dir(sdir, sizeof sdir, dst, dirs[i]);
		if (le__origin_read(sdir, &o) == 0 && o.shard == shard &&
		    o.kind == LE_ORIGIN_CHAIN && strcmp(o.host, host) == 0)
			found = (int)dirs[i];
	}
	free(dirs);
	return found;
}

static le_reader *reader(const char *dir, int shard)
{
	le_reader_opts o;
	le_reader *r;

	le_reader_opts_init(&o);
	o.mode = LE_RECOVER_TOLERATE_TAIL;
	o.shard = shard;
	CHECK_RC(le_reader_open(&r, dir, &o));
	return r;
}

/* Records of src shard `shard` from sequence `from` on, against dst's
 * copy of them: the same, one for one, and nothing after.  @return how
 * many. */
static long compare_shard(const char *src, const char *dst,
                          const char *host, uint32_t shard, uint64_t from)
{
	le_record a, b;
	long n = 0;
	int ra, rb, d = origin_dir(dst, host, shard);

	if (d < 0) {
		fprintf(stderr, "  %s: no origin %s/%u\n", dst, host, shard);
		CHECK(d >= 0);
	}
	le_reader *x = reader(src, (int)shard), *y = reader(dst, d);
	while ((rb = le_reader_next(y, &b)) == 1 && b.origin_seq < from)
		;
	for (;;) {
		ra = le_reader_next(x, &a);
		while (ra == 1 && a.seq < from)
			ra = le_reader_next(x, &a);
		if (ra != 1 || rb != 1)
			break;
		if (a.seq != b.origin_seq || a.ts_ns != b.ts_ns ||
		    a.level != b.level || a.flags != b.flags || a.len != b.len ||
		    memcmp(a.payload, b.payload, a.len) != 0 ||
		    strcmp(b.host, host) != 0 || b.origin_shard != shard) {
			fprintf(stderr, "  shard %u: record %" PRIu64 " (src) vs %"
			        PRIu64 " (dst) differ\n", shard, a.seq,
			        b.origin_seq);
			CHECK(0);
		}
		n++;
		rb = le_reader_next(y, &b);
	}
	if (ra != 0 || rb != 0)
		fprintf(stderr, "  shard %u: after %ld records, src %s, dst %s "
		        "(dst at origin_seq %" PRIu64 ")\n", shard, n,
		        ra == 1 ? "has more" : ra ? le_strerror(ra) : "ended",
		        rb == 1 ? "has more" : rb ? le_strerror(rb) : "ended",
		        rb == 1 ? b.origin_seq : 0);
	if (ra < 0 || rb < 0)
		fprintf(stderr, "  %s\n", le_errmsg());
	CHECK_EQ(ra, 0);
	CHECK_EQ(rb, 0);
	le_reader_close(x);
	le_reader_close(y);
	return n;
}

static long compare(const char *src, const char *dst, const char *host,
                    unsigned shards)
{
	long n = 0;
	for (unsigned s = 0; s < shards; s++)
		n += compare_shard(src, dst, host, s, 0);
	return n;
}

/* ---- the tool ---- */

/* Run `logengine` with the NULL-terminated arguments; stderr to errf.
 * @return its pid. */
static pid_t start_tool(const char *errf, const char *a0, ...)
{
	const char *argv[48];
	int n = 0;
	va_list ap;

	argv[n++] = cli();
	argv[n++] = a0;
	va_start(ap, a0);
	while (n < 47 && (argv[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	argv[n] = NULL;
	return t_spawn(errf, (char *const *)argv);
}

#define TOOL(timeout, errf, ...)                                              \
	t_wait(start_tool(errf, __VA_ARGS__, (const char *)NULL), timeout, NULL)

static char *slurp(const char *p)
{
	size_t n;
	unsigned char *b = t_slurp(p, &n);
	return b ? (char *)b : strdup("");
}

static void say_file(const char *who, const char *p)
{
	char *b = slurp(p);
	fprintf(stderr, "  %s (%s): %s\n", who, p, b);
	free(b);
}

static void setup(void)
{
	t_need("nats");
	t_tmpdir(base);
	if (access(cli(), X_OK) != 0) {
		fprintf(stderr, "  %s: not built\n", cli());
		_exit(1);
	}
}

static void server(t_nats *n, const char *extra)
{
	CHECK_EQ(t_nats_start(n, base, extra), 0);
}

static void forward_once(const t_nats *n, const char *src, const char *host)
{
	int rc = TOOL(120, path("fwd.err"), "forward", "--nats", n->url,
	              "--host", host, "--once", src);
	if (rc != 0)
		fprintf(stderr, "  forward: exit %d: %s", rc,
		        slurp(path("fwd.err")));
	CHECK_EQ(rc, 0);
}

static void collect_once(const char *url, const char *dst)
{
	int rc = TOOL(120, path("col.err"), "collect", "--nats", url, "--once",
	              "--ack-wait-ms", "2000", "--gap-wait-ms", "10000",
	              "--verbose", dst);
	if (rc != 0)
		fprintf(stderr, "  collect: exit %d: %s", rc,
		        slurp(path("col.err")));
	CHECK_EQ(rc, 0);
}

/* collect_once into dst, then compare the log src with it: the records
 * of host's shards alike in both (compare). */
static long collect_compare(const t_nats *n, const char *src,
                            const char *host, unsigned shards)
{
	collect_once(n->url, path("dst"));
	return compare(path(src), path("dst"), host, shards);
}

/* How every test ends: the server stopped, the test's directory gone. */
static void teardown(t_nats *n)
{
	t_nats_stop(n);
	t_rmrf(base);
}

/* ---- shipping ---- */

TEST(forward_once_then_collect_stores_every_record_once)
{
	t_nats n;
	struct wopts w = {.shards = 3};

	setup();
	write_log(path("src"), 60000, &w);
	server(&n, NULL);
	forward_once(&n, path("src"), "web-1");
	CHECK_EQ(collect_compare(&n, "src", "web-1", 3), 60000);
	/* A second run of each ships and stores nothing more. */
	forward_once(&n, path("src"), "web-1");
	CHECK_EQ(collect_compare(&n, "src", "web-1", 3), 60000);
	/* cat shows where each record came from. */
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "'%s' cat -o json '%s' > '%s'", cli(),
	         path("dst"), path("cat.out"));
	CHECK_EQ(system(cmd), 0);
	char *out = slurp(path("cat.out"));
	CHECK(strstr(out, "\"host\":\"web-1\",\"origin_shard\":2,"
	                  "\"origin_seq\":20000,\"msg\":\"s2-59999 "));
	teardown(&n);
}

TEST(two_hosts_merge_by_time_in_the_collected_store)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	le_record r;
	int rc, hosts = 0;
	uint64_t last = 0;

	setup();
	write_log(path("a"), 5000, &w);
	write_log(path("b"), 5000, &w);
	server(&n, NULL);
	forward_once(&n, path("a"), "host-a");
	forward_once(&n, path("b"), "host-b");
	collect_once(n.url, path("dst"));
	compare(path("a"), path("dst"), "host-a", 1);
	compare(path("b"), path("dst"), "host-b", 1);
	le_reader *x = reader(path("dst"), -1);
	while ((rc = le_reader_next(x, &r)) == 1) {
		CHECK(r.ts_ns >= last);
		last = r.ts_ns;
		hosts |= r.host[5] == 'a' ? 1 : 2;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(hosts, 3);
	le_reader_close(x);
	teardown(&n);
}

/* Every file of dir and below, "name inode" lines, sorted. */
static char *tree(const char *dir)
{
	char cmd[700];
	snprintf(cmd, sizeof cmd, "cd '%s' && find . -printf '%%p %%i\\n' | "
	         "sort > '%s'", dir, path("tree"));
	CHECK_EQ(system(cmd), 0);
	return slurp(path("tree"));
}

TEST(ten_thousand_acks_leave_the_files_and_inodes_unchanged)
{
	t_nats n;
	struct wopts w = {.shards = 1, .payload = 100};

	setup();
	write_log(path("src"), 1, &w);
	server(&n, NULL);
	forward_once(&n, path("src"), "h");   /* FORWARD exists from now on */
	write_log(path("src"), 10000, &w);    /* the engine's files settle */
	char *before = tree(path("src"));
	/* One record a message: 10,000 messages, 10,000 acks. */
	int rc = TOOL(120, path("fwd.err"), "forward", "--nats", n.url,
	              "--host", "h", "--once", "--max-batch-bytes", "200",
	              "--max-record-bytes", "150", "--verbose", path("src"));
	CHECK_EQ(rc, 0);
	char *after = tree(path("src"));
	CHECK_STR_EQ(after, before);
	char *err = slurp(path("fwd.err"));
	CHECK(strstr(err, "10000 records, 1280000 bytes in 10000 messages"));
	CHECK_EQ(t_stream_msgs(n.url, "LOGS"), 10001);
	CHECK_EQ(collect_compare(&n, "src", "h", 1), 10001);
	teardown(&n);
}

/* 80 records whose frames are 131,072 bytes: exactly 10,485,760. */
static void exact_batch(int extra_byte)
{
	t_nats n;
	struct wopts w = {.shards = 1, .payload = 131072 - 28,
	                  .max_record = 200000};
	char buf[64];

	setup();
	write_log(path("src"), 79, &w);
	w.payload += extra_byte;
	write_log(path("src"), 1, &w);
	server(&n, "max_payload: 16MB\n");
	int rc = TOOL(120, path("fwd.err"), "forward", "--nats", n.url,
	              "--host", "h", "--once", "--max-batch-bytes", "10485760",
	              "--max-record-bytes", "200000", "--max-inflight-bytes",
	              "32M", path("src"));
	if (rc)
		fprintf(stderr, "  %s", slurp(path("fwd.err")));
	CHECK_EQ(rc, 0);
	snprintf(buf, sizeof buf, "%d", 1 + extra_byte);
	CHECK_EQ(t_stream_msgs(n.url, "LOGS"), 1 + extra_byte);
	CHECK_EQ(collect_compare(&n, "src", "h", 1), 80);
	teardown(&n);
}

TEST(batch_of_exactly_max_batch_bytes_goes_as_one_message)
{
	exact_batch(0);
}

TEST(one_byte_over_max_batch_bytes_goes_as_two_messages)
{
	exact_batch(1);
}

TEST(record_that_could_exceed_a_batch_is_refused_at_start)
{
	setup();
	int rc = TOOL(30, path("err"), "forward", "--nats",
	              "nats://127.0.0.1:1", "--max-batch-bytes", "65536",
	              "--max-record-bytes", "65536", base);
	CHECK_EQ(rc, 2);
	char *err = slurp(path("err"));
	CHECK(strstr(err, "--max-record-bytes 65536"));
	CHECK(strstr(err, "--max-batch-bytes 65536"));
	t_rmrf(base);
}

TEST(stored_record_too_large_for_a_message_is_reported_and_the_rest_moves)
{
	t_nats n;
	struct wopts w = {.shards = 1, .payload = 100, .max_record = 200000};
	le_record r;
	int rc, markers = 0;

	setup();
	write_log(path("src"), 100, &w);
	w.payload = 150000;
	write_log(path("src"), 1, &w); /* record 101 */
	w.payload = 100;
	write_log(path("src"), 100, &w);
	server(&n, NULL);
	rc = TOOL(60, path("fwd.err"), "forward", "--nats", n.url, "--host",
	          "h", "--once", "--max-batch-bytes", "100000",
	          "--max-record-bytes", "50000", path("src"));
	CHECK_EQ(rc, 0);
	CHECK(strstr(slurp(path("fwd.err")), "record 101 is 150028 bytes"));
	collect_once(n.url, path("dst"));
	CHECK_EQ(compare_shard(path("src"), path("dst"), "h", 0, 102), 100);
	le_reader *x = reader(path("dst"), 0);
	long n_ = 0;
	while ((rc = le_reader_next(x, &r)) == 1) {
		n_++;
		if (r.flags & LE_REC_MARKER) {
			markers++;
			CHECK_EQ(r.origin_seq, 101);
			CHECK(r.len == 30 &&
			      !memcmp(r.payload, "1 records lost before shipping",
			              30));
		}
	}
	CHECK_EQ(n_, 201);
	CHECK_EQ(markers, 1);
	le_reader_close(x);
	teardown(&n);
}

/* ---- retention ---- */

TEST(retention_past_the_margin_ships_a_gap_marker_with_the_count)
{
	t_nats n;
	struct wopts w = {.shards = 1, .payload = 100,
	                  .segment_bytes = 64 << 10, .retention = 256 << 10,
	                  .margin = 128 << 10};
	le_record r;
	le_config c;
	le_engine *e;
	le_stats st;
	char p[100];
	int rc;

	setup();
	write_log(path("src"), 100, &w);
	server(&n, NULL);
	forward_once(&n, path("src"), "h"); /* a cursor at 101 */
	le_config_init(&c);
	c.dir = path("src");
	c.segment_bytes = w.segment_bytes;
	c.retention_bytes = w.retention;
	c.retention_unshipped_bytes = w.margin;
	c.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &c));
	memset(p, 'q', sizeof p);
	for (int i = 0; i < 8000; i++) /* ~1 MiB, far past the margin */
		CHECK_RC(le_write(e, 0, LE_INFO, p, sizeof p));
	CHECK_RC(le_flush(e, -1));
	CHECK_RC(le_stats_get(e, &st));
	CHECK(st.lost_unshipped > 0);
	CHECK_RC(le_close(e));
	forward_once(&n, path("src"), "h");
	collect_once(n.url, path("dst"));
	/* 1..100, then the marker, then what retention left. */
	le_reader *x = reader(path("dst"), 0);
	uint64_t seq = 0;
	long recs = 0, marks = 0;
	while ((rc = le_reader_next(x, &r)) == 1) {
		if (r.flags & LE_REC_MARKER) {
			char want[64];
			snprintf(want, sizeof want, "%" PRIu64 " records lost "
			         "before shipping", st.lost_unshipped);
			CHECK_EQ(r.len, strlen(want));
			CHECK(!memcmp(r.payload, want, r.len));
			CHECK_EQ(r.origin_seq, 100 + st.lost_unshipped);
			marks++;
		} else {
			recs++;
		}
		CHECK(r.origin_seq > seq);
		seq = r.origin_seq;
	}
	CHECK_EQ(marks, 1);
	CHECK_EQ((uint64_t)recs + st.lost_unshipped, 8100);
	le_reader_close(x);
	CHECK_EQ(compare_shard(path("src"), path("dst"), "h", 0,
	                       101 + st.lost_unshipped),
	         recs - 100);
	teardown(&n);
}

/* ---- following ---- */

/* Collect from url into dst until it holds n records (20 s at most).
 * @return how many it holds. */
static long collect_until(const char *url, const char *dst, long n)
{
	long got = 0;

	for (double end = t_now() + 20; t_now() < end; t_sleep_ms(200)) {
		char cmd[800];
		snprintf(cmd, sizeof cmd, "'%s' collect --nats %s --once "
		         "--ack-wait-ms 2000 --gap-wait-ms 10000 '%s' "
		         "2>/dev/null", cli(), url, dst);
		CHECK_EQ(system(cmd), 0);
		if ((got = count_records(dst)) >= n)
			break;
	}
	return got;
}

TEST(follow_ships_records_written_later_across_rotation_until_sigterm)
{
	t_nats n;
	struct wopts w = {.shards = 2, .payload = 100,
	                  .segment_bytes = 128 << 10};

	setup();
	write_log(path("src"), 1000, &w);
	server(&n, NULL);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", n.url,
	                     "--host", "h", path("src"), (const char *)NULL);
	/* Following: the first records are in the stream before more come. */
	CHECK_EQ(collect_until(n.url, path("dst"), 1000), 1000);
	write_log(path("src"), 20000, &w); /* ~2.5 MiB: many rotations */
	/* Bounded latency: everything is in the stream soon after. */
	CHECK_EQ(collect_until(n.url, path("dst"), 21000), 21000);
	kill(f, SIGTERM);
	CHECK_EQ(t_wait(f, 30, NULL), 0);
	CHECK_EQ(compare(path("src"), path("dst"), "h", 2), 21000);
	teardown(&n);
}

/* A user out of inotify instances (fs.inotify.max_user_instances is 128
 * by default: 128 forwarders of one user, or an editor and a few
 * watchers) still follows: records written later, and a shard
 * directory made later, are shipped by looking every second. */
TEST(follower_without_an_inotify_instance_still_ships_new_records_and_shards)
{
	t_nats n;
	struct wopts one = {.shards = 1}, two = {.shards = 2};

	setup();
	write_log(path("src"), 500, &one);
	server(&n, NULL);
	/* LeakSanitizer stops the world with ptrace, which a traced process
	 * cannot: under AddressSanitizer it would fail the exit. */
	const char *ao = getenv("ASAN_OPTIONS");
	char asan[512];
	snprintf(asan, sizeof asan, "%s%sdetect_leaks=0", ao ? ao : "",
	         ao && *ao ? ":" : "");
	setenv("ASAN_OPTIONS", asan, 1);
	char *const argv[] = {
		(char *)t_need_tool("strace"), "-f", "-qq", "-o", "/dev/null", "-e",
		"trace=inotify_init1", "-e", "inject=inotify_init1:error=EMFILE",
		(char *)cli(), "forward", "--nats", n.url, "--host", "h",
		(char *)path("src"), NULL};
	pid_t f = t_spawn(path("fwd.err"), argv);
	CHECK_EQ(collect_until(n.url, path("dst"), 500), 500);
	write_log(path("src"), 1000, &two); /* shard-001 appears */
	CHECK_EQ(collect_until(n.url, path("dst"), 1500), 1500);
	/* The forwarder is strace's child; strace exits with its status. */
	char kids[64];
	snprintf(kids, sizeof kids, "/proc/%d/task/%d/children", (int)f,
	         (int)f);
	FILE *kf = fopen(kids, "r");
	int fwd = 0;
	CHECK(kf && fscanf(kf, "%d", &fwd) == 1 && fwd > 0);
	fclose(kf);
	kill((pid_t)fwd, SIGTERM);
	CHECK_EQ(t_wait(f, 30, NULL), 0);
	CHECK(strstr(slurp(path("fwd.err")), "no inotify instance (Too many "
	                                     "open files): looking for new "
	                                     "records every 1000 ms"));
	CHECK_EQ(compare(path("src"), path("dst"), "h", 2), 1500);
	teardown(&n);
}

/* ---- faults ---- */

TEST(server_down_at_start_waits_quietly_then_ships)
{
	t_nats n;
	struct wopts w = {.shards = 1};

	setup();
	write_log(path("src"), 20000, &w);
	t_nats_init(&n, base);
	CHECK_EQ(t_nats_conf(&n, NULL), 0);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", n.url,
	                     "--host", "h", "--once", path("src"),
	                     (const char *)NULL);
	t_sleep_ms(500);
	double c0 = t_proc_cpu(f), t0 = t_now();
	t_sleep_ms(3000);
	double cpu = t_proc_cpu(f) - c0, wall = t_now() - t0;
	CHECK(cpu >= 0);
#if defined(__SANITIZE_THREAD__)
	/* TSan's runtime thread wakes on its own schedule in the waiting
	 * tool too; a busy loop would still take a whole CPU. */
	const double most = 0.05;
#else
	const double most = 0.01;
#endif
	if (cpu > most * wall)
		fprintf(stderr, "  %.3f s CPU in %.1f s waiting\n", cpu, wall);
	CHECK(cpu <= most * wall); /* no busy loop */
	char *err = slurp(path("fwd.err"));
	CHECK(strstr(err, n.url) && strstr(err, "retrying"));
	CHECK_EQ(t_nats_run(&n), 0);
	CHECK_EQ(t_js_ready(n.url, 10000), 0);
	CHECK_EQ(t_wait(f, 30, NULL), 0);
	CHECK_EQ(collect_compare(&n, "src", "h", 1), 20000);
	teardown(&n);
}

TEST(server_restarted_mid_stream_loses_nothing)
{
	t_nats n;
	struct wopts w = {.shards = 2, .payload = 200};

	setup();
	write_log(path("src"), 400000, &w);
	server(&n, NULL);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", n.url,
	                     "--host", "h", "--once", "--max-batch-bytes",
	                     "64K", "--max-record-bytes", "4K", "--ack-wait-ms",
	                     "2000", path("src"),
	                     (const char *)NULL);
	t_sleep_ms(150);
	t_nats_stop(&n);
	t_sleep_ms(1000);
	CHECK_EQ(t_nats_run(&n), 0);
	CHECK_EQ(t_wait(f, 90, NULL), 0);
	CHECK_EQ(collect_compare(&n, "src", "h", 2), 400000);
	teardown(&n);
}

/* A server stopped, then killed, takes what sat in its socket with it:
 * those messages time out only after the rest, sent again on the new
 * connection, were acknowledged and the whole log was read.  What timed
 * out must still go again. */
TEST(server_killed_after_the_log_was_read_loses_nothing)
{
	t_nats n;
	struct wopts w = {.shards = 2, .payload = 200};

	setup();
	write_log(path("src"), 30000, &w);
	server(&n, NULL);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", n.url,
	                     "--host", "h", "--once", "--max-batch-bytes",
	                     "64K", "--max-record-bytes", "4K",
	                     "--max-inflight-bytes", "4M", "--ack-wait-ms",
	                     "3000", path("src"), (const char *)NULL);
	for (int i = 0; i < 400 && t_stream_msgs(n.url, "LOGS") < 0; i++)
		t_sleep_ms(5);
	kill(n.pid, SIGSTOP);
	t_sleep_ms(300);
	kill(n.pid, SIGKILL);
	waitpid(n.pid, NULL, 0);
	CHECK_EQ(t_nats_run(&n), 0);
	CHECK_EQ(t_wait(f, 90, NULL), 0);
	CHECK_EQ(collect_compare(&n, "src", "h", 2), 30000);
	teardown(&n);
}

/* pid's RSS once it holds still: within 64 KiB for a second.  How soon
 * a forwarder fills its window (and, under a sanitizer, the shadow of
 * it) depends on the machine, not on what is tested; one whose memory
 * keeps growing never settles.  @return KiB, or -1 after 30 s. */
static long rss_settled(pid_t pid)
{
	long at = -1;
	int still = 0;

	for (int i = 0; i < 300 && still < 10; i++) {
		long r = t_proc_rss_kib(pid);
		if (r < 0)
			return -1;
		if (at < 0 || labs(r - at) > 64) {
			at = r;
			still = 0;
		} else {
			still++;
		}
		t_sleep_ms(100);
	}
	return still < 10 ? -1 : at;
}

/* Stop n's server (SIGSTOP) once the forwarder ships: once its stream
 * holds a message. */
static void stop_once_shipping(const t_nats *n)
{
	long m = 0;

	for (int i = 0; i < 2000 && (m = t_stream_msgs(n->url, "LOGS")) <= 0;
	     i++)
		t_sleep_ms(5);
	CHECK(m > 0);
	kill(n->pid, SIGSTOP);
}

/* Paused once the forwarder ships (its stream exists), the server takes
 * nothing more: the forwarder fills its 4 MiB window and then holds
 * still, its memory with it, for five seconds. */
TEST(server_paused_five_seconds_holds_the_window_and_memory)
{
	t_nats n;
	struct wopts w = {.shards = 1, .payload = 200};

	setup();
	write_log(path("src"), 300000, &w);
	server(&n, NULL);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", n.url,
	                     "--host", "h", "--once", "--max-inflight-bytes",
	                     "4M", "--max-batch-bytes", "256K", path("src"),
	                     (const char *)NULL);
	stop_once_shipping(&n);
	long rp = t_proc_rss_kib(f), r0 = rss_settled(f), hi = r0;
	/* What the pause let it take on is its window (4 MiB) and what a
	 * forwarder just started still touches, not the log (60 MB).  A
	 * sanitizer's shadow and redzones come on top: TSan's shadow is
	 * several times the memory it covers. */
#if defined(__SANITIZE_THREAD__)
	const long most = 40 << 10;
#elif defined(__SANITIZE_ADDRESS__)
	const long most = 16 << 10;
#else
	const long most = 12 << 10;
#endif
	for (int i = 0; r0 > 0 && i < 50; i++) {
		t_sleep_ms(100);
		long r = t_proc_rss_kib(f);
		hi = r > hi ? r : hi;
	}
	kill(n.pid, SIGCONT);
	if (rp <= 0 || r0 <= 0 || r0 - rp > most)
		fprintf(stderr, "  RSS %ld KiB at the pause, %ld KiB settled\n",
		        rp, r0);
	CHECK(rp > 0 && r0 > 0);
	CHECK(r0 - rp <= most);
	if (hi - r0 > 4096)
		fprintf(stderr, "  RSS %ld -> %ld KiB while paused\n", r0, hi);
	CHECK(hi - r0 <= 4096);
	CHECK_EQ(t_wait(f, 90, NULL), 0);
	CHECK_EQ(collect_compare(&n, "src", "h", 1), 300000);
	teardown(&n);
}

/* A server stopped while the forwarder writes a message to it: the
 * message (a batch of about 1 MiB, larger than libnats's buffer) is
 * written from its own bytes while the full socket holds the write up,
 * past --ack-wait-ms, so libnats's timer reports it timed out during the
 * write.  Freed by the ack handler then, its bytes would go from freed
 * memory (MALLOC_PERTURB_ fills it: the collector then finds damaged
 * frames and records go missing; a sanitizer build stops at the use).
 * Every record must arrive intact and the forwarder exit 0. */
TEST(message_timed_out_while_still_being_written_arrives_intact)
{
	t_nats n;
	struct wopts w = {.shards = 1, .payload = 2000};

	setup();
	write_log(path("src"), 20000, &w); /* 40 MB: more than sockets hold */
	server(&n, NULL);
	setenv("MALLOC_PERTURB_", "165", 1);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", n.url,
	                     "--host", "h", "--once", "--ack-wait-ms", "300",
	                     "--max-inflight-bytes", "64M", path("src"),
	                     (const char *)NULL);
	unsetenv("MALLOC_PERTURB_");
	stop_once_shipping(&n);
	t_sleep_ms(1500); /* the outage: five ack waits */
	kill(n.pid, SIGCONT);
	int rc = t_wait(f, 90, NULL);
	if (rc != 0)
		say_file("forward", path("fwd.err"));
	CHECK_EQ(rc, 0);
	CHECK_EQ(collect_compare(&n, "src", "h", 1), 20000);
	teardown(&n);
}

TEST(forwarder_killed_ten_times_during_a_million_records)
{
	t_nats n;
	struct wopts w = {.shards = 2, .payload = 100};
	unsigned seed = (unsigned)getpid();

	setup();
	write_log(path("src"), 1000000, &w);
	server(&n, NULL);
	for (int i = 0; i < 10; i++) {
		char err[32];
		snprintf(err, sizeof err, "fwd.%d.err", i);
		pid_t f = start_tool(path(err), "forward", "--nats",
		                     n.url, "--host", "h", "--max-batch-bytes",
		                     "64K", "--max-record-bytes", "4K", path("src"), (const char *)NULL);
		t_sleep_ms(80 + (int)(rand_r(&seed) % 150));
		kill(f, SIGKILL);
		CHECK_EQ(t_wait(f, 10, NULL), 128 + SIGKILL);
	}
	CHECK_EQ(TOOL(120, path("fwd.err"), "forward", "--nats", n.url,
	              "--host", "h", "--once", "--max-batch-bytes", "64K",
	              "--max-record-bytes", "4K", path("src")), 0);
	long got = collect_compare(&n, "src", "h", 2);
	if (got != 1000000) {
		/* what each run said: the account of where a range went */
		for (int i = 0; i < 10; i++) {
			char err[32];
			snprintf(err, sizeof err, "fwd.%d.err", i);
			say_file("killed forwarder", path(err));
		}
		say_file("last forwarder", path("fwd.err"));
		say_file("collector", path("col.err"));
	}
	CHECK_EQ(got, 1000000);
	teardown(&n);
}

/* A fresh server, and 20,000 records of one shard shipped to it as host
 * h in 32 KiB messages.  @return the stream's messages. */
/* Records n0 .. n1 - 1 into dir (opened again each time): deferred
 * records of four call sites, one with typed fields, between plain
 * ones, on two shards, in small segments. */
static void write_deferred(const char *dir, long n0, long n1)
{
	le_config c;
	le_engine *e;
	char p[64];

	le_config_init(&c);
	c.dir = dir;
	c.create_dir = 1;
	c.shards = 2;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.segment_bytes = 65536;
	CHECK_RC(le_open(&e, &c));
	le_logger *net = le_logger_get(e, "net");
	CHECK(net != NULL);
	for (long i = n0; i < n1; i++) {
		switch (i % 5) {
		case 0:
			le_info(e, "request %ld took %.3f ms from %s", i,
			        (double)i / 7.0, i % 2 ? "10.0.0.1" : "10.0.0.2");
			break;
		case 1:
			le_warn(net, "retry %d of %ld: %-8s|%5x", (int)(i % 9), i,
			        "conn", (unsigned)i);
			break;
		case 2:
			le_info_kv(e, LE_FIELDS(LE_I64("user", i),
			                        LE_STR("path", "/a/b")),
			           "user %ld at %s", i, "/a/b");
			break;
		case 3:
			le_error(e, "disk %s at %d%%", i % 3 ? "sda" : "sdb",
			         (int)(i % 100));
			break;
		default: {
			int k = snprintf(p, sizeof p, "plain record %ld", i);
			CHECK_RC(le_write(e, (uint64_t)i, LE_INFO, p, (size_t)k));
		}
		}
	}
	CHECK_RC(le_close(e));
}

/* Deferred frames name their call site's descriptor by an offset in
 * their own segment; shipped in small messages and stored in a
 * collector's smaller segments, each must still read back to its text:
 * the origin's text, record for record (compare() checks payloads).
 * The second round starts both tools again mid-segment, with nothing
 * remembered of the descriptors they passed. */
TEST(deferred_records_read_back_the_same_text_after_forward_and_collect)
{
	t_nats n;

	setup();
	server(&n, NULL);
	write_deferred(path("src"), 0, 20000);
	for (int round = 0; round < 2; round++) {
		if (round)
			write_deferred(path("src"), 20000, 30000);
		int rc = TOOL(120, path("fwd.err"), "forward", "--nats", n.url,
		              "--host", "d-1", "--once", "--max-batch-bytes",
		              "3000", "--max-record-bytes", "1000",
		              path("src"));
		if (rc)
			say_file("forward", path("fwd.err"));
		CHECK_EQ(rc, 0);
		rc = TOOL(120, path("col.err"), "collect", "--nats", n.url,
		          "--once", "--segment-bytes", "20000", path("dst"));
		if (rc)
			say_file("collect", path("col.err"));
		CHECK_EQ(rc, 0);
		CHECK_EQ(compare(path("src"), path("dst"), "d-1", 2),
		         round ? 30000 : 20000);
	}
	/* and verify, which decodes every deferred frame, finds nothing */
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "'%s' verify '%s' >'%s' 2>&1", cli(),
	         path("dst"), path("verify.out"));
	int rc = system(cmd);
	if (rc)
		say_file("verify", path("verify.out"));
	CHECK_EQ(rc, 0);
	teardown(&n);
}

/* Call sites made at run time, as the level macros make them at compile
 * time: site i logs "site %d" from a file whose name is about 1,000
 * bytes (descriptors of 1,026 bytes, distinct per site). */
#define BIG_SITES 200
static le__dsite big_site[BIG_SITES];
static char big_file[BIG_SITES][1024];

static void big_sites_init(void)
{
	for (int i = 0; i < BIG_SITES; i++) {
		memset(big_file[i], 'd', 1000);
		int k = snprintf(big_file[i] + 1000, 24, "/f%03d.c", i);
		big_site[i] = (le__dsite){
			.site = {big_file[i], "t", (uint32_t)(1000 + k), 1,
			         i + 1, LE_INFO},
			.nk = 1, .kinds = {0, LE_K_I32}};
	}
}

/* A plain record of exactly `frame` bytes stored (every field on). */
static void plain_frame(le_engine *e, uint64_t key, size_t frame)
{
	static char p[1 << 19];
	size_t len = frame - 28;
	CHECK(len <= sizeof p);
	memset(p, 'p', len);
	CHECK_RC(le_write(e, key, LE_INFO, p, len));
}

/* The forwarder rebuilds a batch whose frames grow as each call site's
 * first frame takes its descriptor; a batch of 200 small frames naming
 * descriptors of an earlier batch (each growing by 1,026 bytes) and then
 * a large plain record must still go whole and read back the same, the
 * grown frames past the batch going in the next message. */
TEST(batch_grown_by_many_descriptors_before_a_large_record_ships_intact)
{
	t_nats n;
	le_config c;
	le_engine *e;
	const size_t batch = 262144, carrier = 28 + 4 + 1026 + 4;

	setup();
	big_sites_init();
	le_config_init(&c);
	c.dir = path("src");
	c.create_dir = 1;
	c.shards = 1;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.queue_capacity_bytes = 8u << 20;
	c.max_record_bytes = 300000;
	CHECK_RC(le_open(&e, &c));
	/* message 1: the 200 descriptors, and a plain record that leaves
	 * less room than one more frame takes (36 bytes) */
	for (int i = 0; i < BIG_SITES; i++)
		CHECK_RC(le_logd_at(LE__HEAD(e), &big_site[i], "site %d", i));
	plain_frame(e, 0, batch - BIG_SITES * carrier - 10);
	/* message 2 as read: 200 frames naming those descriptors (7,200
	 * bytes, 212,400 once they carry them) and 200,000 plain bytes */
	for (int i = 0; i < BIG_SITES; i++)
		CHECK_RC(le_logd_at(LE__HEAD(e), &big_site[i], "site %d",
		                    1000 + i));
	plain_frame(e, 0, 200000);
	for (int i = 0; i < BIG_SITES; i++)
		CHECK_RC(le_logd_at(LE__HEAD(e), &big_site[i], "site %d",
		                    2000 + i));
	CHECK_RC(le_close(e));
	server(&n, NULL);
	int rc = TOOL(120, path("fwd.err"), "forward", "--nats", n.url,
	              "--host", "g", "--once", "--max-batch-bytes", "262144",
	              "--max-record-bytes", "250000", path("src"));
	if (rc)
		say_file("forward", path("fwd.err"));
	CHECK_EQ(rc, 0);
	collect_once(n.url, path("dst"));
	CHECK_EQ(compare(path("src"), path("dst"), "g", 1),
	         3 * BIG_SITES + 2);
	teardown(&n);
}

/* A record whose frame fits a message only without its descriptor goes
 * without it (undecodable at the collector, as docs/INTERFACES.md says);
 * the next record of its call site in the same message must still carry
 * the descriptor, not name the frame that went without. */
TEST(record_after_one_that_outgrew_its_message_keeps_its_text)
{
	t_nats n;
	le_config c;
	le_engine *e;
	le_record r;
	static char file[1024], big[65400 + 1];
	static le__dsite site;

	setup();
	memset(file, 'e', 1000);
	memcpy(file + 1000, "/s.c", 5);
	site = (le__dsite){.site = {file, "t", 1004, 1, 7, LE_INFO}, .nk = 1,
	                   .kinds = {0, LE_K_STR}};
	memset(big, 'x', sizeof big - 1);
	le_config_init(&c);
	c.dir = path("src");
	c.create_dir = 1;
	c.shards = 1;
	c.overflow = LE_OVERFLOW_BLOCK;
	c.max_record_bytes = 100000;
	CHECK_RC(le_open(&e, &c));
	/* 1 carries the descriptor (1,020 bytes); 2 names it, a frame of
	 * 65,436 bytes: 66,456 with it, past a 65,536-byte message; 3
	 * names it too, and fits the message after 2 */
	CHECK_RC(le_logd_at(LE__HEAD(e), &site, "v %s", "a"));
	CHECK_RC(le_logd_at(LE__HEAD(e), &site, "v %s", big));
	CHECK_RC(le_logd_at(LE__HEAD(e), &site, "v %s", "b"));
	CHECK_RC(le_close(e));
	server(&n, NULL);
	int rc = TOOL(120, path("fwd.err"), "forward", "--nats", n.url,
	              "--host", "o", "--once", "--max-batch-bytes", "65536",
	              "--max-record-bytes", "60000", path("src"));
	if (rc)
		say_file("forward", path("fwd.err"));
	CHECK_EQ(rc, 0);
	collect_once(n.url, path("dst"));
	le_reader *x = reader(path("dst"), origin_dir(path("dst"), "o", 0));
	CHECK_EQ(le_reader_next(x, &r), 1);
	CHECK(r.len == 3 && !memcmp(r.payload, "v a", 3));
	CHECK_EQ(le_reader_next(x, &r), 1);
	CHECK_EQ(r.origin_seq, 2);
	CHECK(r.len > 13 && !memcmp(r.payload, "[undecodable ", 13));
	CHECK_EQ(le_reader_next(x, &r), 1);
	CHECK_EQ(r.origin_seq, 3);
	if (r.len != 3 || memcmp(r.payload, "v b", 3))
		fprintf(stderr, "  record 3: %.*s\n", (int)r.len,
		        (const char *)r.payload);
	CHECK(r.len == 3 && !memcmp(r.payload, "v b", 3));
	CHECK_EQ(le_reader_next(x, &r), 0);
	le_reader_close(x);
	teardown(&n);
}

static long ship_20000(t_nats *n)
{
	struct wopts w = {.shards = 1, .payload = 100};

	setup();
	write_log(path("src"), 20000, &w);
	server(n, NULL);
	CHECK_EQ(TOOL(60, path("fwd.err"), "forward", "--nats", n->url, "--host",
	              "h", "--once", "--max-batch-bytes", "32K",
	              "--max-record-bytes", "4K", path("src")), 0);
	return t_stream_msgs(n->url, "LOGS");
}

/* A cursor that lagged behind what was shipped (a crash before its
 * write), and a restart with other batch limits: the messages already in
 * the stream are recognised by their ids, their ranges read back, and
 * nothing is stored in the stream twice. */
TEST(restart_behind_its_cursor_with_other_batches_stores_nothing_twice)
{
	t_nats n;
	char sdir[600];

	long msgs = ship_20000(&n);
	CHECK(msgs > 50);
	snprintf(sdir, sizeof sdir, "%s/shard-000/FORWARD", path("src"));
	int fd = open(sdir, O_RDWR);
	CHECK(fd >= 0);
	le__fwd_cursor c = {.gen = 1000, .next_seq = 1, .shard = 0};
	CHECK_RC(le__fwd_write(fd, &c)); /* back to the start */
	close(fd);
	forward_once(&n, path("src"), "h"); /* default batches: larger */
	CHECK_EQ(t_stream_msgs(n.url, "LOGS"), msgs);
	CHECK_EQ(collect_compare(&n, "src", "h", 1), 20000);
	teardown(&n);
}

/* The stream's first message held elsewhere (delivered, its ack timer
 * kept running past the collector's whole --gap-wait-ms): the collector
 * sees the later messages first and must wait for it, not store a
 * "missing" marker for records that are in the stream.  fetch: the
 * collector's --fetch-bytes, which bounds what it holds (past it, a
 * message is nakked and comes back later). */
static void wait_for_one_pending_elsewhere(const char *fetch)
{
	t_nats n;
	natsConnection *nc;
	jsCtx *js;
	natsSubscription *sub = NULL;
	natsMsgList list = {0};
	jsSubOptions so;
	const char *subj = "logs.>";

	CHECK(ship_20000(&n) > 40);
	/* the collector's consumer, as it makes it (--ack-wait-ms 1000) */
	CHECK_EQ(natsConnection_ConnectTo(&nc, n.url), NATS_OK);
	CHECK_EQ(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
	jsSubOptions_Init(&so);
	so.Stream = "LOGS";
	so.Config.AckPolicy = js_AckExplicit;
	so.Config.AckWait = 1000 * 1000000LL;
	so.Config.MaxAckPending = 20000;
	CHECK_EQ(js_PullSubscribe(&sub, js, subj, "logengine-collect", NULL,
	                          &so, NULL), NATS_OK);
	CHECK_EQ(natsSubscription_Fetch(&list, sub, 1, 5000, NULL), NATS_OK);
	CHECK_EQ(list.Count, 1);
	pid_t c = start_tool(path("col.err"), "collect", "--nats", n.url,
	                     "--once", "--ack-wait-ms", "1000", "--gap-wait-ms",
	                     "2000", "--fetch-bytes", fetch, "--verbose",
	                     path("dst"), (const char *)NULL);
	for (int i = 0; i < 10; i++) { /* 4 s: twice the gap wait */
		t_sleep_ms(400);
		CHECK_EQ(natsMsg_InProgress(list.Msgs[0], NULL), NATS_OK);
	}
	CHECK_EQ(natsMsg_Nak(list.Msgs[0], NULL), NATS_OK); /* back now */
	natsConnection_Flush(nc);
	int rc = t_wait(c, 120, NULL);
	char *err = slurp(path("col.err"));
	if (rc != 0 || strstr(err, "missing from the stream after"))
		fprintf(stderr, "  collector: %s\n", err);
	CHECK_EQ(rc, 0);
	CHECK(!strstr(err, "missing from the stream after"));
	CHECK(strstr(err, " 0 missing from the stream"));
	const char *hb = strstr(err, " held back");
	long held = 0;
	while (hb && hb > err && hb[-1] >= '0' && hb[-1] <= '9')
		hb--;
	CHECK(hb && sscanf(hb, "%ld held back", &held) == 1 && held > 0);
	free(err);
	CHECK_EQ(compare(path("src"), path("dst"), "h", 1), 20000);
	natsMsgList_Destroy(&list);
	natsSubscription_Destroy(sub);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	teardown(&n);
}

TEST(collector_waits_for_an_earlier_message_still_pending_past_the_gap_wait)
{
	wait_for_one_pending_elsewhere("16M"); /* everything after it held */
}

TEST(collector_holding_only_a_few_messages_still_waits_for_the_earlier_one)
{
	wait_for_one_pending_elsewhere("256K"); /* most nakked, sent again */
}

TEST(collector_killed_ten_times_stores_everything_once)
{
	t_nats n;
	struct wopts w = {.shards = 2, .payload = 100};
	unsigned seed = (unsigned)getpid();

	setup();
	write_log(path("src"), 300000, &w);
	server(&n, NULL);
	CHECK_EQ(TOOL(60, path("fwd.err"), "forward", "--nats", n.url, "--host",
	              "h", "--once", "--max-batch-bytes", "32K", "--max-record-bytes", "4K",
	              path("src")),
	         0);
	for (int i = 0; i < 10; i++) {
		pid_t c = start_tool(path("col.err"), "collect", "--nats", n.url,
		                     "--ack-wait-ms", "2000", path("dst"),
		                     (const char *)NULL);
		t_sleep_ms(100 + (int)(rand_r(&seed) % 200));
		kill(c, SIGKILL);
		CHECK_EQ(t_wait(c, 10, NULL), 128 + SIGKILL);
	}
	CHECK_EQ(collect_compare(&n, "src", "h", 2), 300000);
	teardown(&n);
}

static void js_open(const t_nats *n, natsConnection **nc, jsCtx **js)
{
	CHECK_EQ(natsConnection_ConnectTo(nc, n->url), NATS_OK);
	CHECK_EQ(natsConnection_JetStream(js, *nc, NULL), NATS_OK);
}

static void js_close(natsConnection *nc, jsCtx *js)
{
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
}

/* Stream `name` taking `subject`, created as a test's own fixture. */
static void add_stream(jsCtx *js, const char *name, const char *subject)
{
	jsStreamConfig sc;
	const char *subj[] = {subject};

	jsStreamConfig_Init(&sc);
	sc.Name = name;
	sc.Subjects = subj;
	sc.SubjectsLen = 1;
	CHECK_EQ(js_AddStream(NULL, js, &sc, NULL, NULL), NATS_OK);
}

/* Messages in stream `name` now. */
static uint64_t stream_msgs(jsCtx *js, const char *name)
{
	jsStreamInfo *si = NULL;
	uint64_t n;

	CHECK_EQ(js_GetStreamInfo(&si, js, name, NULL, NULL), NATS_OK);
	n = si->State.Msgs;
	jsStreamInfo_Destroy(si);
	return n;
}

/* Lines of file p holding `what`. */
static int count_lines(const char *p, const char *what)
{
	char *b = slurp(p), *l = b;
	int k = 0;

	for (char *nl; l && *l; l = nl ? nl + 1 : NULL) {
		if ((nl = strchr(l, '\n')) != NULL)
			*nl = '\0';
		k += strstr(l, what) != NULL;
	}
	free(b);
	return k;
}

TEST(collector_rejects_a_message_with_one_bad_frame_whole)
{
	t_nats n;
	natsConnection *nc;
	jsCtx *js;
	unsigned char b[1024];
	size_t len = 0;
	char pl[16];

	setup();
	server(&n, NULL);
	js_open(&n, &nc, &js);
	add_stream(js, "LOGS", "logs.>");
	for (int i = 0; i < 3; i++) {
		int k = snprintf(pl, sizeof pl, "rec %d", i);
		len += le__frame_encode(b + len, LE_FIELD_ALL, 0, LE_INFO, 0,
		                        (uint64_t)i + 1, 1000u + (unsigned)i, pl,
		                        (uint32_t)k);
	}
	for (int bad = 1; bad >= 0; bad--) {
		natsMsg *m;
		b[len - 1] ^= (unsigned char)bad; /* the third frame's payload */
		CHECK_EQ(natsMsg_Create(&m, "logs.x.0", NULL, (const char *)b,
		                        (int)len), NATS_OK);
		natsMsgHeader_Set(m, "Nats-Msg-Id", bad ? "x/0/1-bad" : "x/0/1");
		natsMsgHeader_Set(m, "Le-Format", "1");
		natsMsgHeader_Set(m, "Le-Host", "x");
		natsMsgHeader_Set(m, "Le-Shard", "0");
		natsMsgHeader_Set(m, "Le-Seq", "1-3");
		natsMsgHeader_Set(m, "Le-Fields", "31");
		CHECK_EQ(js_PublishMsg(NULL, js, m, NULL, NULL), NATS_OK);
		natsMsg_Destroy(m);
		b[len - 1] ^= (unsigned char)bad;
	}
	js_close(nc, js);
	collect_once(n.url, path("dst"));
	char *err = slurp(path("col.err"));
	CHECK(strstr(err, "message 1 rejected"));
	CHECK(strstr(err, "host x shard 0 records 1-3"));
	CHECK(strstr(err, "checksum mismatch"));
	le_record r;
	le_reader *x = reader(path("dst"), -1);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(le_reader_next(x, &r), 1);
		CHECK_EQ(r.origin_seq, (uint64_t)i + 1);
		snprintf(pl, sizeof pl, "rec %d", i);
		CHECK(r.len == strlen(pl) && !memcmp(r.payload, pl, r.len));
	}
	CHECK_EQ(le_reader_next(x, &r), 0);
	le_reader_close(x);
	teardown(&n);
}

/* ---- publishers the collector cannot trust ---- */

/* A publisher allowed on the real host's subjects republishes one of
 * its stored messages 300 times, each with another Le-Host: half on the
 * real subject, half on logs.real.fake-N.0 (which a permission on
 * logs.real.> allows).  Each copy is refused, copied to the dead-letter
 * stream with its reason and dropped, and the real host's records,
 * before and after, are all stored. */
TEST(forged_origins_are_dead_lettered_and_every_real_record_stored)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	natsConnection *nc;
	jsCtx *js;
	natsMsg *real = NULL, *dead = NULL;
	const char **keys = NULL, *why = NULL;
	int nkeys = 0;

	setup();
	server(&n, NULL);
	write_log(path("src"), 2000, &w);
	forward_once(&n, path("src"), "real");
	js_open(&n, &nc, &js);
	CHECK_EQ(js_GetMsg(&real, js, "LOGS", 1, NULL, NULL), NATS_OK);
	CHECK_EQ(natsMsgHeader_Keys(real, &keys, &nkeys), NATS_OK);
	for (int i = 0; i < 300; i++) {
		natsMsg *m;
		char v[32], subj[64];
		snprintf(subj, sizeof subj, "logs.real.fake-%d.0", i);
		CHECK_EQ(natsMsg_Create(&m, i % 2 ? subj
		                                  : natsMsg_GetSubject(real), NULL,
		                        natsMsg_GetData(real),
		                        natsMsg_GetDataLength(real)), NATS_OK);
		for (int k = 0; k < nkeys; k++) {
			const char *hv = NULL;
			natsMsgHeader_Get(real, keys[k], &hv);
			natsMsgHeader_Set(m, keys[k], hv);
		}
		snprintf(v, sizeof v, "fake-%d", i);
		natsMsgHeader_Set(m, "Le-Host", v);
		natsMsgHeader_Set(m, "Nats-Msg-Id", v);
		CHECK_EQ(js_PublishMsg(NULL, js, m, NULL, NULL), NATS_OK);
		natsMsg_Destroy(m);
	}
	free((void *)keys);
	write_log(path("src"), 1000, &w); /* real traffic after them */
	forward_once(&n, path("src"), "real");
	CHECK_EQ(collect_compare(&n, "src", "real", 1), 3000);
	CHECK_EQ(count_lines(path("col.err"), "claim another origin than the "
	                     "subject's (host real shard 0)"), 150);
	CHECK_EQ(count_lines(path("col.err"), "the subject is not "
	                     "PREFIX.HOSTTOKEN.SHARD"), 150);
	CHECK_EQ(origin_dir(path("dst"), "fake-0", 0), -1);
	CHECK_EQ(stream_msgs(js, "LOGS_DEAD"), 300);
	CHECK_EQ(js_GetMsg(&dead, js, "LOGS_DEAD", 1, NULL, NULL), NATS_OK);
	CHECK_STR_EQ(natsMsg_GetSubject(dead), "logs-dead.forged");
	CHECK_EQ(natsMsgHeader_Get(dead, "Le-Dead-Reason", &why), NATS_OK);
	CHECK(strstr(why, "host fake-0 shard 0"));
	CHECK_EQ(natsMsg_GetDataLength(dead), natsMsg_GetDataLength(real));
	natsMsg_Destroy(dead);
	natsMsg_Destroy(real);
	/* Terminated: a second collector run finds nothing to refuse. */
	collect_once(n.url, path("dst"));
	CHECK_EQ(count_lines(path("col.err"), "rejected (subject"), 0);
	CHECK_EQ(stream_msgs(js, "LOGS_DEAD"), 300);
	js_close(nc, js);
	teardown(&n);
}

/* JetStream drops a message whose Nats-Msg-Id it saw in the last two
 * minutes from anybody.  Ids another publisher could guess (the host,
 * shard and first sequence alone) would let it have a host's messages
 * dropped before they are stored. */
TEST(message_ids_published_by_another_host_do_not_suppress_its_messages)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	natsConnection *nc;
	jsCtx *js;

	setup();
	server(&n, NULL);
	write_log(path("src"), 3000, &w);
	js_open(&n, &nc, &js);
	add_stream(js, "LOGS", "logs.>");
	for (int k = 1; k <= 3000; k++) {
		char id[64];
		snprintf(id, sizeof id, "real/0/%d", k);
		natsMsg *m;
		CHECK_EQ(natsMsg_Create(&m, "logs.evil.0", NULL, "x", 1),
		         NATS_OK);
		natsMsgHeader_Set(m, "Nats-Msg-Id", id);
		CHECK_EQ(js_PublishMsg(NULL, js, m, NULL, NULL), NATS_OK);
		natsMsg_Destroy(m);
	}
	CHECK_EQ(TOOL(120, path("fwd.err"), "forward", "--nats", n.url, "--host",
	              "real", "--max-record-bytes", "1024", "--max-batch-bytes",
	              "20000", "--once",
	              path("src")), 0);
	CHECK_EQ(collect_compare(&n, "src", "real", 1), 3000);
	CHECK_EQ(count_lines(path("col.err"), "header Le-Format missing"), 3000);
	js_close(nc, js);
	teardown(&n);
}

/* The same with the ids a host may read from the stream (the documented
 * permissions let it: "Shipping across hosts"): the key in them is no
 * secret then.  Another publisher sends, on its own subject, every id the
 * host may use next, each claiming records up to 2^62; the forwarder
 * finds the message the server had under its id is not its own and
 * sends the records again under ids drawn at random, so none is lost
 * and its cursor does not jump. */
TEST(message_ids_read_from_the_stream_do_not_let_another_host_erase_records)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	natsConnection *nc;
	jsCtx *js;
	natsMsg *mine = NULL;
	const char *id = NULL;
	char key[64];

	setup();
	server(&n, NULL);
	write_log(path("src"), 100, &w);
	forward_once(&n, path("src"), "b");
	js_open(&n, &nc, &js);
	CHECK_EQ(js_GetMsg(&mine, js, "LOGS", 1, NULL, NULL), NATS_OK);
	CHECK_EQ(natsMsgHeader_Get(mine, "Nats-Msg-Id", &id), NATS_OK);
	CHECK(sscanf(id, "b/0/1/%63s", key) == 1);
	for (int k = 101; k <= 300; k++) {
		char v[128];
		natsMsg *m;
		CHECK_EQ(natsMsg_Create(&m, "logs.evil.0", NULL, "x", 1),
		         NATS_OK);
		snprintf(v, sizeof v, "b/0/%d/%s", k, key);
		natsMsgHeader_Set(m, "Nats-Msg-Id", v);
		snprintf(v, sizeof v, "%d-4611686018427387904", k);
		natsMsgHeader_Set(m, "Le-Seq", v);
		natsMsgHeader_Set(m, "Le-Host", "b");
		natsMsgHeader_Set(m, "Le-Shard", "0");
		CHECK_EQ(js_PublishMsg(NULL, js, m, NULL, NULL), NATS_OK);
		natsMsg_Destroy(m);
	}
	natsMsg_Destroy(mine);
	js_close(nc, js);
	write_log(path("src"), 200, &w); /* records 101..300 */
	forward_once(&n, path("src"), "b");
	char *err = slurp(path("fwd.err"));
	forward_once(&n, path("src"), "b"); /* nothing left, cursor sound */
	CHECK_EQ(collect_compare(&n, "src", "b", 1), 300);
	CHECK(strstr(err, "another publisher's message"));
	free(err);
	teardown(&n);
}

/* ---- gap claims ---- */

/* Publish a gap message for host's shard 0 (headers NULL: left out). */
static void publish_gap(const t_nats *n, const char *host, const char *seq,
                        const char *gap, const char *ts, const char *id)
{
	natsConnection *nc;
	jsCtx *js;
	natsMsg *m;
	jsStreamConfig sc;
	const char *subj[] = {"logs.>"};
	char subject[300];

	js_open(n, &nc, &js);
	jsStreamConfig_Init(&sc);
	sc.Name = "LOGS";
	sc.Subjects = subj;
	sc.SubjectsLen = 1;
	js_AddStream(NULL, js, &sc, NULL, NULL); /* made now, or there */
	snprintf(subject, sizeof subject, "logs.%s.0", host);
	CHECK_EQ(natsMsg_Create(&m, subject, NULL, NULL, 0), NATS_OK);
	natsMsgHeader_Set(m, "Nats-Msg-Id", id);
	natsMsgHeader_Set(m, "Le-Format", "1");
	natsMsgHeader_Set(m, "Le-Host", host);
	natsMsgHeader_Set(m, "Le-Shard", "0");
	natsMsgHeader_Set(m, "Le-Seq", seq);
	natsMsgHeader_Set(m, "Le-Fields", "31");
	natsMsgHeader_Set(m, "Le-Gap", gap);
	if (ts)
		natsMsgHeader_Set(m, "Le-Ts", ts);
	CHECK_EQ(js_PublishMsg(NULL, js, m, NULL, NULL), NATS_OK);
	natsMsg_Destroy(m);
	js_close(nc, js);
}

/* Every record of src's shard 0 (records 1..n) is in dst once, as the
 * origin's record seq, with its time and bytes: in the chain or among
 * the late records.  @return the markers dst holds besides. */
static long each_once(const char *src, const char *dst, const char *host,
                      long n)
{
	struct want {
		uint64_t ts;
		uint32_t crc;
		int seen;
	} *w = calloc((size_t)n + 1, sizeof *w);
	le_record r;
	long marks = 0, missing = 0;
	int rc;

	le_reader *x = reader(src, 0);
	while ((rc = le_reader_next(x, &r)) == 1) {
		CHECK(r.seq >= 1 && r.seq <= (uint64_t)n);
		w[r.seq].ts = r.ts_ns;
		w[r.seq].crc = le__crc32c_extend(0, r.payload, r.len);
	}
	CHECK_EQ(rc, 0);
	le_reader_close(x);
	x = reader(dst, -1);
	while ((rc = le_reader_next(x, &r)) == 1) {
		if (r.flags & LE_REC_MARKER) {
			marks++;
			continue;
		}
		CHECK(!strcmp(r.host, host) && r.origin_shard == 0);
		CHECK(r.origin_seq >= 1 && r.origin_seq <= (uint64_t)n);
		struct want *e = &w[r.origin_seq];
		CHECK_EQ(e->seen++, 0);
		CHECK_EQ(r.ts_ns, e->ts);
		CHECK_EQ(le__crc32c_extend(0, r.payload, r.len), e->crc);
	}
	CHECK_EQ(rc, 0);
	le_reader_close(x);
	for (long i = 1; i <= n; i++)
		missing += !w[i].seen;
	if (missing)
		fprintf(stderr, "  %ld of %ld records missing from %s\n",
		        missing, n, dst);
	CHECK_EQ(missing, 0);
	free(w);
	return marks;
}

/* `logengine cat DIR` (default mode): exit 0, nothing on stderr.
 * @return the lines it printed. */
static long cat_lines(const char *dir, const char *must_show)
{
	char cmd[1400];
	snprintf(cmd, sizeof cmd, "'%s' cat '%s' > '%s' 2> '%s'", cli(), dir,
	         path("cat.out"), path("cat.err"));
	int rc = system(cmd);
	char *out = slurp(path("cat.out")), *err = slurp(path("cat.err"));
	long lines = 0;
	for (char *p = out; *p; p++)
		lines += *p == '\n';
	if (rc != 0 || *err)
		fprintf(stderr, "  cat: exit %d after %ld lines: %s", rc, lines,
		        err);
	CHECK_EQ(rc, 0);
	CHECK_STR_EQ(err, "");
	CHECK(strstr(out, must_show));
	free(out);
	free(err);
	return lines;
}

static void collect_durable(const char *url, const char *dst,
                            const char *durable)
{
	int rc = TOOL(120, path("col.err"), "collect", "--nats", url, "--once",
	              "--verbose", "--durable", durable, "--ack-wait-ms",
	              "2000", "--gap-wait-ms", "10000", dst);
	if (rc != 0)
		fprintf(stderr, "  collect: exit %d: %s", rc,
		        slurp(path("col.err")));
	CHECK_EQ(rc, 0);
}

TEST(forged_gap_inside_a_real_range_erases_no_record)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	char ts[32];

	setup();
	write_log(path("src"), 1000, &w);
	server(&n, NULL);
	forward_once(&n, path("src"), "web-1");
	/* In the stream between 1..1000 and 1001..2000: a claim that
	 * 1001..1010 were lost. */
	snprintf(ts, sizeof ts, "%" PRIu64, le__now_ns());
	publish_gap(&n, "web-1", "1001-1010", "10", ts, "forged/1001");
	write_log(path("src"), 1000, &w);
	forward_once(&n, path("src"), "web-1");
	collect_durable(n.url, path("dst"), "c1");
	CHECK_EQ(each_once(path("src"), path("dst"), "web-1", 2000), 1);
	CHECK_EQ(cat_lines(path("dst"), "10 records lost before shipping"),
	         2001);
	char *err = slurp(path("col.err"));
	CHECK(strstr(err, "host web-1 shard 0: records 1001-1010 came after a "
	                  "marker said they were lost: 10 stored (gap claim "
	                  "contradicted)"));
	CHECK(strstr(err, " 10 records came inside a gap claim"));
	free(err);
	/* A restart, then every message of the stream again (a new
	 * consumer): nothing is stored twice. */
	collect_durable(n.url, path("dst"), "c1");
	collect_durable(n.url, path("dst"), "c2");
	err = slurp(path("col.err"));
	CHECK(strstr(err, " 0 records (0 bytes) stored"));
	CHECK(strstr(err, " 0 records came inside a gap claim"));
	free(err);
	CHECK_EQ(each_once(path("src"), path("dst"), "web-1", 2000), 1);
	CHECK_EQ(cat_lines(path("dst"), "10 records lost before shipping"),
	         2001);
	teardown(&n);
}

/* Did the collector's stderr err say it rejected stream message k of
 * subject logs.x.0 for `why`? */
static int refused(const char *err, int k, const char *why)
{
	char line[512];

	snprintf(line, sizeof line, "message %d rejected (subject logs.x.0; "
	         "nothing of it stored): %s", k, why);
	return strstr(err, line) != NULL;
}

TEST(gap_claim_beyond_the_sequence_range_is_refused)
{
	t_nats n;
	char now[32], ahead[32];
	le_record r;

	setup();
	server(&n, NULL);
	snprintf(now, sizeof now, "%" PRIu64, le__now_ns());
	snprintf(ahead, sizeof ahead, "%" PRIu64,
	         le__now_ns() + 2 * LE_GAP_TS_AHEAD_NS);
	/* 2^63 - 1 and 2^62 + 1 records; no time, time 0, a time two
	 * days ahead; then one that is sound. */
	publish_gap(&n, "x", "1-9223372036854775807", "9223372036854775807",
	            now, "x/1");
	publish_gap(&n, "x", "1-4611686018427387905", "4611686018427387905",
	            now, "x/2");
	publish_gap(&n, "x", "1-5", "5", NULL, "x/3");
	publish_gap(&n, "x", "1-5", "5", "0", "x/4");
	publish_gap(&n, "x", "1-5", "5", ahead, "x/5");
	publish_gap(&n, "x", "1-5", "5", now, "x/6");
	collect_once(n.url, path("dst"));
	char *err = slurp(path("col.err"));
	CHECK(refused(err, 1, "header Le-Seq beyond 2^62"));
	CHECK(refused(err, 2, "header Le-Seq beyond 2^62"));
	CHECK(refused(err, 3, "host x shard 0 records 1-5: a gap message "
	              "without a time"));
	CHECK(refused(err, 4, "host x shard 0 records 1-5: a gap message "
	              "without a time"));
	CHECK(refused(err, 5, "host x shard 0 records 1-5: a gap message "
	              "dated more than a day ahead"));
	CHECK(!strstr(err, "message 6 rejected"));
	free(err);
	le_reader *x = reader(path("dst"), -1);
	CHECK_EQ(le_reader_next(x, &r), 1);
	CHECK(r.flags & LE_REC_MARKER);
	CHECK_EQ(r.origin_seq, 5);
	CHECK_EQ(r.ts_ns, strtoull(now, NULL, 10));
	CHECK(r.len == 30 && !memcmp(r.payload, "5 records lost before "
	                                        "shipping", 30));
	CHECK_EQ(le_reader_next(x, &r), 0);
	le_reader_close(x);
	teardown(&n);
}

/* ---- many origins ---- */

/* Publish on js the one-record message (host, shard 0, sequence 1) a
 * forwarder would send. */
static void publish_one(jsCtx *js, const char *host)
{
	unsigned char b[128];
	char id[64], subj[64];
	natsMsg *m;
	uint32_t len = le__frame_encode(b, LE_FIELD_ALL, 0, LE_INFO, 0, 1,
	                                1000, host, (uint32_t)strlen(host));

	snprintf(id, sizeof id, "%s/0/1", host);
	snprintf(subj, sizeof subj, "logs.%s.0", host);
	CHECK_EQ(natsMsg_Create(&m, subj, NULL, (const char *)b, (int)len),
	         NATS_OK);
	natsMsgHeader_Set(m, "Nats-Msg-Id", id);
	natsMsgHeader_Set(m, "Le-Format", "1");
	natsMsgHeader_Set(m, "Le-Host", host);
	natsMsgHeader_Set(m, "Le-Shard", "0");
	natsMsgHeader_Set(m, "Le-Seq", "1-1");
	natsMsgHeader_Set(m, "Le-Fields", "31");
	CHECK_EQ(js_PublishMsg(NULL, js, m, NULL, NULL), NATS_OK);
	natsMsg_Destroy(m);
}

/* The first line of what sh -c cmd prints (newline cut), malloc'ed. */
static char *sh_line(const char *cmd)
{
	char *line = NULL;
	size_t cap = 0;
	FILE *p = popen(cmd, "r");

	CHECK(p != NULL);
	if (getline(&line, &cap, p) < 0) {
		free(line);
		line = strdup("");
	}
	pclose(p);
	line[strcspn(line, "\n")] = '\0';
	return line;
}

/* 300 messages claiming 300 new hosts, between two real hosts' records:
 * each gets its origin (a table of 256 stopped the collector at the
 * 256th, for good), the real hosts' records are all stored, and cat's
 * cursor over the 302 shard directories resumes where it stood. */
TEST(three_hundred_new_origins_are_stored_and_the_collector_goes_on)
{
	enum { FAKES = 300 };
	t_nats n;
	natsConnection *nc;
	jsCtx *js;
	struct wopts w = {.shards = 1};
	char host[32], cmd[1200];

	setup();
	write_log(path("a"), 2000, &w);
	write_log(path("b"), 1000, &w);
	server(&n, NULL);
	forward_once(&n, path("a"), "real-a");
	js_open(&n, &nc, &js);
	for (int i = 0; i < FAKES; i++) {
		snprintf(host, sizeof host, "fake-%d", i);
		publish_one(js, host);
	}
	js_close(nc, js);
	forward_once(&n, path("b"), "real-b");
	CHECK_EQ(collect_compare(&n, "a", "real-a", 1), 2000);
	CHECK_EQ(compare(path("b"), path("dst"), "real-b", 1), 1000);
	CHECK_EQ(origin_dir(path("dst"), "fake-299", 0), 300);
	CHECK_EQ(count_records(path("dst")), 3000 + FAKES);
	/* The cursor after the first 1000 records, then what follows it;
	 * with a soft descriptor limit below the 302 shard directories (cat
	 * raises it to the hard one). */
	struct rlimit rl;
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	snprintf(cmd, sizeof cmd, "%s %s cat --show-cursor -n +1000 %s | "
	         "tail -1", rl.rlim_max >= 1024 ? "ulimit -S -n 128;" : "",
	         cli(), path("dst"));
	char *cur = sh_line(cmd);
	CHECK(!strncmp(cur, "-- cursor: v=1,", 15));
	CHECK(strstr(cur, "/301:"));
	size_t cap = strlen(cur) + 1200;
	char *after = malloc(cap);
	snprintf(after, cap, "%s cat --after-cursor='%s' %s | wc -l", cli(),
	         cur + 11, path("dst"));
	char *left = sh_line(after);
	CHECK_EQ(atol(left), 3000 + FAKES - 1000);
	free(left);
	free(after);
	free(cur);
	teardown(&n);
}

/* A host's credentials allow any shard token; an engine has 256 shards
 * at most, and a claim of more would only use up --max-origins for
 * every other host. */
TEST(shard_above_an_engines_256_is_refused)
{
	t_nats n;
	natsConnection *nc;
	jsCtx *js;
	natsMsg *m;

	setup();
	server(&n, NULL);
	js_open(&n, &nc, &js);
	add_stream(js, "LOGS", "logs.>");
	CHECK_EQ(natsMsg_Create(&m, "logs.x.256", NULL, NULL, 0), NATS_OK);
	natsMsgHeader_Set(m, "Le-Format", "1");
	natsMsgHeader_Set(m, "Le-Host", "x");
	natsMsgHeader_Set(m, "Le-Shard", "256");
	natsMsgHeader_Set(m, "Le-Seq", "1-1");
	natsMsgHeader_Set(m, "Le-Fields", "31");
	natsMsgHeader_Set(m, "Le-Gap", "1");
	natsMsgHeader_Set(m, "Le-Ts", "1764538227123456789");
	CHECK_EQ(js_PublishMsg(NULL, js, m, NULL, NULL), NATS_OK);
	natsMsg_Destroy(m);
	js_close(nc, js);
	collect_once(n.url, path("dst"));
	CHECK_EQ(count_lines(path("col.err"), "header Le-Shard missing or "
	                     "above 255"), 1);
	CHECK_EQ(origin_dir(path("dst"), "x", 256), -1);
	teardown(&n);
}

/* ---- clear errors, nothing lost ---- */

/* DIR still holds its n records, and no cursor moved. */
static void untouched(const char *src, long n)
{
	le__fwd_cursor c;
	char sdir[600];

	CHECK_EQ(count_records(src), n);
	snprintf(sdir, sizeof sdir, "%s/shard-000", src);
	if (le__fwd_read(sdir, &c) == 0)
		CHECK_EQ(c.next_seq, 0);
}

TEST(wrong_url_is_a_clear_error)
{
	struct wopts w = {.shards = 1};

	setup();
	write_log(path("src"), 100, &w);
	CHECK_EQ(TOOL(30, path("err"), "forward", "--nats", "http://127.0.0.1:4222",
	              "--once", path("src")), 2);
	CHECK(strstr(slurp(path("err")), "not a NATS URL"));
	CHECK_EQ(TOOL(30, path("err"), "forward", "--nats",
	              "nats://u:secret@no-such-host.invalid:4222", "--once",
	              path("src")),
	         2);
	CHECK(strstr(slurp(path("err")), "cannot resolve host "
	                                 "'no-such-host.invalid'"));
	CHECK(!strstr(slurp(path("err")), "secret"));
	CHECK_EQ(TOOL(30, path("err"), "collect", "--nats", "nats://:x",
	              "--once", path("dst")), 2);
	untouched(path("src"), 100);
	t_rmrf(base);
}

/* ship_parse, for both commands: each kind of bad command line exits 2
 * with a message naming what was wrong, before any connection is tried;
 * "--name=VALUE" is taken as "--name VALUE" is. */
TEST(bad_command_lines_exit_2_naming_what_is_wrong)
{
	static const struct {
		const char *a1, *a2, *a3, *says;
	} bad[] = {
		{"--bogus", "D", NULL, "unknown option '--bogus'"},
		{"--once=1", "D", NULL, "unknown option '--once=1'"},
		{"D", "--subject", NULL, "option --subject needs a value"},
		{"D", "E", NULL, "unexpected argument 'E'"},
		{"--once", NULL, NULL, "missing DIR"},
		{"--ack-wait-ms", "12Q", "D", "--ack-wait-ms: '12Q' is not a "
		                              "byte count"},
		{"--ack-wait-ms=-1", "D", NULL, "'-1' is not a byte count"},
	};
	static const char *cmds[] = {"forward", "collect"};

	setup();
	for (size_t c = 0; c < 2; c++)
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			int rc = TOOL(30, path("err"), cmds[c], bad[i].a1,
			              bad[i].a2, bad[i].a3);
			char *err = slurp(path("err"));
			if (rc != 2 || !strstr(err, bad[i].says)) {
				fprintf(stderr, "  %s %s %s: exit %d, %s", cmds[c],
				        bad[i].a1, bad[i].a2 ? bad[i].a2 : "",
				        rc, err);
				CHECK(0);
			}
			free(err);
		}
	/* the same value after '=' passes the parser: the URL is next */
	CHECK_EQ(TOOL(30, path("err"), "forward", "--ack-wait-ms=12K",
	              "--nats=http://127.0.0.1:4222", "--once", path("src")),
	         2);
	CHECK(strstr(slurp(path("err")), "not a NATS URL"));
	t_rmrf(base);
}

TEST(bad_credentials_are_a_clear_error)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	char url[128];

	setup();
	write_log(path("src"), 100, &w);
	t_nats_init(&n, base); /* started without the JetStream probe,
	                          which has no password */
	CHECK_EQ(t_nats_conf(&n, "authorization { user: shipper, "
	                         "password: right }\n"), 0);
	CHECK_EQ(t_nats_run(&n), 0);
	snprintf(url, sizeof url, "nats://shipper:wrong@127.0.0.1:%d", n.port);
	CHECK_EQ(TOOL(30, path("err"), "forward", "--nats", url, "--once",
	              path("src")), 1);
	char *err = slurp(path("err"));
	if (!strstr(err, "uthorization"))
		fprintf(stderr, "  %s", err);
	CHECK(strstr(err, "uthorization"));
	CHECK(!strstr(err, "wrong")); /* a password is never shown */
	untouched(path("src"), 100);
	CHECK_EQ(TOOL(30, path("err"), "collect", "--nats", url, "--once",
	              path("dst")), 1);
	CHECK(strstr(slurp(path("err")), "uthorization"));
	/* The password from a file (not in argv): wrong, missing, or
	 * without a user. */
	FILE *pw = fopen(path("pw"), "w");
	CHECK(pw && fputs("wrong\n", pw) >= 0 && fclose(pw) == 0);
	CHECK_EQ(TOOL(30, path("err"), "forward", "--nats", n.url, "--user",
	              "shipper", "--password-file", path("pw"), "--once",
	              path("src")), 1);
	CHECK(strstr(slurp(path("err")), "uthorization"));
	CHECK_EQ(TOOL(30, path("err"), "collect", "--nats", n.url, "--user",
	              "shipper", "--password-file", path("none"), "--once",
	              path("dst")), 2);
	CHECK(strstr(slurp(path("err")), "No such file"));
	CHECK_EQ(TOOL(30, path("err"), "collect", "--nats", n.url,
	              "--password-file", path("pw"), "--once", path("dst")), 2);
	CHECK(strstr(slurp(path("err")), "--password-file needs --user"));
	untouched(path("src"), 100);
	teardown(&n);
}

TEST(stream_with_conflicting_settings_is_a_clear_error)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	natsConnection *nc;
	jsCtx *js;
	jsStreamConfig sc;
	const char *subj[] = {"other.>"};

	setup();
	write_log(path("src"), 100, &w);
	server(&n, NULL);
	CHECK_EQ(natsConnection_ConnectTo(&nc, n.url), NATS_OK);
	CHECK_EQ(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
	jsStreamConfig_Init(&sc);
	sc.Name = "LOGS";
	sc.Subjects = subj;
	sc.SubjectsLen = 1;
	CHECK_EQ(js_AddStream(NULL, js, &sc, NULL, NULL), NATS_OK);
	CHECK_EQ(TOOL(30, path("err"), "forward", "--nats", n.url, "--host",
	              "h", "--once", path("src")), 1);
	CHECK(strstr(slurp(path("err")), "stream LOGS does not take subject "
	                                 "logs.h.0 (its subjects: other.>)"));
	/* A stream whose messages are smaller than a batch. */
	const char *subj2[] = {"small.>"};
	sc.Name = "SMALL";
	sc.Subjects = subj2;
	sc.MaxMsgSize = 4096;
	CHECK_EQ(js_AddStream(NULL, js, &sc, NULL, NULL), NATS_OK);
	CHECK_EQ(TOOL(30, path("err"), "forward", "--nats", n.url, "--stream",
	              "SMALL", "--host", "h", "--subject", "small.h", "--once",
	              path("src")),
	         1);
	CHECK(strstr(slurp(path("err")), "stream SMALL takes messages of at "
	                                 "most 4096 bytes"));
	untouched(path("src"), 100);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	teardown(&n);
}

/* In base: a CA (ca.pem) and, signed by it, a server certificate for
 * 127.0.0.1 and localhost (srv.pem, srv.key) and a client certificate
 * (cli.pem, cli.key); another CA (ca2.pem) and a client certificate it
 * signed (cli2.pem, cli2.key). */
static void make_certs(void)
{
	char cmd[3000];
	snprintf(cmd, sizeof cmd,
	         "(cd '%s' && "
	         "for ca in ca ca2; do openssl req -x509 -newkey ec -pkeyopt "
	         "ec_paramgen_curve:prime256v1 -nodes -keyout $ca.key -out "
	         "$ca.pem -days 2 -subj /CN=le-$ca "
	         "|| exit 1; done && "
	         "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > srv.ext "
	         "&& printf 'extendedKeyUsage=clientAuth\\n' > cli.ext && "
	         "for c in srv:ca cli:ca cli2:ca2; do n=${c%%:*} ca=${c#*:} && "
	         "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
	         "-nodes -keyout $n.key -out $n.csr "
	         "-subj /CN=le-$n && openssl x509 -req -in $n.csr -CA $ca.pem "
	         "-CAkey $ca.key -CAcreateserial -out $n.pem -days 2 -extfile "
	         "${n%%2}.ext || exit 1; done) >/dev/null 2>&1", base);
	CHECK_EQ(system(cmd), 0);
}

/* A TLS server with srv.pem; verify: clients must show a certificate
 * that ca.pem signed. */
static void tls_server(t_nats *n, int verify)
{
	char conf[1600];

	snprintf(conf, sizeof conf, "tls { cert_file: \"%s\", key_file: "
	         "\"%s\", ca_file: \"%s\", verify: %s, timeout: 2 }\n",
	         path("srv.pem"), path("srv.key"), path("ca.pem"),
	         verify ? "true" : "false");
	t_nats_init(n, base);
	CHECK_EQ(t_nats_conf(n, conf), 0);
	CHECK_EQ(t_nats_run(n), 0);
}

/* Run the tool (NULL-terminated arguments), which must exit with
 * status `want` within 10 s, the TLS handshake's failure named on
 * stderr by `says`. */
#define TLS_REFUSED(want, says, ...)                                          \
	do {                                                                  \
		double t0_ = t_now();                                         \
		int rc_ = TOOL(30, path("err"), __VA_ARGS__);                 \
		char *e_ = slurp(path("err"));                                \
		if (rc_ != (want) || !strstr(e_, says))                       \
			fprintf(stderr, "  exit %d after %.1f s: %s", rc_,    \
			        t_now() - t0_, e_);                           \
		CHECK_EQ(rc_, want);                                          \
		CHECK(strstr(e_, says));                                      \
		CHECK(t_now() - t0_ < 10);                                    \
		free(e_);                                                     \
	} while (0)

TEST(tls_with_the_servers_ca_ships_and_without_it_is_a_clear_error)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	char url[64];

	setup();
	write_log(path("src"), 3000, &w);
	make_certs();
	tls_server(&n, 0);
	snprintf(url, sizeof url, "tls://127.0.0.1:%d", n.port);
	/* No CA: the system's do not know ours; a CA that did not sign the
	 * server's certificate: the same, for both tools, at once. */
	TLS_REFUSED(1, "SSL handshake error", "forward", "--nats", url,
	            "--host", "h", "--once", path("src"));
	TLS_REFUSED(1, "--tls-ca", "forward", "--nats", url, "--host", "h",
	            "--tls-ca", path("ca2.pem"), "--once", path("src"));
	TLS_REFUSED(1, "SSL handshake error", "collect", "--nats", url,
	            "--tls-ca", path("ca2.pem"), "--once", path("dst"));
	untouched(path("src"), 3000);
	CHECK(strstr(slurp(path("err")), url));
	CHECK_EQ(TOOL(60, path("err"), "forward", "--nats", url, "--host", "h",
	              "--tls-ca", path("ca.pem"), "--once", path("src")), 0);
	CHECK_EQ(TOOL(60, path("err"), "collect", "--nats", url, "--tls-ca",
	              path("ca.pem"), "--once", "--ack-wait-ms", "2000",
	              "--gap-wait-ms", "10000", path("dst")), 0);
	CHECK_EQ(compare(path("src"), path("dst"), "h", 1), 3000);
	teardown(&n);
}

TEST(mutual_tls_without_the_client_certificate_is_a_clear_error_not_a_hang)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	char url[64], local[64];

	setup();
	write_log(path("src"), 2000, &w);
	make_certs();
	tls_server(&n, 1);
	snprintf(url, sizeof url, "tls://127.0.0.1:%d", n.port);
	snprintf(local, sizeof local, "nats://localhost:%d", n.port);
	/* With TLS 1.3 the server refuses the client after the client's
	 * handshake is done: without a certificate, or with one another CA
	 * signed, both tools must say so, not retry a protocol error. */
	TLS_REFUSED(1, "requires a client certificate", "forward", "--nats",
	            url, "--host", "h", "--tls-ca", path("ca.pem"), "--once",
	            path("src"));
	TLS_REFUSED(1, "requires a client certificate", "collect", "--nats",
	            url, "--tls-ca", path("ca.pem"), "--once", path("dst"));
	TLS_REFUSED(1, "TLS: the server refused", "forward", "--nats", url,
	            "--host", "h", "--tls-ca", path("ca.pem"), "--tls-cert",
	            path("cli2.pem"), "--tls-key", path("cli2.key"), "--once",
	            path("src"));
	TLS_REFUSED(2, "--tls-cert and --tls-key go together", "collect",
	            "--nats", url, "--tls-ca", path("ca.pem"), "--tls-cert",
	            path("cli.pem"), "--once", path("dst"));
	untouched(path("src"), 2000);
	/* The certificate: ships; --tls-ca makes a nats:// URL a TLS one, and
	 * the server's certificate holds the name localhost. */
	CHECK_EQ(TOOL(60, path("err"), "forward", "--nats", url, "--host", "h",
	              "--tls-ca", path("ca.pem"), "--tls-cert", path("cli.pem"),
	              "--tls-key", path("cli.key"), "--once", path("src")), 0);
	CHECK_EQ(TOOL(60, path("err"), "collect", "--nats", local, "--tls-ca",
	              path("ca.pem"), "--tls-cert", path("cli.pem"), "--tls-key",
	              path("cli.key"), "--once", "--ack-wait-ms", "2000",
	              "--gap-wait-ms", "10000", path("dst")), 0);
	CHECK_EQ(compare(path("src"), path("dst"), "h", 1), 2000);
	teardown(&n);
}

/* Poll errf until it holds `text` or ms pass.  @return whether it does. */
static int err_says(const char *errf, const char *text, int ms)
{
	for (double end = t_now() + ms / 1000.0;; t_sleep_ms(20)) {
		char *e = slurp(errf);
		int yes = strstr(e, text) != NULL;
		free(e);
		if (yes || t_now() > end)
			return yes;
	}
}

/* Start forward towards url (with the option opt, when not NULL), wait
 * for its first connection attempt to be reported, stop it.  @return
 * whether it warned about clear text. */
static int warns_clear(const char *url, const char *opt)
{
	unlink(path("err")); /* not the last run's lines */
	pid_t f = start_tool(path("err"), "forward", "--nats", url, "--host",
	                     "h", opt ? opt : "--once", path("src"),
	                     (const char *)NULL);
	CHECK(err_says(path("err"), "retrying", 10000));
	kill(f, SIGTERM);
	CHECK_EQ(t_wait(f, 10, NULL), 0);
	return err_says(path("err"), "without TLS", 0);
}

TEST(url_off_this_machine_without_tls_warns_at_start)
{
	t_nats n;
	struct wopts w = {.shards = 1};
	char url[64];

	setup();
	write_log(path("src"), 100, &w);
	/* 192.0.2.1 (TEST-NET-1) is never this machine, and never answers. */
	CHECK(warns_clear("nats://u:secret@192.0.2.1:4222", NULL));
	char *e = slurp(path("err"));
	CHECK(!strstr(e, "secret")); /* the password is not shown */
	CHECK(!strstr(strstr(e, "without TLS") + 1, "without TLS")); /* once */
	free(e);
	CHECK(!warns_clear("tls://192.0.2.1:4222", NULL));
	CHECK(!warns_clear("nats://192.0.2.1:4222", "--tls"));
	/* Loopback, by address or by name: no warning. */
	server(&n, NULL);
	snprintf(url, sizeof url, "nats://localhost:%d", n.port);
	CHECK_EQ(TOOL(60, path("err"), "forward", "--nats", url, "--host", "h",
	              "--once", path("src")), 0);
	CHECK(!err_says(path("err"), "warning", 0));
	CHECK_EQ(TOOL(60, path("err"), "collect", "--nats", n.url, "--once",
	              path("dst")), 0);
	CHECK(!err_says(path("err"), "warning", 0));
	CHECK_EQ(compare(path("src"), path("dst"), "h", 1), 100);
	teardown(&n);
}

/* ---- per-host credentials ---- */

/* The permissions of docs/logengine.1, "Shipping across hosts": host h
 * may publish its own subjects and read the stream's settings and its
 * messages; the collector may create the stream and consume it with
 * its durable.  Each replies on an inbox. */
static const char host_perms[] =
	"{ user: %s, password: pw-%s, permissions: { publish: [ "
	"\"logs.%s.*\", \"$JS.API.STREAM.INFO.LOGS\", "
	"\"$JS.API.STREAM.MSG.GET.LOGS\" ], subscribe: \"_INBOX.>\" } }\n";
static const char collector_perms[] =
	"{ user: collector, password: pw-collector, permissions: { publish: [ "
	"\"$JS.API.STREAM.INFO.LOGS\", \"$JS.API.STREAM.CREATE.LOGS\", "
	"\"$JS.API.CONSUMER.INFO.LOGS.logengine-collect\", "
	"\"$JS.API.CONSUMER.DURABLE.CREATE.LOGS.logengine-collect\", "
	"\"$JS.API.CONSUMER.MSG.NEXT.LOGS.logengine-collect\", "
	"\"$JS.ACK.LOGS.logengine-collect.>\"%s ], subscribe: \"_INBOX.>\" "
	"} }\n";
static const char dead_perms[] =
	", \"logs-dead.>\", \"$JS.API.STREAM.CREATE.LOGS_DEAD\"";

/* A server whose users are the collector (allowed to dead-letter when
 * dead) and hosts a and b; user u's password in base/u.pw. */
static void auth_server(t_nats *n, int dead)
{
	static const char *users[] = {"a", "b", "collector"};
	char conf[4096], f[64];
	int len = snprintf(conf, sizeof conf, "authorization { users = [\n");

	for (int i = 0; i < 2; i++)
		len += snprintf(conf + len, sizeof conf - (size_t)len, host_perms,
		                users[i], users[i], users[i]);
	len += snprintf(conf + len, sizeof conf - (size_t)len,
	                collector_perms, dead ? dead_perms : "");
	len += snprintf(conf + len, sizeof conf - (size_t)len, "] }\n");
	CHECK(len < (int)sizeof conf);
	for (int i = 0; i < 3; i++) {
		snprintf(f, sizeof f, "%s.pw", users[i]);
		FILE *pw = fopen(path(f), "w");
		CHECK(pw && fprintf(pw, "pw-%s\n", users[i]) > 0 &&
		      fclose(pw) == 0);
	}
	t_nats_init(n, base); /* no JetStream probe: it has no password */
	CHECK_EQ(t_nats_conf(n, conf), 0);
	CHECK_EQ(t_nats_run(n), 0);
}

/* collect --once into dst as the collector. */
static void collect_as_collector(const t_nats *n, const char *dst)
{
	int rc = TOOL(60, path("col.err"), "collect", "--nats", n->url,
	              "--user", "collector", "--password-file",
	              path("collector.pw"), "--once", "--ack-wait-ms", "2000",
	              "--gap-wait-ms", "10000", dst);
	if (rc)
		say_file("collect", path("col.err"));
	CHECK_EQ(rc, 0);
}

TEST(a_hosts_credentials_cannot_ship_as_another_host)
{
	t_nats n;
	struct wopts w1 = {.shards = 1}, w2 = {.shards = 2};

	setup();
	write_log(path("src-a"), 1000, &w1);
	write_log(path("src-b"), 500, &w2);
	auth_server(&n, 1);
	collect_as_collector(&n, path("dst")); /* creates the stream */
	/* a's credentials, b's name: the server refuses the publish; the
	 * forwarder says so and exits (a retry would meet the same
	 * refusal), its cursors where they were. */
	double t0 = t_now();
	CHECK_EQ(TOOL(30, path("err"), "forward", "--nats", n.url, "--host",
	              "b", "--user", "a", "--password-file", path("a.pw"),
	              "--ack-wait-ms", "2000", "--once", path("src-b")), 1);
	char *e = slurp(path("err"));
	if (!strstr(e, "Permissions Violation for Publish to \"logs.b"))
		fprintf(stderr, "  %s", e);
	CHECK(strstr(e, "Permissions Violation for Publish to \"logs.b"));
	CHECK(!strstr(e, "sending again")); /* nothing goes again */
	CHECK(t_now() - t0 < 10);
	untouched(path("src-b"), 500);
	collect_as_collector(&n, path("dst"));
	CHECK_EQ(origin_dir(path("dst"), "b", 0), -1); /* nothing under b */
	CHECK_EQ(origin_dir(path("dst"), "b", 1), -1);
	/* Each host with its own credentials: stored untouched. */
	CHECK_EQ(TOOL(60, path("err"), "forward", "--nats", n.url, "--host",
	              "b", "--user", "b", "--password-file", path("b.pw"),
	              "--once", path("src-b")), 0);
	CHECK_EQ(TOOL(60, path("err"), "forward", "--nats", n.url, "--host",
	              "a", "--user", "a", "--password-file", path("a.pw"),
	              "--once", path("src-a")), 0);
	collect_as_collector(&n, path("dst"));
	CHECK_EQ(compare(path("src-b"), path("dst"), "b", 2), 500);
	CHECK_EQ(compare(path("src-a"), path("dst"), "a", 1), 1000);
	teardown(&n);
}

/* Connect to n's JetStream as user u (password from base/u.pw). */
static void js_as(const t_nats *n, const char *u, natsConnection **nc,
                  jsCtx **js)
{
	natsOptions *o;
	char pw[32];

	snprintf(pw, sizeof pw, "pw-%s", u);
	CHECK_EQ(natsOptions_Create(&o), NATS_OK);
	CHECK_EQ(natsOptions_SetURL(o, n->url), NATS_OK);
	CHECK_EQ(natsOptions_SetUserInfo(o, u, pw), NATS_OK);
	CHECK_EQ(natsConnection_Connect(nc, o), NATS_OK);
	natsOptions_Destroy(o);
	CHECK_EQ(natsConnection_JetStream(js, *nc, NULL), NATS_OK);
}

/* As host a, with its own credentials: publish records 1-3 claiming host
 * b's shard 0 on a's subject (the server takes it), then on b's and on
 * one ending in b's (it must refuse both). */
static void publish_as_a_claiming_b(const t_nats *n, int copies)
{
	natsConnection *nc;
	jsCtx *js;
	natsMsg *m;
	jsPubOptions po;
	unsigned char b[1024];
	size_t len = 0;
	char pl[32];
	static const char *subj[] = {"logs.a.0", "logs.b.0", "logs.a.b.0"};

	for (int i = 0; i < 3; i++) {
		int k = snprintf(pl, sizeof pl, "forged by a %d", i);
		len += le__frame_encode(b + len, LE_FIELD_ALL, 0, LE_INFO, 0,
		                        (uint64_t)i + 1, 1000u + (unsigned)i, pl,
		                        (uint32_t)k);
	}
	js_as(n, "a", &nc, &js);
	jsPubOptions_Init(&po);
	po.MaxWait = 500; /* a refused publish gets no PubAck */
	for (int i = 0; i < 3 + copies - 1; i++) {
		char id[64];
		const char *sj = subj[i < copies ? 0 : i - copies + 1];
		snprintf(id, sizeof id, "%s/%d", sj, i);
		CHECK_EQ(natsMsg_Create(&m, sj, NULL, (const char *)b, (int)len),
		         NATS_OK);
		natsMsgHeader_Set(m, "Nats-Msg-Id", id);
		natsMsgHeader_Set(m, "Le-Format", "1");
		natsMsgHeader_Set(m, "Le-Host", "b");
		natsMsgHeader_Set(m, "Le-Shard", "0");
		natsMsgHeader_Set(m, "Le-Seq", "1-3");
		natsMsgHeader_Set(m, "Le-Fields", "31");
		/* "logs.a.>" would allow the third: its last two tokens name
		 * host b. */
		CHECK_EQ(js_PublishMsg(NULL, js, m, &po, NULL) == NATS_OK,
		         i < copies);
		natsMsg_Destroy(m);
	}
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
}

/* Messages the collector's durable has neither delivered nor had
 * acknowledged, read as the collector; -1 when it cannot be read. */
static long unacked(const t_nats *n)
{
	natsConnection *nc;
	jsCtx *js;
	jsConsumerInfo *ci = NULL;
	long v = -1;

	js_as(n, "collector", &nc, &js);
	if (js_GetConsumerInfo(&ci, js, "LOGS", "logengine-collect", NULL,
	                       NULL) == NATS_OK)
		v = (long)(ci->NumPending + (uint64_t)ci->NumAckPending);
	jsConsumerInfo_Destroy(ci);
	jsCtx_Destroy(js);
	natsConnection_Destroy(nc);
	return v;
}

/* Poll unacked until it is want or secs have passed.  @return its last
 * value. */
static long wait_unacked(const t_nats *n, long want, double secs)
{
	double end = t_now() + secs;
	long v;
	while ((v = unacked(n)) != want && t_now() < end)
		t_sleep_ms(50);
	return v;
}

/* Where the tests of forged messages begin: host b's 500 records (two
 * shards) shipped with --once after host a published `forged` messages
 * claiming b's first records; the stream made by a first collector, whose
 * user may copy to the dead-letter stream when dead is 1. */
static void b_shipped_after_forgeries(t_nats *n, int dead, int forged)
{
	struct wopts w = {.shards = 2};

	setup();
	write_log(path("src-b"), 500, &w);
	auth_server(n, dead);
	collect_as_collector(n, path("dst")); /* creates the stream */
	publish_as_a_claiming_b(n, forged);
	CHECK_EQ(TOOL(60, path("err"), "forward", "--nats", n->url, "--host",
	              "b", "--user", "b", "--password-file", path("b.pw"),
	              "--once", path("src-b")), 0);
}

/* A collector as user collector into dst, errors to col.err, running
 * until it is stopped. */
static pid_t start_collector(const t_nats *n)
{
	return start_tool(path("col.err"), "collect", "--nats", n->url,
	                  "--user", "collector", "--password-file",
	                  path("collector.pw"), "--ack-wait-ms", "2000",
	                  "--gap-wait-ms", "10000", path("dst"),
	                  (const char *)NULL);
}

/* Host a, with its own credentials on its own subject, publishes
 * records 1-3 of host b's shard 0 before b ships them: the collector must
 * refuse the claim (the subject says a), or b's own records 1-3 would
 * come too late and be dropped as already stored. */
TEST(a_message_claiming_another_host_on_its_own_subject_is_refused)
{
	t_nats n;

	b_shipped_after_forgeries(&n, 1, 1);
	collect_as_collector(&n, path("dst"));
	CHECK_EQ(compare(path("src-b"), path("dst"), "b", 2), 500);
	CHECK_EQ(count_lines(path("col.err"), "the headers claim another "
	                     "origin than the subject's (host a shard 0)"), 1);
	CHECK_EQ(origin_dir(path("dst"), "a", 0), -1);
	teardown(&n);
}

/* Forged messages the collector may not copy to the dead-letter stream
 * (its permissions lack it) stay in the stream; the refused publish must
 * not stop the collector, or it would stop at them on every restart and
 * store no other host's records again. */
TEST(collector_not_allowed_to_dead_letter_a_hundred_forged_messages_still_stores_the_other_hosts)
{
	t_nats n;

	b_shipped_after_forgeries(&n, 0, 100);
	pid_t c = start_collector(&n);
	CHECK(err_says(path("col.err"), "Publish to \"logs-dead.forged\"",
	               10000));
	/* Everything acknowledged but the forged messages, kept for a later
	 * copy; the collector still running.  After the first refused copy
	 * the others wait for a backoff instead of a publish timeout each
	 * (100 of those would hold b's records up for minutes). */
	CHECK_EQ(wait_unacked(&n, 100, 20), 100);
	CHECK_EQ(waitpid(c, NULL, WNOHANG), 0);
	kill(c, SIGTERM);
	CHECK_EQ(t_wait(c, 30, NULL), 0);
	CHECK(err_says(path("col.err"), "going on without it", 0));
	CHECK_EQ(compare(path("src-b"), path("dst"), "b", 2), 500);
	teardown(&n);
}

/* More refused messages than may wait for a copy: they count against
 * the consumer's MAX_ACK_PENDING (20,000), which would end its deliveries
 * and hold every host's records; past 1,000 the rest go with their line
 * on stderr, and the others' records are stored. */
TEST(refused_messages_past_a_thousand_waiting_for_a_copy_are_dropped_not_kept)
{
	t_nats n;

	b_shipped_after_forgeries(&n, 0, 1100);
	pid_t c = start_collector(&n);
	CHECK_EQ(wait_unacked(&n, 1000, 30), 1000);
	kill(c, SIGTERM);
	CHECK_EQ(t_wait(c, 30, NULL), 0);
	CHECK_EQ(count_lines(path("col.err"), "dropped without a dead-letter "
	                     "copy (1000 already wait for one)"), 100);
	CHECK_EQ(compare(path("src-b"), path("dst"), "b", 2), 500);
	teardown(&n);
}

/* Forged messages the collector may not dead-letter, with --once: a run
 * that cannot copy its rejected messages anywhere must not wait for them
 * for ever (a cron job would pile up); it stores every other record, then
 * gives up at --outage-deadline-ms with exit 1, the messages left in the
 * stream for the next run. */
TEST(collector_once_that_cannot_dead_letter_gives_up_at_the_outage_deadline)
{
	t_nats n;

	b_shipped_after_forgeries(&n, 0, 5);
	double t0 = t_now();
	CHECK_EQ(TOOL(60, path("col.err"), "collect", "--nats", n.url,
	              "--user", "collector", "--password-file",
	              path("collector.pw"), "--once", "--outage-deadline-ms",
	              "3000", "--ack-wait-ms", "2000", "--gap-wait-ms",
	              "10000", path("dst")), 1);
	CHECK(t_now() - t0 < 30);
	CHECK(err_says(path("col.err"), "could not be copied to the "
	               "dead-letter stream LOGS_DEAD", 0));
	CHECK_EQ(compare(path("src-b"), path("dst"), "b", 2), 500);
	CHECK_EQ(unacked(&n), 5);
	teardown(&n);
}

/* ---- memory ---- */

/* Peak RSS (KiB) of forward --once over a backlog of `mb` MB, with a
 * window of `window` (both backlogs fill it: what differs is only the
 * backlog). */
static long forward_rss(const t_nats *n, int mb, const char *name,
                        const char *window)
{
	struct wopts w = {.shards = 1, .payload = 1000};
	struct rusage ru;

	write_log(path(name), (long)mb * 1000, &w);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", n->url,
	                     "--host", name, "--once", "--max-inflight-bytes",
	                     window, path(name), (const char *)NULL);
	CHECK_EQ(t_wait(f, 600, &ru), 0);
	t_rmrf(path(name));
	return ru.ru_maxrss;
}

/* Collect everything in the stream into dst with a durable of its own
 * and --fetch-bytes 2M.  @return the collector's peak RSS, KiB. */
static long collect_rss(const t_nats *n, const char *durable,
                        const char *dst)
{
	struct rusage ru;
	pid_t c = start_tool(path("col.err"), "collect", "--nats", n->url,
	                     "--once", "--durable", durable, "--fetch-bytes",
	                     "2M", path(dst), (const char *)NULL);
	CHECK_EQ(t_wait(c, 600, &ru), 0);
	t_rmrf(path(dst));
	return ru.ru_maxrss;
}

static void rss_flat(int small, int big, const char *window)
{
	t_nats n;

	setup();
	/* Under AddressSanitizer, freed blocks wait in a quarantine (256
	 * MiB by default) before they are reused: without it, the tool's
	 * memory is its own again. */
	setenv("ASAN_OPTIONS", "quarantine_size_mb=0:"
	       "thread_local_quarantine_size_kb=0", 1);
	server(&n, NULL);
	long a = forward_rss(&n, small, "small", window);
	long ca = collect_rss(&n, "c1", "dst1"); /* the small backlog */
	long b = forward_rss(&n, big, "big", window);
	long cb = collect_rss(&n, "c2", "dst2"); /* both */
	fprintf(stderr, "  peak RSS: %d MB backlog %ld KiB, %d MB backlog %ld "
	        "KiB; collecting %d MB %ld KiB, %d MB %ld KiB\n", small, a, big,
	        b, small, ca, small + big, cb);
	/* The promise: a bigger backlog costs no more memory.  A smaller
	 * peak for it is no breach (the allocator's caches, ASan's shadow
	 * pages, differ from run to run). */
	CHECK(b - a <= 4096);
	CHECK(cb - ca <= 4096);
	teardown(&n);
}

TEST(memory_is_the_same_for_a_20mb_and_a_100mb_backlog)
{
	rss_flat(20, 100, "2M");
}

TEST(memory_is_the_same_for_a_100mb_and_a_1gb_backlog)
{
	rss_flat(100, 1000, "2M");
}

TEST(cluster_of_three_loses_a_node_mid_stream)
{
	t_nats n[3];
	struct wopts w = {.shards = 2, .payload = 100};
	char urls[256];

	setup();
	write_log(path("src"), 500000, &w);
	CHECK_EQ(t_nats_cluster(n, base), 0);
	t_nats_urls(n, urls);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", urls,
	                     "--host", "h", "--once", "--replicas", "3",
	                     "--max-batch-bytes", "64K", "--max-record-bytes", "4K",
	                     "--ack-wait-ms", "3000",
	                     path("src"), (const char *)NULL);
	t_sleep_ms(700);
	t_nats_stop(&n[1]); /* a node goes, maybe the stream's leader */
	int rc = t_wait(f, 240, NULL);
	if (rc)
		fprintf(stderr, "  %s", slurp(path("fwd.err")));
	CHECK_EQ(rc, 0);
	collect_once(urls, path("dst"));
	CHECK_EQ(compare(path("src"), path("dst"), "h", 2), 500000);
	for (int i = 0; i < 3; i++)
		t_nats_stop(&n[i]);
	t_rmrf(base);
}

/* ---- a cluster losing its quorum ---- */

/* A forwarder's batch that failed in the outage can land in the stream
 * behind the next one (sent again after its --ack-wait-ms, here
 * OUTAGE_ACK_WAIT): collectors wait for it longer than that. */
#define OUTAGE_ACK_WAIT "3000"
#define OUTAGE_GAP_WAIT "30000"

/* Wait until file f says `text` or `alt` (NULL: none; lines the tool
 * prints), or pid exits, or timeout_s passes.  @return 1 said and pid
 * still running, 0 not. */
static int says(pid_t pid, const char *f, const char *text, const char *alt,
                double timeout_s)
{
	double end = t_now() + timeout_s;

	for (;;) {
		char *b = slurp(f);
		int yes = strstr(b, text) || (alt && strstr(b, alt));
		free(b);
		if (yes || waitpid(pid, NULL, WNOHANG) != 0 || t_now() > end)
			return yes && kill(pid, 0) == 0;
		t_sleep_ms(50);
	}
}

/* How many times text is in file f. */
static int count_in(const char *f, const char *text)
{
	char *b = slurp(f);
	int n = 0;

	for (const char *p = b; (p = strstr(p, text)) != NULL; p++)
		n++;
	free(b);
	return n;
}

/* Nodes 1 and 2 of n down: the stream (R3) and JetStream's own leader
 * lose their quorum; node 0 still takes connections. */
static void two_of_three_down(t_nats n[3])
{
	t_nats_stop(&n[1]);
	t_nats_stop(&n[2]);
}

static void two_of_three_back(t_nats n[3], const char *urls)
{
	CHECK_EQ(t_nats_run(&n[1]), 0);
	CHECK_EQ(t_nats_run(&n[2]), 0);
	CHECK_EQ(t_js_ready(urls, 30000), 0);
}

/* A collector (or its supervisor's restart of it) that starts while the
 * stream has no quorum must wait for it, not exit: and so must a
 * forwarder.  Once the nodes are back, both finish their work. */
TEST(collector_started_while_two_of_three_nodes_are_down_waits_and_stores_everything)
{
	t_nats n[3];
	struct wopts w = {.shards = 1, .payload = 100};
	char urls[256];

	setup();
	write_log(path("src1"), 20000, &w);
	write_log(path("src2"), 20000, &w);
	CHECK_EQ(t_nats_cluster(n, base), 0);
	t_nats_urls(n, urls);
	CHECK_EQ(TOOL(60, path("fwd.err"), "forward", "--nats", urls, "--host",
	              "h1", "--once", "--replicas", "3", path("src1")), 0);
	two_of_three_down(n);
	pid_t c = start_tool(path("col.err"), "collect", "--nats", urls,
	                     "--once", "--ack-wait-ms", "2000", "--gap-wait-ms",
	                     OUTAGE_GAP_WAIT, "--verbose", path("dst"),
	                     (const char *)NULL);
	pid_t f = start_tool(path("fwd2.err"), "forward", "--nats", urls,
	                     "--host", "h2", "--once", "--ack-wait-ms",
	                     OUTAGE_ACK_WAIT, path("src2"), (const char *)NULL);
	int waits = says(c, path("col.err"), "unreachable", NULL, 30);
	if (!waits)
		say_file("collector", path("col.err"));
	CHECK(waits);
	/* at start-up, or once its first batch went unanswered */
	waits = says(f, path("fwd2.err"), "unreachable", "sending again", 30);
	if (!waits)
		say_file("forwarder", path("fwd2.err"));
	CHECK(waits);
	two_of_three_back(n, urls);
	int rc = t_wait(f, 120, NULL);
	if (rc)
		say_file("forwarder", path("fwd2.err"));
	CHECK_EQ(rc, 0);
	rc = t_wait(c, 120, NULL);
	if (rc)
		say_file("collector", path("col.err"));
	CHECK_EQ(rc, 0);
	if (getenv("LE_SAY")) { /* the lines each printed */
		say_file("collector", path("col.err"));
		say_file("forwarder h2", path("fwd2.err"));
	}
	CHECK_EQ(count_in(path("col.err"), "unreachable"), 1);
	CHECK_EQ(count_in(path("col.err"), "reachable again"), 1);
	collect_once(urls, path("dst")); /* what h2 shipped after that */
	CHECK_EQ(compare(path("src1"), path("dst"), "h1", 1), 20000);
	CHECK_EQ(compare(path("src2"), path("dst"), "h2", 1), 20000);
	for (int i = 0; i < 3; i++)
		t_nats_stop(&n[i]);
	t_rmrf(base);
}

/* collect --once with --outage-deadline-ms 3000 against url: exits 1,
 * not before the deadline and not long after, naming what it waited
 * for (`text`). */
static void gives_up_after_three_seconds(const char *url, const char *text)
{
	double t0 = t_now();
	int rc = TOOL(60, path("col.err"), "collect", "--nats", url, "--once",
	              "--outage-deadline-ms", "3000", path("dst"));
	double took = t_now() - t0;
	char *err = slurp(path("col.err"));

	if (rc != 1 || took < 3 || took > 15 || !strstr(err, text))
		fprintf(stderr, "  exit %d after %.1f s: %s", rc, took, err);
	CHECK_EQ(rc, 1);
	CHECK(took >= 3 && took <= 15);
	CHECK(strstr(err, text));
	free(err);
}

/* --once is for a job that must end: collect waits for an outage to
 * pass as long as --outage-deadline-ms, then fails (a supervisor that
 * runs collect without --once gets a collector that waits for ever, as
 * forward always does). */
TEST(collector_once_gives_up_at_the_outage_deadline_not_before)
{
	t_nats n;

	setup();
	t_nats_init(&n, base); /* a server without JetStream: no responders */
	FILE *conf = fopen(n.conf, "w");
	CHECK(conf != NULL);
	fprintf(conf, "listen: 127.0.0.1:%d\n", n.port);
	fclose(conf);
	CHECK_EQ(t_nats_run(&n), 0);
	gives_up_after_three_seconds(n.url, "no JetStream server answers");
	CHECK_EQ(count_in(path("col.err"), "unreachable:"), 1);
	CHECK(count_in(path("col.err"), "giving up"));
	/* forward --once waits as long as it takes, saying so once */
	struct wopts w = {.shards = 1};
	write_log(path("src"), 100, &w);
	pid_t f = start_tool(path("fwd.err"), "forward", "--nats", n.url,
	                     "--host", "h", "--once", path("src"),
	                     (const char *)NULL);
	int waits = says(f, path("fwd.err"), "unreachable:", NULL, 10);
	if (!waits)
		say_file("forwarder", path("fwd.err"));
	CHECK(waits);
	kill(f, SIGTERM);
	CHECK_EQ(t_wait(f, 10, NULL), 0);
	CHECK_EQ(count_in(path("fwd.err"), "unreachable:"), 1);
	t_nats_stop(&n); /* and no server at all */
	gives_up_after_three_seconds(n.url, "given up after");
	t_rmrf(base);
}

/* A collector of durable `durable` into dst, running until stopped. */
static pid_t collector(const char *urls, const char *durable, const char *dst,
                       const char *errf)
{
	return start_tool(errf, "collect", "--nats", urls, "--durable", durable,
	                  "--ack-wait-ms", "2000", "--gap-wait-ms",
	                  OUTAGE_GAP_WAIT, "--verbose", dst, (const char *)NULL);
}

/* Wait (up to timeout_s) until durable has taken everything while its
 * collector pid keeps running.  @return 1, 0 not. */
static int collector_done(const char *urls, const char *durable, pid_t pid,
                          double timeout_s)
{
	double end = t_now() + timeout_s;

	while (t_now() < end && waitpid(pid, NULL, WNOHANG) == 0) {
		if (t_consumer_done(urls, "LOGS", durable, 1) == 1)
			return 1;
		t_sleep_ms(200);
	}
	return 0;
}

/* Each loss of the stream said once, and its end once. */
static void one_line_each(const char *who, const char *errf, int least)
{
	int lost = count_in(errf, "unreachable");
	int back = count_in(errf, "reachable again");

	if (lost < least || lost != back || lost > 3)
		say_file(who, errf);
	CHECK(lost >= least);
	CHECK_EQ(lost, back);
	CHECK(lost <= 3); /* the outage, and elections as the nodes return */
}

/* Whether the forwarder of src (shards shards) has every one of its
 * n records a shard acknowledged (its cursors past them). */
static int forwarded_all(const char *src, unsigned shards, uint64_t n)
{
	char sdir[600];
	le__fwd_cursor c;

	for (unsigned i = 0; i < shards; i++) {
		snprintf(sdir, sizeof sdir, "%s/shard-%03u", src, i);
		if (le__fwd_read(sdir, &c) != 0 || c.next_seq != n + 1)
			return 0;
	}
	return 1;
}

/* The issue's goal: two of three nodes gone for 20 s while a forwarder
 * follows a log that grows during the outage and a collector stores; a
 * second collector (its own durable and store) and a second forwarder
 * start during the outage.  Nobody exits; afterwards both stores hold
 * both hosts' records exactly once. */
TEST(collector_running_through_a_twenty_second_two_of_three_outage_loses_and_duplicates_nothing)
{
	t_nats n[3];
	struct wopts w1 = {.shards = 2, .payload = 100};
	struct wopts w2 = {.shards = 1, .payload = 100};
	char urls[256];

	setup();
	write_log(path("src1"), 200000, &w1);
	write_log(path("src2"), 20000, &w2);
	CHECK_EQ(t_nats_cluster(n, base), 0);
	t_nats_urls(n, urls);
	pid_t f1 = start_tool(path("fwd1.err"), "forward", "--nats", urls,
	                      "--host", "h1", "--replicas", "3",
	                      "--max-batch-bytes", "64K", "--max-record-bytes",
	                      "4K", "--ack-wait-ms", OUTAGE_ACK_WAIT,
	                      path("src1"), (const char *)NULL);
	/* A starts on the stream f1 made (it would make one of 1 replica) */
	double end = t_now() + 30;
	while (t_stream_msgs(urls, "LOGS") <= 0 && t_now() < end)
		t_sleep_ms(50);
	pid_t a = collector(urls, "a", path("dstA"), path("colA.err"));
	while (t_consumer_acked(urls, "LOGS", "a") <= 0 && t_now() < end)
		t_sleep_ms(50);
	CHECK(t_consumer_acked(urls, "LOGS", "a") > 0);
	double t0 = t_now();
	two_of_three_down(n);
	write_log(path("src1"), 200000, &w1); /* f1 ships it into the outage */
	pid_t b = collector(urls, "b", path("dstB"), path("colB.err"));
	pid_t f2 = start_tool(path("fwd2.err"), "forward", "--nats", urls,
	                      "--host", "h2", "--once", "--ack-wait-ms",
	                      OUTAGE_ACK_WAIT, path("src2"), (const char *)NULL);
	CHECK(says(b, path("colB.err"), "unreachable", NULL, 20));
	CHECK(says(f2, path("fwd2.err"), "unreachable", "sending again", 20));
	double left = 20 - (t_now() - t0); /* the outage lasts 20 s */
	if (left > 0)
		t_sleep_ms((int)(left * 1000));
	CHECK(kill(a, 0) == 0 && kill(b, 0) == 0);
	two_of_three_back(n, urls);
	end = t_now() + 180;
	while (!forwarded_all(path("src1"), 2, 200000) && t_now() < end &&
	       waitpid(f1, NULL, WNOHANG) == 0)
		t_sleep_ms(100);
	kill(f1, SIGTERM);
	int rc = t_wait(f1, 60, NULL);
	if (rc || !forwarded_all(path("src1"), 2, 200000))
		say_file("forwarder h1", path("fwd1.err"));
	CHECK_EQ(rc, 0);
	CHECK(forwarded_all(path("src1"), 2, 200000));
	rc = t_wait(f2, 120, NULL);
	if (rc)
		say_file("forwarder h2", path("fwd2.err"));
	CHECK_EQ(rc, 0);
	int done = collector_done(urls, "a", a, 120);
	if (!done)
		say_file("collector a", path("colA.err"));
	CHECK(done);
	done = collector_done(urls, "b", b, 120);
	if (!done)
		say_file("collector b", path("colB.err"));
	CHECK(done);
	kill(a, SIGTERM);
	kill(b, SIGTERM);
	CHECK_EQ(t_wait(a, 30, NULL), 0);
	CHECK_EQ(t_wait(b, 30, NULL), 0);
	if (getenv("LE_SAY")) { /* the lines each printed */
		say_file("collector a", path("colA.err"));
		say_file("collector b", path("colB.err"));
		say_file("forwarder h1", path("fwd1.err"));
		say_file("forwarder h2", path("fwd2.err"));
	}
	one_line_each("collector a", path("colA.err"), 0);
	one_line_each("collector b", path("colB.err"), 1);
	CHECK_EQ(compare(path("src1"), path("dstA"), "h1", 2), 400000);
	CHECK_EQ(compare(path("src2"), path("dstA"), "h2", 1), 20000);
	CHECK_EQ(compare(path("src1"), path("dstB"), "h1", 2), 400000);
	CHECK_EQ(compare(path("src2"), path("dstB"), "h2", 1), 20000);
	for (int i = 0; i < 3; i++)
		t_nats_stop(&n[i]);
	t_rmrf(base);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	t_allow_jobs(); /* each test: its own directory and servers */
	t_timeout_s = 300;
	signal(SIGPIPE, SIG_IGN);
	RUN(forward_once_then_collect_stores_every_record_once);
	RUN(two_hosts_merge_by_time_in_the_collected_store);
	RUN(ten_thousand_acks_leave_the_files_and_inodes_unchanged);
	RUN(batch_of_exactly_max_batch_bytes_goes_as_one_message);
	RUN(one_byte_over_max_batch_bytes_goes_as_two_messages);
	RUN(record_that_could_exceed_a_batch_is_refused_at_start);
	RUN(stored_record_too_large_for_a_message_is_reported_and_the_rest_moves);
	RUN(retention_past_the_margin_ships_a_gap_marker_with_the_count);
	RUN(follow_ships_records_written_later_across_rotation_until_sigterm);
	RUN(follower_without_an_inotify_instance_still_ships_new_records_and_shards);
	RUN(server_down_at_start_waits_quietly_then_ships);
	RUN(server_restarted_mid_stream_loses_nothing);
	RUN(server_killed_after_the_log_was_read_loses_nothing);
	RUN(server_paused_five_seconds_holds_the_window_and_memory);
	RUN(message_timed_out_while_still_being_written_arrives_intact);
	RUN(forwarder_killed_ten_times_during_a_million_records);
	RUN(restart_behind_its_cursor_with_other_batches_stores_nothing_twice);
	RUN(deferred_records_read_back_the_same_text_after_forward_and_collect);
	RUN(batch_grown_by_many_descriptors_before_a_large_record_ships_intact);
	RUN(record_after_one_that_outgrew_its_message_keeps_its_text);
	RUN(collector_waits_for_an_earlier_message_still_pending_past_the_gap_wait);
	RUN(collector_holding_only_a_few_messages_still_waits_for_the_earlier_one);
	RUN(collector_killed_ten_times_stores_everything_once);
	RUN(collector_rejects_a_message_with_one_bad_frame_whole);
	RUN(forged_origins_are_dead_lettered_and_every_real_record_stored);
	RUN(message_ids_published_by_another_host_do_not_suppress_its_messages);
	RUN(message_ids_read_from_the_stream_do_not_let_another_host_erase_records);
	RUN(forged_gap_inside_a_real_range_erases_no_record);
	RUN(gap_claim_beyond_the_sequence_range_is_refused);
	RUN(three_hundred_new_origins_are_stored_and_the_collector_goes_on);
	RUN(shard_above_an_engines_256_is_refused);
	RUN(wrong_url_is_a_clear_error);
	RUN(bad_command_lines_exit_2_naming_what_is_wrong);
	RUN(bad_credentials_are_a_clear_error);
	RUN(stream_with_conflicting_settings_is_a_clear_error);
	RUN(tls_with_the_servers_ca_ships_and_without_it_is_a_clear_error);
	RUN(mutual_tls_without_the_client_certificate_is_a_clear_error_not_a_hang);
	RUN(url_off_this_machine_without_tls_warns_at_start);
	RUN(a_hosts_credentials_cannot_ship_as_another_host);
	RUN(a_message_claiming_another_host_on_its_own_subject_is_refused);
	RUN(collector_not_allowed_to_dead_letter_a_hundred_forged_messages_still_stores_the_other_hosts);
	RUN(collector_once_that_cannot_dead_letter_gives_up_at_the_outage_deadline);
	RUN(refused_messages_past_a_thousand_waiting_for_a_copy_are_dropped_not_kept);
	RUN(memory_is_the_same_for_a_20mb_and_a_100mb_backlog);
	RUN(collector_started_while_two_of_three_nodes_are_down_waits_and_stores_everything);
	RUN(collector_once_gives_up_at_the_outage_deadline_not_before);
	if (getenv("LE_LONG")) { /* make check-long */
		RUN(memory_is_the_same_for_a_100mb_and_a_1gb_backlog);
		RUN(cluster_of_three_loses_a_node_mid_stream);
		RUN(collector_running_through_a_twenty_second_two_of_three_outage_loses_and_duplicates_nothing);
	}
	return t_done();
}
#endif
