#!/usr/bin/env bash
# `cortado time --format=table|csv|json` on Caffe's LeNet (batch 64, dummy
# data): the FLOPs of each layer against numbers worked out by hand (a
# multiply-add counts 2), the memory of the parameters, and that the CSV
# and JSON parse with one row per layer, per type and the total.  Needs
# CORTADO_BIN, CORTADO_FIXTURES (set by ctest) and python3.
set -euo pipefail
bin=${CORTADO_BIN:?CORTADO_BIN is not set}
fix=${CORTADO_FIXTURES:?CORTADO_FIXTURES is not set}
dir=${CORTADO_TMP:-/tmp}/sh_time_report
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
run() { "$bin" time --model="$fix/lenet_train_test.prototxt" --dummy_data --dummy_shape=1,28,28 \
  --iterations=3 --log_level=1 "$@"; }
run --format=json >lenet.json
run --format=csv >lenet.csv
run >lenet.txt
python3 - <<'PY' || exit 1
import csv, json, sys
# batch N = 64; conv1 20x(1x5x5) -> 24x24; pool1 2x2/2 -> 12x12; conv2 50x(20x5x5) -> 8x8;
# pool2 -> 4x4; ip1 800 -> 500; ip2 500 -> 10
N = 64
conv1_macs = N * 20 * 24 * 24 * 1 * 5 * 5
conv2_macs = N * 50 * 8 * 8 * 20 * 5 * 5
want = {  # layer: (forward, backward)
    # conv1's bottom (the data) gets no gradient: weights and bias only
    "conv1": (2 * conv1_macs + N * 20 * 24 * 24, 2 * conv1_macs + N * 20 * 24 * 24),
    "pool1": (N * 20 * 12 * 12 * 4, N * 20 * 12 * 12),
    "conv2": (2 * conv2_macs + N * 50 * 8 * 8, 4 * conv2_macs + N * 50 * 8 * 8),
    "pool2": (N * 50 * 4 * 4 * 4, N * 50 * 4 * 4),
    "ip1": (2 * N * 800 * 500 + N * 500, 4 * N * 800 * 500 + N * 500),
    "relu1": (N * 500, N * 500),
    "ip2": (2 * N * 500 * 10 + N * 10, 4 * N * 500 * 10 + N * 10),
    "loss": (5 * N * 10, 2 * N * 10),
}
assert want["conv1"][0] == 37601280 and want["conv2"][0] == 205004800  # as worked out in the commit
params = {"conv1": 20 * 25 + 20, "conv2": 50 * 500 + 50, "ip1": 500 * 800 + 500, "ip2": 10 * 500 + 10}
j = json.load(open("lenet.json"))
layers = {l["name"]: l for l in j["layers"]}
fail = []
for name, (f, b) in want.items():
    l = layers[name]
    if (l["forward_flops"], l["backward_flops"]) != (f, b):
        fail.append("%s: FLOPs %s, %s; wanted %d, %d" % (name, l["forward_flops"], l["backward_flops"], f, b))
if layers["mnist"]["forward_flops"] is not None:
    fail.append("the data layer's FLOPs are counted")
for name, n in params.items():
    if abs(layers[name]["param_mb"] - n * 4 / 1048576) > 1e-6:
        fail.append("%s: %s MB of parameters, wanted %d floats" % (name, layers[name]["param_mb"], n))
# conv1's top: 64x20x24x24 floats; relu1 is in place: no top of its own
if abs(layers["conv1"]["top_mb"] - N * 20 * 576 * 4 / 1048576) > 1e-6 or layers["relu1"]["top_mb"] != 0:
    fail.append("top memory: conv1 %s MB, relu1 %s MB" % (layers["conv1"]["top_mb"], layers["relu1"]["top_mb"]))
for l in j["layers"] + j["types"] + [j["total"]]:
    if l["ms"] < 0 or l["ms_std"] < 0:
        fail.append("negative time: %s" % l)
types = {t["name"]: t for t in j["types"]}
if types["Convolution"]["layers"] != 2 or types["Convolution"]["forward_flops"] != want["conv1"][0] + want["conv2"][0]:
    fail.append("Convolution's summary: %s" % types["Convolution"])
if j["total"]["layers"] != 9 or abs(sum(l["share"] for l in j["layers"]) - 1) > 1e-3:
    fail.append("total: %s" % j["total"])
rows = list(csv.DictReader(open("lenet.csv")))
kinds = [r["kind"] for r in rows]
if kinds != ["layer"] * 9 + ["type"] * 6 + ["total"]:
    fail.append("CSV rows %s" % kinds)
if int(rows[1]["forward_flops"]) != want["conv1"][0] or rows[0]["forward_flops"] != "":
    fail.append("CSV FLOPs: %s" % rows[:2])
text = open("lenet.txt").read()
if "per layer type:" not in text or "conv2" not in text:
    fail.append("the table: %s" % text[:200])
if fail:
    print("FAIL:\n" + "\n".join(fail))
    sys.exit(1)
print("ok: FLOPs and parameters of LeNet's 8 counted layers, CSV and JSON parse")
PY
rc=0; out=$(run --format=xml 2>&1) || rc=$?
[ $rc = 2 ] && grep -q "format" <<<"$out" || { echo "FAIL: --format=xml: status $rc: $out"; exit 1; }
echo ok
