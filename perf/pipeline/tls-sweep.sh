#!/bin/sh
# perf/pipeline/tls-sweep.sh -- seed 004's sweep: an HTTPS gateway loaded
# with wrk at 64, 256 and 512 keep-alive connections, with its access log
# off, written synchronously to a file by the request thread, and through
# logengine (the engine's defaults, a segment store): requests/s, p50 and
# p99 latency, CPU per request, RSS before, during and after the load.
#
#   perf/pipeline/tls-sweep.sh [GATEWAY]   (default build/gateway:
#                                            make pipeline)
#
# Knobs (environment): CONNS="64 256 512" TRIALS=3 WARMUP_S=2
# DURATION_S=10 COOL_S=3 WRK_THREADS=(CPUs) WRK_TIMEOUT_S=2 PORT=18443
# CASES="off file logengine" OUT=perf/results/tls-sweep
# STORE_ARGS= (more gateway options for the logengine case, e.g.
# "--queue-bytes 262144").
#
# The gateway (gateway.c --backend-port 0) serves HTTPS with libmicrohttpd
# and GnuTLS, one thread per connection, with a self-signed RSA-2048
# certificate this script makes with openssl in a temporary directory;
# every request (Host: loadtest.invalid) matches no route and is answered
# 404 by the gateway itself, as in the seed.  The three access logs:
#   off        none;
#   file       the request thread formats the line and write(2)s it to
#              a file (stdout redirected to it);
#   logengine  le_info into a segment store in the temporary directory,
#              everything else the engine's defaults.
#
# Per connection count, trial and case (the cases in turn inside a trial,
# so that the runs compared were seconds apart under the same load; each
# trial's round starts with the next case):
# start the gateway, RSS before (VmRSS), wrk warm-up, the measured wrk
# run with VmRSS sampled every 0.2 s (during: their mean; peak: VmHWM),
# the gateway's, wrk's and the machine's CPU over the window, COOL_S idle, RSS
# after, SIGTERM (the gateway prints its counters as one JSON line).
#
# What the access log costs.  On a shared 2-CPU machine the requests/s
# of two runs differ by more than 1%, so the goal (under 1% of
# requests/s) is judged on CPU: the log's CPU per request (one
# access_log call, timed by the gateway on 1 call in 16, less the
# timer's own cost, plus the engine's writer CPU) over the CPU the
# gateway and wrk spent per request (with the kernel's work they do in
# their system calls).  With the CPUs busy with the two, requests/s is
# the CPUs over that figure, so the share is what the log takes from
# requests/s.  The machine's busy CPU per request is printed too: on a
# quiet machine it is about the same figure, on a shared one it counts
# the other users' work as well.  The paired requests/s ratio against
# off is printed beside it.  RSS added: the mean RSS during the load less off's in the same
# trial.
#
# Writes OUT/tls-sweep.md (the tables and the goals' lines, printed too)
# and OUT/raw/STAMP/ (trials.tsv, wrk output, gateway stderr).  Exit
# status 2 when the run could not be made; the goals' verdicts are in
# the output, not in the status.
set -eu

BUILD=${BUILD:-build}
GATEWAY=${1:-$BUILD/gateway}
CONNS=${CONNS:-"64 256 512"}
TRIALS=${TRIALS:-3}
WARMUP_S=${WARMUP_S:-2}
DURATION_S=${DURATION_S:-10}
COOL_S=${COOL_S:-3}
WRK_THREADS=${WRK_THREADS:-$(nproc)}
WRK_TIMEOUT_S=${WRK_TIMEOUT_S:-2}
PORT=${PORT:-18443}
CASES=${CASES:-"off file logengine"}
OUT=${OUT:-perf/results/tls-sweep}
STORE_ARGS=${STORE_ARGS:-}
LUA=$(dirname "$0")/wrk-report.lua

# cpu_s, machine_busy_s, rss_kb, rss_now_kb, wait_for, reap, wrk_field,
# gw_field, median, tsv_header
. "$(dirname "$0")/harness.sh"

die() { echo "tls-sweep: $*" >&2; exit 2; }

[ -x "$GATEWAY" ] || die "$GATEWAY: not built (make pipeline)"
for t in wrk openssl; do
	command -v $t >/dev/null || die "$t: not installed (sh scripts/deps.sh pipeline)"
done

