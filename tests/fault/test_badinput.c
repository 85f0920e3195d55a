/*
 * test_badinput.c -- the bad-input half of the reliability matrix
 * (DESIGN.md), against logs the engine itself wrote: a real log is made
 * with le_open / le_write / le_close, damaged on disk, then
 *
 *   read back with le_reader_* in every recovery mode: never a crash, never
 *     a record that differs from what was written, and exactly the records
 *     the mode promises;
 *   checked with `logengine verify` (exit status, the offset it names);
 *   reopened with le_open, appended to and closed: then the whole log must
 *     read back with nothing lost that was readable, nothing duplicated, and
 *     sequence numbers that continue after the last record that survived.
 *
 * Record k of a shard (sequence k) always carries payload_of(shard, k), so
 * "every record's payload is payload_of(its shard, its seq) and the seqs are
 * 1..n in order" says at once: complete, not duplicated, not reordered,
 * continuous, and not altered.
 *
 * The damage: a segment truncated at every byte; zero and garbage tails of
 * several sizes; a bit flipped at every byte; absurd size words; a valid
 * frame copied to the wrong offset, segment and shard; a checkpoint damaged
 * at every byte, cut at every length, and lying (a later segment, an offset
 * past the end, a sequence ahead of the log, a frame inside a payload);
 * a segment file under another segment's name.
 */
#include "unit/segfile.h"
#include "unit/probs.h"
#include "unit/allocwatch.h"

#include <fcntl.h>

#include "logengine.h"
#include "store/segment.h"


#define MAX_FRAMES 4096
#define N_REC 5 /* records in the small logs */

/* ---- payloads ---- */

/* The payload of record `seq` of `shard`: lengths vary with seq, so a
 * frame copied elsewhere never fits the chain of sizes by chance. */
static size_t payload_of(char *buf, size_t cap, uint32_t shard, uint64_t seq)
{
	int n = snprintf(buf, cap, "s%u r%" PRIu64 " ", shard, seq);
	for (uint64_t i = 0; i < (seq * 5) % 17 && (size_t)n + 1 < cap; i++)
		buf[n++] = (char)('a' + i);
	buf[n] = '\0';
	return (size_t)n;
}

/* ---- making real logs ---- */

static le_config cfg_for(const char *dir, unsigned shards)
{
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.shards = shards;
	c.durability = LE_SYNC_NONE;
	c.queue_capacity = 1024;
	c.queue_capacity_bytes = 1u << 20;
	c.max_record_bytes = 4096;
	c.max_pending_bytes = 64u << 10;
	/* Small: blocks are reserved up to segment_bytes ahead, which costs
	 * milliseconds per open on tmpfs at the 64 MiB default. */
	c.segment_bytes = 1u << 20;
	return c;
}

static le_engine *open_or_die(const le_config *c)
{
	le_engine *e = NULL;
	int rc = le_open(&e, c);
	if (rc < 0) {
		fprintf(stderr, "  le_open(%s): %s (%s)\n", c->dir,
		        le_strerror(rc), le_errmsg());
		_exit(1);
	}
	return e;
}

/* Write records first..first+n-1 of each shard (their payloads say the
 * sequence each should get), flush, close. */
static void write_range_cfg(const le_config *c, uint64_t first, int n)
{
	char p[128];
	le_engine *e = open_or_die(c);
	for (int i = 0; i < n; i++)
		for (uint32_t s = 0; s < c->shards; s++) {
			size_t len = payload_of(p, sizeof p, s,
			                        first + (uint64_t)i);
			CHECK_EQ(le_write(e, s, LE_INFO, p, len), 0);
		}
	CHECK_EQ(le_flush(e, 10000), 0);
	CHECK_EQ(le_close(e), 0);
}

static void write_range(const char *dir, uint64_t first, int n)
{
	le_config c = cfg_for(dir, 1);
	write_range_cfg(&c, first, n);
}

static void seg_file(char *buf, size_t cap, const char *dir, uint32_t shard,
                     uint64_t index)
{
	t_seg_path(buf, cap, dir, shard, index);
}

static void ckpt_file(char *buf, size_t cap, const char *dir, uint32_t shard)
{
	snprintf(buf, cap, "%s/shard-%03u/CHECKPOINT", dir, shard);
}

static unsigned char *slurp_or_die(const char *path, size_t *len)
{
	unsigned char *b = t_slurp(path, len);
	if (!b) {
		perror(path);
		_exit(1);
	}
	return b;
}

static void spit_or_die(const char *path, const void *p, size_t len)
{
	if (t_spit(path, p, len) != 0) {
		perror(path);
		_exit(1);
	}
}

/* Remove every file of every shard directory except those the test puts
 * back itself; keep the directories.  (Faster than rm -rf per case.) */
static void clear_shards(const char *dir)
{
	char sd[512], path[1024];
	for (uint32_t s = 0; s < 4; s++) {
		snprintf(sd, sizeof sd, "%s/shard-%03u", dir, s);
		DIR *d = opendir(sd);
		struct dirent *de;
		if (!d)
			continue;
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "%s/%s", sd, de->d_name);
			unlink(path);
		}
		closedir(d);
	}
}

/* Frame offsets of a segment image: off[0..n] (off[n] = end of the last
 * whole frame). */
static int frame_offsets(const unsigned char *img, size_t len, size_t *off)
{
	int n = 0;
	size_t o = LE_SEG_HDR;
	while (len - o >= 4 && n < MAX_FRAMES - 1) {
		uint32_t size = le__get32(img + o);
		if (size == 0 || o + 4 + size > len)
			break;
		off[n++] = o;
		o += 4 + (size_t)size;
	}
	off[n] = o;
	return n;
}

/* ---- reading back ---- */

typedef struct rec {
	uint64_t seq, off;
	uint32_t shard;
	int ok;             /* payload is payload_of(shard, seq) */
	char file[32];      /* "shard-NNN/IIII...IIII.seg" */
} rec;

typedef struct got {
	rec *r;
	int n, cap;
	int rc;
	t_probs pr;
} got;

