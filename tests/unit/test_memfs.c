/*
 * test_memfs.c -- the in-memory file system the engine-opening fuzz targets
 * run on (tests/memfs.c, behind src/base/os.h's table).  A fuzz run is
 * only as good as the files it runs on: if memfs answered a call
 * otherwise than the kernel, the fuzzers would test a library that does
 * not exist; if the engine made a call around the table, its files would
 * be half in memory and half nowhere.  So: one script of table calls is
 * run on a real directory and on memfs and must give the same answers;
 * a whole engine (rotation, index, live page, retention, reader) runs on
 * memfs with a counting table below it that must see no file call at all.
 */
#include "harness.h"

#include <fcntl.h>
#include <sys/file.h>

#include "logengine.h"
#include "logtest.h"
#include "base/os.h"
#include "memfs.h"

/* ---- one script, two file systems ---- */

#define MAX_OUT 200
struct outcome {
	long v[MAX_OUT];
	int line[MAX_OUT];
	int n;
};

#define R(x) put(o, __LINE__, (long)(x))
static void put(struct outcome *o, int line, long v)
{
	CHECK(o->n < MAX_OUT);
	o->line[o->n] = line;
	o->v[o->n++] = v;
}

static int name_cat(void *arg, const char *name, unsigned type)
{
	char *s = arg;
	/* the order is the file system's: keep a sorted list */
	char tmp[256], *at = s;
	snprintf(tmp, sizeof tmp, "%s%c,", name, type == DT_DIR ? '/' : ' ');
	while (*at && strcmp(at, tmp) < 0) {
		char *c = strchr(at, ',');
		at = c + 1;
	}
	memmove(at + strlen(tmp), at, strlen(at) + 1);
	memcpy(at, tmp, strlen(tmp));
	return 0;
}

