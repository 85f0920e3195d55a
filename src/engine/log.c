/*
 * log.c -- what the level macros call once a record passed its threshold
 * (logengine.h, "Internal"), and le_logf_kv.
 *
 * The seam: le_log_at and le_log_kv_at are the only functions the
 * macros call.  They gather the record's fields (the logger's name, the
 * caller's, the call site's) and hand the format and its arguments to the
 * hot path (submit.c), which formats them into the queue slot now.
 * The deferred form, le_logd_at, is in submit.c, beside the hot path it
 * is one call of.
 */
#include "engine/shard.h"
#include "record/fields.h"
#include "engine/logger.h"
#include "engine/dflt.h"
#include "engine/backtrace.h"

/* The engine of a macro's first argument; a named logger's name goes
 * first among the fields. */
static le_engine *target(struct le__head *h, le__fieldset *fs)
{
	if (h->kind == 0)
		return (le_engine *)(void *)h; /* le_engine's first member */
	le_logger *lg = (le_logger *)(void *)h;
	fs->pre = lg->field;
	fs->pre_len = lg->field_len;
	return lg->e;
}

static int submit(struct le__head *h, const le__site *site, const le_field *f,
                  size_t n, const char *fmt, va_list ap)
{
	le__fieldset fs = {.f = f, .n = n};

	if (!h)
		h = le__head_or_default(h); /* dflt.c */
	if (!h || !site || n > LE_FIELDS_MAX || (n && !f))
		return LE_EINVAL;
	le_engine *e = target(h, &fs);
	if (e->cfg.source_location)
		fs.site = site;
	int any = fs.pre_len || fs.n || fs.site;
	if (__builtin_expect(__atomic_load_n(&h->level, __ATOMIC_RELAXED) <
	                     __atomic_load_n(&h->keep, __ATOMIC_RELAXED), 0)) {
		/* a logger with a flight recorder (backtrace.c) */
		if (site->level < __atomic_load_n(&h->keep, __ATOMIC_RELAXED))
			return le__bt_keepf(e, h, site->level,
			                    any ? &fs : NULL, fmt, ap);
		if (site->level >= e->bt_trigger)
			le__bt_trigger(e, h);
	}
	return le__submitf(e, site->level, any ? &fs : NULL, fmt, ap);
}

int le_log_at(struct le__head *h, const le__site *site, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = submit(h, site, NULL, 0, fmt, ap);
	va_end(ap);
	return rc;
}

int le_log_kv_at(struct le__head *h, const le__site *site,
                  const le_field *f, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = submit(h, site, f, n, fmt, ap);
	va_end(ap);
	return rc;
}

int le_logf_kv(le_engine *e, int level, const le_field *f, size_t n,
               const char *fmt, ...)
{
	le__fieldset fs = {.f = f, .n = n};
	va_list ap;

	if (n > LE_FIELDS_MAX || (n && !f))
		return LE_EINVAL;
	va_start(ap, fmt);
	int rc = le__submitf(e, level, n ? &fs : NULL, fmt, ap);
	va_end(ap);
	return rc;
}
