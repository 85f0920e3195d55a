/*
 * retention.h -- a shard's sealed segments, oldest first, and what is
 * done with them (retention.c): compressed past archive_keep_segments or
 * archive_after_ms, deleted past retention_bytes or retention_age_ms.
 *
 * The list is the shard's writer's ([writer]); the store (store.h) holds
 * one and passes what retention works with in a le__retain_env, so that
 * retention needs nothing else of the store.
 */
#ifndef LE_RETENTION_H
#define LE_RETENTION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "logengine.h"

struct le__archiver;
struct le__reaper;

/* Where a sealed segment is in its archiving (le__segmeta.arc). */
enum { LE_ARC_PLAIN, LE_ARC_QUEUED, LE_ARC_DONE, LE_ARC_NEVER };

typedef struct le__segmeta {
	uint64_t index;
	uint64_t bytes;              /* on disk: its archive's once archived */
	uint64_t mtime_ns;           /* last written (retention_age_ms,
	                                archive_after_ms); 0: unknown, never
	                                too old */
	int arc;                     /* LE_ARC_*: plain, queued, archived */
} le__segmeta;

/* [writer] The sealed segments, oldest first (the active one is not in
 * it); segs_bytes is the sum of their bytes.  Its address is how the
 * reaper and the archiver tell this shard's work from another's. */
typedef struct le__seglist {
	le__segmeta *segs;
	size_t nsegs, segs_cap;
	uint64_t segs_bytes;
} le__seglist;

/* What retention reads and adds to, all the shard's: valid for the call. */
typedef struct le__retain_env {
	const le_config *cfg;
	const char *dir;                  /* DIR/shard-NNN */
	struct le__reaper *reaper;        /* the unlinks; may not run */
	struct le__archiver *archiver;    /* the compression; may be NULL */
	_Atomic int *last_error;          /* an unlink's error, if it fails */
	_Atomic uint64_t *segments_deleted;
	_Atomic uint64_t *lost_unshipped; /* unshipped, deleted past the
	                                     margin */
} le__retain_env;

/* Append (index, bytes) to s, newest: its mtime and whether it is
 * archived read from disk when an age or archiving is configured.
 * @return 0 or LE_ENOMEM (s unchanged). */
int le__seglist_add(le__seglist *s, const le__retain_env *e, uint64_t index,
                   uint64_t bytes);

/* Hand the archiver the sealed segments past archive_keep_segments or
 * archive_after_ms; delete the oldest sealed segments while the shard,
 * with active_bytes in its active segment, is over retention_bytes, or
 * while the oldest was last written more than retention_age_ms ago. */
void le__retention(le__seglist *s, const le__retain_env *e,
                   uint64_t active_bytes);

#endif
