/*
 * fuzz_segment.c -- libFuzzer target for everything that turns segment
 * files into records: the validating scanner (segment.c) and the reader API
 * (reader_*.c) in each of its four recovery modes.  Built a second time with
 * FUZZ_RECOVER defined (fuzz_recover.c), it also runs recovery at le_open
 * (writer.c) on the same files and a CHECKPOINT: a separate target because
 * an engine's open and close take milliseconds where a read takes
 * microseconds.
 *
 * The input becomes one or two segment files of shard 0 (and maybe a
 * CHECKPOINT) in a directory made once per process; each run rewrites the
 * same file names.
 *
 *   byte 0   control
 *              bits 0-1  layout: 0 one segment, 1 two segments, 2 one
 *                        segment + CHECKPOINT, 3 two segments + CHECKPOINT
 *              bit  2    fix: give each segment a decodable header (magic,
 *                        version, header length, known fields, shard 0,
 *                        the index its name says) and a correct CRC on the
 *                        header, on every frame along the chain of size
 *                        words, and on both checkpoint slots; so mutations
 *                        reach the checks behind the CRCs
 *              bit  3    renumber (with fix): also set each frame's shard
 *                        and sequence to what the scanner expects, segment
 *                        2 continuing segment 1, and make checkpoint slot 0
 *                        name a real frame of the last segment
 *   byte 1-2 where the body splits into two segments (mod its length)
 *   rest     the body: segment 1, [segment 2], [CHECKPOINT: the last
 *            LE_CKPT_FILE_BYTES bytes, or half the body when it is short]
 *
 * Invariants (abort() on violation):
 *   - le_reader_open succeeds (or says LE_EVERSION); le_reader_next never
 *     fails in POINT_IN_TIME or SKIP mode, and fails only with LE_ECORRUPT
 *     or LE_EVERSION otherwise; errors are sticky
 *   - every record returned is the frame at (file, offset) in the bytes
 *     written: its payload lies inside the file and equals those bytes,
 *     and its stored fields (seq, ts, level, flags) are the ones there
 *   - never more records than file bytes / 5 (the smallest frame)
 *   - per shard, sequence numbers strictly increase, except from one
 *     segment to the next after the reader reported a problem (an overlap
 *     between segments, or damage whose skipped frames nobody counted),
 *     and except a wrap past 2^64 - 1 (a header can claim any base)
 *   - no problem reported means no error, and in ABSOLUTE mode an error
 *     exactly when a problem was reported
 *   - the modes nest: what ABSOLUTE returns is a prefix of what
 *     POINT_IN_TIME returns, of TOLERATE_TAIL, of SKIP
 *   - recovery (FUZZ_RECOVER): le_open succeeds (or refuses with
 *     LE_ECORRUPT / LE_EVERSION); every record SKIP read before is read
 *     again at the same place with the same bytes, in the same order; the
 *     appended record comes back exactly once; and when the log was
 *     consistent before (increasing sequences, no overlap reported, no
 *     segment header starting at or below a sequence an earlier segment
 *     holds) its sequence number is above every earlier one
 *
 * FUZZ_TRACE=1 in the environment prints what each pass saw: run the
 * binary on one crashing input to see why (FUZZ_KEEP=1 also keeps the
 * files of a failing run).
 */
#ifndef FUZZ_RECOVER
#define FUZZ_RECOVER 0
#endif
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "record/fields.h"
#include "record/format.h"
#include "logengine.h"
#include "fuzz.h"

static void fail(const char *file, int line, const char *what);

#define REQUIRE(c)                                                            \
	do {                                                                  \
		if (!(c))                                                     \
			fail(__FILE__, __LINE__, #c);                         \
	} while (0)

#define APPENDED "fuzz: appended after recovery"

static int trace; /* FUZZ_TRACE set: print what each pass saw */
#define TRACE(...)                                                            \
	do {                                                                  \
		if (trace)                                                    \
			fprintf(stderr, __VA_ARGS__);                         \
	} while (0)

/* ---- the directory, made once per process ---- */

static char shard_dir[300]; /* DIR/shard-000; DIR is fuzz_top */
static char seg_name[2][400];
static char ckpt_name[400];

/* A broken invariant: say which and let libFuzzer save the input (with
 * FUZZ_REAL_OS the files are removed unless FUZZ_KEEP=1: abort skips
 * atexit). */
static void fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "fuzz_segment: %s:%d: %s\n", file, line, what);
	if (getenv("FUZZ_KEEP"))
		fprintf(stderr, "fuzz_segment: files kept in %s\n", fuzz_top);
	else if (fuzz_real_os())
		fuzz_rm_top();
	abort();
}

