#!/usr/bin/python3
"""test_dashboard.py -- serve's dashboard in a real browser: headless
Chromium driven by selenium loads it while a producer writes into two
directories, sees the written-records counters advance, finds a record
the test logs in the live tail (and hides it with the level filter), and
shows the stopped state once the engines close.  Screenshots go to
$BUILD/artifacts/ (dashboard.png: running; dashboard-stopped.png)."""

import os
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
