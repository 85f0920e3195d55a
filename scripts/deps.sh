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
#   pipeline   libmicrohttpd and wrk (perf/pipeline/)
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
# As root: installs what is missing (apt-get).  Otherwise: names what is
# missing and exits 1 (--soft: exits 0).  --missing: installs nothing,
# prints the missing packages on one line, exits 1 when there are some.
set -eu
mode=install
case "${1:-}" in
--soft | --missing) mode=${1#--}; shift ;;
esac
[ $# -eq 0 ] && set -- core

group() {
	case "$1" in
	core) echo build-essential ;;
	packaging) echo pkgconf cmake groff-base man-db ;;
	bench) echo libspdlog-dev libgoogle-glog-dev ;;
	fuzz) echo clang libclang-rt-14-dev ;;
	profile) echo linux-perf valgrind ;;
	pipeline) echo libmicrohttpd-dev wrk ;;
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

pkgs=""
for what in "$@"; do
	pkgs="$pkgs $(group "$what")"
done
missing=""
for p in $pkgs; do
	case " $missing " in *" $p "*) continue ;; esac
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
missing=${missing# }
if [ "$mode" = missing ]; then
	[ -n "$missing" ] && echo "$missing" && exit 1
	exit 0
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages: $missing (run scripts/deps.sh as root" \
		"to install)" >&2
	[ "$mode" = soft ] && exit 0
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $missing
