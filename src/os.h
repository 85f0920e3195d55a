/*
 * os.h -- every file and sync call the engine makes goes through this one
 * table, as SQLite's aSyscall[] does, so tests can inject ENOSPC, EIO, short
 * writes and EINTR, or simulate a power cut, by swapping entries.
 *
 * The wrappers return -errno on failure (never set errno for the caller) and
 * retry EINTR themselves, so the engine's code reads as plain sequences.
 */
#ifndef LE_OS_H
#define LE_OS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct le__os {
	int (*open)(const char *path, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	int (*fdatasync)(int fd);
	int (*fsync)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*unlink)(const char *path);
	int (*mkdir)(const char *path, mode_t mode);
} le__os;

/* The table in use.  Tests replace entries before le_open and restore them
 * after le_close; it is not changed while an engine runs. */
extern le__os le__os_table;
/* The real calls, for tests that wrap them. */
extern const le__os le__os_real;

/* Wrappers: 0 / a byte count on success, -errno on failure. */
int le__open(const char *path, int flags, mode_t mode);
int le__close(int fd);
/* Writes all len bytes (looping over short writes); -errno on failure. */
int le__pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Reads up to len bytes (looping until EOF); count or -errno. */
ssize_t le__pread_full(int fd, void *buf, size_t len, uint64_t off);
int le__fdatasync(int fd);
int le__fsync_path(const char *dir); /* fsync a directory by path */
int le__ftruncate(int fd, uint64_t len);
int le__unlink(const char *path);
int le__mkdir(const char *path, mode_t mode);

/* Time in ns: wall clock (for record timestamps) and monotonic. */
uint64_t le__now_ns(void);
uint64_t le__mono_ns(void);

#endif