static void script(const char *base, struct outcome *o)
{
	char b[300], p[400], q[400], buf[64];
	struct stat st;
#define P(s) (snprintf(p, sizeof p, "%s/%s", b, s), p)
#define Q(s) (snprintf(q, sizeof q, "%s/%s", b, s), q)
	snprintf(b, sizeof b, "%s/m", base);
	memset(o, 0, sizeof *o);

	R(le__mkdir(b, 0750));
	R(le__mkdir(b, 0750));
	R(le__mkdir(P("a/b"), 0750));
	int fd = le__open(P("f"), O_RDWR | O_CREAT | O_EXCL, 0640);
	R(fd >= 0);
	R(le__open(P("f"), O_RDWR | O_CREAT | O_EXCL, 0640));
	R(le__pwrite_all(fd, "hello", 5, 10));
	memset(buf, 'x', sizeof buf);
	R(le__pread_full(fd, buf, sizeof buf, 0));
	R(memcmp(buf, "\0\0\0\0\0\0\0\0\0\0hello", 15));
	R(le__fstat(fd, &st));
	R(st.st_size);
	R(S_ISREG(st.st_mode));
	R(st.st_nlink);
	R(st.st_mode & 07777);
	/* shrink, grow: the bytes between come back as zeros */
	R(le__ftruncate(fd, 12));
	R(le__ftruncate(fd, 20));
	memset(buf, 'x', sizeof buf);
	R(le__pread_full(fd, buf, sizeof buf, 0));
	R(memcmp(buf + 10, "he\0\0\0\0\0\0\0\0", 10));
	R(le__pread_full(fd, buf, 8, 30)); /* past the end: nothing */

	/* wrong kinds and missing names */
	R(le__open(P("f"), O_RDONLY | O_DIRECTORY, 0));
	R(le__open(b, O_RDWR, 0));
	R(le__open(P("f/"), O_RDONLY, 0));
	R(le__open(P("missing"), O_RDONLY, 0));
	R(le__open(P("missing/x"), O_RDONLY, 0));
	R(le__open(P("f/x"), O_RDONLY, 0));
	R(le__open(P("new/"), O_RDWR | O_CREAT, 0640));
	int fd2 = le__open_in(P("f"), LE_IN_DIR, O_RDWR, 0);
	R(fd2 >= 0);
	R(le__close(fd2));
	fd2 = le__open_in(P("./f"), LE_IN_DIR, O_RDONLY | O_DIRECTORY, 0);
	R(fd2);

	/* rename over a file: the old inode lives on for its descriptor */
	int g = le__open(P("g"), O_WRONLY | O_CREAT, 0600);
	R(g >= 0);
	R(le__pwrite_all(g, "x", 1, 0));
	R(le__close(g));
	R(le__rename(P("g"), Q("f")));
	R(le__stat(P("g"), &st));
	R(le__stat(P("f"), &st));
	R(st.st_size);
	R(st.st_mode & 07777);
	R(le__fstat(fd, &st));
	R(st.st_nlink);
	R(st.st_size);
	R(le__pread_full(fd, buf, 5, 10));
	R(le__close(fd));

	/* directories */
	R(le__mkdir(P("d"), 0700));
	R(le__mkdir(P("e"), 0700));
	fd = le__open(P("d/x"), O_WRONLY | O_CREAT, 0600);
	R(fd >= 0);
	R(le__close(fd));
	R(le__rename(P("f"), Q("d")));
	R(le__unlink(P("d")));
	R(le__rename(P("e"), Q("d")));
	R(le__rename(P("d"), Q("d/x/y")));
	R(le__rename(P("missing"), Q("z")));
	R(le__rename(P("f"), Q("f")));
	R(le__lstat(P("d"), &st));
	R(S_ISDIR(st.st_mode));
	R(st.st_mode & 07777);
	R(le__stat(P("d/x/"), &st));
	char names[512] = "";
	fd = le__open(b, O_RDONLY | O_DIRECTORY, 0);
	R(fd >= 0);
	R(le__dir_each(fd, name_cat, names));
	R(le__close(fd));
	R(strcmp(names, "d/,e/,f ,"));
	fd = le__open(P("d"), O_RDONLY | O_DIRECTORY, 0);
	names[0] = '\0';
	R(le__dir_each(fd, name_cat, names));
	R(strcmp(names, "x ,"));
	R(le__close(fd));
	R(le__rename(P("d/x"), Q("e/x")));
	R(le__rename(P("e"), Q("d")));
	R(le__stat(P("d/x"), &st));
	R(le__stat(P("e"), &st));

	/* locks belong to an open descriptor */
	int fa = le__open(P("f"), O_RDWR, 0), fb = le__open(P("f"), O_RDWR, 0);
	R(fa >= 0 && fb >= 0);
	R(le__flock(fa, LOCK_EX | LOCK_NB));
	R(le__flock(fa, LOCK_EX | LOCK_NB));
	R(le__flock(fb, LOCK_EX | LOCK_NB));
	R(le__flock(fb, LOCK_SH | LOCK_NB));
	R(le__flock(fa, LOCK_SH | LOCK_NB));
	R(le__flock(fb, LOCK_SH | LOCK_NB));
	R(le__flock(fb, LOCK_EX | LOCK_NB));
	R(le__flock(fb, LOCK_UN));
	R(le__close(fa));
	R(le__flock(fb, LOCK_EX | LOCK_NB));

	/* a shared mapping and pread/pwrite see the same bytes */
	R(le__ftruncate(fb, 8192));
	unsigned char *m = le__mmap(NULL, 8192, PROT_READ | PROT_WRITE,
	                            MAP_SHARED, fb, 0);
	R(m != MAP_FAILED);
	R(le__pwrite_all(fb, "abc", 3, 4096));
	R(memcmp(m + 4096, "abc", 3));
	memcpy(m + 100, "xyz", 3);
	R(le__pread_full(fb, buf, 3, 100));
	R(memcmp(buf, "xyz", 3));
	R(le__madvise(m, 8192, MADV_DONTNEED)); /* drops pages, not bytes */
	R(memcmp(m + 100, "xyz", 3));
	R(le__munmap(m, 8192));
	m = le__mmap(NULL, 4096, PROT_READ, MAP_SHARED, fb, 4096);
	R(m != MAP_FAILED && !memcmp(m, "abc", 3));
	R(le__munmap(m, 4096));
	int fr = le__open(P("f"), O_RDONLY, 0);
	errno = 0;
	R(le__mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fr, 0) ==
	  MAP_FAILED);
	R(errno);
	R(le__close(fr));

	/* offsets */
	R(le__lseek(fb, 0, SEEK_END));
	R(le__lseek(fb, 8192, SEEK_DATA));
	R(le__lseek(fb, 8192, SEEK_HOLE));
	R(le__lseek(fb, 0, SEEK_DATA));
	R(le__lseek(fb, 0, SEEK_HOLE));
	R(le__lseek(fb, -1, SEEK_SET));

	/* times, unlink while open, O_TRUNC */
	struct timespec ts[2] = {{1000, 5}, {2000, 7}};
	R(le__futimens(fb, ts));
	R(le__fstat(fb, &st));
	R(st.st_mtim.tv_sec * 1000000000L + st.st_mtim.tv_nsec);
	R(st.st_atim.tv_sec * 1000000000L + st.st_atim.tv_nsec);
	R(le__unlink(P("f")));
	R(le__fstat(fb, &st));
	R(st.st_nlink);
	R(le__pread_full(fb, buf, 3, 4096));
	R(le__stat(P("f"), &st));
	R(le__close(fb));
	R(le__unlink(P("f")));
	fd = le__open(P("t"), O_WRONLY | O_CREAT, 0644);
	R(le__pwrite_all(fd, "12345", 5, 0));
	R(le__close(fd));
	fd = le__open(P("t"), O_WRONLY | O_TRUNC, 0);
	R(le__fstat(fd, &st));
	R(st.st_size);
	R(le__pread_full(fd, buf, 1, 0)); /* write-only: EBADF */
	R(le__ftruncate(fd, 3));
	R(le__close(fd));
	fd = le__open(P("t"), O_RDONLY, 0);
	R(le__pwrite_all(fd, "z", 1, 0));
	R(le__ftruncate(fd, 0));
	R(le__fstat(fd, &st));
	R(st.st_size);
	R(le__close(fd));
	fd = le__open(P("t"), O_RDONLY | O_TRUNC, 0); /* Linux cuts it */
	R(le__fstat(fd, &st));
	R(st.st_size);
	R(le__close(fd));

	/* paths with "." inside, trailing slashes, O_CREAT on a directory */
	fd = le__open(P("./u"), O_WRONLY | O_CREAT, 0600);
	R(fd >= 0);
	R(le__close(fd));
	fd = le__open(P("d/../u"), O_RDONLY, 0);
	R(fd >= 0);
	R(le__close(fd));
	R(le__open(P("d"), O_RDONLY | O_CREAT, 0600));
	R(le__rename(P("u"), Q("v/")));
	R(le__rename(P("u/"), Q("v")));
	R(le__mkdir(P("d/sub"), 0700));
	R(le__rename(P("d"), Q("w")));
	R(le__lstat(P("w"), &st));
	R(st.st_nlink);
	R(le__lstat(b, &st));
	R(st.st_nlink);
