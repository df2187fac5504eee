#!/usr/bin/env python3
"""Checks a `cortado --trace` file (Chrome trace event JSON), for
sh_trace.sh and sh_trace_mpi.sh.

usage: trace_check.py FILE RANKS FIRST LAST [--reduce] [--test] [--snapshot]

  - the file parses as JSON: {"traceEvents": [...]};
  - every "X" event has numeric ts, dur (>= 0), pid, tid and a name and cat;
  - the processes are ranks 0..RANKS-1, named "rank N";
  - each rank has exactly the iteration events FIRST..LAST on its "compute"
    track, and every layer event (forward, backward, feed: with args.type)
    lies inside one of them, on the same track;
  - with --reduce: each iteration of each rank has all-reduce events, all on
    the track named "communication", with bytes and bandwidth, inside the
    iteration; with 2 ranks or more the ranks' all-reduces of one bucket in
    one iteration overlap in time (a blocking all-reduce cannot end on one
    rank before it began on the other): the clocks are aligned;
  - with --test / --snapshot: a test / snapshot event is there;
  - data threads' tracks are named "data N" and hold record loads.
Prints "ok: ..." or "FAIL: ..." and exits 1 on failure."""
import json
import sys

# Times are written to the nanosecond: containment allows their rounding.
EPS_US = 0.01
# How far the ranks' aligned clocks may disagree (microseconds).  Without
# the alignment they differ by the ranks' start-up skew (milliseconds).
ALIGN_TOL_US = 500.0


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    path, ranks, first, last = args[0], int(args[1]), int(args[2]), int(args[3])
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s does not parse as JSON: %s" % (path, e))
    events = doc.get("traceEvents")
    if not isinstance(events, list) or not events:
        fail("no traceEvents list")
    names = {}     # (pid, tid) -> thread name
    procs = {}     # pid -> process name
    xs = []
    for e in events:
        if e.get("ph") == "M":
            if e.get("name") == "thread_name":
                names[(e["pid"], e["tid"])] = e["args"]["name"]
            elif e.get("name") == "process_name":
                procs[e["pid"]] = e["args"]["name"]
            continue
        if e.get("ph") != "X":
            fail("an event of phase %r: %s" % (e.get("ph"), e))
        for k in ("ts", "dur", "pid", "tid"):
            if not isinstance(e.get(k), (int, float)):
                fail("X event without a numeric %s: %s" % (k, e))
        if e["dur"] < 0 or not e.get("name") or not e.get("cat"):
            fail("X event with a negative duration or no name or category: %s" % e)
        xs.append(e)
    if sorted(procs) != list(range(ranks)):
        fail("processes %s, wanted ranks 0..%d" % (sorted(procs), ranks - 1))
    for pid, name in procs.items():
        if name != "rank %d" % pid:
            fail("process %d is named %r" % (pid, name))

    def track(e):
        return names.get((e["pid"], e["tid"]), "?")

    def inside(e, it):
        return it["ts"] - EPS_US <= e["ts"] and e["ts"] + e["dur"] <= it["ts"] + it["dur"] + EPS_US

    counts = {"layer": 0, "reduce": 0, "data": 0}
    for pid in range(ranks):
        its = sorted((e for e in xs if e["pid"] == pid and e["cat"] == "iteration"),
                     key=lambda e: e["ts"])
        want = ["iteration %d" % i for i in range(first, last + 1)]
        if [e["name"] for e in its] != want:
            fail("rank %d: iterations %s, wanted %s" % (pid, [e["name"] for e in its], want))
        for it in its:
            if track(it) != "compute":
                fail("rank %d: %s on track %r" % (pid, it["name"], track(it)))
        for e in xs:
            if e["pid"] != pid:
                continue
            if e["cat"] in ("forward", "backward", "feed"):
                counts["layer"] += 1
                if not e.get("args", {}).get("type"):
                    fail("layer event without its type: %s" % e)
                if track(e) != "compute" or not any(inside(e, it) for it in its):
                    fail("layer event outside every iteration of its track: %s" % e)
            elif e["cat"] == "reduce":
                counts["reduce"] += 1
                a = e.get("args", {})
                if track(e) != "communication":
                    fail("all-reduce on track %r: %s" % (track(e), e))
                if a.get("bytes", 0) <= 0 or "algbw_GBps" not in a or "bucket" not in a:
                    fail("all-reduce without bytes, bucket and bandwidth: %s" % e)
                if not any(inside(e, it) for it in its):
                    fail("all-reduce outside every iteration: %s" % e)
            elif e["cat"] == "data" and e["name"] == "load":
                counts["data"] += 1
                if not track(e).startswith("data "):
                    fail("record load on track %r" % track(e))
        if "--reduce" in flags:
            for it in its:
                if not any(e["pid"] == pid and e["cat"] == "reduce" and inside(e, it) for e in xs):
                    fail("rank %d: no all-reduce in %s" % (pid, it["name"]))
    for cat in ("test", "snapshot"):
        if "--" + cat in flags and not any(e["cat"] == cat for e in xs):
            fail("no %s event" % cat)
    if counts["layer"] == 0 or counts["data"] == 0:
        fail("no layer events or no record loads: %s" % counts)
    if "--reduce" in flags and ranks > 1:
        # bucket b of iteration i: its events on every rank overlap
        def reduces(pid):
            its = [e for e in xs if e["pid"] == pid and e["cat"] == "iteration"]
            out = {}
            for e in xs:
                if e["pid"] == pid and e["cat"] == "reduce":
                    it = next(i for i in its if inside(e, i))
                    out[(it["name"], e["args"]["bucket"])] = e
            return out
        r0 = reduces(0)
        worst = 0.0
        for pid in range(1, ranks):
            rp = reduces(pid)
            if sorted(rp) != sorted(r0):
                fail("rank %d reduced other buckets than rank 0" % pid)
            for k, a in r0.items():
                b = rp[k]
                gap = max(a["ts"] - (b["ts"] + b["dur"]), b["ts"] - (a["ts"] + a["dur"]))
                worst = max(worst, gap)
        if worst > ALIGN_TOL_US:
            fail("the ranks' all-reduces of one bucket are %.1f us apart: the clocks are not aligned"
                 % worst)
    print("ok: %d events, %d ranks, iterations %d..%d, %d layer events, %d all-reduces, %d record loads"
          % (len(xs), ranks, first, last, counts["layer"], counts["reduce"], counts["data"]))


if __name__ == "__main__":
    main()
