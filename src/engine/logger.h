/*
 * logger.h -- named loggers and their thresholds (logger.c).
 *
 * Every logger is an entry of one table per engine, allocated at le_open
 * (max_loggers + 1 entries, the root first) and never moved, so a
 * le_logger * stays valid until le_close and the macros read its
 * threshold with no lock.  An entry is also made for a name that only has
 * a level (le_set_level, LOGENGINE_LEVEL) so that loggers created later
 * under it inherit it.  log_mu guards the table; thresholds are stored
 * under it with relaxed atomic stores and read by the macros with relaxed
 * loads (a record racing with le_set_level may see either threshold).
 */
#ifndef LE_LOGGER_H
#define LE_LOGGER_H

#include <pthread.h>
#include <stdint.h>

#include "logengine.h"

struct le_logger {
	struct le__head head;          /* [atomic] first: the macros' load */
	le_engine *e;                  /* [const] */
	int own;                       /* [log_mu] its own level, -1: none */
	uint32_t name_len;             /* [const once made] */
	char name[LE_LOGGER_NAME_MAX + 1];
	/* The field "logger" = name, encoded (fields.h), put first in each
	 * of its records: a memcpy on the hot path.  Empty for the root. */
	uint32_t field_len;
	unsigned char field[2 + 6 + 4 + LE_LOGGER_NAME_MAX];
	/* Rate limits of its _every sites (ratelimit.c), derived as the
	 * threshold is: LE_RL_SET | interval ms << 32 | burst, 0: none. */
	uint64_t own_rl;               /* [log_mu] its own setting */
	uint64_t rl;                   /* [atomic] the one in force */
	/* The flight recorder (backtrace.c): its level inherited as the
	 * threshold is; head.keep is the threshold, head.level the lower of
	 * it and the recorder's level. */
	int bt_own;                    /* [log_mu] its own recorder level,
	                                  -1: none (inherits) */
	uint32_t bt_own_records;       /* [log_mu] its own `records` */
	uint32_t bt_records;           /* [atomic] derived: the newest kept
	                                  records a trigger writes (0: all) */
	uint16_t index;                /* [const] its entry in the table */
};

#define LE_RL_SET (1ull << 63)

typedef struct le__loggers {
	pthread_mutex_t mu;            /* log_mu: guards n and each `own` */
	le_logger *tab;                /* [const] max + 1 entries, root first */
	uint32_t n, max;               /* entries made; at most max + 1 */
} le__loggers;

/* Make e's table (cfg->max_loggers), set the levels of cfg->levels, then
 * of LOGENGINE_LEVEL.  @return 0, LE_ENOMEM, or LE_EINVAL with
 * le_errmsg naming the setting and the item. */
int le__loggers_open(le_engine *e, const le_config *cfg);
void le__loggers_free(le_engine *e);

/* Apply a setting of backtrace levels ("debug,net=trace"; le_config
 * .backtrace, LOGENGINE_BACKTRACE) as le__loggers_open applies levels:
 * a bad item is reported and left out.  @return 0, or LE_ENOMEM. */
int le__loggers_backtrace(le_engine *e, const char *what, const char *spec);
/* Set the recorder of lg's name (level -1: inherit), under log_mu, and
 * derive every entry again.  ready() is called first, under the lock,
 * when the level keeps records: @return its error, or 0. */
int le__logger_set_bt(le_logger *lg, int level, uint32_t records,
                      int (*ready)(le_engine *e));
/* Does any entry keep records (a recorder level below LE_OFF)? */
int le__loggers_keep_any(le_engine *e);

#endif
