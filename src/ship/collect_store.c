/*
 * collect_store.c -- the collector's side of forwarding, minus the
 * transport: the ORIGIN file, the checks on a message body, and a store
 * with one shard directory per origin (host, shard) whose segments hold the
 * frames as they arrived (docs/INTERFACES.md, "Collector store").
 *
 * Crash reasoning.  A record is in the store when its frame is in a
 * segment; the collector acknowledges a message only after
 * le__cstore_append (and le__cstore_sync when asked) returned.  At open,
 * each origin's last segment is scanned to its valid end, a torn tail is
 * cut, and the sequence after the last whole frame is what the origin
 * expects next: a message redelivered after a crash finds its records
 * below it and is skipped (nothing twice), and a message cut by the crash
 * is redelivered whole, its stored part skipped (nothing lost).
 *
 * An origin's state:
 *
 *   no segment --append/gap--> segment open --rotate (size, field set,
 *        ^                        |  ^          gap, damage at open)
 *        |                        v  |
 *      open(): next_seq from the last segment's valid end
 *
 * Gap claims.  A marker (le__cstore_gap) claims records first..last will
 * not come; it never makes the store drop those that do.  Each origin
 * (its chain) keeps the claimed records that have not come as a set of
 * ranges, and a second shard directory, its late directory (ORIGIN kind
 * LE_ORIGIN_LATE), takes those that come: one run per segment, runs in
 * no order.  Both are read back at open (the markers at the start of the
 * chain's segments, the late directory's runs), so after a crash a
 * redelivered message finds its late records stored and stores nothing
 * twice.  Late records are synced and acknowledged like the others.
 */
#define _GNU_SOURCE
#include "ship/ship.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "base/crc32c.h"
#include "record/defer.h"
#include "base/os.h"
#include "store/segment.h"

/* ---- host names and the ORIGIN file ---- */

