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
	OUT_SHORT_UNIX, OUT_TEXT, OUT_JSON, OUT_JSON_PRETTY, OUT_CAT, OUT_RAW,
	OUT_VERBOSE, OUT_EXPORT
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
	int color;     /* colour text lines by level (a terminal) */
	char **only;   /* --output-fields: the names kept; NULL: all */
	size_t n_only;
	char *buf;     /* the lines not yet written to stdout */
	size_t len, cap;
	char *aux;     /* json-pretty, --output-fields: the fields object */
	size_t aux_cap;
	struct out_cache cache[CACHE_N];
};
/* @return OUT_* for a name, -1 if none. */
int out_parse(const char *name);
const char *out_names(void);
/* Print r (and its cursor, in JSON, when not NULL) to stdout: into o's
 * buffer, which goes out when it is large, or at out_flush. */
void out_record(struct out *o, const le_record *r, const char *cursor);
/* Write what o holds to stdout (stdio's buffer: fflush after).  Due
 * before anything else is printed, on stdout or stderr. */
void out_flush(struct out *o);
void out_free(struct out *o);

/* ---- the terminal (term.c) ---- */

/* Colours on stdout?  Only on a terminal, never with --no-color
 * (no_color) or NO_COLOR set to anything but "", nor TERM=dumb. */
int term_color(int no_color);
/* Start the pager, stdout into it, when stdout is a terminal and no_pager
 * is 0: $LOGENGINE_PAGER, else $PAGER, else less; LESS=FRSXMK unless
 * LESS is set.  A pager that cannot be started: output goes straight to
 * the terminal. */
void pager_start(int no_pager);
/* @return 1 while a pager has the terminal (nothing else draws there). */
int pager_active(void);
/* Flush stdout into the pager, close it, and wait for the pager to
 * exit (its user may still be reading).  No pager: nothing. */
void pager_end(void);

/* ---- journal export (export.c) ---- */

/* Called for each field of a record as `-o export` and `-o verbose`
 * write it: a journal field name and the value's bytes. */
typedef void (*field_fn)(void *arg, const char *name, const void *val,
                         size_t len);
/* The fields of r, journal-named (docs/logengine.1, "EXPORT FORMAT"):
 * PRIORITY, SYSLOG_IDENTIFIER, MESSAGE, LOGENGINE_*, then the record's
 * typed fields.  Metadata (__REALTIME_TIMESTAMP) is the caller's. */
void export_fields(const le_record *r, field_fn fn, void *arg);
/* A record's field key as a journal field name into name (cap >= 66). */
void journal_name(const char *key, size_t len, char *name, size_t cap);

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
/* The syslog priority of a level (trace and debug 7 .. fatal 2); -1. */
int level_priority(int level);
/* A typed field's value as text: a string's or bytes' bytes as they are,
 * a number as printf writes it, true/false.  The value is in *val
 * (pointing into the record or into buf, cap >= 32), *len bytes. */
void field_value(const le_field *f, char *buf, size_t cap,
                 const void **val, size_t *len);

/* "marker", "truncated", "marker,truncated" or "" in buf (cap >= 24).
 * @return buf. */
const char *flags_text(uint32_t flags, char *buf, size_t cap);

/* -t/-u: loggers by name, each with its children ("db" takes "db" and
 * "db.pool", not "dbx"). */
#define MAX_LOGGERS 64
struct loggers {
	const char *name[MAX_LOGGERS];
	int n;
};
/* @return 0, or -1 (message printed) when the list is full. */
int logger_add(struct loggers *l, const char *name);
/* @return 1 when r's logger is one of l's or below one; 1 when l is
 * empty. */
int loggers_record(const struct loggers *l, const le_record *r);

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
/* Is dir a log not yet written: missing, or an empty directory, or one
 * whose engine has made its LOCK or shard-NNN/ and no segment yet (a tail
 * waits for it)?  @return 1 or 0. */
int log_dir_pending(const char *dir);
/* check_log_dir for a follower (serve): an existing directory that is
 * a log not yet written (log_dir_pending) is accepted too. */
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
