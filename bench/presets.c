/*
 * presets.c -- the named presets (the comparisons, and the scans of
 * payload, producers and each engine knob), each a list of points (a
 * configuration and the competitors it runs).  Presets run in this order;
 * inside one, repeats are interleaved (bench.c).
 *
 * Scanned quantities that logengine has no knob for are mapped, and the
 * label says how: inflight (outstanding buffers per shard) is the number
 * of batches the queue holds, queue_capacity / batch_size; write-behind is
 * what the writer always does (pwrite into the page cache, the kernel
 * writes back), turned off by durability BATCH (fdatasync every batch).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

struct point *pts;
size_t npts;
static size_t cappts;

static void add_point(const char *preset, unsigned targets,
                      const struct bench_cfg *cfg, const char *fmt, ...)
{
	va_list ap;

	if (npts == cappts) {
		cappts = cappts ? cappts * 2 : 32;
		pts = realloc(pts, cappts * sizeof *pts);
		if (!pts) {
			perror("bench");
			exit(1);
		}
	}
	struct point *p = &pts[npts++];
	memset(p, 0, sizeof *p);
	p->preset = preset;
	p->cfg = *cfg;
	p->targets = targets;
	va_start(ap, fmt);
	vsnprintf(p->label, sizeof p->label, fmt, ap);
	va_end(ap);
}

/* The base of every preset: the engine's defaults, except durability NONE
 * (spdlog and glog never fsync either) and overflow BLOCK (nothing may be
 * dropped, as spdlog's "block" policy drops nothing).  Default fields: all
 * five, CRC, timestamp, level, shard and sequence. */
struct bench_cfg preset_base(void)
{
	struct bench_cfg c;
	memset(&c, 0, sizeof c);
	c.records = O.records;
	c.payload = O.payload;
	c.threads = O.threads;
	c.route_keys = O.route_keys;
	c.le = O.le;
	return c;
}

/* The judged run, and again without the per-call timer for logengine,
 * spdlog and the raw baseline: the timer (lfence; rdtsc ... rdtscp, and
 * the store of the figure) costs about as much as a le_write, so
 * throughput is judged untimed and the timed figures stay beside it.
 * Then, when the queue's byte bound is larger than its record bound
 * needs (--queue-bytes), logengine once more, timed and untimed, with the
 * byte bound sized for the record bound (8,192 records x payload), as
 * spdlog's queue is 8,192 messages: the ring behind the queue is sized by
 * the byte bound, and its size shows in every figure (the "queue-bytes"
 * scan). */
/*
 * Then logengine as a user meets it first: with its default durability
 * (fdatasync every second, on the sync thread), beside the durability-none
 * rows above (spdlog and glog never sync, so those are the like-for-like
 * comparison); and a burst of three times the records with the default
 * overflow policy (drop), whose share kept the report states.
 */
static void p_compare_defaults(const char *name)
{
	struct bench_cfg c = preset_base();
	le_config d;

	if (!(O.targets & T_LE))
		return;
	le_config_init(&d);
	c.le.durability = d.durability;
	add_point(name, T_LE, &c, "logengine's default durability (fdatasync "
	          "every %u ms); spdlog never syncs", d.sync_ms);
	pts[npts - 1].variant = VARIANT_DEFAULTS;
	c.le.overflow = d.overflow;
	c.records = 3 * O.records;
	add_point(name, T_LE, &c, "burst of %ld, the defaults (overflow drop): "
	          "dropped = not kept", c.records);
	pts[npts - 1].variant = VARIANT_BURST;
}

static void p_compare(const char *name)
{
	struct bench_cfg c = preset_base();
	uint64_t small = (uint64_t)c.le.queue_capacity * c.payload;

	add_point(name, O.targets, &c, "%ld x %u B, %d producer%s", c.records,
	          c.payload, c.threads, c.threads > 1 ? "s" : "");
	c.untimed = 1;
	if (O.targets & (T_LE | T_SPD | T_RAW))
		add_point(name, O.targets & (T_LE | T_SPD | T_RAW), &c,
		          "%ld x %u B, calls not timed", c.records, c.payload);
	p_compare_defaults(name);
	if (!(O.targets & T_LE) || small >= c.le.queue_capacity_bytes ||
	    small < c.le.max_record_bytes)
		return;
	c.le.queue_capacity_bytes = small;
	for (int untimed = 0; untimed < 2; untimed++) {
		c.untimed = untimed;
		add_point(name, T_LE, &c, "queue_capacity_bytes %" PRIu64
		          " KiB%s", small >> 10, untimed ? ", not timed" : "");
		pts[npts - 1].variant = 1;
	}
}

