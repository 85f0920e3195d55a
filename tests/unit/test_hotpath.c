/*
 * test_hotpath.c -- the hot path's promise, checked: le_write, le_logf and
 * the level macros (with fields, a named logger, the call site, rate
 * limited, and below the threshold) call no malloc and make no system
 * call in the common case
 * (queue not full, writer not to be woken).
 *
 * A process of its own opens an engine, then puts its own thread (not the
 * engine's) under a seccomp filter that turns every system call but
 * rt_sigreturn and exit into SIGSYS; the handler counts it and fails it
 * with ENOSYS.  malloc, calloc, realloc and the aligned allocators are
 * this file's, counting calls from that thread while armed, then passing
 * on to glibc's.  Each detector is first shown to see one call made on
 * purpose, so a detector that sees nothing fails the test instead of
 * passing it.  The process reports by its exit status.  x86-64 Linux
 * only (the SIGSYS handler sets RAX); checked in the plain and UBSan
 * builds, not under ASan or TSan, whose runtimes own malloc and make
 * system calls (and defer signals) of their own.
 */
#include "harness.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>

#include "logengine.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
	!defined(__SANITIZE_THREAD__)
#define WATCH 1
#else
#define WATCH 0
#endif

/* armed is the trying thread's own: the engine's writer and reaper
 * allocate on their own schedule (a directory scan, an index), and those
 * mallocs are not the hot path's.  The seccomp filter is per thread too. */
static _Thread_local volatile sig_atomic_t armed;
static volatile sig_atomic_t syscalls_seen, mallocs_seen;

#if WATCH
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void __libc_free(void *);

static void note_malloc(void)
{
	if (armed)
		mallocs_seen++;
}

void *malloc(size_t n)
{
	note_malloc();
	return __libc_malloc(n);
}

void *calloc(size_t k, size_t n)
{
	note_malloc();
	return __libc_calloc(k, n);
}

void *realloc(void *p, size_t n)
{
	note_malloc();
	return __libc_realloc(p, n);
}

void free(void *p)
{
	__libc_free(p);
}

void *memalign(size_t a, size_t n)
{
	note_malloc();
	return __libc_memalign(a, n);
}

void *aligned_alloc(size_t a, size_t n)
{
	note_malloc();
	return __libc_memalign(a, n);
}

int posix_memalign(void **out, size_t a, size_t n)
{
	note_malloc();
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
#endif

#if WATCH
static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	if (armed)
		syscalls_seen++;
	((ucontext_t *)uc)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
}

/* From here on, every system call of this thread but rt_sigreturn, exit
 * and exit_group raises SIGSYS. */
