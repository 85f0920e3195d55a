/*
 * test_index.c -- the time index (src/store/index.c): the INTERFACES.md test vector
 * byte for byte, every way an index file can be untrustworthy, building
 * one from a segment, the lookups against a brute-force answer, and the
 * engine writing one for every segment it seals.
 */
#include "segfile.h"

#include "store/index.h"
#include "store/seg_zst.h"
#include "logengine.h"
#include "store/segment.h"

#define TS0 1796074227000000000ull

static const char vector_hex[] =
	"4c4f4745 4e474958 01006000 18000000"
	"02000000 00000100 07000000 00000000"
	"64000000 00000000 00beee24 2be67c18"
	"12000200 00000000 a00f0000 00000000"
	"01beee24 2be67c18 ff878960 2be67c18"
	"02000000 fda71578 00000000 42e007f2"
	"40000000 00000000 64000000 00000000"
	"00000000 00000000 41000100 00000000"
	"25080000 00000000 0023bc42 2be67c18";

static le__index vector_index(le__idx_entry *e)
{
	e[0] = (le__idx_entry){64, 100, 0};
	e[1] = (le__idx_entry){65601, 2085, 1764538227500000000ull};
	return (le__index){.shard = 2, .spacing = 65536, .seg_index = 7,
	                   .base_seq = 100,
	                   .created_ns = 1764538227000000000ull,
	                   .end = 131090, .records = 4000,
	                   .ts_min = 1764538227000000001ull,
	                   .ts_max = 1764538227999999999ull, .e = e, .n = 2};
}

TEST(index_vector_matches_format_md)
{
	unsigned char want[256], got[256];
	le__idx_entry e[2];
	le__index x = vector_index(e), y;
	const char *why;
	size_t n = t_unhex(vector_hex, want);

	CHECK_EQ(n, LE_IDX_HDR + 2 * LE_IDX_ENTRY);
	CHECK_EQ(le__index_encode(got, &x), n);
	CHECK(memcmp(got, want, n) == 0);
	CHECK_RC(le__index_decode(want, n, &y, &why));
	CHECK_EQ(y.n, 2);
	CHECK_EQ(y.e[1].off, 65601);
	CHECK_EQ(y.e[1].seq, 2085);
	CHECK_EQ(y.e[1].before, 1764538227500000000ull);
	CHECK_EQ(y.end, 131090);
	CHECK_EQ(y.records, 4000);
	CHECK_EQ(y.ts_max, 1764538227999999999ull);
	le__index_free(&y);
}

TEST(index_with_any_flipped_bit_or_cut_is_refused)
{
	unsigned char img[256], bad[256];
	le__index y;
	const char *why;
	size_t n = t_unhex(vector_hex, img);

	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 8; b++) {
			memcpy(bad, img, n);
			bad[i] ^= (unsigned char)(1u << b);
			int rc = le__index_decode(bad, n, &y, &why);
			if (rc == 0)
				fprintf(stderr, "  byte %zu bit %d accepted\n", i, b);
			CHECK(rc < 0);
		}
	for (size_t len = 0; len < n; len++)
		CHECK(le__index_decode(img, len, &y, &why) < 0);
}

TEST(index_entries_out_of_order_are_refused)
{
	unsigned char img[256];
	le__idx_entry e[2];
	le__index x = vector_index(e), y;
	const char *why;

	e[1].before = 0;
	e[0].before = 5; /* the first frame has nothing before it */
	size_t n = le__index_encode(img, &x);
	CHECK_EQ(le__index_decode(img, n, &y, &why), LE_ECORRUPT);
	x = vector_index(e);
	e[1].off = 200000; /* past end */
	n = le__index_encode(img, &x);
	CHECK_EQ(le__index_decode(img, n, &y, &why), LE_ECORRUPT);
	x = vector_index(e);
	e[1].seq = 100; /* not rising */
	n = le__index_encode(img, &x);
	CHECK_EQ(le__index_decode(img, n, &y, &why), LE_ECORRUPT);
}

