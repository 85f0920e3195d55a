#!/usr/bin/env python3
"""perf/journal-bench.py -- the reader's two figures, side by side in one run.

  1. `logengine cat --since T` near the end of a big log (default 10 GB):
     the time from starting the command to its first line (goal: under
     100 ms), T being the timestamp of the record LAST_N records before the
     end.  It is a seek (segment headers, time indexes, bisection of the
     active segments), not a scan.
  2. `logengine cat -o json > /dev/null` over the first RECORDS records:
     records per second (goal: at least 2 M/s), with `jq -c .` over the
     same records (written to a file first) as the reference point of what
     JSON tooling costs, in the same run.

  make perf-tools && perf/journal-bench.py [--size 10G] [--shards 4]
      [--records 2000000] [--trials 5] [--log DIR] [--out DIR] [--keep]

The log is made once by build/journal-gen (access-log-like 128-byte
records, durability none) and reused while its size matches (--keep keeps
it afterwards; by default it is removed).  The page cache is warm: the
figures are those of a log read again, as `cat` and `tail` mostly are.
Writes OUT/journal.json and OUT/journal.md (default perf/results/journal).
Exit status 1 when a goal is missed, 2 when the run could not be made.
"""
import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

GOAL_SINCE_MS = 100.0
GOAL_JSON_RPS = 2_000_000


def size_arg(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    s = s.strip().upper().rstrip("B")
    if s and s[-1] in units:
        return int(float(s[:-1]) * units[s[-1]])
    return int(s)


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL,
                              text=True).stdout.strip()
    except OSError:
        return ""


def machine(log):
    """The machine line of docs/BENCHMARKS.md ("Method"): a VM's model
    name can stand for different host CPUs, so family, model and clock
    too."""
    cpu, fam, model, mhz = "?", "?", "?", "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k, v = k.strip(), v.strip()
                if k == "model name" and cpu == "?":
                    cpu = v
                elif k == "cpu family" and fam == "?":
                    fam = v
                elif k == "model" and model == "?":
                    model = v
                elif k == "cpu MHz" and mhz == "?":
                    mhz = v
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"cpu": "%s (family %s, model %s, %s MHz)" % (cpu, fam, model,
                                                         mhz),
            "cpus": os.cpu_count(), "mem_gb": round(mem / 2**30, 1),
            "kernel": platform.release(),
            "fs": sh("stat -f -c %%T '%s'" % log),
            "clocksource": sh("cat /sys/devices/system/clocksource/"
                              "clocksource0/current_clocksource"),
            "compiler": sh("cc --version | head -1"),
            "commit": sh("git rev-parse --short HEAD"),
            "jq": sh("jq --version"),
            "load": os.getloadavg()[0]}


def log_bytes(log):
    total = 0
    for root, _, files in os.walk(log):
        for f in files:
            if f.endswith(".seg"):
                total += os.path.getsize(os.path.join(root, f))
    return total


def indexed(log):
    segs = idx = 0
    for root, _, files in os.walk(log):
        names = set(files)
        s = sorted(f for f in files if f.endswith(".seg"))
        segs += len(s)
        idx += sum(1 for f in s[:-1] if f[:-4] + ".idx" in names)
    return segs, idx


