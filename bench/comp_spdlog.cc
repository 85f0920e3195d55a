/*
 * comp_spdlog.cc -- spdlog (Debian's libspdlog-dev) as a benchmark
 * competitor, as its documentation sets up an asynchronous file logger:
 * spdlog::init_thread_pool(8192, 1) -- a queue of 8,192 messages and one
 * worker thread --, spdlog::create_async<basic_file_sink_mt>, overflow
 * policy "block" (the default: nothing is dropped), the default pattern
 * "[%Y-%m-%d %H:%M:%S.%e] [bench] [info] payload" (a timestamp and a level
 * per record, as logengine's fields give).  In a soak the sink is a
 * rotating_file_sink_mt (4 files of 256 MiB).
 *
 * finish(): logger->flush(), drop our reference, spdlog::shutdown(): the
 * thread pool drains its queue and joins its worker; the last message
 * releases the logger, whose sink closes the file.  count(): lines.
 */
#include <spdlog/async.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/spdlog.h>
#include <spdlog/version.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench.h"

#define STR2(x) #x
#define STR(x) STR2(x)

namespace {

struct spd_state {
	std::shared_ptr<spdlog::logger> lg;
};

int spd_open(const struct bench_cfg *cfg, void **st)
{
	try {
		std::string path = std::string(cfg->dir) + "/spdlog.log";
		spdlog::init_thread_pool(8192, 1);
		auto *s = new spd_state;
		if (cfg->soak)
			s->lg = spdlog::create_async<
			        spdlog::sinks::rotating_file_sink_mt>(
			        "bench", path, 256u << 20, 4);
		else
			s->lg = spdlog::create_async<
			        spdlog::sinks::basic_file_sink_mt>("bench",
			                                           path, true);
		s->lg->set_level(spdlog::level::info);
		*st = s;
		return 0;
	} catch (const std::exception &ex) {
		fprintf(stderr, "spdlog: %s\n", ex.what());
		return -1;
	}
}

int spd_log(void *st, int, uint64_t, const char *p, uint32_t len)
{
	static_cast<spd_state *>(st)->lg->log(spdlog::level::info,
	                                      spdlog::string_view_t(p, len));
	return 0;
}

/* "{}", as spdlog users write it (and Quill's benchmark does): fmt's
 * shortest round-trip double ("2.5").  "{:f}" would print printf's
 * "2.500000" but sends fmt 9 to Dragon4 with big integers for fixed
 * precision, several times the cost of the call: a handicap spdlog would
 * not have in real use. */
int spd_log_fmt(void *st, int, int a, int b, double d)
{
	static_cast<spd_state *>(st)->lg->info(
	        "Logging int: {}, int: {}, double: {}", a, b, d);
	return 0;
}

/* BENCH_KV: spdlog has no typed fields; "{} {} {}" is how its users
 * log three values (formatted on the calling thread, as text). */
int spd_log_kv(void *st, int, int a, int b, double d)
{
	static_cast<spd_state *>(st)->lg->info("{} {} {}", a, b, d);
	return 0;
}

int spd_finish(void *st, struct bench_finish *out)
{
	auto *s = static_cast<spd_state *>(st);
	auto tp = spdlog::thread_pool();
	out->dropped = tp ? tp->overrun_counter() : 0;
	tp.reset();
	s->lg->flush();
	s->lg.reset();
	delete s;
	spdlog::shutdown();
	return 0;
}

/* Every line is a record: payloads hold no newline. */
int spd_count(const struct bench_cfg *cfg, struct bench_count *out)
{
	int rc = bench_scan_files(cfg->dir, nullptr, &out->bytes, &out->records,
	                          nullptr);
	if (rc < 0)
		snprintf(out->why, sizeof out->why, "scan: %s",
		         strerror(-rc));
	return rc;
}

} // namespace

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer builds (make tsan): libspdlog and libglog are Debian's,
 * not instrumented, so their atomics are invisible to TSan, which then
 * reports races on the objects they hand over (a logger freed by the
 * worker after its reference count, atomically, reached zero).  Those are
 * not ours to check; logengine's own code stays fully checked. */
extern "C" const char *__tsan_default_suppressions(void);
extern "C" const char *__tsan_default_suppressions(void)
{
	return "race:libspdlog.so\nrace:libglog.so\n";
}
#endif

extern "C" const struct competitor bench_spdlog = {
	"spdlog",
	STR(SPDLOG_VER_MAJOR) "." STR(SPDLOG_VER_MINOR) "." STR(
	        SPDLOG_VER_PATCH),
	spd_open,
	spd_log,
	spd_log_fmt,
	spd_finish,
	nullptr,
	spd_count,
	nullptr,
	spd_log_kv,
	nullptr,
};
