/*
 * test_writer_loop.c -- the writer's loop and le_flush under load: when
 * the writer sleeps and when it works, when a flush may return, and the
 * configuration that loop runs with.  Each test is named after what would
 * break.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "logengine.h"
#include "engine/shard.h" /* a slot claimed and not published */
#include "base/os.h"
#include "engine/pace.h"
#include "logtest.h"

static char dir[256];

static le_engine *open_cfg(le_config *c)
{
	le_engine *e = NULL;
	int rc = le_open(&e, c);
	if (rc < 0) {
		fprintf(stderr, "  le_open: %s (%s)\n", le_strerror(rc),
		        le_errmsg());
		_exit(1);
	}
	return e;
}

static double thread_cpu_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Wait (up to 10 s, else fail) until every writer of e has gone to sleep
 * or to nap: it has taken what it can from its ring and has nothing due. */
static void writers_idle(le_engine *e)
{
	uint64_t t0 = le__mono_ns();
	for (uint32_t i = 0; i < e->nshards; i++) {
		while (atomic_load(&e->shards[i].sig.sleeping) == 0) {
			CHECK(le__mono_ns() - t0 < 10000000000u);
			usleep(1000);
		}
	}
}

static int written_one(const le_stats *st)
{
	return st->written >= 1;
}

static int written_sixteen(const le_stats *st)
{
	return st->written >= 16;
}

static int written_batch(const le_stats *st)
{
	return st->written >= 256;
}

static int synced(const le_stats *st)
{
	return st->syncs >= 1;
}

/* The stream's buffer had no room for a line. */
static int stream_full(const le_stats *st)
{
	return st->stream_dropped >= 1;
}

/*
 * Small records at a high rate are work, not a trickle: a writer that
 * went to sleep between them would be woken by a producer's futex call
 * once a batch (one le_write in a thousand paying tens of microseconds).
 * A million 64-byte slots a second fill less than BUSY_BYTES_PER_US; the
 * record rate alone must keep the writer napping, and the nap last
 * until about a batch has come (each pass's release costs a producer a
 * cache miss or two).  A real trickle still sleeps.
 */
TEST(small_records_at_a_million_a_second_keep_the_writer_napping)
{
	static le__shard sh; /* big: not on the stack */
	static le_engine e;
	const uint64_t us = 1000, t0 = 1000000000;

	e.batch = 1024;
	sh.e = &e;
	sh.ring.size = 1u << 20;
	sh.w.last_collect_mono = t0;
	/* 200 us: 192 records of 64 ring bytes (0.96 M/s, 61 bytes/us) */
	le__pace_pass(&sh, 0, 192 * 64, 192, t0 + 200 * us);
	CHECK_EQ(sh.w.busy, 1);
	/* it naps until a batch has come: one release a batch */
	CHECK_EQ(sh.w.nap_ns, 200 * us * 1024 / 192);
	/* ... what its batch still lacks: half of it held, half the nap
	 * (a whole batch more would reach the queue's half-full mark) */
	sh.batch.n = 512;
	le__pace_pass(&sh, 0, 192 * 64, 192, sh.w.last_collect_mono + 200 * us);
	CHECK_EQ(sh.w.nap_ns, 200 * us * 512 / 192);
	sh.batch.n = 0;
	/* faster, it naps at least LE_BUSY_NAP_NS; slower, at most 2 ms */
	le__pace_pass(&sh, 0, 1500 * 64, 1500, sh.w.last_collect_mono + 100 * us);
	CHECK_EQ(sh.w.nap_ns, 200 * us);
	le__pace_pass(&sh, 0, 400 * 64, 400, sh.w.last_collect_mono + 1000 * us);
	CHECK_EQ(sh.w.busy, 1);
	CHECK_EQ(sh.w.nap_ns, 2000 * us);
	/* a quarter ring sooner than that: the ring decides */
	le__pace_pass(&sh, 0, 200 * 1024, 200, sh.w.last_collect_mono + 100 * us);
	CHECK_EQ(sh.w.nap_ns, 100 * us * (1u << 18) / (200 * 1024));
	/* big records at a lower rate: busy by their bytes */
	le__pace_pass(&sh, 0, 40 * 512, 40, sh.w.last_collect_mono + 200 * us);
	CHECK_EQ(sh.w.busy, 1);
	/* an access log: 10 records in a millisecond */
	le__pace_pass(&sh, 0, 10 * 128, 10, sh.w.last_collect_mono + 1000 * us);
	CHECK_EQ(sh.w.busy, 0);
	/* a filled batch is busy at any rate */
	le__pace_pass(&sh, 1, 64, 1, sh.w.last_collect_mono + 1000 * us);
	CHECK_EQ(sh.w.busy, 1);
}