static void setup(void)
{
	REQUIRE(fuzz_shard_dir(FUZZ_RECOVER ? "recover" : "segment",
	                       shard_dir, sizeof shard_dir) == 0);
	trace = getenv("FUZZ_TRACE") != NULL;
	for (int i = 0; i < 2; i++)
		snprintf(seg_name[i], sizeof seg_name[i], "%s/%016x.seg",
		         shard_dir, i + 1);
	snprintf(ckpt_name, sizeof ckpt_name, "%s/CHECKPOINT", shard_dir);
}

/* Empty the shard directory (recovery may have added files). */
static void clean(void)
{
	REQUIRE(fuzz_empty_dir(shard_dir) == 0);
}

static void spit(const char *path, const unsigned char *p, size_t len)
{
	REQUIRE(fuzz_put(path, p, len) == 0);
}

/* ---- making inputs reach past the CRCs ---- */

/* What fix/renumber did to a segment: where its frames are. */
struct seginfo {
	unsigned char *img; /* file bytes (points into the body copy) */
	size_t len;
	uint64_t next_seq;  /* after its last chained frame */
	size_t last_start[64], last_end[64]; /* frame bounds, first 64 */
	uint64_t last_seq[64];
	int nframes;
};

/* Header: decodable, shard 0, index idx; base sequence kept (renumber:
 * base). */
static void fix_header(struct seginfo *s, uint64_t idx, int renumber,
                       uint64_t base)
{
	le__seg_hdr h;
	unsigned char *p = s->img;

	h.version = LE_SEG_VERSION;
	h.fields = le__get32(p + 12) & LE_FIELD_ALL;
	h.shard = 0;
	h.index = idx;
	h.base_seq = renumber ? base : le__get64(p + 32);
	h.created_ns = le__get64(p + 40);
	le__seg_hdr_encode(p, &h);
}

/* Frames along the chain of size words: set shard and sequence
 * (renumber), then seal.  Records frame bounds for the checkpoint. */
static void fix_frames(struct seginfo *s, int renumber)
{
	uint32_t fields = le__get32(s->img + 12) & LE_FIELD_ALL;
	uint32_t fixed = le__frame_fixed(fields);
	uint64_t seq = le__get64(s->img + 32);
	size_t off = LE_SEG_HDR;

	s->nframes = 0;
	while (s->len - off >= fixed) {
		uint32_t size = le__get32(s->img + off);
		if (size < fixed - 4 || (uint64_t)size + 4 > s->len - off)
			break;
		unsigned char *f = s->img + off;
		unsigned char *q = f + 4 + ((fields & LE_FIELD_CRC) ? 4 : 0) +
		                   1 + ((fields & LE_FIELD_LEVEL) ? 1 : 0);
		if (renumber && (fields & LE_FIELD_SHARD))
			le__put16(q, 0);
		q += (fields & LE_FIELD_SHARD) ? 2 : 0;
		if (renumber && (fields & LE_FIELD_SEQUENCE))
			le__put64(q, seq);
		if (fields & LE_FIELD_CRC)
			le__frame_seal(&f, 1);
		if (s->nframes < 64) {
			s->last_start[s->nframes] = off;
			s->last_end[s->nframes] = off + size + 4;
			s->last_seq[s->nframes] = seq;
			s->nframes++;
		}
		seq++;
		off += (size_t)size + 4;
	}
	s->next_seq = seq;
}

static void seal_slot(unsigned char *slot)
{
	memcpy(slot, LE_CKPT_MAGIC, 8);
	le__put32(slot + 60, le__crc_mask(le__crc32c_extend(0, slot, 60)));
}

