/*
 * test_archive.c -- archived segments (NAME.seg.zst, src/store/seg_zst.h): the
 * archiver thread compresses what archive_keep_segments and
 * archive_after_ms pick; readers, `logengine cat` and `verify` read the
 * archives as the segments they were; a crash at any step of the
 * compression leaves one readable copy of every record; retention deletes
 * archives; le_close stops a compression in progress; segments a
 * forwarder has not shipped are left alone.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include "logengine.h"
#include "logtest.h"
#include "base/os.h"
#include "store/seg_zst.h"
#include "ship/ship.h"

static char dir[256];

static void need_zstd(void)
{
	if (!le__zst_built())
		T_SKIP("libzstd-dev");
}

/* Files of shard 0 ending in suffix (".seg", ".seg.zst", ".tmp"). */
static int count_files(const char *suffix)
{
	char sd[400];
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	DIR *d = opendir(sd);
	struct dirent *de;
	size_t k = strlen(suffix);
	int n = 0;
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		n += l > k && !strcmp(de->d_name + l - k, suffix);
	}
	if (d)
		closedir(d);
	return n;
}

/* A mix of what segments hold: plain records, typed fields, and deferred
 * records (whose later frames point back at the first one's descriptor,
 * an offset inside the file). */
static void write_mix(le_engine *e, int n)
{
	char b[160];
	for (int i = 0; i < n; i++) {
		switch (i % 3) {
		case 0: {
			int k = snprintf(b, sizeof b, "GET /api/v1/items/%d HTTP/1.1 "
			                 "200 %d bytes", i, 100 + i % 977);
			CHECK_EQ(le_write(e, 0, LE_INFO, b, (size_t)k), 0);
			break;
		}
		case 1:
			le_info(e, "request %d took %.3f ms from %s", i, i * 0.25,
			        "10.0.0.7");
			break;
		default:
			le_warn_kv(e, LE_FIELDS(LE_STR("user", "bob"),
			                        LE_I64("n", i)), "slow %d", i);
		}
	}
	CHECK_RC(le_flush(e, 5000));
}

static void base_config(le_config *c)
{
	le_config_init(c);
	c->dir = dir;
	c->durability = LE_SYNC_NONE;
	c->segment_bytes = 16384;
	c->flush_ms = 5;
	c->shards = 1;
	c->overflow = LE_OVERFLOW_BLOCK;
}

/* Every record of dir as one text: seq, time, level, flags, payload,
 * fields, in order.  Reading must reach the end cleanly. */
struct dump {
	char *s;
	size_t len, cap;
};

static void dump_rec(const le_record *r, void *arg)
{
	struct dump *d = arg;
	size_t need = d->len + r->len + r->fields_len + 128;
	if (need > d->cap) {
		d->cap = need * 2;
		d->s = realloc(d->s, d->cap);
		CHECK(d->s);
	}
	d->len += (size_t)sprintf(d->s + d->len, "%" PRIu64 " %" PRIu64
	                          " %d %u|", r->seq, r->ts_ns, r->level,
	                          r->flags);
	memcpy(d->s + d->len, r->payload, r->len);
	d->len += r->len;
	if (r->fields_len)
		memcpy(d->s + d->len, r->fields, r->fields_len);
	d->len += r->fields_len;
	d->s[d->len++] = '\n';
}

static struct dump dump_dir(long *n)
{
	struct dump d = {0};
	*n = read_all(dir, LE_RECOVER_ABSOLUTE, dump_rec, &d);
	CHECK(*n > 0);
	return d;
}

/* Wait (at most 20 s) until the engine has archived at least n. */
static void wait_archived(le_engine *e, uint64_t n)
{
	le_stats st;
	for (int i = 0; i < 2000; i++) {
		le_stats_get(e, &st);
		if (st.segments_archived >= n)
			return;
		usleep(10000);
	}
	printf("  (archived %" PRIu64 " of %" PRIu64 " wanted; %" PRIu64
	       " deleted)\n", st.segments_archived, n, st.segments_deleted);
	fflush(stdout);
	CHECK(st.segments_archived >= n);
}

