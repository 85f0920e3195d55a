/*
 * term.c -- journalctl's habits at a terminal: colours and a pager.
 *
 * Colours: on a terminal only, off with --no-color or NO_COLOR set to a
 * non-empty value (no-color.org), and for TERM=dumb.
 *
 * The pager is a child: its stdin is a pipe that becomes our stdout, and
 * it draws on the terminal we had.
 *
 *   logengine --stdout--> pipe --stdin--> pager --> terminal
 *
 * It is $LOGENGINE_PAGER, else $PAGER, else less (split at blanks, no
 * shell); empty or "cat" means no pager.  LESS is set to FRSXMK unless it
 * is set already, as journalctl does: F quits when the text fits one
 * screen, R passes the colours, S chops long lines, X keeps the text on
 * the screen, M says where one is, K quits on ^C.  When the pager named
 * cannot be executed, the child tries less, then copies its stdin to the
 * terminal itself: the records are never lost to a missing program.
 * The end: stdout is closed, so the pager sees the end of its input, and
 * logengine waits for it, so that the shell's prompt comes after it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#define PAGER_ARGS 16

static pid_t pager_pid; /* 0: no pager */

int term_color(int no_color)
{
	const char *nc = getenv("NO_COLOR"), *t = getenv("TERM");
	if (no_color || (nc && *nc) || (t && !strcmp(t, "dumb")))
		return 0;
	return isatty(STDOUT_FILENO);
}

/* The pager's command, or NULL for none. */
static const char *pager_command(void)
{
	const char *p = getenv("LOGENGINE_PAGER");
	if (!p)
		p = getenv("PAGER");
	if (!p)
		p = "less";
	p += strspn(p, " \t");
	return *p && strcmp(p, "cat") ? p : NULL;
}

/* Run cmd, split at blanks; returns only when it could not be run. */
static void exec_words(const char *cmd)
{
	char *copy = strdup(cmd), *argv[PAGER_ARGS + 1], *save = NULL;
	int n = 0;
	if (!copy)
		return;
	for (char *w = strtok_r(copy, " \t", &save); w && n < PAGER_ARGS;
	     w = strtok_r(NULL, " \t", &save))
		argv[n++] = w;
	argv[n] = NULL;
	if (n)
		execvp(argv[0], argv);
	free(copy);
}

/* The child: the pager, or else a plain copy of stdin to the terminal. */
static void pager_child(const char *cmd)
{
	char buf[65536];
	ssize_t n;

	exec_words(cmd);
	if (strcmp(cmd, "less"))
		exec_words("less");
	while ((n = read(STDIN_FILENO, buf, sizeof buf)) > 0)
		if (write(STDOUT_FILENO, buf, (size_t)n) != n)
			break;
	_exit(0);
}

void pager_start(int no_pager)
{
	const char *cmd = pager_command();
	int fd[2];

	if (no_pager || !cmd || !isatty(STDOUT_FILENO) || pipe(fd) < 0)
		return;
	fflush(stdout);
	setenv("LESS", "FRSXMK", 0);
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return;
	}
	if (pid == 0) {
		dup2(fd[0], STDIN_FILENO);
		close(fd[0]);
		close(fd[1]);
		signal(SIGPIPE, SIG_DFL);
		pager_child(cmd);
	}
	dup2(fd[1], STDOUT_FILENO);
	close(fd[0]);
	close(fd[1]);
	pager_pid = pid;
}

int pager_active(void)
{
	return pager_pid != 0;
}

void pager_end(void)
{
	if (!pager_pid)
		return;
	fflush(stdout);
	close(STDOUT_FILENO); /* the pager's end of input */
	while (waitpid(pager_pid, NULL, 0) < 0 && errno == EINTR)
		;
	pager_pid = 0;
}
