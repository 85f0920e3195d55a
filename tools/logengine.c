/*
 * logengine.c -- the command-line tool.
 *
 * It uses only the public header, as mdb_stat uses only lmdb.h: anything
 * this tool does, an application can do with the same calls.  The one
 * thing it knows beyond the API is the directory layout that FORMAT.md
 * makes public (DIR/shard-NNN/IIIIIIIIIIIIIIII.seg), which "stats" lists to
 * count segments and their bytes.
 *
 *   logengine cat|tail [OPTIONS] DIR [MATCHES]    records, journalctl's way
 *   logengine verify DIR                          every problem, exit 0/1
 *   logengine stats [--disk-usage] DIR            per-shard summary, space
 *   logengine vacuum --size N|--time T DIR        delete oldest segments
 *   logengine recover [--init] DIR                drain a dead process's queue
 *   logengine capture [--dir D] [-p] -- CMD ...   log a program's output
 *
 * Exit status: 0 success; 1 the log is damaged (cat, stats: damage stopped
 * the read; verify: any problem at all); 2 usage error or the log could
 * not be read (missing directory, I/O error, unknown format version).
 *
 * This file holds main and the table of commands; each command group is a
 * file of its own (cat.c, verify.c, stats.c, recover.c, capture.c), and
 * what they share is in cli.h / cli.c.  A new command is one file and one
 * line in the table.
 *
 * Output goes through one large stdio buffer.  SIGPIPE is ignored so that a
 * closed pipe ("logengine cat DIR | head") shows up as EPIPE on a write,
 * which ends the command quietly with status 0: the reader chose to stop.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "observe.h"
#include "ship_cli.h"

#define OUTBUF_BYTES (1u << 20)

static const char usage_text[] =
	"usage: logengine COMMAND [OPTIONS] DIR\n"
	"\n"
	"commands (each has --help):\n"
	"  cat [OPTIONS] DIR [FIELD=VALUE...]\n"
	"        print records, oldest first, merged across shards by\n"
	"        timestamp, with journalctl's options: -n N, -r, -f,\n"
	"        --since/--until, -p LEVEL, -g REGEX, FIELD=VALUE, -t LOGGER,\n"
	"        --shard N, -o short|short-precise|short-iso|text|json|\n"
	"        json-pretty|cat|raw|verbose|export, --utc, --show-cursor,\n"
	"        --after-cursor, --cursor-file; colours and a pager on a\n"
	"        terminal\n"
	"  tail [OPTIONS] DIR\n"
	"        cat -f -n 10: the last records, then new ones as they come\n"
	"  verify DIR\n"
	"        read everything, skipping damage, print each problem as\n"
	"        FILE: offset N: WHAT and a summary; exit 1 on any problem\n"
	"  stats [--mode MODE] [--disk-usage] DIR\n"
	"        per shard: segments, records, bytes, sequence and time range;\n"
	"        --disk-usage: the space every file of the log takes\n"
	"  stats --live [-i SECS] [-n COUNT] DIR...\n"
	"        running engines from their live pages, refreshed every\n"
	"        second: rates, queue, drops, disk, write/fsync latency\n"
	"  vacuum --size SIZE | --time TIME DIR\n"
	"        delete the oldest sealed segments\n"
	"  recover [--init] DIR\n"
	"        open the log as an engine would and close it: torn tails\n"
	"        are cut, records a process that died left in its queue\n"
	"        (DIR/shard-NNN/QUEUE) are written out, once\n"
	"  capture [--dir DIR] [--passthrough] [--format raw|text|json] -- CMD\n"
	"        run CMD and store each line of its output as a record\n"
	"  forward [--nats URL] [--once] ... DIR\n"
	"        ship DIR's records to a NATS JetStream stream as stored\n"
	"  collect [--nats URL] [--once] ... DIR\n"
	"        store what forwarders shipped in DIR, one shard per origin\n"
	"  serve [--listen ADDR:PORT] [--listen-any] DIR...\n"
	"        HTTP on loopback: /metrics (Prometheus), / (dashboard),\n"
	"        /events (server-sent events)\n"
	"  help, --help      this text\n"
	"  --version         print the version\n"
	"\n"
	"Text output escapes control bytes and bytes that are not valid UTF-8\n"
	"as \\xNN and a backslash as \\\\, so one record is one line; JSON\n"
	"writes such bytes as \\u00XX (mapped to U+00XX), so it is always valid\n"
	"UTF-8 JSON.\n"
	"\n"
	"MODE (what damage does): tolerate (default: a torn tail ends a\n"
	"shard, other damage is an error), absolute (any damage is an error),\n"
	"point (a shard stops quietly at its first damage), skip (skip\n"
	"damaged bytes and go on).\n"
	"\n"
	"exit status: 0 ok; 1 damage; 2 usage error, not a log directory, or\n"
	"unreadable log.  See logengine(1).\n";

/* The commands: one line each. */
static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{"cat", cmd_cat},
	{"tail", cmd_tail},
	{"verify", cmd_verify},
	{"stats", cmd_stats},
	{"vacuum", cmd_vacuum},
	{"recover", cmd_recover},
	{"capture", cmd_capture},
	{"forward", cmd_forward},
	{"collect", cmd_collect},
	{"serve", cmd_serve},
};

/* A reader keeps one segment open per shard directory, and a collector's
 * store has one per origin (thousands): the soft descriptor limit (often
 * 1024) is raised to the hard one, which the administrator set. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	static char outbuf[OUTBUF_BYTES];

	raise_nofile();
	/* A closed pipe must be a write error (EPIPE), not a kill. */
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
	if (argc < 2) {
		fputs(usage_text, stderr);
		return EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") ||
	    !strcmp(cmd, "-h")) {
		fputs(usage_text, stdout);
		return out_finish(0);
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("logengine %s\n", le_version());
		return out_finish(0);
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(cmd, commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	usage_error("unknown command '%s'", cmd);
	return EXIT_USAGE;
}