/* Slot 0 names frame k of the last segment (k from the slot's bytes). */
static void fix_ckpt_slot0(unsigned char *slot, const struct seginfo *s,
                           uint64_t idx)
{
	if (s->nframes == 0)
		return;
	int k = slot[16] % s->nframes;
	le__ckpt c = {
		.gen = 2 * (1 + (uint64_t)slot[8]),
		.seg_index = idx,
		.offset = s->last_end[k],
		.next_seq = s->last_seq[k] + 1,
		.last_ts = le__get64(slot + 40),
		.last_off = s->last_start[k],
		.shard = 0,
	};
	le__ckpt_encode(slot, &c);
}

/* ---- reading ---- */

struct rec {
	int file;          /* 0 or 1 */
	uint64_t off, seq;
	size_t len;
	const unsigned char *payload; /* into the body copy */
};

struct run {
	struct rec *r;
	int n, cap;
	int rc;
	uint64_t problems;
	int noted;   /* a problem was reported since the last record */
	int overlaps; /* "sequence overlap" problems */
};

static void on_problem(void *arg, const char *file, uint64_t off,
                       const char *what)
{
	struct run *ru = arg;
	REQUIRE(what != NULL);
	TRACE("    problem: %s: offset %" PRIu64 ": %s\n", file, off, what);
	ru->problems++;
	ru->noted = 1;
	if (strstr(what, "overlap"))
		ru->overlaps++;
}

/* The files as written: images and lengths (nfiles of them). */
static struct seginfo files[2];
static int nfiles;

static int file_of(const char *path)
{
	for (int i = 0; i < nfiles; i++)
		if (strcmp(path, seg_name[i]) == 0)
			return i;
	return -1;
}

/* The record must be the frame at (file, offset) of what we wrote. */
static void check_record(const le_record *lr, struct rec *out)
{
	int fi = file_of(lr->file);
	REQUIRE(fi >= 0);
	const struct seginfo *s = &files[fi];
	REQUIRE(s->len >= LE_SEG_HDR);
	uint32_t fields = le__get32(s->img + 12);
	REQUIRE((fields & ~LE_FIELD_ALL) == 0);
	uint32_t fixed = le__frame_fixed(fields);

	REQUIRE(lr->shard == 0);
	REQUIRE(lr->offset >= LE_SEG_HDR);
	REQUIRE(lr->offset + fixed <= s->len);
	const unsigned char *f = s->img + lr->offset;
	uint64_t raw = (uint64_t)le__get32(f) + 4 - fixed;
	const unsigned char *q = f + 4 + ((fields & LE_FIELD_CRC) ? 4 : 0);
	const int has_fields = (*q & LE_REC_FIELDS) != 0;
	/* A deferred record's payload is its text, made by the reader (or a
	 * text saying why it could not be): every byte readable, nothing
	 * more to compare with the frame. */
	const int deferred = (*q & LE_REC_DEFERRED) != 0;
	/* [u32 B][B bytes of fields]...: a block that starts with the
	 * flight recorder's field comes back without it, as the flag
	 * LE_REC_BACKTRACE (le__rec_backtrace; FIELDS goes too when
	 * nothing is left) */
	const unsigned char *blk = f + fixed + 4;
	size_t blen = has_fields ? le__get32(f + fixed) : 0, bt = 0;
	uint32_t want = *q;
	if (has_fields && blen >= LE_BT_FIELD_LEN &&
	    !memcmp(blk, LE_BT_FIELD, LE_BT_FIELD_LEN)) {
		bt = LE_BT_FIELD_LEN;
		want |= LE_REC_BACKTRACE;
		if (blen == bt)
			want &= ~(uint32_t)LE_REC_FIELDS;
	}
	if (deferred) {
		unsigned sum = 0;
		for (size_t k = 0; k < lr->len; k++)
			sum += ((const unsigned char *)lr->payload)[k];
		(void)sum;
		/* the text may be cut (TRUNCATED added), never anything
		 * else changed */
		REQUIRE((lr->flags & ~LE_REC_TRUNCATED) ==
		        (want & ~LE_REC_TRUNCATED));
		REQUIRE(!(*q & LE_REC_TRUNCATED) ||
		        (lr->flags & LE_REC_TRUNCATED));
		q++;
	} else {
		REQUIRE(lr->len <= s->len - lr->offset - fixed);
	}
	if (deferred) {
		if (has_fields)
			REQUIRE(lr->fields_len == blen - bt);
	} else if (has_fields) {
		/* [u32 B][B bytes of fields][message]; the fields walk */
		REQUIRE(lr->fields_len == blen - bt);
		REQUIRE(raw == 4 + blen + lr->len);
		REQUIRE(lr->fields_len == 0 ||
		        memcmp(lr->fields, blk + bt, lr->fields_len) == 0);
		REQUIRE(lr->len == 0 ||
		        memcmp(lr->payload, blk + blen, lr->len) == 0);
		REQUIRE(lr->fields_len == 0 ||
		        (const unsigned char *)lr->payload ==
		                (const unsigned char *)lr->fields +
		                        lr->fields_len);
		size_t pos = 0;
		le_field fl;
		int rc;
		while ((rc = le_record_field(lr, &pos, &fl)) == 1)
			;
		REQUIRE(rc == 0 && pos == lr->fields_len);
	} else {
		REQUIRE(lr->fields == NULL && lr->fields_len == 0);
		REQUIRE(raw == lr->len);
		REQUIRE(lr->len == 0 ||
		        memcmp(lr->payload, f + fixed, lr->len) == 0);
	}
	if (!deferred)
		REQUIRE(lr->flags == want && q++);
	REQUIRE((lr->flags & ~(LE_REC_KNOWN_FLAGS | LE_REC_BACKTRACE)) == 0);
	if (fields & LE_FIELD_LEVEL)
		REQUIRE(lr->level == *q++);
	else
		REQUIRE(lr->level == -1);
	if (fields & LE_FIELD_SHARD) {
		REQUIRE(le__get16(q) == 0);
		q += 2;
	}
	if (fields & LE_FIELD_SEQUENCE) {
		REQUIRE(lr->seq == le__get64(q));
		q += 8;
	}
	if (fields & LE_FIELD_TIMESTAMP)
		REQUIRE(lr->ts_ns == le__get64(q));
	else
		REQUIRE(lr->ts_ns == 0);
	out->file = fi;
	out->off = lr->offset;
	out->seq = lr->seq;
	out->len = lr->len;
	out->payload = has_fields ? f + fixed + 4 + lr->fields_len
	                                    : f + fixed;
	if (deferred)
		out->payload = NULL; /* a text of the reader's: not compared */
}