/* dir := a fresh log of n mixed records, closed; sd := its shard 0.
 * @return its segments. */
static int closed_log(int n, char *sd, size_t cap)
{
	le_config c;
	le_engine *e;

	need_zstd();
	t_tmpdir(dir);
	base_config(&c);
	CHECK_RC(le_open(&e, &c));
	write_mix(e, n);
	CHECK_EQ(le_close(e), 0);
	snprintf(sd, cap, "%s/shard-000", dir);
	return count_files(".seg");
}

/* Archive segments [from, to) of shard directory sd. */
static void archive_range(const char *sd, int from, int to)
{
	uint64_t in, out;
	for (int i = from; i < to; i++)
		CHECK_EQ(le__zst_archive(sd, (uint64_t)i, 3, NULL, &in, &out), 0);
}

TEST(archived_segments_read_back_the_same_records_through_the_reader_and_cat)
{
	le_config c;
	le_engine *e;
	long n0, n1;
	char cmd[4096];
	const char *cli = t_build_tool("LE_CLI", "logengine");

	need_zstd();
	t_tmpdir(dir);
	base_config(&c);
	CHECK_RC(le_open(&e, &c));
	write_mix(e, 3000);
	CHECK_EQ(le_close(e), 0);
	int segs = count_files(".seg");
	CHECK(segs >= 6);
	struct dump before = dump_dir(&n0);
	snprintf(cmd, sizeof cmd, "'%s' cat -o json '%s' >'%s/cat.before' && "
	         "'%s' cat '%s' >'%s/text.before'", cli, dir, dir, cli, dir, dir);
	CHECK_EQ(system(cmd), 0);

	/* now with the archiver: all sealed segments but the newest 2 */
	c.archive_keep_segments = 2;
	CHECK_RC(le_open(&e, &c));
	write_mix(e, 1); /* a rotation is not needed: the writer looks */
	wait_archived(e, (uint64_t)segs - 3);
	le_stats st;
	le_stats_get(e, &st);
	CHECK(st.archived_bytes_out > 0);
	CHECK(st.archived_bytes_out * 2 < st.archived_bytes_in);
	CHECK_EQ(le_close(e), 0);
	CHECK(count_files(".seg.zst") >= segs - 3);
	CHECK_EQ(count_files(".tmp"), 0);

	struct dump after = dump_dir(&n1);
	CHECK_EQ(n1, n0 + 1);
	/* the records that were there are there, byte for byte */
	CHECK(after.len > before.len);
	CHECK(memcmp(after.s, before.s, before.len) == 0);
	snprintf(cmd, sizeof cmd, "'%s' cat -o json '%s' | head -n %ld | "
	         "cmp - '%s/cat.before' && '%s' cat '%s' | head -n %ld | "
	         "cmp - '%s/text.before'", cli, dir, n0, dir, cli, dir, n0, dir);
	CHECK_EQ(system(cmd), 0);
	/* verify passes; stats counts every segment once */
	snprintf(cmd, sizeof cmd, "'%s' verify '%s' >/dev/null 2>&1", cli, dir);
	CHECK_EQ(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "'%s' stats '%s' | grep -q 'segments are "
	         "archived'", cli, dir);
	CHECK_EQ(system(cmd), 0);
	/* seeking by time into an archived segment */
	le_reader *r;
	le_record rec;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_EQ(le_reader_next(r, &rec), 1);
	CHECK_EQ(le_reader_next(r, &rec), 1);
	uint64_t t2 = rec.ts_ns;
	for (int i = 0; i < 500; i++)
		CHECK_EQ(le_reader_next(r, &rec), 1);
	uint64_t t500 = rec.ts_ns, s500 = rec.seq;
	CHECK(strstr(rec.file, ".seg.zst") != NULL);
	CHECK_RC(le_reader_seek_time(r, t500));
	CHECK_EQ(le_reader_next(r, &rec), 1);
	CHECK(rec.seq <= s500 && rec.ts_ns >= t500 && rec.ts_ns > t2);
	le_reader_close(r);
	free(before.s);
	free(after.s);
	t_rmrf(dir);
}

