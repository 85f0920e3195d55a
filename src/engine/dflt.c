/*
 * dflt.c -- the default engine: the one a NULL handle logs to.
 *
 * One atomic pointer.  le_set_default stores it (release), le_close of
 * that engine swaps it back to NULL (compare-exchange, so closing another
 * engine leaves it alone), and a logging call given NULL loads it
 * (acquire: the engine's fields, written by le_open before the store,
 * are visible to the thread that sees the pointer).  No lock: the level
 * macros reach here on a NULL handle, on the hot path.
 *
 * Without a default engine, a NULL handle meets the stand-in head below,
 * whose threshold is LE_OFF: a macro's test fails and nothing is called.
 */
#include "engine/dflt.h"

#include <stdatomic.h>

static _Atomic(le_engine *) dflt;

/* [const] kind 0 as an engine's, never cast to one: every function that
 * takes a head compares against it first (le__head_or_default). */
static struct le__head none = {LE_OFF, 0, LE_OFF};

int le_set_default(le_engine *e)
{
	atomic_store_explicit(&dflt, e, memory_order_release);
	return 0;
}

le_engine *le_get_default(void)
{
	return atomic_load_explicit(&dflt, memory_order_acquire);
}

le_engine *le__engine_or_default(le_engine *e)
{
	return e ? e : atomic_load_explicit(&dflt, memory_order_acquire);
}

/* The engine's head is its first member (logengine.h, "Internal"). */
struct le__head *le_default_head(void)
{
	le_engine *e = atomic_load_explicit(&dflt, memory_order_acquire);
	return e ? (struct le__head *)(void *)e : &none;
}

struct le__head *le__head_or_default(struct le__head *h)
{
	if (!h)
		h = le_default_head();
	return h == &none ? NULL : h;
}

void le__default_forget(le_engine *e)
{
	le_engine *cur = e;
	atomic_compare_exchange_strong_explicit(&dflt, &cur, NULL,
	                                        memory_order_acq_rel,
	                                        memory_order_acquire);
}