static void p_formatted(const char *name)
{
	struct bench_cfg c = preset_base();
	c.workload = BENCH_FORMATTED;
	add_point(name, O.targets, &c, "%ld x fmt, %d producer%s", c.records,
	          c.threads, c.threads > 1 ? "s" : "");
}

/* Three values per record, each competitor's structured way: logengine's
 * le_info_kv with two int64 fields and a double (kept typed, no text),
 * spdlog's info("{} {} {}") (text made on the calling thread).  The
 * others have no such call. */
static void p_kv(const char *name)
{
	struct bench_cfg c = preset_base();
	c.workload = BENCH_KV;
	unsigned t = O.targets & (T_LE | T_SPD);
	if (!t)
		return;
	add_point(name, t, &c, "%ld x 3 fields, %d producer%s", c.records,
	          c.threads, c.threads > 1 ? "s" : "");
	c.untimed = 1;
	add_point(name, t, &c, "%ld x 3 fields, calls not timed", c.records);
}

/* Issue 19's comparison: BENCH_FMT through logengine's deferred path
 * (le_info) and le_logf, spdlog and glog, in one run: throughput with the
 * calls not timed (the drain to the files included), then each call timed
 * in bursts of 20 calls, BENCH_BURST_GAP_NS apart. */
static void p_deferred(const char *name)
{
	struct bench_cfg c = preset_base();
	unsigned fmt_t = O.targets & (T_LE | T_SPD | T_GLOG);

	for (int timed = 0; timed < 2; timed++) {
		c.untimed = !timed;
		c.burst = timed ? 20 : 0;
		c.workload = BENCH_DEFERRED;
		if (O.targets & T_LE)
			add_point(name, T_LE, &c, "%ld x fmt, deferred (le_info)%s",
			          c.records, timed ? ", bursts of 20" : ", not timed");
		c.workload = BENCH_FORMATTED;
		if (fmt_t)
			add_point(name, fmt_t, &c, "%ld x fmt, formatted at the "
			          "call%s", c.records,
			          timed ? ", bursts of 20" : ", not timed");
	}
}

static void p_custom(const char *name)
{
	struct bench_cfg c = preset_base();
	c.workload = O.formatted ? BENCH_FORMATTED : BENCH_RAW;
	c.untimed = O.untimed;
	add_point(name, O.targets, &c, O.untimed ? "custom, not timed" : "custom");
}

/* The payload scan moves at most 512 MiB of payload per run (4096 B:
 * 131,072 records), so that it stays a benchmark and not a disk test. */
static void p_payload(const char *name)
{
	static const uint32_t sz[] = {128, 512, 4096};
	for (int i = 0; i < 3; i++) {
		struct bench_cfg c = preset_base();
		c.payload = sz[i];
		if ((uint64_t)c.records * sz[i] > (512ull << 20))
			c.records = (long)((512ull << 20) / sz[i]);
		add_point(name, T_ALL, &c, "payload=%u", sz[i]);
	}
}

static void p_threads(const char *name)
{
	for (int t = 1; t <= 4; t *= 2) {
		struct bench_cfg c = preset_base();
		c.threads = t;
		add_point(name, T_ALL, &c, "producers=%d", t);
	}
}

/* Issue 31's many producers: 1, 2, 4 and 8 producer threads on 1 and 2
 * shards (producer i routes to shard i mod shards), logengine only,
 * first with the calls not timed (aggregate msg/s, the figure judged:
 * no point below the single producer's), then timed (p99.9).  8
 * producers on 2 CPUs are preempted in the middle of a call: the timed
 * points' tails show the scheduler as much as the queue. */
static void p_producers(const char *name)
{
	for (int untimed = 1; untimed >= 0; untimed--)
		for (unsigned s = 1; s <= 2; s++)
			for (int t = 1; t <= 8; t *= 2) {
				struct bench_cfg c = preset_base();
				c.threads = t;
				c.le.shards = s;
				c.untimed = untimed;
				add_point(name, T_LE, &c,
				          "producers=%d shards=%u%s", t, s,
				          untimed ? ", not timed" : "");
			}
}

static void p_threads_fmt(const char *name)
{
	for (int t = 2; t <= 4; t *= 2) {
		struct bench_cfg c = preset_base();
		c.threads = t;
		c.workload = BENCH_FORMATTED;
		add_point(name, T_ALL, &c, "fmt producers=%d", t);
	}
}