static void read_all(got *g, const char *dir, int mode)
{
	le_reader_opts o;
	le_reader *r;
	le_record lr;
	char p[128];
	int rc;

	memset(g, 0, sizeof *g);
	le_reader_opts_init(&o);
	o.mode = mode;
	o.on_problem = t_probs_note;
	o.arg = &g->pr;
	CHECK_RC(le_reader_open(&r, dir, &o));
	while ((rc = le_reader_next(r, &lr)) > 0) {
		if (g->n == g->cap) {
			g->cap = g->cap ? 2 * g->cap : 64;
			g->r = realloc(g->r, (size_t)g->cap * sizeof *g->r);
			CHECK(g->r);
		}
		rec *x = &g->r[g->n++];
		size_t len = payload_of(p, sizeof p, lr.shard, lr.seq);
		x->seq = lr.seq;
		x->off = lr.offset;
		x->shard = lr.shard;
		x->ok = lr.len == len && memcmp(lr.payload, p, len) == 0 &&
		        lr.level == LE_INFO && lr.flags == 0;
		const char *f = strstr(lr.file, "shard-");
		snprintf(x->file, sizeof x->file, "%s", f ? f : "?");
	}
	g->rc = rc;
	le_reader_close(r);
}

static void got_free(got *g)
{
	free(g->r);
	memset(g, 0, sizeof *g);
}

/* Every record returned is one that was written (payload matches seq). */
static void check_all_original(const got *g)
{
	for (int i = 0; i < g->n; i++)
		if (!g->r[i].ok) {
			fprintf(stderr, "  record %d (shard %u seq %" PRIu64
			        ") is not what was written\n", i,
			        g->r[i].shard, g->r[i].seq);
			CHECK(g->r[i].ok);
		}
}

/* Shard `shard` reads back exactly as seqs 1..n, in order, unaltered. */
static void check_complete(const got *g, uint32_t shard, uint64_t n)
{
	uint64_t next = 1;
	check_all_original(g);
	for (int i = 0; i < g->n; i++) {
		if (g->r[i].shard != shard)
			continue;
		if (g->r[i].seq != next)
			fprintf(stderr, "  shard %u: record %d has seq %" PRIu64
			        ", expected %" PRIu64 "\n", shard, i,
			        g->r[i].seq, next);
		CHECK_EQ(g->r[i].seq, next);
		next++;
	}
	CHECK_EQ(next - 1, n);
}

/* The whole log (one shard) must read in ABSOLUTE mode without a problem
 * as records 1..n. */
static void check_log_is(const char *dir, uint64_t n)
{
	got g;
	read_all(&g, dir, LE_RECOVER_ABSOLUTE);
	if (g.rc != 0 || g.pr.n != 0)
		fprintf(stderr, "  ABSOLUTE read: rc %d, %d problems, first: "
		        "%s\n", g.rc, g.pr.n, g.pr.n ? g.pr.what[0] : "-");
	CHECK_EQ(g.rc, 0);
	CHECK_EQ(g.pr.n, 0);
	check_complete(&g, 0, n);
	got_free(&g);
}

/* Reopen dir, append records first..first+n-1, close. */
static void reopen_append(const char *dir, uint64_t first, int n)
{
	write_range(dir, first, n);
}

/* ---- the CLI ---- */

static const char *cli(void)
{
	return t_build_tool("LE_CLI", "logengine");
}

/* Run `logengine verify DIR`; its stdout in out (NUL-terminated).
 * @return the exit status. */
static int verify(const char *dir, char *out, size_t cap)
{
	char cmd[1200], tmp[600];
	int st;

	if (access(cli(), X_OK) != 0) {
		fprintf(stderr, "  %s: not built (set LE_CLI or BUILD)\n", cli());
		_exit(1);
	}
	snprintf(tmp, sizeof tmp, "%s.verify-out", dir);
	snprintf(cmd, sizeof cmd, "'%s' verify '%s' >'%s' 2>&1", cli(), dir,
	         tmp);
	st = system(cmd);
	CHECK(st != -1 && WIFEXITED(st));
	size_t len = 0;
	unsigned char *b = slurp_or_die(tmp, &len);
	if (len >= cap)
		len = cap - 1;
	memcpy(out, b, len);
	out[len] = '\0';
	free(b);
	unlink(tmp);
	return WEXITSTATUS(st);
}

/* The offset in verify's first problem line "FILE: offset N: WHAT". */
static long long first_offset(const char *out)
{
	const char *p = strstr(out, ": offset ");
	return p ? atoll(p + 9) : -1;
}

/* ---- a one-shard, one-segment log and its image ---- */

typedef struct img {
	char dir[256], seg[512], ck[512];
	unsigned char *seg_b, *ck_b;
	size_t seg_len, ck_len;
	size_t off[MAX_FRAMES];
	int n; /* frames */
} img;

static void img_make(img *m, int n_rec)
{
	t_tmpdir(m->dir);
	write_range(m->dir, 1, n_rec);
	seg_file(m->seg, sizeof m->seg, m->dir, 0, 1);
	ckpt_file(m->ck, sizeof m->ck, m->dir, 0);
	m->seg_b = slurp_or_die(m->seg, &m->seg_len);
	m->ck_b = slurp_or_die(m->ck, &m->ck_len);
	m->n = frame_offsets(m->seg_b, m->seg_len, m->off);
	CHECK_EQ(m->n, n_rec);
	CHECK_EQ(m->off[m->n], m->seg_len);
}

/* Put back the segment as given (len bytes of p) and the checkpoint as
 * written; nothing else in the shard directory. */
static void img_put(const img *m, const void *p, size_t len)
{
	clear_shards(m->dir);
	spit_or_die(m->seg, p, len);
	spit_or_die(m->ck, m->ck_b, m->ck_len);
}

static void img_free(img *m)
{
	free(m->seg_b);
	free(m->ck_b);
	t_rmrf(m->dir);
}

/* Whole frames before byte `cut`. */
static int whole_before(const img *m, size_t cut)
{
	int k = 0;
	while (k < m->n && m->off[k + 1] <= cut)
		k++;
	return k;
}

/* ======================================================================
 * Truncation
 * ==================================================================== */

/* Cut the segment at every byte: every mode reads exactly the whole
 * records before the cut (a crash mid-append loses only the record being
 * written); only ABSOLUTE complains, and only when the cut is not at a
 * frame boundary; verify agrees. */