stamp=$(date -u +%Y%m%dT%H%M%SZ)
raw=$OUT/raw/$stamp
mkdir -p "$raw"
tsv=$raw/trials.tsv
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tls-sweep.XXXXXX")
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
	-subj /CN=loadtest.invalid -keyout "$tmp/key.pem" \
	-out "$tmp/cert.pem" >"$raw/openssl.log" 2>&1 ||
	die "openssl could not make the certificate: $(cat "$raw/openssl.log")"

# CPU seconds (user + system) of this shell's children that have ended
# (wrk's, once it returned), into $tmp/cpu.  Called as a command, not in
# a command substitution: a subshell's `times` counts its own children.
children_cpu_s() {
	times >"$tmp/times"
	awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
		printf "%.3f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
		"$tmp/times" >"$tmp/cpu"
}

# The mean of the numbers in file $1 (0: none).
mean() { awk '{ s += $1; n++ } END { printf "%.0f", n ? s / n : 0 }' "$1"; }

# Sample the VmRSS of process $1 into file $2 every 0.2 s, until killed
# or the process is gone.
sample_rss() {
	while kill -0 "$1" 2>/dev/null; do
		rss_now_kb "$1" >>"$2"
		sleep 0.2
	done
}

# One run: case $1 at $2 connections, trial $3; one row of the TSV.
run_one() {
	v=$1 c=$2 t=$3 tag=$1-$2-$3
	out=/dev/null log=off more=
	case $v in
	file) out=$tmp/access.log log=sync ;;
	logengine) log=store more=$STORE_ARGS ;;
	esac
	rm -rf "$tmp/store" "$tmp/access.log"
	"$GATEWAY" --port "$PORT" --backend-port 0 --log "$log" \
		--dir "$tmp/store" --tls-cert "$tmp/cert.pem" \
		--tls-key "$tmp/key.pem" --stuck-ms $((WRK_TIMEOUT_S * 1000)) \
		$more >"$out" 2>"$raw/$tag.gw" &
	gpid=$!
	pids="$pids $gpid"
	wait_for "$raw/$tag.gw" 50 listening ||
		die "$tag: gateway did not start: $(cat "$raw/$tag.gw")"
	url=https://127.0.0.1:$PORT/
	rss0=$(rss_now_kb "$gpid")
	wrk -t"$WRK_THREADS" -c"$c" -d"${WARMUP_S}s" --timeout "${WRK_TIMEOUT_S}s" \
		-H "Host: loadtest.invalid" "$url" >"$raw/$tag.warmup" 2>&1 || true
	c0=$(cpu_s "$gpid") m0=$(machine_busy_s)
	children_cpu_s; w0=$(cat "$tmp/cpu")
	kill -USR1 "$gpid"
	sample_rss "$gpid" "$raw/$tag.rss" &
	spid=$!
	pids="$pids $spid"
	wrk -t"$WRK_THREADS" -c"$c" -d"${DURATION_S}s" --timeout "${WRK_TIMEOUT_S}s" \
		-H "Host: loadtest.invalid" --latency -s "$LUA" "$url" \
		>"$raw/$tag.wrk" 2>&1 || true
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	c1=$(cpu_s "$gpid") m1=$(machine_busy_s)
	children_cpu_s; w1=$(cat "$tmp/cpu")
	# VmHWM is brought up to date lazily: a sample may be above it.
	peak=$( (rss_kb "$gpid"; cat "$raw/$tag.rss") | sort -n | tail -n 1)
	sleep "$COOL_S" # the load is over: what stays resident after it
	rss2=$(rss_now_kb "$gpid")
	kill -TERM "$gpid" 2>/dev/null || true
	wait_for "$raw/$tag.gw" 50 '"log":' || echo "  $tag: no stats line" >&2
	reap "$gpid" 100
	record "$v" "$c" "$t" "$raw/$tag.wrk" "$raw/$tag.gw" \
		"$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" \
		"$(awk -v a="$m0" -v b="$m1" 'BEGIN { print b - a }')" \
		"$rss0" "$(mean "$raw/$tag.rss")" "$peak" "$rss2" \
		"$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')"
}

