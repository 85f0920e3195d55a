-- perf/pipeline/wrk-report.lua -- wrk's done() callback for
-- compare-log-pipeline.sh: one line "WRK key value ..." with the counts
-- and the latency percentiles (wrk --latency prints 50/75/90/99 only; the
-- required gates need p95).
-- Latencies in microseconds; wrk keeps samples only for completed requests
-- (a response slower than --timeout counts as a timeout instead).
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK requests %d duration_us %d bytes %d connect %d read %d write %d " ..
    "status %d timeout %d mean_us %.1f p50_us %d p75_us %d p90_us %d " ..
    "p95_us %d p99_us %d max_us %d\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read,
    e.write, e.status, e.timeout, latency.mean, latency:percentile(50),
    latency:percentile(75), latency:percentile(90), latency:percentile(95),
    latency:percentile(99), latency.max))
end
