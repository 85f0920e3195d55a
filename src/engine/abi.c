/*
 * abi.c -- le_config and le_stats across library versions.
 *
 * A program compiled against one logengine.h may run with a newer or an
 * older liblogengine.so.0.  The structs it shares with the library
 * therefore carry their size (le_record, filled by le_reader_next, as
 * le_stats is): le_config in its struct_size field (set by
 * le_config_init, a macro that passes sizeof(le_config) as the program
 * saw it), le_stats as an argument of le_stats_get / le_close_stats (the
 * same kind of macro).  Then:
 *
 *   config in, caller older (smaller):  fields it lacks take defaults.
 *   config in, caller newer (larger):   accepted when every byte past ours
 *                                       is zero (fields we do not know
 *                                       left at their default), else
 *                                       LE_EINVAL: we cannot do what it
 *                                       asked.  (The rule of Linux's
 *                                       extensible structs, openat2.)
 *   stats out, caller older:            we write no byte past its size.
 *   stats out, caller newer:            what we do not count is zeroed.
 *
 * For that to hold, the rules for whoever changes these structs:
 *   - fields are added at the end only, never removed, moved or resized;
 *   - a field added to le_config has 0 mean what the library did before
 *     it existed (an older library sees the field as absent = zero);
 *   - le_config ends without tail padding (asserted below), so that a
 *     caller's struct_size covers whole fields and no later field can sit
 *     in an older struct's padding, whose bytes the caller never set.
 */
#include <stddef.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/config.h"
#include "base/internal.h"

_Static_assert(offsetof(le_config, backtrace_trigger) + sizeof(int) ==
                       sizeof(le_config),
               "le_config ends in padding, or its last field is not the "
               "one named here: make the padding an explicit field (a "
               "reserved_ one), and name the last field here");

/* The smallest le_config any release had: struct_size and dir. */
#define CONFIG_MIN_SIZE (offsetof(le_config, dir) + sizeof(const char *))

void le_config_init_sized(le_config *cfg, size_t size)
{
	le_config d;

	if (!cfg)
		return;
	le__config_defaults(&d);
	d.struct_size = size;
	le__copy_sized(cfg, size, &d, sizeof d);
}

/* The caller's configuration (cfg->struct_size bytes) in a full-size
 * struct *out, whose fields past the caller's take their defaults.
 * @return 0, or LE_EINVAL (le_errmsg() says why) when struct_size is too
 * small to be one le_config_init filled, or the caller's struct is larger
 * than ours and sets a field this library does not know. */
static int config_import(le_config *out, const le_config *cfg)
{
	size_t size = cfg->struct_size;
	const unsigned char *p = (const unsigned char *)cfg;

	if (size < CONFIG_MIN_SIZE) {
		le__seterr("struct_size: %zu is not the size of a le_config; "
		           "fill the configuration with le_config_init() "
		           "before setting its fields", size);
		return LE_EINVAL;
	}
	for (size_t i = sizeof *out; i < size; i++)
		if (p[i]) {
			le__seterr("struct_size: %zu: the program sets a field "
			           "at byte %zu, past the %zu bytes of le_config "
			           "this library (%s) knows; it was built against "
			           "a newer logengine.h",
			           size, i, sizeof *out, LE_VERSION_STRING);
			return LE_EINVAL;
		}
	le__config_defaults(out);
	memcpy(out, cfg, size < sizeof *out ? size : sizeof *out);
	out->struct_size = sizeof *out;
	if (out->reserved_) {
		le__seterr("reserved_: %u, must be 0", out->reserved_);
		return LE_EINVAL;
	}
	return 0;
}

int le_open(le_engine **out, const le_config *cfg)
{
	le_config full;

	if (!out || !cfg)
		return le__engine_open(out, cfg); /* which says so */
	le__clearerr();
	int rc = config_import(&full, cfg);
	if (rc < 0) {
		*out = NULL;
		return rc;
	}
	return le__engine_open(out, &full);
}

int le_stats_get_sized(le_engine *e, le_stats *out, size_t size)
{
	le_stats full;

	if (!out)
		return LE_EINVAL;
	int rc = le__stats_get(e, &full);
	if (rc < 0)
		return rc;
	le__copy_sized(out, size, &full, sizeof full);
	return 0;
}

int le_close_stats_sized(le_engine *e, le_stats *final, size_t size)
{
	le_stats full;

	int rc = le__close_stats(e, final ? &full : NULL);
	if (final)
		le__copy_sized(final, size, &full, sizeof full);
	return rc;
}
