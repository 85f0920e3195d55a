/*
 * cli.h -- what the logengine commands share.  Each command group lives in
 * a file of its own (cat.c: cat and tail; verify.c, stats.c, recover.c,
 * vacuum.c, capture.c); logengine.c holds main and the table of commands.
 * Shared: cli.c (stdout, escaping, options, opening a reader), output.c
 * (the -o formats), select.c (time expressions, levels, matches), logdir.c
 * (what a directory is, and the few things that need the engine's
 * internals: a dead process's queue, a live engine's lock).
 */
#ifndef LE_TOOLS_CLI_H
#define LE_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "logengine.h"

#define EXIT_DAMAGE 1
#define EXIT_USAGE 2 /* also: could not read the log at all */

#define MAX_SHARDS 256 /* shard-000 .. shard-255 */
/* Shard directories a reader takes: a collector's store has one per
 * origin, shard-000 .. shard-99999 (docs/FORMAT.md). */
#define MAX_SHARD_DIRS 100000

extern const char *prog;

/* ---- output ---- */

extern int out_err; /* errno of the first failed write to stdout, or 0 */

/* Has a write to stdout failed?  Checked after each record, while errno
 * still holds the cause. */
int out_failed(void);
/* Finish stdout.  A closed pipe is the reader's choice, not an error: the
 * status is then rc unchanged and nothing is printed.
 * @return rc, or EXIT_USAGE for any other write error. */
int out_finish(int rc);

/* RFC 3339 UTC with nanoseconds: 2026-11-30T21:30:27.123456789Z ("-" for
 * 0: a log without timestamps). */
void fmt_ts(char *buf, size_t cap, uint64_t ns);
/* "1.5M": bytes in a human unit (1024-based, as du -h). */
void fmt_size(char *buf, size_t cap, uint64_t bytes);

/* The -o formats (output.c). */
enum {
	OUT_SHORT, OUT_SHORT_PRECISE, OUT_SHORT_ISO, OUT_SHORT_ISO_PRECISE,
	OUT_SHORT_UNIX, OUT_TEXT, OUT_JSON, OUT_JSON_PRETTY, OUT_CAT, OUT_RAW
};
enum { CACHE_RFC3339, CACHE_SHORT, CACHE_ISO, CACHE_N };
struct out_cache {
	int valid;
	time_t sec;
	long gmtoff;
	size_t len;
	char text[64];
};
struct out {
	int fmt;       /* OUT_* */
	int utc;       /* text formats in UTC (JSON and text always are) */
	char *buf;     /* the line being built */
	size_t len, cap;
	struct out_cache cache[CACHE_N];
};
/* @return OUT_* for a name, -1 if none. */
int out_parse(const char *name);
const char *out_names(void);
/* Print r (and its cursor, in JSON, when not NULL) to stdout. */
void out_record(struct out *o, const le_record *r, const char *cursor);
void out_free(struct out *o);

/* ---- selection (select.c) ---- */

/* --since/--until: "YYYY-MM-DD HH:MM:SS", RFC 3339, "today", "-1h",
 * "10min ago", "@EPOCH"...  Local time unless utc or a zone is given.
 * @return 0 and *ns, or -1. */
int parse_time(const char *s, int utc, uint64_t *ns);
/* A level name (trace .. fatal, syslog's names too) or number: syslog's
 * 0-7 when numbers_are_syslog (-p), else ours 0-5.  @return LE_* or -1. */
int parse_level(const char *s, int numbers_are_syslog);
/* -p LEVEL (that level and more severe) or FROM..TO.  @return 0 or -1. */
int parse_priority(const char *s, int *lo, int *hi);

#define MAX_MATCHES 64
struct match {
	char field[64];
	char value[256];
	int group; /* terms of one group are ANDed by field; groups ORed */
};
struct matches {
	struct match term[MAX_MATCHES];
	int n, groups;
};
/* A FIELD=VALUE argument, or "+".  @return 0 or -1 (message printed). */
int match_add(struct matches *m, const char *arg);
int match_check_end(const struct matches *m);
/* journalctl's rules: within a group, terms of one field are
 * alternatives and different fields must all match; "+" separates groups,
 * any of which may match.  No terms: everything matches. */
int matches_record(const struct matches *m, const le_record *r);

