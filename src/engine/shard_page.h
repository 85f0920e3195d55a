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

/* At the writer thread's start: make the page and publish it (running).
 * Best effort: without a page the engine runs as before. */
void le__shard_page_open(struct le__shard *sh);
/* Publish now when a publication is due (the writer's periodic work). */
void le__shard_page_tick(struct le__shard *sh, uint64_t now_mono);
/* le_close, once the writers and the retention thread are joined: each
 * shard's last publication (closed). */
void le__shard_page_close_all(struct le_engine *e);

#endif
