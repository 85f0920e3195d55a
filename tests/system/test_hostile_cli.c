/*
 * test_hostile_cli.c -- every command of the tool against a log directory
 * someone else could write into.
 *
 * In place of each kind of file of a log directory (the active and a
 * sealed segment, an archive, an index, CHECKPOINT, QUEUE, SITES, STATS,
 * FORWARD, ORIGIN, LOCK, the line file, the shard directory itself) the
 * test plants each hostile kind: a symbolic link to the same file of
 * another log, a FIFO, a UNIX socket, a character device (mknod, as root;
 * skipped with a reason otherwise).  Then it runs every command at once,
 * each under a deadline, and asserts:
 *   - no command hangs (the follower, tail, is stopped by the test; no
 *     command may hold the planted FIFO open for reading);
 *   - no link is followed: every file of the other log keeps its bytes
 *     and its mtime;
 *   - a command that fails names the planted file on stderr.
 * A round on the unplanted copy first proves the commands succeed there,
 * so a failure in a planted round is the plant's doing.
 */
#include "harness.h"

#ifdef LE_NO_NATS
TEST(hostile_files_need_nats)
{
	t_need("nats");
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(hostile_files_need_nats);
	return t_done();
}
#else
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "logengine.h"
#include "natsrv.h"
#include "ship/ship.h"

/* A command still running after this has hung.  Each command here reads
 * or writes a few small files, so this is far above its work, and high
 * enough that a loaded machine (every round's forward and collect talk
 * to one nats-server at once, NKINDS rounds at a time) is not taken for
 * a hang. */
#define CMD_S 30.0
#define FOLLOW_MS 300 /* how long the follower (tail) runs */
#define NKINDS 4
#define PATH_CAP 4096

enum kind { K_LINK, K_FIFO, K_SOCKET, K_DEVICE };
static const char *kind_name[NKINDS] = {"symlink", "FIFO", "socket",
                                        "device"};

static char base[256], tmpl[300], other[300], victim[300];
static t_nats nats;

/* The files to replace: names relative to the log directory. */
static char targets[16][300];
static int ntargets;

/* ---- the template log ---- */

static int has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Highest and lowest names in shard-000 ending in suf (""). */
static void shard_names(const char *suf, char *lo, char *hi, size_t cap)
{
	char p[PATH_CAP];
	snprintf(p, sizeof p, "%s/shard-000", tmpl);
	DIR *d = opendir(p);
	struct dirent *de;
	lo[0] = hi[0] = '\0';
	CHECK(d != NULL);
	while ((de = readdir(d))) {
		if (!has_suffix(de->d_name, suf))
			continue;
		if (!lo[0] || strcmp(de->d_name, lo) < 0)
			snprintf(lo, cap, "%s", de->d_name);
		if (!hi[0] || strcmp(de->d_name, hi) > 0)
			snprintf(hi, cap, "%s", de->d_name);
	}
	closedir(d);
}

static int archive_made(void)
{
	char lo[256], hi[256];
	shard_names(".seg.zst", lo, hi, sizeof lo);
	return lo[0] != 0;
}

/* A log with every kind of file: sealed segments, archives, indexes, a
 * line file, deferred records' SITES, a FORWARD cursor. */
static void make_template(void)
{
	char lines[400], rec[120];
	le_config c;
	le_engine *e;
	le_spool *sp;

	snprintf(lines, sizeof lines, "%s/lines.log", tmpl);
	le_config_init(&c);
	c.dir = tmpl;
	c.create_dir = 1;
	c.durability = LE_SYNC_NONE;
	c.segment_bytes = 4096;
	c.archive_keep_segments = 1;
	c.stream_path = lines;
	CHECK_RC(le_open(&e, &c));
	memset(rec, 'x', sizeof rec);
	for (int i = 0; i < 300; i++)
		CHECK_RC(le_write(e, 0, LE_INFO, rec, sizeof rec));
	for (int i = 0; i < 20; i++)
		CHECK_RC(le_logf(e, LE_INFO, "deferred %d", i));
	CHECK_RC(le_flush(e, 5000));
	double end = t_now() + 10;
	while (!archive_made() && t_now() < end)
		t_sleep_ms(10);
	CHECK_RC(le_close(e));
	CHECK(archive_made());
	CHECK_RC(le_spool_open(&sp, tmpl, 0, 0));
	le_spool_close(sp);
	/* what a collector's store holds beside each origin's segments */
	le__origin o = {.host = "h1", .shard = 0, .kind = LE_ORIGIN_CHAIN};
	unsigned char ob[LE_ORIGIN_MAX_BYTES];
	char p[400];
	snprintf(p, sizeof p, "%s/shard-000/" LE_ORIGIN_NAME, tmpl);
	CHECK_EQ(t_spit(p, ob, le__origin_encode(ob, &o)), 0);
}

