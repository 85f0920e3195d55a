/*
 * seg_zst.c -- archived segments (seg_zst.h): the crash-safe compression
 * of a sealed segment, and reading a segment whether it is NAME.seg or
 * NAME.seg.zst.
 *
 * The writing side goes through the OS-call table (os.h) like every other
 * change the engine makes to its directory, so the fault tests can stop
 * it at each step.  Reading decompresses the whole archive into a memfd:
 * the scanner, the index and the seek code then pread it as they pread a
 * segment file, and the deferred records' back-pointers (an offset earlier
 * in the file) work unchanged.
 */
#define _GNU_SOURCE
#include "store/seg_zst.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef LE_HAVE_ZSTD
#include <zstd.h>
#include <zstd_errors.h>
#endif

#include "base/internal.h"
#include "base/os.h"
#include "logengine.h"

#define CHUNK (1u << 20)
#define ZPATH_MAX (LE_PATH_MAX + 16)

static int zst_name(char *out, const char *seg_path, const char *more)
{
	int n = snprintf(out, ZPATH_MAX, "%s" LE_ZST_SUFFIX "%s", seg_path,
	                 more);
	return (n < 0 || n >= ZPATH_MAX) ? -ENAMETOOLONG : 0;
}

int le__seg_stat(const char *seg_path, uint64_t *bytes, uint64_t *mtime_ns)
{
	char z[ZPATH_MAX];
	struct stat st;
	int which = 0;

	int rc = le__stat(seg_path, &st);
	if (rc < 0) {
		if (rc != -ENOENT || (rc = zst_name(z, seg_path, "")) < 0 ||
		    (rc = le__stat(z, &st)) < 0)
			return rc;
		which = 1;
	}
	*bytes = (uint64_t)st.st_size;
	*mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u +
	            (uint64_t)st.st_mtim.tv_nsec;
	return which;
}

/*
 * A segment's names change under a claim on that segment, in this
 * process: deletion (retention, the reaper, the writer) and the
 * archiver's rename-then-unlink.  Without it, retention could unlink a
 * segment while the archiver compressed it, and the archive, renamed
 * after, would bring a deleted segment back for readers (a hole in the
 * middle of the chain: a "sequence gap") until the archiver saw the
 * segment gone and removed it, or for good after a crash in between.
 * The claim is per segment (a hash of its path): a slow unlink of one
 * segment never holds up the deletion of another.  Held over a
 * directory fsync at most.
 */
#define CLAIMS 32
static pthread_mutex_t claim_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t claim_cv = PTHREAD_COND_INITIALIZER;
static uint64_t claims[CLAIMS]; /* path hashes held; 0: free */

static uint64_t path_hash(const char *p)
{
	uint64_t h = 1469598103934665603ull;
	while (*p)
		h = (h ^ (unsigned char)*p++) * 1099511628211ull;
	return h ? h : 1;
}

static uint64_t claim(const char *seg_path)
{
	uint64_t h = path_hash(seg_path);
	pthread_mutex_lock(&claim_mu);
	for (;;) {
		int held = 0, free_at = -1;
		for (int i = 0; i < CLAIMS; i++) {
			held |= claims[i] == h;
			if (!claims[i] && free_at < 0)
				free_at = i;
		}
		if (!held && free_at >= 0) {
			claims[free_at] = h;
			break;
		}
		pthread_cond_wait(&claim_cv, &claim_mu);
	}
	pthread_mutex_unlock(&claim_mu);
	return h;
}

static void unclaim(uint64_t h)
{
	pthread_mutex_lock(&claim_mu);
	for (int i = 0; i < CLAIMS; i++)
		if (claims[i] == h) {
			claims[i] = 0;
			break;
		}
	pthread_cond_broadcast(&claim_cv);
	pthread_mutex_unlock(&claim_mu);
}

/* A segment (or archive) with a second name elsewhere may be another
 * log's, linked in (ln, cp -al): read as this log's, its records would be
 * shown as this log's.  The engine itself never links a file, so one of
 * its own always has exactly one name (zero once unlinked under a
 * reader).  @return 0, or LE_EUNSAFE with le_errmsg naming the file. */