def make_log(args, env):
    if os.path.isdir(args.log) and log_bytes(args.log) >= args.size:
        return {"reused": True}
    if os.path.exists(args.log):
        shutil.rmtree(args.log)
    parent = os.path.dirname(os.path.abspath(args.log))
    free = shutil.disk_usage(parent).free
    if free < args.size * 1.15 + (1 << 30):
        sys.exit("journal-bench: %s has %.1f GB free, the log needs %.1f GB"
                 " (use --size)" % (parent, free / 1e9, args.size / 1e9))
    out = subprocess.run([args.gen, args.log, str(args.size),
                          str(args.shards)], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def first_line_ms(cmd, env):
    """Start cmd, read its first line: milliseconds.  Then stop it."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
    line = p.stdout.readline()
    t1 = time.perf_counter()
    p.kill()
    p.wait()
    if not line:
        sys.exit("journal-bench: no line from " + " ".join(cmd))
    return (t1 - t0) * 1e3, line


def child_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd, env, stdout=subprocess.DEVNULL, stdin=None, cpu=None):
    """Run cmd: wall seconds.  cpu, a list, gets its CPU seconds (user +
    sys): on a shared machine the wall time counts the waits for a core,
    the CPU time does not."""
    c0 = child_cpu()
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=stdout, stdin=stdin, env=env, check=True)
    t1 = time.perf_counter()
    if cpu is not None:
        cpu.append(child_cpu() - c0)
    return t1 - t0


def rate(n, seconds):
    """records/s: median, min, max over the runs' seconds."""
    return (n / statistics.median(seconds), n / max(seconds),
            n / min(seconds))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=size_arg, default=size_arg("10G"))
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--last-n", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=5)
    build = os.environ.get("BUILD", "build")
    ap.add_argument("--log", default=os.path.join(build, "journal-bench-log"))
    ap.add_argument("--out", default="perf/results/journal")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--cli", default=os.path.join(build, "logengine"))
    ap.add_argument("--gen", default=os.path.join(build, "journal-gen"))
    args = ap.parse_args()
    for tool in (args.cli, args.gen):
        if not os.access(tool, os.X_OK):
            sys.exit("journal-bench: %s not built (make perf-tools)" % tool)
    if not shutil.which("jq"):
        sys.exit("journal-bench: jq missing (scripts/deps.sh journal)")
    env = dict(os.environ, TZ="UTC")
    os.makedirs(args.out, exist_ok=True)

    made = make_log(args, env)
    segs, idx = indexed(args.log)
    total = log_bytes(args.log)

    # 1. --since near the end: time to the first line
    line = subprocess.run([args.cli, "cat", "-o", "short-unix", "-n",
                           str(args.last_n), args.log], env=env, check=True,
                          stdout=subprocess.PIPE, text=True).stdout
    since = "@" + line.split(" ", 1)[0]
    since_cmd = [args.cli, "cat", "--since", since, "-o", "json", args.log]
    since_ms = []
    for _ in range(args.trials):
        ms, _ = first_line_ms(since_cmd, env)
        since_ms.append(ms)

    # 2. JSON lines: logengine, then jq over the same records
    json_cmd = [args.cli, "cat", "-o", "json", "--lines=+%d" % args.records,
                args.log]
    json_cpu = []
    json_s = [timed(json_cmd, env, cpu=json_cpu) for _ in range(args.trials)]
    records_json = os.path.join(args.out, "records.json")
    with open(records_json, "w") as f:
        timed(json_cmd, env, stdout=f)
    jq_cmd = ["jq", "-c", "."]
    jq_s, jq_cpu = [], []
    for _ in range(min(args.trials, 3)):
        with open(records_json) as f:
            jq_s.append(timed(jq_cmd, env, stdin=f, cpu=jq_cpu))
    os.unlink(records_json)

    since_med = statistics.median(since_ms)
    rps, rps_lo, rps_hi = rate(args.records, json_s)
    cpu_rps, cpu_lo, cpu_hi = rate(args.records, json_cpu)
    jq_rps, jq_lo, jq_hi = rate(args.records, jq_s)
    jq_cpu_rps, jq_cpu_lo, jq_cpu_hi = rate(args.records, jq_cpu)
    result = {
        "machine": machine(args.log),
        "log": {"dir": args.log, "segment_bytes": total, "segments": segs,
                "sealed_with_index": idx, "shards": args.shards,
                "made": made},
        "since_first_line_ms": {"median": since_med, "min": min(since_ms),
                                "max": max(since_ms), "trials": since_ms,
                                "command": " ".join(since_cmd),
                                "goal_below": GOAL_SINCE_MS},
        "cat_json_records_per_s": {"median": rps, "min": rps_lo,
                                   "max": rps_hi,
                                   "per_cpu_second": cpu_rps,
                                   "trials_s": json_s,
                                   "trials_cpu_s": json_cpu,
                                   "records": args.records,
                                   "command": " ".join(json_cmd) +
                                   " > /dev/null",
                                   "goal_at_least": GOAL_JSON_RPS},
        "jq_reference_records_per_s": {"median": jq_rps, "min": jq_lo,
                                       "max": jq_hi,
                                       "per_cpu_second": jq_cpu_rps,
                                       "trials_s": jq_s,
                                       "trials_cpu_s": jq_cpu,
                                       "command": "jq -c . < records.json "
                                       "> /dev/null"},
    }
    with open(os.path.join(args.out, "journal.json"), "w") as f:
        json.dump(result, f, indent=2)
    met_since = since_med < GOAL_SINCE_MS
    met_json = rps >= GOAL_JSON_RPS
    md = [
        "# logengine cat: seek and JSON figures",
        "",
        "Machine: %s, %s CPUs, %s GB, Linux %s, %s, clocksource %s; %s; "
        "%s; logengine commit %s; load %.1f at the start." % tuple(
            result["machine"][k] for k in (
                "cpu", "cpus", "mem_gb", "kernel", "fs", "clocksource",
                "compiler", "jq", "commit", "load")),
        "Log: %.2f GB of segments, %d shards, %d segments (%d sealed with "
        "a time index), page cache warm." % (total / 1e9, args.shards, segs,
                                              idx),
        "",
        "| figure | median | min - max | per CPU second | goal | met |",
        "|---|---:|---:|---:|---:|:-:|",
        "| `cat --since` (%d records before the end): first line | %.1f ms |"
        " %.1f - %.1f ms | | < %d ms | %s |" % (
            args.last_n, since_med, min(since_ms), max(since_ms),
            GOAL_SINCE_MS, "yes" if met_since else "NO"),
        "| `cat -o json > /dev/null`, %d records | %.2f M records/s |"
        " %.2f - %.2f M | %.2f M (%.2f - %.2f) | >= 2 M/s | %s |" % (
            args.records, rps / 1e6, rps_lo / 1e6, rps_hi / 1e6,
            cpu_rps / 1e6, cpu_lo / 1e6, cpu_hi / 1e6,
            "yes" if met_json else "NO"),
        "| `jq -c .` over the same records (reference) | %.2f M records/s |"
        " %.2f - %.2f M | %.2f M (%.2f - %.2f) | | |" % (
            jq_rps / 1e6, jq_lo / 1e6, jq_hi / 1e6, jq_cpu_rps / 1e6,
            jq_cpu_lo / 1e6, jq_cpu_hi / 1e6),
        "",
        "Commands: `%s`; `%s > /dev/null`; `jq -c . < records.json > "
        "/dev/null`." % (" ".join(since_cmd), " ".join(json_cmd)),
        "",
    ]
    with open(os.path.join(args.out, "journal.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    if not args.keep:
        shutil.rmtree(args.log, ignore_errors=True)
    sys.exit(0 if met_since and met_json else 1)


if __name__ == "__main__":
    main()