/* A segment of n frames of varied sizes, shard 0, index 1, base 10;
 * timestamps rise but repeat and sometimes fall back (a hand-made file
 * need not keep them in order). */
static void make_seg(t_seg *s, int n, uint64_t *ts, size_t *off)
{
	char msg[3000];
	t_seg_begin(s, LE_FIELD_ALL, 0, 1, 10);
	for (int i = 0; i < n; i++) {
		size_t len = (size_t)(i * 37 % 2900);
		memset(msg, 'a' + i % 26, len);
		ts[i] = TS0 + (uint64_t)(i / 3) * 1000 - (i % 50 == 7 ? 5000 : 0);
		off[i] = t_seg_add_ex(s, 0, LE_INFO, ts[i], msg, len);
	}
}

/* make_seg's segment saved in dir (frame `flip`'s payload damaged when
 * flip >= 0) and its index built into *x. */
static void seg_and_index(const char *dir, t_seg *s, int n, uint64_t *ts,
                          size_t *off, int flip, le__index *x)
{
	char path[512];
	make_seg(s, n, ts, off);
	if (flip >= 0)
		s->buf[off[flip] + 30] ^= 0x40; /* a payload bit: CRC mismatch */
	t_seg_save(s, dir);
	t_seg_path(path, sizeof path, dir, 0, 1);
	CHECK_RC(le__index_build(path, x));
}

/* What the tests of a built index start from: seg_and_index's segment of
 * n <= FIX_MAX frames in a directory of its own, and its index. */
#define FIX_MAX 600
typedef struct fix {
	char dir[256];
	uint64_t ts[FIX_MAX];
	size_t off[FIX_MAX];
	t_seg s;
	le__index x;
} fix;

static void fix_open(fix *f, int n, int flip)
{
	t_tmpdir(f->dir);
	seg_and_index(f->dir, &f->s, n, f->ts, f->off, flip, &f->x);
}

static void fix_close(fix *f)
{
	le__index_free(&f->x);
	t_seg_free(&f->s);
	t_rmrf(f->dir);
}

TEST(build_covers_every_frame_with_an_entry_per_spacing)
{
	enum { N = 600 };
	fix f;

	fix_open(&f, N, -1);
	CHECK_EQ(f.x.records, N);
	CHECK_EQ(f.x.end, f.s.len);
	CHECK_EQ(f.x.base_seq, 10);
	CHECK(f.x.n >= f.s.len / LE_IDX_SPACING);
	CHECK(f.x.n <= f.s.len / LE_IDX_SPACING + 1);
	uint64_t mx = 0, mn = UINT64_MAX;
	for (int i = 0; i < N; i++) {
		mx = f.ts[i] > mx ? f.ts[i] : mx;
		mn = f.ts[i] < mn ? f.ts[i] : mn;
	}
	CHECK_EQ(f.x.ts_max, mx);
	CHECK_EQ(f.x.ts_min, mn);
	/* Every entry names a real frame with its sequence. */
	for (size_t k = 0; k < f.x.n; k++) {
		int i = (int)(f.x.e[k].seq - 10);
		CHECK(i >= 0 && i < N);
		CHECK_EQ(f.x.e[k].off, f.off[i]);
	}
	fix_close(&f);
}

