/*
 * vacuum.c -- logengine vacuum --size N / --time T: delete the oldest
 * sealed segments (and their indexes), as journalctl --vacuum-size and
 * --vacuum-time do.
 *
 * What may go.  A shard's last segment is its active one (an engine, live
 * now or the next to open the directory, appends to it): never deleted.
 * Only whole prefixes of a shard go, oldest first, so a reader never sees
 * a hole in the middle of a shard.  A segment past what the forwarder has
 * shipped (shipped_up_to) stays unless --force.  Whether an engine is
 * live does not matter: it only ever writes its last segment, and its
 * retention tolerates a segment already gone.
 *
 * When a segment's records end: no later than the creation time of the
 * segment after it (the writer seals one before it creates the next),
 * read from that segment's header.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char vacuum_help[] =
	"usage: logengine vacuum [--size SIZE] [--time TIME] [--force]\n"
	"                        [--dry-run] DIR\n"
	"\n"
	"Delete the oldest sealed segments of the log in DIR, with their\n"
	"indexes, never a shard's last (active) segment, and only from the\n"
	"oldest end of each shard.\n"
	"\n"
	"  --size SIZE   until the segments take at most SIZE (bytes\n"
	"                allocated, as du: 500M, 2G; K M G T are powers of\n"
	"                1024)\n"
	"  --time TIME   every segment whose records are all older than TIME:\n"
	"                a span back from now (2d, 12h, '1 week') or a time as\n"
	"                cat --since takes it\n"
	"                (--vacuum-size and --vacuum-time, journalctl's names,\n"
	"                are the same)\n"
	"  --force       also segments a forwarder has not shipped yet\n"
	"  --dry-run     say what would be deleted, delete nothing\n"
	"  -h, --help    this text\n"
	"\n"
	"exit status: 0; 1 a file could not be deleted; 2 usage error, not a\n"
	"log directory.\n";

struct seg {
	unsigned shard;
	uint64_t index;
	uint64_t bytes;   /* allocated: segment and index */
	uint64_t end_ns;  /* its records are no newer (0: unknown) */
	int sealed;       /* not the shard's last */
	int keep;         /* not shipped: stays without --force */
};

struct vac {
	const char *dir;
	int has_size, has_time, force, dry;
	uint64_t size, cutoff;
	struct seg *s;
	size_t n, cap;
};

static int parse_size(const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (end == v || errno || x < 0)
		return -1;
	static const char units[] = "KMGTPE";
	const char *u = *end ? strchr(units, *end) : NULL;
	if (*end && !u)
		return -1;
	if (u) {
		for (const char *p = units; p <= u; p++)
			x *= 1024;
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B')
			end++;
	} else if (*end == 'B') {
		end++;
	}
	if (*end || x > 1.8e19)
		return -1;
	*out = (uint64_t)x;
	return 0;
}

/* --time: a span back from now, or a time. */
static int parse_cutoff(const char *v, uint64_t *out)
{
	char buf[160];
	if (v[0] != '-' && v[0] != '+' && v[0] != '@' && strlen(v) < 150) {
		snprintf(buf, sizeof buf, "-%s", v);
		if (parse_time(buf, 0, out) == 0)
			return 0;
	}
	return parse_time(v, 0, out);
}

static int parse_vacuum(int argc, char **argv, struct vac *v)
{
	const char *val;
	int m;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(vacuum_help, stdout);
			return 1;
		} else if ((m = opt_value(argv, argc, &i, NULL, "--size", &val)) ||
		           (m = opt_value(argv, argc, &i, NULL, "--vacuum-size",
		                          &val))) {
			if (m < 0)
				return -1;
			if (parse_size(val, &v->size) < 0)
				return usage_error("--size '%s': expected bytes, or "
				                   "a number with K, M, G or T", val);
			v->has_size = 1;
		} else if ((m = opt_value(argv, argc, &i, NULL, "--time", &val)) ||
		           (m = opt_value(argv, argc, &i, NULL, "--vacuum-time",
		                          &val))) {
			if (m < 0)
				return -1;
			if (parse_cutoff(val, &v->cutoff) < 0)
				return usage_error("--time '%s': expected a span "
				                   "(2d, 12h) or a time", val);
			v->has_time = 1;
		} else if (!strcmp(a, "--force")) {
			v->force = 1;
		} else if (!strcmp(a, "--dry-run")) {
			v->dry = 1;
		} else if (a[0] == '-' && a[1]) {
			return usage_error("unknown option '%s'", a);
		} else if (v->dir) {
			return usage_error("unexpected argument '%s'", a);
		} else {
			v->dir = a;
		}
	}
	if (!v->dir) {
		fprintf(stderr, "%s vacuum: missing DIR\n", prog);
		fputs(vacuum_help, stderr);
		return -1;
	}
	if (!v->has_size && !v->has_time)
		return usage_error("vacuum: say how much to keep: --size or "
		                   "--time%s", "");
	return 0;
}


