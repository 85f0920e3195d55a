/*
 * frame.h -- the dashboard's once-a-second frame (serve's /events), built
 * from the live set only: each directory's live pages (one per shard of
 * the running engine) and the records written since the last frame,
 * followed with le_tail from where the last frame stopped.  Nothing in a
 * frame is listed, copied or sorted from history: its bytes and its cost
 * follow the shards that run and the records of the last second (capped),
 * never the segments kept.
 *
 * Frame (one JSON object; arrays, not objects, per shard and record, to
 * keep it light):
 *   {"seq":N,"t":MS,"dirs":[{"dir":"PATH","state":"running","pid":P,
 *     "queue":[records,bytes,capacity,capacity_bytes],
 *     "shards":[[shard,state,accepted,written,dropped,bytes_written,
 *                ring_bytes,ring_size,segments,disk_bytes,
 *                write_p50_ns,write_p99_ns,fsync_p50_ns,fsync_p99_ns,
 *                failing],...]},...],
 *     "levels":[trace,debug,info,warn,error,fatal]},...],
 *    "tail":[[dir,shard,seq,ts_ms,level,flags,"message","logger",
 *             {fields}],...],
 *    "skipped":N, ...serve's own fields}
 * state: 0 none, 1 running, 2 stale, 3 stopped (closed), 4 dead.
 * levels: records the engine's writers took, by level (all shards).
 * logger: "" for the root; fields: the record's fields as an object
 * (the logger among them), {} without, null when above TAIL_FIELDS.
 *
 * History (GET /history.json): each frame also leaves a sample of every
 * directory in a ring of HIST_N, the last HIST_KEEP_S seconds, so that a
 * page opened now starts with them.  Its memory is fixed at start:
 * HIST_N x (1 + HIST_WORDS x directories) words.
 *   {"interval_ms":1000,"keep_s":900,"fields":[...HIST_WORDS names],
 *    "dirs":["PATH",...],"samples":[[t_ms,[words of dir 0],...],...]}
 * oldest first; the counters are cumulative (the page takes rates).
 */
#ifndef LE_TOOLS_FRAME_H
#define LE_TOOLS_FRAME_H

#include "livedir.h"

#define TAIL_RING 256        /* newest records kept for GET /tail */
#define TAIL_MSG 240         /* bytes of a message kept */
#define TAIL_PER_SHARD 64    /* records read per shard per frame */
#define TAIL_PER_FRAME 64    /* newest records a frame carries */
#define TAIL_LOGGER 64       /* bytes of a logger name kept */
#define TAIL_FIELDS 768      /* bytes of a record's fields as JSON kept */

#define HIST_INTERVAL_MS 1000 /* a sample a frame */
#define HIST_KEEP_S 900       /* 15 minutes */
#define HIST_N (HIST_KEEP_S * 1000 / HIST_INTERVAL_MS)
/* A directory's words in a sample: written, bytes_written, dropped,
 * queue_records, write_p99_ns (the slowest shard's), errors (records
 * of level error and fatal). */
#define HIST_WORDS 6

struct tail_rec {
	uint16_t dir, shard;
	int8_t level;
	uint8_t flags;
	uint16_t len;
	uint8_t logger_len;
	int16_t fields_len;   /* -1: above TAIL_FIELDS */
	uint64_t seq, ts_ns;
	char msg[TAIL_MSG];
	char logger[TAIL_LOGGER];
	char fields[TAIL_FIELDS]; /* a JSON object */
};

struct tail_pos {
	uint64_t seg, off;
	uint64_t engine;     /* started_ns of the engine followed */
	int known, behind;
};

struct frame_dir {
	struct live_dir live;
	struct tail_pos *pos; /* [LIVE_MAX_SHARDS] */
};

struct frames {
	struct frame_dir *dirs;
	int ndirs;
	uint64_t seq;            /* frames built */
	uint64_t skipped;        /* records a tail that fell behind jumped */
	struct tail_rec ring[TAIL_RING];
	unsigned ring_head, ring_n; /* oldest at ring_head */
	unsigned fresh;          /* of the newest, added by this frame */
	uint64_t *hist;          /* [HIST_N][1 + ndirs * HIST_WORDS] */
	unsigned hist_head, hist_n; /* oldest at hist_head */
	char scratch[LE_FIELDS_TEXT_MAX(TAIL_FIELDS)]; /* fields as text */
};

int frames_init(struct frames *f, char **dirs, int ndirs);
void frames_free(struct frames *f);

/* Read the live pages and tails, and write the frame into out; extra
 * (may be NULL) is more JSON members, written before the closing brace. */
void frames_build(struct frames *f, struct buf *out, const char *extra);

/* The ring (oldest first) as {"tail":[...]}; with logger (not NULL),
 * only the records of that logger and of its children ("net" takes
 * "net" and "net.http"; "" the root logger's alone). */
void frames_tail_json(const struct frames *f, struct buf *out,
                      const char *logger);

/* The history ring as JSON (above). */
void frames_history_json(const struct frames *f, struct buf *out);

#endif
