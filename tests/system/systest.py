"""systest.py -- what the Python system tests share: the programs under
test started on loopback ports picked at run time, always stopped (each
test's processes are killed when it ends, whatever happened, and every
one at exit), and the closing "N passed, N failed[, N skipped]" line of
tests/run.sh.

A test is a function decorated with @test; it fails by raising (assert),
and is skipped, with the reason on its "skip NAME: reason" line, only
when what it needs is not there: a scripts/deps.sh group or a program not
installed (need("observe"), need_tool("prometheus"), as the C tests'
t_need and t_need_tool), more open files than the hard limit allows
(need_fds, as t_need_fds).  Root, which installs the tools and may raise
the limit, lacks neither: CI skips nothing."""

import atexit
import json
import os
import pty
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

BUILD = os.environ.get("BUILD", "build")
CLI = os.environ.get("LE_CLI") or os.path.join(BUILD, "logengine")
PRODUCER = os.path.join(BUILD, "tests", "system", "le_producer")
ARTIFACTS = os.path.join(BUILD, "artifacts")

_tests = []
_procs = []        # every process started and not yet stopped
_dirs = []         # temporary directories of the running test


class Skip(Exception):
    pass


def test(fn):
    _tests.append(fn)
    return fn


def need(group):
    """Skip the test unless scripts/deps.sh's group is installed."""
    r = subprocess.run(["sh", "scripts/deps.sh", "--missing", group],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Skip(r.stdout.strip() or "deps.sh group " + group)


# Searched after $PATH for a program: Debian installs daemons in the sbin
# directories, which a normal user's PATH leaves out (tests/tool.h).
SBIN_PATH = "/usr/local/sbin:/usr/sbin:/sbin"


def which(tool):
    """The path of the program tool, on $PATH or in SBIN_PATH, or None."""
    path = os.environ.get("PATH", os.defpath) + os.pathsep + SBIN_PATH
    return shutil.which(tool, path=path)


def need_tool(tool):
    """The path of the program tool; skip the test when it is missing."""
    p = which(tool)
    if not p:
        raise Skip("%s not installed (scripts/deps.sh as root installs "
                   "it)" % tool)
    return p


def need_fds(n):
    """Skip the test unless this process may open n descriptors: the
    soft limit is raised to the hard one first (and by root, who may, the
    hard one to n as well); only an administrator's hard limit below n
    skips.  Its children (the programs under test) inherit the limit."""
    inf = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == inf or soft >= n:
        return
    up = hard if hard == inf else max(hard, n)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (up, up))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != inf and soft < n:
        raise Skip("needs %d open files, the hard limit is %d (ulimit -Hn, "
                   "which root may raise)" % (n, hard))


def tmpdir():
    base = os.path.join(BUILD, "tmp")
    os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix="le-sys-", dir=os.path.abspath(base))
    _dirs.append(d)
    return d


def free_port():
    """A loopback port free now (for programs that cannot report theirs)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, **kw):
    kw.setdefault("stdout", subprocess.DEVNULL)
    kw.setdefault("stderr", subprocess.DEVNULL)
    p = subprocess.Popen(args, start_new_session=True, **kw)
    _procs.append(p)
    return p


def stop(p, sig=signal.SIGTERM, wait=10):
    """Stop p and whatever it started (its own session)."""
    if p.poll() is None:
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(wait)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    for f in (p.stdin, p.stdout, p.stderr):
        if f:
            f.close()
    if p in _procs:
        _procs.remove(p)


def _stop_all():
    for p in list(_procs):
        stop(p, signal.SIGKILL)


atexit.register(_stop_all)


def on_pty(args, stdout=None, env=None, timeout=20):
    """Run args with stderr (and stdout, unless given) on a terminal of
    its own; @return (exit status, all the terminal got, as text)."""
    master, slave = pty.openpty()
    p = start(args, stdin=subprocess.DEVNULL,
              stdout=stdout if stdout is not None else slave, stderr=slave,
              env=env)
    os.close(slave)
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], timeout)
        if not r:
            break
        try:
            got = os.read(master, 65536)
        except OSError:  # EIO: the last writer closed it
            break
        if not got:
            break
        out += got
    os.close(master)
    rc = p.wait(timeout)
    stop(p)
    return rc, out.decode(errors="replace")


def wait_until(what, fn, timeout=10.0, every=0.1):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(every)


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers, r.read().decode()


class Producer:
    """tests/system/le_producer: logs into dirs, commands on stdin."""

    def __init__(self, dirs, rate=1000, shards=2, queue=None):
        args = [PRODUCER, "--rate", str(rate), "--shards", str(shards)]
        if queue:
            args += ["--queue", str(queue)]
        self.p = start(args + list(dirs), stdin=subprocess.PIPE,
                       stdout=subprocess.PIPE, text=True, bufsize=1)
        self.pid = self._answer()["ready"]

    def _answer(self):
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError("le_producer ended")
        return json.loads(line)

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self._answer()

    def close(self):
        r = self.cmd("close")
        self.p.wait(30)
        stop(self.p)
        return r


class Serve:
    """logengine serve on a port the kernel picks, read from its first
    line."""

    def __init__(self, dirs, *opts):
        need("observe")  # libmicrohttpd, which serve is built with
        self.p = start([CLI, "serve", "--listen", "127.0.0.1:0", *opts,
                        *dirs], stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not m:
            raise AssertionError("serve did not start: %r" % line)
        self.port = int(m.group(1))
        self.base = "http://127.0.0.1:%d" % self.port

    def get(self, path):
        return http_get(self.base + path)

    def metrics(self):
        st, hdr, body = self.get("/metrics")
        assert st == 200
        assert hdr["Content-Type"].startswith("text/plain; version=0.0.4")
        return body

    def stop(self):
        stop(self.p, signal.SIGTERM)


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """{(name, ((label, value), ...)): float} of a text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = tuple(sorted(_LABEL.findall(m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric_sum(samples, name, **want):
    """Sum of name's samples whose labels include want."""
    total = 0.0
    for (n, labels), v in samples.items():
        d = dict(labels)
        if n == name and all(d.get(k) == str(v2) for k, v2 in want.items()):
            total += v
    return total


def _on_alarm(sig, frame):
    raise TimeoutError("test took too long")


def run(timeout=180):
    only = sys.argv[1] if len(sys.argv) > 1 else None
    passed = failed = skipped = 0
    signal.signal(signal.SIGALRM, _on_alarm)
    for fn in _tests:
        if only and only not in fn.__name__:
            continue
        t0 = time.monotonic()
        signal.alarm(timeout)
        try:
            fn()
            passed += 1
            print("ok   %s (%.0f ms)" % (fn.__name__,
                                        (time.monotonic() - t0) * 1e3))
        except Skip as e:
            skipped += 1
            print("skip %s: %s" % (fn.__name__, e))
        except BaseException:
            failed += 1
            print("FAIL %s" % fn.__name__)
            traceback.print_exc(file=sys.stdout)
        finally:
            signal.alarm(0)
            _stop_all()
            for d in _dirs:
                shutil.rmtree(d, ignore_errors=True)
            _dirs.clear()
        sys.stdout.flush()
    if skipped:
        print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    else:
        print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0