#undef P
#undef Q
}

/* A directory listed while each entry is removed as it is seen (what
 * the fuzz targets and the index builder do): every entry is seen once
 * and none is left, past the first buffer of entries too. */
static int unlink_seen(void *arg, const char *name, unsigned type)
{
	char p[512];
	(void)type;
	snprintf(p, sizeof p, "%s/%s", (const char *)arg, name);
	return le__unlink(p) == 0 ? 0 : -1;
}

static void list_while_removing(const char *base, struct outcome *o)
{
	char d[300], p[400];
	snprintf(d, sizeof d, "%s/many", base);
	R(le__mkdir(d, 0700));
	int made = 0;
	for (int i = 0; i < 300; i++) {
		snprintf(p, sizeof p, "%s/file-with-a-long-name-%04d", d, i);
		int fd = le__open(p, O_WRONLY | O_CREAT, 0600);
		made += fd >= 0 && le__close(fd) == 0;
	}
	R(made);
	int fd = le__open(d, O_RDONLY | O_DIRECTORY, 0);
	R(le__dir_each(fd, unlink_seen, d));
	R(le__close(fd));
	char names[64] = "";
	fd = le__open(d, O_RDONLY | O_DIRECTORY, 0);
	R(le__dir_each(fd, name_cat, names));
	R(le__close(fd));
	R(strlen(names)); /* none left */
}

TEST(listing_a_directory_while_removing_its_files_misses_none)
{
	char dir[256];
	struct outcome real = {0}, mem = {0};
	list_while_removing(t_tmpdir(dir), &real);
	CHECK_EQ(memfs_install(), 0);
	list_while_removing(MEMFS_ROOT, &mem);
	CHECK_EQ(memfs_uninstall(), 0);
	t_rmrf(dir);
	CHECK_EQ(mem.n, real.n);
	for (int i = 0; i < real.n; i++)
		if (mem.v[i] != real.v[i]) {
			fprintf(stderr, "  line %d: kernel %ld, memfs %ld\n",
			        real.line[i], real.v[i], mem.v[i]);
			CHECK(0);
		}
}

/* A mapping outlives its file's name and descriptor, as on Linux: the
 * bytes it sees are that file's, never a later file's. */