/*
 * A napping writer is left alone by the once-a-batch wake-up (that is
 * what its nap saves the producers), but a queue half full, a full one
 * (a drop or a blocked producer), a le_flush or a close must end the nap:
 * it was sized for a quarter of the queue at the rate seen before, and a
 * burst may be faster.  A sleeping writer is woken by all of them.
 */
TEST(a_napping_writer_is_woken_by_a_half_full_queue_not_by_a_batch)
{
	static le__shard sh;
	_Atomic uint32_t *s = &sh.sig.sleeping;

	atomic_store(s, LE_NAPPING);
	le__wake_queued(&sh, LE_WAKE_ASLEEP);
	CHECK_EQ(atomic_load(s), LE_NAPPING);
	le__wake_queued(&sh, LE_WAKE_ANY);
	CHECK_EQ(atomic_load(s), 0);
	atomic_store(s, LE_NAPPING);
	le__wake_writer(&sh); /* a drop, a blocked producer */
	CHECK_EQ(atomic_load(s), 0);
	atomic_store(s, LE_NAPPING);
	le__wake_after(&sh); /* a le_flush's request */
	CHECK_EQ(atomic_load(s), 0);
	atomic_store(s, LE_ASLEEP);
	le__wake_queued(&sh, LE_WAKE_ASLEEP);
	CHECK_EQ(atomic_load(s), 0);
	le__wake_queued(&sh, LE_WAKE_ANY); /* awake: nothing to do */
	CHECK_EQ(atomic_load(s), 0);
}

/*
 * A sleeping writer is woken by a producer once a batch is queued; with
 * several shards, a batch in its own shard, not in the whole engine: the
 * budget counts every shard's records, and a writer woken whenever the
 * engine holds a batch is woken (a futex call in some producer's
 * le_write) while its shard holds a fraction of one, twice as often with
 * two shards.  Its own batch still wakes it (no wake-up lost).
 */
TEST(a_writer_is_not_woken_before_its_own_shard_holds_a_batch)
{
	static le_engine e;
	/* 256 records of 16 B (64 ring bytes each) in the engine */
	uint64_t b = 256 | (uint64_t)(256 * 16) << LE_BUDGET_REC_BITS;

	e.nshards = 2;
	/* 56 of them in this shard: not woken; all 256 (or 200): woken */
	CHECK_EQ(le__shard_holds(&e, b, 56 * 64, 256), 0);
	CHECK(le__shard_holds(&e, b, 256 * 64, 256));
	CHECK(le__shard_holds(&e, b, 200 * 64, 256));
	/* under a batch in the engine: no shard holds one */
	CHECK_EQ(le__shard_holds(&e, b, 256 * 64, 257), 0);
	/* one shard: the engine's count, as ever */
	e.nshards = 1;
	CHECK(le__shard_holds(&e, b, 56 * 64, 256));

	/* A running engine: the writer of a shard that holds a batch, while
	 * the other holds records too, is woken long before flush_ms. */
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	c.shards = 2;
	c.queue_capacity = 1024; /* a batch of 256 */
	c.flush_ms = 60000;
	le_engine *en = open_cfg(&c);
	CHECK_EQ(en->batch, 256u);
	writers_idle(en);
	char buf[16];
	memset(buf, 'w', sizeof buf);
	for (int i = 0; i < 200; i++)
		CHECK_EQ(le_write(en, 1, LE_INFO, buf, sizeof buf), 0);
	for (int i = 0; i < 256; i++)
		CHECK_EQ(le_write(en, 0, LE_INFO, buf, sizeof buf), 0);
	t_stats_until(en, written_batch, 10000);
	le_stats st;
	CHECK_EQ(le_close_stats(en, &st), 0);
	CHECK_EQ(st.written, 456u);
	t_rmrf(dir);
}

/*
 * The queue is full (shards that together hold it all) while each
 * writer holds a batch that is not due yet: producers drop, and each batch
 * already carries its "records dropped" marker.  The writer has nothing to
 * do until the batch is due; it must sleep, not spin on the drop count
 * it cannot report before then.
 */
