/*
 * comp_glog.cc -- glog (Debian's libgoogle-glog-dev) as a benchmark
 * competitor: LOG(INFO) into a log file of its own
 * (SetLogDestination(INFO, dir/glog.)), with glog's defaults otherwise:
 * synchronous, the caller formats "I20260101 12:00:00.123456 tid
 * file:line] " and fwrite()s under glog's mutex; stdio buffering, flushed
 * every logbufsecs.  finish(): FlushLogFiles(INFO) and
 * ShutdownGoogleLogging().  count(): lines that start like a record
 * ([IWEF] and a date), not the file's header lines.
 *
 * glog deletes no old file (its cleaner works in days), so it takes no
 * part in soaks.
 */
#include <glog/logging.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench.h"

namespace {

int glog_open(const struct bench_cfg *cfg, void **st)
{
	static std::string base;

	if (cfg->soak) {
		fprintf(stderr, "glog: no soak (it never deletes old files)\n");
		return -1;
	}
	FLAGS_logtostderr = false;
	FLAGS_alsologtostderr = false;
	FLAGS_stderrthreshold = google::GLOG_FATAL;
	FLAGS_log_dir = cfg->dir;
	google::InitGoogleLogging("bench");
	base = std::string(cfg->dir) + "/glog.";
	google::SetLogDestination(google::GLOG_INFO, base.c_str());
	google::SetLogSymlink(google::GLOG_INFO, "");
	*st = nullptr;
	return 0;
}

int glog_log(void *, int, uint64_t, const char *p, uint32_t len)
{
	LOG(INFO).write(p, len);
	return 0;
}

/* As glog users write it: the stream's default double format ("2.5"). */
int glog_log_fmt(void *, int, int a, int b, double d)
{
	LOG(INFO) << "Logging int: " << a << ", int: " << b << ", double: "
	          << d;
	return 0;
}

int glog_finish(void *, struct bench_finish *out)
{
	google::FlushLogFiles(google::GLOG_INFO);
	google::ShutdownGoogleLogging();
	out->dropped = 0;
	return 0;
}

/* "I20260101 12:00:00.123456 ..." */
int is_record(const char *line, size_t len)
{
	return len >= 5 && strchr("IWEF", line[0]) && line[1] >= '0' &&
	       line[1] <= '9' && line[2] >= '0' && line[2] <= '9';
}

int glog_count(const struct bench_cfg *cfg, struct bench_count *out)
{
	int rc = bench_scan_files(cfg->dir, nullptr, &out->bytes, &out->records,
	                          is_record);
	if (rc < 0)
		snprintf(out->why, sizeof out->why, "scan: %s",
		         strerror(-rc));
	return rc;
}

} // namespace

extern "C" const struct competitor bench_glog = {
	"glog",
	"0.6 (Debian)",
	glog_open,
	glog_log,
	glog_log_fmt,
	glog_finish,
	nullptr,
	glog_count,
	nullptr,
	nullptr,
	nullptr,
};
