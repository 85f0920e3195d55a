#!/bin/sh
# Install what the project needs on a fresh Debian machine, by group.
# Idempotent: packages already present are skipped.
#
#   scripts/deps.sh [--soft | --missing] GROUP...
#
#   core       a C compiler and make: `make`, `make demo`, `make install`
#   packaging  pkg-config and CMake (the install test builds programs
#              against the installed library with both), groff and man (it
#              checks the man pages, and that man finds them)
#   bench      spdlog and glog, the benchmark's competitors
#   fuzz       clang and its libFuzzer runtime
#   profile    perf and valgrind (perf/profile-bench.sh)
#   pipeline   libmicrohttpd (Debian's is built with GnuTLS: the
#              gateway's HTTPS), wrk, and openssl, which makes the
#              gateway's certificate (perf/pipeline/, test_gateway_tls)
#   nats       a NATS server and the C client (openssl: the TLS test)
#   syslog     rsyslog and logrotate
#   observe    Prometheus, Chromium with its driver and Selenium,
#              libmicrohttpd
#   archive    zstd and io_uring libraries
#   json       python3 (the CLI tests read JSON output back with it)
#   journal    jq (perf/journal-bench.py compares cat -o json with it),
#              systemd-journal-remote (cat -o export is read back by it)
#   all        every group
#
# `make check` installs the groups its tests need (CHECK_DEPS in the
# Makefile): as root they are installed; otherwise, with --soft, the
# missing ones are named and the tests that need them are skipped.
#
# As root: installs what is missing (apt-get), one line per group it
# installs; apt's own output goes to $DEPS_LOG (build/deps.log of this
# tree by default), whose last lines are shown when apt fails.  When
# another apt or dpkg holds its lock (unattended-upgrades, a second
# install), waits for it up to $DEPS_LOCK_WAIT seconds (300) instead of
# failing.  Otherwise: names what is missing and exits 1 (--soft: exits
# 0).  --missing: installs nothing, prints the missing packages on one
# line, exits 1 when there are some.  --apt-check: as root, asks apt to
# check the installed packages (apt-get check: nothing is downloaded or
# changed) under the same lock wait and log as an install
# (tests/system/test_deps.py holds the lock meanwhile).
set -eu
mode=install
case "${1:-}" in
--soft | --missing | --apt-check) mode=${1#--}; shift ;;
esac
[ $# -eq 0 ] && set -- core
top=$(cd "$(dirname "$0")/.." && pwd)
log=${DEPS_LOG:-$top/build/deps.log}
lock_wait=${DEPS_LOCK_WAIT:-300}

group() {
	case "$1" in
	core) echo build-essential ;;
	packaging) echo pkgconf cmake groff-base man-db ;;
	bench) echo libspdlog-dev libgoogle-glog-dev ;;
	fuzz) echo clang libclang-rt-14-dev strace ;;
	profile) echo linux-perf valgrind ;;
	pipeline) echo libmicrohttpd-dev wrk openssl ;;
	nats) echo nats-server libnats-dev openssl strace ;;
	syslog) echo rsyslog logrotate ;;
	observe) echo prometheus chromium chromium-driver python3-selenium \
		libmicrohttpd-dev ;;
	archive) echo libzstd-dev liburing-dev ;;
	json) echo python3 ;;
	journal) echo jq python3 systemd-journal-remote ;;
	all) for g in core packaging bench fuzz profile pipeline nats syslog \
		observe archive json journal; do group "$g"; done ;;
	*) echo "deps: unknown group '$1'" >&2; exit 2 ;;
	esac
}

# Whether package $1 is installed.
installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"
}

# apt-get with its output appended to $log; it waits for the dpkg lock
# another apt holds (DPkg::Lock::Timeout) rather than failing at once.
apt_get() {
	apt-get -q -y -o DPkg::Lock::Timeout="$lock_wait" "$@" >>"$log" 2>&1
}

# apt-get update.  It takes apt's lists lock without waiting
# (DPkg::Lock::Timeout is the dpkg lock's): while another apt holds that
# one, it is tried again each second until the same deadline.
apt_update() {
	end=$(($(date +%s) + lock_wait))
	until apt_get update; do
		tail -n 2 "$log" | grep -q 'Could not get lock' || return 1
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 1
	done
}

# Say that apt failed, with the end of its output, and exit 1.
apt_failed() {
	echo "deps: apt-get $1 failed; the end of $log:" >&2
	tail -n 5 "$log" >&2
	exit 1
}

# $missing: every package missing, once; $todo: "group:pkg,pkg ..." of
# the groups with something missing (a package in two groups is the
# first's).
seen="" missing="" todo=""
for g in "$@"; do
	pkgs=$(group "$g") # an unknown group ends the script here (set -e)
	m=""
	for p in $pkgs; do
		case " $seen " in *" $p "*) continue ;; esac
		seen="$seen $p"
		installed "$p" || m="$m $p"
	done
	[ -n "$m" ] || continue
	missing="$missing$m"
	todo="$todo $g:$(echo $m | tr ' ' ,)"
done
missing=$(echo $missing)
if [ "$mode" = missing ]; then
	[ -n "$missing" ] && echo "$missing" && exit 1
	exit 0
fi
[ -z "$missing" ] && [ "$mode" != apt-check ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	[ -z "$missing" ] && exit 0
	echo "deps: missing packages: $missing (run scripts/deps.sh as root" \
		"to install)" >&2
	[ "$mode" = soft ] && exit 0
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
mkdir -p "$(dirname "$log")"
: >"$log"
if [ "$mode" = apt-check ]; then
	echo "deps: apt-get check (apt's output in $log)"
	apt_get check || apt_failed check
	exit 0
fi
apt_update || apt_failed update
for t in $todo; do
	g=${t%%:*} p=$(echo "${t#*:}" | tr , ' ')
	echo "deps: installing $g: $p (apt's output in $log)"
	apt_get install $p || apt_failed "install $p"
done