static void read_mode(struct run *ru, int mode, size_t total_bytes)
{
	le_reader_opts o;
	le_reader *r;
	le_record lr;
	le_reader_stats st;
	int rc;

	memset(ru, 0, sizeof *ru);
	TRACE("read, mode %d\n", mode);
	le_reader_opts_init(&o);
	o.mode = mode;
	o.on_problem = on_problem;
	o.arg = ru;
	rc = le_reader_open(&r, fuzz_top, &o);
	if (rc == LE_EVERSION) {
		ru->rc = rc;
		return;
	}
	REQUIRE(rc == 0);
	while ((rc = le_reader_next(r, &lr)) == 1) {
		if (ru->n == ru->cap) {
			ru->cap = ru->cap ? 2 * ru->cap : 64;
			ru->r = realloc(ru->r, (size_t)ru->cap * sizeof *ru->r);
			REQUIRE(ru->r);
		}
		struct rec *x = &ru->r[ru->n];
		TRACE("    record %s @%" PRIu64 " seq %" PRIu64 " len %zu\n",
		      lr.file, lr.offset, lr.seq, lr.len);
		check_record(&lr, x);
		/* A header can claim a base sequence near 2^64 (only damage
		 * that passes the CRC can); the count then wraps to 0.  Not
		 * worth an error: the engine never numbers that far. */
		if (ru->n > 0 && x->seq <= ru->r[ru->n - 1].seq &&
		    ru->r[ru->n - 1].seq != UINT64_MAX)
			REQUIRE(ru->noted && x->file != ru->r[ru->n - 1].file);
		ru->noted = 0;
		ru->n++;
		REQUIRE((uint64_t)ru->n <= total_bytes / 5);
	}
	ru->rc = rc;
	if (rc < 0) {
		REQUIRE(rc == LE_ECORRUPT || rc == LE_EVERSION);
		if (rc == LE_ECORRUPT)
			REQUIRE(mode == LE_RECOVER_TOLERATE_TAIL ||
			        mode == LE_RECOVER_ABSOLUTE);
		REQUIRE(ru->problems > 0);
		REQUIRE(le_reader_next(r, &lr) == rc); /* sticky */
	}
	if (mode == LE_RECOVER_ABSOLUTE)
		REQUIRE((rc < 0) == (ru->problems > 0));
	REQUIRE(le_reader_stats_get(r, &st) == 0);
	REQUIRE(st.records == (uint64_t)ru->n);
	REQUIRE(st.problems == ru->problems);
	le_reader_close(r);
}

