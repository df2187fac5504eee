#!/usr/bin/env bash
# The kernels of one training iteration as the GPU ran them (CUDA graph
# replays, both streams), from bench/kernel_trace.c's CUPTI records: start
# (us from the end of the previous iteration's update), duration, stream,
# launch shape, registers and name; then the iteration's span, the sum of
# the kernels' durations, the time some kernel was running and the time
# none was, and the spans of the last iterations.
#
#   bench/kernel_timeline.sh BUILD_DIR PROTOTXT C,H,W [MODE] [ITERATIONS]
#
# Runs `cortado time --update --dummy_data` (default 100 iterations) and
# prints the third-last whole iteration.  Needs a GPU.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR PROTOTXT C,H,W [MODE] [ITERATIONS]}
net=${2:?prototxt}
shape=${3:?C,H,W}
mode=${4:-tf32}
iters=${5:-100}
lib=$build/bench/libkernel_trace.so
[ -f "$lib" ] || { echo "kernel_timeline: $lib is missing (CUPTI not found at configure time)" >&2; exit 1; }
csv=$(mktemp)
CUDA_INJECTION64_PATH=$(realpath "$lib") KERNEL_TRACE_OUT=$csv \
  "$build/cortado" time --model="$net" --gpu=0 --dummy_data --dummy_shape="$shape" --update \
  --iterations="$iters" --math="$mode" >/dev/null 2>&1
python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    r["s"], r["e"] = int(r["start"]), int(r["end"])
rows.sort(key=lambda r: r["s"])
ends = [i for i, r in enumerate(rows) if "update" in r["name"].lower()]
if len(ends) < 4:
    sys.exit(f"kernel_timeline: {len(ends)} update kernels among {len(rows)}: too few iterations")
first, last = ends[-4], ends[-3]
t0 = rows[first]["e"]
it = rows[first + 1:last + 1]
span = it[-1]["e"] - t0
busy, cur_s, cur_e = 0, None, None
for r in it:
    if cur_e is None or r["s"] > cur_e:
        if cur_e is not None:
            busy += cur_e - cur_s
        cur_s, cur_e = r["s"], r["e"]
    else:
        cur_e = max(cur_e, r["e"])
busy += cur_e - cur_s
total = sum(r["e"] - r["s"] for r in it)
print("| start us | us | stream | grid x block | regs | kernel |")
print("| --- | --- | --- | --- | --- | --- |")
for r in it:
    print(f'| {(r["s"] - t0) / 1e3:.1f} | {(r["e"] - r["s"]) / 1e3:.1f} | {r["stream"]} | '
          f'{r["grid"]}x{r["block"]} | {r["regs"]} | {r["name"][:70]} |')
print(f"iteration span {span / 1e3:.1f} us, {len(it)} kernels, sum of durations {total / 1e3:.1f} us, "
      f"some kernel running {busy / 1e3:.1f} us, none {(span - busy) / 1e3:.1f} us")
spans = [(rows[ends[i + 1]]["e"] - rows[ends[i]]["e"]) / 1e3 for i in range(len(ends) - 1)]
print("last iterations' spans (us):", " ".join(f"{x:.1f}" for x in spans[-8:]))
PY
rc=$?
rm -f "$csv"
exit $rc
