/*
 * memfs.h -- a file system held in this process's memory, behind the
 * engine's OS-call table (src/base/os.h), as SQLite's fuzzers run through
 * an in-memory VFS: the targets that open an engine make no file system
 * call at all, so an input costs microseconds of the decoders' own work
 * instead of a few hundred system calls.
 *
 * Paths under MEMFS_ROOT and descriptors it handed out are its own; every
 * other path and descriptor goes on to the table that was installed
 * before it.  MEMFS_ROOT lies in /proc, where nothing can be created, so a
 * call that bypasses the table fails (ENOENT) instead of writing to a
 * real disk, and memfs descriptors start at MEMFS_FD0, above any real
 * one, so a bypassing call on one fails with EBADF: a test sees the hole.
 *
 * What it keeps: directories, regular files (no links: there are none to
 * make), sizes, modes (under the process's umask), times, link counts,
 * files unlinked while open or mapped, flock() locks per descriptor, shared
 * mappings that see the same bytes as pread and pwrite (each file's bytes
 * are one shared anonymous mapping; mmap makes another view of its pages
 * with mremap, so MAP_FIXED, munmap and madvise behave as on a file).
 * What it does not keep: permissions (nothing is refused by its mode),
 * symbolic and hard links, a full disk (only a file's own limit).
 * A file holds at most MEMFS_FILE_MAX bytes (EFBIG past it).  SEEK_HOLE
 * finds no hole before the end, as on a file system without holes.
 * Durability calls succeed at once: nothing here survives the process.
 * Nor a fork: a child shares the files' bytes but not their names, sizes
 * or lock; a test that forks uses memfs in one of the two only.
 */
#ifndef MEMFS_H
#define MEMFS_H

#include <stddef.h>
#include <sys/types.h>

#define MEMFS_ROOT "/proc/le-memfs"
#define MEMFS_FD0 (1 << 29)
#define MEMFS_FDS 256
#define MEMFS_FILE_MAX ((size_t)64 << 20)

/* Install the table (over the one in use); the root exists, empty.
 * @return 0, or -1 if it is installed already. */
int memfs_install(void);
/* The table that was in use before, again; everything memfs held is
 * freed (its descriptors must be closed: their number is returned). */
int memfs_uninstall(void);
/* Remove everything under MEMFS_ROOT and close every descriptor still
 * open.  @return how many were open (0 after a clean run). */
int memfs_clear(void);
/* Descriptors open now. */
int memfs_open_fds(void);
/* Write a whole file at path (under MEMFS_ROOT), making the directories
 * above it (mode 0750) and the file (0640).  @return 0 or -errno. */
int memfs_put(const char *path, const void *data, size_t len);
/* A copy of the file at path: *data (malloc'd, caller frees), its length
 * returned, or -errno. */
ssize_t memfs_get(const char *path, void **data);
/* How many calls memfs answered itself, since install (all kinds). */
unsigned long memfs_calls(void);

#endif