TEST(mapping_keeps_its_file_after_unlink_and_close)
{
	CHECK_EQ(memfs_install(), 0);
	const char *a = MEMFS_ROOT "/a", *b = MEMFS_ROOT "/b";
	int fd = le__open(a, O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK_RC(le__ftruncate(fd, 4096));
	char *m = le__mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	                   0);
	CHECK(m != MAP_FAILED);
	memcpy(m, "first", 5);
	CHECK_RC(le__close(fd));
	CHECK_RC(le__unlink(a));
	for (int i = 0; i < 40; i++) { /* more than memfs keeps for reuse */
		fd = le__open(b, O_RDWR | O_CREAT | O_TRUNC, 0600);
		CHECK(fd >= 0);
		CHECK_RC(le__pwrite_all(fd, "SECRET", 6, 0));
		CHECK_RC(le__close(fd));
		CHECK_RC(le__unlink(b));
	}
	CHECK(!memcmp(m, "first", 5));
	memcpy(m, "again", 5); /* lands in the old file, nowhere else */
	CHECK_RC(le__munmap(m, 4096));
	CHECK_EQ(memfs_uninstall(), 0);
}

TEST(memfs_answers_the_table_calls_as_the_kernel_does)
{
	char dir[256];
	struct outcome real, mem;

	script(t_tmpdir(dir), &real);
	CHECK_EQ(memfs_install(), 0);
	script(MEMFS_ROOT, &mem);
	CHECK_EQ(memfs_uninstall(), 0); /* the script closed all it opened */
	t_rmrf(dir);
	CHECK_EQ(mem.n, real.n);
	int bad = 0;
	for (int i = 0; i < real.n; i++)
		if (mem.v[i] != real.v[i]) {
			fprintf(stderr, "  line %d: kernel %ld, memfs %ld\n",
			        real.line[i], real.v[i], mem.v[i]);
			bad++;
		}
	printf("  %d answers compared\n", real.n);
	CHECK_EQ(bad, 0);
}

/* ---- an engine on memfs, and nothing below it ---- */

static _Atomic long below_calls;
static const le__os *real_os;
static char below_what[128];

static void saw(const char *what)
{
	if (atomic_fetch_add(&below_calls, 1) == 0)
		snprintf(below_what, sizeof below_what, "%s", what);
}

static int c_open(const char *p, int f, mode_t m)
{
	saw(p);
	return real_os->open(p, f, m);
}
static int c_openat(int d, const char *p, int f, mode_t m)
{
	saw(p);
	return real_os->openat(d, p, f, m);
}
static int c_close(int fd)
{
	saw("close");
	return real_os->close(fd);
}
static ssize_t c_pread(int fd, void *b, size_t n, off_t o)
{
	saw("pread");
	return real_os->pread(fd, b, n, o);
}
static ssize_t c_pwrite(int fd, const void *b, size_t n, off_t o)
{
	saw("pwrite");
	return real_os->pwrite(fd, b, n, o);
}
static int c_fstat(int fd, struct stat *st)
{
	saw("fstat");
	return real_os->fstat(fd, st);
}
static int c_fstatat(int d, const char *p, struct stat *st, int f)
{
	saw(p);
	return real_os->fstatat(d, p, st, f);
}
static int c_unlink(const char *p)
{
	saw(p);
	return real_os->unlink(p);
}
static int c_mkdir(const char *p, mode_t m)
{
	saw(p);
	return real_os->mkdir(p, m);
}
static int c_rename(const char *a, const char *b)
{
	saw(a);
	return real_os->rename(a, b);
}
static int c_flock(int fd, int op)
{
	saw("flock");
	return real_os->flock(fd, op);
}
static ssize_t c_getdents(int fd, void *b, size_t n)
{
	saw("getdents");
	return real_os->getdents(fd, b, n);
}
static void *c_mmap(void *a, size_t n, int p, int f, int fd, off_t o)
{
	if (!(f & MAP_ANONYMOUS)) /* memfs reserves space, maps no file */
		saw("mmap of a file");
	return real_os->mmap(a, n, p, f, fd, o);
}
static int c_ftruncate(int fd, off_t n)
{
	saw("ftruncate");
	return real_os->ftruncate(fd, n);
}

/* The real table with every file call counted (mappings of anonymous
 * memory, munmap and madvise pass: memfs's views are real mappings). */