TEST(truncated_segment_reads_as_its_whole_record_prefix_in_every_mode)
{
	img m;
	got g;
	char out[4096];

	img_make(&m, N_REC);
	for (size_t cut = 0; cut <= m.seg_len; cut++) {
		img_put(&m, m.seg_b, cut);
		int k = whole_before(&m, cut);
		int clean = cut == LE_SEG_HDR || (cut >= LE_SEG_HDR &&
		                                  m.off[k] == cut);
		for (int mode = 0; mode < 4; mode++) {
			read_all(&g, m.dir, mode);
			check_all_original(&g);
			if (g.n != k)
				fprintf(stderr, "  cut %zu, mode %d: %d records, "
				        "expected %d\n", cut, mode, g.n, k);
			CHECK_EQ(g.n, k);
			check_complete(&g, 0, (uint64_t)k);
			if (mode == LE_RECOVER_ABSOLUTE)
				CHECK_EQ(g.rc, clean ? 0 : LE_ECORRUPT);
			else
				CHECK_EQ(g.rc, 0);
			CHECK_EQ(g.pr.n, clean ? 0 : 1);
			/* (ABSOLUTE and POINT_IN_TIME do not look ahead to
			 * tell a torn tail from damage: they stop either way.) */
			if (!clean && (mode == LE_RECOVER_TOLERATE_TAIL ||
			               mode == LE_RECOVER_SKIP))
				CHECK(strstr(g.pr.what[0], "torn tail"));
			got_free(&g);
		}
		/* verify: at frame boundaries and around them (each run is a
		 * process; every byte would triple the test's time). */
		if (cut < 2 || cut == LE_SEG_HDR - 1 || clean ||
		    (cut > 0 && m.off[whole_before(&m, cut - 1)] == cut - 1)) {
			int st = verify(m.dir, out, sizeof out);
			CHECK_EQ(st, clean ? 0 : 1);
			if (!clean && cut >= LE_SEG_HDR)
				CHECK_EQ(first_offset(out), (long long)m.off[k]);
		}
	}
	img_free(&m);
}

/* Cut inside a frame (or at its boundary), then le_open: the torn frame is
 * cut off and the next record takes the sequence number after the last
 * whole one -- the CHECKPOINT the engine wrote claims more, and must not
 * be believed. */
TEST(truncated_segment_reopens_after_its_last_whole_record)
{
	img m;
	char p[128];

	img_make(&m, N_REC);
	for (size_t cut = LE_SEG_HDR; cut <= m.seg_len; cut++) {
		img_put(&m, m.seg_b, cut);
		int k = whole_before(&m, cut);
		le_config c = cfg_for(m.dir, 1);
		le_engine *e = open_or_die(&c);
		le_stats st;
		CHECK_RC(le_stats_get(e, &st));
		CHECK_EQ(st.recovered_truncated_bytes, cut - m.off[k]);
		for (uint64_t q = (uint64_t)k + 1; q <= (uint64_t)k + 2; q++) {
			size_t len = payload_of(p, sizeof p, 0, q);
			CHECK_EQ(le_write(e, 0, LE_INFO, p, len), 0);
		}
		CHECK_EQ(le_close(e), 0);
		check_log_is(m.dir, (uint64_t)k + 2);
	}
	img_free(&m);
}

/* A crash while a segment's header was being written leaves fewer than 64
 * bytes.  The reader calls that a torn tail ("segment never completed"),
 * and no record can have been in it; le_open must treat it the same way:
 * after appending, the log reads cleanly and numbering starts after the
 * records that exist (none here), not after what the checkpoint claims. */
TEST(segment_torn_inside_its_header_reopens_cleanly)
{
	img m;
	int bad = 0;

	img_make(&m, N_REC);
	for (size_t cut = 0; cut < LE_SEG_HDR; cut++) {
		img_put(&m, m.seg_b, cut);
		reopen_append(m.dir, 1, 2);
		got g;
		read_all(&g, m.dir, LE_RECOVER_ABSOLUTE);
		int ok = g.rc == 0 && g.pr.n == 0 && g.n == 2 &&
		         g.r[0].seq == 1 && g.r[1].seq == 2 && g.r[0].ok &&
		         g.r[1].ok;
		/* Say what the first few cuts did, then fail once. */
		if (!ok && bad < 3)
			fprintf(stderr, "  header cut at %zu: ABSOLUTE read "
			        "rc %d, %d problems (%s), %d records, seqs %"
			        PRIu64 "..\n", cut, g.rc, g.pr.n,
			        g.pr.n ? g.pr.what[0] : "-", g.n,
			        g.n ? g.r[0].seq : 0);
		bad += !ok;
		got_free(&g);
	}
	if (bad)
		fprintf(stderr, "  %d of %d header cuts fail\n", bad,
		        LE_SEG_HDR);
	CHECK_EQ(bad, 0);
	img_free(&m);
}

/* ======================================================================
 * Zero-filled and garbage tails
 * ==================================================================== */

static void tail_case(int garbage)
{
	/* Below a size word, one, one frame header and around it, a page,
	 * and past the scanner's first 64 KiB window. */
	static const size_t sizes[] = {1, 3, 4, 5, 27, 28, 29, 512, 4096,
	                               65536 + 7};
	img m;
	got g;
	char out[4096];

	img_make(&m, N_REC);
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t extra = sizes[i];
		unsigned char *b = malloc(m.seg_len + extra);
		CHECK(b);
		memcpy(b, m.seg_b, m.seg_len);
		if (garbage)
			t_fill_random(b + m.seg_len, extra, 1000 + extra);
		else
			memset(b + m.seg_len, 0, extra);
		img_put(&m, b, m.seg_len + extra);

		for (int mode = 0; mode < 4; mode++) {
			read_all(&g, m.dir, mode);
			check_complete(&g, 0, N_REC);
			CHECK_EQ(g.pr.n, 1);
			CHECK_EQ(g.pr.off[0], m.seg_len);
			CHECK_EQ(g.rc, mode == LE_RECOVER_ABSOLUTE ? LE_ECORRUPT
			                                           : 0);
			got_free(&g);
		}
		CHECK_EQ(verify(m.dir, out, sizeof out), 1);
		CHECK_EQ(first_offset(out), (long long)m.seg_len);

		le_config c = cfg_for(m.dir, 1);
		le_engine *e = open_or_die(&c);
		le_stats st;
		CHECK_RC(le_stats_get(e, &st));
		CHECK_EQ(st.recovered_truncated_bytes, extra);
		CHECK_EQ(le_close(e), 0);
		reopen_append(m.dir, N_REC + 1, 2);
		check_log_is(m.dir, N_REC + 2);
		CHECK_EQ(verify(m.dir, out, sizeof out), 0);
		free(b);
	}
	img_free(&m);
}

TEST(zero_filled_tail_of_any_size_is_ignored_then_cut_at_open)
{
	tail_case(0);
}

