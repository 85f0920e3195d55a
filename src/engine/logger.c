/*
 * logger.c -- named loggers, thresholds, and the level settings of
 * le_config.levels and LOGENGINE_LEVEL (spdlog's syntax).
 *
 * A logger's threshold (its head.level, what the macros load) is derived:
 * its own level if it has one, else that of its nearest parent with one,
 * else the root's.  Whenever a level is set, every entry's threshold is
 * derived again under log_mu (entries <= max_loggers + 1: quadratic in a
 * small bound, and never on the hot path), so a macro never walks parents.
 */
#define _GNU_SOURCE
#include "engine/logger.h"
#include "engine/dflt.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/shard.h"
#include "record/fields.h"
#include "base/internal.h"

#define ROOT_DEFAULT LE_INFO

int le_level_parse(const char *s)
{
	static const struct {
		const char *name;
		int level;
	} names[] = {
		{"trace", LE_TRACE}, {"debug", LE_DEBUG},   {"info", LE_INFO},
		{"warn", LE_WARN},   {"warning", LE_WARN},  {"error", LE_ERROR},
		{"err", LE_ERROR},   {"fatal", LE_FATAL},   {"critical", LE_FATAL},
		{"off", LE_OFF},
	};
	if (!s)
		return LE_EINVAL;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcasecmp(s, names[i].name) == 0)
			return names[i].level;
	return LE_EINVAL;
}

/* A dotted path: parts of A-Z a-z 0-9 _ -, none empty.  @return its
 * length, 0 for NULL or "" (the root), -1 when it is not one. */
static int name_len(const char *name)
{
	size_t n = 0, part = 0;

	if (!name)
		return 0;
	for (; name[n]; n++) {
		char c = name[n];
		if (c == '.') {
			if (!part)
				return -1;
			part = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		           (c >= '0' && c <= '9') || c == '_' || c == '-') {
			part++;
		} else {
			return -1;
		}
		if (n + 1 > LE_LOGGER_NAME_MAX)
			return -1;
	}
	return n && !part ? -1 : (int)n;
}

static void bad_name(const char *name)
{
	le__seterr("logger name \"%.*s\": not a dotted path of parts made of "
	           "A-Z a-z 0-9 _ - (at most %d bytes)",
	           LE_LOGGER_NAME_MAX + 8, name, LE_LOGGER_NAME_MAX);
}

/* Is p (plen bytes) a proper parent of name: name = p + "." + ...? */
static int is_parent(const char *p, uint32_t plen, const char *name,
                     uint32_t nlen)
{
	return plen < nlen && name[plen] == '.' && memcmp(p, name, plen) == 0;
}

/* Which setting of an entry (source): its level, its rate limit, or its
 * flight recorder's level. */
enum { OWN_LEVEL, OWN_RL, OWN_BT };

/* Does entry p have a setting of its own of that kind? */
static int has_own(const le_logger *p, int kind)
{
	return kind == OWN_RL   ? p->own_rl != 0
	       : kind == OWN_BT ? p->bt_own >= 0
	                        : p->own >= 0;
}

/* The entry whose setting of that kind a name takes: its own entry's if
 * that has one, else its nearest parent's with one, else the root.
 * Caller holds mu. */
static const le_logger *source(const le__loggers *L, const char *name,
                               uint32_t nlen, int kind)
{
	const le_logger *src = &L->tab[0];
	uint32_t best = 0;

	for (uint32_t i = 1; i < L->n; i++) {
		const le_logger *p = &L->tab[i];
		if (!has_own(p, kind))
			continue;
		if (p->name_len == nlen && memcmp(p->name, name, nlen) == 0)
			return p;
		if (p->name_len > best &&
		    is_parent(p->name, p->name_len, name, nlen)) {
			best = p->name_len;
			src = p;
		}
	}
	return src;
}

/* Store entry i's threshold (head.keep), rate limit, its recorder's
 * records, and the level the macros test (head.level): the threshold,
 * or the recorder's level when lower, so a logger without a recorder
 * costs what it did.  Caller holds mu. */
