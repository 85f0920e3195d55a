#!/bin/sh
# Run the test binaries and scripts, show each one's output whole when it
# ends, and add up their closing "N passed, N failed[, N skipped]" lines
# into one line for the whole suite: "N passed, N failed, N skipped",
# after the "skip NAME: reason" lines of the skipped tests.  A test is
# skipped only when what it needs is not there (a tool not installed,
# more open files than the hard limit: tests/harness.h); LE_FAIL_ON_SKIP=1
# (CI) makes any skip a failure.
#
# PATH is left as it is: a test finds the programs it runs with the
# helpers of tests/tool.h and systest.py (which search the sbin
# directories too), so a normal user's run proves that each one does.
#
#   sh tests/run.sh TEST... [--alone TEST...]
#
# The tests before --alone run LE_JOBS at a time (the number of CPUs plus
# two by default: most tests wait on servers, disks and deadlines more than
# they compute), the longest first: each test's time is kept in
# $LE_TEST_TIMES ($BUILD/test-times) for the next run's order.  Tests after
# --alone measure time or load that others would disturb, and run one by
# one after the rest.  LE_TEST_JOBS (2 by default) is passed on: binaries
# that allow it run that many of their own tests at once (tests/harness.h).
passed=0 failed=0 skipped=0
jobs=${LE_JOBS:-$(($(nproc 2>/dev/null || echo 1) + 2))}
times=${LE_TEST_TIMES:-${BUILD:-build}/test-times}
export LE_TEST_JOBS="${LE_TEST_JOBS:-2}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/le-run-XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

# The tests before --alone, longest first by $times (unknown ones first,
# in the order given), one a line; the rest into $dir/alone.
order() {
	: >"$dir/alone"
	list=
	while [ $# -gt 0 ]; do
		if [ "$1" = --alone ]; then
			shift
			printf '%s\n' "$@" >"$dir/alone"
			break
		fi
		list="$list$1
"
		shift
	done
	printf '%s' "$list" | awk -v times="$times" '
		BEGIN { while ((getline l < times) > 0) { split(l, f, " "); ms[f[2]] = f[1] } }
		NF { printf "%d %d %s\n", ($1 in ms) ? ms[$1] : 1e9, NR, $1 }' |
		sort -k1,1nr -k2,2n | cut -d' ' -f3-
}

# Run test $2 as job $1 in the background: its output into $dir/$1.out,
# then "rc ms test" into $dir/$1.end, then $1 down the done FIFO.
start() {
	(
		t0=$(date +%s%N)
		"$2" </dev/null >"$dir/$1.out" 2>&1 3>&-
		rc=$?
		t1=$(date +%s%N)
		echo "$rc $(((t1 - t0) / 1000000)) $2" >"$dir/$1.end"
		echo "$1" >&3
	) &
}

# Print the output of job $1, add its result line into the sums, and
# keep its time.
finish() {
	read -r rc ms t <"$dir/$1.end"
	echo "== $t"
	cat "$dir/$1.out"
	echo "$ms $t" >>"$dir/times"
	grep '^skip ' "$dir/$1.out" | sed "s|^skip |  ${t##*/}: |" >>"$dir/skips"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' \
		"$dir/$1.out" | tail -n 1)
	if [ -z "$line" ]; then
		echo "FAIL $t: no result line (exit $rc)"
		failed=$((failed + 1))
		return
	fi
	p=$(echo "$line" | cut -d' ' -f1)
	f=$(echo "$line" | cut -d' ' -f3)
	s=$(echo "$line" | cut -d' ' -f5)
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + ${s:-0}))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		failed=$((failed + 1))
		echo "FAIL $t: exit $rc"
	fi
}

# Run the tests listed in file $1, $2 at a time: a job's end is waited
# for by reading its number from the FIFO, never by polling.
run_list() {
	running=0
	while read -r next; do
		[ -n "$next" ] || continue
		while [ "$running" -ge "$2" ]; do
			read -r i <&3
			finish "$i"
			running=$((running - 1))
		done
		n=$((n + 1))
		start "$n" "$next"
		running=$((running + 1))
	done <"$1"
	while [ "$running" -gt 0 ]; do
		read -r i <&3
		finish "$i"
		running=$((running - 1))
	done
}

mkfifo "$dir/done" || exit 2
exec 3<>"$dir/done" # read-write: no open blocks, no read sees an end
order "$@" >"$dir/parallel"
n=0
run_list "$dir/parallel" "$jobs"
run_list "$dir/alone" 1
# The times of this run, merged over the last (a test left out keeps its).
if [ -d "$(dirname "$times")" ]; then
	cat "$dir/times" "$times" 2>/dev/null | awk '!seen[$2]++' >"$dir/merged" &&
		cp "$dir/merged" "$times"
fi

if [ -s "$dir/skips" ]; then
	echo "skipped, for want of what they need:"
	cat "$dir/skips"
fi
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$skipped" -ne 0 ] && [ "${LE_FAIL_ON_SKIP:-0}" = 1 ]; then
	echo "FAIL: $skipped test(s) skipped (LE_FAIL_ON_SKIP=1): install what they need with scripts/deps.sh as root"
	exit 1
fi
[ "$failed" -eq 0 ]