/* a's records are the first a->n of b's. */
static void require_prefix(const struct run *a, const struct run *b)
{
	REQUIRE(a->n <= b->n);
	for (int i = 0; i < a->n; i++)
		REQUIRE(a->r[i].file == b->r[i].file &&
		        a->r[i].off == b->r[i].off &&
		        a->r[i].seq == b->r[i].seq);
}

/* ---- recovery ---- */

static void recover(const struct run *before)
{
	le_config cfg;
	le_engine *e;
	le_reader *r;
	le_record lr;
	int rc, i = 0, appended = 0;
	uint64_t max_seq = 0;
	int consistent = before->overlaps == 0;

	le_config_init(&cfg);
	cfg.dir = fuzz_top;
	cfg.queue_capacity = 64;
	cfg.queue_capacity_bytes = 64u << 10;
	cfg.max_record_bytes = 4096;
	cfg.max_pending_bytes = 64u << 10;
	cfg.durability = LE_SYNC_NONE;
	/* The writer reserves blocks up to segment_bytes ahead (fallocate):
	 * milliseconds per open on tmpfs at the default 64 MiB. */
	cfg.segment_bytes = 64u << 10;
	cfg.fields = files[nfiles - 1].len >= 16
	                     ? le__get32(files[nfiles - 1].img + 12) &
	                               LE_FIELD_ALL
	                     : LE_FIELD_ALL;
	rc = le_open(&e, &cfg);
	if (rc == LE_ECORRUPT || rc == LE_EVERSION)
		return;
	if (rc != 0)
		fprintf(stderr, "le_open: %s: %s\n", le_strerror(rc),
		        le_errmsg());
	REQUIRE(rc == 0);
	REQUIRE(le_write(e, 0, LE_INFO, APPENDED, strlen(APPENDED)) == 0);
	REQUIRE(le_close(e) == 0);

	for (int k = 0; k < before->n; k++) {
		if ((k > 0 && before->r[k].seq <= before->r[k - 1].seq) ||
		    before->r[k].seq == UINT64_MAX) /* nothing comes after */
			consistent = 0;
		if (before->r[k].seq > max_seq)
			max_seq = before->r[k].seq;
	}
	/* A segment whose header starts at or below a sequence an earlier
	 * segment holds contradicts it, even where the reader, having
	 * skipped damage, had no count to check it against. */
	for (int f = 1; f < nfiles; f++) {
		le__seg_hdr h;
		if (files[f].len < LE_SEG_HDR ||
		    le__seg_hdr_decode(files[f].img, &h) != 0)
			continue;
		for (int k = 0; k < before->n; k++)
			if (before->r[k].file < f && before->r[k].seq >= h.base_seq)
				consistent = 0;
	}
	le_reader_opts o;
	le_reader_opts_init(&o);
	o.mode = LE_RECOVER_SKIP;
	REQUIRE(le_reader_open(&r, fuzz_top, &o) == 0);
	TRACE("after recovery (SKIP):\n");
	while ((rc = le_reader_next(r, &lr)) == 1) {
		int fi = file_of(lr.file);
		TRACE("    record %s @%" PRIu64 " seq %" PRIu64 " len %zu\n",
		      lr.file, lr.offset, lr.seq, lr.len);
		if (i < before->n && fi == before->r[i].file &&
		    lr.offset == before->r[i].off) {
			const struct rec *b = &before->r[i];
			REQUIRE(lr.seq == b->seq);
			REQUIRE(!b->payload || lr.len == b->len);
			REQUIRE(!b->payload || lr.len == 0 ||
			        memcmp(lr.payload, b->payload, lr.len) == 0);
			i++;
			continue;
		}
		if (lr.len == strlen(APPENDED) &&
		    memcmp(lr.payload, APPENDED, lr.len) == 0) {
			appended++;
			if (consistent)
				REQUIRE(before->n == 0 || lr.seq > max_seq);
		}
	}
	REQUIRE(rc == 0);
	le_reader_close(r);
	if (i != before->n)
		fprintf(stderr, "recovery lost record %d of %d (file %d "
		        "offset %" PRIu64 " seq %" PRIu64 ")\n", i, before->n,
		        before->r[i].file, before->r[i].off, before->r[i].seq);
	REQUIRE(i == before->n);
	REQUIRE(appended == 1);
}

