#!/usr/bin/env bash
# What `--trace` costs on GPUs, and a trace to look at: `cortado train` of a
# net on N GPUs (dummy data), images/s without a trace, with every
# iteration traced, and (PREV_BUILD) without a trace by another build (the
# commit before the trace code: the cost of the hooks when off).  The runs
# alternate, ROUNDS times; the table holds the medians.  Then one traced
# window of a few iterations is written to $OUT/trace.json and summarised
# per rank: the all-reduces that started before the backward pass ended.
#
#   bench/trace_overhead.sh [BUILD_DIR]
#
# Environment:
#   NET        the net (default models/resnet50/train_val.prototxt)
#   BATCH      per-GPU batch (default 128)
#   SHAPE      the dummy images (default 3,224,224)
#   GPUS       default 0,1
#   PRECISION  default bf16
#   ITERS      iterations per run (default 100; display every 20, the first
#              window is warm-up and not counted)
#   ROUNDS     default 2
#   PREV_BUILD a build folder of the commit to compare the untraced rate with
#   WINDOW     the iterations of the trace kept for viewing (default 50:52)
#   OUT        default /tmp/cortado_trace_overhead
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=${1:-"$repo/build"}
NET=${NET:-"$repo/models/resnet50/train_val.prototxt"}
BATCH=${BATCH:-128}
SHAPE=${SHAPE:-3,224,224}
GPUS=${GPUS:-0,1}
PRECISION=${PRECISION:-bf16}
ITERS=${ITERS:-100}
ROUNDS=${ROUNDS:-2}
WINDOW=${WINDOW:-50:52}
OUT=${OUT:-/tmp/cortado_trace_overhead}
DISPLAY_EVERY=20
mkdir -p "$OUT"
ngpu=$(awk -F, '{print NF}' <<<"$GPUS")

sed -E "s/batch_size: *[0-9]+/batch_size: $BATCH/" "$NET" >"$OUT/net.prototxt"
cat >"$OUT/solver.prototxt" <<SOLVER
net: "$OUT/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" momentum: 0.9 weight_decay: 0.0005
max_iter: $ITERS display: $DISPLAY_EVERY average_loss: 1
snapshot: 0 snapshot_after_train: false solver_mode: GPU random_seed: 1
SOLVER

# img/s: mean iter/s over the display windows after the first x batch x GPUs
rate() {
  awk -v d="$DISPLAY_EVERY" -v b="$BATCH" -v g="$ngpu" '
    /\] Iteration [0-9]+ \([0-9.e+-]+ iter\/s/ {
      match($0, /Iteration [0-9]+ \(/); it = substr($0, RSTART + 10, RLENGTH - 12) + 0
      match($0, /\([0-9.e+-]+ iter\/s/); v = substr($0, RSTART + 1, RLENGTH - 8) + 0
      if (it > d) { s += v; n++ }
    }
    END { if (n) printf "%.1f", s / n * b * g; else print "fail" }' "$1"
}

run() { # run LABEL BIN [flags]
  local label=$1 bin=$2
  shift 2
  "$bin" train --solver="$OUT/solver.prototxt" --gpu="$GPUS" --precision="$PRECISION" --dummy_data --dummy_shape="$SHAPE" \
    "$@" >"$OUT/$label.log" 2>&1 || { echo fail; return; }
  rate "$OUT/$label.log"
}

median() {
  printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 }
    END { if (!NR) print "-"; else printf "%.1f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

off=() on=() prev=()
export CORTADO_CUDNN_ALGOS="$OUT/algos" # every run times the same convolution algorithms
for r in $(seq 1 "$ROUNDS"); do
  off+=("$(run "off_$r" "$build/cortado")")
  on+=("$(run "on_$r" "$build/cortado" --trace="$OUT/all_$r.json")")
  [[ -n "${PREV_BUILD:-}" ]] && prev+=("$(run "prev_$r" "$PREV_BUILD/cortado")")
  rm -f "$OUT/all_$r.json"
done
echo "rounds: off ${off[*]} | on ${on[*]} | prev ${prev[*]:-}"
m_off=$(median "${off[@]}") m_on=$(median "${on[@]}") m_prev=$(median "${prev[@]:-}")
echo "| net | GPUs | precision | no trace img/s | every iteration traced | cost | previous commit, no trace | difference |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
awk -v n="$(basename "$(dirname "$NET")")/$(basename "$NET")" -v g="$ngpu" -v p="$PRECISION" \
    -v a="$m_off" -v b="$m_on" -v c="$m_prev" 'BEGIN {
  cost = (a + 0 > 0 && b + 0 > 0) ? sprintf("%+.1f%%", 100 * (a - b) / a) : "-"
  diff = (a + 0 > 0 && c + 0 > 0) ? sprintf("%+.1f%%", 100 * (a - c) / c) : "-"
  printf "| %s | %d | %s | %s | %s | %s | %s | %s |\n", n, g, p, a, b, cost, c, diff }'

# a window to look at, and what its all-reduces overlapped
"$build/cortado" train --solver="$OUT/solver.prototxt" --gpu="$GPUS" --precision="$PRECISION" \
  --dummy_data --dummy_shape="$SHAPE" --trace="$OUT/trace.json" --trace_iters="$WINDOW" >"$OUT/window.log" 2>&1 ||
  { tail -3 "$OUT/window.log"; exit 1; }
python3 - "$OUT/trace.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
x = [e for e in ev if e.get("ph") == "X"]
tr = lambda e: names.get((e["pid"], e["tid"]), "?")
for pid in sorted({e["pid"] for e in x}):
    its = [e for e in x if e["pid"] == pid and e["cat"] == "iteration" and tr(e) == "GPU compute stream"]
    for it in sorted(its, key=lambda e: e["ts"]):
        inside = lambda e: it["ts"] <= e["ts"] and e["ts"] + e["dur"] <= it["ts"] + it["dur"] + 0.01
        mine = [e for e in x if e["pid"] == pid and inside(e)]
        bwd = [e for e in mine if e["cat"] == "backward" and tr(e) == "GPU compute stream"]
        red = [e for e in mine if e["cat"] == "reduce" and tr(e) == "GPU communication stream"]
        if not bwd or not red:
            continue
        b0 = min(e["ts"] for e in bwd); b1 = max(e["ts"] + e["dur"] for e in bwd)
        hidden = sum(max(0.0, min(e["ts"] + e["dur"], b1) - max(e["ts"], b0)) for e in red)
        total = sum(e["dur"] for e in red)
        tail = max(e["ts"] + e["dur"] for e in red) - b1
        print("rank %d %s: %.2f ms, backward %.2f ms; %d all-reduces, %.2f ms, %.0f%% of it during "
              "backward; %d started before backward ended; the last ended %.3f ms after it"
              % (pid, it["name"], it["dur"] / 1e3, (b1 - b0) / 1e3, len(red), total / 1e3,
                 100 * hidden / total if total else 0, sum(e["ts"] < b1 for e in red), tail / 1e3))
PY