static int one_name(const char *path, const struct stat *st)
{
	if (st->st_nlink <= 1)
		return 0;
	/* "shard-NNN/NAME", as le__open_in names what it refuses */
	const char *rel = path + strlen(path);
	for (int slashes = 0; rel > path; rel--)
		if (rel[-1] == '/' && ++slashes == 2)
			break;
	le__seterr("%s has %lu hard links; refusing to read it as this "
	           "log's (it may be another log's)", rel,
	           (unsigned long)st->st_nlink);
	return LE_EUNSAFE;
}

int le__seg_unlink(const char *seg_path)
{
	char z[ZPATH_MAX];
	int rc;

	if ((rc = zst_name(z, seg_path, "")) < 0)
		return rc;
	/* Both names: a crash in the archiver's sequence leaves both (a
	 * reader takes the segment), and neither may outlive deletion. */
	uint64_t h = claim(seg_path);
	int a = le__unlink(seg_path), b = le__unlink(z);
	unclaim(h);
	/* Nor its time index, NAME.idx beside it (index.h): deleted here,
	 * by whoever deletes the segment, it never waits for the index
	 * builder's next sweep of orphans. */
	size_t n = strlen(seg_path);
	if (n > 4 && strcmp(seg_path + n - 4, ".seg") == 0) {
		memcpy(z, seg_path, n - 4);
		memcpy(z + n - 4, ".idx", 5);
		le__unlink(z);
	}
	if (a == 0 || b == 0)
		return 0;
	return a != -ENOENT ? a : b;
}

/* Is name IIIIIIIIIIIIIIII.seg followed by suffix? */
static int seg_named(const char *name, const char *suffix)
{
	return strspn(name, "0123456789abcdef") == 16 &&
	       strncmp(name + 16, ".seg", 4) == 0 &&
	       strcmp(name + 20, suffix) == 0;
}

static int tidy_one(void *arg, const char *nm, unsigned type)
{
	const char *shard_dir = arg;
	char path[ZPATH_MAX + 300], seg[ZPATH_MAX + 300];
	struct stat st;
	int drop = 0;

	(void)type;
	if (seg_named(nm, LE_ZST_SUFFIX ".tmp")) {
		drop = 1;
	} else if (seg_named(nm, LE_ZST_SUFFIX)) {
		/* A crash between rename and unlink: the original is whole
		 * and is what readers take; compress it again later rather
		 * than trust two copies. */
		snprintf(seg, sizeof seg, "%s/%.20s", shard_dir, nm);
		drop = le__lstat(seg, &st) == 0 && S_ISREG(st.st_mode);
	}
	if (drop) {
		snprintf(path, sizeof path, "%s/%s", shard_dir, nm);
		le__unlink(path);
	}
	return 0;
}

void le__zst_tidy(const char *shard_dir)
{
	int fd = le__open_in(shard_dir, LE_IN_DIR, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return;
	le__dir_each(fd, tidy_one, (void *)shard_dir);
	le__close(fd);
}

#ifdef LE_HAVE_ZSTD

int le__zst_built(void)
{
	return 1;
}

/* Stream in_fd's len bytes through zstd into out_fd.  @return 0, -errno,
 * -ECANCELED, LE_ENOMEM. */
static int compress_fd(int in_fd, uint64_t len, int out_fd, int level,
                       const _Atomic int *stop, uint64_t *zbytes)
{
	size_t ocap = ZSTD_CStreamOutSize();
	unsigned char *ib = malloc(CHUNK), *ob = malloc(ocap);
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	uint64_t in_off = 0, out_off = 0;
	int rc = (ib && ob && cc) ? 0 : LE_ENOMEM;

	if (rc == 0 &&
	    (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel,
	                                         level)) ||
	     ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1)) ||
	     ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(cc, len))))
		rc = -EINVAL;
	while (rc == 0) {
		if (stop && atomic_load_explicit(stop, memory_order_relaxed)) {
			rc = -ECANCELED;
			break;
		}
		size_t want = len - in_off < CHUNK ? (size_t)(len - in_off) : CHUNK;
		ssize_t got = le__pread_full(in_fd, ib, want, in_off);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		if ((size_t)got != want) {
			rc = -EIO; /* the sealed file shrank under us */
			break;
		}
		in_off += want;
		int last = in_off == len;
		ZSTD_inBuffer in = {ib, want, 0};
		size_t left;
		do {
			ZSTD_outBuffer out = {ob, ocap, 0};
			left = ZSTD_compressStream2(cc, &out, &in,
			                            last ? ZSTD_e_end
			                                 : ZSTD_e_continue);
			if (ZSTD_isError(left)) {
				rc = -EIO;
				break;
			}
			if (out.pos &&
			    (rc = le__pwrite_all(out_fd, ob, out.pos, out_off)) < 0)
				break;
			out_off += out.pos;
		} while (last ? left != 0 : in.pos < in.size);
		if (last)
			break;
	}
	ZSTD_freeCCtx(cc);
	free(ib);
	free(ob);
	*zbytes = out_off;
	return rc;
}

