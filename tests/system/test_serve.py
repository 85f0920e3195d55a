#!/usr/bin/python3
"""test_serve.py -- `logengine serve` as a server (loopback only unless
told, /events capped, counted and once a second) and `logengine stats
--live` (plain lines off a terminal, a redrawn screen on one)."""

import http.client
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import (CLI, Producer, Serve, need, on_pty, parse_metrics, run,
                     test, tmpdir, wait_until)


@test
def serve_refuses_an_address_that_is_not_loopback():
    d = tmpdir()
    r = subprocess.run([CLI, "serve", "--listen", "0.0.0.0:0", d],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r
    assert "not a loopback address" in r.stderr and "--listen-any" in \
        r.stderr, r.stderr
    r = subprocess.run([CLI, "serve", "--listen", "nonsense", d],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "ADDR:PORT" in r.stderr, r.stderr


@test
def serve_refuses_a_directory_that_is_not_a_log():
    need("observe")
    d = tmpdir()
    other = os.path.join(d, "photos")
    os.makedirs(other)
    with open(os.path.join(other, "cat.jpg"), "w") as f:
        f.write("x")
    for bad, want in ((os.path.join(d, "nonexistent"),
                       "No such file or directory: give a logengine log "
                       "directory"),
                      (other, "is not a logengine log directory"),
                      (os.path.join(other, "cat.jpg"), "is not a directory")):
        r = subprocess.run([CLI, "serve", "--listen", "127.0.0.1:0", bad],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 2, (bad, r)
        assert bad in r.stderr and want in r.stderr, r.stderr
        assert "listening" not in r.stdout, r.stdout


@test
def serve_answers_only_what_it_serves():
    d = tmpdir()
    serve = Serve([d])
    c = http.client.HTTPConnection("127.0.0.1", serve.port, timeout=10)
    c.request("GET", "/nope")
    r = c.getresponse()
    assert r.status == 404
    r.read()
    c.request("POST", "/metrics", body="x")
    r = c.getresponse()
    assert r.status == 405
    r.read()
    c.close()
    # a directory where no engine ever ran is down, not an error
    s = parse_metrics(serve.metrics())
    assert s[("logengine_up", (("dir", d),))] == 0


class Stream:
    """An /events client reading with a raw socket, so the test decides
    when (and whether) it reads."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.s.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        self.buf = b""

    def read_for(self, secs):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            r, _, _ = select.select([self.s], [], [], 0.1)
            if r:
                got = self.s.recv(65536)
                if not got:
                    break
                self.buf += got
        return self.buf

    def status(self):
        while b"\r\n" not in self.buf:
            self.read_for(0.2)
        return int(self.buf.split(b" ", 2)[1])

    def frames(self):
        out = []
        for line in self.buf.split(b"\n"):
            i = line.find(b"data: {")
            if i >= 0:
                try:
                    out.append(json.loads(line[i + 6:]))
                except ValueError:
                    pass  # cut by a chunk boundary
        return out

    def close(self):
        self.s.close()


def serving_a_producer(rate):
    """A producer at rate into DIR/a and serve on it, once serve sees
    the engine run.  @return (dir, producer, serve)."""
    d = os.path.join(tmpdir(), "a")
    prod = Producer([d], rate=rate)
    serve = Serve([d])
    # the writers publish their first page as they start: wait for it
    wait_until("the engine seen running", lambda: parse_metrics(
        serve.metrics())[("logengine_up", (("dir", d),))] == 1)
    return d, prod, serve


@test
def events_come_once_a_second_with_the_new_records():
    d, prod, serve = serving_a_producer(20)
    st = Stream(serve.port)
    assert st.status() == 200
    st.read_for(3.5)
    frames = st.frames()
    assert 2 <= len(frames) <= 5, len(frames)
    seqs = [f["seq"] for f in frames]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    assert all(f["dirs"][0]["state"] == "running" for f in frames), \
        [f["dirs"][0] for f in frames]
    recs = [r for f in frames[1:] for r in f["tail"]]
    assert len(recs) >= 20, len(recs)  # ~20 a second
    assert all(r[6].startswith("GET /api/items/") for r in recs)
    st.close()
    prod.close()


@test
def history_holds_the_samples_taken_before_a_client_asked():
    d = os.path.join(tmpdir(), "a")
    prod = Producer([d], rate=100)
    serve = Serve([d])

    def enough():
        s = json.loads(serve.get("/history.json")[2])["samples"]
        return s if len(s) >= 4 and s[-1][1][0] > 0 else None
    # nobody has asked anything before: the server samples on its own
    got = wait_until("four samples with records", enough, timeout=15)
    h = json.loads(serve.get("/history.json")[2])
    assert h["interval_ms"] == 1000 and h["keep_s"] == 900, h
    assert h["dirs"] == [d] and h["fields"][0] == "written", h
    ts = [s[0] for s in got]
    # one a second (the builder's clock catches up after a stall)
    assert ts == sorted(ts) and \
        500 <= (ts[-1] - ts[0]) / (len(ts) - 1) <= 2000, ts
    written = [s[1][0] for s in got]
    assert written == sorted(written) and written[-1] > written[0], written
    assert abs(ts[-1] / 1000 - time.time()) < 5, ts[-1]
    prod.close()


@test
def tail_shows_logger_and_fields_and_filters_by_logger():
    _, prod, serve = serving_a_producer(20)
    prod.cmd("logger net.http refused at the door")
    prod.cmd("logger network not a child of net")
    prod.cmd("logger db slow query")

    def tail(q=""):
        return json.loads(serve.get("/tail" + q)[2])["tail"]
    wait_until("the three records in the tail", lambda: sum(
        r[7] in ("net.http", "network", "db") for r in tail()) == 3)
    rec = [r for r in tail() if r[7] == "net.http"][0]
    assert rec[6] == "refused at the door" and rec[4] == 3, rec
    assert rec[8] == {"logger": "net.http", "user": "ann", "attempt": 3}, rec
    plain = [r for r in tail() if not r[7]]
    assert plain and plain[0][8] == {}, plain[:1]
    assert [r[7] for r in tail("?logger=net")] == ["net.http"]
    assert [r[7] for r in tail("?logger=net.http")] == ["net.http"]
    assert [r[6] for r in tail("?logger=db")] == ["slow query"]
    root = tail("?logger=")
    assert root and all(r[7] == "" for r in root), root[:3]
    prod.close()


@test
def events_clients_are_capped_and_their_disconnects_counted():
    d = tmpdir()
    serve = Serve([d], "--max-clients", "2")
    a, b = Stream(serve.port), Stream(serve.port)
    assert a.status() == 200 and b.status() == 200
    wait_until("two clients", lambda: parse_metrics(serve.metrics())[
        ("logengine_serve_sse_clients", ())] == 2)
    c = Stream(serve.port)
    assert c.status() == 503
    c.close()
    a.close()
    s = wait_until("a disconnect", lambda: (lambda s: s if s[
        ("logengine_serve_sse_disconnects_total", ())] >= 1 else None)(
        parse_metrics(serve.metrics())), timeout=15)
    assert s[("logengine_serve_sse_refused_total", ())] == 1
    assert s[("logengine_serve_sse_clients", ())] == 1
    d2 = Stream(serve.port)  # room again
    assert d2.status() == 200
    b.close()
    d2.close()


def crc32c(data):
    """CRC-32C (Castagnoli), as src/base/crc32c.c computes it."""
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def write_forward_cursor(shard_dir, shard, next_seq, seg_index, offset):
    """shard_dir/FORWARD as logengine forward leaves it (docs/INTERFACES.md,
    "Forwarding"): one slot, generation 1 (at offset 512)."""
    body = (b"LOGENGFW" + struct.pack("<QQQQQQI", 1, next_seq, seg_index,
                                      offset, 0, time.time_ns(), shard))
    crc = crc32c(body)
    masked = (((crc >> 15) | (crc << 17)) + 0xa282ead8) & 0xffffffff
    slot = body + struct.pack("<I", masked)
    with open(os.path.join(shard_dir, "FORWARD"), "wb") as f:
        f.write(b"\0" * 512 + slot)


@test
def metrics_show_the_forwarder_lag_where_a_cursor_is():
    d = os.path.join(tmpdir(), "a")
    prod = Producer([d], rate=0, shards=2)
    for i in range(10):
        prod.cmd("log 2 record %d" % i)  # route key 0: shard 0
    serve = Serve([d])
    key = ("logengine_records_written_total", (("dir", d), ("shard", "0")))
    wait_until("the ten records seen", lambda: parse_metrics(
        serve.metrics()).get(key) == 10)
    text = serve.metrics()
    assert "logengine_forwarder_lag" not in text, text  # no forwarder
    # shipped: the records below sequence 4, and the bytes of the active
    # segment before `offset` (what the cursor's hint says)
    sd = os.path.join(d, "shard-000")
    seg = sorted(f for f in os.listdir(sd) if f.endswith(".seg"))[-1]
    size = os.path.getsize(os.path.join(sd, seg))
    offset = size - 300
    write_forward_cursor(sd, 0, 4, int(seg[:-4], 16), offset)
    s = parse_metrics(serve.metrics())
    lag = {n: v for (n, labels), v in s.items()
           if n.startswith("logengine_forwarder_lag")}
    # seq 1..10 written, the next is 11: 11 - 4 not shipped
    assert s[("logengine_forwarder_lag_records",
              (("dir", d), ("shard", "0")))] == 7, lag
    assert s[("logengine_forwarder_lag_bytes",
              (("dir", d), ("shard", "0")))] == 300, lag
    assert len(lag) == 2, lag  # shard 1 keeps no cursor: no sample
    prod.close()


@test
def stats_live_prints_plain_lines_off_a_terminal():
    d = os.path.join(tmpdir(), "a")
    prod = Producer([d], rate=500)
    time.sleep(0.5)
    r = subprocess.run([CLI, "stats", "--live", "-n", "2", "-i", "0.5", d],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout
    lines = r.stdout.splitlines()
    assert len(lines) == 2 * 3, lines  # 2 shards and all, twice
    last = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
    assert last["dir"] == d and last["shard"] == "all"
    assert last["state"] == "running"
    assert 250 <= float(last["records_per_s"]) <= 1000, last
    prod.close()


@test
def stats_live_redraws_the_screen_on_a_terminal():
    d = os.path.join(tmpdir(), "a")
    prod = Producer([d], rate=100)
    rc, text = on_pty([CLI, "stats", "--live", "-n", "2", "-i", "0.3", d])
    assert rc == 0
    assert text.count("\x1b[H\x1b[2J") == 3, text  # at once, then twice
    assert "rec/s" in text and "fsync p50/p99" in text and "running" in text
    prod.close()


if __name__ == "__main__":
    sys.exit(run())
