#!/usr/bin/python3
"""test_dashboard.py -- serve's dashboard in a real browser: headless
Chromium driven by selenium loads it while a producer writes into two
directories, draws charts that start with the samples serve took before
the page was opened, each with clock ticks and a unit, sees the
written-records counters advance, finds a record the test logs in the
live tail (and hides it with the level filter), one of a logger with its
fields (and the logger box's filter), and shows the stopped state once
the engines close.  Screenshots go to $BUILD/artifacts/ (dashboard.png:
running; dashboard-stopped.png)."""

import json
import os
import re
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import (ARTIFACTS, Producer, Serve, need, need_tool, run, test,
                     tmpdir, wait_until)

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-quic", "--no-first-run",
                  "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--window-size=1280,1100"]


def browser(profile):
    need("observe")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = need_tool("chromium")
    for f in CHROMIUM_FLAGS + ["--user-data-dir=" + profile]:
        opts.add_argument(f)
    log = os.path.join(profile, "..", "chromedriver.log")
    service = Service(need_tool("chromedriver"), log_path=log)
    return webdriver.Chrome(service=service, options=opts)


def text(drv, id_):
    return drv.execute_script(
        "const e = document.getElementById(arguments[0]);"
        "return e ? e.textContent : null;", id_)


def number(drv, id_):
    t = text(drv, id_)
    return int(t) if t and t.isdigit() else -1


def shot(drv, name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name)
    assert drv.save_screenshot(path), path
    assert os.path.getsize(path) > 10000, "screenshot too small: " + path
    return path


@test
def dashboard_shows_counters_advance_a_typed_record_and_the_stop():
    work = tmpdir()
    dirs = [os.path.join(work, "orders"), os.path.join(work, "payments")]
    prod = Producer(dirs, rate=40)
    serve = Serve(dirs)
    profile = os.path.join(work, "chromium-profile")
    os.makedirs(profile)
    # samples serve takes before any page is open
    wait_until("history before the page", lambda: len(json.loads(
        serve.get("/history.json")[2])["samples"]) >= 4, timeout=15)
    opened_ms = time.time() * 1000
    drv = browser(profile)
    try:
        drv.set_page_load_timeout(20)
        drv.get(serve.base + "/")
        assert drv.title == "logengine"
        wait_until("a frame with written records",
                   lambda: number(drv, "written-0") > 0 and
                   number(drv, "written-1") > 0, timeout=15)
        assert text(drv, "state-0") == "running"
        assert text(drv, "conn") == "live"
        # every chart: its unit, clock ticks, and the history first
        units = {"rec": "records/s", "bytes": "bytes/s", "queue": "records",
                 "lat": ("\u00b5s", "ms")}

        def chart(id_):
            return drv.execute_script(
                "const d = document.getElementById(arguments[0]).dataset;"
                "return [d.unit, d.xticks, +d.from, +d.points];", id_)

        def from_before(id_):
            c = chart(id_)
            return c[2] and c[2] < opened_ms - 2000 and c[3] >= 4
        for k in (0, 1):
            for name, unit in units.items():
                id_ = "chart-%s-%d" % (name, k)
                wait_until(id_ + " drawn from the history",
                           lambda: from_before(id_), timeout=10)
                u, ticks, _, _ = chart(id_)
                assert u in unit if isinstance(unit, tuple) else u == unit, \
                    (id_, u)
                assert ticks and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t)
                                     for t in ticks.split(",")), (id_, ticks)
        first = [number(drv, "written-0"), number(drv, "written-1")]
        wait_until("the counters advancing",
                   lambda: number(drv, "written-0") > first[0] and
                   number(drv, "written-1") > first[1], timeout=10)
        # a record typed here, in the live tail
        mark = "typed-by-the-test-" + uuid.uuid4().hex[:12]
        prod.cmd("log 3 order refused: " + mark)
        wait_until("the typed record in the live tail",
                   lambda: mark in (text(drv, "tail") or ""), timeout=10)
        # the level filter: ERROR and up hides a WARN record
        lines = "return [...document.querySelectorAll('#tail .rec')]" \
                ".filter(e => e.textContent.includes(arguments[0]))"
        recs = drv.execute_script(lines, mark)
        assert recs and all(r.is_displayed() for r in recs)
        drv.execute_script("const s = document.getElementById('level');"
                           "s.value = '4'; s.dispatchEvent(new Event('change'));")
        assert not any(r.is_displayed() for r in drv.execute_script(lines, mark))
        drv.execute_script("const s = document.getElementById('level');"
                           "s.value = '0'; s.dispatchEvent(new Event('change'));")
        # a logger's record: its name and fields shown; the logger box
        lmark = "logger-record-" + uuid.uuid4().hex[:12]
        prod.cmd("logger net.http " + lmark)
        wait_until("the logger's record in the live tail",
                   lambda: lmark in (text(drv, "tail") or ""), timeout=10)
        lrec = drv.execute_script(lines, lmark)[0]
        assert "net.http" in lrec.text and 'user="ann"' in lrec.text and \
            "attempt=3" in lrec.text, lrec.text
        box = "const b = document.getElementById('logger');" \
              "b.value = arguments[0]; b.dispatchEvent(new Event('input'));"
        drv.execute_script(box, "db")
        assert not drv.execute_script(lines, lmark)[0].is_displayed()
        drv.execute_script(box, "net")
        assert drv.execute_script(lines, lmark)[0].is_displayed()
        assert not any(r.is_displayed()
                       for r in drv.execute_script(lines, mark))
        drv.execute_script(box, "")
        # nothing came from anywhere but serve
        hosts = drv.execute_script(
            "return performance.getEntriesByType('resource')"
            ".map(e => new URL(e.name).host)")
        assert all(h == "127.0.0.1:%d" % serve.port for h in hosts), hosts
        time.sleep(4)  # a few chart points more, for the picture
        shot(drv, "dashboard.png")
        # the engines stop: each directory says so, and the banner shows
        prod.close()
        wait_until("the stopped state",
                   lambda: text(drv, "state-0") == "stopped" and
                   text(drv, "state-1") == "stopped", timeout=10)
        assert drv.find_element("id", "banner").is_displayed()
        shot(drv, "dashboard-stopped.png")
        # and serve itself going away is shown too
        serve.stop()
        wait_until("the disconnected state",
                   lambda: text(drv, "conn") == "disconnected", timeout=10)
    finally:
        drv.quit()


if __name__ == "__main__":
    sys.exit(run())
