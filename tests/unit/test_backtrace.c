/*
 * test_backtrace.c -- the flight recorder (le_set_backtrace): records
 * below a logger's threshold kept in each shard's ring and written out,
 * marked as recorded history, before a trigger, on le_dump_backtrace;
 * only the levels asked for; a bounded ring that drops its oldest and
 * counts them; inheritance by child loggers; the settings from le_config
 * and LOGENGINE_BACKTRACE; NULL handles; the marking in the stream and
 * syslog lines and in le_tail.  What survives a dead process
 * is tests/fault/test_kill9.c's.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "logengine.h"
#include "logtest.h"

static char dir[256];

static le_engine *open_bt(const char *backtrace, uint32_t records,
                          int shards)
{
	le_config c;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	c.backtrace = backtrace;
	c.backtrace_records = records;
	if (shards)
		c.shards = shards;
	unsetenv("LOGENGINE_LEVEL");
	unsetenv("LOGENGINE_BACKTRACE");
	return t_open(&c);
}

/* Each record as "msg[logger]", with "*" after a recorded one, joined
 * with spaces in the order the reader gives them. */
struct text {
	char s[16384];
	size_t n;
	long marked;
};

static void add_text(const le_record *r, void *arg)
{
	struct text *t = arg;
	size_t pos = 0;
	le_field f;
	char lg[160];
	t_logger_tag(r, lg, sizeof lg);
	/* the marking field is reported as the flag, never as a field */
	while (le_record_field(r, &pos, &f) == 1)
		CHECK(f.key_len != 12 || memcmp(f.key, "le.backtrace", 12));
	int bt = !!(r->flags & LE_REC_BACKTRACE);
	t->marked += bt;
	t->n += (size_t)snprintf(t->s + t->n, sizeof t->s - t->n, "%s%.*s%s%s",
	                         t->n ? " " : "", (int)r->len,
	                         (const char *)r->payload, lg, bt ? "*" : "");
}

static const char *close_and_read(le_engine *e, struct text *t)
{
	CHECK_RC(le_close(e));
	memset(t, 0, sizeof *t);
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, add_text, t) >= 0);
	return t->s;
}

TEST(error_writes_the_kept_records_before_it_in_order)
{
	le_engine *e = open_bt(NULL, 0, 1);
	le_logger *db = le_logger_get(e, "db");
	struct text t;
	CHECK_RC(le_set_backtrace(db, LE_DEBUG, 0));
	for (int i = 0; i < 3; i++)
		le_debug(db, "d%d", i);
	le_info(db, "i");
	le_debug(db, "s=%s", "str"); /* a string argument: not fixed size */
	le_error(db, "boom %d", 7);
	le_debug(db, "after");
	CHECK_STR_EQ(close_and_read(e, &t),
	             "i[db] d0[db]* d1[db]* d2[db]* s=str[db]* boom 7[db]");
	t_rmrf(dir);
}

TEST(levels_below_the_recorder_are_not_kept)
{
	le_engine *e = open_bt(NULL, 0, 1);
	le_logger *root = le_logger_get(e, NULL);
	struct text t;
	CHECK_RC(le_set_backtrace(root, LE_DEBUG, 0));
	le_trace(e, "t");
	le_debug(e, "d");
	le_trace(root, "t2");
	CHECK_EQ(le_dump_backtrace(e), 1);
	CHECK_STR_EQ(close_and_read(e, &t), "d*");
	t_rmrf(dir);
}

/* A logger without a recorder keeps nothing and makes no ring file. */
TEST(without_a_recorder_nothing_is_kept_and_no_ring_is_made)
{
	le_engine *e = open_bt(NULL, 0, 1);
	char path[512];
	struct stat st;
	struct text t;
	le_debug(e, "d");
	le_error(e, "e");
	CHECK_EQ(le_dump_backtrace(e), 0);
	snprintf(path, sizeof path, "%s/shard-000/BACKTRACE", dir);
	CHECK(stat(path, &st) < 0);
	CHECK_STR_EQ(close_and_read(e, &t), "e");
	t_rmrf(dir);
}