/* Creation time in a segment header (docs/FORMAT.md: bytes 40..47); 0
 * when there is none to read (an archived segment, NAME.seg.zst, whose
 * header is compressed). */
static uint64_t created_ns(const char *path)
{
	unsigned char h[64];
	uint64_t v = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
	    !memcmp(h, "LOGENGSG", 8))
		for (int i = 7; i >= 0; i--)
			v = v << 8 | h[40 + i];
	close(fd);
	return v;
}

static uint64_t allocated(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* When segment (or archive) path was last written, ns; 0 if unknown. */
static uint64_t written_ns(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;
	return (uint64_t)st.st_mtim.tv_sec * 1000000000u +
	       (uint64_t)st.st_mtim.tv_nsec;
}

/* What a file that should be a regular one is instead, or NULL when it
 * is one (or is not there). */
static const char *not_regular(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0 || S_ISREG(st.st_mode))
		return NULL;
	return S_ISLNK(st.st_mode) ? "a symbolic link" :
	       S_ISFIFO(st.st_mode) ? "a FIFO" :
	       S_ISSOCK(st.st_mode) ? "a socket" :
	       S_ISDIR(st.st_mode) ? "a directory" : "a device";
}

/* Every file vacuum would read, stat or delete for segment idx of shard
 * directory sd (NAME is shard-NNN) a regular file?  As the other commands
 * do, a symbolic link is not followed and a FIFO not opened (an open
 * would wait for a writer): the shard is refused, naming the file.
 * @return 0, or -1 said. */
static int files_sound(const char *sd, const char *name, uint64_t idx)
{
	static const char *const ext[] = {".seg", ".seg.zst", ".idx"};
	char path[4200];

	for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
		snprintf(path, sizeof path, "%s/%016" PRIx64 "%s", sd, idx,
		         ext[i]);
		const char *what = not_regular(path);
		if (what) {
			fprintf(stderr, "%s: %s/%016" PRIx64 "%s is %s; "
			        "refusing to touch its shard\n", prog, name, idx,
			        ext[i], what);
			return -1;
		}
	}
	return 0;
}

/* @return 0; 1 when a file of the shard was refused (said); < 0. */
static int add_shard(struct vac *v, unsigned shard)
{
	char sd[4096], path[4200], name[32];
	uint64_t *idx;
	size_t n;

	snprintf(sd, sizeof sd, "%s/shard-%03u", v->dir, shard);
	snprintf(name, sizeof name, "shard-%03u", shard);
	int rc = shard_segments(v->dir, shard, &idx, &n);
	if (rc < 0)
		return rc;
	for (size_t k = 0; k < n; k++)
		if (files_sound(sd, name, idx[k]) < 0) {
			free(idx);
			return 1;
		}
	uint64_t shipped = shipped_up_to(v->dir, shard);
	for (size_t k = 0; k < n; k++) {
		if (v->n == v->cap) {
			v->cap = v->cap ? v->cap * 2 : 256;
			struct seg *ns = realloc(v->s, v->cap * sizeof *ns);
			if (!ns) {
				free(idx);
				return -ENOMEM;
			}
			v->s = ns;
		}
		struct seg *s = &v->s[v->n++];
		memset(s, 0, sizeof *s);
		s->shard = shard;
		s->index = idx[k];
		snprintf(path, sizeof path, "%s/%016" PRIx64 ".seg", sd, idx[k]);
		s->bytes = allocated(path);
		snprintf(path, sizeof path, "%s/%016" PRIx64 ".seg.zst", sd,
		         idx[k]);
		s->bytes += allocated(path);
		snprintf(path, sizeof path, "%s/%016" PRIx64 ".idx", sd, idx[k]);
		s->bytes += allocated(path);
		s->sealed = k + 1 < n;
		s->keep = idx[k] > shipped && !v->force;
		if (s->sealed) {
			snprintf(path, sizeof path, "%s/%016" PRIx64 ".seg", sd,
			         idx[k + 1]);
			s->end_ns = created_ns(path);
		}
		if (s->sealed && !s->end_ns) {
			/* The next one is archived: this one's records end
			 * when it was last written (an archive keeps its
			 * segment's time). */
			snprintf(path, sizeof path, "%s/%016" PRIx64 ".seg", sd,
			         idx[k]);
			s->end_ns = written_ns(path);
			if (!s->end_ns) {
				strcat(path, ".zst");
				s->end_ns = written_ns(path);
			}
		}
	}
	free(idx);
	return 0;
}

