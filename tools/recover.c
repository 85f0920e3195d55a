/*
 * recover.c -- logengine recover: open the log as an engine would and
 * close it, writing out what a dead process left queued.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "progress.h"

static const char recover_help[] =
	"usage: logengine recover [--init] DIR\n"
	"\n"
	"Open the log in DIR as an engine would, with every shard directory\n"
	"present, and close it: torn tails are cut, and records a process\n"
	"that died left in its queues (DIR/shard-NNN/QUEUE) are written to the\n"
	"segments, in order, exactly once.  Running it again does nothing\n"
	"more.  Prints what it did.  An engine must not have DIR open.\n"
	"\n"
	"  --init      make DIR a log directory if it is not one (creating\n"
	"              DIR if missing); without it, recover refuses a\n"
	"              directory that is not a log\n"
	"  -h, --help  this text\n"
	"\n"
	"exit status: 0; 1 a queue file was damaged (what followed the damage\n"
	"was dropped; stderr names where), a SITES table was (deferred records\n"
	"written as \"" LE_SITE_LOST_TEXT "\"), or closing\n"
	"failed; 2 usage error, not a log directory, in use, cannot be opened.\n";

/* le_open does the recovery (and drains dead queues), le_close writes
 * everything out.  Every shard directory present is opened. */
int cmd_recover(int argc, char **argv)
{
	struct args a;
	unsigned char has[MAX_SHARDS] = {0};
	le_config cfg;
	le_engine *e;
	le_stats st;
	long pid;

	int pr = parse_args(argc, argv, OPT_INIT, &a, recover_help);
	if (pr)
		return pr > 0 ? out_finish(0) : EXIT_USAGE;
	int init = a.flags & OPT_INIT;
	if (init && mkdir(a.dir, 0750) < 0 && errno != EEXIST) {
		fprintf(stderr, "%s: %s: %s\n", prog, a.dir, strerror(errno));
		return EXIT_USAGE;
	}
	if (!init && check_log_dir(a.dir)) {
		fprintf(stderr, "%s: to make it one: logengine recover --init "
		        "%s\n", prog, a.dir);
		return EXIT_USAGE;
	}
	if (engine_live(a.dir, &pid)) {
		if (pid)
			fprintf(stderr, "%s: %s is in use by an engine (process "
			        "%ld): recover works on a log no engine has open\n",
			        prog, a.dir, pid);
		else
			fprintf(stderr, "%s: %s is in use by an engine: recover "
			        "works on a log no engine has open\n", prog, a.dir);
		return EXIT_USAGE;
	}
	int n = list_shards(a.dir, has);
	if (n < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, a.dir, strerror(-n));
		return EXIT_USAGE;
	}
	le_config_init(&cfg);
	cfg.dir = a.dir;
	cfg.shards = 1;
	for (int i = 0; i < MAX_SHARDS; i++)
		if (has[i])
			cfg.shards = (unsigned)i + 1;
	struct progress pg; /* the time recovery takes, on a terminal */
	progress_start(&pg, "recover", NULL, 0);
	progress_tick(&pg);
	int rc = le_open(&e, &cfg);
	progress_done(&pg);
	if (rc < 0) {
		/* le_errmsg names the file and says why; le_strerror only when
		 * there is nothing more. */
		fprintf(stderr, "%s: %s\n", prog,
		        *le_errmsg() ? le_errmsg() : le_strerror(rc));
		return EXIT_USAGE;
	}
	/* Opened; what it met on the way (a damaged queue file, slots
	 * never published) is in le_errmsg, and records a damaged queue
	 * cost or left in doubt are counted. */
	if (le_errmsg()[0])
		fprintf(stderr, "%s: %s: %s\n", prog, a.dir, le_errmsg());
	le_stats_get(e, &st);
	int damaged = st.recovery_damaged > 0;
	rc = le_close(e);
	printf("%s: %u shard(s); %" PRIu64 " record(s) written from queues "
	       "left by a dead process, %" PRIu64 " abandoned slot(s) skipped, "
	       "%" PRIu64 " byte(s) of torn tail cut\n", a.dir, cfg.shards,
	       st.recovered_records, st.abandoned_slots,
	       st.recovered_truncated_bytes);
	if (rc < 0) {
		fprintf(stderr, "%s: %s: closing: %s\n", prog, a.dir,
		        le_strerror(rc));
		return out_finish(EXIT_DAMAGE);
	}
	return out_finish(damaged);
}
