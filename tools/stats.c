/*
 * stats.c -- logengine stats: per-shard segments, records, bytes,
 * sequence and time range.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "observe.h"

/* What stats shows for one shard, or for all of them. */
struct shard_sum {
	uint64_t segments, records, bytes;
	uint64_t archived;  /* of the segments, compressed (.seg.zst) */
	uint64_t first_seq, last_seq, first_ts, last_ts;
};

/* Is name "IIIIIIIIIIIIIIII.seg" (16 lower-case hex digits), or an
 * archived segment, ".seg.zst"?  @return 1, 2 (archived), 0. */
static int is_seg_name(const char *name)
{
	if (strspn(name, "0123456789abcdef") != 16)
		return 0;
	if (strcmp(name + 16, ".seg") == 0)
		return 1;
	return strcmp(name + 16, ".seg.zst") == 0 ? 2 : 0;
}

/* Count the segment files of shard_dir and add up their sizes. */
static int count_segments(const char *shard_dir, struct shard_sum *s)
{
	DIR *d = opendir(shard_dir);
	struct dirent *de;
	struct stat st;

	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		int kind = is_seg_name(de->d_name);
		char plain[21];
		if (!kind || fstatat(dirfd(d), de->d_name, &st, 0) < 0)
			continue;
		/* an archive beside its segment (an archiver's crash left
		 * both): the segment is what readers take */
		snprintf(plain, sizeof plain, "%.20s", de->d_name);
		struct stat pst;
		if (kind == 2 && fstatat(dirfd(d), plain, &pst, 0) == 0)
			continue;
		s->segments++;
		s->archived += kind == 2;
		s->bytes += (uint64_t)st.st_size;
	}
	closedir(d);
	return 0;
}

/* Read one shard's records into s.  @return 0 or a negative reader code
 * (the records read until then are in s). */
static int sum_records(le_reader *r, struct shard_sum *s)
{
	le_record rec;
	int rc;

	while ((rc = le_reader_next(r, &rec)) > 0) {
		if (s->records++ == 0) {
			s->first_seq = rec.seq;
			s->first_ts = rec.ts_ns;
		}
		s->last_seq = rec.seq;
		s->last_ts = rec.ts_ns;
	}
	return rc;
}

static void print_sum(const char *name, const struct shard_sum *s, int seqs)
{
	char a[64] = "-", b[64] = "-", fs[32] = "-", ls[32] = "-";

	if (s->records) {
		fmt_ts(a, sizeof a, s->first_ts);
		fmt_ts(b, sizeof b, s->last_ts);
		if (seqs) {
			snprintf(fs, sizeof fs, "%" PRIu64, s->first_seq);
			snprintf(ls, sizeof ls, "%" PRIu64, s->last_seq);
		}
	}
	printf("%-5s %8" PRIu64 " %10" PRIu64 " %14" PRIu64 " %10s %10s "
	       "%-30s %s\n", name, s->segments, s->records, s->bytes, fs,
	       ls, a, b);
}

/* Fold one shard into the totals. */
static void add_sum(struct shard_sum *t, const struct shard_sum *s)
{
	if (s->records) {
		if (!t->records || s->first_ts < t->first_ts)
			t->first_ts = s->first_ts;
		if (!t->records || s->last_ts > t->last_ts)
			t->last_ts = s->last_ts;
	}
	t->segments += s->segments;
	t->archived += s->archived;
	t->records += s->records;
	t->bytes += s->bytes;
}

/* One shard's row.  @return the exit status it earns. */
static int stats_shard(const struct args *a, int shard, struct shard_sum *t)
{
	struct shard_sum s = {0};
	char sdir[4096], name[16];
	int status = 0;

	snprintf(sdir, sizeof sdir, "%s/shard-%03d", a->dir, shard);
	snprintf(name, sizeof name, "%d", shard);
	count_segments(sdir, &s);
	le_reader *r = open_reader(a->dir, a->mode, shard, problem_to_stderr,
	                           NULL);
	if (!r)
		return EXIT_USAGE;
	int rc = sum_records(r, &s);
	le_reader_close(r);
	if (rc < 0)
		status = read_failed(sdir, rc);
	print_sum(name, &s, 1);
	add_sum(t, &s);
	return status;
}