TEST(garbage_tail_of_any_size_is_ignored_then_cut_at_open)
{
	tail_case(1);
}

/* ======================================================================
 * Bit flips
 * ==================================================================== */

/* Which frame holds byte i: -1 for the header. */
static int frame_at(const img *m, size_t i)
{
	int k = -1;
	for (int j = 0; j < m->n; j++)
		if (i >= m->off[j])
			k = j;
	return k;
}

/* One bit flipped at any byte: verify exits 1 and its first problem lies
 * in the damaged frame (offset 0 for the header); SKIP mode returns every
 * record but the damaged one (all of them are behind a damaged header).
 * verify prints exactly what a SKIP reader reports: the offset is checked
 * through the reader at every byte, and through the CLI itself at every
 * byte too -- but at every fifth under ASan and TSan, where each run of the
 * instrumented CLI costs tens of milliseconds. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CLI_STRIDE 5
#else
#define CLI_STRIDE 1
#endif
TEST(bit_flip_at_every_byte_is_reported_within_its_frame)
{
	img m;
	got g;
	char out[4096];

	img_make(&m, N_REC);
	unsigned char *b = malloc(m.seg_len);
	CHECK(b);
	for (size_t i = 0; i < m.seg_len; i++) {
		int k = frame_at(&m, i);
		long long lo = k < 0 ? 0 : (long long)m.off[k];
		long long hi = k < 0 ? 1 : (long long)m.off[k + 1];
		memcpy(b, m.seg_b, m.seg_len);
		b[i] ^= (unsigned char)(1u << (i % 8));
		img_put(&m, b, m.seg_len);

		read_all(&g, m.dir, LE_RECOVER_SKIP);
		CHECK_EQ(g.rc, 0);
		check_all_original(&g);
		CHECK_EQ(g.n, k < 0 ? 0 : N_REC - 1);
		for (int j = 0; j < g.n; j++)
			CHECK(g.r[j].seq != (uint64_t)k + 1);
		CHECK(g.pr.n >= 1);
		long long at = (long long)g.pr.off[0];
		if (at < lo || at >= hi)
			fprintf(stderr, "  flip at %zu (frame %d): first "
			        "problem at %lld: %s\n", i, k, at,
			        g.pr.what[0]);
		CHECK(at >= lo && at < hi);
		got_free(&g);

		if (i % CLI_STRIDE != 0 && i != m.seg_len - 1)
			continue;
		int st = verify(m.dir, out, sizeof out);
		at = first_offset(out);
		if (st != 1 || at < lo || at >= hi)
			fprintf(stderr, "  flip at %zu (frame %d): verify exit "
			        "%d, first offset %lld:\n%s", i, k, st, at, out);
		CHECK_EQ(st, 1);
		CHECK(at >= lo && at < hi);
	}
	free(b);
	img_free(&m);
}

/* After a flip anywhere, le_open must keep every record a reader can still
 * find, and number new ones after every sequence in the file (a damaged
 * middle keeps the file whole; a damaged last frame is a torn tail). */
TEST(bit_flip_at_every_byte_never_makes_le_open_lose_records)
{
	img m;
	got g;

	img_make(&m, N_REC);
	unsigned char *b = malloc(m.seg_len);
	CHECK(b);
	for (size_t i = 0; i < m.seg_len; i++) {
		int k = frame_at(&m, i);
		memcpy(b, m.seg_b, m.seg_len);
		b[i] ^= (unsigned char)(1u << ((i + 3) % 8));
		img_put(&m, b, m.seg_len);

		le_config c = cfg_for(m.dir, 1);
		le_engine *e = open_or_die(&c);
		CHECK_RC(le_write(e, 0, LE_INFO, "appended", 8));
		CHECK_EQ(le_close(e), 0);

		read_all(&g, m.dir, LE_RECOVER_SKIP);
		CHECK_EQ(g.rc, 0);
		int old = 0, appended = 0;
		uint64_t last = 0;
		for (int j = 0; j < g.n; j++) {
			CHECK(g.r[j].seq > last); /* increasing: no duplicate */
			last = g.r[j].seq;
			if (g.r[j].ok)
				old++;
			else
				appended++;
		}
		/* What SKIP found before the open, it finds after. */
		CHECK_EQ(old, k < 0 ? 0 : N_REC - 1);
		CHECK_EQ(appended, 1);
		/* Numbered after every frame of the file -- except when the
		 * flip hit the last frame: that is a torn tail, cut at open,
		 * and its number is the next one's again. */
		CHECK_EQ(last, k == N_REC - 1 ? N_REC : N_REC + 1);
		got_free(&g);
	}
	free(b);
	img_free(&m);
}

/* ======================================================================
 * Absurd lengths
 * ==================================================================== */

/* Room for a 1 MiB read window, a writer's buffers and a small queue
 * (limits taken after a warm-up cycle, so thread stacks and TSC
 * calibration are already paid for); not for a 16 MiB frame, let alone a
 * 4 GiB one. */
#define ALLOC_SLACK (12u << 20)

TEST(absurd_length_never_allocates_absurdly)
{
	img m;
	got g;
	char out[4096];

	img_make(&m, N_REC);
	const uint32_t words[] = {
		0xFFFFFFFFu,                /* all ones */
		LE_FRAME_MAX + 1,           /* just above the maximum */
		LE_FRAME_MAX,               /* the maximum: past the file */
		(uint32_t)m.seg_len * 2,    /* in range, past the file */
	};
	const int at[] = {2, N_REC - 1}; /* a middle frame, the last */
	unsigned char *b = malloc(m.seg_len);
	CHECK(b);

	/* Warm up: one full cycle before the limit goes on. */
	img_put(&m, m.seg_b, m.seg_len);
	read_all(&g, m.dir, LE_RECOVER_SKIP);
	got_free(&g);
	write_range(m.dir, N_REC + 1, 1);
	for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
		for (int a = 0; a < 2; a++) { /* verify runs unlimited */
			memcpy(b, m.seg_b, m.seg_len);
			le__put32(b + m.off[at[a]], words[w]);
			img_put(&m, b, m.seg_len);
			CHECK_EQ(verify(m.dir, out, sizeof out), 1);
			CHECK_EQ(first_offset(out), (long long)m.off[at[a]]);
		}

	t_watch_allocations(ALLOC_SLACK);
	for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
		for (int a = 0; a < 2; a++) {
			int k = at[a], last = k == N_REC - 1;
			memcpy(b, m.seg_b, m.seg_len);
			le__put32(b + m.off[k], words[w]);
			img_put(&m, b, m.seg_len);
			for (int mode = 0; mode < 4; mode++) {
				read_all(&g, m.dir, mode);
				check_all_original(&g);
				int want = mode == LE_RECOVER_SKIP ? N_REC - 1 : k;
				CHECK_EQ(g.n, want);
				CHECK_EQ(g.pr.n, 1);
				CHECK_EQ(g.pr.off[0], m.off[k]);
				got_free(&g);
			}
			/* le_open: a torn tail is cut, damage kept whole. */
			le_config c = cfg_for(m.dir, 1);
			le_engine *e = open_or_die(&c);
			le_stats st;
			CHECK_RC(le_stats_get(e, &st));
			CHECK_EQ(st.recovered_truncated_bytes,
			         last ? m.seg_len - m.off[k] : 0);
			CHECK_RC(le_write(e, 0, LE_INFO, "appended", 8));
			CHECK_EQ(le_close(e), 0);
			read_all(&g, m.dir, LE_RECOVER_SKIP);
			CHECK_EQ(g.n, N_REC); /* N_REC - 1 old, 1 new */
			CHECK_EQ(g.r[g.n - 1].seq, last ? N_REC : N_REC + 1);
			got_free(&g);
		}
	}
