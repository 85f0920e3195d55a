#!/bin/sh
# perf/profile-bench.sh -- where logengine's time goes, on the benchmark's
# own workload (build/bench, preset "custom", logengine only): the figures
# behind the "Profile" section of docs/BENCHMARKS.md.
#
#   perf/profile-bench.sh [bench knobs...]     e.g. --fields 0 or --batch 256
#
# Three looks, each saved under perf/results/bench/profile-<date>/:
#   perf-stat.txt     software events (this VM has no hardware counters):
#                     task-clock, page faults, context switches, migrations
#   perf-report.txt   perf record -e cpu-clock -g: samples by thread and
#                     symbol, kernel included (producer = "bench", writer
#                     thread = "bench" too: see the per-thread callgrind)
#   callgrind.*       valgrind --tool=callgrind --separate-threads=yes on a
#                     tenth of the records: instructions per function and
#                     per thread (producer and writer apart), exact and
#                     noise-free, which wall-clock numbers here are not.
# N=records (default 1000000).  Needs linux-perf and valgrind
# (sh scripts/deps.sh profile).
set -eu
BUILD=${BUILD:-build}
N=${N:-1000000}
out=perf/results/bench/profile-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
run="$BUILD/bench --only custom --targets logengine -r 1 --quiet
     --out $out/runs --work $BUILD/profile-work"

command -v perf >/dev/null && command -v valgrind >/dev/null || {
	echo "profile-bench: needs perf and valgrind" \
		"(sh scripts/deps.sh profile)" >&2
	exit 1
}
echo "== perf stat ($N records)"
perf stat -e task-clock,page-faults,context-switches,cpu-migrations \
	-o "$out/perf-stat.txt" -- $run -n "$N" "$@" >"$out/run-stat.md"
cat "$out/perf-stat.txt"

echo "== perf record ($N records)"
perf record -q -e cpu-clock -F 4999 -g -o "$out/perf.data" -- \
	$run -n "$N" "$@" >/dev/null 2>&1
perf report -i "$out/perf.data" --no-children --sort comm,dso,symbol \
	--stdio 2>/dev/null >"$out/perf-report.txt"
grep -E '^ +[0-9.]+%' "$out/perf-report.txt" | head -30

echo "== callgrind ($((N / 10)) records)"
valgrind --tool=callgrind --separate-threads=yes \
	--callgrind-out-file="$out/callgrind.%p" -q -- \
	$run -n $((N / 10)) "$@" >/dev/null 2>&1 || true
for f in "$out"/callgrind.*; do
	[ -s "$f" ] || continue
	callgrind_annotate --inclusive=no "$f" 2>/dev/null | head -40 >"$f.txt"
	echo "--- $f"
	sed -n '1,/^Ir/d; 1,25p' "$f.txt" | head -25
done
echo "profile-bench: results in $out"
