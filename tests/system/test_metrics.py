#!/usr/bin/python3
"""test_metrics.py -- `logengine serve`'s /metrics against the real
consumers: promtool's checker, the counters le_stats gives at close (by
level too, and the shards' states as labels), a prometheus server that
scrapes it while a producer writes, and an alert rule on the error rate
(promtool checks it) that fires in that prometheus once errors are
logged, and not before."""

import json
import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import (CLI, Producer, Serve, free_port, http_get,
                     metric_sum, need, need_tool, parse_metrics, run, start,
                     test, tmpdir, wait_until)


def two_dirs():
    d = tmpdir()
    return [os.path.join(d, "a"), os.path.join(d, "b")]


def written(serve, dirs):
    s = parse_metrics(serve.metrics())
    return [metric_sum(s, "logengine_records_written_total", dir=d)
            for d in dirs]


@test
def metrics_pass_promtool_check():
    need("observe")
    dirs = two_dirs()
    prod = Producer(dirs, rate=2000)
    serve = Serve(dirs)
    wait_until("records written in both directories",
               lambda: all(w > 0 for w in written(serve, dirs)))
    text = serve.metrics()
    r = subprocess.run([need_tool("promtool"), "check", "metrics"],
                       input=text, capture_output=True, text=True)
    assert r.returncode == 0 and not r.stdout.strip() and \
        not r.stderr.strip(), "promtool: %s%s" % (r.stdout, r.stderr)
    # every family says what it is, once, before its samples
    for fam in ("logengine_records_accepted_total",
                "logengine_records_written_total",
                "logengine_records_dropped_total",
                "logengine_bytes_written_total", "logengine_queue_records",
                "logengine_queue_bytes", "logengine_segments",
                "logengine_disk_bytes", "logengine_write_latency_seconds",
                "logengine_fsync_latency_seconds", "logengine_records_total",
                "logengine_shard_state"):
        assert text.count("# HELP %s " % fam) == 1, fam
        assert text.count("# TYPE %s " % fam) == 1, fam
    s = parse_metrics(text)
    for d in dirs:
        for shard in ("0", "1"):
            inf = s[("logengine_write_latency_seconds_bucket",
                     (("dir", d), ("le", "+Inf"), ("shard", shard)))]
            cnt = s[("logengine_write_latency_seconds_count",
                     (("dir", d), ("shard", shard)))]
            assert inf == cnt
        assert s[("logengine_up", (("dir", d),))] == 1
    prod.close()


@test
def metrics_equal_le_stats_at_close_for_two_directories():
    dirs = two_dirs()
    # a queue of 64 records at 40,000 a second: some are dropped, and
    # markers written, so those counters are checked too
    prod = Producer(dirs, rate=40000, queue=64)
    serve = Serve(dirs)
    wait_until("records written",
               lambda: all(w > 1000 for w in written(serve, dirs)))
    prod.cmd("every 1000")  # 10 pass, 990 in a summary at close
    time.sleep(1)
    final = prod.close()
    s = parse_metrics(serve.metrics())
    fields = {
        "accepted": "logengine_records_accepted_total",
        "written": "logengine_records_written_total",
        "dropped": "logengine_records_dropped_total",
        "bytes_written": "logengine_bytes_written_total",
        "markers": "logengine_markers_total",
        "segments_created": "logengine_segments_created_total",
        "syncs": "logengine_syncs_total",
        "checkpoints": "logengine_checkpoints_total",
    }
    dropped = 0
    for st in final["closed"]:
        d = st["dir"]
        assert st["rc"] == 0
        for k, name in fields.items():
            got = metric_sum(s, name, dir=d)
            assert got == st[k], "%s %s: /metrics %d, le_stats %d" % (
                d, k, got, st[k])
        assert s[("logengine_records_truncated_total",
                  (("dir", d),))] == st["truncated"]
        assert s[("logengine_records_suppressed_total",
                  (("dir", d),))] == st["suppressed"]
        assert s[("logengine_up", (("dir", d),))] == 0
        assert s[("logengine_queue_records", (("dir", d),))] == 0
        for shard in ("0", "1"):
            for state in ("none", "running", "stale", "stopped", "dead"):
                assert s[("logengine_shard_state",
                          (("dir", d), ("shard", shard),
                           ("state", state)))] == (state == "stopped")
        levels = ("trace", "debug", "info", "warn", "error", "fatal")
        for lv, want in zip(levels, st["levels"]):
            got = metric_sum(s, "logengine_records_total", dir=d, level=lv)
            assert got == want, "%s %s: /metrics %d, le_stats %d" % (
                d, lv, got, want)
        assert sum(st["levels"]) == st["accepted"] - \
            metric_sum(s, "logengine_records_dropped_total", dir=d) + \
            metric_sum(s, "logengine_records_dropped_io_total", dir=d)
        assert st["accepted"] == st["written"] + st["dropped"]
        dropped += st["dropped"]
    assert dropped > 0, "no drops: the test did not check them"
    assert [st["suppressed"] for st in final["closed"]] == [990, 0]


