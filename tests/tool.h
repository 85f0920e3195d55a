/*
 * tool.h -- find a program the tests run: on $PATH, then in the sbin
 * directories.  Debian installs daemons there (nats-server, rsyslogd,
 * logrotate), and a normal user's PATH leaves them out, so a test that
 * asked the shell alone would fail for that user where root passes.
 * Plain C with no harness: natsrv.h includes it for the benchmarks too.
 * tests/system/systest.py's which() searches the same list.
 */
#ifndef LE_TEST_TOOL_H
#define LE_TEST_TOOL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Searched after $PATH, in this order. */
#define T_SBIN_PATH "/usr/local/sbin:/usr/sbin:/sbin"

/* Whether path is a file this process may execute (a directory is not). */
static inline int t_is_program(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, X_OK) == 0;
}

/*
 * The first executable `dir/tool` for a dir of the colon-separated list
 * `path` (an empty entry is the current directory, as for the shell),
 * into buf (cap bytes).  @return buf, or NULL when there is none.
 */
static inline const char *t_which_in(const char *path, const char *tool,
                                     char *buf, size_t cap)
{
	while (path) {
		const char *end = strchr(path, ':');
		int dlen = (int)(end ? (size_t)(end - path) : strlen(path));
		int n = snprintf(buf, cap, "%.*s%s%s", dlen, path,
		                 dlen ? "/" : "./", tool);
		if (n > 0 && (size_t)n < cap && t_is_program(buf))
			return buf;
		path = end ? end + 1 : NULL;
	}
	return NULL;
}

/*
 * The program `tool` to run: tool itself when it names a path (has a
 * '/'), else the first executable of that name on $PATH, then on
 * T_SBIN_PATH.  @return the path, in storage of this file's own that the
 * next call overwrites, or NULL when it is not installed.
 */
static inline const char *t_which(const char *tool)
{
	static char buf[512];
	const char *path = getenv("PATH");

	if (strchr(tool, '/'))
		return t_is_program(tool) ? tool : NULL;
	if (path && t_which_in(path, tool, buf, sizeof buf))
		return buf;
	return t_which_in(T_SBIN_PATH, tool, buf, sizeof buf);
}

#endif