static const char stats_help[] =
	"usage: logengine stats [--mode MODE] DIR\n"
	"       logengine stats --disk-usage DIR\n"
	"\n"
	"Per shard: segment files, records, bytes of the segment files, first\n"
	"and last sequence number and timestamp (\"-\": none); then totals,\n"
	"and how many segments are archived (compressed: their bytes as on\n"
	"disk).\n"
	"\n"
	"  --mode MODE     what damage does: tolerate (default), absolute,\n"
	"                  point, skip\n"
	"  --disk-usage    instead, the space every file the engine owns takes\n"
	"                  (segments, indexes, QUEUE, CHECKPOINT, LOCK, cursor\n"
	"                  files, the directories), by kind: files, apparent\n"
	"                  bytes (as du --apparent-size -b) and allocated bytes\n"
	"                  (as du -B1).  Files that are not the engine's are\n"
	"                  counted as other; without them the totals are du's.\n"
	"  -h, --help      this text\n"
	"\n"
	"exit status: 0; 1 damage stopped the read; 2 usage error, not a log\n"
	"directory, unreadable.\n";

/* stats --disk-usage */
static int disk(const char *dir)
{
	struct usage u;
	uint64_t f = 0, ap = 0, al = 0;
	char h1[32], h2[32];
	int rc = disk_usage(dir, &u);

	if (rc < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, dir, strerror(-rc));
		return EXIT_USAGE;
	}
	printf("%-12s %8s %16s %16s\n", "kind", "files", "apparent",
	       "allocated");
	for (int k = 0; k < KIND_N; k++) {
		printf("%-12s %8" PRIu64 " %16" PRIu64 " %16" PRIu64 "\n",
		       kind_names[k], u.files[k], u.apparent[k], u.allocated[k]);
		f += u.files[k];
		ap += u.apparent[k];
		al += u.allocated[k];
	}
	printf("%-12s %8" PRIu64 " %16" PRIu64 " %16" PRIu64 "\n", "total", f,
	       ap, al);
	fmt_size(h1, sizeof h1, al - u.allocated[KIND_OTHER]);
	fmt_size(h2, sizeof h2, ap - u.apparent[KIND_OTHER]);
	printf("The log in %s takes up %s in the file system (%s apparent).\n",
	       dir, h1, h2);
	return out_finish(0);
}

int cmd_stats(int argc, char **argv)
{
	struct args a;
	struct shard_sum total = {0};
	unsigned char has[MAX_SHARDS] = {0};
	int status = 0;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--live"))
			return cmd_stats_live(argc, argv); /* tools/live.c */
	int pr = parse_args(argc, argv, OPT_MODE | OPT_DISK, &a, stats_help);
	if (pr)
		return pr > 0 ? out_finish(0) : EXIT_USAGE;
	if (check_log_dir(a.dir))
		return EXIT_USAGE;
	if (a.flags & OPT_DISK)
		return disk(a.dir);
	warn_dead_queues(a.dir);
	int n = list_shards(a.dir, has);
	if (n < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, a.dir, strerror(-n));
		return EXIT_USAGE;
	}
	printf("%-5s %8s %10s %14s %10s %10s %-30s %s\n", "shard",
	       "segments", "records", "bytes", "first_seq", "last_seq",
	       "first_ts", "last_ts");
	for (int i = 0; i < MAX_SHARDS && !out_failed(); i++) {
		if (!has[i])
			continue;
		int st = stats_shard(&a, i, &total);
		if (st > status)
			status = st;
	}
	print_sum("total", &total, 0);
	if (total.archived)
		printf("%" PRIu64 " of the %" PRIu64 " segments are archived "
		       "(.seg.zst: bytes as compressed)\n", total.archived,
		       total.segments);
	return out_finish(status);
}
