#!/bin/sh
# Install what the project needs on a fresh Debian machine (run as root, or
# it only reports).  Idempotent: packages already present are skipped.
#   scripts/deps.sh [core|bench|fuzz|profile|pipeline|all]...
set -eu
pkgs="build-essential"
[ $# -eq 0 ] && set -- core
for what in "$@"; do
	case "$what" in
	core) ;;
	bench) pkgs="$pkgs libspdlog-dev libgoogle-glog-dev" ;;
	fuzz) pkgs="$pkgs clang libclang-rt-14-dev" ;;
	profile) pkgs="$pkgs linux-perf valgrind" ;; # perf/profile-bench.sh
	pipeline) pkgs="$pkgs libmicrohttpd-dev wrk" ;; # examples/, perf/
	all) pkgs="$pkgs libspdlog-dev libgoogle-glog-dev clang libclang-rt-14-dev libmicrohttpd-dev wrk" ;;
	esac
done
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages:$missing (run as root to install)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $missing
