#!/usr/bin/python3
"""test_deps.py -- scripts/deps.sh, which make check runs first: as root it
waits for the dpkg lock another apt holds instead of failing, and keeps
apt's output in its log, printing one line of its own.  The lock test
runs apt-get check (nothing is downloaded or changed), and holds the real
lock only until apt is seen waiting for it."""

import fcntl
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import Skip, run, start, stop, test, tmpdir, wait_until

DEPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                    "scripts", "deps.sh")
DPKG_LOCK = "/var/lib/dpkg/lock-frontend"


@test
def unknown_group_is_refused_before_apt_is_run():
    log = os.path.join(tmpdir(), "deps.log")
    r = subprocess.run(["sh", DEPS, "no-such-group"], capture_output=True,
                       text=True, env=dict(os.environ, DEPS_LOG=log))
    assert r.returncode == 2, r
    assert "unknown group 'no-such-group'" in r.stderr, r.stderr
    assert not os.path.exists(log)


@test
def deps_waits_for_the_dpkg_lock_another_apt_holds_then_succeeds():
    if os.geteuid() != 0:
        raise Skip("needs root: only root takes the dpkg lock")
    log = os.path.join(tmpdir(), "deps.log")
    # apt and dpkg lock with fcntl (lockf), not flock: so does this.
    with open(DPKG_LOCK, "r+") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        p = start(["sh", DEPS, "--apt-check", "json"],
                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                  text=True, env=dict(os.environ, DEPS_LOG=log,
                                      DEPS_LOCK_WAIT="120"))

        def waiting():
            assert p.poll() is None, "deps.sh ended while the lock was held"
            try:
                with open(log) as f:
                    return "Waiting for cache lock" in f.read()
            except FileNotFoundError:  # deps.sh has not started apt yet
                return False
        wait_until("apt waiting for the lock", waiting, timeout=60)
        fcntl.lockf(lock, fcntl.LOCK_UN)
    out = p.stdout.read()
    assert p.wait(120) == 0, out
    stop(p)
    assert out == "deps: apt-get check (apt's output in %s)\n" % log, out
    with open(log) as f:
        assert "Reading package lists" in f.read()


if __name__ == "__main__":
    sys.exit(run())