# Append one run's row: case conns trial wrk-file gw-file cpu_s
# machine_s rss_before rss_during peak rss_after (KiB) wrk_cpu_s.
record() {
	w=$4 g=$5
	req=$(wrk_field "$w" requests) dur=$(wrk_field "$w" duration_us)
	[ -n "$req" ] || { req=0; dur=$((DURATION_S * 1000000)); }
	err=0
	for k in connect read write timeout; do
		x=$(wrk_field "$w" $k)
		err=$((err + ${x:-0}))
	done
	awk -v v="$1" -v c="$2" -v t="$3" -v req="$req" -v dur="$dur" \
	    -v err="$err" -v p50="$(wrk_field "$w" p50_us)" \
	    -v p99="$(wrk_field "$w" p99_us)" -v cpu="$6" -v mcpu="$7" \
	    -v r0="$8" -v r1="$9" -v rp="${10}" -v r2="${11}" -v wcpu="${12}" \
	    -v gr="$(gw_field "$g" requests)" -v lns="$(gw_field "$g" log_call_ns)" \
	    -v tns="$(gw_field "$g" log_timer_ns)" \
	    -v wns="$(gw_field "$g" writer_cpu_ns)" \
	    -v dropped="$(gw_field "$g" dropped)" 'BEGIN {
		us = req > 0 ? 1e6 / req : 0
		mc = mcpu * us
		# the CPU the requests themselves cost: gateway and wrk
		sut = (cpu + wcpu) * us
		# the log per request: the call, and the writer over the
		# gateway life (gr: its requests, warm-up included)
		# less the timer around the timed call
		call = lns > tns ? lns - tns : 0
		lg = call / 1000 + (gr > 0 ? wns / 1000 / gr : 0)
		# no request completed (a window too short for the TLS
		# handshakes): nothing per request to say
		if (req == 0) {
			printf "%s\t%s\t%s\t0\t0\t%d\tnull\tnull\tnull\tnull\t", v, c, t, err
			printf "%d\t%d\t%d\t%d\tnull\tnull\t%d\tnull\n", r0, r1, rp, r2, dropped
			exit
		}
		printf "%s\t%s\t%s\t%d\t%.1f\t%d\t%.3f\t%.3f\t%.2f\t%.2f\t", v, c,
		       t, req, req / (dur / 1e6), err, p50 / 1000, p99 / 1000,
		       cpu * us, mc
		printf "%d\t%d\t%d\t%d\t%.3f\t%.5f\t%d\t%.2f\n", r0, r1, rp, r2,
		       lg, (sut > 0 ? lg / sut : 0), dropped, sut
	}' >>"$tsv"
	tail -n 1 "$tsv" | awk -F'\t' '{ printf "  %-9s c=%-3s trial %s: %8.0f req/s  p99 %6.2f ms  errors %s  gw %.1f us/req  log %.3f us/req (%.2f%%)  rss %.1f/%.1f/%.1f MiB\n", $1, $2, $3, $5, $8, $6, $9, $15, $16 * 100, $11 / 1024, $12 / 1024, $14 / 1024 }'
}

COLS="case conns trial requests rps errors p50_ms p99_ms cpu_us_per_req
machine_us_per_req rss_before_kb rss_during_kb rss_peak_kb rss_after_kb
log_us_per_req log_share dropped sut_us_per_req"

# Values of column $3 for case $1 at $2 connections, one per trial.
col() {
	awk -F'\t' -v v="$1" -v c="$2" -v k="$3" '
	NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) n = i; next }
	$1 == v && $2 == c { print $n }' "$tsv"
}

# Per trial: column $3 of case $1 against case $2 (same connections $4):
# ratio (op "/") or difference (op "-"), one line each.
paired() {
	awk -F'\t' -v a="$1" -v b="$2" -v k="$3" -v c="$4" -v op="$5" '
	NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) n = i; next }
	$2 == c && $1 == a { x[$3] = $n } $2 == c && $1 == b { y[$3] = $n }
	END { for (t in x) if (t in y)
		if (op == "-") print x[t] - y[t]
		else if (y[t] > 0) printf "%.4f\n", x[t] / y[t] }' "$tsv"
}

# "median (min–max)" of the numbers on stdin, each scaled by $1 and
# printed with format $2.
mmm() {
	grep -v null | sort -g | awk -v s="$1" -v f="$2" '{ a[NR] = $1 * s } END {
		if (!NR) { print "-"; exit }
		m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
		printf f " (" f "–" f ")\n", m, a[1], a[NR] }'
}

echo "tls-sweep: HTTPS, connections $CONNS, $TRIALS trial(s), ${WARMUP_S}s" \
     "warm-up, ${DURATION_S}s measured, wrk $WRK_THREADS threads; raw data in $raw"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
# The words after $1, turned left $1 times: each trial starts its round
# with another case, so that no case always runs first or last.
rotate() {
	n=$1
	shift
	for _ in $(seq "$n"); do
		x=$1
		shift
		set -- "$@" "$x"
	done
	echo "$@"
}