static void add_target(const char *rel)
{
	CHECK(ntargets < 16 && rel[0]);
	snprintf(targets[ntargets++], sizeof targets[0], "%s", rel);
}

static void list_targets(void)
{
	char lo[256], hi[256], rel[300];
	static const char *fixed[] = {
		"shard-000/CHECKPOINT", "shard-000/QUEUE", "shard-000/SITES",
		"shard-000/STATS", "shard-000/FORWARD", "shard-000/ORIGIN",
		"LOCK", "lines.log", "shard-000"};

	shard_names(".seg", lo, hi, sizeof lo);
	CHECK(strcmp(lo, hi) != 0); /* a sealed one and the active one */
	snprintf(rel, sizeof rel, "shard-000/%s", hi);
	add_target(rel);
	snprintf(rel, sizeof rel, "shard-000/%s", lo);
	add_target(rel);
	shard_names(".seg.zst", lo, hi, sizeof lo);
	snprintf(rel, sizeof rel, "shard-000/%s", lo);
	add_target(rel);
	shard_names(".idx", lo, hi, sizeof lo);
	CHECK(lo[0]);
	snprintf(rel, sizeof rel, "shard-000/%s", lo);
	add_target(rel);
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		add_target(fixed[i]);
}

/* ---- the other log: a fingerprint of each of its files ---- */

/* Every entry under dir with its type, size and mtime, then an MD5 of
 * each file's bytes, sorted by name, into out. */
static void fingerprint(const char *dir, char *out, size_t cap)
{
	char cmd[PATH_CAP], f[300];
	snprintf(f, sizeof f, "%s/fp", base);
	snprintf(cmd, sizeof cmd,
	         "cd '%s' && find . -printf '%%p %%y %%s %%T@\\n' | sort > '%s'"
	         " && find . -type f | sort | xargs md5sum >> '%s'",
	         dir, f, f);
	CHECK(system(cmd) == 0);
	size_t len = 0;
	unsigned char *b = t_slurp(f, &len);
	CHECK(b && len < cap);
	memcpy(out, b, len + 1);
	free(b);
}

/* ---- planting ---- */

/* What a link in place of rel points at: the same file of the other log,
 * so that following it would read or change real data; else a victim. */
static void link_target(const char *rel, char *buf, size_t cap)
{
	snprintf(buf, cap, "%.300s/%.300s", other, rel);
	if (access(buf, F_OK) != 0)
		snprintf(buf, cap, "%s", victim);
}

static void plant(const char *dir, const char *rel, enum kind k)
{
	char p[580], to[610];
	snprintf(p, sizeof p, "%.280s/%.290s", dir, rel);
	t_rmrf(p);
	switch (k) {
	case K_LINK:
		link_target(rel, to, sizeof to);
		CHECK_EQ(symlink(to, p), 0);
		break;
	case K_FIFO:
		CHECK_EQ(mkfifo(p, 0600), 0);
		break;
	case K_SOCKET:
		CHECK_EQ(t_mksocket(p), 0);
		break;
	case K_DEVICE:
		CHECK_EQ(mknod(p, S_IFCHR | 0600, makedev(1, 3)), 0);
		break;
	}
}

/* ---- the commands ---- */

enum { C_CAT, C_TAIL, C_VERIFY, C_STATS, C_DU, C_LIVE, C_VACUUM,
       C_RECOVER, C_CAPTURE, C_FORWARD, C_COLLECT, C_SERVE, NCMDS };
static const char *cmd_name[NCMDS] = {
	"cat", "tail", "verify", "stats", "stats --disk-usage",
	"stats --live", "vacuum", "recover", "capture", "forward --once",
	"collect --once", "serve"};

