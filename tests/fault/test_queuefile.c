/*
 * test_queuefile.c -- a dead process's QUEUE file, damaged or reopened
 * with another size, at the next le_open.
 *
 * A crash that kills a process is often a wild write first, and the queue
 * is a shared mapping of that process: its words may be anything.  The
 * next le_open must write out the records before the damage, exactly, say
 * the rest was dropped, and never follow a length or a position out of
 * the ring (a crash there would crash le_open on every restart: a service
 * that cannot start because of its log).  Each case runs le_open in a process
 * of its own, so a crash is a failed case, named.
 */
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <time.h>
#include <inttypes.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/crc32c.h"
#include "record/format.h"
#include "logengine.h"
#include "base/clock.h"
#include "base/os.h"
#include "queue/queue.h"
#include "logtest.h"

#define NREC 20
#define PAYLOAD 100 /* 32 + 100 bytes: one 192-byte slot each */
#define SLOT 192u

static char tmpl[256], work[300];


static size_t payload_of(char *b, int i)
{
	memset(b, '.', PAYLOAD);
	int n = snprintf(b, PAYLOAD, "queued record %02d", i);
	b[n] = ' ';
	return PAYLOAD;
}

static ssize_t pwrite_never(int fd, const void *b, size_t n, off_t off)
{
	(void)fd;
	(void)b;
	(void)n;
	(void)off;
	for (;;)
		pause();
	return -1;
}

/* A process that opens tmpl with c (flush_ms far away), runs queue() and
 * dies without le_close: what queue() accepted is left in tmpl's QUEUE
 * files.  Its writer, should anything wake it (a slow start that finds
 * the records already there), blocks in its first write, so no test here
 * runs on a queue that happens to be empty. */
static void die_with_queued_in(le_config c, int (*queue)(le_engine *e),
                               int no_tsc)
{
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		le_engine *e;
		le__tsc_forbid_set(no_tsc); /* its stamps in ns, not ticks */
		c.dir = tmpl;
		c.flush_ms = 60000;
		if (le_open(&e, &c) != 0)
			_exit(3);
		le__os t = *le__os_current();
		t.pwrite = pwrite_never;
		le__os_install(&t);
		_exit(queue(e) != 0 ? 4 : 0);
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void die_with_queued(le_config c, int (*queue)(le_engine *e))
{
	die_with_queued_in(c, queue, 0);
}

static int queue_nrec(le_engine *e)
{
	char b[PAYLOAD];
	for (int i = 0; i < NREC; i++)
		if (le_write(e, 0, LE_INFO, b, payload_of(b, i)) != 0)
			return -1;
	return 0;
}

/* NREC records queued by a process that died before its writer wrote
 * any (too few to wake it): all in tmpl/shard-000/QUEUE, published, at
 * slots 0..NREC-1 of lap 0. */
static void make_dead_queue(void)
{
	le_config c;
	le_config_init(&c);
	t_tmpdir(tmpl);
	die_with_queued(c, queue_nrec);
}

/* work := a copy of tmpl, its QUEUE file open for damage. */
static int fresh_copy(void)
{
	char cmd[1024], q[400];
	snprintf(work, sizeof work, "%s-case", tmpl);
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", work, tmpl,
	         work);
	CHECK_EQ(system(cmd), 0);
	snprintf(q, sizeof q, "%s/shard-000/QUEUE", work);
	int fd = open(q, O_RDWR);
	CHECK(fd >= 0);
	return fd;
}

static void put_u64(int fd, uint64_t off, uint64_t v)
{
	CHECK_EQ(pwrite(fd, &v, 8, (off_t)off), 8);
}

static void put_u32(int fd, uint64_t off, uint32_t v)
{
	CHECK_EQ(pwrite(fd, &v, 4, (off_t)off), 4);
}

/* File offset of slot i's field at `field` (lap 0: tail was 0). */
static uint64_t slot_at(int i, size_t field)
{
	return LE_QUEUE_HDR + (uint64_t)i * SLOT + field;
}

struct seen {
	int n, prefix; /* records, and how many lead in order, intact */
};

static void see(const le_record *r, void *arg)
{
	struct seen *s = arg;
	char b[PAYLOAD];
	if (r->flags & LE_REC_MARKER)
		return;
	if (s->prefix == s->n && r->len == PAYLOAD &&
	    !memcmp(r->payload, b, payload_of(b, s->n)))
		s->prefix++;
	s->n++;
}

/* In a child: work opened (no syncs), or exit 10; a hang ends it in 20 s
 * (a hang is a failure too). */
static le_engine *child_open_work(void)
{
	le_config c;
	le_engine *e;
	alarm(20);
	le_config_init(&c);
	c.dir = work;
	c.durability = LE_SYNC_NONE;
	if (le_open(&e, &c) != 0)
		_exit(10);
	return e;
}

/* le_open on work in a process of its own: 0 when it opened, closed, and
 * what it wrote holds records 0..intact-1 in order, intact, and at most
 * NREC + 1 records (the + 1: the one this process adds); else why. */
static int reopen_keeps(int intact)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		le_engine *e = child_open_work();
		/* The queue works after: one more record goes through. */
		if (le_write(e, 0, LE_INFO, "after", 5) != 0 ||
		    le_flush(e, 5000) != 0 || le_close(e) != 0)
			_exit(11);
		struct seen s = {0, 0};
		if (read_all(work, LE_RECOVER_SKIP, see, &s) < 0)
			_exit(12);
		if (s.prefix < intact)
			_exit(13);
		if (s.n > NREC + 1)
			_exit(14);
		_exit(0);
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		return 100 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* One damage, applied to a fresh copy; records before slot `intact` must
 * come out whole. */
static int try_damage(const char *what, int intact,
                      void (*damage)(int fd, void *arg), void *arg)
{
	int fd = fresh_copy();
	damage(fd, arg);
	close(fd);
	int why = reopen_keeps(intact);
	if (why)
		fprintf(stderr, "  %s: %s %d\n", what,
		        why > 100 ? "killed by signal" : "failed with",
		        why > 100 ? why - 100 : why);
	return why == 0;
}

#define K 5 /* the slot damaged */

static void len_huge(int fd, void *a)
{
	(void)a;
	put_u32(fd, slot_at(K, offsetof(le__slot, len)), 0xfffffff0u);
}
static void len_past_slot(int fd, void *a)
{
	(void)a;
	put_u32(fd, slot_at(K, offsetof(le__slot, len)), SLOT - LE_SLOT_HDR + 1);
}
static void len_past_ring(int fd, void *a)
{
	(void)a;
	put_u32(fd, slot_at(K, offsetof(le__slot, len)), 1u << 20);
}
static void size_past_ring(int fd, void *a)
{
	(void)a; /* lap 0, published, 2 GB long */
	put_u64(fd, slot_at(K, 0), 0x7fffffc0u | LE_SLOT_READY);
}
static void claim_past_ring(int fd, void *a)
{
	(void)a; /* claimed, never published, 2 GB long */
	put_u64(fd, slot_at(K, 0), 0x7fffffc0u);
}
static void pad_short(int fd, void *a)
{
	(void)a; /* a pad in the middle of a lap, into slot K's payload */
	put_u64(fd, slot_at(K, 0), 64u | LE_SLOT_PAD | LE_SLOT_READY);
}
static void pad_huge(int fd, void *a)
{
	(void)a;
	put_u64(fd, slot_at(K, 0), 0x7fffffc0u | LE_SLOT_PAD | LE_SLOT_READY);
}
static void head_huge(int fd, void *a)
{
	(void)a;
	put_u64(fd, LE_QUEUE_HEAD_OFF, 1ull << 62);
}
static void head_misaligned(int fd, void *a)
{
	(void)a;
	put_u64(fd, LE_QUEUE_HEAD_OFF, NREC * SLOT + 5);
}
static void tail_after_head(int fd, void *a)
{
	(void)a;
	put_u64(fd, LE_QUEUE_TAIL_OFF, (NREC + 3) * SLOT);
}
static void tail_misaligned(int fd, void *a)
{
	(void)a;
	put_u64(fd, LE_QUEUE_TAIL_OFF, 7);
}
static void rel_misaligned(int fd, void *a)
{
	(void)a; /* between tail and head, not on a line */
	put_u64(fd, LE_QUEUE_REL_OFF, 3 * SLOT + 8);
}