struct problems {
	int n;
	char file[512];
};

static void on_problem(void *arg, const char *file, uint64_t off,
                       const char *what)
{
	struct problems *p = arg;
	(void)off, (void)what;
	if (!p->n++)
		snprintf(p->file, sizeof p->file, "%s", file);
}

TEST(verify_and_the_reader_name_a_damaged_archive)
{
	le_config c;
	le_engine *e;
	char sd[300], zpath[400], cmd[4096];
	uint64_t in, out;
	const char *cli = t_build_tool("LE_CLI", "logengine");

	need_zstd();
	t_tmpdir(dir);
	base_config(&c);
	CHECK_RC(le_open(&e, &c));
	write_mix(e, 2000);
	CHECK_EQ(le_close(e), 0);
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	CHECK_EQ(le__zst_archive(sd, 2, 3, NULL, &in, &out), 0);
	snprintf(zpath, sizeof zpath, "%s/0000000000000002.seg.zst", sd);
	size_t len;
	unsigned char *z = t_slurp(zpath, &len);
	CHECK(z && len == out && len > 100);
	z[len / 2] ^= 0x40;
	CHECK_EQ(t_spit(zpath, z, len), 0);
	free(z);

	struct problems p = {0};
	le_reader_opts o;
	le_reader *r;
	le_record rec;
	int rc;
	le_reader_opts_init(&o);
	o.on_problem = on_problem;
	o.arg = &p;
	CHECK_RC(le_reader_open(&r, dir, &o));
	while ((rc = le_reader_next(r, &rec)) == 1)
		;
	le_reader_close(r);
	CHECK_EQ(rc, LE_ECORRUPT);
	CHECK(p.n >= 1);
	CHECK(strstr(p.file, "0000000000000002.seg.zst") != NULL);

	snprintf(cmd, sizeof cmd, "'%s' verify '%s' >'%s/v.out' 2>&1; "
	         "echo $? >'%s/v.rc'", cli, dir, dir, dir);
	CHECK_EQ(system(cmd), 0);
	snprintf(cmd, sizeof cmd, "%s/v.rc", dir);
	char *vrc = t_slurp_text(cmd);
	snprintf(cmd, sizeof cmd, "%s/v.out", dir);
	char *vout = t_slurp_text(cmd);
	printf("  (verify: %s)\n", vout);
	CHECK_EQ(atoi(vrc), 1);
	CHECK(strstr(vout, "0000000000000002.seg.zst") != NULL);
	CHECK(strstr(vout, "archive damaged") != NULL);
	free(vrc);
	free(vout);
	t_rmrf(dir);
}

/* ---- a crash at each step of the sequence ---- */

/* The step the child dies at, and the calls seen of it. */
enum step {
	S_WRITE,      /* after the first piece of the archive is written */
	S_DATASYNC,   /* before the archive's fdatasync */
	S_RENAME,     /* before the rename */
	S_DIRSYNC,    /* after the rename, before the directory's fsync */
	S_UNLINK,     /* before the segment's unlink */
	S_AFTER,      /* after the whole sequence */
	S_N
};
static const char *const step_name[S_N] = {
	"mid-write", "before fdatasync", "before rename",
	"before the directory fsync", "before unlink", "after unlink"};
static int crash_at;

static ssize_t cr_pwrite(int fd, const void *b, size_t n, off_t off)
{
	ssize_t rc = le__os_real.pwrite(fd, b, n, off);
	if (crash_at == S_WRITE)
		_exit(9);
	return rc;
}
static int cr_fdatasync(int fd)
{
	if (crash_at == S_DATASYNC)
		_exit(9);
	return le__os_real.fdatasync(fd);
}
static int cr_rename(const char *a, const char *b)
{
	if (crash_at == S_RENAME)
		_exit(9);
	return le__os_real.rename(a, b);
}
static int cr_fsync(int fd)
{
	if (crash_at == S_DIRSYNC)
		_exit(9);
	return le__os_real.fsync(fd);
}
static int cr_unlink(const char *p)
{
	if (crash_at == S_UNLINK)
		_exit(9);
	return le__os_real.unlink(p);
}