static void install_counting(void)
{
	static le__os t;
	real_os = &le__os_real;
	t = le__os_real;
	t.open = c_open;
	t.openat = c_openat;
	t.close = c_close;
	t.pread = c_pread;
	t.pwrite = c_pwrite;
	t.fstat = c_fstat;
	t.fstatat = c_fstatat;
	t.unlink = c_unlink;
	t.mkdir = c_mkdir;
	t.rename = c_rename;
	t.flock = c_flock;
	t.getdents = c_getdents;
	t.mmap = c_mmap;
	t.ftruncate = c_ftruncate;
	le__os_install(&t);
}

struct seqs {
	uint64_t last;
	long n, out_of_order;
};

static void count_seq(const le_record *r, void *arg)
{
	struct seqs *s = arg;
	if (r->seq <= s->last && s->n)
		s->out_of_order++;
	s->last = r->seq;
	s->n++;
}

static int count_idx(void *arg, const char *name, unsigned type)
{
	(void)type;
	size_t n = strlen(name);
	*(int *)arg += n > 4 && !strcmp(name + n - 4, ".idx");
	return 0;
}

/* An engine's whole life on memfs: rotation, seals and index builds, the
 * live page (read and kept by a reader), the queue's pending count, a
 * second engine refused by the lock, the reader, retention.  @return the
 * segments made; a failed step fails the test. */
static long engine_life(void)
{
	const char *dir = MEMFS_ROOT "/log";
	char msg[128], shard[200];

	le_config c;
	le_config_init(&c);
	c.dir = dir;
	c.create_dir = 1;
	c.segment_bytes = 64 << 10; /* rotation, seals, index builds */
	c.retention_bytes = 256 << 10; /* retention deletes */
	c.flush_ms = 5;
	c.overflow = LE_OVERFLOW_BLOCK;
	le_engine *e = t_open(&c);
	for (int i = 0; i < 5000; i++) {
		int n = snprintf(msg, sizeof msg, "record %d of the memfs run, "
		                 "long enough to fill segments", i);
		CHECK_RC(le_write(e, 0, LE_INFO, msg, (size_t)n));
	}
	CHECK_RC(le_flush(e, 10000));
	le_stats st;
	CHECK_RC(le_stats_get(e, &st));
	CHECK_EQ(st.live_pages_off, 0); /* STATS made in memfs */
	le_live_dir *ld;
	le_live l;
	CHECK_RC(le_live_open(&ld, dir));
	CHECK_RC(le_live_get(ld, 0, &l));
	CHECK_EQ(l.state, LE_LIVE_RUNNING);
	uint64_t pending;
	CHECK_RC(le_queue_pending(dir, 0, &pending));
	/* a second engine on the same directory: the LOCK is held */
	le_engine *e2;
	CHECK_EQ(le_open(&e2, &c), LE_EBUSY);
	CHECK_RC(le_close_stats(e, &st));
	CHECK(st.segments_created > 5);
	CHECK(st.segments_deleted > 0);
	CHECK_RC(le_live_get(ld, 0, &l));
	CHECK_EQ(l.state, LE_LIVE_CLOSED);
	le_live_close(ld);

	struct seqs s = {0, 0, 0};
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, count_seq, &s) > 0);
	CHECK_EQ(s.out_of_order, 0);
	CHECK_EQ(s.last, 5000); /* the newest record is the last one read */
	int idx = 0;
	snprintf(shard, sizeof shard, "%s/shard-000", dir);
	int fd = le__open(shard, O_RDONLY | O_DIRECTORY, 0);
	CHECK(fd >= 0);
	CHECK_RC(le__dir_each(fd, count_idx, &idx));
	le__close(fd);
	printf("  %llu segments made, %llu deleted, %d indexed, %lu memfs "
	       "calls\n", (unsigned long long)st.segments_created,
	       (unsigned long long)st.segments_deleted, idx, memfs_calls());
	CHECK(idx > 0); /* the index builder wrote through the table */
	CHECK_EQ(memfs_open_fds(), 0);
	return (long)st.segments_created;
}

TEST(whole_engine_runs_on_memfs_and_no_file_call_reaches_the_os)
{
	install_counting();
	CHECK_EQ(memfs_install(), 0);
	engine_life();
	if (below_calls)
		fprintf(stderr, "  first call that reached the OS: %s\n",
		        below_what);
	CHECK_EQ(below_calls, 0);
	memfs_uninstall();
	le__os_install(NULL);
}

