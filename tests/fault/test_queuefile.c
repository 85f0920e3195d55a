/*
 * test_queuefile.c -- a dead process's QUEUE file, damaged or reopened
 * with another size, at the next le_open.
 *
 * A crash that kills a process is often a wild write first, and the queue
 * is a shared mapping of that process: its words may be anything.  The
 * next le_open must write out the records before the damage, exactly, say
 * the rest was dropped, and never follow a length or a position out of
 * the ring (which used to crash le_open on every restart: a service that
 * cannot start because of its log).  Each case runs le_open in a process
 * of its own, so a crash is a failed case, named.
 */
#include "harness.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "crc32c.h"
#include "format.h"
#include "logengine.h"
#include "os.h"
#include "queue.h"
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

/* A process that opens tmpl with c (flush_ms far away: its writer writes
 * nothing unless woken), runs queue() and dies without le_close: what
 * queue() accepted is left in tmpl's QUEUE files. */
static void die_with_queued_in(le_config c, int (*queue)(le_engine *e),
                               int no_tsc)
{
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		le_engine *e;
		le__tsc_forbid = no_tsc; /* its stamps in ns, not ticks */
		c.dir = tmpl;
		c.flush_ms = 60000;
		_exit(le_open(&e, &c) != 0 ? 3 : queue(e) != 0 ? 4 : 0);
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

/* le_open on work in a process of its own: 0 when it opened, closed, and
 * what it wrote holds records 0..intact-1 in order, intact, and at most
 * NREC + 1 records (the + 1: the one this process adds); else why. */
static int reopen_keeps(int intact)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		le_config c;
		alarm(20); /* a hang is a failure too */
		le_config_init(&c);
		c.dir = work;
		c.durability = LE_SYNC_NONE;
		le_engine *e;
		if (le_open(&e, &c) != 0)
			_exit(10);
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
 * new size: the writer's position must start again with it.  It did not:
 * it waited at the old head while new records went in at 0, le_flush and
 * le_close returned 0, and every record accepted after the reopen was
 * lost. */
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
TEST(recover_names_the_damage_and_exits_1)
{
	char cmd[1024], out[512] = "";
	make_dead_queue();
	int fd = fresh_copy();
	len_huge(fd, NULL);
	close(fd);
	snprintf(cmd, sizeof cmd, "%s recover '%s' 2>&1",
	         t_build_tool("LE_CLI", "logengine"), work);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	fprintf(stderr, "  %s", out);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	CHECK(strstr(out, "queue file damaged at position 960 of 3840") != NULL);
	CHECK(strstr(out, "5 record(s) written from queues") != NULL);
	struct seen s = {0, 0};
	CHECK(read_all(work, LE_RECOVER_ABSOLUTE, see, &s) >= 0);
	CHECK_EQ(s.prefix, K);
	CHECK_EQ(s.n, K);
	t_rmrf(work);
	t_rmrf(tmpl);
}

/* A process that took records up to 4 MiB (max_record_bytes) dies with
 * one of 2 MiB queued between two small ones; the engine that opens the
 * directory takes at most 64 KiB, and its writer's buffer held 1 MiB and
 * a bit.  Its walk stopped at the big one as if the file were damaged,
 * and dropped it and the one after. */
/* A disk that never answers: the dying process's writer writes
 * nothing, whatever wakes it. */
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

static int queue_small_big_small(le_engine *e)
{
	static char big[2u << 20];
	memset(big, 'B', sizeof big);
	/* The 2 MiB record wakes the writer: it must not write. */
	le__os_table.pwrite = pwrite_never;
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
 * 64 bytes: working out its lap doubled past 2^63 to 0 and never
 * ended, in le_open and in its look at shards not opened. */
TEST(queue_header_with_an_absurd_size_is_not_followed)
{
	t_tmpdir(tmpl);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(20);
		unsigned char h[LE_QUEUE_HDR];
		char path[400];
		le__boot_id_override = 0x5eed;
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
 * read as ticks were dated at the clamp's bound (the recovery's time) and
 * ticks read as ns in 1970.
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
			le__tsc_forbid = !dead_no_tsc;
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
	return t_done();
}