TEST(damaged_queue_file_keeps_the_records_before_the_damage)
{
	static const struct {
		const char *what;
		int intact;
		void (*fn)(int, void *);
	} cases[] = {
		{"slot length 0xfffffff0", K, len_huge},
		{"slot length one past its slot", K, len_past_slot},
		{"slot length 1 MiB", K, len_past_ring},
		{"slot size past the ring", K, size_past_ring},
		{"claim size past the ring", K, claim_past_ring},
		{"pad in mid-lap", K, pad_short},
		{"pad size past the ring", K, pad_huge},
		{"head 2^62", NREC, head_huge},
		{"head not on a line", NREC, head_misaligned},
		{"tail after head", 0, tail_after_head},
		{"tail not on a line", 0, tail_misaligned},
		{"releasing position not on a line", NREC, rel_misaligned},
	};
	make_dead_queue();
	int ok = 0, n = (int)(sizeof cases / sizeof cases[0]);
	for (int i = 0; i < n; i++)
		ok += try_damage(cases[i].what, cases[i].intact, cases[i].fn,
		                 NULL);
	CHECK_EQ(ok, n);
	t_rmrf(work);
	t_rmrf(tmpl);
}

static void flip_byte(int fd, void *arg)
{
	uint64_t off = *(uint64_t *)arg;
	unsigned char b;
	CHECK_EQ(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0xff;
	CHECK_EQ(pwrite(fd, &b, 1, (off_t)off), 1);
}

TEST(byte_flipped_anywhere_in_a_queue_file_never_crashes_le_open)
{
	make_dead_queue();
	int bad = 0, tried = 0;
	char what[64];
	/* head, tail, releasing; then every byte of the first three slots
	 * headers (state word, time, sequence, length, level, flags) and
	 * every 8th of their payloads (bytes recovery only copies) */
	static const uint64_t words[] = {LE_QUEUE_HEAD_OFF, LE_QUEUE_TAIL_OFF,
	                                 LE_QUEUE_REL_OFF};
	for (int w = 0; w < 3; w++)
		for (uint64_t b = 0; b < 8; b++) {
			uint64_t off = words[w] + b;
			snprintf(what, sizeof what, "byte %" PRIu64, off);
			bad += !try_damage(what, 0, flip_byte, &off);
			tried++;
		}
	for (uint64_t off = LE_QUEUE_HDR; off < LE_QUEUE_HDR + 3 * SLOT; off++) {
		int slot = (int)((off - LE_QUEUE_HDR) / SLOT);
		if ((off - LE_QUEUE_HDR) % SLOT >= LE_SLOT_HDR && off % 8)
			continue;
		snprintf(what, sizeof what, "byte %" PRIu64 " (slot %d)", off,
		         slot);
		bad += !try_damage(what, slot, flip_byte, &off);
		tried++;
	}
	fprintf(stderr, "  (%d damaged files reopened)\n", tried);
	CHECK_EQ(bad, 0);
	t_rmrf(work);
	t_rmrf(tmpl);
}

/* Reopened with another queue size, the drained file is made anew at the
 * new size: the writer's position must start again with it.  A writer
 * that kept the old head would wait there while new records went in at
 * 0, le_flush and le_close would still return 0, and every record
 * accepted after the reopen would be lost. */
TEST(queue_resized_after_a_crash_loses_no_new_record)
{
	make_dead_queue();
	le_config c;
	le_config_init(&c);
	c.dir = tmpl;
	c.queue_capacity = 512;
	c.queue_capacity_bytes = 65536; /* another ring size */
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	for (int i = 0; i < 10; i++)
		CHECK_EQ(le_write(e, 0, LE_INFO, "new record", 10), 0);
	CHECK_RC(le_flush(e, 5000));
	le_stats st;
	le_stats_get(e, &st);
	CHECK_EQ(st.recovered_records, NREC);
	CHECK_EQ(st.accepted, 10);
	CHECK_EQ(st.written, NREC + 10);
	CHECK_EQ(le_close(e), 0);
	struct seen s = {0, 0};
	CHECK(read_all(tmpl, LE_RECOVER_ABSOLUTE, see, &s) >= 0);
	CHECK_EQ(s.prefix, NREC); /* the dead process's, first, in order */
	CHECK_EQ(s.n, NREC + 10);
	t_rmrf(tmpl);
}

/* logengine recover on a damaged queue: the records before the damage
 * are written, the damage is named, and the exit status says so. */
/* `logengine recover dir`: what it printed in out (cap bytes, shown on
 * stderr too), @return its exit status, or -1. */
static int recover_cli(const char *dir, char *out, size_t cap)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s recover '%s' 2>&1",
	         t_build_tool("LE_CLI", "logengine"), dir);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	fprintf(stderr, "  %s", out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(recover_names_the_damage_and_exits_1)
{
	char out[512] = "";
	make_dead_queue();
	int fd = fresh_copy();
	len_huge(fd, NULL);
	close(fd);
	CHECK_EQ(recover_cli(work, out, sizeof out), 1);
	CHECK(strstr(out, "1 record(s) dropped") != NULL);
	CHECK(strstr(out, "position 960 (length past its slot)") != NULL);
	CHECK(strstr(out, "19 record(s) written from queues") != NULL);
	/* the walk goes on after the damaged slot */
	struct seen s = {0, 0};
	CHECK(read_all(work, LE_RECOVER_ABSOLUTE, see, &s) >= 0);
	CHECK_EQ(s.prefix, K);
	CHECK_EQ(s.n, NREC - 1);
	t_rmrf(work);
	t_rmrf(tmpl);
}

/* A process that took records up to 4 MiB (max_record_bytes) dies with
 * one of 2 MiB queued between two small ones; the engine that opens the
 * directory takes at most 64 KiB, so its writer's buffer must grow to the
 * dead ring's size for the walk: a walk that stopped at the big record as
 * if the file were damaged would drop it and the one after. */
/* A disk that never answers: the dying process's writer writes
 * nothing, whatever wakes it. */
static int queue_small_big_small(le_engine *e)
{
	static char big[2u << 20];
	memset(big, 'B', sizeof big);
	/* The 2 MiB record wakes the writer: it must not write. */
	le__os t = *le__os_current();
	t.pwrite = pwrite_never;
	le__os_install(&t);
	return le_write(e, 0, LE_INFO, "small", 5) ||
	       le_write(e, 0, LE_INFO, big, sizeof big) ||
	       le_write(e, 0, LE_INFO, "small", 5);
}

TEST(records_larger_than_this_engine_takes_are_still_recovered)
{
	le_config big;
	le_config_init(&big);
	big.max_record_bytes = 4u << 20;
	big.queue_capacity_bytes = 8u << 20;
	t_tmpdir(tmpl);
	die_with_queued(big, queue_small_big_small);
	le_config c;
	le_config_init(&c); /* max_record_bytes 64 KiB */
	c.dir = tmpl;
	le_engine *e;
	CHECK_RC(le_open(&e, &c));
	CHECK_STR_EQ(le_errmsg(), "");
	le_stats s;
	le_stats_get(e, &s);
	CHECK_EQ(s.recovered_records, 3);
	CHECK_EQ(le_close(e), 0);
	CHECK_EQ(count_records(tmpl), 3);
	t_rmrf(tmpl);
}

/* A header that checks out (CRC, this boot) but claims a ring of 2^63 +
 * 64 bytes: working out its lap would double past 2^63 to 0 and never
 * end, so le_open (and its look at shards not opened) must check the
 * size against the file's length first. */
TEST(queue_header_with_an_absurd_size_is_not_followed)
{
	t_tmpdir(tmpl);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(20);
		unsigned char h[LE_QUEUE_HDR];
		char path[400];
		le__boot_id_set(0x5eed);
		memset(h, 0, sizeof h);
		memcpy(h, LE_QUEUE_MAGIC, 8);
		le__put32(h + 8, 1);
		le__put32(h + 12, LE_QUEUE_HDR);
		le__put64(h + 16, (1ull << 63) + 64);
		le__put64(h + 24, 0);
		le__put32(h + 36, LE_SLOT_HDR);
		le__put64(h + 40, 0x5eed);
		for (int sh = 0; sh < 2; sh++) { /* 1: a shard not opened */
			le__put32(h + 32, (uint32_t)sh);
			le__put32(h + 60,
			          le__crc_mask(le__crc32c_extend(0, h, 60)));
			snprintf(path, sizeof path, "%s/shard-%03d", tmpl, sh);
			if (mkdir(path, 0755) != 0)
				_exit(2);
			snprintf(path, sizeof path, "%s/shard-%03d/QUEUE", tmpl,
			         sh);
			FILE *f = fopen(path, "wb");
			if (!f || fwrite(h, 1, sizeof h, f) != sizeof h ||
			    fclose(f) != 0)
				_exit(3);
		}
		le_config c;
		le_config_init(&c);
		c.dir = tmpl; /* one shard: shard 1 is looked at, not opened */
		le_engine *e;
		if (le_open(&e, &c) != 0)
			_exit(4);
		if (le_write(e, 0, LE_INFO, "fine", 4) != 0 ||
		    le_close(e) != 0)
			_exit(5);
		_exit(0);
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		fprintf(stderr, "  killed by signal %d\n", WTERMSIG(st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(count_records(tmpl), 1);
	t_rmrf(tmpl);
}

struct span {
	uint64_t lo, hi;
	int n, outside;
};

static void in_span(const le_record *r, void *arg)
{
	struct span *s = arg;
	if (r->flags & LE_REC_MARKER)
		return;
	s->n++;
	if (r->ts_ns < s->lo || r->ts_ns > s->hi) {
		if (!s->outside)
			fprintf(stderr, "  record %d dated %" PRIu64 ", taken in "
			        "[%" PRIu64 ", %" PRIu64 "]\n", s->n, r->ts_ns,
			        s->lo, s->hi);
		s->outside++;
	}
}

/*
 * A process stamps records in TSC ticks or in ns (os.h), and the one that
 * recovers its queue after a kill -9 may stamp in the other unit (LE_NO_TSC
 * set in one of them, another version).  The records must keep the times
 * they were taken at: converted with the recovering process's clock, ns
 * read as ticks would be dated at the clamp's bound (the recovery's time)
 * and ticks read as ns in 1970.
 */
TEST(queue_left_in_the_other_stamp_unit_keeps_its_record_times)
{
	if (!le__tsc_usable())
		printf("  (no TSC stamps here: both processes stamp in ns)\n");
	for (int dead_no_tsc = 0; dead_no_tsc < 2; dead_no_tsc++) {
		le_config c;
		le_config_init(&c);
		t_tmpdir(tmpl);
		struct span s = {le__now_ns(), 0, 0, 0};
		die_with_queued_in(c, queue_nrec, dead_no_tsc);
		s.hi = le__now_ns();
		fflush(NULL);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			le_engine *e;
			alarm(20);
			le__tsc_forbid_set(!dead_no_tsc);
			c.dir = tmpl;
			_exit(le_open(&e, &c) != 0 ? 3 : le_close(e) != 0 ? 4 : 0);
		}
		int st;
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK_EQ(read_all(tmpl, LE_RECOVER_ABSOLUTE, in_span, &s), NREC);
		CHECK_EQ(s.n, NREC);
		CHECK_EQ(s.outside, 0);
		t_rmrf(tmpl);
	}
}

/* ---- written once ---- */

static int cp_file(const char *from, const char *to)
{
	size_t len;
	unsigned char *b = t_slurp(from, &len);
	if (!b)
		return -1;
	int rc = t_spit(to, b, len);
	free(b);
	return rc;
}

struct once {
	long max;           /* records are "rec N", N < max */
	unsigned char *seen;
	long n, dup, other;
};

static void count_once(const le_record *r, void *arg)
{
	struct once *o = arg;
	long k;
	if (r->flags & LE_REC_MARKER)
		return;
	/* The payload is not NUL-terminated: bytes after it in the
	 * reader's buffer (an earlier read's) must not extend the number. */
	char b[32];
	size_t len = r->len < sizeof b - 1 ? r->len : sizeof b - 1;
	memcpy(b, r->payload, len);
	b[len] = 0;
	if (sscanf(b, "rec %ld", &k) != 1 || k < 0 || k >= o->max) {
		o->other++;
		return;
	}
	o->n++;
	if (o->seen[k]++)
		o->dup++;
}

static int queue_copy(const char *dir, const char *to)
{
	char a[400], b[400];
	snprintf(a, sizeof a, "%s/shard-000/QUEUE", dir);
	snprintf(b, sizeof b, "%s/shard-000/QUEUE", to);
	return cp_file(a, b);
}

/* Open dir (no syncs) and close it again.  @return the records its
 * le_open recovered from queues a dead process left. */
static uint64_t open_to_recover(const char *dir)
{
	le_config c;
	le_engine *e;
	le_stats st;
	le_config_init(&c);
	c.dir = dir;
	c.durability = LE_SYNC_NONE;
	CHECK_RC(le_open(&e, &c));
	CHECK_RC(le_stats_get(e, &st));
	CHECK_RC(le_close(e));
	return st.recovered_records;
}

/* dir's QUEUE file recovered twice (put back after the first recovery
 * renewed it, as a recovery killed before its release leaves it): the
 * first writes `first` records, the second none. */
static void recover_twice(const char *dir, uint64_t first)
{
	char keep[400], copy[1024];
	snprintf(keep, sizeof keep, "%s-keep", dir);
	CHECK_EQ(mkdir(keep, 0700), 0);
	snprintf(copy, sizeof copy, "%s/shard-000", keep);
	CHECK_EQ(mkdir(copy, 0700), 0);
	CHECK_EQ(queue_copy(dir, keep), 0);
	for (int round = 0; round < 2; round++) {
		CHECK_EQ(open_to_recover(dir), round == 0 ? first : 0);
		CHECK_EQ(queue_copy(keep, dir), 0); /* the same file again */
	}
	t_rmrf(keep);
}

/* The same QUEUE file recovered twice: its records were written by the
 * first recovery. */
TEST(queue_recovered_twice_writes_its_records_once)
{
	make_dead_queue();
	recover_twice(tmpl, NREC);
	struct seen sn = {0, 0};
	CHECK(read_all(tmpl, LE_RECOVER_ABSOLUTE, see, &sn) >= 0);
	CHECK_EQ(sn.n, NREC);
	CHECK_EQ(sn.prefix, NREC);
	t_rmrf(tmpl);
}

/* A running engine's directory copied file by file -- its QUEUE first,
 * its segments after (as cp -r or rsync may) -- then recovered: records
 * queued when the QUEUE was copied were written by the time the segments
 * were, and must not be written again. */
TEST(live_directory_copied_then_recovered_has_no_duplicate)
{
	enum { MAX = 4000000 };
	char copy[400], p[2048], q[1024];
	t_tmpdir(tmpl);
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		le_config c;
		le_engine *e;
		char b[64];
		le_config_init(&c);
		c.dir = tmpl;
		c.durability = LE_SYNC_NONE;
		c.flush_ms = 20;
		c.segment_bytes = 1u << 20;
		c.overflow = LE_OVERFLOW_BLOCK;
		if (le_open(&e, &c) != 0)
			_exit(3);
		for (long k = 0; k < MAX; k++) {
			int n = snprintf(b, sizeof b, "rec %ld", k);
			le_write(e, 0, LE_INFO, b, (size_t)n);
		}
		le_close(e);
		_exit(0);
	}
	snprintf(copy, sizeof copy, "%s-copy", tmpl);
	snprintf(p, sizeof p, "%s/shard-000", copy);
	CHECK_EQ(mkdir(copy, 0700), 0);
	CHECK_EQ(mkdir(p, 0700), 0);
	/* wait for a queue with records in it, then copy it */
	snprintf(p, sizeof p, "%s/shard-000/QUEUE", tmpl);
	for (int i = 0; i < 2000 && !le__ring_file_busy(p, 0); i++)
		usleep(1000);
	usleep(100 * 1000);
	/* A copy taken when the writer had just caught up holds nothing
	 * queued: take another until one does. */
	char cq[512];
	snprintf(cq, sizeof cq, "%s/shard-000/QUEUE", copy);
	for (int i = 0; i < 200; i++) {
		CHECK_EQ(queue_copy(tmpl, copy), 0);
		if (le__ring_file_busy(cq, 0))
			break;
		usleep(5 * 1000);
	}
	usleep(200 * 1000); /* the writer writes on meanwhile */
	snprintf(p, sizeof p, "cp '%s'/shard-000/*.seg '%s'/shard-000/CHECKPOINT "
	         "'%s'/shard-000/", tmpl, tmpl, copy);
	CHECK_EQ(system(p), 0);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	snprintf(p, sizeof p, "%s/shard-000/QUEUE", copy);
	CHECK(le__ring_file_busy(p, 0)); /* the copy holds queued records */
	uint64_t recovered = open_to_recover(copy);
	struct once o = {.max = MAX};
	o.seen = calloc(MAX, 1);
	CHECK(o.seen != NULL);
	CHECK(read_all(copy, LE_RECOVER_SKIP, count_once, &o) >= 0);
	fprintf(stderr, "  %ld records read from the copy (%" PRIu64
	        " written at recovery), %ld twice\n", o.n, recovered, o.dup);
	CHECK(o.n > 0);
	CHECK_EQ(o.other, 0);
	CHECK_EQ(o.dup, 0);
	/* one producer, one shard: what the copy holds is records 0..n-1 */
	long missing = 0;
	for (long k = 0; k < o.n; k++)
		missing += !o.seen[k];
	CHECK_EQ(missing, 0);
	snprintf(q, sizeof q, "%s verify '%s' >/dev/null 2>&1",
	         t_build_tool("LE_CLI", "logengine"), copy);
	CHECK_EQ(system(q), 0);
	free(o.seen);
	t_rmrf(copy);
	t_rmrf(tmpl);
}

/* ---- every bit ---- */

/* The dead queue's files, kept in memory, so each case starts from them
 * without a cp (thousands of cases). */
struct pristine {
	char name[64];
	unsigned char *b;
	size_t len;
};
static struct pristine files[8];
static int nfiles;
static uint64_t made_from, made_to; /* when the dead process ran, ns */

static void keep_pristine(void)
{
	/* SITES too: without it a deferred record's call site is lost,
	 * which recovery reports as damage */
	static const char *names[] = {"LOCK", "shard-000/QUEUE",
	                              "shard-000/SITES", "shard-000/CHECKPOINT",
	                              "shard-000/STATS",
	                              "shard-000/0000000000000001.seg"};
	char p[400];
	nfiles = 0;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(p, sizeof p, "%s/%s", tmpl, names[i]);
		struct pristine *f = &files[nfiles];
		f->b = t_slurp(p, &f->len);
		if (!f->b)
			continue;
		snprintf(f->name, sizeof f->name, "%s", names[i]);
		nfiles++;
	}
}

