/*
 * allocwatch.h -- make any allocation far above what reading and
 * recovering small files needs fail (or be seen): the absurd-length tests.
 * Without ASan, an address-space limit `slack` bytes above what the process
 * maps now; under ASan, whose shadow memory makes RLIMIT_AS useless, a
 * malloc hook noting the largest request in t_max_alloc; under TSan,
 * nothing (the other builds cover it).  Include after harness.h.
 */
#ifndef LE_TEST_ALLOCWATCH_H
#define LE_TEST_ALLOCWATCH_H

#include <sys/resource.h>

#if defined(__SANITIZE_ADDRESS__)
/* From the sanitizer runtime; gcc ships no allocator_interface.h. */
int __sanitizer_install_malloc_and_free_hooks(
	void (*malloc_hook)(const volatile void *, size_t),
	void (*free_hook)(const volatile void *));

static size_t t_max_alloc;

static inline void t_note_malloc(const volatile void *p, size_t len)
{
	(void)p;
	if (len > t_max_alloc)
		t_max_alloc = len;
}

static inline void t_note_free(const volatile void *p)
{
	(void)p;
}
#endif

static inline void t_watch_allocations(size_t slack)
{
#if defined(__SANITIZE_ADDRESS__)
	(void)slack;
	__sanitizer_install_malloc_and_free_hooks(t_note_malloc, t_note_free);
#elif !defined(__SANITIZE_THREAD__)
	struct rlimit rl;
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	CHECK(f && fscanf(f, "%lu", &pages) == 1);
	fclose(f);
	rl.rlim_cur = rl.rlim_max =
		(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + slack;
	CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
#else
	(void)slack;
#endif
}

#endif