static void derive_entry(le__loggers *L, uint32_t i)
{
	le_logger *lg = &L->tab[i];
	int lv = i ? source(L, lg->name, lg->name_len, OWN_LEVEL)->own
	           : lg->own;
	const le_logger *b = i ? source(L, lg->name, lg->name_len, OWN_BT)
	                       : lg;
	int bl = b->bt_own < 0 ? LE_OFF : b->bt_own;

	__atomic_store_n(&lg->rl,
	                 source(L, lg->name, lg->name_len, OWN_RL)->own_rl,
	                 __ATOMIC_RELAXED);
	__atomic_store_n(&lg->bt_records, b->bt_own_records, __ATOMIC_RELAXED);
	__atomic_store_n(&lg->head.keep, lv, __ATOMIC_RELAXED);
	__atomic_store_n(&lg->head.level, bl < lv ? bl : lv, __ATOMIC_RELAXED);
}

/* The threshold of a name: its entry's own level, else its nearest
 * parent's, else the root's.  Caller holds mu. */
static int derive(const le__loggers *L, const char *name, uint32_t nlen)
{
	return source(L, name, nlen, 0)->own;
}

/* Store every entry's threshold and rate limit (and the engine's
 * threshold, the root's) again. */
static void publish(le_engine *e)
{
	le__loggers *L = e->loggers;

	for (uint32_t i = 0; i < L->n; i++)
		derive_entry(L, i);
	__atomic_store_n(&e->head.keep, L->tab[0].head.keep, __ATOMIC_RELAXED);
	__atomic_store_n(&e->head.level, L->tab[0].head.level,
	                 __ATOMIC_RELAXED);
}

/* The entry named name (nlen > 0), made if missing.  Caller holds mu. */
static le_logger *find(le_engine *e, const char *name, uint32_t nlen,
                       int make)
{
	le__loggers *L = e->loggers;

	for (uint32_t i = 1; i < L->n; i++)
		if (L->tab[i].name_len == nlen &&
		    memcmp(L->tab[i].name, name, nlen) == 0)
			return &L->tab[i];
	if (!make)
		return NULL;
	if (L->n == L->max + 1) {
		le__seterr("max_loggers: all %u entries are in use (named "
		           "loggers and names with a level); raise "
		           "le_config.max_loggers", L->max);
		return NULL;
	}
	le_logger *lg = &L->tab[L->n];
	memset(lg, 0, sizeof *lg);
	lg->head.kind = 1;
	lg->e = e;
	lg->own = -1;
	lg->bt_own = -1;
	lg->index = (uint16_t)L->n;
	lg->name_len = nlen;
	memcpy(lg->name, name, nlen);
	lg->name[nlen] = '\0';
	le_field f = {.key = "logger", .key_len = 6, .type = LE_FT_STRING,
	              .v.str = {lg->name, nlen}};
	lg->field_len = (uint32_t)le__field_put(lg->field, &f);
	/* Visible to the macros only through the pointer returned after
	 * the unlock; the threshold is stored (derived) before that. */
	derive_entry(L, L->n);
	L->n++;
	return lg;
}

/* name made a dotted path into out (LE_LOGGER_NAME_MAX + 1 bytes): each
 * byte outside A-Z a-z 0-9 _ - . as '_', empty parts left out, cut to
 * LE_LOGGER_NAME_MAX bytes.  @return its length (0: the root). */
static uint32_t clean_name(const char *name, char *out)
{
	uint32_t n = 0;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		if (*p == '.' && (n == 0 || out[n - 1] == '.'))
			continue;
		if (n == LE_LOGGER_NAME_MAX)
			break;
		int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		         (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
		         *p == '.';
		out[n++] = ok ? (char)*p : '_';
	}
	while (n && out[n - 1] == '.')
		n--;
	out[n] = '\0';
	return n;
}

/* The root, when find had no room for a new name: le_errmsg says so. */
static le_logger *root_instead(le_engine *e)
{
	char why[256];

	snprintf(why, sizeof why, "%s", le_errmsg());
	le__seterr("%s; logging as the root logger", why);
	return &e->loggers->tab[0];
}

le_logger *le_logger_get(le_engine *e, const char *name)
{
	char clean[LE_LOGGER_NAME_MAX + 1];
	int n = name_len(name);
	le_logger *lg;

	e = le__engine_or_default(e); /* dflt.c */
	if (!e) {
		le__seterr("le_logger_get: NULL engine and no default engine "
		           "(le_set_default)");
		return NULL;
	}
	if (n < 0) {
		n = (int)clean_name(name, clean);
		le__seterr("logger name \"%.*s\": not a dotted path of parts "
		           "made of A-Z a-z 0-9 _ - (at most %d bytes); logging "
		           "as \"%s\"", LE_LOGGER_NAME_MAX + 8, name,
		           LE_LOGGER_NAME_MAX, clean);
		name = clean;
	}
	pthread_mutex_lock(&e->loggers->mu);
	lg = n ? find(e, name, (uint32_t)n, 1) : &e->loggers->tab[0];
	pthread_mutex_unlock(&e->loggers->mu);
	return lg ? lg : root_instead(e);
}

