/*
 * errors.c -- error names, the per-thread error message, level names and
 * the version.  le__seterr() is called by the open functions when they
 * refuse something, so the caller can learn which field or file and why.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/internal.h"

static _Thread_local char errmsg[512];

void le__seterr(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errmsg, sizeof errmsg, fmt, ap);
	va_end(ap);
}

void le__clearerr(void)
{
	errmsg[0] = '\0';
}

const char *le_errmsg(void)
{
	return errmsg;
}

const char *le_version(void)
{
	return LE_VERSION_STRING;
}

const char *le_strerror(int rc)
{
	switch (rc) {
	case LE_OK: return "success";
	case LE_EINVAL: return "invalid argument or configuration value";
	case LE_EFULL: return "queue full: record dropped and counted";
	case LE_ETOOBIG: return "record larger than max_record_bytes";
	case LE_ETIMEDOUT: return "timed out";
	case LE_ECORRUPT: return "corrupt log data";
	case LE_ECLOSED: return "engine is closing";
	case LE_EBUSY: return "log directory is in use by another engine";
	case LE_EIO: return "write or sync to the log failed";
	case LE_EVERSION: return "unknown log format version";
	case LE_ENOMEM: return "out of memory";
	case LE_EUNSAFE:
		return "refused: not a regular file or directory of the log";
	}
	if (rc < 0 && rc > -4096)
		return strerror(-rc); /* glibc: static strings for known errnos */
	return "unknown error";
}

const char *le_level_name(int level)
{
	static const char *const names[] = {"TRACE", "DEBUG", "INFO",
	                                    "WARN",  "ERROR", "FATAL"};
	if (level < LE_TRACE || level > LE_FATAL)
		return "?";
	return names[level];
}