/* argv of command c on dir (strings in buf). */
static void cmd_argv(int c, const char *dir, int port, char *argv[16])
{
	static char portarg[32], durable[32];
	static int runs;
	const char *tool = t_build_tool("LE_CLI", "logengine");
	int n = 0;
	argv[n++] = (char *)tool;
	switch (c) {
	case C_CAT: argv[n++] = "cat"; break;
	case C_TAIL: argv[n++] = "tail"; break;
	case C_VERIFY: argv[n++] = "verify"; break;
	case C_STATS: argv[n++] = "stats"; break;
	case C_DU: argv[n++] = "stats"; argv[n++] = "--disk-usage"; break;
	case C_LIVE:
		argv[n++] = "stats"; argv[n++] = "--live";
		argv[n++] = "-n"; argv[n++] = "1";
		argv[n++] = "-i"; argv[n++] = "0.1";
		break;
	case C_VACUUM: argv[n++] = "vacuum"; argv[n++] = "--size";
		argv[n++] = "1"; break;
	case C_RECOVER: argv[n++] = "recover"; break;
	case C_CAPTURE:
		argv[n++] = "capture"; argv[n++] = "--dir";
		argv[n++] = (char *)dir; argv[n++] = "--"; argv[n++] = "true";
		argv[n] = NULL;
		return;
	case C_FORWARD: case C_COLLECT:
		argv[n++] = c == C_FORWARD ? "forward" : "collect";
		argv[n++] = "--once"; argv[n++] = "--nats";
		argv[n++] = nats.url;
		if (c == C_FORWARD)
			break;
		/* A consumer of its own: collectors sharing one would wait
		 * for each other's unacknowledged messages (an --ack-wait-ms
		 * each), and a refused store leaves its messages so. */
		snprintf(durable, sizeof durable, "hostile-%d", runs++);
		argv[n++] = "--durable"; argv[n++] = durable;
		break;
	case C_SERVE:
		snprintf(portarg, sizeof portarg, "127.0.0.1:%d", port);
		argv[n++] = "serve"; argv[n++] = "--listen";
		argv[n++] = portarg;
		break;
	}
	argv[n++] = (char *)dir;
	argv[n] = NULL;
}

/* GET /metrics from 127.0.0.1:port, answer or not, within 3 s. */
static void hit_metrics(int port)
{
	double end = t_now() + 3;
	while (!t_port_open(port) && t_now() < end)
		t_sleep_ms(10);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)port)};
	struct timeval tv = {2, 0};
	char buf[4096];
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
		const char *rq = "GET /metrics HTTP/1.0\r\n\r\n";
		if (write(fd, rq, strlen(rq)) > 0)
			while (read(fd, buf, sizeof buf) > 0)
				;
	}
	close(fd);
}

/* One hostile file's run of every command.  Those that lock or change
 * the log (vacuum and after it) each have a copy of their own; the
 * readers before them share one. */
struct round {
	char dir[NCMDS][300];
	const char *rel;  /* planted, or NULL */
	enum kind k;
	int port;
	pid_t pid[NCMDS];
	int rc[NCMDS];    /* exit status; -1: it hung */
};

static void errfile(const struct round *r, int c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s.err%d", r->dir[c], c);
}

static void start_round(struct round *r)
{
	char *argv[16], ef[400];
	for (int c = 0; c < NCMDS; c++) {
		cmd_argv(c, r->dir[c], r->port, argv);
		errfile(r, c, ef, sizeof ef);
		r->pid[c] = t_spawn(ef, argv);
		CHECK(r->pid[c] > 0);
	}
}

/* Stop the commands that run until told (tail, serve), after tail had
 * time to read and serve answered once. */
static void stop_followers(struct round *r)
{
	kill(r->pid[C_TAIL], SIGTERM);
	kill(r->pid[C_SERVE], SIGTERM);
}

static void finish_round(struct round *r)
{
	for (int c = 0; c < NCMDS; c++)
		r->rc[c] = t_wait(r->pid[c], CMD_S, NULL);
}

/* A planted FIFO that some command holds open for reading (it would
 * block there, or read what another writes): open for writing without
 * blocking succeeds only then. */
static int fifo_has_reader(const struct round *r)
{
	char p[600];
	int n = 0;
	for (int c = 0; c < NCMDS; c++) {
		if (c && strcmp(r->dir[c], r->dir[0]) == 0)
			continue; /* the readers' shared copy: asked once */
		snprintf(p, sizeof p, "%.290s/%.290s", r->dir[c], r->rel);
		int fd = open(p, O_WRONLY | O_NONBLOCK);
		if (fd >= 0) {
			fprintf(stderr, "  FIFO in place of %s: %s opened it "
			        "for reading\n", r->rel,
			        c ? cmd_name[c] : "a reader (cat .. serve)");
			close(fd);
			n++;
		}
	}
	return n;
}

/* Each command's outcome: not hung, and a failure names the file. */
static int judge(const struct round *r)
{
	char ef[400];
	int bad = 0;
	const char *name = r->rel ? strrchr(r->rel, '/') : NULL;
	name = name ? name + 1 : r->rel;

	for (int c = 0; c < NCMDS; c++) {
		int follower = c == C_TAIL || c == C_SERVE;
		int rc = r->rc[c];
		errfile(r, c, ef, sizeof ef);
		size_t len = 0;
		char *err = (char *)t_slurp(ef, &len);
		int ok = rc != -1;
		if (follower && rc == 128 + SIGTERM)
			rc = 0;
		if (ok && rc != 0)
			ok = name && err && strstr(err, name);
		if (!ok) {
			bad++;
			fprintf(stderr, "  %s in place of %s: %s: %s: %s",
			        r->rel ? kind_name[r->k] : "nothing",
			        r->rel ? r->rel : "-", cmd_name[c],
			        rc == -1 ? "hung" : "exit without naming it",
			        err && *err ? err : "(no message)\n");
		}
		free(err);
	}
	return bad;
}

