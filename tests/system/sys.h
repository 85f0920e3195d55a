/*
 * sys.h -- helpers for tests that drive whole programs through the shell:
 * run a command and keep what it printed, find a tool, write a file.
 * Include after harness.h.  Commands run from the top of the tree (make
 * check runs there).
 */
#ifndef LE_TEST_SYS_H
#define LE_TEST_SYS_H

#include <stdarg.h>

/* Output of the last t_sh(), stdout and stderr together, NUL-terminated. */
static char *t_sh_out;

/*
 * Run the printf-formatted command through /bin/sh, its stdout and stderr
 * kept in t_sh_out.  make's own variables are removed first: a make
 * started from inside `make check` must not try to join its jobserver.
 * @return the exit status, or -1 when the command did not exit normally.
 */
static inline int t_sh(const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 1, 2)))
#endif
	;

static inline int t_sh(const char *fmt, ...)
{
	char cmd[8192], out[] = "/tmp/le-sh-XXXXXX", full[8400];
	va_list ap;
	size_t len;
	int fd, st;

	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	CHECK(n > 0 && (size_t)n < sizeof cmd);
	fd = mkstemp(out);
	CHECK(fd >= 0);
	close(fd);
	snprintf(full, sizeof full, "( %s ) >'%s' 2>&1", cmd, out);
	unsetenv("MAKEFLAGS");
	unsetenv("MFLAGS");
	unsetenv("MAKELEVEL");
	fflush(NULL);
	st = system(full);
	free(t_sh_out);
	t_sh_out = (char *)t_slurp(out, &len);
	unlink(out);
	CHECK(t_sh_out);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* t_sh that must exit 0: otherwise the test fails showing the command
 * and what it printed. */
#define T_SH_OK(...)                                                          \
	do {                                                                  \
		int rc_ = t_sh(__VA_ARGS__);                                  \
		if (rc_ != 0) {                                               \
			fprintf(stderr, "  %s:%d: exit %d from: ", __FILE__,  \
			        __LINE__, rc_);                               \
			fprintf(stderr, __VA_ARGS__);                         \
			fprintf(stderr, "\n%s\n", t_sh_out);                  \
			_exit(1);                                             \
		}                                                             \
	} while (0)

/* 1 when `tool` is installed: on $PATH or in an sbin directory
 * (t_which, tests/tool.h). */
static inline int t_have(const char *tool)
{
	return t_which(tool) != NULL;
}

/* $BUILD (the build directory of the library under test), "build" by
 * default. */
static inline const char *t_build_dir(void)
{
	const char *b = getenv("BUILD");
	return b && *b ? b : "build";
}

/* The C compiler to build outside programs with: $LE_CC (make check sets
 * it to $(CC) plus the build's sanitizer flags), else cc. */
static inline const char *t_cc(void)
{
	const char *c = getenv("LE_CC");
	return c && *c ? c : "cc";
}

/* Write a NUL-terminated text to dir/name; the test fails if it cannot. */
static inline void t_write_file(const char *dir, const char *name,
                                const char *text)
{
	char p[600];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	CHECK(t_spit(p, text, strlen(text)) == 0);
}

#endif