static int rm_one(const char *p, const struct stat *sb, int flag,
                  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* work := the pristine files, bit `bit` of QUEUE flipped (UINT64_MAX:
 * none). */
static void restore_flipped(uint64_t bit)
{
	char p[1024];
	snprintf(work, sizeof work, "%s-bit", tmpl);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	CHECK_EQ(mkdir(work, 0700), 0);
	snprintf(p, sizeof p, "%s/shard-000", work);
	CHECK_EQ(mkdir(p, 0700), 0);
	for (int i = 0; i < nfiles; i++) {
		snprintf(p, sizeof p, "%s/%s", work, files[i].name);
		int q = !strcmp(files[i].name, "shard-000/QUEUE") &&
		        bit != UINT64_MAX;
		if (q)
			files[i].b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		CHECK_EQ(t_spit(p, files[i].b, files[i].len), 0);
		if (q)
			files[i].b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
}

/* A small ring (a few pages): thousands of cases open it. */
static void small_queue(le_config *c)
{
	le_config_init(c);
	c->queue_capacity = 64;
	c->queue_capacity_bytes = 16u << 10;
	c->max_record_bytes = 1024;
	c->durability = LE_SYNC_NONE;
	c->segment_bytes = 1u << 20;
	c->deferred_sites = 16; /* a SITES of 4 KiB, put back each time */
}

/* le_open on work with c (here, not in a child), then its stats, closed. */
static void recover_work(le_config c, le_stats *st)
{
	le_engine *e;
	c.dir = work;
	CHECK_RC(le_open(&e, &c));
	CHECK_RC(le_stats_get(e, st));
	CHECK_RC(le_close(e));
}

enum { V_INTACT, V_REPORTED, V_CHANGED, V_DROPPED, V_DUPLICATED, V_OPEN };

struct tally {
	int n, exact[NREC], changed;
};

static void check_rec(const le_record *r, void *arg)
{
	struct tally *t = arg;
	char b[PAYLOAD];
	int i;
	if (r->flags & LE_REC_MARKER)
		return;
	t->n++;
	if (sscanf((const char *)r->payload, "queued record %02d", &i) != 1 ||
	    i < 0 || i >= NREC) {
		t->changed++;
		return;
	}
	payload_of(b, i);
	if (r->len != PAYLOAD || memcmp(r->payload, b, PAYLOAD) ||
	    r->level != LE_INFO || (r->flags & LE_REC_TRUNCATED) ||
	    r->ts_ns + 1000000000u < made_from || r->ts_ns > made_to + 1000000000u)
		t->changed++;
	else
		t->exact[i]++;
}

/* le_open on work in a process of its own; what came out, as a V_. */
static int verdict(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		le_config c;
		le_stats st;
		alarm(20); /* a hang is a failure too */
		small_queue(&c);
		c.dir = work;
		le_engine *e;
		if (le_open(&e, &c) != 0)
			_exit(V_OPEN);
		int said = le_errmsg()[0] != 0;
		if (le_stats_get(e, &st) != 0 || le_close(e) != 0)
			_exit(V_OPEN);
		int counted = st.recovery_damaged > 0 || st.abandoned_slots > 0;
		struct tally t;
		memset(&t, 0, sizeof t);
		if (read_all(work, LE_RECOVER_SKIP, check_rec, &t) < 0)
			_exit(V_OPEN);
		int dup = 0;
		for (int i = 0; i < NREC; i++)
			dup += t.exact[i] > 1;
		if (t.n > NREC)
			_exit(V_DUPLICATED);
		t.changed += dup; /* a payload changed into another's */
		if (t.n == NREC && !t.changed)
			_exit(V_INTACT);
		if (said && counted)
			_exit(V_REPORTED);
		_exit(t.n < NREC ? V_DROPPED : V_CHANGED);
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		return 100 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* Bytes of a slot's header no check can catch every change of, without
 * a checksum of the record (RELIABILITY.md, "A damaged QUEUE"): the
 * stamp, the length within its slot's 64-byte size, the two reserved
 * bytes.  (Level and flags have their check.) */
static int unguarded(uint64_t off)
{
	if (off < LE_QUEUE_HDR)
		return 0;
	uint64_t in = (off - LE_QUEUE_HDR) % SLOT;
	return (in >= offsetof(le__slot, ts) && in < offsetof(le__slot, seq)) ||
	       (in >= offsetof(le__slot, len) && in < offsetof(le__slot, level)) ||
	       in >= offsetof(le__slot, reserved);
}

/* Recover work in a process of its own: 0 when exactly the records not
 * in `lost` (a bit per record) came out, intact, with `abandoned`
 * abandoned slots and no damage; else why. */
static int recovers_all_but(uint32_t lost, uint64_t abandoned)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		le_stats st;
		struct tally t;
		le_engine *e = child_open_work();
		if (le_stats_get(e, &st) != 0 || le_close(e) != 0)
			_exit(11);
		if (st.abandoned_slots != abandoned || st.recovery_damaged != 0)
			_exit(12);
		memset(&t, 0, sizeof t);
		if (read_all(work, LE_RECOVER_ABSOLUTE, check_rec, &t) < 0)
			_exit(13);
		int n = 0;
		for (int i = 0; i < NREC; i++) {
			if (t.exact[i] != !(lost >> i & 1))
				_exit(14);
			n += t.exact[i];
		}
		_exit(t.n == n && !t.changed ? 0 : 15);
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static const unsigned char zero_slot[SLOT];

/*
 * A producer claims a slot by moving head, then stores its claim word.
 * Killed between the two, it leaves a slot below head whose every line
 * still holds its lap's FREE word: recovery steps over exactly that, to
 * whatever the next slot holds, and counts an abandoned slot, not damage
 * -- also when it is the last slot, and when the slot after it was only
 * claimed.  le_queue_pending counts past it too.
 */
TEST(producer_killed_between_its_claim_and_its_claim_word_costs_only_its_slot)
{
	uint64_t pending = 0;

	made_from = (uint64_t)time(NULL) * 1000000000u;
	make_dead_queue();
	made_to = (uint64_t)time(NULL) * 1000000000u + 1000000000u;

	/* a gap, then records */
	int fd = fresh_copy();
	CHECK_EQ(pwrite(fd, zero_slot, SLOT, (off_t)slot_at(K, 0)),
	         (ssize_t)SLOT);
	close(fd);
	CHECK_RC(le_queue_pending(work, 0, &pending));
	CHECK_EQ(pending, NREC - 1);
	CHECK_EQ(recovers_all_but(1u << K, 1), 0);

	/* a gap, a record, a slot claimed and never published, records */
	fd = fresh_copy();
	CHECK_EQ(pwrite(fd, zero_slot, SLOT, (off_t)slot_at(K, 0)),
	         (ssize_t)SLOT);
	put_u64(fd, slot_at(K + 2, 0), le__free_word(0) | SLOT);
	close(fd);
	CHECK_EQ(recovers_all_but(1u << K | 1u << (K + 2), 2), 0);

	/* the gap is the last slot: the queue's end, not damage */
	fd = fresh_copy();
	CHECK_EQ(pwrite(fd, zero_slot, SLOT, (off_t)slot_at(NREC - 1, 0)),
	         (ssize_t)SLOT);
	close(fd);
	CHECK_EQ(recovers_all_but(1u << (NREC - 1), 1), 0);

	/* recovered twice: the gap takes nothing from the count of records
	 * written */
	fd = fresh_copy();
	CHECK_EQ(pwrite(fd, zero_slot, SLOT, (off_t)slot_at(K, 0)),
	         (ssize_t)SLOT);
	close(fd);
	recover_twice(work, NREC - 1);
	struct tally t;
	memset(&t, 0, sizeof t);
	CHECK(read_all(work, LE_RECOVER_ABSOLUTE, check_rec, &t) >= 0);
	CHECK_EQ(t.n, NREC - 1);
	for (int i = 0; i < NREC; i++)
		CHECK_EQ(t.exact[i], i != K);
	t_rmrf(work);
	t_rmrf(tmpl);
}

TEST(every_bit_flipped_in_a_queue_file_is_recovered_or_reported)
{
	le_config c;
	small_queue(&c);
	alarm(1200); /* ~1,700 opens: minutes on a loaded machine */
	/* le_close syncs, whatever the durability: thousands of syncs take
	 * minutes on a disk, nothing in memory */
	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	t_tmpdir(tmpl);
	made_from = (uint64_t)time(NULL) * 1000000000u;
	die_with_queued(c, queue_nrec);
	made_to = (uint64_t)time(NULL) * 1000000000u + 1000000000u;
	keep_pristine();
	/* The control: unflipped, all NREC records come from the queue. */
	restore_flipped(UINT64_MAX);
	{
		le_stats st;
		recover_work(c, &st);
		CHECK_EQ(st.recovered_records, NREC);
	}
	/* the header, head, tail, releasing word and mark, the clock, the
	 * headers of slots 0 and K (a payload's bytes are copied, never
	 * read: they can change unnoticed, see unguarded()) */
	static const uint64_t spans[][2] = {
		{0, 64}, {LE_QUEUE_HEAD_OFF, LE_QUEUE_HEAD_OFF + 8},
		{LE_QUEUE_TAIL_OFF, LE_QUEUE_TAIL_OFF + 8},
		{LE_QUEUE_REL_OFF, LE_QUEUE_MARK_OFF + 24},
		{LE_QUEUE_CLOCK_OFF, LE_QUEUE_CLOCK_OFF + 36},
		{LE_QUEUE_HDR, LE_QUEUE_HDR + LE_SLOT_HDR},
		{LE_QUEUE_HDR + K * SLOT, LE_QUEUE_HDR + K * SLOT + LE_SLOT_HDR},
	};
	int n = 0, bad = 0, count[V_OPEN + 1] = {0};
	const char *lim = getenv("LE_QFLIP_SPANS"); /* fewer, to try it */
	size_t nspans = lim ? (size_t)atoi(lim) : sizeof spans / sizeof spans[0];
	for (size_t s = 0; s < nspans; s++)
		for (uint64_t bit = spans[s][0] * 8; bit < spans[s][1] * 8;
		     bit++) {
			restore_flipped(bit);
			int v = verdict();
			n++;
			if (v <= V_OPEN)
				count[v]++;
			if (v == V_INTACT || v == V_REPORTED ||
			    (v == V_CHANGED && unguarded(bit / 8)))
				continue;
			bad++;
			fprintf(stderr, "  bit %" PRIu64 " (byte %" PRIu64 "): %s\n",
			        bit % 8, bit / 8,
			        v == V_CHANGED ? "a record changed, unreported"
			        : v == V_DROPPED ? "records dropped, unreported"
			        : v == V_DUPLICATED ? "a record written twice"
			        : v == V_OPEN ? "le_open or the read failed"
			        : v > 100 ? "killed by a signal" : "?");
		}
	fprintf(stderr, "  %d flips: %d intact, %d reported, %d changed "
	        "unguarded bytes\n", n, count[V_INTACT], count[V_REPORTED],
	        count[V_CHANGED]);
	CHECK_EQ(bad, 0);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* ---- every bit of the header and of slots of each kind ---- */

/* Two records of each kind a producer leaves in a slot: raw (le_write),
 * formatted with fields (LE_REC_FIELDS), deferred (LE_REC_DEFERRED). */
static int queue_kinds(le_engine *e)
{
	char b[64];
	for (int i = 0; i < 2; i++) {
		int n = snprintf(b, sizeof b, "plain record %d", i);
		if (le_write(e, 0, LE_INFO, b, (size_t)n) != 0 ||
		    le_logf_kv(e, LE_WARN,
		               LE_FIELDS(LE_STR("user", "bob"), LE_I64("n", i)),
		               "fields record %d", i) != 0)
			return -1;
		le_error(e, "deferred record %d of %s", i, "six");
	}
	return 0;
}

#define KREC 6

/* A record as read back, enough of it to compare. */
struct krec {
	int level;
	uint32_t flags;
	uint64_t ts;
	size_t len, flen;
	unsigned char p[96], f[96];
};

struct krecs {
	int n;
	struct krec r[KREC + 2];
};

static void keep_krec(const le_record *r, void *arg)
{
	struct krecs *k = arg;
	if (r->flags & LE_REC_MARKER)
		return;
	if (k->n++ >= KREC + 2)
		return;
	struct krec *x = &k->r[k->n - 1];
	memset(x, 0, sizeof *x);
	x->level = r->level;
	x->flags = r->flags;
	x->ts = r->ts_ns;
	x->len = r->len;
	x->flen = r->fields_len;
	memcpy(x->p, r->payload, r->len < sizeof x->p ? r->len : sizeof x->p);
	if (r->fields_len)
		memcpy(x->f, r->fields, r->fields_len < sizeof x->f
		                                ? r->fields_len : sizeof x->f);
}

/* What a flipped copy recovered, against the unflipped one's records. */
enum { K_INTACT, K_REPORTED, K_TIME, K_LENGTH, K_OTHER, K_OPEN };
static const char *const k_name[] = {"intact", "reported", "time only",
                                     "length only", "changed unreported",
                                     "le_open or the read failed"};

#define HOUR_NS (3600ull * 1000000000u)

/* How record y differs from x, as a K_: K_INTACT (not at all), K_TIME
 * (its time only; kverdict checks by how much), K_LENGTH (its length only, by
 * less than a 64-byte line: the message cut or run on into its slot's
 * padding; for a deferred record, its argument block cut or run on, which
 * readers report as a problem and read as undecodable), else K_OTHER. */
static int krec_diff(const struct krec *x, const struct krec *y)
{
	static const char undecodable[] = "[undecodable deferred record: ";
	if ((x->flags & LE_REC_DEFERRED) && x->ts == y->ts &&
	    x->flags == y->flags && y->len >= sizeof undecodable - 1 &&
	    !memcmp(y->p, undecodable, sizeof undecodable - 1))
		return K_LENGTH;
	if (x->level != y->level || x->flags != y->flags ||
	    x->flen != y->flen || memcmp(x->f, y->f, sizeof x->f))
		return K_OTHER;
	if (x->len == y->len && !memcmp(x->p, y->p, sizeof x->p))
		return x->ts == y->ts ? K_INTACT : K_TIME;
	size_t m = x->len < y->len ? x->len : y->len;
	if (x->ts != y->ts || (x->len > y->len ? x->len - y->len
	                                        : y->len - x->len) >= 64 ||
	    memcmp(x->p, y->p, m < sizeof x->p ? m : sizeof x->p))
		return K_OTHER;
	return K_LENGTH;
}

/* The control's records, and the slots (their ring positions) the dead
 * process left, by kind: [0] raw, [1] fields, [2] deferred. */
static struct krecs kctl;
static uint64_t kslot[3], kall[KREC];

/* Find the first slot of each kind in the pristine QUEUE. */
static void find_kind_slots(void)
{
	const unsigned char *q = NULL;
	for (int i = 0; i < nfiles; i++)
		if (!strcmp(files[i].name, "shard-000/QUEUE"))
			q = files[i].b;
	CHECK(q != NULL);
	uint64_t head = le__get64(q + LE_QUEUE_HEAD_OFF);
	int found = 0, nk = 0;
	for (uint64_t pos = le__get64(q + LE_QUEUE_TAIL_OFF); pos < head;) {
		const unsigned char *s = q + LE_QUEUE_HDR + pos;
		uint64_t st = le__get64(s);
		CHECK(st & LE_SLOT_READY);
		CHECK(!(st & LE_SLOT_PAD));
		uint8_t fl = s[offsetof(le__slot, flags)];
		int kind = fl & LE_REC_DEFERRED ? 2 : fl & LE_REC_FIELDS ? 1 : 0;
		if (!(found >> kind & 1))
			kslot[kind] = pos;
		CHECK(nk < KREC);
		kall[nk++] = pos;
		found |= 1 << kind;
		pos += (uint32_t)st & LE_SLOT_SIZE_MASK;
	}
	CHECK_EQ(found, 7); /* one slot of each kind at least */
	CHECK_EQ(nk, KREC);
}

/* le_open on work in a process of its own; what it recovered, as a K_.
 * named: the ring position le_errmsg must name when it reports. */
static int kverdict(uint64_t named)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		le_config c;
		le_stats st;
		le_engine *e;
		struct krecs k;
		char needle[64];
		alarm(20); /* a hang is a failure too */
		small_queue(&c);
		c.dir = work;
		if (le_open(&e, &c) != 0)
			_exit(K_OPEN);
		snprintf(needle, sizeof needle, "position %" PRIu64 " (", named);
		char msg[512];
		snprintf(msg, sizeof msg, "%s", le_errmsg());
		if (le_stats_get(e, &st) != 0 || le_close(e) != 0)
			_exit(K_OPEN);
		memset(&k, 0, sizeof k);
		if (read_all(work, LE_RECOVER_SKIP, keep_krec, &k) < 0)
			_exit(K_OPEN);
		/* a named slot: dropped as damage (recovery_damaged), not
		 * stepped over as abandoned */
		if (msg[0] && (named == UINT64_MAX
		                       ? st.recovery_damaged || st.abandoned_slots
		                       : st.recovery_damaged && strstr(msg, needle)))
			_exit(K_REPORTED);
		if (k.n != kctl.n)
			_exit(K_OTHER);
		/* One record's length, or times: each from an hour before
		 * the record before it (any, for the first: the log holds
		 * none before it) to an hour after now, and the records
		 * after a later one take its time (a shard's times never go
		 * back) */
		uint64_t now = (uint64_t)time(NULL) * 1000000000u;
		int v = K_INTACT;
		for (int i = 0; i < k.n; i++) {
			int d = krec_diff(&kctl.r[i], &k.r[i]);
			if (d == K_TIME && (k.r[i].ts > now + HOUR_NS ||
			                    (i > 0 && k.r[i].ts + HOUR_NS <
			                                      kctl.r[i - 1].ts)))
				_exit(K_OTHER);
			if (d == K_INTACT || (d == K_TIME && v == K_TIME))
				continue;
			if (v != K_INTACT)
				_exit(K_OTHER);
			v = d;
		}
		_exit(v);
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? 100 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* What one flipped bit of the QUEUE at file offset `off` may do, as a
 * mask of K_ (docs/RELIABILITY.md, "What a damaged queue can still
 * change unnoticed").  *named: the slot position a report must name
 * (UINT64_MAX: any). */
static int allowed(uint64_t off, uint64_t *named)
{
	*named = UINT64_MAX;
	if (off < LE_QUEUE_HDR)
		return 1 << K_INTACT | 1 << K_REPORTED;
	uint64_t pos = off - LE_QUEUE_HDR, in = pos % 64;
	pos -= in;
	if (in < offsetof(le__slot, ts) || (in >= offsetof(le__slot, seq) &&
	                                    in < offsetof(le__slot, len)))
		return 1 << K_INTACT | 1 << K_REPORTED; /* state, seq */
	if (in < offsetof(le__slot, seq))
		return 1 << K_INTACT | 1 << K_TIME | 1 << K_REPORTED;
	if (in < offsetof(le__slot, level)) /* a deferred record's text */
		return 1 << K_INTACT | 1 << K_LENGTH | 1 << K_REPORTED;
	if (in < offsetof(le__slot, reserved)) {
		*named = pos; /* level, flags: always caught, and named */
		return 1 << K_REPORTED;
	}
	return 1 << K_INTACT; /* the submit-time sample */
}

/* tmpl := a crashed QUEUE holding each kind of slot a producer writes;
 * the pristine files kept, kslot found, kctl what they recover to. */
/* A copy of the pristine files recovered with c: every record, no
 * damage; what it holds read into *k. */
static void recover_whole(le_config c, struct krecs *k)
{
	le_stats st;
	restore_flipped(UINT64_MAX);
	recover_work(c, &st);
	CHECK_EQ(st.recovered_records, KREC);
	CHECK_EQ(st.recovery_damaged, 0);
	memset(k, 0, sizeof *k);
	CHECK(read_all(work, LE_RECOVER_SKIP, keep_krec, k) >= 0);
	CHECK_EQ(k->n, KREC);
}

static void make_kinds_queue_ck(int csum)
{
	le_config c;
	small_queue(&c);
	c.queue_checksum = (uint32_t)csum;
	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1); /* le_close syncs */
	t_tmpdir(tmpl);
	die_with_queued(c, queue_kinds);
	keep_pristine();
	find_kind_slots();
	recover_whole(c, &kctl);
}

static void make_kinds_queue(void)
{
	make_kinds_queue_ck(0);
}

/* The pristine QUEUE's bytes (a change to them shows in every copy
 * restore_flipped makes), its header's checksum made good again. */
static unsigned char *pristine_queue(void)
{
	for (int i = 0; i < nfiles; i++)
		if (!strcmp(files[i].name, "shard-000/QUEUE"))
			return files[i].b;
	CHECK(0);
	return NULL;
}

static void queue_version_set(uint32_t v)
{
	unsigned char *q = pristine_queue();
	le__put32(q + 8, v);
	le__put32(q + 60, le__crc_mask(le__crc32c_extend(0, q, 60)));
}

/* Flip `bit` of a fresh copy, recover it, and judge the outcome against
 * `ok` (a mask of K_; named: the slot a report must name), counted in
 * count[].  @return 1 (said on stderr) when it is not one of them. */
static int flip_judged(uint64_t bit, int ok, uint64_t named, int *count,
                       int64_t slot)
{
	restore_flipped(bit);
	int v = kverdict(named);
	if (v <= K_OPEN)
		count[v]++;
	if (v <= K_OPEN && (ok >> v & 1))
		return 0;
	fprintf(stderr, "  bit %" PRIu64 " of byte %" PRIu64, bit % 8, bit / 8);
	if (slot >= 0)
		fprintf(stderr, " (slot byte %" PRIu64 ")",
		        bit / 8 - LE_QUEUE_HDR - (uint64_t)slot);
	fprintf(stderr, ": %s\n",
	        v <= K_OPEN ? k_name[v] : "killed by a signal");
	return 1;
}

TEST(every_bit_flipped_in_queue_and_slot_headers_is_caught_or_a_documented_change)
{
	alarm(300);
	make_kinds_queue();
	uint64_t spans[4][2] = {{0, 64}};
	for (int k = 0; k < 3; k++) {
		spans[k + 1][0] = LE_QUEUE_HDR + kslot[k];
		spans[k + 1][1] = LE_QUEUE_HDR + kslot[k] + LE_SLOT_HDR;
	}
	int n = 0, bad = 0, count[K_OPEN + 1] = {0};
	for (int s = 0; s < 4; s++)
		for (uint64_t bit = spans[s][0] * 8; bit < spans[s][1] * 8;
		     bit++) {
			uint64_t named;
			int ok = allowed(bit / 8, &named);
			bad += flip_judged(bit, ok, named, count, -1);
			n++;
		}
	fprintf(stderr, "  %d flips: %d intact, %d reported, %d time only, "
	        "%d length only\n", n, count[K_INTACT], count[K_REPORTED],
	        count[K_TIME], count[K_LENGTH]);
	CHECK_EQ(bad, 0);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* A process of the library before the check, killed, leaves a version 1
 * QUEUE (level bytes without the check) on the disk of whoever upgrades:
 * its records are all recovered.  The version decides: the same slots
 * under a version 2 header are caught. */
TEST(queue_left_by_a_version_1_library_is_still_recovered)
{
	make_kinds_queue();
	unsigned char *q = pristine_queue();
	for (int i = 0; i < KREC; i++)
		q[LE_QUEUE_HDR + kall[i] + offsetof(le__slot, level)] &=
			LE_SLOT_LEVEL_MASK;
	queue_version_set(1);
	restore_flipped(UINT64_MAX);
	CHECK_EQ(kverdict(UINT64_MAX), K_INTACT);
	queue_version_set(LE_QUEUE_VERSION);
	restore_flipped(UINT64_MAX);
	CHECK_EQ(kverdict(kall[0]), K_REPORTED);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* A newer library's QUEUE may hold slots this one cannot read: le_open
 * refuses it, names why, and leaves it for that library to recover. */
TEST(queue_of_a_newer_version_is_refused_and_kept)
{
	le_config c;
	le_engine *e;
	char p[400];
	size_t len;
	make_kinds_queue();
	queue_version_set(LE_QUEUE_VERSION_MAX + 1);
	restore_flipped(UINT64_MAX);
	small_queue(&c);
	c.dir = work;
	CHECK_EQ(le_open(&e, &c), LE_EVERSION);
	fprintf(stderr, "  %s\n", le_errmsg());
	CHECK(strstr(le_errmsg(), "newer logengine") != NULL);
	snprintf(p, sizeof p, "%s/shard-000/QUEUE", work);
	unsigned char *now = t_slurp(p, &len);
	CHECK(now != NULL);
	CHECK(!memcmp(now, pristine_queue(), len));
	free(now);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* `logengine recover` of the pristine queue as changed: it names the slot
 * at `slot` and why, drops that one record, and exits 1. */
static void recover_drops_one(uint64_t slot, const char *why)
{
	char out[1024] = "", want[128];
	restore_flipped(UINT64_MAX);
	CHECK_EQ(recover_cli(work, out, sizeof out), 1);
	snprintf(want, sizeof want, "position %" PRIu64 " (%s)", slot, why);
	CHECK(strstr(out, want) != NULL);
	CHECK(strstr(out, "1 record(s) dropped") != NULL);
}

/* A deferred record's DEFERRED flag cleared would print its arguments as
 * its message: `logengine recover` names the slot and exits 1. */
TEST(cleared_deferred_flag_makes_recover_name_the_slot_and_exit_1)
{
	make_kinds_queue();
	unsigned char *q = pristine_queue();
	q[LE_QUEUE_HDR + kslot[2] + offsetof(le__slot, flags)] ^=
		LE_REC_DEFERRED;
	recover_drops_one(kslot[2], "level or flags not their check's");
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* What one flipped bit at file offset off may do to a slot of a queue
 * with slot checksums: every byte the check covers (the header's bytes
 * 8..31 but seq, the payload, the check) is caught and its slot named;
 * the state word and seq are checked as without it; the bytes between
 * the payload and the check are no record's. */
static int allowed_ck(uint64_t off, uint64_t slot, uint32_t len,
                      uint32_t sbytes, uint64_t *named)
{
	uint64_t in = off - LE_QUEUE_HDR - slot;
	*named = UINT64_MAX;
	if (in < offsetof(le__slot, ts) || (in >= offsetof(le__slot, seq) &&
	                                    in < offsetof(le__slot, len)))
		return 1 << K_INTACT | 1 << K_REPORTED;
	if (in >= LE_SLOT_HDR + len && in < sbytes - LE_SLOT_CSUM)
		return 1 << K_INTACT;
	*named = slot;
	return 1 << K_REPORTED;
}

TEST(queue_checksum_catches_every_bit_flipped_in_a_record_slot)
{
	alarm(600);
	make_kinds_queue_ck(1);
	const unsigned char *q = pristine_queue();
	CHECK_EQ(le__get32(q + 8), LE_QUEUE_VERSION_CSUM);
	int n = 0, bad = 0, count[K_OPEN + 1] = {0};
	for (int k = 0; k < 3; k++) {
		const unsigned char *sl = q + LE_QUEUE_HDR + kslot[k];
		uint32_t sbytes = (uint32_t)le__get64(sl) & LE_SLOT_SIZE_MASK;
		uint32_t len = le__get32(sl + offsetof(le__slot, len));
		CHECK(sbytes >= le__slot_bytes(len + LE_SLOT_CSUM));
		uint64_t from = (LE_QUEUE_HDR + kslot[k]) * 8;
		for (uint64_t bit = from; bit < from + sbytes * 8; bit++) {
			uint64_t named;
			int ok = allowed_ck(bit / 8, kslot[k], len, sbytes,
			                    &named);
			bad += flip_judged(bit, ok, named, count,
			                   (int64_t)kslot[k]);
			n++;
		}
	}
	fprintf(stderr, "  %d flips: %d intact, %d reported\n", n,
	        count[K_INTACT], count[K_REPORTED]);
	CHECK_EQ(bad, 0);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* A payload byte changed under the check (the change no other check can
 * see): `logengine recover` names the slot, drops it and exits 1; the
 * other records are all written.  Without the check, the same change is
 * written out as if it were the record. */
TEST(record_changed_under_its_checksum_makes_recover_name_it_and_exit_1)
{
	char out[1024] = "";
	make_kinds_queue_ck(1);
	unsigned char *q = pristine_queue();
	q[LE_QUEUE_HDR + kslot[0] + LE_SLOT_HDR] ^= 0x20; /* "plain" */
	recover_drops_one(kslot[0], "record not its checksum's");
	struct krecs k;
	memset(&k, 0, sizeof k);
	CHECK(read_all(work, LE_RECOVER_SKIP, keep_krec, &k) >= 0);
	CHECK_EQ(k.n, KREC - 1);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);

	make_kinds_queue_ck(0);
	q = pristine_queue();
	q[LE_QUEUE_HDR + kslot[0] + LE_SLOT_HDR] ^= 0x20;
	restore_flipped(UINT64_MAX);
	CHECK_EQ(recover_cli(work, out, sizeof out), 0);
	memset(&k, 0, sizeof k);
	CHECK(read_all(work, LE_RECOVER_SKIP, keep_krec, &k) >= 0);
	CHECK_EQ(k.n, KREC);
	CHECK(!memcmp(k.r[0].p, "Plain record 0", 14));
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* The setting is the file's, not the recovering engine's: a queue left
 * with checks is checked by an engine opened without them (and the other
 * way round), and the renewed file takes the new engine's setting. */
TEST(queue_checksum_setting_follows_the_file_through_recovery)
{
	for (int ck = 0; ck < 2; ck++) {
		char p[400];
		size_t len;
		le_config c;
		struct krecs k;
		make_kinds_queue_ck(ck);
		small_queue(&c);
		c.queue_checksum = (uint32_t)!ck;
		recover_whole(c, &k);
		snprintf(p, sizeof p, "%s/shard-000/QUEUE", work);
		unsigned char *now = t_slurp(p, &len);
		CHECK(now != NULL && len > LE_QUEUE_HDR);
		CHECK_EQ(le__get32(now + 8),
		         ck ? LE_QUEUE_VERSION : LE_QUEUE_VERSION_CSUM);
		free(now);
		nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		t_rmrf(tmpl);
	}
}

/* A header that fails its CRC leaves the slots to say whether they carry
 * checksums: with one bit of its version flipped (3 and 2 are one bit
 * apart) or of its size, every record is still recovered, checked or
 * not, and the damage is reported. */
TEST(damaged_header_still_recovers_every_record_with_or_without_checksums)
{
	/* version 2 <-> 3, 3 <-> 1 (and 2 <-> 0), the size */
	static const uint64_t bits[] = {8 * 8, 8 * 8 + 1, 16 * 8 + 3};
	for (int ck = 0; ck < 2; ck++) {
		make_kinds_queue_ck(ck);
		for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
			le_config c;
			le_engine *e;
			le_stats st;
			struct krecs k;
			restore_flipped(bits[i]);
			small_queue(&c);
			c.dir = work;
			CHECK_RC(le_open(&e, &c));
			CHECK(strstr(le_errmsg(), "QUEUE") != NULL);
			CHECK_RC(le_stats_get(e, &st));
			CHECK_RC(le_close(e));
			CHECK_EQ(st.recovered_records, KREC);
			memset(&k, 0, sizeof k);
			CHECK(read_all(work, LE_RECOVER_SKIP, keep_krec, &k) >= 0);
			CHECK_EQ(k.n, KREC);
			for (int j = 0; j < KREC; j++)
				CHECK_EQ(krec_diff(&kctl.r[j], &k.r[j]), K_INTACT);
		}
		if (ck) {
			/* ... and checked: a payload byte changed as well is
			 * caught under the damaged header */
			unsigned char *q = pristine_queue();
			q[LE_QUEUE_HDR + kall[1] + LE_SLOT_HDR] ^= 0x01;
			restore_flipped(8 * 8);
			le_config c;
			le_engine *e;
			le_stats st;
			small_queue(&c);
			c.dir = work;
			CHECK_RC(le_open(&e, &c));
			CHECK(strstr(le_errmsg(), "record not its checksum's"));
			CHECK_RC(le_stats_get(e, &st));
			CHECK_RC(le_close(e));
			CHECK_EQ(st.recovery_damaged, 1);
			CHECK_EQ(st.recovered_records, KREC - 1);
			q[LE_QUEUE_HDR + kall[1] + LE_SLOT_HDR] ^= 0x01;
		}
		nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		t_rmrf(tmpl);
	}
}

/* A slot broken past framing (its level byte), then a whole one, then
 * one failing only its checksum: the walk resyncs on the whole one,
 * though the slot after it fails its check, and drops that one alone.
 * Two dropped, named; the other four written. */
TEST(resync_onto_a_slot_followed_by_one_failing_its_checksum_loses_nothing_more)
{
	le_config c;
	le_engine *e;
	le_stats st;
	struct krecs k;
	make_kinds_queue_ck(1);
	unsigned char *q = pristine_queue();
	q[LE_QUEUE_HDR + kall[0] + offsetof(le__slot, level)] = 0x77;
	q[LE_QUEUE_HDR + kall[2] + LE_SLOT_HDR] ^= 0x01;
	restore_flipped(UINT64_MAX);
	small_queue(&c);
	c.dir = work;
	CHECK_RC(le_open(&e, &c));
	CHECK_RC(le_stats_get(e, &st));
	CHECK_RC(le_close(e));
	CHECK_EQ(st.recovery_damaged, 2);
	memset(&k, 0, sizeof k);
	CHECK(read_all(work, LE_RECOVER_SKIP, keep_krec, &k) >= 0);
	CHECK_EQ(k.n, KREC - 2);
	static const int kept[] = {1, 3, 4, 5};
	for (int i = 0; i < KREC - 2; i++)
		CHECK_EQ(krec_diff(&kctl.r[kept[i]], &k.r[i]), K_INTACT);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* Records whose two possible slot sizes (le_write's, le_logf's) are 64
 * bytes apart: 92 B takes 128 B from le_write and 192 B from le_logf. */
#define SZ_N 5
static const int sz_len[SZ_N] = {92, 20, 40, 92, 40};
static const int sz_logf[SZ_N] = {0, 0, 0, 1, 0};

static int queue_sizes(le_engine *e)
{
	char b[128];
	for (int i = 0; i < SZ_N; i++) {
		memset(b, 'a' + i, sizeof b);
		b[sz_len[i]] = '\0';
		if (sz_logf[i] ? le_logf(e, LE_INFO, "%s", b) != 0
		               : le_write(e, 0, LE_INFO, b,
		                          (size_t)sz_len[i]) != 0)
			return -1;
	}
	return 0;
}

static void count_sizes(const le_record *r, void *arg)
{
	int *seen = arg;
	const unsigned char *b = r->payload;
	if (!(r->flags & LE_REC_MARKER) && r->len > 0 && b[0] >= 'a' &&
	    b[0] < 'a' + SZ_N)
		seen[b[0] - 'a']++;
}

/* One bit of a checked slot's size word turned into its other allowed
 * size: the walk must not step by it -- onto a later slot, losing the one
 * between unreported, or into this one.  The slot alone is dropped and
 * named; every other record is written once. */
TEST(slot_size_flipped_to_its_other_allowed_size_costs_only_that_slot)
{
	le_config c;
	uint64_t pos[SZ_N];
	small_queue(&c);
	c.queue_checksum = 1;
	t_tmpdir(tmpl);
	die_with_queued(c, queue_sizes);
	keep_pristine();
	unsigned char *q = pristine_queue();
	uint64_t p = le__get64(q + LE_QUEUE_TAIL_OFF);
	for (int i = 0; i < SZ_N; i++) {
		pos[i] = p;
		uint32_t n = (uint32_t)le__get64(q + LE_QUEUE_HDR + p) &
		             LE_SLOT_SIZE_MASK;
		CHECK_EQ(n, sz_logf[i] ? 192u : sz_len[i] == 92 ? 128u
		                                                : sz_len[i] < 28
		                                                          ? 64u
		                                                          : 128u);
		p += n;
	}
	/* 128 -> 192 (le_write's slot read as le_logf's), 192 -> 128, and
	 * a payload bit of the 192-byte slot (its size word intact: 128
	 * bytes on lies its own padding, FREE words, no slot) */
	static const int victim[] = {0, 3, 3};
	for (int v = 0; v < 3; v++) {
		int seen[SZ_N] = {0};
		le_stats st;
		uint64_t bit = (LE_QUEUE_HDR + pos[victim[v]]) * 8 +
		               (v < 2 ? 6 : (LE_SLOT_HDR + 3) * 8);
		restore_flipped(bit);
		small_queue(&c);
		c.dir = work;
		le_engine *e;
		CHECK_RC(le_open(&e, &c));
		char want[64];
		snprintf(want, sizeof want, "position %" PRIu64 " (",
		         pos[victim[v]]);
		CHECK(strstr(le_errmsg(), want) != NULL);
		CHECK_RC(le_stats_get(e, &st));
		CHECK_RC(le_close(e));
		CHECK_EQ(st.recovery_damaged, 1);
		CHECK_EQ(st.abandoned_slots, 0);
		CHECK(read_all(work, LE_RECOVER_SKIP, count_sizes, seen) >= 0);
		for (int i = 0; i < SZ_N; i++)
			CHECK_EQ(seen[i], i == victim[v] ? 0 : 1);
	}
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* Checked slots damaged one after another are each stepped over alone
 * (their frames are whole): each counted and named, the rest written. */
TEST(adjacent_slots_failing_their_checksums_are_counted_one_each)
{
	le_config c;
	le_engine *e;
	le_stats st;
	struct krecs k;
	char pos[64];
	make_kinds_queue_ck(1);
	unsigned char *q = pristine_queue();
	for (int i = 1; i <= 3; i++)
		q[LE_QUEUE_HDR + kall[i] + LE_SLOT_HDR + 1] ^= 0x01;
	restore_flipped(UINT64_MAX);
	small_queue(&c);
	c.dir = work;
	CHECK_RC(le_open(&e, &c));
	for (int i = 1; i <= 3; i++) {
		snprintf(pos, sizeof pos, "%" PRIu64 " (record not its", kall[i]);
		CHECK(strstr(le_errmsg(), pos) != NULL);
	}
	CHECK_RC(le_stats_get(e, &st));
	CHECK_RC(le_close(e));
	CHECK_EQ(st.recovery_damaged, 3);
	CHECK_EQ(st.recovered_records, KREC - 3);
	memset(&k, 0, sizeof k);
	CHECK(read_all(work, LE_RECOVER_SKIP, keep_krec, &k) >= 0);
	CHECK_EQ(k.n, KREC - 3);
	CHECK_EQ(krec_diff(&kctl.r[0], &k.r[0]), K_INTACT);
	for (int i = 4; i < KREC; i++)
		CHECK_EQ(krec_diff(&kctl.r[i], &k.r[i - 3]), K_INTACT);
	nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	t_rmrf(tmpl);
}

/* The times a dead process's records get are its clock's conversion of
 * their stamps, whenever the recovery runs: its clock (from the QUEUE's
 * clock area) is not checked against the recovering process's and
 * rebased at its now.  A clock area of one tick per ns based at the
 * first record's stamp, a minute before its time: the times must come
 * out as exactly that, which a rebase at the recovery's moment would change by
 * however far the two clocks have run apart. */
TEST(recovered_times_are_the_dead_clocks_whenever_recovery_runs)
{
	make_kinds_queue();
	unsigned char *q = pristine_queue();
	uint64_t stamp0 = le__get64(q + LE_QUEUE_HDR + kall[0] + 8);
	/* a minute before the first record: the stamps' deltas read as
	 * ns (TSC ticks are shorter) keep every time before now */
	uint64_t t0 = kctl.r[0].ts - 60 * 1000000000ull;
	unsigned char *clk = q + LE_QUEUE_CLOCK_OFF;
	memset(clk, 0, 36);
	le__put32(clk, 2);
	le__put64(clk + 8, stamp0);
	le__put64(clk + 16, t0);
	le__put64(clk + 24, 1ull << 32);
	le__put32(clk + 32, le__crc_mask(le__crc32c_extend(0, clk, 32)));
	for (int round = 0; round < 2; round++) {
		le_config c;
		struct krecs k;
		small_queue(&c);
		recover_whole(c, &k);
		for (int i = 0; i < KREC; i++) {
			uint64_t s = le__get64(q + LE_QUEUE_HDR + kall[i] + 8);
			CHECK_EQ(k.r[i].ts, t0 + (s - stamp0));
		}
		nftw(work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
		/* the second recovery a while later: the recovering
		 * clock has moved on, the dead one's conversion has not */
		usleep(200000);
	}
	t_rmrf(tmpl);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(queue_resized_after_a_crash_loses_no_new_record);
	RUN(damaged_queue_file_keeps_the_records_before_the_damage);
	RUN(byte_flipped_anywhere_in_a_queue_file_never_crashes_le_open);
	RUN(queue_header_with_an_absurd_size_is_not_followed);
	RUN(recover_names_the_damage_and_exits_1);
	RUN(records_larger_than_this_engine_takes_are_still_recovered);
	RUN(queue_left_in_the_other_stamp_unit_keeps_its_record_times);
	RUN(queue_recovered_twice_writes_its_records_once);
	RUN(live_directory_copied_then_recovered_has_no_duplicate);
	RUN(producer_killed_between_its_claim_and_its_claim_word_costs_only_its_slot);
	RUN(every_bit_flipped_in_a_queue_file_is_recovered_or_reported);
	RUN(every_bit_flipped_in_queue_and_slot_headers_is_caught_or_a_documented_change);
	RUN(queue_left_by_a_version_1_library_is_still_recovered);
	RUN(queue_of_a_newer_version_is_refused_and_kept);
	RUN(cleared_deferred_flag_makes_recover_name_the_slot_and_exit_1);
	RUN(queue_checksum_catches_every_bit_flipped_in_a_record_slot);
	RUN(record_changed_under_its_checksum_makes_recover_name_it_and_exit_1);
	RUN(queue_checksum_setting_follows_the_file_through_recovery);
	RUN(recovered_times_are_the_dead_clocks_whenever_recovery_runs);
	RUN(damaged_header_still_recovers_every_record_with_or_without_checksums);
	RUN(adjacent_slots_failing_their_checksums_are_counted_one_each);
	RUN(resync_onto_a_slot_followed_by_one_failing_its_checksum_loses_nothing_more);
	RUN(slot_size_flipped_to_its_other_allowed_size_costs_only_that_slot);
	return t_done();
}