tsv_header "$COLS" "$tsv"
ncases=$(echo $CASES | wc -w)
for c in $CONNS; do
	for t in $(seq "$TRIALS"); do
		for v in $(rotate $(((t - 1) % ncases)) $CASES); do
			run_one "$v" "$c" "$t"
		done
	done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit (+ uncommitted changes)"
{
	echo "# Seed 004's HTTPS sweep ($stamp)"
	echo
	echo "perf/pipeline/tls-sweep.sh: medians (min–max) of $TRIALS trial(s);"
	echo "wrk $WRK_THREADS threads, ${WARMUP_S} s warm-up, ${DURATION_S} s measured; HTTPS 404s;"
	echo "logengine case: engine defaults${STORE_ARGS:+, gateway $STORE_ARGS}."
	echo "Machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)),"
	echo "commit $commit; load average $load0 before, $load1 after."
	echo
	echo "| conns | log | req/s | vs off (paired) | p50 ms | p99 ms | gateway CPU us/req | gateway + wrk CPU us/req | machine CPU us/req | log CPU share | RSS before / during / peak / after MiB | RSS added (paired) | errors |"
	echo "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|"
	for c in $CONNS; do
		for v in $CASES; do
			vs=- add=- share=-
			if [ "$v" != off ]; then
				vs=$(paired "$v" off rps "$c" / | mmm 1 "%.3f")
				add=$(paired "$v" off rss_during_kb "$c" - |
					mmm 0.0009765625 "%.1f")
			fi
			# the file's call waits for the file with the other
			# request threads: its time is not CPU
			[ "$v" = file ] ||
				share=$(col "$v" "$c" log_share | mmm 100 "%.2f%%")
			printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s / %s | %s | %s |\n' \
				"$c" "$v" "$(col "$v" "$c" rps | mmm 1 "%.0f")" "$vs" \
				"$(col "$v" "$c" p50_ms | median)" \
				"$(col "$v" "$c" p99_ms | mmm 1 "%.2f")" \
				"$(col "$v" "$c" cpu_us_per_req | mmm 1 "%.1f")" \
				"$(col "$v" "$c" sut_us_per_req | mmm 1 "%.1f")" \
				"$(col "$v" "$c" machine_us_per_req | mmm 1 "%.1f")" \
				"$share" \
				"$(col "$v" "$c" rss_before_kb | median | awk '{ printf "%.1f", $1 / 1024 }')" \
				"$(col "$v" "$c" rss_during_kb | median | awk '{ printf "%.1f", $1 / 1024 }')" \
				"$(col "$v" "$c" rss_peak_kb | median | awk '{ printf "%.1f", $1 / 1024 }')" \
				"$(col "$v" "$c" rss_after_kb | median | awk '{ printf "%.1f", $1 / 1024 }')" \
				"$add" "$(col "$v" "$c" errors | awk '{ s += $1 } END { print s + 0 }')"
		done
	done
	echo
	echo "Log CPU share: the access log's CPU per request (the access_log call,"
	echo "timed on 1 call in 16, less the timer; the engine's writer thread) over"
	echo "the CPU the gateway and wrk spent per request in the window."
	echo
	echo "## Goals (logengine)"
	echo
	for c in $CONNS; do
		sh=$(col logengine "$c" log_share | median)
		add=$(paired logengine off rss_during_kb "$c" - | median)
		if [ "$sh" = null ]; then
			echo "- $c connections: no request completed, not judged"
			continue
		fi
		awk -v c="$c" -v sh="$sh" -v add="$add" -v fs="$(paired file off rps "$c" / | median)" \
		    -v dr="$(col logengine "$c" dropped | awk '{ s += $1 } END { print s + 0 }')" 'BEGIN {
			printf "- %s connections: access log under 1%% of requests/s: %.2f%% of the CPU per request — %s; ", c, sh * 100, sh < 0.01 ? "met" : "NOT met"
			if (add == "null") printf "RSS added: -"
			else printf "RSS added under 4 MiB: %.1f MiB — %s", add / 1024, add < 4096 ? "met" : "NOT met"
			if (fs != "null") printf " (the synchronous file log: requests/s %.3f of off)", fs
			printf "; lines dropped: %d\n", dr }'
	done
} >"$raw/tls-sweep.md"
cp "$raw/tls-sweep.md" "$OUT/tls-sweep.md"
echo
cat "$OUT/tls-sweep.md"