/* ---- one input ---- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct run runs[4];
	const int order[4] = {LE_RECOVER_ABSOLUTE, LE_RECOVER_POINT_IN_TIME,
	                      LE_RECOVER_TOLERATE_TAIL, LE_RECOVER_SKIP};

	if (size < 3)
		return 0;
	if (!ready) {
		setup();
		ready = 1;
	}
	int ctl = data[0], layout = ctl & 3;
	int fix = (ctl >> 2) & 1, renumber = fix && ((ctl >> 3) & 1);
	size_t split = le__get16(data + 1);
	size_t len = size - 3;
	unsigned char *body = malloc(len ? len : 1);
	REQUIRE(body);
	memcpy(body, data + 3, len);

	size_t ck_len = 0;
	if (layout & 2) {
		ck_len = len < LE_CKPT_FILE_BYTES ? len / 2 : LE_CKPT_FILE_BYTES;
		len -= ck_len;
	}
	nfiles = (layout & 1) ? 2 : 1;
	if (nfiles == 2) {
		split = len ? split % (len + 1) : 0;
		files[0] = (struct seginfo){.img = body, .len = split};
		files[1] = (struct seginfo){.img = body + split,
		                            .len = len - split};
	} else {
		files[0] = (struct seginfo){.img = body, .len = len};
	}

	uint64_t base = 1;
	for (int i = 0; i < nfiles && fix; i++) {
		struct seginfo *s = &files[i];
		if (s->len < LE_SEG_HDR)
			continue;
		fix_header(s, (uint64_t)i + 1, renumber, base);
		fix_frames(s, renumber);
		base = s->next_seq;
	}
	unsigned char *ck = body + len;
	if (fix && ck_len >= LE_CKPT_SLOT) {
		if (renumber)
			fix_ckpt_slot0(ck, &files[nfiles - 1],
			               (uint64_t)nfiles);
		seal_slot(ck);
	}
	if (fix && ck_len >= LE_CKPT_FILE_BYTES)
		seal_slot(ck + LE_CKPT_SLOT1_OFF);

	clean();
	for (int i = 0; i < nfiles; i++)
		spit(seg_name[i], files[i].img, files[i].len);
	if (layout & 2)
		spit(ckpt_name, ck, ck_len);
	for (int i = 0; i < nfiles; i++)
		TRACE("file %s: %zu bytes\n", seg_name[i], files[i].len);
	TRACE("checkpoint: %zu bytes\n", ck_len);

	size_t total = 0;
	for (int i = 0; i < nfiles; i++)
		total += files[i].len;
	for (int m = 0; m < 4; m++)
		read_mode(&runs[m], order[m], total);

	/* No problem at all: every mode reads the same, with no error. */
	if (runs[0].problems == 0 && runs[0].rc == 0)
		for (int m = 1; m < 4; m++)
			REQUIRE(runs[m].rc == 0 && runs[m].n == runs[0].n);
	/* No problem reported: read to the end, or a segment of a newer
	 * format refused at open (LE_EVERSION, not a problem: the file is
	 * another library's, and the error names its version). */
	for (int m = 0; m < 4; m++)
		if (runs[m].problems == 0)
			REQUIRE(runs[m].rc == 0 || runs[m].rc == LE_EVERSION);
	/* ABSOLUTE <= POINT_IN_TIME <= TOLERATE_TAIL <= SKIP, as prefixes,
	 * unless a newer format version stopped one of them. */
	for (int m = 0; m + 1 < 4; m++)
		if (runs[m].rc != LE_EVERSION && runs[m + 1].rc != LE_EVERSION)
			require_prefix(&runs[m], &runs[m + 1]);

	if (FUZZ_RECOVER && runs[3].rc == 0)
		recover(&runs[3]);
	REQUIRE(fuzz_fds_left() == 0); /* every reader and engine closed */
	for (int m = 0; m < 4; m++)
		free(runs[m].r);
	free(body);
	return 0;
}