TEST(writer_sleeps_while_producers_drop_behind_a_batch_not_yet_due)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	/* Eight shards share a queue of ~300 records: each holds ~40 when
	 * it is full, under the quarter of the queue that makes a batch
	 * due, so no writer writes before flush_ms. */
	c.queue_capacity_bytes = 65536;
	c.shards = 8;
	c.flush_ms = 2000;
	le_engine *e = open_cfg(&c);
	char buf[200];
	memset(buf, 'd', sizeof buf);
	long ok = 0, calls = 0;
	/* Fill the queue; the writers collect it into batches. */
	while (le_write(e, (uint64_t)calls, LE_INFO, buf, sizeof buf) == 0)
		ok++, calls++;
	calls++;
	writers_idle(e);
	le_stats a, b;
	le_stats_get(e, &a);
	double cpu0 = thread_cpu_ms();
	uint64_t t0 = le__mono_ns();
	while (le__mono_ns() - t0 < 300000000u) {
		int rc = le_write(e, (uint64_t)calls, LE_INFO, buf, sizeof buf);
		CHECK(rc == 0 || rc == LE_EFULL);
		ok += rc == 0;
		calls++;
	}
	double mine = thread_cpu_ms() - cpu0;
	le_stats_get(e, &b);
	double ms = (double)(b.writer_cpu_ns - a.writer_cpu_ns) / 1e6;
	fprintf(stderr, "  (CPU while producers dropped for 300 ms: writer "
	        "%.1f ms, producer %.1f ms)\n", ms, mine);
	/* Eight spinning writers get eight CPU shares to the producer's one
	 * (on a loaded machine each less than a whole CPU); napping writers
	 * a fraction of one.  A sanitizer's runtime makes each wake-up (a
	 * futex, a clock read) cost tens of microseconds, raising that
	 * fraction to a quarter or more, so the line sits at half: far below
	 * what spinning takes, and above what napping takes under any
	 * runtime. */
	CHECK(ms < 150 && ms < mine / 2);
	CHECK_EQ(le_flush(e, 10000), 0);
	le_stats st;
	CHECK_EQ(le_close_stats(e, &st), 0);
	CHECK_EQ(st.accepted, (uint64_t)calls);
	CHECK_EQ(st.written, (uint64_t)ok);
	CHECK_EQ(st.accepted, st.dropped_full + st.written + st.dropped_io);
	CHECK_EQ(count_records(dir), ok);
	t_rmrf(dir);
}

/*
 * A producer stopped between claiming its slot and publishing it, and no
 * le_flush waiting: the queue fills behind the slot and the others drop.
 * The writer's batch holds the marker for those drops and nothing else
 * it can take; it must not spin on the drops that keep coming.
 */
TEST(writer_sleeps_while_producers_drop_behind_a_stuck_slot)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	c.flush_ms = 2000;
	le_engine *e = open_cfg(&c);
	CHECK_EQ(le_write(e, 0, LE_INFO, "before", 6), 0);
	CHECK_RC(le_flush(e, 5000));
	/* What le_write does, up to the publish. */
	le__shard *sh = &e->shards[0];
	uint64_t used;
	CHECK(le__budget_take(&e->budget, 5, e->cap_rec, e->cap_bytes) != 0);
	le__slot *slot = le__ring_reserve(&sh->ring, le__slot_bytes(5), &used);
	CHECK(slot != NULL);
	long ok = 0, calls = 0;
	while (le_write(e, 0, LE_INFO, "behind", 6) == 0) /* fill it */
		ok++, calls++;
	calls++;
	writers_idle(e);
	le_stats a, b;
	le_stats_get(e, &a);
	double cpu0 = thread_cpu_ms();
	uint64_t t0 = le__mono_ns();
	while (le__mono_ns() - t0 < 300000000u) {
		int rc = le_write(e, 0, LE_INFO, "behind", 6);
		CHECK(rc == 0 || rc == LE_EFULL);
		ok += rc == 0;
		calls++;
	}
	double mine = thread_cpu_ms() - cpu0;
	le_stats_get(e, &b);
	double ms = (double)(b.writer_cpu_ns - a.writer_cpu_ns) / 1e6;
	fprintf(stderr, "  (CPU while producers dropped for 300 ms: writer "
	        "%.1f ms, producer %.1f ms)\n", ms, mine);
	CHECK(ms < 60 && ms < mine / 4);
	/* The producer goes on: everything is written. */
	slot->len = 5;
	slot->seq = 0;
	slot->ts = le__stamp(e->use_tsc);
	slot->level = LE_INFO;
	slot->flags = 0;
	memcpy(slot + 1, "stuck", 5);
	le__slot_publish(slot);
	CHECK_RC(le_flush(e, 5000));
	le_stats st;
	CHECK_EQ(le_close_stats(e, &st), 0);
	CHECK_EQ(st.written, 2 + (uint64_t)ok);
	CHECK_EQ(count_records(dir), 2 + ok);
	t_rmrf(dir);
}

