/*
 * lifecycle.c -- what happens to open engines around fork() and crashes.
 *
 * Registry.  Open engines are listed in a small fixed table (le_open adds,
 * le_close removes, under a mutex; the signal handler and the fork child
 * read it without one: slots are atomic pointers).
 *
 * fork().  Only the calling thread survives in the child, so the child's
 * copy of an engine has no writer threads and its queue memory is either
 * a private copy (anonymous) or the parent's live ring (shared mapping).
 * Either way a child record would be lost or would corrupt the parent's
 * queue, so the child's copies are closed at the fork: le_write and le_logf
 * return LE_ECLOSED there, and le_close only releases the child's memory
 * and descriptors (the parent's lock, files and threads are untouched).
 * A child that wants to log opens its own directory.
 *
 * Crash handler (opt-in, le_config.crash_flush_ms > 0).  On SIGSEGV,
 * SIGBUS, SIGABRT, SIGFPE or SIGILL the handler asks every writer to write
 * what is queued and waits at most crash_flush_ms for it, using only
 * async-signal-safe operations (atomics, futex, clock_gettime).  Then it
 * chains: the handler that was installed before ours runs, or the default
 * action is restored and the signal re-raised.  (With the mapped queue the
 * records survive the crash anyway; the flush puts them in the segment
 * files now instead of at the next le_open.)
 */
#define _GNU_SOURCE
#include "engine/lifecycle.h"
#include "engine/shard.h"
#include "engine/backtrace.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define MAX_ENGINES 64

static _Atomic(le_engine *) engines[MAX_ENGINES];
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void in_child(void)
{
	for (int i = 0; i < MAX_ENGINES; i++) {
		le_engine *e = atomic_load(&engines[i]);
		if (e) {
			atomic_store(&e->closing, 1);
			e->forked = 1;
		}
	}
}

static void setup_fork(void)
{
	pthread_atfork(NULL, NULL, in_child);
}

int le__register(le_engine *e)
{
	pthread_once(&fork_once, setup_fork);
	pthread_mutex_lock(&reg_mu);
	for (int i = 0; i < MAX_ENGINES; i++) {
		if (!atomic_load(&engines[i])) {
			atomic_store(&engines[i], e);
			pthread_mutex_unlock(&reg_mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&reg_mu);
	le__seterr("le_open: more than %d engines open in one process",
	           MAX_ENGINES);
	return LE_EINVAL;
}

void le__unregister(le_engine *e)
{
	pthread_mutex_lock(&reg_mu);
	for (int i = 0; i < MAX_ENGINES; i++)
		if (atomic_load(&engines[i]) == e)
			atomic_store(&engines[i], NULL);
	pthread_mutex_unlock(&reg_mu);
}

/* ---- crash handler ---- */

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE,
                                    SIGILL};
#define NSIG_CRASH (int)(sizeof crash_signals / sizeof crash_signals[0])
static struct sigaction previous[NSIG_CRASH];
static int installed;
static _Atomic int in_handler;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Async-signal-safe: ask each writer to write everything up to head and
 * wait, bounded, for done_pos to get there. */
static void flush_for_crash(le_engine *e)
{
	uint64_t deadline = mono_ns() + (uint64_t)e->cfg.crash_flush_ms * 1000000u;

	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		uint64_t target = atomic_load(sh->ring.head);
		uint64_t cur = atomic_load(&sh->prog.flush_req);
		while (cur < target &&
		       !atomic_compare_exchange_weak(&sh->prog.flush_req, &cur,
		                                     target))
			;
		le__wake_after(sh);
	}
	for (uint32_t i = 0; i < e->nshards; i++) {
		le__shard *sh = &e->shards[i];
		uint64_t target = atomic_load(&sh->prog.flush_req);
		while (atomic_load(&sh->prog.done_pos) < target &&
		       mono_ns() < deadline) {
			struct timespec ts = {0, 200000};
			nanosleep(&ts, NULL);
		}
	}
}

static void on_crash(int sig, siginfo_t *info, void *uctx)
{
	int k = 0;
	while (k < NSIG_CRASH && crash_signals[k] != sig)
		k++;
	/* A crash inside the handler, or in two threads at once: only the
	 * first flushes. */
	if (!atomic_exchange(&in_handler, 1)) {
		for (int i = 0; i < MAX_ENGINES; i++) {
			le_engine *e = atomic_load(&engines[i]);
			if (e && e->cfg.crash_flush_ms && !e->forked &&
			    !atomic_load(&e->stopping)) {
				le__bt_crash(e, sig); /* backtrace.c */
				flush_for_crash(e);
			}
		}
	}
	struct sigaction *old = &previous[k < NSIG_CRASH ? k : 0];
	if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
		old->sa_sigaction(sig, info, uctx);
		return;
	}
	if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN &&
	    !(old->sa_flags & SA_SIGINFO)) {
		old->sa_handler(sig);
		return;
	}
	/* Default action: put it back and let the signal happen again.  A
	 * fault re-executes the instruction and faults anew; a signal that
	 * was sent or raised is raised again. */
	sigaction(sig, old, NULL);
	if (info->si_code <= 0 || sig == SIGABRT)
		raise(sig);
}

int le__crash_install(void)
{
	pthread_mutex_lock(&reg_mu);
	if (!installed) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_crash;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		for (int k = 0; k < NSIG_CRASH; k++)
			sigaction(crash_signals[k], &sa, &previous[k]);
		installed = 1;
	}
	pthread_mutex_unlock(&reg_mu);
	return 0;
}