#if defined(__SANITIZE_ADDRESS__)
	if (t_max_alloc > (2u << 20))
		fprintf(stderr, "  largest allocation: %zu bytes\n", t_max_alloc);
	CHECK(t_max_alloc <= (2u << 20)); /* the 1 MiB window and change */
#endif
	free(b);
	img_free(&m);
}

/* ======================================================================
 * Valid frames in the wrong place
 * ==================================================================== */

/* A copy of frame 1 spliced in after frame 3: the reader names its
 * offset, SKIP returns each record exactly once, le_open keeps the file
 * whole and numbers on after it. */
TEST(frame_copied_to_wrong_offset_is_detected)
{
	img m;
	got g;
	char out[4096];

	img_make(&m, N_REC);
	size_t f1 = m.off[1], n1 = m.off[2] - m.off[1], at = m.off[4];
	unsigned char *b = malloc(m.seg_len + n1);
	CHECK(b);
	memcpy(b, m.seg_b, at);
	memcpy(b + at, m.seg_b + f1, n1);
	memcpy(b + at + n1, m.seg_b + at, m.seg_len - at);
	img_put(&m, b, m.seg_len + n1);

	read_all(&g, m.dir, LE_RECOVER_TOLERATE_TAIL);
	CHECK_EQ(g.rc, LE_ECORRUPT);
	CHECK_EQ(g.n, 4);
	CHECK_EQ(g.pr.off[0], at);
	CHECK(strstr(g.pr.what[0], "sequence"));
	got_free(&g);
	read_all(&g, m.dir, LE_RECOVER_SKIP);
	CHECK_EQ(g.rc, 0);
	check_complete(&g, 0, N_REC);
	got_free(&g);
	CHECK_EQ(verify(m.dir, out, sizeof out), 1);
	CHECK_EQ(first_offset(out), (long long)at);

	reopen_append(m.dir, N_REC + 1, 2);
	read_all(&g, m.dir, LE_RECOVER_SKIP);
	CHECK_EQ(g.rc, 0);
	check_complete(&g, 0, N_REC + 2);
	got_free(&g);

	/* The same copy appended at the end is a torn tail: cut at open. */
	memcpy(b, m.seg_b, m.seg_len);
	memcpy(b + m.seg_len, m.seg_b + f1, n1);
	img_put(&m, b, m.seg_len + n1);
	read_all(&g, m.dir, LE_RECOVER_TOLERATE_TAIL);
	CHECK_EQ(g.rc, 0);
	check_complete(&g, 0, N_REC);
	CHECK_EQ(g.pr.n, 1);
	CHECK_EQ(g.pr.off[0], m.seg_len);
	got_free(&g);
	reopen_append(m.dir, N_REC + 1, 2);
	check_log_is(m.dir, N_REC + 2);
	free(b);
	img_free(&m);
}

/* A log of two shards and several segments (rotation at 4 KiB). */
typedef struct multi {
	char dir[256];
	uint64_t nseg[2];
} multi;

#define MULTI_REC 200

static void multi_make(multi *mu)
{
	t_tmpdir(mu->dir);
	le_config c = cfg_for(mu->dir, 2);
	c.segment_bytes = 4096;
	write_range_cfg(&c, 1, MULTI_REC);
	for (uint32_t s = 0; s < 2; s++) {
		char sd[512];
		uint64_t *idx;
		size_t n;
		snprintf(sd, sizeof sd, "%s/shard-%03u", mu->dir, s);
		CHECK_RC(le__seg_list(sd, &idx, &n));
		CHECK(n >= 2);
		for (size_t i = 0; i < n; i++)
			CHECK_EQ(idx[i], i + 1);
		mu->nseg[s] = n;
		free(idx);
	}
}

/* Splice the frame at index k of (shard fs, segment fi) into (shard ts,
 * segment ti) after its frame j; @return the offset it landed at. */
static size_t splice_frame(const multi *mu, uint32_t fs, uint64_t fi, int k,
                           uint32_t ts, uint64_t ti, int j)
{
	char from[512], to[512];
	size_t flen, tlen;
	static size_t off[MAX_FRAMES], off2[MAX_FRAMES];

	seg_file(from, sizeof from, mu->dir, fs, fi);
	seg_file(to, sizeof to, mu->dir, ts, ti);
	unsigned char *f = slurp_or_die(from, &flen);
	unsigned char *t = slurp_or_die(to, &tlen);
	CHECK(frame_offsets(f, flen, off) > k);
	CHECK(frame_offsets(t, tlen, off2) > j + 1);
	size_t n = off[k + 1] - off[k], at = off2[j + 1];
	unsigned char *b = malloc(tlen + n);
	CHECK(b);
	memcpy(b, t, at);
	memcpy(b + at, f + off[k], n);
	memcpy(b + at + n, t + at, tlen - at);
	spit_or_die(to, b, tlen + n);
	free(b);
	free(f);
	free(t);
	return at;
}