static void p_batch(const char *name)
{
	static const uint32_t b[] = {64, 256, 1024, 2048};
	for (int i = 0; i < 4; i++) {
		struct bench_cfg c = preset_base();
		c.le.batch_size = b[i];
		add_point(name, T_LE, &c, "batch_size=%u", b[i]);
	}
}

/* Inflight (outstanding buffers per shard) has no knob of its own: the
 * queue holds queue_capacity / batch_size batches, so with batch_size
 * 256, inflight N is queue_capacity 256 N. */
static void p_inflight(const char *name)
{
	static const uint32_t n[] = {16, 64, 256};
	for (int i = 0; i < 3; i++) {
		struct bench_cfg c = preset_base();
		c.le.batch_size = 256;
		c.le.queue_capacity = 256 * n[i];
		add_point(name, T_LE, &c, "inflight=%u (batch 256, queue %u)",
		          n[i], 256 * n[i]);
	}
}

static void p_checkpoint(const char *name)
{
	static const uint32_t ms[] = {0, 1000, 10, 1};
	for (int i = 0; i < 4; i++) {
		struct bench_cfg c = preset_base();
		c.le.checkpoint_ms = ms[i];
		if (ms[i])
			add_point(name, T_LE, &c, "checkpoint every %u ms",
			          ms[i]);
		else
			add_point(name, T_LE, &c, "checkpoint off");
	}
}

static void p_fields(const char *name)
{
	static const struct {
		uint32_t f;
		const char *label;
	} f[] = {
		{LE_FIELD_ALL, "all five"},
		{0, "none"},
		{LE_FIELD_ALL & ~LE_FIELD_CRC, "all but CRC"},
		{LE_FIELD_ALL & ~LE_FIELD_TIMESTAMP, "all but timestamp"},
		{LE_FIELD_ALL & ~LE_FIELD_LEVEL, "all but level"},
		{LE_FIELD_ALL & ~LE_FIELD_SHARD, "all but shard id"},
		{LE_FIELD_ALL & ~LE_FIELD_SEQUENCE, "all but sequence"},
		{LE_FIELD_CRC, "CRC only"},
	};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		struct bench_cfg c = preset_base();
		c.le.fields = f[i].f;
		add_point(name, T_LE, &c, "fields %s (0x%02x)", f[i].label,
		          f[i].f);
	}
}

static void p_shards(const char *name)
{
	static const int keys[] = {0, 4, 16};
	for (unsigned s = 1; s <= 4; s *= 2)
		for (int k = 0; k < 3; k++) {
			struct bench_cfg c = preset_base();
			c.le.shards = s;
			c.route_keys = keys[k];
			add_point(name, T_LE, &c, "shards=%u route_keys=%d", s,
			          keys[k]);
		}
}

static void p_pending(const char *name)
{
	static const uint32_t kb[] = {16, 64, 256, 1024, 4096};
	for (int i = 0; i < 5; i++) {
		struct bench_cfg c = preset_base();
		c.le.max_pending_bytes = kb[i] << 10;
		add_point(name, T_LE, &c, "max_pending_bytes=%u KiB", kb[i]);
	}
}

static void p_flush_ms(const char *name)
{
	static const uint32_t ms[] = {1, 10, 50, 200};
	for (int i = 0; i < 4; i++) {
		struct bench_cfg c = preset_base();
		c.le.flush_ms = ms[i];
		add_point(name, T_LE, &c, "flush_ms=%u", ms[i]);
	}
}

/* Write-behind has no knob of its own: the writer always pwrite()s into
 * the page cache and lets the kernel write back; what turns write-behind
 * off is syncing: durability BATCH waits for fdatasync after every
 * batch. */
static void p_write_behind(const char *name)
{
	static const struct {
		int d;
		const char *label;
	} d[] = {
		{LE_SYNC_NONE, "write-behind (durability none)"},
		{LE_SYNC_INTERVAL, "write-behind + fdatasync every 1 s"},
		{LE_SYNC_BATCH, "write-through (fdatasync every batch)"},
	};
	for (int i = 0; i < 3; i++) {
		struct bench_cfg c = preset_base();
		c.le.durability = d[i].d;
		add_point(name, T_LE, &c, "%s", d[i].label);
	}
}

static void p_direct(const char *name)
{
	for (int i = 0; i < 2; i++) {
		struct bench_cfg c = preset_base();
		c.le.direct_io = i;
		add_point(name, T_LE, &c, "direct_io=%s", i ? "on" : "off");
	}
}

/* The queue as a shared file mapping (records survive kill -9) against
 * process memory: what crash safety costs on the hot path. */