/* ---- the writer's timers ---- */

/*
 * flush_ms bounds how long a record waits to be written.  A writer asleep
 * when it comes (a trickle: it sleeps up to flush_ms between looks) finds
 * it up to flush_ms late; the record's wait counts from when it came, not
 * from when the writer saw it.
 */
TEST(a_record_waits_at_most_flush_ms_for_a_sleeping_writer)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	c.flush_ms = 1000;
	le_engine *e = open_cfg(&c);
	writers_idle(e); /* the writer looked, found nothing, and sleeps */
	uint64_t t0 = le__mono_ns();
	CHECK_EQ(le_write(e, 0, LE_INFO, "one", 3), 0);
	t_stats_until(e, written_one, 10000);
	double ms = (double)(le__mono_ns() - t0) / 1e6;
	fprintf(stderr, "  (written %.0f ms after le_write; flush_ms 1000)\n",
	        ms);
	CHECK(ms < 1500); /* a writer that starts the clock late: ~1900 */
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

/*
 * LE_SYNC_INTERVAL syncs what was written every sync_ms, whatever flush_ms
 * is: a writer that sleeps for flush_ms between looks must wake for the
 * sync.
 */
TEST(interval_sync_comes_after_sync_ms_when_flush_ms_is_longer)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_INTERVAL;
	c.sync_ms = 300;
	c.flush_ms = 5000;
	c.batch_size = 16; /* a full batch is written at once */
	le_engine *e = open_cfg(&c);
	for (int i = 0; i < 16; i++)
		CHECK_EQ(le_write(e, 0, LE_INFO, "full batch", 10), 0);
	t_stats_until(e, written_sixteen, 10000);
	/* Within three sync periods, a fifth of flush_ms. */
	t_stats_until(e, synced, 1000);
	CHECK_EQ(le_close(e), 0);
	t_rmrf(dir);
}

/* ---- a stream-only engine's flush under load ---- */

static int slow_fd;
static atomic_int slow_stop;

/* A reader that keeps up with a trickle, not with a flood: 256 bytes
 * every 5 ms.  The pipe takes the stream's writes a page at a time, as
 * the reader empties one. */
static void *slow_reader(void *arg)
{
	char b[256];
	(void)arg;
	while (!atomic_load(&slow_stop)) {
		if (read(slow_fd, b, sizeof b) <= 0)
			break;
		usleep(5000);
	}
	return NULL;
}

static le_engine *flood_e;

static void *flood(void *arg)
{
	char buf[100];
	(void)arg;
	memset(buf, 'f', sizeof buf);
	while (!atomic_load(&slow_stop))
		le_write(flood_e, 1, LE_INFO, buf, sizeof buf);
	return NULL;
}

/*
 * With store = 0, le_flush waits until its records' lines are written to
 * stream_fd: lines handed over before it returns.  Lines that producers
 * keep handing over after the call are not its records; with a reader
 * slower than the producers the stream's buffer is never empty, and a
 * flush that waits for an empty buffer never returns.
 */
TEST(stream_only_flush_returns_while_other_lines_keep_coming)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	le_config c;
	le_config_init(&c);
	c.store = 0;
	c.stream_fd = fds[1];
	c.stream_buffer_bytes = 16384; /* more than a pipe page */
	c.shards = 2;
	c.flush_ms = 1;
	flood_e = open_cfg(&c);
	slow_fd = fds[0];
	atomic_store(&slow_stop, 0);
	pthread_t r, p;
	CHECK_EQ(pthread_create(&r, NULL, slow_reader, NULL), 0);
	CHECK_EQ(pthread_create(&p, NULL, flood, NULL), 0);
	t_stats_until(flood_e, stream_full, 10000); /* and it stays full */
	int bad = 0;
	for (int i = 0; i < 3; i++) {
		le_write(flood_e, 0, LE_INFO, "mine", 4);
		int rc = le_flush(flood_e, 3000);
		if (rc != 0) {
			fprintf(stderr, "  flush %d: %s\n", i, le_strerror(rc));
			bad++;
		}
	}
	atomic_store(&slow_stop, 1);
	pthread_join(p, NULL);
	le_stats st;
	CHECK_EQ(le_close_stats(flood_e, &st), 0);
	pthread_join(r, NULL);
	close(fds[0]);
	close(fds[1]);
	CHECK_EQ(bad, 0);
	CHECK_EQ(st.accepted, st.dropped_full + st.stream_lines +
	                              st.stream_dropped);
}

