/*
 * probs.h -- the problems a reader reports (le_reader_opts.on_problem),
 * kept for a test to check: the first T_MAX_PROBS with where each was,
 * and how many in all.
 *
 *   t_probs pr = {0};
 *   o.on_problem = t_probs_note;
 *   o.arg = &pr;
 *   ... CHECK(t_probs_has(&pr, "torn tail"));
 */
#ifndef LE_TEST_PROBS_H
#define LE_TEST_PROBS_H

#include "harness.h"

#define T_MAX_PROBS 64

typedef struct t_probs {
	int n;                       /* reported, kept or not */
	uint64_t off[T_MAX_PROBS];   /* where each kept one was */
	char what[T_MAX_PROBS][256]; /* what the reader said of it */
} t_probs;

/* An le_problem_fn; arg is a t_probs. */
static inline void t_probs_note(void *arg, const char *file, uint64_t off,
                                const char *what)
{
	t_probs *p = arg;
	(void)file;
	if (p->n < T_MAX_PROBS) {
		p->off[p->n] = off;
		snprintf(p->what[p->n], sizeof p->what[0], "%s", what);
	}
	p->n++;
}

/* Did a kept problem say s? */
static inline int t_probs_has(const t_probs *p, const char *s)
{
	for (int i = 0; i < p->n && i < T_MAX_PROBS; i++)
		if (strstr(p->what[i], s))
			return 1;
	return 0;
}

#endif