const char *le_logger_name(const le_logger *lg)
{
	return lg ? lg->name : "";
}

/* The engine a setter works on (e, or the default), and *n the length
 * of name; NULL (le_errmsg set for a bad name) when there is none. */
static le_engine *setter_engine(le_engine *e, const char *name, int *n)
{
	*n = name_len(name);
	e = le__engine_or_default(e); /* dflt.c */
	if (e && *n < 0) {
		bad_name(name);
		return NULL;
	}
	return e;
}

/* Store the own setting of `name` (n bytes): its level (rl 0) or its
 * rate limit (rl 1), v; its entry is made unless v removes the setting.
 * Then derive every entry's again.  @return 0 or LE_ENOMEM. */
static int set_own(le_engine *e, const char *name, int n, int rl, int64_t v)
{
	int make = rl ? v != 0 : v >= 0, rc = 0;

	pthread_mutex_lock(&e->loggers->mu);
	le_logger *lg = n ? find(e, name, (uint32_t)n, make)
	                  : &e->loggers->tab[0];
	if (lg) {
		if (rl)
			lg->own_rl = (uint64_t)v;
		else
			lg->own = (int)v;
		publish(e);
	} else if (make) {
		rc = LE_ENOMEM;
	}
	pthread_mutex_unlock(&e->loggers->mu);
	return rc;
}

int le_set_level(le_engine *e, const char *name, int level)
{
	int n;

	if (!(e = setter_engine(e, name, &n)))
		return LE_EINVAL;
	if (level < (n ? -1 : LE_TRACE) || level > LE_OFF) {
		le__seterr("le_set_level: %d is not a level (LE_TRACE..LE_OFF%s)",
		           level, n ? ", or -1" : "");
		return LE_EINVAL;
	}
	return set_own(e, name, n, 0, level);
}

int le_get_level(le_engine *e, const char *name)
{
	int n = name_len(name);

	e = le__engine_or_default(e); /* dflt.c */
	if (!e || n < 0)
		return LE_EINVAL;
	pthread_mutex_lock(&e->loggers->mu);
	int lv = derive(e->loggers, name ? name : "", (uint32_t)n);
	pthread_mutex_unlock(&e->loggers->mu);
	return lv;
}

int le_set_ratelimit(le_engine *e, const char *name, int interval_ms,
                     int burst)
{
	int n;

	if (!(e = setter_engine(e, name, &n)))
		return LE_EINVAL;
	if (interval_ms < -1 || burst < 0) {
		le__seterr("le_set_ratelimit: %d ms, burst %d: interval_ms must "
		           "be -1, 0 or more, burst 0 or more", interval_ms,
		           burst);
		return LE_EINVAL;
	}
	uint64_t v = interval_ms < 0 ? 0
	             : LE_RL_SET | (uint64_t)interval_ms << 32 | (uint32_t)burst;
	return set_own(e, name, n, 1, (int64_t)v);
}

int le_get_ratelimit(le_engine *e, const char *name, int *interval_ms,
                     int *burst)
{
	int n = name_len(name);

	e = le__engine_or_default(e); /* dflt.c */
	if (!e || n < 0)
		return LE_EINVAL;
	pthread_mutex_lock(&e->loggers->mu);
	uint64_t v = source(e->loggers, name ? name : "", (uint32_t)n, 1)->own_rl;
	pthread_mutex_unlock(&e->loggers->mu);
	if (interval_ms)
		*interval_ms = (int)((v >> 32) & 0x7fffffff);
	if (burst)
		*burst = (int)(uint32_t)v;
	return v != 0;
}

/* ---- LOGENGINE_LEVEL and LOGENGINE_RATELIMIT ---- */

/* p without the blanks around it (cut in place). */
static char *trim(char *p)
{
	char *end = p + strlen(p);
	while (*p == ' ' || *p == '\t')
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return p;
}

/* An item "value" (the root: *name NULL) or "name=value", cut in place.
 * @return the value, trimmed. */
