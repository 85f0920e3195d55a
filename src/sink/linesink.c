/*
 * linesink.c -- the part of a line output that does not depend on its
 * kind (linesink.h): the thread's start and stop, the buffer's memory,
 * and the shard writers' ports.
 *
 * A port's stage holds its batch's records formatted, each after a u32
 * length word (LE_LINE_MARK: a marker); commit hands the whole stage to
 * the kind's push under mu, once per batch, so the output's thread takes
 * the lock once per batch and shard, not once per record.
 */
#define _GNU_SOURCE
#include "sink/linesink.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/internal.h"
#include "base/os.h"

void le__linesink_init(le__linesink *ls, const le__linekind *kind)
{
	pthread_condattr_t ca;

	ls->kind = kind;
	pthread_mutex_init(&ls->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ls->cv, &ca);
	pthread_condattr_destroy(&ca);
}

int le__linesink_start(le__linesink *ls, size_t cap, size_t stage_cap,
                       const char *what)
{
	char name[32];
	sigset_t all, old;

	ls->cap = cap;
	ls->stage_cap = stage_cap;
	ls->ring = malloc(cap);
	if (!ls->ring)
		return LE_ENOMEM;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = -pthread_create(&ls->thread, NULL, ls->kind->main, ls);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		le__seterr("%s: cannot start the %s thread", what,
		           ls->kind->name);
		return rc;
	}
	snprintf(name, sizeof name, "le-%s", ls->kind->name);
	le__name_thread(ls->thread, name);
	ls->started = 1;
	return 0;
}

void le__linesink_stop(le__linesink *ls)
{
	if (!ls || !ls->started)
		return;
	pthread_mutex_lock(&ls->mu);
	ls->stop = 1;
	/* A reader that keeps up gets everything; a stalled or dead one
	 * gets a second, then the rest is dropped and counted:
	 * le_close_stats reports it. */
	ls->stop_deadline = le__mono_ns() + 1000000000u;
	pthread_cond_broadcast(&ls->cv);
	pthread_mutex_unlock(&ls->mu);
	pthread_join(ls->thread, NULL);
	ls->started = 0;
	if (ls->kind->stopped)
		ls->kind->stopped(ls);
}

void le__linesink_forget(le__linesink *ls)
{
	if (!ls)
		return;
	free(ls->ring);
	ls->kind->forget(ls);
}

void le__linesink_close(le__linesink *ls)
{
	if (!ls)
		return;
	le__linesink_stop(ls);
	pthread_mutex_destroy(&ls->mu);
	pthread_cond_destroy(&ls->cv);
	le__linesink_forget(ls);
}

void le__linesink_wait(le__linesink *ls, long ms)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += ms * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&ls->cv, &ls->mu, &t);
}

void le__linesink_put(le__linesink *ls, const void *p, size_t n)
{
	size_t at = (ls->head + ls->len) % ls->cap, first = ls->cap - at;
	if (first > n)
		first = n;
	memcpy(ls->ring + at, p, first);
	memcpy(ls->ring, (const char *)p + first, n - first);
	ls->len += n;
	ls->put_bytes += n;
}

/* ---- a shard writer's port ---- */

typedef struct port {
	le__sink sink;
	le__linesink *ls;
	uint32_t shard;
	unsigned char *stage;    /* lines, each after a u32 length word */
	size_t len, cap;
	size_t n, max;           /* lines staged; at most */
	uint64_t dropped;        /* records whose line did not fit */
	unsigned char *plain;    /* a deferred record's text (le__rec_plain) */
	size_t plain_cap;
} port;

/* Format each record's line into the stage; a line that does not fit is
 * dropped and counted there.  Takes every record. */
static size_t port_put(le__sink *sk, const le__rec *r, size_t n)
{
	port *p = (port *)sk;
	const le__linekind *k = p->ls->kind;

	for (size_t i = 0; i < n; i++) {
		le__rec x;
		le__rec_plain(&r[i], &x, p->plain, p->plain_cap);
		size_t need = k->line_max(p->ls, x.len) + 4;
		if (p->n == p->max || p->cap - p->len < need) {
			p->dropped += !(x.flags & LE_REC_MARKER);
			continue;
		}
		size_t len = k->format(p->ls, p->stage + p->len + 4,
		                       p->cap - p->len - 4, p->shard, &x);
		uint32_t v = (uint32_t)len |
		             ((x.flags & LE_REC_MARKER) ? LE_LINE_MARK : 0);
		memcpy(p->stage + p->len, &v, 4);
		p->len += 4 + len;
		p->n++;
	}
	return n;
}

/* Hand the stage's lines to the output.  Never fails: what finds no room
 * is dropped and counted. */
static int port_commit(le__sink *sk)
{
	port *p = (port *)sk;
	le__linesink *ls = p->ls;

	if (p->n || p->dropped) {
		pthread_mutex_lock(&ls->mu);
		ls->kind->push(ls, p->stage, p->len, p->n, p->dropped);
		pthread_mutex_unlock(&ls->mu);
	}
	p->n = p->len = 0;
	p->dropped = 0;
	return 0;
}

static void port_drop(le__sink *sk, uint64_t unseen)
{
	((port *)sk)->dropped += unseen;
	port_commit(sk);
}

static void port_close(le__sink *sk)
{
	port_commit(sk);
}

static void port_free(le__sink *sk)
{
	port *p = (port *)sk;

	if (!p)
		return;
	free(p->stage);
	free(p->plain);
	free(p);
}

static const le__sink_ops port_ops = {
	.put = port_put,
	.commit = port_commit,
	.drop = port_drop,
	.close = port_close,
	.free = port_free,
};

int le__linesink_port(le__sink **out, le__linesink *ls, uint32_t shard,
                      uint32_t batch, uint32_t max_rec)
{
	port *p = calloc(1, sizeof *p);

	*out = NULL;
	if (!p)
		return LE_ENOMEM;
	p->sink.ops = &port_ops;
	p->ls = ls;
	p->shard = shard;
	/* A batch's lines: its records (and a marker), each up to
	 * max_pending_bytes of payload in all, with their length words. */
	p->max = (size_t)batch + 64;
	p->cap = ls->stage_cap + p->max * 4;
	p->stage = malloc(p->cap);
	p->plain_cap = (size_t)max_rec + 1;
	p->plain = malloc(p->plain_cap);
	if (!p->stage || !p->plain) {
		port_free(&p->sink);
		return LE_ENOMEM;
	}
	*out = &p->sink;
	return 0;
}
