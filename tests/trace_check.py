#!/usr/bin/env python3
"""Checks a `cortado --trace` file (Chrome trace event JSON), for
sh_trace.sh and sh_trace_mpi.sh.

usage: trace_check.py FILE RANKS FIRST LAST [--reduce] [--test] [--snapshot]
                      [--gpu] [--no-data]

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
  - data threads' tracks are named "data N" and hold record loads (unless
    --no-data).
  With --gpu (a GPU run): each rank also has exactly the iteration events
  FIRST..LAST on its "GPU compute stream" track (device times), each layer
  step on that track (forward, backward, with args.type) inside one of them,
  weight gradients on "GPU gradient stream" inside an iteration; with
  --reduce the all-reduces are on "GPU communication stream" instead of
  "communication", and at least one bucket of each iteration starts before
  that iteration's last backward step ends (the all-reduce overlaps the
  backward pass).
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

    gpu = "--gpu" in flags
    comm_track = "GPU communication stream" if gpu else "communication"
    counts = {"layer": 0, "reduce": 0, "data": 0, "gpu layer": 0, "weight gradient": 0}
    for pid in range(ranks):
        if gpu:
            check_gpu(xs, track, inside, pid, first, last, counts, "--reduce" in flags)
        its = sorted((e for e in xs if e["pid"] == pid and e["cat"] == "iteration"
                      and track(e) == "compute"), key=lambda e: e["ts"])
        dev_its = sorted((e for e in xs if e["pid"] == pid and e["cat"] == "iteration"
                          and track(e) == "GPU compute stream"), key=lambda e: e["ts"])
        want = ["iteration %d" % i for i in range(first, last + 1)]
        if [e["name"] for e in its] != want:
            fail("rank %d: iterations %s, wanted %s" % (pid, [e["name"] for e in its], want))
        for it in its:
            if track(it) != "compute":
                fail("rank %d: %s on track %r" % (pid, it["name"], track(it)))
        for e in xs:
            if e["pid"] != pid or track(e).startswith("GPU "):
                continue
            if e["cat"] in ("forward", "backward", "feed"):
                counts["layer"] += 1
                if not e.get("args", {}).get("type"):
                    fail("layer event without its type: %s" % e)
                if track(e) != "compute" or not any(inside(e, it) for it in its):
                    fail("layer event outside every iteration of its track: %s" % e)
            elif e["cat"] == "reduce" and not gpu:
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
            for it in (dev_its if gpu else its):
                if not any(e["pid"] == pid and e["cat"] == "reduce" and track(e) == comm_track
                           and inside(e, it) for e in xs):
                    fail("rank %d: no all-reduce in %s" % (pid, it["name"]))
    for cat in ("test", "snapshot"):
        if "--" + cat in flags and not any(e["cat"] == cat for e in xs):
            fail("no %s event" % cat)
    if (counts["layer"] == 0 and not gpu) or (counts["data"] == 0 and "--no-data" not in flags):
        fail("no layer events or no record loads: %s" % counts)
    if "--reduce" in flags and ranks > 1:
        # bucket b of iteration i: its events on every rank overlap
        def reduces(pid):
            its = [e for e in xs if e["pid"] == pid and e["cat"] == "iteration"
                   and track(e) == ("GPU compute stream" if gpu else "compute")]
            out = {}
            for e in xs:
                if e["pid"] == pid and e["cat"] == "reduce" and track(e) == comm_track:
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
          % (len(xs), ranks, first, last, counts["layer"], counts["reduce"], counts["data"])
          + (", %d GPU layer steps, %d weight gradients" % (counts["gpu layer"], counts["weight gradient"])
             if gpu else ""))


def check_gpu(xs, track, inside, pid, first, last, counts, reduce):
    """The device tracks of one rank of a GPU run (see the module's text)."""
    mine = [e for e in xs if e["pid"] == pid and track(e).startswith("GPU ")]
    its = sorted((e for e in mine if e["cat"] == "iteration"), key=lambda e: e["ts"])
    want = ["iteration %d" % i for i in range(first, last + 1)]
    if [e["name"] for e in its] != want:
        fail("rank %d: GPU iterations %s, wanted %s" % (pid, [e["name"] for e in its], want))
    for it in its:
        if track(it) != "GPU compute stream":
            fail("rank %d: GPU %s on track %r" % (pid, it["name"], track(it)))
    for a, b in zip(its, its[1:]):
        if a["ts"] + a["dur"] > b["ts"] + EPS_US:
            fail("rank %d: GPU %s overlaps %s" % (pid, a["name"], b["name"]))
    last_backward = {}
    for e in mine:
        if e["cat"] == "iteration":
            continue
        home = [it for it in its if inside(e, it)]
        if not home:
            fail("rank %d: GPU event outside every iteration: %s" % (pid, e))
        if e["cat"] in ("forward", "backward"):
            counts["gpu layer"] += 1
            if track(e) != "GPU compute stream" or not e.get("args", {}).get("type"):
                fail("GPU layer step off the compute stream or without its type: %s" % e)
            if e["cat"] == "backward":
                k = home[0]["name"]
                last_backward[k] = max(last_backward.get(k, 0), e["ts"] + e["dur"])
        elif e["cat"] == "weight gradient":
            counts["weight gradient"] += 1
            if track(e) != "GPU gradient stream":
                fail("weight gradient on track %r: %s" % (track(e), e))
        elif e["cat"] == "reduce":
            counts["reduce"] += 1
            a = e.get("args", {})
            if track(e) != "GPU communication stream":
                fail("GPU all-reduce on track %r: %s" % (track(e), e))
            if a.get("bytes", 0) <= 0 or "algbw_GBps" not in a or "bucket" not in a:
                fail("all-reduce without bytes, bucket and bandwidth: %s" % e)
    if counts["gpu layer"] == 0:
        fail("rank %d: no layer steps on the GPU compute stream" % pid)
    if reduce:
        for it in its:
            starts = [e["ts"] for e in mine if e["cat"] == "reduce" and inside(e, it)]
            if not starts or min(starts) >= last_backward.get(it["name"], 0):
                fail("rank %d: no all-reduce of %s starts before its backward pass ends"
                     % (pid, it["name"]))


if __name__ == "__main__":
    main()