static char *split_item(char *item, char **name)
{
	char *eq = strchr(item, '=');

	*name = NULL;
	if (!eq)
		return trim(item);
	*eq = '\0';
	*name = trim(item);
	return trim(eq + 1);
}

/* rc of applying an item of `what` to logger `name`, with le_errmsg
 * saying why when it failed. */
static int set_result(le_engine *e, const char *what, const char *name,
                      int rc)
{
	if (rc == LE_EINVAL)
		le__seterr("%s: \"%s\" is not a logger name (dotted parts of "
		           "A-Z a-z 0-9 _ -)", what, name);
	else if (rc < 0)
		le__seterr("%s: no room for logger \"%s\": all %u max_loggers "
		           "entries in use", what, name, e->loggers->max);
	return rc;
}

/* One item of a level setting: "debug" (the root) or "net=debug".
 * @return 0, or LE_EINVAL with le_errmsg naming `what` and the item. */
typedef int (*set_fn)(le_engine *e, const char *name, int level);

static int apply_level_item(le_engine *e, const char *what, char *item,
                            set_fn set)
{
	char *name, *lv = split_item(item, &name);
	int level = le_level_parse(lv);
	if (level < 0) {
		le__seterr("%s: \"%s\" is not a level (trace, debug, info, "
		           "warn, error, fatal or off)%s%s", what, lv,
		           name ? " for logger " : "", name ? name : "");
		return LE_EINVAL;
	}
	if (name && !name[0]) {
		le__seterr("%s: \"=%s\" names no logger", what, lv);
		return LE_EINVAL;
	}
	return set_result(e, what, name, set(e, name, level));
}

/* An item of a level setting (levels, LOGENGINE_LEVEL). */
static int apply_item(le_engine *e, const char *what, char *item)
{
	return apply_level_item(e, what, item, le_set_level);
}

/* A number of at most INT_MAX at *p, moving *p past it.  @return it,
 * or -1 when there is none or it is too big. */
static long number(const char **p)
{
	long v = 0;

	if (**p < '0' || **p > '9')
		return -1;
	for (; **p >= '0' && **p <= '9'; (*p)++)
		if ((v = v * 10 + (**p - '0')) > INT_MAX)
			return -1;
	return v;
}

/* "BURST/INTERVAL" (INTERVAL in ms, or with a unit ms, s or m) or "off".
 * @return 0 and the limit, or -1. */
static int parse_rl(const char *v, int *ms, int *burst)
{
	static const struct {
		const char *unit;
		long mult;
	} units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}};
	long b, i;

	if (strcasecmp(v, "off") == 0) {
		*ms = *burst = 0;
		return 0;
	}
	if ((b = number(&v)) < 0 || *v++ != '/' || (i = number(&v)) <= 0)
		return -1;
	for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
		if (strcasecmp(v, units[k].unit) == 0 &&
		    i <= INT_MAX / units[k].mult) {
			*ms = (int)(i * units[k].mult);
			*burst = (int)b;
			return 0;
		}
	return -1;
}

/* One item of a rate-limit setting: "10/1s" (the root) or "net=10/1s".
 * @return 0, or LE_EINVAL with le_errmsg naming `what` and the item. */
static int apply_rl_item(le_engine *e, const char *what, char *item)
{
	char *name, *v = split_item(item, &name);
	int ms, burst;

	if (parse_rl(v, &ms, &burst) < 0) {
		le__seterr("%s: \"%s\" is not a rate limit (BURST/INTERVAL, "
		           "INTERVAL in ms or with ms, s or m, as 10/1s; or "
		           "off)%s%s", what, v, name ? " for logger " : "",
		           name ? name : "");
		return LE_EINVAL;
	}
	if (name && !name[0]) {
		le__seterr("%s: \"=%s\" names no logger", what, v);
		return LE_EINVAL;
	}
	return set_result(e, what, name, le_set_ratelimit(e, name, ms, burst));
}

/*
 * Apply a whole setting: comma-separated items, empty ones ignored.  An
 * item that does not apply is reported (one line on stderr, the reason
 * in le_errmsg, e->config_errors) and left out: a typo in a level never
 * stops a service from starting.  @return 0, or LE_ENOMEM.
 */