/* ---- counters ---- */

/*
 * Records a dead process left in its queue go through every sink at the
 * next le_open: into the segments (written) and onto the stream (lines).
 * They are not accepted by this engine; recovered_records counts them, and
 * the header's sums hold with it, for both sinks.
 */
TEST(recovered_records_complete_the_counter_sums_of_both_sinks)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		le_engine *e;
		c.flush_ms = 60000; /* its writer writes nothing unwoken */
		if (le_open(&e, &c) != 0)
			_exit(2);
		for (int i = 0; i < 40; i++)
			if (le_write(e, 0, LE_INFO, "queued", 6) != 0)
				_exit(3);
		_exit(0); /* no le_close: the records stay in its queue */
	}
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	int fds[2];
	CHECK(pipe(fds) == 0);
	c.stream_fd = fds[1];
	le_engine *e = open_cfg(&c);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(le_write(e, 0, LE_INFO, "new", 3), 0);
	le_stats s;
	CHECK_EQ(le_close_stats(e, &s), 0);
	CHECK_EQ(s.recovered_records, 40);
	CHECK_EQ(s.accepted, 10);
	CHECK_EQ(s.accepted + s.recovered_records,
	         s.dropped_full + s.written + s.dropped_io);
	CHECK_EQ(s.accepted + s.recovered_records,
	         s.dropped_full + s.stream_lines + s.stream_dropped);
	CHECK_EQ(count_records(dir), 50);
	close(fds[0]);
	close(fds[1]);
	t_rmrf(dir);
}

/* ---- configuration ---- */

/*
 * Without a segment store the queue, the shards and the writer's batch
 * are the same as with one: their values are checked the same way (a
 * batch above a quarter of the queue refused, shards between 1 and 256),
 * not taken as they come.
 */
TEST(stream_only_config_is_checked_like_any_other)
{
	static const char *const field[] = {
		"shards", "shards", "batch_size", "queue_capacity", "flush_ms",
		"max_pending_bytes", "max_record_bytes",
	};
	int fds[2];
	CHECK(pipe(fds) == 0);
	for (int i = 0; i < (int)(sizeof field / sizeof field[0]); i++) {
		le_config c;
		le_config_init(&c);
		c.store = 0;
		c.stream_fd = fds[1];
		switch (i) {
		case 0: c.shards = 0; break;
		case 1: c.shards = 1000; break;
		case 2: c.batch_size = c.queue_capacity; break;
		case 3: c.queue_capacity = 0; break;
		case 4: c.flush_ms = 0; break;
		case 5: c.max_pending_bytes = 16; break;
		case 6: c.max_record_bytes = 0; break;
		}
		le_engine *e = NULL;
		int rc = le_open(&e, &c);
		if (rc != LE_EINVAL || !strstr(le_errmsg(), field[i])) {
			fprintf(stderr, "  case %d (%s): le_open %d (%s)\n", i,
			        field[i], rc, le_errmsg());
			if (rc == 0)
				le_close(e);
			_exit(1);
		}
	}
	close(fds[0]);
	close(fds[1]);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(small_records_at_a_million_a_second_keep_the_writer_napping);
	RUN(a_napping_writer_is_woken_by_a_half_full_queue_not_by_a_batch);
	RUN(a_writer_is_not_woken_before_its_own_shard_holds_a_batch);
	RUN(writer_sleeps_while_producers_drop_behind_a_batch_not_yet_due);
	RUN(writer_sleeps_while_producers_drop_behind_a_stuck_slot);
	RUN(a_record_waits_at_most_flush_ms_for_a_sleeping_writer);
	RUN(interval_sync_comes_after_sync_ms_when_flush_ms_is_longer);
	RUN(stream_only_flush_returns_while_other_lines_keep_coming);
	RUN(recovered_records_complete_the_counter_sums_of_both_sinks);
	RUN(stream_only_config_is_checked_like_any_other);
	return t_done();
}