static void exactly_one_copy_each(int nseg)
{
	char sd[300], p[400];
	struct stat st;
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	for (int i = 1; i <= nseg; i++) {
		snprintf(p, sizeof p, "%s/%016x.seg", sd, i);
		int plain = stat(p, &st) == 0;
		snprintf(p, sizeof p, "%s/%016x.seg.zst", sd, i);
		int arc = stat(p, &st) == 0;
		CHECK_EQ(plain + arc, 1);
	}
	CHECK_EQ(count_files(".tmp"), 0);
}

TEST(a_crash_at_each_step_of_archiving_leaves_every_record_once)
{
	le_config c;
	le_engine *e;
	char sd[300];
	long n0, n1;

	need_zstd();
	t_tmpdir(dir);
	base_config(&c);
	c.segment_bytes = 1 << 20;
	CHECK_RC(le_open(&e, &c));
	write_mix(e, 80000); /* several 1 MiB segments: many pwrites each */
	CHECK_EQ(le_close(e), 0);
	int nseg = count_files(".seg");
	CHECK(nseg >= 3);
	struct dump ref = dump_dir(&n0);
	snprintf(sd, sizeof sd, "%s/shard-000", dir);

	for (int k = 0; k < S_N; k++) {
		uint64_t index = (uint64_t)(k % (nseg - 1)) + 1, in, out;
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			le__os t = le__os_real;
			t.pwrite = cr_pwrite;
			t.fdatasync = cr_fdatasync;
			t.rename = cr_rename;
			t.fsync = cr_fsync;
			t.unlink = cr_unlink;
			crash_at = k;
			le__os_install(&t);
			int rc = le__zst_archive(sd, index, 3, NULL, &in, &out);
			_exit(rc == 0 ? 0 : 3);
		}
		int ws;
		CHECK(waitpid(pid, &ws, 0) == pid);
		CHECK(WIFEXITED(ws));
		CHECK_EQ(WEXITSTATUS(ws), k == S_AFTER ? 0 : 9);
		/* what a reader sees right after the crash: every record
		 * once, in order, whichever copies exist */
		struct dump d = dump_dir(&n1);
		printf("  (crash %s, segment %" PRIu64 ": %d archives, %d "
		       "temporary files)\n", step_name[k], index,
		       count_files(".seg.zst"), count_files(".tmp"));
		CHECK_EQ(n1, n0);
		CHECK(d.len == ref.len && memcmp(d.s, ref.s, d.len) == 0);
		free(d.s);
		/* le_open tidies up: one copy of each segment, no temporary
		 * file, and still every record once */
		CHECK_RC(le_open(&e, &c));
		CHECK_EQ(le_close(e), 0);
		exactly_one_copy_each(nseg);
		d = dump_dir(&n1);
		CHECK_EQ(n1, n0);
		CHECK(d.len == ref.len && memcmp(d.s, ref.s, d.len) == 0);
		free(d.s);
	}
	free(ref.s);
	t_rmrf(dir);
}

static int fail_rename(const char *a, const char *b)
{
	(void)a, (void)b;
	errno = EIO;
	return -1;
}

static int fail_fsync(int fd)
{
	(void)fd;
	errno = EIO;
	return -1;
}

/* Archiving segment 1 with the OS table t fails with EIO, and leaves
 * the segment the only copy: no archive to outlive it, no temporary. */
static void failed_step_leaves_the_segment(const le__os *t)
{
	char sd[300];
	uint64_t in, out;

	closed_log(600, sd, sizeof sd);
	long n0 = count_records(dir);
	le__os_install(t);
	CHECK_EQ(le__zst_archive(sd, 1, 3, NULL, &in, &out), -EIO);
	le__os_install(NULL);
	CHECK_EQ(count_files(".seg.zst"), 0);
	CHECK_EQ(count_files(".tmp"), 0);
	CHECK_EQ(count_records(dir), n0);
	t_rmrf(dir);
}

