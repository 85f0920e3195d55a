/*
 * config.c -- le_config's defaults, what a 0 stands for, and the checks
 * le_open makes before it touches anything: every refusal names its
 * field in le_errmsg.
 */
#define _GNU_SOURCE
#include "engine/config.h"

#include <fcntl.h>
#include <string.h>

#include "record/format.h"
#include "base/internal.h"
#include "queue/queue.h"
#include "store/seg_zst.h"
#include "store/segment.h"
#include "queue/sites.h"

void le__config_defaults(le_config *c)
{
	memset(c, 0, sizeof *c);
	c->shards = 1;
	c->queue_capacity = 8192;
	c->queue_capacity_bytes = 1u << 20;
	c->max_record_bytes = 64u << 10;
	c->overflow = LE_OVERFLOW_DROP;
	c->oversize = LE_OVERSIZE_TRUNCATE;
	c->fields = LE_FIELD_ALL;
	c->segment_bytes = 64u << 20;
	c->batch_size = 0; /* le_open: 2048, or less for a small queue */
	c->flush_ms = 50;
	c->max_pending_bytes = 1u << 20;
	c->durability = LE_SYNC_INTERVAL;
	c->sync_ms = 1000;
	c->checkpoint_ms = 1000;
	c->mapped_queue = 1;
	c->store = 1;
	c->stream_buffer_bytes = 1u << 20;
	c->retention_unshipped_bytes = 1ull << 30;
	/* The settings for levels, loggers, stream_path and syslog
	 * default to 0, which means their default (le__config_zeros): an older
	 * library, which cannot read them, accepts them only as zeros
	 * (abi.c). */
}

/* What a 0 stands for in the settings whose default is not 0. */
void le__config_zeros(le_config *c)
{
	if (!c->max_loggers)
		c->max_loggers = 64;
	if (!c->syslog_facility)
		c->syslog_facility = 1; /* user-level */
	if (!c->syslog_buffer_bytes)
		c->syslog_buffer_bytes = 1u << 20;
	if (!c->file_mode)
		c->file_mode = 0640;
	if (!c->dir_mode)
		c->dir_mode = 0750;
	if (!c->deferred_sites)
		c->deferred_sites = 4096;
	if (!c->archive_level)
		c->archive_level = LE_ZST_LEVEL_DEFAULT;
}

#define BAD(...)                                                              \
	do {                                                                  \
		le__seterr(__VA_ARGS__);                                      \
		return LE_EINVAL;                                             \
	} while (0)

/* A batch holds at most a quarter of the queue, so producers keep room
 * while it is written (at the whole queue, each write would stall every
 * producer). */
static uint32_t batch_max(const le_config *c)
{
	return c->queue_capacity / 4 ? c->queue_capacity / 4 : 1;
}

/* batch_size 0: 2048, or the most a small queue allows. */
uint32_t le__config_batch(const le_config *c)
{
	if (c->batch_size)
		return c->batch_size;
	return batch_max(c) < 2048 ? batch_max(c) : 2048;
}

/* The settings of the level macros, the stream's path and syslog. */
static int check_outputs(const le_config *c)
{
	if (c->file_mode && (c->file_mode > 0777 || (c->file_mode & 0600) != 0600))
		BAD("file_mode: %#o must be within 0777 and include 0600 "
		    "(0: 0640)", c->file_mode);
	if (c->dir_mode && (c->dir_mode > 0777 || (c->dir_mode & 0700) != 0700))
		BAD("dir_mode: %#o must be within 0777 and include 0700 "
		    "(0: 0750)", c->dir_mode);
	if (c->max_loggers > 65536)
		BAD("max_loggers: %u is above 65536", c->max_loggers);
	if (c->source_location != 0 && c->source_location != 1)
		BAD("source_location: %d is neither 0 nor 1", c->source_location);
	if (c->stream_path && c->stream_fd)
		BAD("stream_path: set with stream_fd %d (one or the other)",
		    c->stream_fd);
	if (c->stream_path && !c->stream_path[0])
		BAD("stream_path: empty (NULL means none)");
	if (!c->syslog_addr)
		return 0;
	if (c->syslog_facility < 0 || c->syslog_facility > 23)
		BAD("syslog_facility: %d is not between 1 and 23 (0: user)",
		    c->syslog_facility);
	if (c->syslog_buffer_bytes &&
	    (c->syslog_buffer_bytes < 65536 ||
	     c->syslog_buffer_bytes > (1u << 30)))
		BAD("syslog_buffer_bytes: %u is not between 65536 and 2^30",
		    c->syslog_buffer_bytes);
	return 0;
}

