#!/bin/sh
# perf/profile-bench.sh -- where logengine's time goes, on the benchmark's
# own workload (build/bench, preset "custom", logengine only); see
# docs/BENCHMARKS.md, "perf/".
#
#   perf/profile-bench.sh [bench knobs...]     e.g. --fields 0 or --batch 256
#
# Three looks, each saved under perf/results/bench/profile-<date>/:
#   perf-stat.txt     software events (VMs often expose no hardware counters):
#                     task-clock, page faults, context switches, migrations
#   perf-report.txt   perf record -e cpu-clock -g: samples by thread
#                     ("producer", "le-writer-0" = the engine's writer,
#                     "driver") and symbol, kernel included
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

echo "== perf record ($N records): by thread, then each thread's top symbols"
perf record -q -e cpu-clock -F 4999 -g -o "$out/perf.data" -- \
	$run -n "$N" "$@" >/dev/null 2>&1
perf report -i "$out/perf.data" --no-children --sort comm,dso,symbol \
	--stdio 2>/dev/null >"$out/perf-report.txt"
perf report -i "$out/perf.data" --no-children --sort comm --stdio \
	2>/dev/null | grep -E '^ +[0-9.]+%' | head -6
# The driver names its threads "producer" (the calls) and "driver"
# (counting, sorting); logengine names its own ("le-writer-0", the shard's
# writer; "le-reaper", "le-stream" when configured).
for comm in producer le-writer-0; do
	echo "--- $comm"
	perf report -i "$out/perf.data" --no-children --comm "$comm" \
		--sort dso,symbol --stdio 2>/dev/null |
		grep -E '^ +[0-9.]+%' | head -15
done

echo "== callgrind ($((N / 10)) records): instructions per record, per thread"
valgrind --tool=callgrind --separate-threads=yes \
	--callgrind-out-file="$out/callgrind.%p" -q -- \
	$run -n $((N / 10)) "$@" >/dev/null 2>&1 || true
for f in "$out"/callgrind.*-*; do
	[ -s "$f" ] || continue
	callgrind_annotate --inclusive=no "$f" 2>/dev/null >"$f.txt"
	total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }' "$f.txt")
	echo "--- $f: $((total / (N / 10))) instructions per record"
	awk '/file:function/ { on = 1; next }
	     on && /^ *[0-9,]+ \(/ { print; if (++n == 12) exit }
	     on && /Auto-annotated/ { exit }' "$f.txt"
done
echo "profile-bench: results in $out"