/* Oldest first: by when their records end, then shard, then index. */
static int by_age(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;
	if (x->sealed != y->sealed)
		return y->sealed - x->sealed;
	if (x->end_ns != y->end_ns)
		return x->end_ns < y->end_ns ? -1 : 1;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* Delete segment s and its index.  @return 0 or -errno. */
static int drop(const struct vac *v, const struct seg *s)
{
	char path[4200], size[32];
	snprintf(path, sizeof path, "%s/shard-%03u/%016" PRIx64 ".seg", v->dir,
	         s->shard, s->index);
	fmt_size(size, sizeof size, s->bytes);
	if (v->dry) {
		printf("Would delete %s (%s).\n", path, size);
		return 0;
	}
	/* The segment and its archive (docs/FORMAT.md, "Archived
	 * segments"): a crash in an archiver's sequence leaves both, and
	 * neither may outlive the deletion. */
	char zpath[4300];
	snprintf(zpath, sizeof zpath, "%s.zst", path);
	int e = unlink(path) < 0 ? errno : 0;
	int ez = unlink(zpath) < 0 ? errno : 0;
	const char *gone = path;
	if (e == ENOENT || (e == 0 && ez != ENOENT)) {
		/* the archive was the copy, or the one that failed */
		e = ez == ENOENT ? 0 : ez;
		gone = zpath;
	}
	if (e) {
		fprintf(stderr, "%s: %s: %s\n", prog, gone, strerror(e));
		return -e;
	}
	printf("Deleted %s (%s).\n", gone, size);
	snprintf(path, sizeof path, "%s/shard-%03u/%016" PRIx64 ".idx", v->dir,
	         s->shard, s->index);
	unlink(path);
	return 0;
}

int cmd_vacuum(int argc, char **argv)
{
	struct vac v;
	unsigned char has[MAX_SHARDS] = {0}, blocked[MAX_SHARDS] = {0};
	uint64_t total = 0, freed = 0, kept = 0;
	size_t nkept = 0;
	int status = 0, rc;

	memset(&v, 0, sizeof v);
	int pr = parse_vacuum(argc, argv, &v);
	if (pr)
		return pr > 0 ? out_finish(0) : EXIT_USAGE;
	if (check_log_dir(v.dir))
		return EXIT_USAGE;
	list_shards(v.dir, has);
	for (unsigned s = 0; s < MAX_SHARDS; s++) {
		if (!has[s])
			continue;
		rc = add_shard(&v, s); /* > 0: refused, said */
		if (rc < 0)
			fprintf(stderr, "%s: %s/shard-%03u: cannot list it: %s\n",
			        prog, v.dir, s, rc == LE_EUNSAFE ? le_errmsg()
			                                         : le_strerror(rc));
		if (rc != 0)
			status = EXIT_DAMAGE;
	}
	for (size_t i = 0; i < v.n; i++)
		total += v.s[i].bytes;
	qsort(v.s, v.n, sizeof *v.s, by_age);
	for (size_t i = 0; i < v.n && !out_failed(); i++) {
		struct seg *s = &v.s[i];
		int by_size = v.has_size && total - freed > v.size;
		int by_time = v.has_time && s->end_ns && s->end_ns < v.cutoff;
		if (!s->sealed || (!by_size && !by_time))
			continue;
		if (s->keep) { /* its later ones are not shipped either */
			blocked[s->shard] = 1;
			nkept++;
			kept += s->bytes;
			continue;
		}
		if (blocked[s->shard])
			continue;
		if (drop(&v, s) < 0) {
			blocked[s->shard] = 1; /* no hole after it */
			status = EXIT_DAMAGE;
			continue;
		}
		freed += s->bytes;
	}
	char h[32];
	fmt_size(h, sizeof h, freed);
	printf("Vacuuming done, %s %s of sealed segments from %s.\n",
	       v.dry ? "would free" : "freed", h, v.dir);
	if (nkept) {
		fmt_size(h, sizeof h, kept);
		printf("Kept %zu segment%s (%s) the forwarder has not shipped "
		       "yet; --force deletes %s.\n", nkept, nkept == 1 ? "" : "s",
		       h, nkept == 1 ? "it" : "them");
	}
	free(v.s);
	return out_finish(status);
}
