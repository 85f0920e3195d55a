# perf/pipeline/harness.sh -- shell functions the harnesses beside it
# share (compare-log-pipeline.sh, tls-sweep.sh): a process's CPU and
# memory from /proc, the machine's busy time, waiting on a file or a
# process, and the fields of wrk-report.lua's and the gateway's lines.
# Sourced (POSIX sh); defines functions only.

# CPU seconds (user + system) of a process so far.
cpu_s() {
	tck=$(getconf CLK_TCK)
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null |
		awk -v t="$tck" '{ printf "%.3f", ($12 + $13) / t }'
}

# CPU seconds (user + system + irq) the whole machine was busy, so far.
machine_busy_s() {
	awk -v t="$(getconf CLK_TCK)" '$1 == "cpu" {
		printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / t; exit }' /proc/stat
}

# Peak RSS of a process in KiB.
rss_kb() {
	awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# Wait (at most $2 tenths of a second) for text $3 in file $1.
wait_for() {
	n=0
	while ! grep -q "$3" "$1" 2>/dev/null; do
		n=$((n + 1))
		[ "$n" -gt "$2" ] && return 1
		sleep 0.1
	done
}

# Wait for process $1 to end, at most $2 tenths of a second, then kill it.
reap() {
	n=0
	while kill -0 "$1" 2>/dev/null; do
		n=$((n + 1))
		if [ "$n" -gt "$2" ]; then
			kill -KILL "$1" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	wait "$1" 2>/dev/null || true
}

# Field $2 of the "WRK key value ..." line in file $1.
wrk_field() {
	awk -v k="$2" '$1 == "WRK" { for (i = 2; i < NF; i += 2)
		if ($i == k) print $(i + 1) }' "$1"
}

# Numeric field $2 of the gateway's JSON stats line in file $1.
gw_field() {
	sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" "$1" | tail -n 1
}

# Resident set of a process now (VmRSS), in KiB (0: gone).
rss_now_kb() {
	awk '/^VmRSS:/ { print $2; f = 1 } END { if (!f) print 0 }' \
		"/proc/$1/status" 2>/dev/null || echo 0
}

# Median of the numbers on stdin, one a line ("null" lines left out).
median() { grep -v null | sort -g | awk '{ a[NR] = $1 } END {
	if (!NR) print "null"; else if (NR % 2) print a[(NR + 1) / 2];
	else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# Write the header line of TSV file $2: the column names in $1, whatever
# the spaces and newlines between them, tab-separated.
tsv_header() {
	echo "$1" | tr -s ' \n' '\t\t' | sed 's/\t$//' >"$2"
	echo >>"$2"
}
