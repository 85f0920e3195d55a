#!/usr/bin/python3
"""test_progress.py -- the progress line of `logengine verify` and `cat`
(tools/progress.c): on stderr when it is a terminal, never otherwise, and
not for a cat whose records go to that same terminal.  (recover's, a
ticking time, is checked in tests/unit/test_progress.c: a recovery here
is over before it would show.)  LE_PROGRESS_AFTER_MS=0 makes the line
start at once (it waits a second)."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import CLI, Producer, on_pty, run, test, tmpdir

ENV = dict(os.environ, LE_PROGRESS_AFTER_MS="0")


def make_log():
    d = os.path.join(tmpdir(), "log")
    prod = Producer([d], rate=20000)
    time.sleep(0.5)
    prod.close()
    return d


@test
def verify_shows_progress_on_a_terminal_and_nothing_off_it():
    d = make_log()
    rc, tty = on_pty([CLI, "verify", d], stdout=subprocess.DEVNULL, env=ENV)
    assert rc == 0
    assert "\rverify: " in tty and " records, " in tty and " of " in tty, tty
    assert tty.endswith("\r\x1b[K"), repr(tty[-40:])  # wiped at the end
    r = subprocess.run([CLI, "verify", d], capture_output=True, text=True,
                       env=ENV)
    assert r.returncode == 0 and r.stderr == "", r.stderr


@test
def cat_shows_progress_unless_its_records_go_to_the_same_terminal():
    d = make_log()
    with open(os.path.join(tmpdir(), "out"), "w") as f:
        rc, tty = on_pty([CLI, "cat", d], stdout=f, env=ENV)
    assert rc == 0 and "\rcat: " in tty, tty
    rc, tty = on_pty([CLI, "cat", d], env=ENV)
    assert rc == 0 and "GET /api/items/" in tty
    assert "\rcat: " not in tty


if __name__ == "__main__":
    sys.exit(run())