/* 40 kept in a ring of 16: the newest 16 are written, the 24 oldest are
 * counted as dropped.  The drops are derived, not counted by the calls:
 * records still kept are never among them, before the ring is full,
 * before the dump, or after it (the 41st). */
TEST(full_ring_drops_the_oldest_and_counts_them)
{
	le_engine *e = open_bt("debug", 16, 1);
	le_stats st;
	struct text t;
	for (int i = 0; i < 40; i++) {
		le_debug(e, "%d", i);
		if (i != 9 && i != 39)
			continue;
		CHECK_RC(le_stats_get(e, &st));
		CHECK_EQ(st.backtrace_dropped, i < 16 ? 0 : 24);
	}
	CHECK_EQ(le_dump_backtrace(e), 16);
	le_debug(e, "%d", 40);
	CHECK_RC(le_flush(e, 5000));
	CHECK_RC(le_stats_get(e, &st));
	CHECK_EQ(st.backtrace_written, 16);
	CHECK_EQ(st.backtrace_dropped, 24);
	CHECK_STR_EQ(close_and_read(e, &t),
	             "24* 25* 26* 27* 28* 29* 30* 31* 32* 33* 34* 35* 36* "
	             "37* 38* 39*");
	t_rmrf(dir);
}

/* An error on db writes db's history, not net's; a record is written
 * once; `records` bounds what a trigger writes. */
TEST(error_on_one_logger_writes_its_history_alone_and_once)
{
	le_engine *e = open_bt("debug", 0, 1);
	le_logger *db = le_logger_get(e, "db"), *net = le_logger_get(e, "net");
	struct text t;
	le_debug(db, "db1");
	le_debug(net, "net1");
	le_debug(db, "db2");
	le_error(db, "E1");
	le_error(db, "E2"); /* nothing kept since E1 */
	CHECK_RC(le_set_backtrace(net, LE_DEBUG, 2));
	le_debug(net, "net2");
	le_debug(net, "net3");
	le_error(net, "E3"); /* the newest 2; net1 stays kept */
	CHECK_EQ(le_dump_backtrace(e), 1);
	CHECK_EQ(le_dump_backtrace(e), 0);
	CHECK_STR_EQ(close_and_read(e, &t),
	             "db1[db]* db2[db]* E1[db] E2[db] net2[net]* net3[net]* "
	             "E3[net] net1[net]*");
	t_rmrf(dir);
}

/* A recorder is inherited as a threshold is: by loggers below the name
 * (made before or after) that have none of their own. */
TEST(child_loggers_inherit_the_recorder)
{
	le_engine *e = open_bt(NULL, 0, 1);
	le_logger *pool = le_logger_get(e, "db.pool");
	le_logger *dbx = le_logger_get(e, "dbx");
	struct text t;
	CHECK_RC(le_set_backtrace(le_logger_get(e, "db"), LE_TRACE, 0));
	le_logger *conn = le_logger_get(e, "db.pool.conn");
	le_trace(pool, "p");
	le_debug(conn, "c");
	le_debug(dbx, "x"); /* not under db */
	CHECK_RC(le_set_backtrace(pool, LE_OFF, 0));
	le_debug(pool, "p2");
	le_debug(conn, "c2"); /* now under pool's: none */
	CHECK_RC(le_set_backtrace(pool, -1, 0));
	le_debug(pool, "p3"); /* inherits db's again */
	CHECK_EQ(le_dump_backtrace(e), 3);
	CHECK_STR_EQ(close_and_read(e, &t),
	             "p[db.pool]* c[db.pool.conn]* p3[db.pool]*");
	t_rmrf(dir);
}

/* Records formatted at the call (a format that is no literal, the _kv
 * forms, source_location) are kept as text, fields kept; one too long for
 * an entry is cut and flagged. */