static void check_copy_detected(const multi *mu, uint32_t shard,
                                uint64_t index, size_t at, const char *why)
{
	got g;
	char out[4096], name[64];

	read_all(&g, mu->dir, LE_RECOVER_TOLERATE_TAIL);
	CHECK_EQ(g.rc, LE_ECORRUPT);
	CHECK(g.pr.n >= 1);
	CHECK_EQ(g.pr.off[g.pr.n - 1], at);
	CHECK(strstr(g.pr.what[g.pr.n - 1], why));
	check_all_original(&g);
	got_free(&g);
	read_all(&g, mu->dir, LE_RECOVER_SKIP);
	CHECK_EQ(g.rc, 0);
	check_complete(&g, 0, MULTI_REC);
	check_complete(&g, 1, MULTI_REC);
	got_free(&g);
	CHECK_EQ(verify(mu->dir, out, sizeof out), 1);
	snprintf(name, sizeof name, "shard-%03u/%016" PRIx64 ".seg: offset %zu",
	         shard, index, at);
	if (!strstr(out, name))
		fprintf(stderr, "  verify does not name %s:\n%s", name, out);
	CHECK(strstr(out, name));

	/* le_open keeps the damaged file and numbers on after it. */
	le_config c = cfg_for(mu->dir, 2);
	c.segment_bytes = 4096;
	write_range_cfg(&c, MULTI_REC + 1, 3);
	read_all(&g, mu->dir, LE_RECOVER_SKIP);
	CHECK_EQ(g.rc, 0);
	check_complete(&g, 0, MULTI_REC + 3);
	check_complete(&g, 1, MULTI_REC + 3);
	got_free(&g);
}

/* The first frame of segment 1 spliced into segment 2 of the same shard:
 * right shard, valid CRC, wrong sequence. */
TEST(frame_copied_into_another_segment_is_detected)
{
	multi mu;
	multi_make(&mu);
	size_t at = splice_frame(&mu, 0, 1, 0, 0, 2, 2);
	check_copy_detected(&mu, 0, 2, at, "sequence");
	t_rmrf(mu.dir);
}

/* A frame of shard 1 spliced into shard 0's first segment at the place
 * where its own sequence number fits: only the shard field tells. */
TEST(frame_copied_into_another_shard_is_detected)
{
	multi mu;
	multi_make(&mu);
	/* Frame 5 of shard 1 segment 1 has seq 6; after frame 4 of shard
	 * 0 segment 1, seq 6 is the one expected. */
	size_t at = splice_frame(&mu, 1, 1, 5, 0, 1, 4);
	check_copy_detected(&mu, 0, 1, at, "another shard");
	t_rmrf(mu.dir);
}

/* ======================================================================
 * Checkpoints: torn and lying
 * ==================================================================== */

/* A log written in two sessions, so that both checkpoint slots hold a
 * generation (1 in slot 1, 2 in slot 0, when no periodic checkpoint came
 * in between). */
static void img_make_two_sessions(img *m)
{
	t_tmpdir(m->dir);
	write_range(m->dir, 1, 3);
	write_range(m->dir, 4, N_REC - 3);
	seg_file(m->seg, sizeof m->seg, m->dir, 0, 1);
	ckpt_file(m->ck, sizeof m->ck, m->dir, 0);
	m->seg_b = slurp_or_die(m->seg, &m->seg_len);
	m->ck_b = slurp_or_die(m->ck, &m->ck_len);
	m->n = frame_offsets(m->seg_b, m->seg_len, m->off);
	CHECK_EQ(m->n, N_REC);
	CHECK_EQ(m->ck_len, LE_CKPT_FILE_BYTES);
	le__ckpt c, d;
	CHECK_EQ(le__ckpt_decode(m->ck_b, &c), 0);
	CHECK_EQ(le__ckpt_decode(m->ck_b + LE_CKPT_SLOT1_OFF, &d), 0);
	CHECK(c.gen > d.gen); /* the second session's is in slot 0 */
	CHECK_EQ(c.next_seq, N_REC + 1);
}

/* Put back the log with checkpoint bytes ck (len) instead. */
static void img_put_ckpt(const img *m, const void *ck, size_t len)
{
	clear_shards(m->dir);
	spit_or_die(m->seg, m->seg_b, m->seg_len);
	spit_or_die(m->ck, ck, len);
}

/* After le_open on a log with checkpoint ck: append two, close; the log
 * must read as 1..N_REC + 2 with no problem. */
static void reopen_with_ckpt(const img *m, const void *ck, size_t len)
{
	img_put_ckpt(m, ck, len);
	reopen_append(m->dir, N_REC + 1, 2);
	check_log_is(m->dir, N_REC + 2);
}

/* Each byte of either slot damaged in turn; the bytes between the slots
 * (64..511), which belong to neither and which nothing reads, all at once
 * -- one at a time they would test the same thing 448 times over. */
TEST(torn_checkpoint_at_every_byte_loses_and_duplicates_nothing)
{
	img m;
	img_make_two_sessions(&m);
	unsigned char *ck = malloc(m.ck_len);
	CHECK(ck);
	for (size_t i = 0; i < m.ck_len; i++) {
		if (i >= LE_CKPT_SLOT && i < LE_CKPT_SLOT1_OFF &&
		    i != LE_CKPT_SLOT)
			continue;
		memcpy(ck, m.ck_b, m.ck_len);
		if (i == LE_CKPT_SLOT)
			for (size_t j = i; j < LE_CKPT_SLOT1_OFF; j++)
				ck[j] ^= 0x5A;
		else
			ck[i] ^= 0x5A;
		reopen_with_ckpt(&m, ck, m.ck_len);
	}
	free(ck);
	img_free(&m);
}

/* Cut at every length that ends inside a slot, and at a few lengths
 * between the slots (all alike: slot 0 whole, slot 1 missing). */
TEST(checkpoint_cut_at_every_length_loses_and_duplicates_nothing)
{
	img m;
	img_make_two_sessions(&m);
	for (size_t len = 0; len <= m.ck_len; len++) {
		if (len > LE_CKPT_SLOT && len < LE_CKPT_SLOT1_OFF &&
		    len != 100 && len != 256 && len != LE_CKPT_SLOT1_OFF - 1)
			continue;
		reopen_with_ckpt(&m, m.ck_b, len);
		/* le_open rewrites it; read it back to be sure it is sane. */
		le__ckpt c;
		char path[512];
		ckpt_file(path, sizeof path, m.dir, 0);
		size_t n;
		unsigned char *b = slurp_or_die(path, &n);
		CHECK_EQ(le__ckpt_pick(b, n, &c), 0);
		CHECK_EQ(c.next_seq, N_REC + 3);
		free(b);
	}
	img_free(&m);
}

