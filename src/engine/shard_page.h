/*
 * shard_page.h -- a shard's live counters page (live/statpage.h) as the
 * engine keeps it: the engine gathers the counters the page publishes,
 * so the page never sees a shard or an engine.
 */
#ifndef LE_SHARD_PAGE_H
#define LE_SHARD_PAGE_H

#include <stdint.h>

struct le__shard;
struct le_engine;

/* In le_open's thread, before the shard's writer starts: make the page.
 * Best effort: without a page the engine runs as before.  @return 0; or
 * the error, and le_errmsg names the file, why, and that the page is off
 * (le_open still succeeds: the page is not the log). */
int le__shard_page_open(struct le__shard *sh);
/* At the writer thread's start: the first publication (running). */
void le__shard_page_start(struct le__shard *sh);
/* Publish now when a publication is due (the writer's periodic work). */
void le__shard_page_tick(struct le__shard *sh, uint64_t now_mono);
/* le_close, once the writers and the retention thread are joined: each
 * shard's last publication (closed). */
void le__shard_page_close_all(struct le_engine *e);

#endif