TEST(find_time_never_skips_a_record_at_or_after_the_time)
{
	enum { N = 600 };
	fix f;

	fix_open(&f, N, -1);
	for (uint64_t t = TS0 - 10000; t < TS0 + 210000; t += 333) {
		uint64_t o, q;
		le__index_find_time(&f.x, t, &o, &q);
		int first = -1; /* the first frame at or after t */
		for (int i = 0; i < N && first < 0; i++)
			if (f.ts[i] >= t)
				first = i;
		if (first < 0) {
			CHECK_EQ(o, f.x.end);
			CHECK_EQ(q, 10 + N);
			continue;
		}
		CHECK(o <= f.off[first]);
		int at = -1;
		for (int i = 0; i < N; i++)
			if (f.off[i] == o)
				at = i;
		CHECK(at >= 0);
		CHECK_EQ(q, 10 + (uint64_t)at);
		/* and not further back than one spacing plus a frame */
		CHECK(f.off[first] - o <= LE_IDX_SPACING + 3000 ||
		      o == LE_SEG_HDR);
	}
	for (uint64_t q = 10; q < 10 + N; q += 7) {
		uint64_t o, at;
		le__index_find_seq(&f.x, q, &o, &at);
		CHECK(at <= q);
		CHECK_EQ(o, f.off[at - 10]);
		CHECK(f.off[q - 10] - o <= LE_IDX_SPACING + 3000);
	}
	fix_close(&f);
}

TEST(build_stops_at_damage_and_covers_the_prefix)
{
	enum { N = 300 };
	fix f;

	fix_open(&f, N, 200);
	CHECK_EQ(f.x.records, 200);
	CHECK_EQ(f.x.end, f.off[200]);
	fix_close(&f);
}

TEST(load_refuses_an_index_of_another_segment_or_a_torn_one)
{
	char sdir[300], ipath[600];
	enum { N = 300 };
	fix f;
	le__index y;
	le__seg_hdr h;

	fix_open(&f, N, -1);
	snprintf(sdir, sizeof sdir, "%s/shard-000", f.dir);
	CHECK_EQ(le__seg_hdr_decode(f.s.buf, &h), 0);
	CHECK_EQ(le__index_load(sdir, &h, f.s.len, &y), -ENOENT);
	CHECK_RC(le__index_write(sdir, &f.x));
	CHECK_RC(le__index_load(sdir, &h, f.s.len, &y));
	CHECK_EQ(y.records, N);
	le__index_free(&y);
	/* the segment shorter than the index says: not this file */
	CHECK_EQ(le__index_load(sdir, &h, f.off[100], &y), LE_ECORRUPT);
	le__seg_hdr h2 = h;
	h2.created_ns++;
	CHECK_EQ(le__index_load(sdir, &h2, f.s.len, &y), LE_ECORRUPT);
	h2 = h;
	h2.base_seq++;
	CHECK_EQ(le__index_load(sdir, &h2, f.s.len, &y), LE_ECORRUPT);
	/* torn: every length short of the whole file */
	le__index_path(ipath, sizeof ipath, sdir, 1);
	size_t len;
	unsigned char *img = t_slurp(ipath, &len);
	CHECK(img);
	for (size_t cut = 0; cut < len; cut += 5) {
		CHECK_EQ(t_spit(ipath, img, cut), 0);
		CHECK(le__index_load(sdir, &h, f.s.len, &y) < 0);
	}
	free(img);
	fix_close(&f);
}

/* Segments of shard_dir, and which have an index that loads. */
static int count_indexed(const char *sdir, int *segs)
{
	uint64_t *v;
	size_t n;
	int ok = 0;

	CHECK_RC(le__seg_list(sdir, &v, &n));
	*segs = (int)n;
	for (size_t i = 0; i < n; i++) {
		char path[600];
		unsigned char hb[LE_SEG_HDR];
		le__seg_hdr h;
		le__index x;
		struct stat st;
		le__seg_path(path, sizeof path, sdir, v[i]);
		FILE *f = fopen(path, "rb");
		CHECK(f && fread(hb, 1, sizeof hb, f) == sizeof hb);
		fclose(f);
		CHECK(stat(path, &st) == 0);
		CHECK_EQ(le__seg_hdr_decode(hb, &h), 0);
		if (le__index_load(sdir, &h, (uint64_t)st.st_size, &x) == 0) {
			CHECK_EQ(x.end, (uint64_t)st.st_size);
			ok++;
			le__index_free(&x);
		}
	}
	free(v);
	return ok;
}

