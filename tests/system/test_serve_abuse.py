#!/usr/bin/python3
"""test_serve_abuse.py -- `logengine serve` against clients that hold
connections and never finish a request: /metrics stays answered, a
trickling request is cut at its deadline, the oldest waiting connections
make room for new ones, and TLS and basic auth keep strangers out.

All from loopback: one address, so the server must keep a new connection
served without telling the attacker from the scraper by address."""

import base64
import errno
import http.client
import os
import resource
import select
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import (CLI, Serve, Skip, parse_metrics, run, test, tmpdir,
                     wait_until)

IDLE, SLOW = 2000, 200


def raise_nofile(want):
    """Raise this process's open-file soft limit to want (the attack
    holds thousands of sockets).  Skips only if the hard limit is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want:
        raise Skip("RLIMIT_NOFILE hard limit %d < %d (raise it, or run "
                   "as root)" % (hard, want))
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class Attack:
    """IDLE connections that never send a byte and SLOW that send a
    partial request and then one byte every `every` seconds, from one
    thread; a connection the server closes is opened again at the next
    round (as an attacker would), and counted in `closed`."""

    def __init__(self, port, idle, slow, every=2.0):
        self.port, self.every = port, every
        self.closed = 0
        self.stopping = False
        self.ep = select.epoll()
        self.socks = {}          # fd -> (socket, kind)
        for _ in range(idle):
            self._open("idle")
        for _ in range(slow):
            self._open("slow")
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()

    def _open(self, kind):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        e = s.connect_ex(("127.0.0.1", self.port))
        if e not in (0, errno.EINPROGRESS):
            s.close()
            return
        self.socks[s.fileno()] = (s, kind, [0])
        self.ep.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP)

    def _drop(self, fd):
        s, kind, _ = self.socks.pop(fd)
        self.ep.unregister(fd)
        s.close()
        self.closed += 1
        return kind

    def _trickle(self):
        for fd, (s, kind, sent) in list(self.socks.items()):
            if kind != "slow":
                continue
            msg = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" if sent[0] == 0 \
                else b"X"
            if sent[0] == 0:
                msg += b"X-Slow: "
            try:
                s.send(msg)
                sent[0] += 1
            except OSError:
                pass  # not connected yet, or closed: epoll says which

    def _loop(self):
        next_trickle = time.monotonic()
        while not self.stopping:
            for fd, ev in self.ep.poll(0.1):
                if fd not in self.socks:
                    continue
                s = self.socks[fd][0]
                try:
                    gone = s.recv(4096) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    self._open(self._drop(fd))
            if time.monotonic() >= next_trickle:
                self._trickle()
                next_trickle += self.every

    def close(self):
        self.stopping = True
        self.t.join()
        for s, _, _ in self.socks.values():
            s.close()
        self.ep.close()


def scrape(port, timeout=5):
    """One /metrics on a new connection.  @return (seconds, samples)."""
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read().decode()
        assert r.status == 200, r.status
    finally:
        c.close()
    return time.monotonic() - t0, parse_metrics(body)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


@test
def metrics_answers_within_a_second_while_2000_idle_and_200_slowloris_connections_are_held():
    raise_nofile(IDLE + SLOW + 1024)
    d = tmpdir()
    serve = Serve([d])
    attack = Attack(serve.port, IDLE, SLOW)
    n = int(os.environ.get("LE_SCRAPES", "50"))
    lat, errors = [], []
    try:
        for _ in range(n):
            try:
                secs, s = scrape(serve.port)
                assert ("logengine_up", (("dir", d),)) in s
                lat.append(secs)
            except Exception as e:  # reset, timeout: all failures here
                errors.append(repr(e))
            time.sleep(0.05)  # a scraper's pace, not a synchronisation
    finally:
        attack.close()
    print("  /metrics with %d idle + %d slowloris held: %d/%d answered, "
          "p50 %.1f ms, p99 %.1f ms, %d attack connections closed by "
          "the server" % (IDLE, SLOW, len(lat), n,
                          pct(lat, 0.5) * 1e3 if lat else -1,
                          pct(lat, 0.99) * 1e3 if lat else -1,
                          attack.closed))
    assert not errors, "%d of %d failed: %s" % (len(errors), n, errors[:3])
    assert pct(lat, 0.99) < 1.0, pct(lat, 0.99)


if __name__ == "__main__":
    sys.exit(run())