/* Is n one of memfs's descriptors? */
static int memfs_fd_number(long long n)
{
	return n >= MEMFS_FD0 && n < MEMFS_FD0 + MEMFS_FDS;
}

/*
 * A call made around the table names a memfs path or descriptor to the
 * kernel, which fails it quietly (ENOENT, EBADF): the counting table
 * cannot see it.  strace can: the engine's life again, in a child under
 * strace, and no system call may carry a memfs path or, as a descriptor
 * argument, a memfs descriptor.
 */
TEST(no_system_call_names_a_memfs_path_or_descriptor)
{
	const char *strace = t_need_tool("strace");
	char dir[256], out[300], self[512];
	t_tmpdir(dir);
	snprintf(out, sizeof out, "%s/trace", dir);
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	CHECK(n > 0);
	self[n] = '\0';
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		setenv("LE_MEMFS_ENGINE_LIFE", "1", 1);
		/* LeakSanitizer cannot run under ptrace: the leak check is
		 * the other tests' (this one looks at system calls) */
		const char *asan = getenv("ASAN_OPTIONS");
		char opts[512];
		snprintf(opts, sizeof opts, "%s%sdetect_leaks=0",
		         asan ? asan : "", asan && *asan ? ":" : "");
		setenv("ASAN_OPTIONS", opts, 1);
		execl(strace, "strace", "-f", "-qq", "-o", out, "-e",
		      "trace=%file,%desc,%memory", self, (char *)NULL);
		_exit(127);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	FILE *f = fopen(out, "r");
	CHECK(f);
	char line[4096];
	long lines = 0, bad = 0;
	while (fgets(line, sizeof line, f)) {
		lines++;
		char *call = strchr(line, ' '), *args;
		if (!call || !(args = strchr(call, '(')))
			continue;
		int hit = strstr(line, MEMFS_ROOT) != NULL;
		/* the first argument (a descriptor for every %desc call that
		 * takes one) and mmap's fifth */
		long long a0 = strtoll(args + 1, NULL, 10);
		hit |= memfs_fd_number(a0);
		if (!strncmp(call + 1, "mmap(", 5)) {
			char *p = args;
			for (int k = 0; k < 4 && p; k++)
				p = strchr(p + 1, ',');
			hit |= p && memfs_fd_number(strtoll(p + 1, NULL, 10));
		}
		if (hit && bad++ < 5)
			fprintf(stderr, "  around the table: %s", line);
	}
	fclose(f);
	printf("  %ld system calls traced\n", lines);
	CHECK(lines > 100);
	CHECK_EQ(bad, 0);
	t_rmrf(dir);
}

TEST(call_around_the_table_fails_instead_of_reaching_a_disk)
{
	CHECK_EQ(memfs_install(), 0);
	CHECK_RC(memfs_put(MEMFS_ROOT "/d/f", "abc", 3));
	int fd = le__open(MEMFS_ROOT "/d/f", O_RDONLY, 0);
	CHECK(fd >= MEMFS_FD0);
	struct stat st;
	errno = 0;
	CHECK(fstat(fd, &st) < 0 && errno == EBADF);
	errno = 0;
	CHECK(open(MEMFS_ROOT "/d/f", O_RDONLY) < 0 && errno == ENOENT);
	CHECK(mkdir(MEMFS_ROOT, 0700) < 0);
	CHECK(open(MEMFS_ROOT "/x", O_WRONLY | O_CREAT, 0600) < 0);
	CHECK_EQ(le__close(fd), 0);
	void *data;
	CHECK_EQ(memfs_get(MEMFS_ROOT "/d/f", &data), 3);
	CHECK(!memcmp(data, "abc", 3));
	free(data);
	CHECK_EQ(memfs_uninstall(), 0);
}

int main(int argc, char **argv)
{
	if (getenv("LE_MEMFS_ENGINE_LIFE")) { /* the traced child */
		CHECK_EQ(memfs_install(), 0);
		engine_life();
		return memfs_uninstall() == 0 ? 0 : 1;
	}
	T_INIT(argc, argv);
	t_allow_jobs();
	RUN(memfs_answers_the_table_calls_as_the_kernel_does);
	RUN(listing_a_directory_while_removing_its_files_misses_none);
	RUN(mapping_keeps_its_file_after_unlink_and_close);
	RUN(whole_engine_runs_on_memfs_and_no_file_call_reaches_the_os);
	RUN(no_system_call_names_a_memfs_path_or_descriptor);
	RUN(call_around_the_table_fails_instead_of_reaching_a_disk);
	return t_done();
}