int le__zst_archive(const char *shard_dir, uint64_t index, int level,
                    const _Atomic int *stop, uint64_t *bytes,
                    uint64_t *zbytes)
{
	char seg[LE_PATH_MAX], z[ZPATH_MAX], tmp[ZPATH_MAX];
	struct stat st;
	int in_fd, out_fd = -1, rc;

	*bytes = *zbytes = 0;
	/* (le__seg_path's name: segment.c reads through this file) */
	rc = snprintf(seg, sizeof seg, "%s/%016" PRIx64 ".seg", shard_dir,
	              index);
	if (rc < 0 || (size_t)rc >= sizeof seg)
		return -ENAMETOOLONG;
	if ((rc = zst_name(z, seg, "")) < 0 ||
	    (rc = zst_name(tmp, seg, ".tmp")) < 0)
		return rc;
	in_fd = le__open_in(seg, LE_IN_SHARD, O_RDONLY, 0);
	if (in_fd < 0)
		return in_fd;
	if ((rc = le__fstat(in_fd, &st)) < 0)
		goto out;
	if ((uint64_t)st.st_size > LE_ZST_MAX_BYTES) {
		rc = -EFBIG;
		goto out;
	}
	*bytes = (uint64_t)st.st_size;
	/* 1. the archive, under a name no reader looks at */
	out_fd = le__open_in(tmp, LE_IN_SHARD, O_WRONLY | O_CREAT | O_TRUNC,
	                     st.st_mode & 0777);
	if (out_fd < 0) {
		rc = out_fd;
		goto out;
	}
	rc = compress_fd(in_fd, (uint64_t)st.st_size, out_fd, level, stop,
	                 zbytes);
	/* Its times are the segment's: retention and archiving by age go
	 * by when the records were written, not when they were packed. */
	struct timespec ts[2] = {st.st_atim, st.st_mtim};
	if (rc == 0)
		rc = le__futimens(out_fd, ts);
	/* 2. its bytes on stable storage before any name points at them */
	if (rc == 0)
		rc = le__fdatasync(out_fd);
	le__close(out_fd);
	out_fd = -1;
	if (rc == 0 && stop && atomic_load(stop))
		rc = -ECANCELED;
	/* 3. the archive appears whole or not at all, and only for a
	 * segment that is still there (its claim: deletion waits) */
	uint64_t h = claim(seg);
	if (rc == 0 && le__fstat(in_fd, &st) == 0 && st.st_nlink == 0)
		rc = -ENOENT; /* deleted meanwhile: so goes its archive */
	if (rc == 0)
		rc = le__rename(tmp, z);
	if (rc < 0) {
		unclaim(h);
		le__unlink(tmp);
		goto out;
	}
	/* 4. the new name durable before the only other copy goes */
	rc = le__fsync_dir_in(shard_dir, LE_IN_DIR);
	if (rc < 0) {
		/* The segment stays the copy: the archive goes now (left
		 * beside it, it would outlive the segment's deletion by
		 * retention, which unlinks an archive only once its segment
		 * is gone).  Should its name come back after a power cut,
		 * the next le_open removes it. */
		le__unlink(z);
		unclaim(h);
		goto out;
	}
	/* 5. the original */
	rc = le__unlink(seg);
	if (rc == -ENOENT) {
		/* Deleted by another process (vacuum): so goes this. */
		le__unlink(z);
	}
	unclaim(h);
out:
	if (out_fd >= 0)
		le__close(out_fd);
	le__close(in_fd);
	return rc;
}

