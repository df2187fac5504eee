#!/usr/bin/env bash
# The GPU kernels of one training iteration of a net, with their durations
# (Nsight Compute's gpu__time_duration), largest first: where an iteration's
# device time goes, kernel by kernel.
#
#   bench/kernel_profile.sh BUILD_DIR PROTOTXT C,H,W [MODE]
#
# Runs `cortado time --update --dummy_data --iterations=2` under ncu (every
# kernel, plain launches: the first runs of the solver's program are not
# graph replays, and a kernel takes as long either way) and keeps the kernels
# between the last two fused-update kernels: one whole iteration.  Prints the
# table, the sum of the kernel times and the kernel count; the difference to
# the iteration time that `cortado time --update` reports is what the device
# spends between kernels.  Needs a GPU and ncu (Firecracker machines).
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR PROTOTXT C,H,W [MODE]}
net=${2:?prototxt}
shape=${3:?C,H,W}
mode=${4:-fp32}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 ||
  echo /usr/local/cuda/bin/ncu)
csv=$(mktemp)
"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$build/cortado" time --model="$net" --gpu=0 --dummy_data --dummy_shape="$shape" --update \
  --iterations=2 --math="$mode" >"$csv" 2>/dev/null
python3 - "$csv" <<'PY'
import csv, sys, collections
rows = []
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    rows.append((r["Kernel Name"], float(r["Metric Value"].replace(",", ""))))
ups = [i for i, (n, _) in enumerate(rows) if "update" in n.lower()]
if len(ups) < 2:
    sys.exit(f"kernel_profile: fewer than two update kernels among {len(rows)} kernels")
it = rows[ups[-2] + 1: ups[-1] + 1]
by = collections.OrderedDict()
for n, ns in it:
    short = n.split("(")[0].split("<")[0][:70]
    c = by.setdefault(short, [0, 0.0])
    c[0] += 1
    c[1] += ns
total = sum(ns for _, ns in it)
print("| kernel | launches | us | share |")
print("| --- | --- | --- | --- |")
for n, (k, ns) in sorted(by.items(), key=lambda x: -x[1][1]):
    print(f"| {n} | {k} | {ns / 1e3:.1f} | {100 * ns / total:.1f}% |")
print(f"kernels in one iteration: {len(it)}, sum of their times: {total / 1e3:.1f} us")
PY
rm -f "$csv"