int le__config_check(const le_config *c)
{
	int has_stream = c->stream_fd > 0 || c->stream_path;

	if (check_outputs(c) < 0)
		return LE_EINVAL;
	if (c->store != 0 && c->store != 1)
		BAD("store: %d is neither 0 nor 1", c->store);
	if (!c->store && !has_stream && !c->syslog_addr)
		BAD("store: 0 needs a stream_fd, a stream_path or a syslog_addr "
		    "(records must go somewhere)");
	if (c->stream_fd < 0)
		BAD("stream_fd: %d is not a descriptor (0 means none)",
		    c->stream_fd);
	if (c->stream_format < LE_STREAM_RAW || c->stream_format > LE_STREAM_JSON)
		BAD("stream_format: %d is not LE_STREAM_RAW, _TEXT or _JSON",
		    c->stream_format);
	if (has_stream &&
	    (c->stream_buffer_bytes < 4096 || c->stream_buffer_bytes > (1u << 30)))
		BAD("stream_buffer_bytes: %u is not between 4096 and 2^30",
		    c->stream_buffer_bytes);
	if (c->stream_fd > 0 && fcntl(c->stream_fd, F_GETFL) < 0)
		BAD("stream_fd: %d is not an open descriptor", c->stream_fd);
	/* Only the directory is the store's: shards, the queue and the
	 * writer's batch are the same without it, and checked the same. */
	if (c->store && (!c->dir || !c->dir[0]))
		BAD("dir: must name a directory");
	if (c->store && strlen(c->dir) > LE_PATH_MAX - 64)
		BAD("dir: path longer than %d bytes", LE_PATH_MAX - 64);
	if (c->shards < 1 || c->shards > LE_MAX_SHARDS)
		BAD("shards: %u is not between 1 and %d", c->shards,
		    LE_MAX_SHARDS);
	if (c->queue_capacity < 1 || c->queue_capacity > LE_QUEUE_CAP_MAX)
		BAD("queue_capacity: %u is not between 1 and %u",
		    c->queue_capacity, LE_QUEUE_CAP_MAX);
	if (c->max_record_bytes < 1 ||
	    c->max_record_bytes > LE_MAX_RECORD_LIMIT)
		BAD("max_record_bytes: %u is not between 1 and %u",
		    c->max_record_bytes, LE_MAX_RECORD_LIMIT);
	if (c->queue_capacity_bytes < c->max_record_bytes ||
	    c->queue_capacity_bytes > LE_QUEUE_BYTES_MAX)
		BAD("queue_capacity_bytes: %llu is not between max_record_bytes"
		    " (%u) and %llu",
		    (unsigned long long)c->queue_capacity_bytes,
		    c->max_record_bytes, (unsigned long long)LE_QUEUE_BYTES_MAX);
	if (c->overflow != LE_OVERFLOW_DROP && c->overflow != LE_OVERFLOW_BLOCK)
		BAD("overflow: %d is neither LE_OVERFLOW_DROP nor "
		    "LE_OVERFLOW_BLOCK", c->overflow);
	if (c->oversize != LE_OVERSIZE_TRUNCATE &&
	    c->oversize != LE_OVERSIZE_REJECT)
		BAD("oversize: %d is neither LE_OVERSIZE_TRUNCATE nor "
		    "LE_OVERSIZE_REJECT", c->oversize);
	if (c->fields & ~LE_FIELD_ALL)
		BAD("fields: unknown bits 0x%x", c->fields & ~LE_FIELD_ALL);
	if (c->segment_bytes < 4096)
		BAD("segment_bytes: %llu is below 4096",
		    (unsigned long long)c->segment_bytes);
	if (c->batch_size > batch_max(c))
		BAD("batch_size: %u is above queue_capacity / 4 (%u): a batch "
		    "holds at most a quarter of the queue, so producers keep "
		    "room while it is written", c->batch_size, batch_max(c));
	if (c->flush_ms < 1 || c->flush_ms > 60000)
		BAD("flush_ms: %u is not between 1 and 60000", c->flush_ms);
	if (c->max_pending_bytes < 4096 || c->max_pending_bytes > (1u << 30))
		BAD("max_pending_bytes: %u is not between 4096 and 2^30",
		    c->max_pending_bytes);
	if (c->durability < LE_SYNC_NONE || c->durability > LE_SYNC_BATCH)
		BAD("durability: %d is not LE_SYNC_NONE, _INTERVAL or _BATCH",
		    c->durability);
	if (c->durability == LE_SYNC_INTERVAL && c->sync_ms < 1)
		BAD("sync_ms: must be at least 1 with LE_SYNC_INTERVAL");
	if (c->direct_io != 0 && c->direct_io != 1)
		BAD("direct_io: %d is neither 0 nor 1", c->direct_io);
	if (c->crash_flush_ms > 60000)
		BAD("crash_flush_ms: %u is above 60000", c->crash_flush_ms);
	if (c->mapped_queue != 0 && c->mapped_queue != 1)
		BAD("mapped_queue: %d is neither 0 nor 1", c->mapped_queue);
	if (c->create_dir != 0 && c->create_dir != 1)
		BAD("create_dir: %d is neither 0 nor 1", c->create_dir);
	if (c->queue_checksum > 1)
		BAD("queue_checksum: %u is neither 0 nor 1", c->queue_checksum);
	if (c->deferred_sites > LE_SITES_MAX &&
	    c->deferred_sites != LE_DEFERRED_OFF)
		BAD("deferred_sites: %u is not between 1 and %u (or "
		    "LE_DEFERRED_OFF)", c->deferred_sites, LE_SITES_MAX);
	if (c->archive_level < 0 || c->archive_level > LE_ZST_LEVEL_MAX)
		BAD("archive_level: %d is not between 1 and %d (or 0: %d)",
		    c->archive_level, LE_ZST_LEVEL_MAX, LE_ZST_LEVEL_DEFAULT);
	/* both become nanoseconds: no wrap to a small age */
	if (c->retention_age_ms > UINT64_MAX / 1000000u)
		BAD("retention_age_ms: %llu is above %llu",
		    (unsigned long long)c->retention_age_ms,
		    (unsigned long long)(UINT64_MAX / 1000000u));
	if (c->archive_after_ms > UINT64_MAX / 1000000u)
		BAD("archive_after_ms: %llu is above %llu",
		    (unsigned long long)c->archive_after_ms,
		    (unsigned long long)(UINT64_MAX / 1000000u));
	if ((c->archive_keep_segments || c->archive_after_ms) &&
	    !le__zst_built())
		BAD("%s: this build of logengine has no zstd (libzstd), so "
		    "it cannot archive segments", c->archive_keep_segments
		    ? "archive_keep_segments" : "archive_after_ms");
	/* the flight recorder (backtrace.c) */
	if (c->backtrace_records > (1u << 24))
		BAD("backtrace_records: %u is above %u", c->backtrace_records,
		    1u << 24);
	if (c->backtrace_trigger < 0 || c->backtrace_trigger > LE_OFF)
		BAD("backtrace_trigger: %d is not a level LE_DEBUG..LE_OFF "
		    "(or 0: LE_ERROR)", c->backtrace_trigger);
	return 0;
}