@test
def backtrace_records_total_counts_what_the_flight_recorder_wrote():
    dirs = two_dirs()
    os.environ["LOGENGINE_BACKTRACE"] = "debug"
    try:
        prod = Producer(dirs, rate=0)
    finally:
        del os.environ["LOGENGINE_BACKTRACE"]
    serve = Serve(dirs)
    r = prod.cmd("kept 7")
    assert r["written"] == 14, r
    wait_until("kept records counted in both directories",
               lambda: [metric_sum(parse_metrics(serve.metrics()),
                                   "logengine_backtrace_records_total",
                                   dir=d) for d in dirs] == [7, 7])
    text = serve.metrics()
    assert text.count("# TYPE logengine_backtrace_records_total counter") == 1
    # stats --live's lines for scripts say the same, shard=all summing
    out = subprocess.run([CLI, "stats", "--live", "-i", "0.1", "-n", "1"] +
                         dirs, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    alls = [ln for ln in out.stdout.splitlines() if " shard=all " in ln]
    assert len(alls) == 2 and all(" backtrace=7" in ln for ln in alls), \
        out.stdout
    prod.close()


PROM_CONFIG = """
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: logengine
    static_configs:
      - targets: ['127.0.0.1:%d']
"""

# An alert on the error rate, as an operator writes one.
ALERT_RULES = """
groups:
  - name: logengine
    rules:
      - alert: LogengineErrors
        expr: sum by (dir) (rate(logengine_records_total{level="error"}[30s])) > 0
        labels:
          severity: page
        annotations:
          summary: "{{ $labels.dir }} logs errors"
"""


def prom_get(port, path):
    st, _, body = http_get("http://127.0.0.1:%d%s" % (port, path))
    r = json.loads(body)
    assert r["status"] == "success", body
    return r["data"]


def prom_query(port, q):
    res = prom_get(port, "/api/v1/query?" + urllib.parse.urlencode(
        {"query": q}))["result"]
    return float(res[0]["value"][1]) if res else None


def prometheus(work, target, rules=None):
    """A prometheus scraping target every second (evaluating rules, a
    file, as often), ready.  @return its port."""
    cfg = os.path.join(work, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write(PROM_CONFIG % target)
        if rules:
            f.write("rule_files:\n  - %s\n" % rules)
    port = free_port()
    log = open(os.path.join(work, "prometheus.log"), "w")
    start([need_tool("prometheus"), "--config.file=" + cfg,
           "--storage.tsdb.path=" + os.path.join(work, "tsdb"),
           "--web.listen-address=127.0.0.1:%d" % port], stdout=log,
          stderr=log)
    log.close()

    def ready():
        try:
            return http_get("http://127.0.0.1:%d/-/ready" % port)[0] == 200
        except OSError:
            return False
    wait_until("prometheus ready", ready, timeout=30)
    return port


@test
def prometheus_rate_of_written_records_matches_the_producers():
    need("observe")
    dirs = two_dirs()
    work = tmpdir()
    prod = Producer(dirs, rate=10000)
    serve = Serve(dirs)
    port = prometheus(work, serve.port)
    # a 10 s window whole, and a few scrapes more
    q = "sum(rate(logengine_records_written_total[10s]))"
    wait_until("12 s of scrapes", lambda: (prom_query(
        port, "count_over_time(logengine_up[15s])") or 0) >= 12,
        timeout=40, every=1)
    time.sleep(2)
    got = prom_query(port, q)
    want = prod.cmd("stats")["rate"]
    prod.close()
    assert got is not None, "prometheus has no rate"
    assert abs(got - want) <= 0.2 * want, \
        "prometheus %.0f/s, producer %.0f/s" % (got, want)
    print("  prometheus rate %.0f/s, producer %.0f/s" % (got, want))


def firing(port, name):
    return [a for a in prom_get(port, "/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == name and a["state"] == "firing"]


@test
def prometheus_alert_on_the_error_rate_fires_when_errors_are_logged():
    need("observe")
    work = tmpdir()
    d = os.path.join(work, "a")
    rules = os.path.join(work, "rules.yml")
    with open(rules, "w") as f:
        f.write(ALERT_RULES)
    r = subprocess.run([need_tool("promtool"), "check", "rules", rules],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    prod = Producer([d], rate=200)  # info records only
    serve = Serve([d])
    port = prometheus(work, serve.port, rules)
    wait_until("the rule loaded and a few scrapes", lambda: prom_get(
        port, "/api/v1/rules")["groups"] and (prom_query(
            port, "count_over_time(logengine_up[15s])") or 0) >= 3,
        timeout=30, every=0.5)
    assert not firing(port, "LogengineErrors"), "fired without errors"
    for i in range(3):
        prod.cmd("log 4 payment %d failed" % i)
    alerts = wait_until("the alert firing", lambda: firing(
        port, "LogengineErrors"), timeout=30, every=0.5)
    assert alerts[0]["labels"]["dir"] == d, alerts
    assert alerts[0]["labels"]["severity"] == "page", alerts
    prod.close()


if __name__ == "__main__":
    sys.exit(run())