static void p_mapped(const char *name)
{
	for (int i = 1; i >= 0; i--) {
		struct bench_cfg c = preset_base();
		c.le.mapped_queue = i;
		add_point(name, T_LE, &c, "mapped_queue=%s",
		          i ? "on (file)" : "off (memory)");
	}
}

/* The ring behind the queue is sized for queue_capacity_bytes (every byte
 * could be queued in one shard), so this knob sets how much memory the
 * producers walk through: page faults on the first lap, TLB and cache
 * misses after.  8,192 records of 128 B need 1 MiB. */
static void p_queue_bytes(const char *name)
{
	static const uint32_t mb[] = {1, 4, 16};
	for (int i = 0; i < 3; i++) {
		struct bench_cfg c = preset_base();
		c.le.queue_capacity_bytes = (uint64_t)mb[i] << 20;
		add_point(name, T_LE, &c, "queue_capacity_bytes=%u MiB", mb[i]);
	}
}

static void p_overflow(const char *name)
{
	for (int i = 0; i < 2; i++) {
		struct bench_cfg c = preset_base();
		c.le.overflow = i ? LE_OVERFLOW_DROP : LE_OVERFLOW_BLOCK;
		add_point(name, T_LE, &c, "overflow=%s", i ? "drop" : "block");
	}
}

const struct preset presets[] = {
	{"compare", IN_QUICK, p_compare,
	 "the judged run: all competitors, raw payloads"},
	{"formatted", IN_QUICK, p_formatted,
	 "\"" BENCH_FMT "\": le_logf vs spdlog vs glog vs snprintf+write"},
	{"deferred", IN_QUICK, p_deferred,
	 "\"" BENCH_FMT "\": le_info deferred vs le_logf vs spdlog vs glog, "
	 "not timed, then timed in bursts of 20"},
	{"kv", IN_QUICK, p_kv,
	 "three values: le_info_kv with fields a, b (int64), d (double) vs "
	 "spdlog info(\"{} {} {}\")"},
	{"payload", IN_SCAN, p_payload, "payload 128/512/4096 B, all"},
	{"threads", IN_SCAN, p_threads, "producers 1/2/4, all"},
	{"producers", IN_SCAN, p_producers,
	 "producers 1/2/4/8 x shards 1/2, logengine, untimed then timed"},
	{"threads-fmt", IN_SCAN, p_threads_fmt,
	 "formatted, producers 2/4, all"},
	{"batch", IN_SCAN, p_batch, "batch_size 64/256/1024/2048"},
	{"inflight", IN_SCAN, p_inflight,
	 "batches the queue holds: 16/64/256"},
	{"checkpoint", IN_SCAN, p_checkpoint, "checkpoint off/1000/10/1 ms"},
	{"fields", IN_SCAN, p_fields, "record fields on/off"},
	{"shards", IN_SCAN, p_shards, "shards 1/2/4 x route keys 0/4/16"},
	{"pending", IN_SCAN, p_pending, "max_pending_bytes 16 KiB..4 MiB"},
	{"flush-ms", IN_SCAN, p_flush_ms, "flush_ms 1/10/50/200"},
	{"write-behind", IN_SCAN, p_write_behind,
	 "durability none/interval/batch"},
	{"direct-io", IN_SCAN, p_direct, "O_DIRECT off/on"},
	{"mapped-queue", IN_SCAN, p_mapped,
	 "queue in a shared file (survives kill -9) vs process memory"},
	{"queue-bytes", IN_SCAN, p_queue_bytes,
	 "queue_capacity_bytes 1/4/16 MiB (ring size)"},
	{"overflow", IN_SCAN, p_overflow, "queue full: block/drop"},
	{"custom", IN_CUSTOM, p_custom, "the knobs given on the command line"},
	{"soak", IN_QUICK, NULL, "a long run: figures per interval"},
};
const size_t npresets = sizeof presets / sizeof presets[0];

static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

int preset_selected(const struct preset *p)
{
	if (O.only)
		return in_list(O.only, p->name);
	if (O.custom)
		return p->in == IN_CUSTOM;
	if (p->in & IN_QUICK)
		return 1;
	return (p->in & IN_SCAN) && O.mode >= 1;
}

unsigned parse_targets(const char *list)
{
	unsigned t = 0;
	for (int i = 0; i < NCOMP; i++)
		if (in_list(list, comps[i]->name) ||
		    (i == 0 && in_list(list, "le")))
			t |= 1u << i;
	if (!t) {
		fprintf(stderr, "bench: no known target in \"%s\"\n", list);
		exit(2);
	}
	return t;
}

