/*
 * segfd.h -- which descriptors are segment files, for fault tests that aim
 * an error at the log's segments: the index builder and the live page
 * write through the same OS-call table, and an injected "next write
 * fails" must not be spent on them.  Put t_segfd_openat in the table as
 * its openat (le__open_in opens every file of a log directory with it,
 * by its last component); it calls the one in use before.
 */
#ifndef LE_TEST_SEGFD_H
#define LE_TEST_SEGFD_H

#include <stdatomic.h>
#include <string.h>
#include "base/os.h"

#define T_SEGFDS 1024
static atomic_int t_seg_fd[T_SEGFDS];
static int (*t_segfd_next)(int, const char *, int, mode_t) = NULL;

static inline int t_segfd_openat(int dirfd, const char *name, int flags,
                                 mode_t mode)
{
	int fd = (t_segfd_next ? t_segfd_next : le__os_real.openat)(
	        dirfd, name, flags, mode);
	size_t n = strlen(name);
	if (fd >= 0 && fd < T_SEGFDS)
		atomic_store(&t_seg_fd[fd],
		             n > 4 && !strcmp(name + n - 4, ".seg"));
	return fd;
}

/* Is fd (as last opened) a segment file? */
static inline int t_is_seg_fd(int fd)
{
	return fd >= 0 && fd < T_SEGFDS && atomic_load(&t_seg_fd[fd]);
}

#endif