TEST(a_failed_directory_fsync_leaves_the_segment_alone)
{
	le__os t = le__os_real;
	t.fsync = fail_fsync;
	failed_step_leaves_the_segment(&t);
}

TEST(a_failed_rename_leaves_the_segment_and_no_temporary_file)
{
	le__os t = le__os_real;
	t.rename = fail_rename;
	failed_step_leaves_the_segment(&t);
}

/* ---- with the engine ---- */

TEST(retention_deletes_archived_segments_by_bytes_and_by_age)
{
	le_config c;
	le_engine *e;
	le_stats st;

	need_zstd();
	t_tmpdir(dir);
	base_config(&c);
	c.archive_after_ms = 1;      /* every sealed segment */
	CHECK_RC(le_open(&e, &c));
	write_mix(e, 3000);
	int nseg = count_files(".seg");
	wait_archived(e, (uint64_t)nseg - 1);
	CHECK_EQ(le_close(e), 0);
	/* a budget that holds four plain segments */
	c.retention_bytes = 64 << 10;
	CHECK_RC(le_open(&e, &c));
	write_mix(e, 300);
	for (int i = 0; i < 500; i++) { /* the writer's next look: 1 s */
		write_mix(e, 1);
		le_stats_get(e, &st);
		if (st.segments_deleted > 0)
			break;
		usleep(10000);
	}
	CHECK(st.segments_deleted > 0);
	CHECK_EQ(le_close(e), 0);
	/* the oldest archives are gone, and what is left fits the budget
	 * (and one segment being written): archives count as the bytes
	 * they take */
	char p[400];
	struct stat sb;
	snprintf(p, sizeof p, "%s/shard-000/0000000000000001.seg.zst", dir);
	CHECK(stat(p, &sb) < 0 && errno == ENOENT);
	uint64_t on_disk = 0;
	int kept = 0;
	for (int i = 1; i < 200; i++) {
		snprintf(p, sizeof p, "%s/shard-000/%016x.seg", dir, i);
		int plain = stat(p, &sb) == 0;
		if (!plain) {
			strcat(p, ".zst");
			if (stat(p, &sb) < 0)
				continue;
		}
		on_disk += (uint64_t)sb.st_size;
		kept++;
	}
	printf("  (%d segments kept, %" PRIu64 " bytes, %" PRIu64
	       " deleted)\n", kept, on_disk, st.segments_deleted);
	fflush(stdout);
	CHECK(on_disk <= (64 << 10) + 16384);
	CHECK(kept > 4); /* more than the budget holds uncompressed */
	CHECK(count_records(dir) > 0);

	/* by age: archived segments older than retention_age_ms go */
	c.retention_bytes = 0;
	c.retention_age_ms = 1500;
	CHECK_RC(le_open(&e, &c));
	usleep(1700000);
	write_mix(e, 10);
	for (int i = 0; i < 300 && count_files(".seg.zst"); i++)
		usleep(10000);
	CHECK_EQ(count_files(".seg.zst"), 0);
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

TEST(le_close_during_a_compression_leaves_every_record_once)
{
	le_config c;
	le_engine *e;

	need_zstd();
	t_tmpdir(dir);
	base_config(&c);
	c.segment_bytes = 24 << 20;
	c.archive_after_ms = 1;
	c.archive_level = 19; /* slow: seconds for one segment */
	c.queue_capacity = 65536;
	c.queue_capacity_bytes = 16 << 20;
	c.overflow = LE_OVERFLOW_BLOCK;
	CHECK_RC(le_open(&e, &c));
	write_mix(e, 400000); /* past one segment: one sealed */
	int seen = 0;
	for (int i = 0; i < 500 && !seen; i++) {
		seen = count_files(".seg.zst.tmp");
		usleep(10000);
	}
	CHECK(seen); /* a compression in progress */
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(count_files(".tmp"), 0);
	exactly_one_copy_each(count_files(".seg") + count_files(".seg.zst"));
	CHECK_EQ(count_records(dir), 400000);
	t_rmrf(dir);
}

TEST(segments_the_forwarder_has_not_shipped_are_not_archived)
{
	le_config c;
	le_engine *e;
	char sd[300], p[400];
	le__fwd_cursor fc = {.gen = 1, .next_seq = 1, .shard = 0};

	need_zstd();
	t_tmpdir(dir);
	base_config(&c);
	c.archive_keep_segments = 1;
	c.create_dir = 1;
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	CHECK_EQ(mkdir(sd, 0750), 0);
	snprintf(p, sizeof p, "%s/FORWARD", sd);
	int fd = open(p, O_RDWR | O_CREAT, 0640);
	CHECK(fd >= 0);
	CHECK_RC(le__fwd_write(fd, &fc)); /* nothing shipped */
	CHECK_RC(le_open(&e, &c));
	write_mix(e, 3000);
	usleep(1200000); /* the writer has looked */
	CHECK_EQ(count_files(".seg.zst"), 0);
	/* shipped up to the record 1000: the segments wholly before it */
	fc.gen = 2;
	fc.next_seq = 1001;
	CHECK_RC(le__fwd_write(fd, &fc));
	close(fd);
	write_mix(e, 1);
	wait_archived(e, 1);
	CHECK_EQ(le_close(e), 0);
	/* no archive holds a record at or after 1001 */
	le_reader *r;
	le_record rec;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	while (le_reader_next(r, &rec) == 1)
		if (strstr(rec.file, ".seg.zst"))
			CHECK(rec.seq < 1001);
	le_reader_close(r);
	t_rmrf(dir);
}

TEST(vacuum_deletes_archives_by_size_and_keeps_recent_ones_by_time)
{
	char sd[300], cmd[4096];
	const char *cli = t_build_tool("LE_CLI", "logengine");

	int nseg = closed_log(3000, sd, sizeof sd);
	archive_range(sd, 1, nseg);
	CHECK_EQ(count_files(".seg.zst"), nseg - 1);
	/* every record is younger than an hour: nothing goes */
	snprintf(cmd, sizeof cmd, "'%s' vacuum --time 1h '%s' >/dev/null",
	         cli, dir);
	CHECK_EQ(system(cmd), 0);
	CHECK_EQ(count_files(".seg.zst"), nseg - 1);
	/* down to the active segment: every archive goes */
	snprintf(cmd, sizeof cmd, "'%s' vacuum --size 1 '%s' >/dev/null",
	         cli, dir);
	CHECK_EQ(system(cmd), 0);
	CHECK_EQ(count_files(".seg.zst"), 0);
	CHECK_EQ(count_files(".seg"), 1);
	t_rmrf(dir);
}

/* A crash between the archive's rename and the segment's unlink leaves
 * both names: vacuum deleting that segment deletes both, or the archive
 * would bring it back for readers. */
TEST(vacuum_deletes_both_names_a_crash_left)
{
	char sd[300], cmd[4096];
	const char *cli = t_build_tool("LE_CLI", "logengine");

	int nseg = closed_log(3000, sd, sizeof sd);
	CHECK(nseg > 3);
	archive_range(sd, 1, 2);
	/* the crash's state: the segment back beside its archive */
	snprintf(cmd, sizeof cmd, "cd '%s' && zstd -q -d -k "
	         "0000000000000001.seg.zst", sd);
	CHECK_EQ(system(cmd), 0);
	CHECK_EQ(count_files(".seg.zst"), 1);
	CHECK_EQ(count_files(".seg"), nseg);
	snprintf(cmd, sizeof cmd, "'%s' vacuum --size 1 '%s' >/dev/null",
	         cli, dir);
	CHECK_EQ(system(cmd), 0);
	CHECK_EQ(count_files(".seg.zst"), 0);
	CHECK_EQ(count_files(".seg"), 1);
	snprintf(cmd, sizeof cmd, "'%s' verify '%s' >/dev/null 2>&1", cli, dir);
	CHECK_EQ(system(cmd), 0);
	t_rmrf(dir);
}

/* le_tail goes on from a segment into the next one's archive. */
TEST(tail_reads_on_through_archived_segments)
{
	char sd[300];
	le_record rec;
	long want, got = 0;

	int nseg = closed_log(3000, sd, sizeof sd);
	struct dump d = dump_dir(&want);
	free(d.s);
	archive_range(sd, 1, nseg);
	le_tail *t = NULL;
	CHECK_RC(le_tail_open(&t, dir, 0, 1, 0));
	int rc;
	while ((rc = le_tail_next(t, &rec)) == 1)
		got++;
	CHECK_EQ(rc, 0);
	CHECK_EQ(got, want);
	le_tail_close(t);
	t_rmrf(dir);
}

/* The lowest segment number named in shard 0 (.seg or .seg.zst). */
static uint64_t lowest_named(void)
{
	char sd[400];
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	DIR *d = opendir(sd);
	struct dirent *de;
	uint64_t lo = UINT64_MAX;
	while (d && (de = readdir(d))) {
		const char *nm = de->d_name;
		if (strspn(nm, "0123456789abcdef") != 16 ||
		    (strcmp(nm + 16, ".seg") && strcmp(nm + 16, ".seg.zst")))
			continue;
		uint64_t i = strtoull(nm, NULL, 16);
		lo = i < lo ? i : lo;
	}
	if (d)
		closedir(d);
	return lo;
}

/* Retention deleting segments while the archiver compresses them: no
 * deleted segment's archive ever appears (a reader would meet it in the
 * middle of the chain and report a sequence gap), so the lowest segment
 * named never goes down; and readers meet no gap. */
static _Atomic int race_stop;

/* Writes as fast as it can, but lets the archiver come within two
 * segments of the writer (waiting at most 200 ms a segment): without
 * that, on a loaded machine retention deletes every segment before its
 * archive is done, and the race with a segment being archived while
 * deleted, which this test is about, never happens. */
static void *race_write(void *arg)
{
	le_engine *e = arg;
	char b[120];
	uint64_t made = 0;
	for (long i = 0; !atomic_load(&race_stop); i++) {
		int k = snprintf(b, sizeof b, "record %ld of the race, padded "
		                 "to make segments fill ..................", i);
		le_write(e, 0, LE_INFO, b, (size_t)k);
		if (i % 64)
			continue;
		le_stats st;
		le_stats_get(e, &st);
		if (st.segments_created == made)
			continue;
		made = st.segments_created;
		for (int w = 0; w < 200 && !atomic_load(&race_stop); w++) {
			le_stats_get(e, &st);
			if (st.segments_archived + st.segments_deleted + 3 >=
			    st.segments_created)
				break;
			usleep(1000);
		}
	}
	return NULL;
}

TEST(retention_and_the_archiver_never_show_a_reader_a_gap)
{
	le_config c;
	le_engine *e;
	pthread_t w;

	need_zstd();
	t_tmpdir(dir);
	base_config(&c);
	c.archive_keep_segments = 1;
	c.retention_bytes = 100000;
	CHECK_RC(le_open(&e, &c));
	atomic_store(&race_stop, 0);
	CHECK(pthread_create(&w, NULL, race_write, e) == 0);
	int passes = 0, gaps = 0, back = 0;
	uint64_t low = 0;
	/* At least 4 s, and on until both have happened (at most 60 s). */
	time_t start = time(NULL);
	le_stats st;
	for (;; passes++) {
		le_stats_get(e, &st);
		if (time(NULL) >= start + 60 ||
		    (time(NULL) >= start + 4 && st.segments_archived > 0 &&
		     st.segments_deleted > 0))
			break;
		for (int k = 0; k < 20; k++) {
			uint64_t l = lowest_named();
			if (l != UINT64_MAX && l < low && !back++)
				fprintf(stderr, "  segment %" PRIu64 " named after "
				        "%" PRIu64 " was the lowest\n", l, low);
			if (l != UINT64_MAX && l > low)
				low = l;
		}
		le_reader *r = NULL;
		le_reader_opts o;
		le_record rec;
		le_reader_opts_init(&o);
		o.mode = LE_RECOVER_ABSOLUTE;
		if (le_reader_open(&r, dir, &o) != 0)
			continue; /* a segment gone under the open */
		int rc;
		while ((rc = le_reader_next(r, &rec)) == 1)
			;
		if (rc < 0 && strstr(le_errmsg(), "sequence gap")) {
			if (!gaps++)
				fprintf(stderr, "  %s\n", le_errmsg());
		}
		le_reader_close(r);
	}
	atomic_store(&race_stop, 1);
	pthread_join(w, NULL);
	CHECK_RC(le_close_stats(e, &st));
	fprintf(stderr, "  %d passes, %d with a gap, %d deleted segments "
	        "named again; %" PRIu64 " archived, %" PRIu64 " deleted\n",
	        passes, gaps, back, st.segments_archived, st.segments_deleted);
	CHECK(st.segments_archived > 0 && st.segments_deleted > 0);
	CHECK_EQ(gaps, 0);
	CHECK_EQ(back, 0);
	t_rmrf(dir);
}

TEST(bad_archive_settings_name_their_field)
{
	le_config c;
	le_engine *e;

	t_tmpdir(dir);
	base_config(&c);
	c.archive_level = 20;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "archive_level") != NULL);
	c.archive_level = -1;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "archive_level") != NULL);
	/* ages that would wrap when made nanoseconds */
	c.archive_level = 0;
	c.archive_after_ms = UINT64_MAX / 1000;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "archive_after_ms") != NULL);
	c.archive_after_ms = 0;
	c.retention_age_ms = UINT64_MAX / 1000;
	CHECK_EQ(le_open(&e, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "retention_age_ms") != NULL);
	t_rmrf(dir);
}