static int trap_syscalls(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		         offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	if (sigaction(SIGSYS, &sa, NULL) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return -errno;
	return 0;
}
#endif

/* Exit status of the process that tries the hot path. */
enum {
	HP_OK = 0,
	HP_SETUP = 10,       /* le_open or the filter failed */
	HP_BLIND_SYSCALL,    /* the syscall detector missed a getppid */
	HP_BLIND_MALLOC,     /* the malloc detector missed a malloc */
	HP_CALL_FAILED,      /* le_write or le_logf returned an error */
	HP_SYSCALLS = 64,    /* + number of system calls seen (capped) */
	HP_MALLOCS = 128     /* + number of mallocs seen (capped) */
};

#if WATCH
static int try_hot_path(const char *dir, int calls)
{
	le_config c;
	le_engine *e;
	char payload[128];

	le_config_init(&c);
	c.dir = dir;
	c.durability = LE_SYNC_NONE;
	c.source_location = 1;
	if (le_open(&e, &c) < 0)
		return HP_SETUP;
	le_logger *lg = le_logger_get(e, "net.http"); /* may allocate */
	if (!lg)
		return HP_SETUP;
	memset(payload, 'p', sizeof payload);
	/* The first call of a thread takes its route key: not the
	 * common case.  Nor is the queue file's first lap, which gives
	 * it its blocks as it goes (queue.h, le__ring_grow): a lap of
	 * records first, each 1,024 written out before the next. */
	if (le_logf(e, LE_INFO, "warm %d", 0) < 0)
		return HP_CALL_FAILED;
	for (int k = 0; k < 16; k++) {
		for (int i = 0; i < 1024; i++)
			if (le_write(e, 0, LE_INFO, payload, sizeof payload) < 0)
				return HP_CALL_FAILED;
		if (le_flush(e, 10000) < 0)
			return HP_CALL_FAILED;
	}
	if (trap_syscalls() < 0)
		return HP_SETUP;
	armed = 1;
	syscall(SYS_getppid);
	if (syscalls_seen != 1)
		return HP_BLIND_SYSCALL;
	void *volatile p = malloc(16);
	if (mallocs_seen != 1)
		return HP_BLIND_MALLOC;
	free(p);
	syscalls_seen = mallocs_seen = 0;
	for (int i = 0; i < calls; i++) {
		if (le_write(e, (uint64_t)i, LE_INFO, payload,
		             sizeof payload) < 0 ||
		    le_logf(e, LE_WARN, "Logging int: %d, int: %d, double: %f",
		            i, -i, i * 0.5) < 0 ||
		    /* %g and %e are glibc's (vsnprintf into a stack buffer) */
		    le_logf(e, LE_DEBUG, "%s %08x %-6.3g %e", "id", i, i / 7.0,
		            i * 1e-9) < 0 ||
		    le_logf_kv(e, LE_INFO,
		               LE_FIELDS(LE_STR("user", "bob"), LE_I64("port", i),
		                         LE_F64("ms", i * 0.25)),
		               "request %d", i) < 0)
			return HP_CALL_FAILED;
		/* deferred (a literal format): the first call registers the
		 * site and puts its descriptor in SITES, the rest copy */
		le_info(e, "Logging int: %d, int: %d, double: %f", i, -i,
		        i * 0.5);
		le_warn(lg, "deferred %s %5.2f %lld %p %.*s", "s", i * 0.1,
		        (long long)i, (void *)payload, 3, "abcdef");
		/* below the threshold (info): nothing at all */
		le_debug(lg, "skipped %d", i);
		/* rate-limited: the first opens the window, 5 pass, the
		 * rest are counted */
		le_warn_every(lg, 60000, 5, "limited %d", i);
		if (i % 8 == 0) /* 50 more: still below a batch */
			le_warn_kv(lg, LE_FIELDS(LE_BOOL("slow", 1)), "slow %d", i);
	}
	armed = 0;
	if (syscalls_seen)
		return HP_SYSCALLS + (syscalls_seen < 63 ? syscalls_seen : 63);
	if (mallocs_seen)
		return HP_MALLOCS + (mallocs_seen < 127 ? mallocs_seen : 127);
	return HP_OK;
}
#endif

TEST(le_write_le_logf_and_level_macros_call_no_malloc_and_no_syscall)
{
#if !WATCH
	fprintf(stderr, "  (checked in the plain and UBSan builds on x86-64, "
	        "not in this one)\n");
#else
	char dir[256];
	t_tmpdir(dir);
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		/* 6 x 300 + 38 records: below the writer's wake-up
		 * threshold (a batch, 2,048), far from a full queue. */
		_exit(try_hot_path(dir, 300));
	int st;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	int code = WEXITSTATUS(st);
	if (code >= HP_MALLOCS)
		fprintf(stderr, "  %d mallocs in the hot path\n",
		        code - HP_MALLOCS);
	else if (code >= HP_SYSCALLS)
		fprintf(stderr, "  %d system calls in the hot path\n",
		        code - HP_SYSCALLS);
	else if (code)
		fprintf(stderr, "  failed before the check: %d\n", code);
	CHECK_EQ(code, HP_OK);
	t_rmrf(dir);
#endif
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(le_write_le_logf_and_level_macros_call_no_malloc_and_no_syscall);
	return t_done();
}