TEST(formatted_records_and_fields_are_kept_as_text)
{
	le_engine *e = open_bt("trace", 0, 1);
	const char *fmt = "nonliteral %d";
	char big[600];
	memset(big, 'b', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	le_debug(e, fmt, 5);
	le_debug_kv(e, LE_FIELDS(LE_I64("n", 1)), "kv");
	le_debug(e, "%s", big);
	CHECK_EQ(le_dump_backtrace(e), 3);
	CHECK_RC(le_close(e));
	le_reader *r;
	le_record rec;
	CHECK_RC(le_reader_open(&r, dir, NULL));
	CHECK_EQ(le_reader_next(r, &rec), 1);
	CHECK(rec.len == 12 && !memcmp(rec.payload, "nonliteral 5", 12));
	CHECK(rec.flags & LE_REC_BACKTRACE);
	CHECK(!(rec.flags & LE_REC_FIELDS) && rec.fields_len == 0);
	CHECK_EQ(le_reader_next(r, &rec), 1);
	size_t pos = 0;
	le_field f;
	CHECK_EQ(le_record_field(&rec, &pos, &f), 1);
	CHECK(f.key_len == 1 && f.key[0] == 'n' && f.v.i64 == 1);
	CHECK((rec.flags & LE_REC_BACKTRACE) && (rec.flags & LE_REC_FIELDS));
	CHECK_EQ(le_reader_next(r, &rec), 1);
	CHECK((rec.flags & LE_REC_TRUNCATED) && rec.len > 100 &&
	      rec.len < 232 && ((const char *)rec.payload)[0] == 'b');
	CHECK_EQ(le_reader_next(r, &rec), 0);
	le_reader_close(r);
	t_rmrf(dir);
}

/* le_config.backtrace, then LOGENGINE_BACKTRACE over it; a bad item is
 * reported, counted and left out, and le_open succeeds. */
TEST(environment_sets_recorders_and_bad_items_are_reported)
{
	le_config c;
	le_engine *e;
	le_stats st;
	struct text t;
	char err[1024];
	int saved;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.durability = LE_SYNC_NONE;
	c.backtrace = "db=debug";
	setenv("LOGENGINE_BACKTRACE", "net=debug,x=loud", 1);
	FILE *f = t_stderr_catch(&saved);
	e = t_open(&c);
	t_stderr_release(f, saved, err, sizeof err);
	unsetenv("LOGENGINE_BACKTRACE");
	CHECK(strstr(err, "LOGENGINE_BACKTRACE: \"loud\" is not a level") !=
	      NULL);
	CHECK_RC(le_stats_get(e, &st));
	CHECK_EQ(st.config_errors, 1);
	le_debug(le_logger_get(e, "db"), "a");
	le_debug(le_logger_get(e, "net"), "b");
	le_debug(le_logger_get(e, "other"), "c");
	CHECK_EQ(le_dump_backtrace(e), 2);
	CHECK_STR_EQ(close_and_read(e, &t), "a[db]* b[net]*");
	t_rmrf(dir);
}

TEST(null_handles_and_bad_levels_are_refused)
{
	le_config c;
	le_engine *bad = NULL;
	le_config_init(&c);
	c.dir = t_tmpdir(dir);
	c.backtrace_trigger = 9;
	CHECK_EQ(le_open(&bad, &c), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "backtrace_trigger") != NULL);
	t_rmrf(dir);
	CHECK_EQ(le_set_backtrace(NULL, LE_DEBUG, 0), LE_EINVAL);
	CHECK_EQ(le_dump_backtrace(NULL), LE_EINVAL);
	le_engine *e = open_bt(NULL, 0, 1);
	CHECK_EQ(le_set_backtrace(le_logger_get(e, NULL), -1, 0), LE_EINVAL);
	CHECK_EQ(le_set_backtrace(le_logger_get(e, "a"), 7, 0), LE_EINVAL);
	CHECK(strstr(le_errmsg(), "is not a level") != NULL);
	/* NULL: the default engine's root */
	CHECK_RC(le_set_default(e));
	CHECK_RC(le_set_backtrace(NULL, LE_DEBUG, 0));
	le_debug(NULL, "via default");
	CHECK_EQ(le_dump_backtrace(NULL), 1);
	CHECK_RC(le_set_default(NULL));
	CHECK_RC(le_close(e));
	t_rmrf(dir);
}