/* ---- arguments ---- */

enum { FMT_TEXT, FMT_JSON };

struct args {
	int mode;        /* enum le_recovery */
	int flags;       /* OPT_* flags given (--init, --disk-usage, ...) */
	const char *dir;
};

/* Which options a command takes. */
#define OPT_MODE 0x2
#define OPT_INIT 0x4       /* recover --init */
#define OPT_DISK 0x8       /* stats --disk-usage */

/* Print "logengine: " fmt (with what), and where to look; @return -1. */
int usage_error(const char *fmt, const char *what);
int parse_mode(const char *s, int *mode);
/* If argv[*i] is option shrt/lng ("-o json", "-ojson", "--output json",
 * "--output=json"), set *val and step over it.  @return 1 matched, 0 not,
 * -1 matched but its value is missing. */
int opt_value(char **argv, int argc, int *i, const char *shrt,
              const char *lng, const char **val);
/* argv[0] is the command name; help is its --help text.  @return 0, 1
 * (--help printed), -1 (usage error printed). */
int parse_args(int argc, char **argv, unsigned allow, struct args *a,
               const char *help);

/* ---- reading ---- */

void problem_to_stderr(void *arg, const char *file, uint64_t off,
                       const char *what);
/* @return a reader on dir, or NULL after printing why. */
le_reader *open_reader(const char *dir, int mode, int shard,
                       le_problem_fn fn, void *arg);
/* The exit status for a negative le_reader_next result. */
int read_failed(const char *dir, int rc);
/* Shard numbers with a shard-NNN directory in dir, as a bitmap of
 * MAX_SHARDS.  @return how many, or -errno. */
int list_shards(const char *dir, unsigned char *has);

/* ---- log directories (logdir.c) ---- */

/* Is dir a log directory?  When not, say what it is and what was
 * expected, on stderr.  @return 0, or EXIT_USAGE after the message. */
int check_log_dir(const char *dir);
/* The same for a follower (serve): an empty directory, or one whose
 * engine has made its LOCK and not yet its shards, will be one. */
int check_log_dir_to_come(const char *dir);
/* Segment indexes of shard `shard` of dir, ascending (*out malloc'd).  A
 * shard directory that is a symbolic link (into another log, whose files
 * a vacuum would then delete) or not a directory is refused: LE_EUNSAFE,
 * le_errmsg() names it.  @return 0 or < 0. */
int shard_segments(const char *dir, unsigned shard, uint64_t **out,
                   size_t *n);
/* 1 when the directory has a LOCK file an engine holds now; *pid its
 * process when known (0 otherwise). */
int engine_live(const char *dir, long *pid);
/* After a crash: for each shard whose QUEUE holds records a dead process
 * accepted and never wrote, say so and what to do, on stderr.
 * @return how many records in all. */
uint64_t warn_dead_queues(const char *dir);

/* Files of a log directory, by what they are (stats --disk-usage). */
enum {
	KIND_SEGMENT, KIND_INDEX, KIND_QUEUE, KIND_CHECKPOINT, KIND_LOCK,
	KIND_CURSOR, KIND_DIR, KIND_OTHER, KIND_N
};
struct usage {
	uint64_t files[KIND_N];
	uint64_t apparent[KIND_N]; /* st_size */
	uint64_t allocated[KIND_N]; /* st_blocks * 512 */
};
extern const char *const kind_names[KIND_N];
/* Add up dir's files by kind.  @return 0 or -errno. */
int disk_usage(const char *dir, struct usage *u);

/* The segment index up to which `logengine forward` has shipped the
 * records of shard `shard` of dir (its FORWARD cursor): segments at or
 * below it may be deleted.  UINT64_MAX: everything (no forwarder). */
uint64_t shipped_up_to(const char *dir, unsigned shard);
/* How far `logengine forward` is behind shard `shard` of dir whose writer
 * is at next_seq: records, and segment bytes not yet shipped.
 * @return 1, or 0 when the shard has no forwarder. */
int forward_lag(const char *dir, unsigned shard, uint64_t next_seq,
                uint64_t *records, uint64_t *bytes);

/* ---- commands ---- */

int cmd_cat(int argc, char **argv);
int cmd_tail(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_vacuum(int argc, char **argv);
int cmd_capture(int argc, char **argv);

#endif