/* An archive of no content (its frame says 0 bytes) whose checksum does
 * not match its blocks: nothing had to be decompressed, and the damage
 * was once taken for an empty segment. */
TEST(an_empty_archive_with_a_wrong_checksum_is_refused)
{
	/* zstd frame: content size 0, one empty raw block, checksum
	 * 0x51e0e999, one bit off the empty content's 0x51d8e999
	 * (tests/fuzz/corpus/zst/empty-bad-check) */
	static const unsigned char z[] = {0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x00,
	                                  0x01, 0x00, 0x00, 0x99, 0xe9, 0xe0,
	                                  0x51};
	char sd[300], seg[400], zpath[420];
	const char *why = NULL;
	int archived = 0;

	need_zstd();
	t_tmpdir(dir);
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	CHECK_EQ(mkdir(sd, 0750), 0);
	snprintf(seg, sizeof seg, "%s/0000000000000002.seg", sd);
	snprintf(zpath, sizeof zpath, "%s.zst", seg);
	CHECK_EQ(t_spit(zpath, z, sizeof z), 0);
	CHECK_EQ(le__seg_open_read(seg, &archived, &why), LE_ECORRUPT);
	CHECK(archived);
	CHECK(why && strstr(why, "checksum") != NULL);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	t_allow_jobs(); /* each test: its own log directory */
	RUN(archived_segments_read_back_the_same_records_through_the_reader_and_cat);
	RUN(verify_and_the_reader_name_a_damaged_archive);
	RUN(a_crash_at_each_step_of_archiving_leaves_every_record_once);
	RUN(a_failed_rename_leaves_the_segment_and_no_temporary_file);
	RUN(a_failed_directory_fsync_leaves_the_segment_alone);
	RUN(retention_deletes_archived_segments_by_bytes_and_by_age);
	RUN(le_close_during_a_compression_leaves_every_record_once);
	RUN(segments_the_forwarder_has_not_shipped_are_not_archived);
	RUN(vacuum_deletes_archives_by_size_and_keeps_recent_ones_by_time);
	RUN(vacuum_deletes_both_names_a_crash_left);
	RUN(tail_reads_on_through_archived_segments);
	RUN(retention_and_the_archiver_never_show_a_reader_a_gap);
	RUN(bad_archive_settings_name_their_field);
	RUN(an_empty_archive_with_a_wrong_checksum_is_refused);
	return t_done();
}