/* Threads keep and dump at once on two shards: every call is written
 * exactly once or counted as dropped, none lost, none twice. */
struct worker {
	le_engine *e;
	int id, n;
};

static void *keep_main(void *arg)
{
	struct worker *w = arg;
	le_logger *lg = le_logger_get(w->e, w->id & 1 ? "a" : "b");
	for (int i = 0; i < w->n; i++) {
		le_debug(lg, "w%d %d", w->id, i);
		if (i % 500 == 499)
			le_dump_backtrace(w->e);
	}
	return NULL;
}

static void count_marked(const le_record *r, void *arg)
{
	*(long *)arg += !!(r->flags & LE_REC_BACKTRACE);
}

TEST(concurrent_keeping_and_dumping_accounts_for_every_call)
{
	le_engine *e = open_bt("debug", 64, 2);
	struct worker w[4];
	pthread_t th[4];
	le_stats st;
	long marked = 0;
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){e, i, 5000};
		CHECK_RC(pthread_create(&th[i], NULL, keep_main, &w[i]));
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	le_dump_backtrace(e);
	CHECK_RC(le_close_stats(e, &st));
	CHECK_EQ(st.backtrace_written + st.backtrace_dropped, 4 * 5000);
	CHECK(read_all(dir, LE_RECOVER_ABSOLUTE, count_marked, &marked) >= 0);
	CHECK_EQ((uint64_t)marked, st.backtrace_written);
	t_rmrf(dir);
}

/* A root recorder at DEBUG, the store, and c's line outputs as set. */
static le_engine *open_lines(le_config *c)
{
	c->dir = t_tmpdir(dir);
	c->durability = LE_SYNC_NONE;
	c->flush_ms = 5;
	c->backtrace = "debug";
	unsetenv("LOGENGINE_LEVEL");
	unsetenv("LOGENGINE_BACKTRACE");
	return t_open(c);
}

/* One kept record with a field, one plain, the trigger: written as
 * plain, kept (out before its trigger), boom. */
static void log_kept_plain_error(le_engine *e)
{
	le_debug_kv(e, LE_FIELDS(LE_I64("n", 5)), "kept %d", 1);
	le_info(e, "plain");
	le_error(e, "boom");
}

/* The stream sink's lines of recorded history say so as logengine cat
 * does ({backtrace} before the text, "backtrace":true in JSON), and the
 * marking field is not printed as one of the record's. */
TEST(stream_lines_mark_recorded_history)
{
	static const struct {
		int format;
		const char *kept;
	} want[] = {
		{LE_STREAM_TEXT, "DEBUG {backtrace} kept 1 n=5\n"},
		{LE_STREAM_JSON, "\"backtrace\":true,\"msg\":\"kept 1\","
		                 "\"fields\":{\"n\":5}}\n"},
	};
	char sdir[256], out[300], text[4096];
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		le_config c;
		le_config_init(&c);
		snprintf(out, sizeof out, "%s/stream.log", t_tmpdir(sdir));
		c.stream_path = out;
		c.stream_format = want[i].format;
		le_engine *e = open_lines(&c);
		log_kept_plain_error(e);
		CHECK_RC(le_close(e));
		FILE *f = fopen(out, "r");
		CHECK(f != NULL);
		size_t n = fread(text, 1, sizeof text - 1, f);
		fclose(f);
		text[n] = '\0';
		CHECK(strstr(text, want[i].kept) != NULL);
		CHECK(strstr(text, "le.backtrace") == NULL);
		char *plain = strstr(text, "plain"); /* logged after it */
		CHECK(plain && plain < strstr(text, "kept 1"));
		*strchr(plain, '\n') = '\0';
		CHECK(strstr(text, "backtrace") == NULL);
		t_rmrf(sdir);
		t_rmrf(dir);
	}
}