/* One time in 256 a slot's CRC ends in a zero byte: cut just before it,
 * the slot is short on disk but whole once the writer's next write past the
 * end has zero-filled the gap.  Made to happen here (a last_ts whose CRC
 * ends in zero) rather than waited for: le_open must count that slot's
 * generation, or the new checkpoint loses to the stale one. */
TEST(checkpoint_cut_in_its_trailing_zeros_does_not_shadow_the_next)
{
	img m;
	img_make_two_sessions(&m);
	unsigned char *ck = malloc(m.ck_len);
	CHECK(ck);
	memcpy(ck, m.ck_b, m.ck_len);
	le__ckpt c;
	CHECK_EQ(le__ckpt_decode(ck, &c), 0);
	for (int i = 0; i < 100000 && ck[LE_CKPT_SLOT - 1] != 0; i++) {
		c.last_ts++;
		le__ckpt_encode(ck, &c);
	}
	CHECK_EQ(ck[LE_CKPT_SLOT - 1], 0);
	reopen_with_ckpt(&m, ck, LE_CKPT_SLOT - 1);
	char path[512];
	ckpt_file(path, sizeof path, m.dir, 0);
	size_t n;
	unsigned char *b = slurp_or_die(path, &n);
	le__ckpt now;
	CHECK_EQ(le__ckpt_pick(b, n, &now), 0);
	CHECK_EQ(now.next_seq, N_REC + 3);
	CHECK(now.gen > c.gen);
	free(b);
	free(ck);
	img_free(&m);
}

/* A checkpoint that decodes (right magic, right CRC, right slot) but says
 * something false about the log. */
typedef void (*lie_fn)(le__ckpt *c, const img *m);

static void lie(img *m, lie_fn edit)
{
	unsigned char ck[LE_CKPT_FILE_BYTES];
	le__ckpt c;

	memcpy(ck, m->ck_b, sizeof ck);
	CHECK_EQ(le__ckpt_decode(ck, &c), 0);
	c.gen = 10; /* newest: slot 0 */
	edit(&c, m);
	le__ckpt_encode(ck, &c);
	reopen_with_ckpt(m, ck, sizeof ck);
}

static void later_segment(le__ckpt *c, const img *m)
{
	(void)m;
	c->seg_index = 5;
}
static void offset_past_end(le__ckpt *c, const img *m)
{
	c->offset = m->seg_len + 1000;
}
static void frame_past_end(le__ckpt *c, const img *m)
{
	c->last_off = m->seg_len + 100;
	c->offset = m->seg_len + 140;
}
static void sequence_ahead(le__ckpt *c, const img *m)
{
	(void)m;
	c->next_seq += 1000;
}
static void sequence_ahead_at_a_real_frame(le__ckpt *c, const img *m)
{
	/* Frame 2's bounds, but a sequence far ahead of it. */
	c->last_off = m->off[2];
	c->offset = m->off[3];
	c->next_seq = 5000;
}
static void earlier_frame(le__ckpt *c, const img *m)
{
	/* True once: frame 1 was the last.  Scanning must go on past it. */
	c->last_off = m->off[1];
	c->offset = m->off[2];
	c->next_seq = 3;
}
static void other_shard(le__ckpt *c, const img *m)
{
	(void)m;
	c->shard = 7;
	c->next_seq += 1000;
}
static void bounds_swapped(le__ckpt *c, const img *m)
{
	c->last_off = m->off[3];
	c->offset = m->off[2];
}

/* Each lie of the NULL-terminated list told, in turn, to a new log of
 * two sessions. */
static void lies_told(const lie_fn *edits)
{
	img m;
	img_make_two_sessions(&m);
	for (; *edits; edits++)
		lie(&m, *edits);
	img_free(&m);
}

TEST(checkpoint_naming_a_later_segment_is_ignored)
{
	lies_told((const lie_fn[]){later_segment, NULL});
}

TEST(checkpoint_with_offset_past_the_end_is_ignored)
{
	lies_told((const lie_fn[]){offset_past_end, frame_past_end,
	                           bounds_swapped, NULL});
}

TEST(checkpoint_with_sequence_ahead_of_the_log_is_ignored)
{
	lies_told((const lie_fn[]){sequence_ahead,
	                           sequence_ahead_at_a_real_frame,
	                           other_shard, NULL});
}

TEST(checkpoint_behind_the_log_is_only_a_starting_point)
{
	lies_told((const lie_fn[]){earlier_frame, NULL});
}

/* The last record's payload is itself a well-formed frame (a log shipper
 * logging raw frames does this), and the checkpoint names that inner
 * frame.  It decodes where the checkpoint says, with the sequence the
 * checkpoint says, and ends where it says -- but scanning on from there
 * finds the rest of the outer payload and nothing after it.  Recovery must
 * not take that for a torn tail and cut the real record in half. */
TEST(checkpoint_naming_a_frame_inside_a_payload_cuts_nothing)
{
	char dir[256], seg[512], ck[512], p[128];
	unsigned char inner[256], slot[LE_CKPT_FILE_BYTES];
	size_t len;

	t_tmpdir(dir);
	write_range(dir, 1, N_REC - 1);
	/* Record N_REC: "<prefix><a frame with seq 777><suffix>". */
	size_t plen = payload_of(p, sizeof p, 0, N_REC);
	uint32_t ilen = le__frame_encode(inner, LE_FIELD_ALL, 0, LE_INFO, 0,
	                                 777, 1, "inner", 5);
	unsigned char outer[512];
	memcpy(outer, "prefix:", 7);
	memcpy(outer + 7, inner, ilen);
	memcpy(outer + 7 + ilen, ":suffix", 7);
	size_t olen = 7 + ilen + 7;
	le_config c = cfg_for(dir, 1);
	le_engine *e = open_or_die(&c);
	CHECK_EQ(le_write(e, 0, LE_INFO, outer, olen), 0);
	CHECK_EQ(le_close(e), 0);

	seg_file(seg, sizeof seg, dir, 0, 1);
	ckpt_file(ck, sizeof ck, dir, 0);
	unsigned char *b = slurp_or_die(seg, &len);
	size_t off[MAX_FRAMES];
	CHECK_EQ(frame_offsets(b, len, off), N_REC);
	size_t in_at = off[N_REC - 1] + LE_FRAME_FIXED_MAX + 7;
	CHECK(memcmp(b + in_at, inner, ilen) == 0);

	le__ckpt cp = {.gen = 10, .seg_index = 1, .offset = in_at + ilen,
	               .next_seq = 778, .last_ts = 1, .last_off = in_at,
	               .shard = 0};
	memset(slot, 0, sizeof slot);
	le__ckpt_encode(slot, &cp);
	spit_or_die(ck, slot, sizeof slot);

	e = open_or_die(&c);
	le_stats st;
	CHECK_RC(le_stats_get(e, &st));
	if (st.recovered_truncated_bytes)
		fprintf(stderr, "  le_open cut %" PRIu64 " bytes of a whole "
		        "record\n", st.recovered_truncated_bytes);
	CHECK_EQ(st.recovered_truncated_bytes, 0);
	plen = payload_of(p, sizeof p, 0, N_REC + 1);
	CHECK_EQ(le_write(e, 0, LE_INFO, p, plen), 0);
	CHECK_EQ(le_close(e), 0);

	got g;
	read_all(&g, dir, LE_RECOVER_ABSOLUTE);
	CHECK_EQ(g.rc, 0);
	CHECK_EQ(g.pr.n, 0);
	CHECK_EQ(g.n, N_REC + 1);
	for (int i = 0; i < g.n; i++) {
		CHECK_EQ(g.r[i].seq, i + 1);
		CHECK(g.r[i].ok || i == N_REC - 1); /* that one is outer[] */
	}
	got_free(&g);
	free(b);
	t_rmrf(dir);
}