int le__host_valid(const char *host, size_t len)
{
	if (len == 0 || len > LE_HOST_MAX)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = host[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

size_t le__host_token(char *out, size_t cap, const char *host)
{
	size_t n = strlen(host);

	if (n + 1 > cap)
		return 0;
	for (size_t i = 0; i < n; i++)
		out[i] = host[i] == '.' ? '~' : host[i];
	out[n] = '\0';
	return n;
}

size_t le__origin_encode(unsigned char *out, const le__origin *o)
{
	size_t n = strlen(o->host), h = o->kind == LE_ORIGIN_CHAIN ? 16 : 20;

	memcpy(out, LE_ORIGIN_MAGIC, 8);
	le__put16(out + 8, h == 16 ? 1 : 2);
	le__put16(out + 10, (uint16_t)n);
	le__put32(out + 12, o->shard);
	if (h == 20)
		le__put32(out + 16, o->kind);
	memcpy(out + h, o->host, n);
	le__put32(out + h + n,
	          le__crc_mask(le__crc32c_extend(0, out, h + n)));
	return h + n + 4;
}

int le__origin_decode(const unsigned char *in, size_t len, le__origin *o)
{
	if (len < 20 || memcmp(in, LE_ORIGIN_MAGIC, 8) != 0)
		return LE_ECORRUPT;
	unsigned v = le__get16(in + 8);
	size_t n = le__get16(in + 10), h = v == 1 ? 16 : 20;
	if ((v != 1 && v != 2) || len < h + n + 4 ||
	    le__get32(in + h + n) !=
	            le__crc_mask(le__crc32c_extend(0, in, h + n)) ||
	    !le__host_valid((const char *)in + h, n))
		return LE_ECORRUPT;
	o->kind = v == 1 ? LE_ORIGIN_CHAIN : le__get32(in + 16);
	if (o->kind != LE_ORIGIN_CHAIN && o->kind != LE_ORIGIN_LATE)
		return LE_ECORRUPT;
	memcpy(o->host, in + h, n);
	o->host[n] = '\0';
	o->shard = le__get32(in + 12);
	return 0;
}

int le__origin_read(const char *shard_dir, le__origin *o)
{
	unsigned char buf[LE_ORIGIN_MAX_BYTES];
	ssize_t got = le__ship_read(shard_dir, LE_ORIGIN_NAME, buf,
	                            sizeof buf);

	return got < 0 ? (int)got : le__origin_decode(buf, (size_t)got, o);
}

uint64_t le__gap_marker_count(const unsigned char *p, size_t len)
{
	static const char *const whys[] = {" records " LE_GAP_LOST,
	                                   " records " LE_GAP_MISSING};
	uint64_t n = 0;
	size_t i = 0;

	while (i < len && i < 19 && p[i] >= '0' && p[i] <= '9')
		n = n * 10 + (uint64_t)(p[i++] - '0');
	if (i == 0 || n == 0 || n > LE_SHIP_SEQ_MAX || p[0] == '0')
		return 0;
	for (size_t k = 0; k < 2; k++)
		if (len - i == strlen(whys[k]) &&
		    memcmp(p + i, whys[k], len - i) == 0)
			return n;
	return 0;
}

/* Write shard_dir/ORIGIN whole or not at all: a temporary file, synced,
 * renamed over, the directory synced. */
static int origin_write(const char *shard_dir, const le__origin *o)
{
	char tmp[LE_PATH_MAX], path[LE_PATH_MAX];
	unsigned char buf[LE_ORIGIN_MAX_BYTES];
	size_t len = le__origin_encode(buf, o);

	if (snprintf(tmp, sizeof tmp, "%s/%s.tmp", shard_dir,
	             LE_ORIGIN_NAME) >= (int)sizeof tmp ||
	    snprintf(path, sizeof path, "%s/%s", shard_dir, LE_ORIGIN_NAME) >=
	            (int)sizeof path)
		return -ENAMETOOLONG;
	int fd = le__open_in(tmp, LE_IN_SHARD, O_WRONLY | O_CREAT | O_TRUNC,
	                     0640);
	if (fd < 0)
		return fd;
	int rc = le__pwrite_all(fd, buf, len, 0);
	if (rc == 0)
		rc = le__fdatasync(fd);
	le__close(fd);
	if (rc == 0)
		rc = le__rename(tmp, path);
	return rc < 0 ? rc : le__fsync_dir_in(shard_dir, LE_IN_DIR);
}

/* ---- message bodies ---- */

int le__ship_check_body(const unsigned char *body, size_t len, uint32_t fields,
                        uint32_t shard, uint64_t first, uint64_t count,
                        uint64_t *bad_off, const char **why)
{
	size_t off = 0;
	le__frame f;
	uint64_t seq = first;

	/* A sound body passes in one run (CRCs side by side); a damaged
	 * one is walked again frame by frame to say where and why. */
	if (le__frames_check(body, len, LE_SEG_VERSION, fields, shard, len, &seq,
	                     &off) == count && off == len) {
		*bad_off = len;
		return 0;
	}
	off = 0;
	for (uint64_t i = 0; i < count; i++) {
		*bad_off = off;
		if (off == len) {
			*why = "fewer frames than its sequence range";
			return LE_ECORRUPT;
		}
		int rc = le__frame_decode(body + off, len - off, fields,
		                          LE_FRAME_MAX, &f, why);
		if (rc == LE_FRAME_END)
			*why = "zero size word";
		if (rc != LE_FRAME_OK)
			return LE_ECORRUPT;
		if ((fields & LE_FIELD_SHARD) && f.shard != shard) {
			*why = "frame names another shard";
			return LE_ECORRUPT;
		}
		if ((fields & LE_FIELD_SEQUENCE) && f.seq != first + i) {
			*why = "sequence number out of order";
			return LE_ECORRUPT;
		}
		off += (size_t)f.size + 4;
	}
	*bad_off = off;
	if (off != len) {
		*why = "bytes after the last frame of its sequence range";
		return LE_ECORRUPT;
	}
	return 0;
}

size_t le__ship_body_skip(const unsigned char *body, size_t len,
                          uint64_t skip)
{
	size_t off = 0;

	for (uint64_t i = 0; i < skip && off + 4 <= len; i++)
		off += (size_t)le__get32(body + off) + 4;
	return off < len ? off : len;
}

/* ---- gap claims: sorted, disjoint ranges of sequences, bounded ---- */

struct rng {
	uint64_t lo, hi; /* inclusive */
	uint64_t before; /* a claim read back at open: the index of the chain
	                    segment before its marker, whose end is still to
	                    be checked against lo (0: checked) */
};

struct rset {
	struct rng *r; /* n of cap, ascending */
	size_t n, cap;
};

/* Room for one more range at index i (ranges from i on move up).  At
 * LE_CLAIM_RANGES the lowest range is forgotten (*forgotten counts its
 * records): the one at r[0], or the new one when it would be r[0].
 * @return the index the new range goes to (i, or i - 1 when r[0] went),
 * -2 when the new one is to be forgotten, -1 out of memory. */
static long rset_open(struct rset *rs, size_t i, uint64_t *forgotten)
{
	if (rs->n == LE_CLAIM_RANGES) {
		if (i == 0)
			return -2;
		*forgotten += rs->r[0].hi - rs->r[0].lo + 1;
		memmove(rs->r, rs->r + 1, --rs->n * sizeof rs->r[0]);
		i--;
	}
	if (rs->n == rs->cap) {
		size_t nc = rs->cap ? 2 * rs->cap : 8;
		struct rng *nr = realloc(rs->r, nc * sizeof *nr);
		if (!nr)
			return -1;
		rs->r = nr;
		rs->cap = nc;
	}
	memmove(rs->r + i + 1, rs->r + i, (rs->n - i) * sizeof rs->r[0]);
	rs->n++;
	return (long)i;
}

/* Add lo..hi (before: as struct rng says), which meets no range of the
 * set.  @return 0, LE_ENOMEM. */
static int rset_add(struct rset *rs, uint64_t lo, uint64_t hi,
                    uint64_t before, uint64_t *forgotten)
{
	size_t i = rs->n;

	while (i > 0 && rs->r[i - 1].lo > hi)
		i--;
	long at = rset_open(rs, i, forgotten);
	if (at == -1)
		return LE_ENOMEM;
	if (at == -2)
		*forgotten += hi - lo + 1;
	else
		rs->r[at] = (struct rng){lo, hi, before};
	return 0;
}

/* Take lo..hi out of the set.  @return 0, LE_ENOMEM (nothing changed). */
static int rset_cut(struct rset *rs, uint64_t lo, uint64_t hi,
                    uint64_t *forgotten)
{
	for (size_t i = 0; i < rs->n; i++) {
		struct rng *g = &rs->r[i];
		if (g->hi < lo || g->lo > hi)
			continue;
		if (g->lo < lo && g->hi > hi) { /* split in two */
			if (rs->n == LE_CLAIM_RANGES && i == 0) {
				/* no room for both halves: the lower goes */
				*forgotten += lo - g->lo;
				g->lo = hi + 1;
				return 0;
			}
			struct rng right = {hi + 1, g->hi, g->before};
			g->hi = lo - 1;
			/* A full set forgets r[0], not g (i > 0); a
			 * failed allocation leaves g where it was. */
			long at = rset_open(rs, i + 1, forgotten);
			if (at == -1) {
				g->hi = right.hi;
				return LE_ENOMEM;
			}
			rs->r[at] = right;
			return 0;
		}
		if (g->lo < lo) {
			g->hi = lo - 1;
		} else if (g->hi > hi) {
			g->lo = hi + 1;
		} else {
			memmove(g, g + 1, (--rs->n - i) * sizeof *g);
			i--;
		}
	}
	return 0;
}

/* The lowest part of the set inside lo..hi, as *a..*b.  @return the
 * index of its range, or -1 when none is. */
static long rset_first(const struct rset *rs, uint64_t lo, uint64_t hi,
                       uint64_t *a, uint64_t *b)
{
	for (size_t i = 0; i < rs->n; i++) {
		const struct rng *g = &rs->r[i];
		if (g->hi < lo || g->lo > hi)
			continue;
		*a = g->lo > lo ? g->lo : lo;
		*b = g->hi < hi ? g->hi : hi;
		return (long)i;
	}
	return -1;
}

/* ---- the store ---- */

struct org {
	le__cstore_origin pub;  /* first: handed out as le__cstore_origin */
	char *dir;              /* DIR/shard-NNN, owned */
	int fd;                 /* active segment, -1: none open */
	int ref;                /* appended to since the clock hand passed */
	uint64_t seg_index;     /* the last segment's index (0: none) */
	uint64_t seg_len;       /* bytes in it */
	uint64_t seg_frames;    /* frames in it */
	uint32_t fields;        /* its field set */
	int fresh;              /* the next append starts a new segment */
	int dirty;              /* written since the last sync */
	int dir_dirty;          /* a segment was created since the last sync */
	/* A chain: the records of its gap claims that have not come, and
	 * its late directory (NULL until looked up: le__cstore_late). */
	struct rset open;
	struct org *late;
};

/*
 * The origin table: n origins in `org` (cap slots, grown by doubling),
 * found by (host, shard) through `idx`, an open-addressed hash table of
 * idx_cap (a power of two, at least twice n) slots holding an origin's
 * place in `org` plus one (0: empty); a probe ends at the first empty
 * slot.  Origins are never removed, but for the one org_drop_last takes
 * back as soon as it was added (the run of slots after its slot is put in
 * again, so no probe stops short).  `taken` is a bitmap of the shard-NNN
 * numbers in use (taken_bits of them): a new directory gets the lowest
 * free one, which is at most n, and n is at most twice max_origins (a
 * chain and its late directory), so below LE_SHARD_DIRS_MAX.  Two directories
 * naming the same origin (copied by hand): the first listed is the one
 * written to, as the reader merges both.  An origin costs
 * sizeof(struct org) plus its directory name plus three table slots:
 * docs/INTERFACES.md gives the measured figure.
 */
struct le__cstore {
	char dir[LE_PATH_MAX];
	le__cstore_opts opts;
	int lock_fd;
	struct org **org;       /* n of cap, in the order they were taken in */
	size_t n, cap;
	size_t nchain;          /* of them, chains (what max_origins counts) */
	uint32_t *idx;          /* idx_cap slots: org index + 1, 0 empty */
	size_t idx_cap;
	unsigned char *taken;   /* bit d: shard directory d is in use */
	size_t taken_bits;
	size_t nfd;             /* segment files open (at most OPEN_SEGS) */
	size_t hand;            /* the clock hand over org: the next one
	                           looked at when a file must be closed */
	int sync_err;           /* a sync of a closed segment failed: every
	                           later le__cstore_sync fails with it */
	unsigned char *stage;   /* relinked frames on their way to a file */
	size_t stage_cap;
	/* Descriptors of the message being stored, in the segment it goes
	 * to.  One table for the store, begun again for each message: a
	 * forwarder's message carries each call site's descriptor itself,
	 * so a table kept per origin from message to message would save no
	 * byte stored and hold up to LE_RELINK_BYTES for each origin. */
	le__relink rl;
};

/* Segment files a store keeps open at once.  An origin written to keeps
 * its segment open for the next message; past this many, the one the
 * clock hand finds idle is closed (synced first when the store syncs, so
 * nothing acknowledged depends on it) and opened again when its origin
 * next writes.  It keeps a collector of thousands of origins far below the
 * usual 1024-descriptor limit, with room for its connections. */
#define OPEN_SEGS 256

#define ERR(...) snprintf(errbuf, cap, __VA_ARGS__)

static int origin_get(le__cstore *s, const char *host, uint32_t shard,
                      uint32_t kind, int create, struct org **out,
                      char *errbuf, size_t cap);

static int lock_dir(le__cstore *s, char *errbuf, size_t cap)
{
	char path[LE_PATH_MAX];

	if (snprintf(path, sizeof path, "%s/LOCK", s->dir) >= (int)sizeof path)
		return -ENAMETOOLONG;
	s->lock_fd = le__open_in(path, LE_IN_DIR, O_RDWR | O_CREAT, 0640);
	if (s->lock_fd < 0) {
		ERR("%s", s->lock_fd == LE_EUNSAFE ? le_errmsg() :
		    le_strerror(s->lock_fd));
		return s->lock_fd;
	}
	int e = -le__flock(s->lock_fd, LOCK_EX | LOCK_NB);
	if (e > 0) {
		ERR("%s: %s", s->dir, e == EWOULDBLOCK ? "in use by another "
		    "collector or engine" : strerror(e));
		return e == EWOULDBLOCK ? LE_EBUSY : -e;
	}
	return 0;
}

/* Scan segment `index` of o to its valid end: cut a torn tail, note
 * damage (appends then go to a new segment), set next_seq.  @return 0,
 * 1 when its header does not decode (no frame of it can be read), < 0. */
static int org_scan(struct org *o, uint64_t index, char *errbuf, size_t cap)
{
	char path[LE_PATH_MAX];
	le__scan sc;
	le__frame f;
	const char *why;
	int damaged = 0, rc;

	le__seg_path(path, sizeof path, o->dir, index);
	rc = le__scan_open(&sc, path, o->pub.o.shard, &why);
	if (rc == LE_ECORRUPT || rc == LE_EVERSION)
		return 1;
	if (rc < 0) {
		ERR("%s: %s", path, rc == LE_EUNSAFE ? le_errmsg() :
		    le_strerror(rc));
		return rc;
	}
	for (;;) {
		while ((rc = le__scan_next(&sc, &f, &why)) == LE_FRAME_OK)
			o->seg_frames++;
		if (rc < 0 || sc.off >= sc.file_len)
			break;
		rc = le__scan_resync(&sc);
		if (rc <= 0)
			break;
		damaged = 1;
	}
	if (rc >= 0 && sc.off < sc.file_len) {
		/* What no valid frame follows is a torn tail: cut it. */
		int fd = le__open_in(path, LE_IN_SHARD, O_WRONLY, 0);
		rc = fd < 0 ? fd : le__ftruncate(fd, sc.off);
		if (fd >= 0)
			le__close(fd);
	}
	o->seg_len = sc.off;
	o->fields = sc.hdr.fields;
	o->pub.next_seq = sc.next_seq;
	o->fresh = damaged;
	le__scan_close(&sc);
	if (rc < 0)
		ERR("%s: %s", path, le_strerror(rc));
	return rc < 0 ? rc : 0;
}

/* Where o's records end.  A last segment created and never written (the
 * collector died between its create and its header) held nothing: it is
 * deleted, as the engine's recovery does, and its index is used again.
 * One whose header does not decode otherwise (damaged) is left as it is
 * for readers to report; the records end where the one before it does,
 * and appends go to a new segment after it. */
static int org_recover(struct org *o, char *errbuf, size_t cap)
{
	char path[LE_PATH_MAX];
	uint64_t *segs;
	size_t nseg;
	int rc = le__seg_list(o->dir, &segs, &nseg);

	if (rc < 0) {
		ERR("%s: %s", o->dir, le_strerror(rc));
		return rc;
	}
	if (nseg) {
		le__seg_path(path, sizeof path, o->dir, segs[nseg - 1]);
		if (le__seg_unborn(path)) {
			if ((rc = le__unlink(path)) < 0) {
				ERR("%s: %s", path, le_strerror(rc));
				free(segs);
				return rc;
			}
			nseg--;
		}
	}
	rc = 1;
	for (size_t i = nseg; i > 0 && rc == 1; i--)
		rc = org_scan(o, segs[i - 1], errbuf, cap);
	if (nseg) {
		o->seg_index = segs[nseg - 1];
		o->fresh |= rc == 1;
	}
	free(segs);
	return rc < 0 ? rc : 0;
}

/* FNV-1a over host, the shard's four bytes and the kind's. */
static size_t org_hash(const char *host, uint32_t shard, uint32_t kind)
{
	uint64_t h = 14695981039346656037u;

	for (const char *p = host; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211u;
	for (int i = 0; i < 4; i++)
		h = (h ^ ((shard >> (8 * i)) & 0xff)) * 1099511628211u;
	for (int i = 0; i < 4; i++)
		h = (h ^ ((kind >> (8 * i)) & 0xff)) * 1099511628211u;
	return (size_t)h;
}

/* The slot of idx where origin o (host, shard, kind) is, or the empty one
 * where it would go. */
static size_t idx_slot(const le__cstore *s, const le__origin *or)
{
	size_t mask = s->idx_cap - 1;
	size_t i = org_hash(or->host, or->shard, or->kind) & mask;

	while (s->idx[i]) {
		const struct org *o = s->org[s->idx[i] - 1];
		if (o->pub.o.shard == or->shard && o->pub.o.kind == or->kind &&
		    strcmp(o->pub.o.host, or->host) == 0)
			break;
		i = (i + 1) & mask;
	}
	return i;
}

/* Room in org, idx and taken for one more origin in shard directory d.
 * @return 0, LE_ENOMEM. */
static int table_room(le__cstore *s, uint32_t d)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? 2 * s->cap : 64;
		struct org **no = realloc(s->org, nc * sizeof *no);
		if (!no)
			return LE_ENOMEM;
		s->org = no;
		s->cap = nc;
	}
	if (d >= s->taken_bits) {
		size_t nb = ((size_t)d + 1 > 2 * s->taken_bits ?
		             (size_t)d + 1 : 2 * s->taken_bits) + 63;
		nb -= nb % 64;
		unsigned char *nt = realloc(s->taken, nb / 8);
		if (!nt)
			return LE_ENOMEM;
		memset(nt + s->taken_bits / 8, 0, (nb - s->taken_bits) / 8);
		s->taken = nt;
		s->taken_bits = nb;
	}
	if (2 * (s->n + 1) <= s->idx_cap)
		return 0;
	size_t nc = s->idx_cap ? 2 * s->idx_cap : 128;
	uint32_t *ni = calloc(nc, sizeof *ni), *old = s->idx;
	if (!ni)
		return LE_ENOMEM;
	s->idx = ni;
	s->idx_cap = nc;
	for (size_t i = 0; i < s->n; i++)
		s->idx[idx_slot(s, &s->org[i]->pub.o)] = (uint32_t)i + 1;
	free(old);
	return 0;
}

static int dir_taken(const le__cstore *s, uint32_t d)
{
	return d < s->taken_bits && (s->taken[d / 8] >> (d % 8)) & 1;
}

/* Add origin `or` in shard directory dir_shard to the table (not yet to
 * the disk).  @return 0, LE_ENOMEM. */
static int org_add(le__cstore *s, uint32_t dir_shard, const le__origin *or,
                   struct org **out)
{
	char d[LE_PATH_MAX];
	struct org *o;
	int rc = le__shard_dir(d, sizeof d, s->dir, dir_shard);

	if (rc < 0)
		return rc;
	if ((rc = table_room(s, dir_shard)) < 0)
		return rc;
	if (!(o = calloc(1, sizeof *o)) || !(o->dir = strdup(d))) {
		free(o);
		return LE_ENOMEM;
	}
	o->pub.o = *or;
	o->pub.dir_shard = dir_shard;
	o->fd = -1;
	size_t i = idx_slot(s, or);
	if (!s->idx[i])
		s->idx[i] = (uint32_t)s->n + 1;
	s->org[s->n++] = o;
	s->nchain += or->kind == LE_ORIGIN_CHAIN;
	s->taken[dir_shard / 8] |= (unsigned char)(1u << (dir_shard % 8));
	*out = o;
	return 0;
}

/* Undo the org_add of the last origin (its directory could not be
 * made). */
static void org_drop_last(le__cstore *s)
{
	struct org *o = s->org[--s->n];

	s->nchain -= o->pub.o.kind == LE_ORIGIN_CHAIN;
	uint32_t d = o->pub.dir_shard;
	size_t mask = s->idx_cap - 1;

	s->taken[d / 8] &= (unsigned char)~(1u << (d % 8));
	/* Take its slot out of the probe sequence: the slots after it
	 * (up to the next empty one) are put in again. */
	size_t i = idx_slot(s, &o->pub.o);
	s->idx[i] = 0;
	for (i = (i + 1) & mask; s->idx[i]; i = (i + 1) & mask) {
		uint32_t v = s->idx[i];
		s->idx[i] = 0;
		const struct org *m = s->org[v - 1];
		s->idx[idx_slot(s, &m->pub.o)] = v;
	}
	free(o->dir);
	free(o);
}

/* Take in shard directory `shard`: an origin, or an empty leftover of a
 * creation a crash interrupted, or something not ours (an error). */
static int load_shard(le__cstore *s, uint32_t shard, char *errbuf,
                      size_t cap)
{
	char sdir[LE_PATH_MAX];
	le__origin or;
	struct org *o;
	uint64_t *segs;
	size_t nseg;

	le__shard_dir(sdir, sizeof sdir, s->dir, shard);
	int rc = le__origin_read(sdir, &or);
	if (rc == 0) {
		rc = org_add(s, shard, &or, &o);
		return rc < 0 ? rc : org_recover(o, errbuf, cap);
	}
	if (le__seg_list(sdir, &segs, &nseg) == 0 && nseg == 0)
		return 0; /* mkdir'ed, ORIGIN never completed: free again */
	free(segs);
	ERR("%s: segments but no valid %s file: not a collector's store",
	    sdir, LE_ORIGIN_NAME);
	return LE_ECORRUPT;
}

/* Segment `index` of o: its base sequence, the count of the collector's
 * gap marker it starts with (*marker; 0: none), and with end != NULL the
 * sequence after its last valid frame (the whole segment is read).
 * @return 0, 1 when its header does not decode, < 0. */
static int seg_look(const struct org *o, uint64_t index, uint64_t *base,
                    uint64_t *marker, uint64_t *end)
{
	char path[LE_PATH_MAX];
	le__scan sc;
	le__frame f;
	const char *why;
	uint64_t bytes;

	le__seg_path(path, sizeof path, o->dir, index);
	int rc = le__scan_open(&sc, path, o->pub.o.shard, &why);
	if (rc == LE_ECORRUPT || rc == LE_EVERSION)
		return 1;
	if (rc < 0)
		return rc;
	*base = sc.hdr.base_seq;
	*marker = 0;
	rc = le__scan_next(&sc, &f, &why);
	if (rc == LE_FRAME_OK && (f.flags & LE_REC_MARKER) && f.seq == *base)
		*marker = le__gap_marker_count(f.payload, f.len);
	while (end && rc == LE_FRAME_OK) {
		int64_t k = le__scan_many(&sc, UINT64_MAX, &bytes);
		rc = k > 0 ? LE_FRAME_OK : k < 0 ? (int)k
		                                 : le__scan_next(&sc, &f, &why);
	}
	if (end)
		*end = sc.next_seq;
	le__scan_close(&sc);
	return rc < 0 ? rc : 0;
}

/*
 * o's gap claims, from its chain: each segment that starts with a
 * collector's marker (sequence = its base, text "N records ...") claims
 * base - N + 1 .. base, and never what a claim before it did.  Where the
 * segment before it ends is checked when a record of the claim comes
 * (claim_check): it costs reading that segment, which most claims never
 * need.
 */
static int claims_of_chain(struct org *o, const uint64_t *segs, size_t n)
{
	uint64_t base, mark, floor = 1;

	for (size_t i = 0; i < n; i++) {
		int rc = seg_look(o, segs[i], &base, &mark, NULL);
		if (rc < 0)
			return rc;
		if (rc == 1 || !mark || mark > base)
			continue;
		uint64_t first = base - mark + 1;
		if (floor > first)
			first = floor;
		if (first > base)
			continue;
		/* The first segment has none before: the origin begins. */
		rc = rset_add(&o->open, first, base, i ? segs[i - 1] : 0,
		              &o->pub.forgotten);
		if (rc < 0)
			return rc;
		floor = base + 1;
	}
	return 0;
}

/* Claim r[i] was read back at open: cut from it what the chain segment
 * before its marker holds.  A marker's count that reaches into stored
 * records (a record of the origin's own that reads like a marker) claims
 * none of them: the chain's records are stored, whatever a frame says. */
static int claim_check(struct org *o, size_t i)
{
	uint64_t base, mark, end, lo = o->open.r[i].lo;
	uint64_t before = o->open.r[i].before;

	/* The parts of the claim (split by late runs) are checked at once,
	 * from the lowest. */
	for (size_t k = 0; k < o->open.n; k++) {
		struct rng *g = &o->open.r[k];
		if (g->before != before)
			continue;
		lo = g->lo < lo ? g->lo : lo;
		g->before = 0;
	}
	int rc = seg_look(o, before, &base, &mark, &end);
	if (rc != 0 || end <= lo)
		return rc < 0 ? rc : 0; /* 1: damaged, the count stands */
	return rset_cut(&o->open, lo, end - 1, &o->pub.forgotten);
}

/* What of o's claims its late directory l holds already: each segment
 * a run from its base to its valid end. */
static int claims_came(struct org *o, struct org *l)
{
	uint64_t *segs, base, mark, end;
	size_t n;
	int rc = le__seg_list(l->dir, &segs, &n);

	if (rc < 0)
		return rc;
	for (size_t i = 0; rc >= 0 && i < n; i++) {
		rc = seg_look(l, segs[i], &base, &mark, &end);
		if (rc == 0 && end > base)
			rc = rset_cut(&o->open, base, end - 1, &o->pub.forgotten);
	}
	free(segs);
	return rc < 0 ? rc : 0;
}

/* Rebuild chain o's open claims from the store, and find its late
 * directory. */
static int org_claims(le__cstore *s, struct org *o, char *errbuf, size_t cap)
{
	uint64_t *segs;
	size_t n;
	int rc = le__seg_list(o->dir, &segs, &n);

	if (rc == 0) {
		rc = claims_of_chain(o, segs, n);
		free(segs);
	}
	if (origin_get(s, o->pub.o.host, o->pub.o.shard, LE_ORIGIN_LATE, 0,
	               &o->late, errbuf, cap) < 0)
		o->late = NULL; /* none yet */
	if (rc == 0 && o->late)
		rc = claims_came(o, o->late);
	if (rc == LE_EUNSAFE) /* a link, a FIFO...: le_errmsg names it */
		ERR("%s: gap claims: %s", o->dir, le_errmsg());
	else if (rc < 0)
		ERR("%s: gap claims: %s", o->dir, le_strerror(rc));
	return rc;
}

int le__cstore_open(le__cstore **out, const char *dir,
                    const le__cstore_opts *opts, char *errbuf, size_t cap)
{
	le__cstore *s = calloc(1, sizeof *s);
	uint32_t *shards = NULL;
	size_t n = 0;
	int rc = LE_ENOMEM;

	*out = NULL;
	errbuf[0] = '\0';
	if (!s)
		return rc;
	s->lock_fd = -1;
	s->opts = *opts;
	if (!s->opts.max_origins)
		s->opts.max_origins = LE_ORIGINS_DEFAULT;
	if (s->opts.max_origins > LE_ORIGINS_MAX) {
		ERR("max_origins: %" PRIu32 " is above %d", s->opts.max_origins,
		    LE_ORIGINS_MAX);
		rc = LE_EINVAL;
		goto fail;
	}
	snprintf(s->dir, sizeof s->dir, "%s", dir);
	rc = lock_dir(s, errbuf, cap);
	if (rc < 0)
		goto fail;
	rc = le__shard_list(dir, &shards, &n);
	if (rc < 0) {
		ERR("%s: %s", dir, le_strerror(rc));
		goto fail;
	}
	for (size_t i = 0; i < n && rc >= 0; i++)
		rc = load_shard(s, shards[i], errbuf, cap);
	free(shards);
	for (size_t i = 0; i < s->n && rc >= 0; i++)
		if (s->org[i]->pub.o.kind == LE_ORIGIN_CHAIN)
			rc = org_claims(s, s->org[i], errbuf, cap);
	if (rc < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	le__cstore_close(s);
	return rc;
}

void le__cstore_close(le__cstore *s)
{
	if (!s)
		return;
	le__cstore_sync(s);
	for (size_t i = 0; i < s->n; i++) {
		if (s->org[i]->fd >= 0)
			le__close(s->org[i]->fd);
		free(s->org[i]->open.r);
		free(s->org[i]->dir);
		free(s->org[i]);
	}
	free(s->org);
	free(s->idx);
	free(s->taken);
	free(s->stage);
	le__relink_free(&s->rl);
	if (s->lock_fd >= 0)
		le__close(s->lock_fd);
	free(s);
}

/* Make shard directory d for the origin o just added, its ORIGIN file
 * written, both durable.  @return 0, < 0 (errbuf says). */
static int org_create(le__cstore *s, struct org *o, char *errbuf, size_t cap)
{
	int rc = le__mkdir(o->dir, 0750);

	if (rc == -EEXIST)
		rc = 0;
	if (rc == 0)
		rc = origin_write(o->dir, &o->pub.o);
	if (rc == 0)
		rc = le__fsync_path(s->dir);
	if (rc < 0)
		ERR("%s: %s", o->dir, rc == LE_EUNSAFE ? le_errmsg() :
		    le_strerror(rc));
	return rc;
}

/* le__cstore_origin_get for a shard directory of kind `kind`.  The limit
 * counts chains only: an origin's late directory is made for records its
 * chain already has a place for, and at most one per chain. */
static int origin_get(le__cstore *s, const char *host, uint32_t shard,
                      uint32_t kind, int create, struct org **out,
                      char *errbuf, size_t cap)
{
	le__origin or;
	struct org *o;
	uint32_t d = 0, i;
	int rc;

	*out = NULL;
	errbuf[0] = '\0';
	if (!le__host_valid(host, strlen(host))) {
		ERR("origin host '%.64s': not 1 to %d of A-Z a-z 0-9 . _ -",
		    host, LE_HOST_MAX);
		return LE_EINVAL;
	}
	memset(&or, 0, sizeof or);
	snprintf(or.host, sizeof or.host, "%s", host);
	or.shard = shard;
	or.kind = kind;
	if (s->n && (i = s->idx[idx_slot(s, &or)]) != 0) {
		*out = s->org[i - 1];
		return 0;
	}
	if (!create)
		return -ENOENT;
	if (kind == LE_ORIGIN_CHAIN && s->nchain >= s->opts.max_origins) {
		ERR("%s: no room for origin %s/%" PRIu32 ": origin limit "
		    "reached (%" PRIu32 " origins; --max-origins)", s->dir, host,
		    shard, s->opts.max_origins);
		return LE_EFULL;
	}
	while (dir_taken(s, d))
		d++;
	if (d >= LE_SHARD_DIRS_MAX) { /* max_origins bounds it: a guard */
		ERR("%s: no room for origin %s/%" PRIu32 ": every shard "
		    "directory number is taken", s->dir, host, shard);
		return LE_EFULL;
	}
	if ((rc = org_add(s, d, &or, &o)) < 0) {
		ERR("%s: %s", s->dir, le_strerror(rc));
		return rc;
	}
	if ((rc = org_create(s, o, errbuf, cap)) < 0) {
		org_drop_last(s);
		return rc;
	}
	*out = o;
	return 0;
}

int le__cstore_origin_get(le__cstore *s, const char *host, uint32_t shard,
                          int create, le__cstore_origin **out, char *errbuf,
                          size_t cap)
{
	struct org *o;
	int rc = origin_get(s, host, shard, LE_ORIGIN_CHAIN, create, &o,
	                    errbuf, cap);

	*out = rc == 0 ? &o->pub : NULL;
	return rc;
}

/* Seal o's open segment: synced when the store syncs, then closed.  A
 * failed sync stays the store's (le__cstore_sync returns it): o's records
 * written since the last sync are not acknowledged on the word of a later
 * sync that no longer sees them. */
static int seg_close(le__cstore *s, struct org *o)
{
	int rc = 0;

	if (o->fd < 0)
		return 0;
	if (o->dirty && s->opts.sync)
		rc = le__fdatasync(o->fd);
	if (rc < 0 && !s->sync_err)
		s->sync_err = rc;
	o->dirty = 0;
	le__close(o->fd);
	o->fd = -1;
	s->nfd--;
	return rc;
}

/* Room to open one more segment file: at OPEN_SEGS, close the first open
 * one the clock hand finds not written to since it last passed, never
 * `keep` (about to write).  Ends: OPEN_SEGS open files are OPEN_SEGS
 * origins, and a second pass finds every mark cleared.  @return 0, < 0. */
static int fd_room(le__cstore *s, const struct org *keep)
{
	while (s->nfd >= OPEN_SEGS) {
		struct org *o = s->org[s->hand];
		s->hand = (s->hand + 1) % s->n;
		if (o->fd < 0 || o == keep)
			continue;
		if (o->ref) {
			o->ref = 0;
			continue;
		}
		int rc = seg_close(s, o);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Start segment seg_index + 1 of o with base sequence `base`. */
static int seg_new(le__cstore *s, struct org *o, uint32_t fields,
                   uint64_t base)
{
	char path[LE_PATH_MAX];
	unsigned char h[LE_SEG_HDR];
	le__seg_hdr hdr = {
		.version = LE_SEG_VERSION, .fields = fields,
		.shard = o->pub.o.shard, .index = o->seg_index + 1,
		.base_seq = base, .created_ns = le__now_ns(),
	};
	int rc = seg_close(s, o);

	if (rc == 0)
		rc = fd_room(s, o);
	if (rc < 0)
		return rc;
	le__seg_path(path, sizeof path, o->dir, hdr.index);
	/* Indexes only grow: no file has this name yet. */
	o->fd = le__open_in(path, LE_IN_SHARD, O_WRONLY | O_CREAT | O_EXCL,
	                    0640);
	if (o->fd < 0)
		return o->fd;
	s->nfd++;
	o->ref = 1;
	le__seg_hdr_encode(h, &hdr);
	rc = le__pwrite_all(o->fd, h, sizeof h, 0);
	o->seg_index = hdr.index;
	o->seg_len = LE_SEG_HDR;
	o->seg_frames = 0;
	o->fields = fields;
	o->fresh = 0;
	o->dirty = 1;
	o->dir_dirty = 1;
	return rc;
}

/* Open o's last segment for appending (after le__cstore_open, or after
 * fd_room closed it). */
static int seg_reopen(le__cstore *s, struct org *o)
{
	char path[LE_PATH_MAX];
	int rc = fd_room(s, o);

	if (rc < 0)
		return rc;
	le__seg_path(path, sizeof path, o->dir, o->seg_index);
	o->fd = le__open_in(path, LE_IN_SHARD, O_WRONLY, 0);
	if (o->fd < 0)
		return o->fd;
	s->nfd++;
	return 0;
}

/* Make o's active segment one that `bytes` more of field set `fields`,
 * starting at o->next_seq, may go to. */
static int seg_ready(le__cstore *s, struct org *o, uint32_t fields,
                     uint64_t bytes)
{
	int need = o->seg_index == 0 || o->fresh || o->fields != fields ||
	           (o->seg_frames && o->seg_len + bytes > s->opts.segment_bytes);
	if (need)
		return seg_new(s, o, fields, o->pub.next_seq);
	o->ref = 1;
	return o->fd < 0 ? seg_reopen(s, o) : 0;
}

/* Room left in o's active segment before segment_bytes. */
static size_t seg_room(const le__cstore *s, const struct org *o)
{
	return o->seg_len < s->opts.segment_bytes
	               ? (size_t)(s->opts.segment_bytes - o->seg_len) : 0;
}

/* Append run bytes holding k whole frames to o's active segment. */
static int put_run(le__cstore *s, struct org *o, const unsigned char *buf,
                   size_t run, uint64_t k)
{
	int rc = le__pwrite_all(o->fd, buf, run, o->seg_len);
	if (rc < 0)
		return rc;
	/* Start the write-back now, so the sync before the ack finds most
	 * of it done (a hint: an error shows at the sync). */
	if (s->opts.sync)
		le__writeback(o->fd, o->seg_len, run);
	o->seg_len += run;
	o->seg_frames += k;
	o->dirty = 1;
	o->pub.next_seq += k;
	o->pub.stored += k;
	return 0;
}

/* The descriptor of the frame of `from` that R = ref names: Le-Pos plus
 * the frame's offset in the body (the forwarder made it so). */
static const unsigned char *body_desc(void *arg, uint32_t ref, size_t *dlen,
                                      const char **why)
{
	const le__ship_body *b = arg;
	le__frame f;
	uint32_t r;
	const unsigned char *d, *args;
	size_t alen;

	if (!b || b->pos == UINT64_MAX || ref < b->pos || ref - b->pos >= b->len) {
		*why = "descriptor outside the message";
		return NULL;
	}
	size_t at = (size_t)(ref - b->pos);
	if (le__frame_decode(b->body + at, b->len - at, b->fields,
	                     LE_FRAME_MAX, &f, why) != LE_FRAME_OK ||
	    !(f.flags & LE_REC_DEFERRED) ||
	    le__defer_split_seg(f.payload, f.len, &r, &d, dlen, &args, &alen,
	                        why) < 0 || !d) {
		*why = "no descriptor where the message says";
		return NULL;
	}
	return d;
}

static int stage_room(le__cstore *s, size_t need)
{
	if (need <= s->stage_cap)
		return 0;
	size_t nc = need > 2 * s->stage_cap ? need : 2 * s->stage_cap;
	unsigned char *b = realloc(s->stage, nc);
	if (!b)
		return -ENOMEM;
	s->stage = b;
	s->stage_cap = nc;
	return 0;
}

/* le__cstore_append for frames some of which are deferred: each made to
 * name a descriptor this message put in the segment it goes to (a new
 * segment starts with none), runs staged and written as in
 * le__cstore_append. */
static int append_relinked(le__cstore *s, struct org *o, uint32_t fields,
                           const unsigned char *frames, uint64_t count,
                           const le__ship_body *from)
{
	uint64_t rl_seg = 0; /* no segment: the table begins again */

	while (count > 0) {
		size_t run = 0, in = 0, room;
		uint64_t k = 0;
		int rc = seg_ready(s, o, fields, le__get32(frames) + 4u);
		if (rc < 0)
			return rc;
		if (rl_seg != o->seg_index) {
			le__relink_reset(&s->rl);
			rl_seg = o->seg_index;
		}
		room = seg_room(s, o);
		do {
			size_t fl = (size_t)le__get32(frames + in) + 4;
			if ((rc = stage_room(s, run + fl + LE_DESC_MAX)) < 0)
				return rc;
			size_t got = le__relink_frame(&s->rl, frames + in, fl,
			                              fields, o->seg_len + run,
			                              body_desc, (void *)from,
			                              s->stage + run);
			if (!got) {
				got = fl;
				memcpy(s->stage + run, frames + in, fl);
			}
			/* Not taken: it goes to a new segment (it does not
			 * fit this one), whose table starts empty, so what
			 * the table noted of it here is never used. */
			if (k > 0 && run + got > room)
				break;
			run += got;
			in += fl;
			k++;
		} while (k < count);
		if ((rc = put_run(s, o, s->stage, run, k)) < 0)
			return rc; /* the table is begun again with the next */
		frames += in;
		count -= k;
		if (count)
			o->fresh = 1; /* what did not fit starts the next */
	}
	return 0;
}

int le__cstore_append(le__cstore *s, le__cstore_origin *po, uint32_t fields,
                      const unsigned char *frames, size_t len,
                      uint64_t count, const le__ship_body *from)
{
	struct org *o = (struct org *)po;

	for (size_t at = 0; at < len; at += (size_t)le__get32(frames + at) + 4)
		if (le__frame_deferred(frames + at, fields))
			return append_relinked(s, o, fields, frames, count,
			                       from);
	while (count > 0) {
		/* The longest run of whole frames that fits the segment (one
		 * at least: a frame larger than segment_bytes gets a segment
		 * of its own). */
		size_t run = 0, room;
		uint64_t k = 0;
		int rc = seg_ready(s, o, fields, le__get32(frames) + 4u);
		if (rc < 0)
			return rc;
		room = seg_room(s, o);
		do {
			run += (size_t)le__get32(frames + run) + 4;
			k++;
		} while (k < count &&
		         run + le__get32(frames + run) + 4 <= room);
		if ((rc = put_run(s, o, frames, run, k)) < 0)
			return rc;
		frames += run;
		len -= run;
		count -= k;
	}
	return 0;
}

int le__cstore_gap(le__cstore *s, le__cstore_origin *po, uint32_t fields,
                   uint64_t first, uint64_t last, uint64_t ts,
                   const char *why)
{
	struct org *o = (struct org *)po;
	unsigned char frame[LE_FRAME_FIXED_MAX + 96];
	char text[96];
	int n = snprintf(text, sizeof text, "%" PRIu64 " records %s",
	                 last - first + 1, why);

	if (n < 0 || (size_t)n >= sizeof text)
		return LE_EINVAL;
	/* The marker takes the last missing sequence in a segment of its
	 * own, so the records after it continue that segment's chain. */
	o->pub.next_seq = last;
	int rc = seg_new(s, o, fields, last);
	if (rc < 0)
		return rc;
	uint32_t flen = le__frame_encode(frame, fields, LE_REC_MARKER, LE_WARN,
	                                 o->pub.o.shard, last, ts, text,
	                                 (uint32_t)n);
	rc = le__pwrite_all(o->fd, frame, flen, o->seg_len);
	if (rc < 0)
		return rc;
	o->seg_len += flen;
	o->seg_frames++;
	o->pub.next_seq = last + 1;
	return rset_add(&o->open, first, last, 0, &o->pub.forgotten);
}

/* Records a .. b of the frames (len bytes of records first ..) to o's
 * late directory, in a new segment unless they continue its last one,
 * and out of o's claims. */
static int late_put(le__cstore *s, struct org *o, uint64_t a, uint64_t b,
                    uint64_t first, const unsigned char *frames, size_t len,
                    const le__ship_body *from, le__late *out)
{
	int rc = 0;

	if (!o->late)
		rc = origin_get(s, o->pub.o.host, o->pub.o.shard, LE_ORIGIN_LATE,
		                1, &o->late, out->err, sizeof out->err);
	if (rc < 0)
		return rc;
	struct org *l = o->late;
	size_t off = le__ship_body_skip(frames, len, a - first);
	size_t end = le__ship_body_skip(frames, len, b + 1 - first);
	/* A segment's frames are consecutive: a run that does not go on
	 * from the last one starts a segment of its own. */
	if (l->pub.next_seq != a)
		l->fresh = 1;
	l->pub.next_seq = a;
	rc = le__cstore_append(s, &l->pub, from->fields, frames + off,
	                           end - off, b - a + 1, from);
	return rc < 0 ? rc : rset_cut(&o->open, a, b, &o->pub.forgotten);
}

int le__cstore_late(le__cstore *s, le__cstore_origin *po, uint64_t first,
                    const unsigned char *frames, size_t len, uint64_t count,
                    const le__ship_body *from, le__late *out)
{
	struct org *o = (struct org *)po;
	uint64_t a, b, lo = first, hi = first + count - 1;
	long i;
	int rc;

	memset(out, 0, sizeof *out);
	while (count && lo <= hi &&
	       (i = rset_first(&o->open, lo, hi, &a, &b)) >= 0) {
		if (o->open.r[i].before) {
			if ((rc = claim_check(o, (size_t)i)) < 0)
				return rc;
			continue; /* what is left of it, looked at again */
		}
		rc = late_put(s, o, a, b, first, frames, len, from, out);
		if (rc < 0)
			return rc;
		if (!out->n)
			out->lo = a;
		out->hi = b;
		out->n += b - a + 1;
		lo = b + 1; /* b < hi <= LE_SHIP_SEQ_MAX: no wrap */
	}
	return 0;
}

int le__cstore_sync(le__cstore *s)
{
	int rc = 0;

	if (!s->opts.sync)
		return 0;
	if (s->sync_err)
		return s->sync_err;
	for (size_t i = 0; i < s->n; i++) {
		struct org *o = s->org[i];
		int r = 0;
		if (o->dirty && o->fd >= 0)
			r = le__fdatasync(o->fd);
		if (r == 0 && o->dir_dirty)
			r = le__fsync_dir_in(o->dir, LE_IN_DIR);
		if (r == 0)
			o->dirty = o->dir_dirty = 0;
		if (r < 0 && rc == 0)
			rc = r;
	}
	return rc;
}