/* Run every command on each of n directories at once. */
static int run_rounds(struct round *r, int n)
{
	int bad = 0;
	for (int i = 0; i < n; i++)
		start_round(&r[i]);
	t_sleep_ms(FOLLOW_MS);
	for (int i = 0; i < n; i++) {
		hit_metrics(r[i].port);
		if (r[i].rel && r[i].k == K_FIFO)
			bad += fifo_has_reader(&r[i]);
		stop_followers(&r[i]);
	}
	for (int i = 0; i < n; i++)
		finish_round(&r[i]);
	for (int i = 0; i < n; i++)
		bad += judge(&r[i]);
	return bad;
}

static void copy_template(const char *to)
{
	char cmd[PATH_CAP];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", to, tmpl,
	         to);
	CHECK(system(cmd) == 0);
}

static void setup(void)
{
	t_tmpdir(base);
	snprintf(tmpl, sizeof tmpl, "%s/template", base);
	snprintf(other, sizeof other, "%s/other", base);
	snprintf(victim, sizeof victim, "%s/victim", base);
	CHECK(t_spit(victim, "precious\n", 9) == 0);
	make_template();
	list_targets();
	copy_template(other);
	CHECK(t_nats_start(&nats, base, NULL) == 0);
}

static void new_round(struct round *r, const char *name, const char *rel,
                      enum kind k)
{
	memset(r, 0, sizeof *r);
	r->rel = rel;
	r->k = k;
	r->port = t_free_port();
	for (int c = 0; c < NCMDS; c++) {
		int own = c >= C_VACUUM && c != C_SERVE;
		snprintf(r->dir[c], sizeof r->dir[c], "%s/%s-%d", base, name,
		         own ? c : 0);
		if (c && !own)
			continue;
		copy_template(r->dir[c]);
		if (rel)
			plant(r->dir[c], rel, k);
	}
}

/* The detector first: a file of a copy of the other log touched (its
 * bytes as they were, its mtime moved) changes the fingerprint. */
static void fingerprint_sees_a_touch(void)
{
	static char a[1 << 16], b[1 << 16];
	char copy[300], p[400];

	snprintf(copy, sizeof copy, "%s/probe", base);
	copy_template(copy);
	fingerprint(copy, a, sizeof a);
	snprintf(p, sizeof p, "%s/shard-000/CHECKPOINT", copy);
	struct timespec t[2] = {{0, UTIME_OMIT}, {1, 0}};
	CHECK_EQ(utimensat(AT_FDCWD, p, t, 0), 0);
	fingerprint(copy, b, sizeof b);
	CHECK(strcmp(a, b) != 0);
	t_rmrf(copy);
}

TEST(every_command_refuses_every_hostile_file_by_name_without_hanging)
{
	static char before[1 << 16], after[1 << 16];
	struct round r[NKINDS];
	int nk = geteuid() == 0 ? NKINDS : NKINDS - 1;
	int bad = 0;

	setup();
	if (nk < NKINDS)
		printf("  device nodes skipped: mknod needs root\n");
	/* the harness: every command succeeds on an intact copy */
	new_round(&r[0], "intact", NULL, K_LINK);
	CHECK_EQ(run_rounds(r, 1), 0);
	fingerprint_sees_a_touch();
	fingerprint(other, before, sizeof before);
	for (int t = 0; t < ntargets; t++) {
		for (int k = 0; k < nk; k++) {
			char name[32];
			snprintf(name, sizeof name, "log-%d", k);
			new_round(&r[k], name, targets[t], (enum kind)k);
		}
		bad += run_rounds(r, nk);
		fingerprint(other, after, sizeof after);
		if (strcmp(before, after) != 0) {
			fprintf(stderr, "  the other log changed through a "
			        "link in place of %s\n", targets[t]);
			bad++;
			memcpy(before, after, sizeof before);
		}
		char *v = t_slurp_text(victim);
		if (strcmp(v, "precious\n") != 0) {
			fprintf(stderr, "  the victim file changed\n");
			bad++;
		}
		free(v);
	}
	printf("  %d files x %d kinds x %d commands\n", ntargets, nk, NCMDS);
	t_nats_stop(&nats);
	CHECK_EQ(bad, 0);
	t_rmrf(base);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	/* Every target x kind x command, NKINDS rounds at a time: beyond
	 * the harness's default when commands near CMD_S, and a round with
	 * a hung command waits CMD_S before it is judged. */
	t_timeout_s = 300;
	RUN(every_command_refuses_every_hostile_file_by_name_without_hanging);
	return t_done();
}
#endif