/* A bound UDP socket on the loopback, as a syslog server's. */
static int udp_server(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	CHECK(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* The next datagram into buf (NUL-terminated), waited for 5 s at most. */
static void udp_next(int fd, char *buf, size_t cap)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	CHECK(poll(&p, 1, 5000) == 1);
	ssize_t n = recv(fd, buf, cap - 1, 0);
	CHECK(n > 0);
	buf[n] = '\0';
}

/* Syslog messages of recorded history start their text with
 * {backtrace}; the field is not among their structured data. */
TEST(syslog_messages_mark_recorded_history)
{
	char addr[64], msg[3][2048];
	int port, fd = udp_server(&port);
	le_config c;
	le_config_init(&c);
	snprintf(addr, sizeof addr, "udp://127.0.0.1:%d", port);
	c.syslog_addr = addr;
	le_engine *e = open_lines(&c);
	log_kept_plain_error(e);
	for (int i = 0; i < 3; i++)
		udp_next(fd, msg[i], sizeof msg[i]);
	CHECK_RC(le_close(e));
	close(fd);
	CHECK(strstr(msg[0], " - plain") != NULL);
	CHECK(strstr(msg[1], "[fields@32473 n=\"5\"] {backtrace} kept 1"));
	CHECK(strstr(msg[1], "le.backtrace") == NULL);
	CHECK(strstr(msg[2], " - boom") != NULL);
	t_rmrf(dir);
}

/* le_tail reports recorded history as the reader does: the flag, and
 * the marking field out of the record's fields. */
TEST(tail_reports_recorded_history_as_the_flag)
{
	le_config c;
	le_config_init(&c);
	le_engine *e = open_lines(&c);
	le_record r;
	le_tail *t;
	size_t pos = 0;
	le_field f;
	log_kept_plain_error(e);
	CHECK_RC(le_flush(e, -1));
	CHECK_RC(le_tail_open(&t, dir, 0, 1, 0));
	CHECK_EQ(le_tail_next(t, &r), 1); /* plain */
	CHECK(!(r.flags & LE_REC_BACKTRACE));
	CHECK_EQ(le_tail_next(t, &r), 1);
	CHECK_EQ(r.len, 6);
	CHECK(!memcmp(r.payload, "kept 1", 6));
	CHECK(r.flags & LE_REC_BACKTRACE);
	CHECK_EQ(le_record_field(&r, &pos, &f), 1);
	CHECK_EQ(f.key_len, 1); /* n=5, the marking field gone */
	CHECK_EQ(le_record_field(&r, &pos, &f), 0);
	le_tail_close(t);
	CHECK_RC(le_close(e));
	t_rmrf(dir);
}

int main(int argc, char **argv)
{
	T_INIT(argc, argv);
	RUN(error_writes_the_kept_records_before_it_in_order);
	RUN(levels_below_the_recorder_are_not_kept);
	RUN(without_a_recorder_nothing_is_kept_and_no_ring_is_made);
	RUN(full_ring_drops_the_oldest_and_counts_them);
	RUN(error_on_one_logger_writes_its_history_alone_and_once);
	RUN(child_loggers_inherit_the_recorder);
	RUN(formatted_records_and_fields_are_kept_as_text);
	RUN(environment_sets_recorders_and_bad_items_are_reported);
	RUN(null_handles_and_bad_levels_are_refused);
	RUN(concurrent_keeping_and_dumping_accounts_for_every_call);
	RUN(stream_lines_mark_recorded_history);
	RUN(syslog_messages_mark_recorded_history);
	RUN(tail_reports_recorded_history_as_the_flag);
	return t_done();
}
