/*
 * test_powercut.c -- a simulated power cut keeps everything the durability
 * policy promised (in the spirit of SQLite's test6.c).
 *
 * A layer over the OS-call table remembers, for every segment and
 * checkpoint file, its content as of its last successful fdatasync (a
 * ".durable" copy beside it), and which names a directory fsync made
 * durable (a ".named" marker).  A child logs numbered records with
 * LE_SYNC_BATCH (or _INTERVAL), calling le_flush now and then and noting in
 * shared memory how many records a successful le_flush covered.  The
 * parent kills it at a random moment and "reboots" the directory: files
 * whose name was never made durable vanish, the others go back to their
 * last synced content, and the queue file belongs to another boot.  Every
 * record a le_flush confirmed must then be there, once, in order.
 */
#include "harness.h"

#include <sys/prctl.h>

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "logengine.h"
#include "logtest.h"
#include "base/os.h"
#include "queue/queue.h"

static char dir[256];
static char *paths[1024]; /* fd -> tracked file (segments, CHECKPOINT) */

static int tracked(const char *p)
{
	size_t n = strlen(p);
	return (n > 4 && strcmp(p + n - 4, ".seg") == 0) ||
	       (n > 10 && strcmp(p + n - 10, "CHECKPOINT") == 0);
}

static int pc_open(const char *path, int flags, mode_t mode)
{
	int fd = le__os_real.open(path, flags, mode);
	if (fd >= 0 && fd < 1024) {
		free(paths[fd]);
		paths[fd] = tracked(path) ? strdup(path) : NULL;
	}
	return fd;
}

/* The engine opens its files one component at a time (le__open_in):
 * the file's whole name is what the descriptor resolves to. */
static int pc_openat(int dirfd, const char *name, int flags, mode_t mode)
{
	char link[64], p[1024];
	int fd = le__os_real.openat(dirfd, name, flags, mode);
	if (fd >= 0 && fd < 1024) {
		snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, p, sizeof p - 1);
		p[n > 0 ? n : 0] = '\0';
		free(paths[fd]);
		paths[fd] = n > 0 && tracked(p) ? strdup(p) : NULL;
	}
	return fd;
}

static int pc_close(int fd)
{
	if (fd >= 0 && fd < 1024) {
		free(paths[fd]);
		paths[fd] = NULL;
	}
	return le__os_real.close(fd);
}

/* Copy path to path.durable with the real calls only. */
static void snapshot(const char *path)
{
	char to[600], tmp[620];
	snprintf(to, sizeof to, "%s.durable", path);
	snprintf(tmp, sizeof tmp, "%s.tmp", to);
	int in = open(path, O_RDONLY), out = open(tmp, O_WRONLY | O_CREAT |
	                                               O_TRUNC, 0644);
	char b[65536];
	ssize_t n;
	while (in >= 0 && out >= 0 && (n = read(in, b, sizeof b)) > 0)
		if (write(out, b, (size_t)n) != n)
			_exit(7);
	close(in);
	close(out);
	rename(tmp, to); /* the snapshot itself is atomic */
}

static int pc_fdatasync(int fd)
{
	int rc = le__os_real.fdatasync(fd);
	if (rc == 0 && fd >= 0 && fd < 1024 && paths[fd])
		snapshot(paths[fd]);
	return rc;
}

/* A directory fsync makes the names in it durable. */
static int pc_fsync(int fd)
{
	int rc = le__os_real.fsync(fd);
	char link[64], d[512];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, d, sizeof d - 1);
	if (rc == 0 && n > 0) {
		d[n] = 0;
		DIR *dd = opendir(d);
		struct dirent *de;
		while (dd && (de = readdir(dd))) {
			if (!tracked(de->d_name))
				continue;
			char m[800];
			snprintf(m, sizeof m, "%s/%s.named", d, de->d_name);
			close(open(m, O_WRONLY | O_CREAT, 0644));
		}
		if (dd)
			closedir(dd);
	}
	return rc;
}

struct shared {
	_Atomic long flushed; /* records a successful le_flush covered */
};
static struct shared *sh;