/* Why an archive does not decode, in words. */
static const char *zerr(size_t code)
{
	switch (ZSTD_getErrorCode(code)) {
	case ZSTD_error_checksum_wrong:
		return "archive damaged: its content does not match its "
		       "checksum";
	case ZSTD_error_prefix_unknown:
		return "archive damaged: not a zstd frame";
	case ZSTD_error_srcSize_wrong:
		return "archive damaged: cut short, or bytes after its frame";
	default:
		return "archive damaged: its zstd frame does not decode";
	}
}

/* Read all of fd (len bytes) into a buffer.  @return it, or NULL. */
static unsigned char *slurp(int fd, uint64_t len, int *rc)
{
	unsigned char *b = malloc(len ? (size_t)len : 1);
	if (!b) {
		*rc = LE_ENOMEM;
		return NULL;
	}
	ssize_t got = le__pread_full(fd, b, (size_t)len, 0);
	if (got < 0 || (uint64_t)got != len) {
		*rc = got < 0 ? (int)got : LE_ECORRUPT;
		free(b);
		return NULL;
	}
	return b;
}

/* The archive at path decompressed into a memfd.  @return the fd or < 0. */
static int zst_open(const char *path, const char **why)
{
	struct stat st;
	unsigned char *src = NULL;
	void *map = MAP_FAILED;
	int mfd = -1, rc = 0;
	unsigned long long size = 0;
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);

	if (fd < 0)
		return fd;
	if ((rc = le__fstat(fd, &st)) < 0)
		goto out;
	rc = one_name(path, &st);
	if (rc < 0)
		goto out;
	/* zstd never grows data by more than a small fraction. */
	if ((uint64_t)st.st_size > LE_ZST_MAX_BYTES + (LE_ZST_MAX_BYTES >> 6)) {
		*why = "archive larger than any archive is made";
		rc = LE_ECORRUPT;
		goto out;
	}
	if (!(src = slurp(fd, (uint64_t)st.st_size, &rc)))
		goto out;
	size = ZSTD_getFrameContentSize(src, (size_t)st.st_size);
	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
		*why = size == ZSTD_CONTENTSIZE_ERROR
		               ? "archive damaged: not a zstd frame"
		               : "archive damaged: its frame has no content size";
		rc = LE_ECORRUPT;
		goto out;
	}
	if (size > LE_ZST_MAX_BYTES) {
		*why = "archive damaged: content size above 1 GiB";
		rc = LE_ECORRUPT;
		goto out;
	}
	if (ZSTD_findFrameCompressedSize(src, (size_t)st.st_size) !=
	    (size_t)st.st_size) {
		*why = "archive damaged: cut short, or bytes after its frame";
		rc = LE_ECORRUPT;
		goto out;
	}
	mfd = memfd_create("le-archive", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, (off_t)size) < 0) {
		rc = -errno;
		goto out;
	}
	if (size) {
		/* populated at once: one fault per page would cost more
		 * than the decompression */
		map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
		           MAP_SHARED | MAP_POPULATE, mfd, 0);
		if (map == MAP_FAILED) {
			rc = -errno;
			goto out;
		}
	}
	/* An empty content is decoded too: its blocks and checksum are
	 * what says the archive is whole. */
	unsigned char none[1];
	size_t n = ZSTD_decompress(size ? map : none, (size_t)size, src,
	                           (size_t)st.st_size);
	if (ZSTD_isError(n) || n != size) {
		*why = ZSTD_isError(n) ? zerr(n)
		                       : "archive damaged: content shorter "
		                         "than its size";
		rc = LE_ECORRUPT;
	}
out:
	if (map != MAP_FAILED)
		munmap(map, (size_t)size);
	free(src);
	le__close(fd);
	if (rc < 0) {
		if (mfd >= 0)
			close(mfd);
		return rc;
	}
	return mfd;
}

