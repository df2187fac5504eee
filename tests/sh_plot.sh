#!/usr/bin/env bash
# `cortado plot`: a Cortado training log, its CSV log (--csv_log) and a
# BVLC Caffe log (tests/data/caffe_bvlc_lenet.log, and the same in the older
# "Iteration N, loss = X" form) read into curves (the counts logged per run),
# drawn overlaid to a real PNG (its signature and IHDR size: 960 wide, 320
# per chart) and a real SVG (it parses as XML, with drawn paths); bad
# arguments fail with exact messages.  Needs CORTADO_BIN, CORTADO_SRC (set by
# ctest) and python3.
set -euo pipefail
bin=${CORTADO_BIN:?CORTADO_BIN is not set}
src=${CORTADO_SRC:?CORTADO_SRC is not set}
here=$(cd "$(dirname "$0")" && pwd)
dir=${CORTADO_TMP:-/tmp}/sh_plot
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
export LSAN_OPTIONS="suppressions=$src/tests/data/lsan_cairo.supp:print_suppressions=0"
if "$bin" plot "$src/tests/data/caffe_bvlc_lenet.log" --out=probe.png 2>&1 | grep "built without cairo" >/dev/null; then
  echo "cortado was built without cairo: skipped"; exit 77
fi
. "$here/trace_job.sh"
write_trace_job
"$bin" train --solver=solver.prototxt --csv_log=cortado.csv >cortado.log 2>&1 ||
  { tail -3 cortado.log; echo "FAIL: train"; exit 1; }
cp "$src/tests/data/caffe_bvlc_lenet.log" bvlc.log
# Caffe before 1.0: "Iteration N, loss = X", no speed
sed -E 's/Iteration ([0-9]+) \([^)]*\), loss/Iteration \1, loss/' bvlc.log >bvlc_old.log

expect_counts() { # log text, run label, wanted counts
  grep -qF "] $2: $3" <<<"$1" || { echo "FAIL: $2: wanted '$3' in:"; echo "$1"; exit 1; }
}
out=$("$bin" plot cortado.log cortado.csv bvlc.log bvlc_old.log --out=all.png --y=loss,accuracy,lr,rate 2>&1) ||
  { echo "$out"; echo "FAIL: plot to PNG"; exit 1; }
# 8 iterations, display 2: iterations 0, 2, 4, 6 and the final 8; tests before 0, 4 and at 8
expect_counts "$out" cortado.log "5 loss, 3 test loss, 3 accuracy, 4 lr, 3 rate points"
# the CSV: a row per display after iteration 0 (2, 4, 6, 8), each after a test
expect_counts "$out" cortado.csv "4 loss, 0 test loss, 4 accuracy, 4 lr, 4 rate points"
expect_counts "$out" bvlc "6 loss, 3 test loss, 3 accuracy, 5 lr, 4 rate points"
expect_counts "$out" bvlc_old "6 loss, 3 test loss, 3 accuracy, 5 lr, 0 rate points"
"$bin" plot cortado.log bvlc.log --out=two.svg --x=seconds --log_level=1 || { echo "FAIL: plot to SVG"; exit 1; }
"$bin" plot bvlc.log --out=one.png --y=lr --log_level=1 || { echo "FAIL: plot one chart"; exit 1; }
python3 - <<'PY' || exit 1
import struct, sys
import xml.etree.ElementTree as ET
def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        sys.exit("FAIL: %s is not a PNG: %r" % (path, head[:16]))
    return struct.unpack(">II", head[16:24])
for path, charts in (("all.png", 4), ("one.png", 1)):
    if png_size(path) != (960, 320 * charts):
        sys.exit("FAIL: %s is %dx%d, wanted 960x%d" % ((path,) + png_size(path) + (320 * charts,)))
root = ET.parse("two.svg").getroot()
if not root.tag.endswith("svg") or root.get("width") not in ("960pt", "960") or root.get("height") not in ("640pt", "640"):
    sys.exit("FAIL: two.svg: root %s %sx%s" % (root.tag, root.get("width"), root.get("height")))
paths = [e for e in root.iter() if e.tag.endswith("path")]
if len(paths) < 10:
    sys.exit("FAIL: two.svg has only %d paths" % len(paths))
print("ok: PNGs 960x1280 and 960x320, SVG 960x640 with %d paths" % len(paths))
PY

expect() { # status, wanted message, args...
  local want_rc=$1 want=$2 rc=0 out
  shift 2
  out=$("$bin" plot "$@" 2>&1) || rc=$?
  if [ $rc = "$want_rc" ] && grep -qxF "cortado: error: $want" <<<"$out"; then
    echo "ok   plot $*"
  else
    echo "FAIL plot $*: status $rc, wanted $want_rc and 'cortado: error: $want' in:"; tail -3 <<<"$out"; exit 1
  fi
}
printf 'hello\n' >empty.log
expect 1 "empty.log: no training iterations found (a Caffe log or a Caffe2 CSV log)" empty.log --out=x.png
printf 'time_spent,loss\n1,2\n' >short.csv
expect 1 "short.csv:1: the CSV log's header has no column cumulative_time_spent" short.csv --out=x.png
expect 1 "missing.log: cannot open: No such file or directory" missing.log --out=x.png
expect 2 "--y: unknown chart 'speed' (loss, accuracy, lr or rate)" bvlc.log --out=x.png --y=loss,speed
expect 2 "'cortado plot' needs --out=FILE.png or --out=FILE.svg" bvlc.log
expect 1 "no/such/x.png: cannot write the PNG: error while writing to output stream" bvlc.log --out=no/such/x.png
[ ! -e x.png ] || { echo "FAIL: an image written after an error"; exit 1; }
echo ok
