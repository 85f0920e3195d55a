/*
 * verify.c -- logengine verify: read everything, skipping damage, and
 * print every problem.
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
#include "progress.h"

static void problem_to_stdout(void *arg, const char *file, uint64_t off,
                              const char *what)
{
	(void)arg;
	printf("%s: offset %" PRIu64 ": %s\n", file, off, what);
}

static const char verify_help[] =
	"usage: logengine verify DIR\n"
	"\n"
	"Read every record, skipping damage, and print each problem as\n"
	"FILE: offset N: WHAT (damaged frames or headers, torn and zero-filled\n"
	"tails, sequence gaps between segments, deferred records recovery wrote\n"
	"without their text because the SITES table was damaged), then one\n"
	"summary line.  Records a process that died left in a shard's QUEUE are\n"
	"a problem too, until 'logengine recover DIR' writes them out.\n"
	"\n"
	"exit status: 0 no problem; 1 any problem; 2 usage error, not a log\n"
	"directory, unreadable.\n";

/* A deferred record recovery found no call site for (a damaged SITES):
 * in the log, but its text is lost.  Printed as a problem.
 * @return 1 when rec is one. */
static int site_lost(const le_record *rec)
{
	static const char lost[] = LE_SITE_LOST_TEXT;

	if (rec->len != sizeof lost - 1 || memcmp(rec->payload, lost, rec->len))
		return 0;
	printf("%s: offset %" PRIu64 ": deferred record (seq %" PRIu64
	       ") written without its text: its call site was lost from a "
	       "damaged SITES table\n", rec->file, rec->offset, rec->seq);
	return 1;
}

int cmd_verify(int argc, char **argv)
{
	struct args a;
	le_record rec;
	le_reader_stats st;
	uint64_t lost = 0;
	int rc = 0;

	int pr = parse_args(argc, argv, 0, &a, verify_help);
	if (pr)
		return pr > 0 ? out_finish(0) : EXIT_USAGE;
	if (check_log_dir(a.dir))
		return EXIT_USAGE;
	/* Records a dead process left queued are not in the log yet: a
	 * problem until recover writes them out. */
	uint64_t waiting = warn_dead_queues(a.dir);
	le_reader *r = open_reader(a.dir, LE_RECOVER_SKIP, -1,
	                           problem_to_stdout, NULL);
	if (!r)
		return EXIT_USAGE;
	struct progress pg;
	progress_start(&pg, "verify", a.dir, 0);
	while (!out_failed() && (rc = le_reader_next(r, &rec)) > 0) {
		lost += (uint64_t)site_lost(&rec);
		progress_reader(&pg, r);
	}
	progress_done(&pg);
	le_reader_stats_get(r, &st);
	le_reader_close(r);
	if (rc < 0) {
		read_failed(a.dir, rc);
		return out_finish(EXIT_USAGE);
	}
	printf("%s: %" PRIu64 " records, %" PRIu64 " segments, %" PRIu64
	       " bytes, %" PRIu64 " problems, %" PRIu64 " bytes skipped\n",
	       a.dir, st.records, st.segments, st.bytes, st.problems + lost,
	       st.skipped_bytes);
	return out_finish(st.problems || lost || waiting ? EXIT_DAMAGE : 0);
}