/* The first cap bytes of the archive at path, and its content size. */
static ssize_t zst_head(const char *path, void *buf, size_t cap,
                        uint64_t *len)
{
	unsigned char ib[4096];
	uint64_t off = 0;
	ssize_t rc = 0;
	ZSTD_outBuffer out = {buf, cap, 0};
	int fd = le__open_in(path, LE_IN_SHARD, O_RDONLY, 0);

	if (fd < 0)
		return fd;
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	if (!dc) {
		le__close(fd);
		return LE_ENOMEM;
	}
	*len = 0;
	while (out.pos < out.size) {
		ssize_t got = le__pread_full(fd, ib, sizeof ib, off);
		if (got <= 0) {
			rc = got < 0 ? got : LE_ECORRUPT;
			break;
		}
		if (off == 0) {
			unsigned long long s = ZSTD_getFrameContentSize(ib,
			                                        (size_t)got);
			if (s == ZSTD_CONTENTSIZE_ERROR ||
			    s == ZSTD_CONTENTSIZE_UNKNOWN || s > LE_ZST_MAX_BYTES) {
				rc = LE_ECORRUPT;
				break;
			}
			*len = s;
			if (out.size > s)
				out.size = (size_t)s;
		}
		off += (uint64_t)got;
		ZSTD_inBuffer in = {ib, (size_t)got, 0};
		size_t r = 0;
		while (in.pos < in.size && out.pos < out.size) {
			r = ZSTD_decompressStream(dc, &out, &in);
			if (ZSTD_isError(r))
				break;
		}
		if (ZSTD_isError(r)) {
			rc = LE_ECORRUPT;
			break;
		}
	}
	ZSTD_freeDCtx(dc);
	le__close(fd);
	return rc < 0 ? rc : (ssize_t)out.pos;
}

#else /* no zstd */

int le__zst_built(void)
{
	return 0;
}

int le__zst_archive(const char *shard_dir, uint64_t index, int level,
                    const _Atomic int *stop, uint64_t *bytes,
                    uint64_t *zbytes)
{
	(void)shard_dir, (void)index, (void)level, (void)stop;
	*bytes = *zbytes = 0;
	return -ENOTSUP;
}

static int zst_open(const char *path, const char **why)
{
	(void)path;
	*why = "archived segment, and this build has no zstd";
	return LE_ECORRUPT;
}

static ssize_t zst_head(const char *path, void *buf, size_t cap,
                        uint64_t *len)
{
	(void)path, (void)buf, (void)cap;
	*len = 0;
	return LE_ECORRUPT;
}

#endif

int le__seg_open_read(const char *seg_path, int *archived, const char **why)
{
	char z[ZPATH_MAX];
	struct stat st;
	int rc, fd = le__open_in(seg_path, LE_IN_SHARD, O_RDONLY, 0);

	*archived = 0;
	if (fd >= 0) {
		rc = le__fstat(fd, &st);
		if (rc == 0)
			rc = one_name(seg_path, &st);
		if (rc < 0) {
			le__close(fd);
			return rc;
		}
		return fd;
	}
	if (fd != -ENOENT || zst_name(z, seg_path, "") < 0)
		return fd;
	fd = zst_open(z, why); /* it checks the archive's names */
	*archived = fd != -ENOENT;
	return fd;
}

ssize_t le__seg_head(const char *seg_path, void *buf, size_t cap,
                     uint64_t *len, int *archived)
{
	char z[ZPATH_MAX];
	struct stat st;
	int fd = le__open_in(seg_path, LE_IN_SHARD, O_RDONLY, 0);

	*archived = 0;
	if (fd == -ENOENT && zst_name(z, seg_path, "") == 0) {
		ssize_t rc = zst_head(z, buf, cap, len);
		*archived = rc != -ENOENT;
		return rc;
	}
	if (fd < 0)
		return fd;
	int rc = le__fstat(fd, &st);
	ssize_t got = rc < 0 ? rc : le__pread_full(fd, buf, cap, 0);
	*len = got < 0 ? 0 : (uint64_t)st.st_size;
	le__close(fd);
	return got;
}