static void child(int durability)
{
	/* This loops until killed: never outlive the test if it dies. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(9);
	le__os t = le__os_real;
	t.open = pc_open;
	t.openat = pc_openat;
	t.close = pc_close;
	t.fdatasync = pc_fdatasync;
	t.fsync = pc_fsync;
	le__os_install(&t);
	le__boot_id_set(1111);
	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.durability = durability;
	c.sync_ms = 5;
	c.segment_bytes = 32 << 10; /* small files: cheap snapshots */
	c.overflow = LE_OVERFLOW_BLOCK;
	le_engine *e;
	if (le_open(&e, &c) != 0)
		_exit(2);
	char b[64];
	for (long k = 0;; k++) {
		int n = snprintf(b, sizeof b, "rec %ld", k);
		if (le_write(e, 0, LE_INFO, b, (size_t)n) != 0)
			_exit(3);
		if (k % 50 == 49) {
			if (le_flush(e, 10000) != 0)
				_exit(4);
			atomic_store(&sh->flushed, k + 1);
		}
	}
}

/* Undo everything not made durable, as a power cut would. */
static void reboot(void)
{
	char sd[400];
	snprintf(sd, sizeof sd, "%s/shard-000", dir);
	DIR *d = opendir(sd);
	struct dirent *de;
	char *names[4096];
	int n = 0;
	while ((de = readdir(d)) && n < 4096)
		names[n++] = strdup(de->d_name);
	closedir(d);
	for (int i = 0; i < n; i++) {
		char p[800], m[820], q[820];
		snprintf(p, sizeof p, "%s/%s", sd, names[i]);
		if (!tracked(names[i]))
			continue;
		snprintf(m, sizeof m, "%s.named", p);
		snprintf(q, sizeof q, "%s.durable", p);
		if (access(m, F_OK) != 0)
			unlink(p); /* created, name never synced */
		else if (access(q, F_OK) == 0)
			rename(q, p); /* back to the last synced content */
		else
			truncate(p, 0); /* named, content never synced */
	}
	for (int i = 0; i < n; i++) { /* the test layer's own files */
		char p[800];
		size_t l = strlen(names[i]);
		snprintf(p, sizeof p, "%s/%s", sd, names[i]);
		if ((l > 6 && !strcmp(names[i] + l - 6, ".named")) ||
		    (l > 8 && !strcmp(names[i] + l - 8, ".durable")) ||
		    (l > 4 && !strcmp(names[i] + l - 4, ".tmp")))
			unlink(p);
		free(names[i]);
	}
	le__boot_id_set(2222); /* the queue is another boot's */
}

/* Records read back must be "rec 0", "rec 1", ...: once, in order, no
 * hole; *arg is the next number expected. */
static void next_rec(const le_record *r, void *arg)
{
	long *next = arg, k;
	char b[64];
	snprintf(b, sizeof b, "%.*s", (int)r->len, (const char *)r->payload);
	CHECK(sscanf(b, "rec %ld", &k) == 1);
	CHECK_EQ(k, *next);
	(*next)++;
}

static void powercut(int durability, int rounds)
{
	for (int round = 0; round < rounds; round++) {
		t_tmpdir(dir);
		atomic_store(&sh->flushed, 0);
		pid_t pid = fork();
		if (pid == 0)
			child(durability);
		while (atomic_load(&sh->flushed) == 0)
			usleep(1000);
		usleep((useconds_t)(rand() % 100000));
		kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
		CHECK(WIFSIGNALED(st));
		long promised = atomic_load(&sh->flushed);
		reboot();
		le_config c;
		le_config_init(&c);
		c.dir = dir;
		le_engine *e;
		CHECK_RC(le_open(&e, &c));
		le_stats s;
		le_stats_get(e, &s);
		CHECK_EQ(s.recovered_records, 0); /* queue of another boot */
		le_close(e);
		long next = 0;
		CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, next_rec, &next) >= 0);
		if (next < promised) {
			fprintf(stderr, "  round %d: %ld records survive, %ld "
			        "were promised\n", round, next, promised);
			_exit(1);
		}
		t_rmrf(dir);
		le__boot_id_set(0);
	}
}

TEST(power_cut_keeps_every_flushed_record_sync_batch)
{
	powercut(LE_SYNC_BATCH, 8);
}

TEST(power_cut_keeps_every_flushed_record_sync_interval)
{
	powercut(LE_SYNC_INTERVAL, 8);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
	          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	srand((unsigned)getpid());
	RUN(power_cut_keeps_every_flushed_record_sync_batch);
	RUN(power_cut_keeps_every_flushed_record_sync_interval);
	return t_done();
}