/* ======================================================================
 * Crash during rotation, with and without a checkpoint
 * ==================================================================== */

/* A log of two segments (rotation at 4 KiB), then an empty third segment:
 * what a crash between creating a segment and writing to it leaves. */
static uint64_t rotated_log(char *dir, uint64_t *next_index)
{
	char sd[512], path[512];
	uint64_t *idx;
	size_t n;

	t_tmpdir(dir);
	le_config c = cfg_for(dir, 1);
	c.segment_bytes = 4096;
	write_range_cfg(&c, 1, MULTI_REC);
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	CHECK_RC(le__seg_list(sd, &idx, &n));
	CHECK(n >= 2);
	*next_index = idx[n - 1] + 1;
	free(idx);
	seg_file(path, sizeof path, dir, 0, *next_index);
	spit_or_die(path, "", 0);
	return MULTI_REC;
}

TEST(rotation_crash_without_checkpoint_continues_the_sequence)
{
	char dir[256], ck[512];
	uint64_t next;
	uint64_t n = rotated_log(dir, &next);
	ckpt_file(ck, sizeof ck, dir, 0);
	CHECK(unlink(ck) == 0);
	reopen_append(dir, n + 1, 2);
	check_log_is(dir, n + 2);
	t_rmrf(dir);
}

TEST(rotation_crash_with_a_lying_checkpoint_continues_the_sequence)
{
	char dir[256], ck[512];
	unsigned char slot[LE_CKPT_FILE_BYTES];
	uint64_t next;
	uint64_t n = rotated_log(dir, &next);
	ckpt_file(ck, sizeof ck, dir, 0);
	/* It names the segment that was never written, far ahead. */
	le__ckpt c = {.gen = 10, .seg_index = next, .offset = 200,
	              .next_seq = n + 500, .last_ts = 1, .last_off = 100,
	              .shard = 0};
	memset(slot, 0, sizeof slot);
	le__ckpt_encode(slot, &c);
	spit_or_die(ck, slot, sizeof slot);
	reopen_append(dir, n + 1, 2);
	check_log_is(dir, n + 2);
	t_rmrf(dir);
}

/* ======================================================================
 * A segment under another segment's name
 * ==================================================================== */

/* Segment 1 renamed to 2 (a restore gone wrong): readers reject the file
 * (its header says 1).  le_open must not append to it -- every record
 * written there would be invisible to every reader -- but start a new
 * segment numbered after the file's records. */
TEST(segment_under_another_name_is_not_appended_to)
{
	img m;
	char to[512];
	got g;

	img_make(&m, N_REC);
	seg_file(to, sizeof to, m.dir, 0, 2);
	CHECK(rename(m.seg, to) == 0);
	reopen_append(m.dir, N_REC + 1, 2);
	read_all(&g, m.dir, LE_RECOVER_SKIP);
	CHECK_EQ(g.rc, 0);
	check_all_original(&g);
	if (g.n != 2)
		fprintf(stderr, "  %d records readable after appending 2\n",
		        g.n);
	CHECK_EQ(g.n, 2);
	CHECK_EQ(g.r[0].seq, N_REC + 1);
	CHECK_EQ(g.r[1].seq, N_REC + 2);
	got_free(&g);
	img_free(&m);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(truncated_segment_reads_as_its_whole_record_prefix_in_every_mode);
	RUN(truncated_segment_reopens_after_its_last_whole_record);
	RUN(segment_torn_inside_its_header_reopens_cleanly);
	RUN(zero_filled_tail_of_any_size_is_ignored_then_cut_at_open);
	RUN(garbage_tail_of_any_size_is_ignored_then_cut_at_open);
	RUN(bit_flip_at_every_byte_is_reported_within_its_frame);
	RUN(bit_flip_at_every_byte_never_makes_le_open_lose_records);
	RUN(absurd_length_never_allocates_absurdly);
	RUN(frame_copied_to_wrong_offset_is_detected);
	RUN(frame_copied_into_another_segment_is_detected);
	RUN(frame_copied_into_another_shard_is_detected);
	RUN(torn_checkpoint_at_every_byte_loses_and_duplicates_nothing);
	RUN(checkpoint_cut_at_every_length_loses_and_duplicates_nothing);
	RUN(checkpoint_cut_in_its_trailing_zeros_does_not_shadow_the_next);
	RUN(checkpoint_naming_a_later_segment_is_ignored);
	RUN(checkpoint_with_offset_past_the_end_is_ignored);
	RUN(checkpoint_with_sequence_ahead_of_the_log_is_ignored);
	RUN(checkpoint_behind_the_log_is_only_a_starting_point);
	RUN(checkpoint_naming_a_frame_inside_a_payload_cuts_nothing);
	RUN(rotation_crash_without_checkpoint_continues_the_sequence);
	RUN(rotation_crash_with_a_lying_checkpoint_continues_the_sequence);
	RUN(segment_under_another_name_is_not_appended_to);
	return t_done();
}