/* n records logged into dir by an engine rotating at seg_bytes, keeping
 * retention bytes (0: all), flushed every 1000 records so that the index
 * builder keeps up; closed. */
static void rotating_log(const char *dir, uint64_t seg_bytes,
                         uint64_t retention, int n)
{
	le_config c;
	le_engine *e;

	le_config_init(&c);
	c.dir = dir;
	c.segment_bytes = seg_bytes;
	c.retention_bytes = retention;
	CHECK_RC(le_open(&e, &c));
	for (int i = 0; i < n; i++) {
		while (le_logf(e, LE_INFO, "record %d of a rotating log", i) ==
		       LE_EFULL)
			le_flush(e, -1);
		if (i % 1000 == 0)
			le_flush(e, -1); /* let the builder keep up */
	}
	CHECK_RC(le_close(e));
}

TEST(engine_writes_an_index_for_every_segment_it_seals)
{
	char dir[256], sdir[300];
	int segs;

	rotating_log(t_tmpdir(dir), 256 << 10, 0, 20000);
	CHECK(le__index_idle(10000));
	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	int ok = count_indexed(sdir, &segs);
	CHECK(segs >= 3);
	CHECK_EQ(ok, segs - 1); /* all but the active one */
	t_rmrf(dir);
}

/* Deleting a segment (retention, the reaper) deletes its index with it:
 * nothing waits for the builder's next sweep. */
TEST(deleting_a_segment_deletes_its_index)
{
	char dir[256], seg[300], idx[300];
	const char *names[] = {seg, idx};

	t_tmpdir(dir);
	snprintf(seg, sizeof seg, "%s/%016x.seg", dir, 7);
	snprintf(idx, sizeof idx, "%s/%016x.idx", dir, 7);
	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(names[i], "w");
		CHECK(f && fputs("x", f) >= 0 && fclose(f) == 0);
	}
	CHECK_RC(le__seg_unlink(seg));
	CHECK(access(seg, F_OK) < 0 && errno == ENOENT);
	CHECK(access(idx, F_OK) < 0 && errno == ENOENT);
	t_rmrf(dir);
}

TEST(indexes_of_deleted_segments_do_not_pile_up)
{
	char dir[256], sdir[300];
	int segs;

	rotating_log(t_tmpdir(dir), 64 << 10, 256 << 10, 40000);
	CHECK(le__index_idle(10000));
	snprintf(sdir, sizeof sdir, "%s/shard-000", dir);
	count_indexed(sdir, &segs);
	int idx = 0, orphans = 0;
	DIR *d = opendir(sdir);
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *x = strstr(de->d_name, ".idx");
		idx += x != NULL;
		if (!x || x[4])
			continue;
		/* its segment, as le__seg_stat finds it (.seg or .seg.zst) */
		char seg[600];
		uint64_t bytes, mtime;
		snprintf(seg, sizeof seg, "%s/%.*s.seg", sdir,
		         (int)(x - de->d_name), de->d_name);
		orphans += le__seg_stat(seg, &bytes, &mtime) == -ENOENT;
	}
	closedir(d);
	CHECK(idx <= segs + 8);
	/* whoever deletes a segment deletes its index (le__seg_unlink),
	 * and a build that lost its segment drops what it wrote */
	CHECK_EQ(orphans, 0);
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(index_vector_matches_format_md);
	RUN(index_with_any_flipped_bit_or_cut_is_refused);
	RUN(index_entries_out_of_order_are_refused);
	RUN(build_covers_every_frame_with_an_entry_per_spacing);
	RUN(find_time_never_skips_a_record_at_or_after_the_time);
	RUN(build_stops_at_damage_and_covers_the_prefix);
	RUN(load_refuses_an_index_of_another_segment_or_a_torn_one);
	RUN(engine_writes_an_index_for_every_segment_it_seals);
	RUN(deleting_a_segment_deletes_its_index);
	RUN(indexes_of_deleted_segments_do_not_pile_up);
	return t_done();
}