static int apply_spec(le_engine *e, const char *what, const char *spec,
                      int (*apply)(le_engine *, const char *, char *))
{
	char *copy = strdup(spec), *save = NULL;
	char why[256];

	if (!copy)
		return LE_ENOMEM;
	for (char *it = strtok_r(copy, ",", &save); it;
	     it = strtok_r(NULL, ",", &save)) {
		size_t k = strspn(it, " \t");
		if (!it[k] || apply(e, what, it) == 0)
			continue;
		snprintf(why, sizeof why, "%s", le_errmsg());
		fprintf(stderr, "logengine: %s; item ignored\n", why);
		le__seterr("%s; item ignored", why);
		e->config_errors++;
	}
	free(copy);
	return 0;
}

int le__loggers_open(le_engine *e, const le_config *cfg)
{
	le__loggers *L = calloc(1, sizeof *L);
	int rc;

	if (!L)
		return LE_ENOMEM;
	e->loggers = L;
	L->max = cfg->max_loggers;
	L->tab = calloc((size_t)L->max + 1, sizeof *L->tab);
	if (!L->tab)
		return LE_ENOMEM;
	pthread_mutex_init(&L->mu, NULL);
	/* The root as a le_logger (le_logger_get(e, "")): a logger whose
	 * records carry no name; the engine's own head mirrors its level. */
	L->tab[0].head.kind = 1;
	L->tab[0].e = e;
	L->tab[0].own = ROOT_DEFAULT;
	L->tab[0].bt_own = LE_OFF;
	L->n = 1;
	e->head.kind = 0;
	publish(e);
	if (cfg->levels) {
		rc = apply_spec(e, "levels", cfg->levels, apply_item);
		if (rc < 0)
			return rc;
	}
	const char *env = getenv("LOGENGINE_LEVEL");
	if (env) {
		rc = apply_spec(e, "LOGENGINE_LEVEL", env, apply_item);
		if (rc < 0)
			return rc;
	}
	env = getenv("LOGENGINE_RATELIMIT");
	if (env) {
		rc = apply_spec(e, "LOGENGINE_RATELIMIT", env, apply_rl_item);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void le__loggers_free(le_engine *e)
{
	le__loggers *L = e->loggers;

	if (!L)
		return;
	if (L->tab && !e->forked)
		pthread_mutex_destroy(&L->mu);
	free(L->tab);
	free(L);
	e->loggers = NULL;
}

/* ---- the flight recorder's levels (backtrace.c) ---- */

/* The setter of a backtrace setting's items: name's own recorder level
 * (the root's "off" or -1: none).  Rings are made by le_open after. */
static int set_bt_name(le_engine *e, const char *name, int level)
{
	int n = name_len(name), rc = 0;

	if (n < 0)
		return LE_EINVAL;
	pthread_mutex_lock(&e->loggers->mu);
	le_logger *lg = n ? find(e, name, (uint32_t)n, level >= 0)
	                  : &e->loggers->tab[0];
	if (lg) {
		lg->bt_own = !n && level < 0 ? LE_OFF : level;
		publish(e);
	} else if (level >= 0) {
		rc = LE_ENOMEM;
	}
	pthread_mutex_unlock(&e->loggers->mu);
	return rc;
}

/* An item of a backtrace setting (backtrace, LOGENGINE_BACKTRACE). */
static int apply_bt_item(le_engine *e, const char *what, char *item)
{
	return apply_level_item(e, what, item, set_bt_name);
}

int le__loggers_backtrace(le_engine *e, const char *what, const char *spec)
{
	return apply_spec(e, what, spec, apply_bt_item);
}

int le__logger_set_bt(le_logger *lg, int level, uint32_t records,
                      int (*ready)(le_engine *e))
{
	le_engine *e = lg->e;
	int rc = 0;

	pthread_mutex_lock(&e->loggers->mu);
	if (level >= 0 && level < LE_OFF)
		rc = ready(e);
	if (rc == 0) {
		lg->bt_own = lg == &e->loggers->tab[0] && level < 0 ? LE_OFF
		                                                    : level;
		lg->bt_own_records = records;
		publish(e);
	}
	pthread_mutex_unlock(&e->loggers->mu);
	return rc;
}

int le__loggers_keep_any(le_engine *e)
{
	le__loggers *L = e->loggers;
	int any = 0;

	pthread_mutex_lock(&L->mu);
	for (uint32_t i = 0; i < L->n && !any; i++)
		any = L->tab[i].head.level < L->tab[i].head.keep;
	pthread_mutex_unlock(&L->mu);
	return any;
}
