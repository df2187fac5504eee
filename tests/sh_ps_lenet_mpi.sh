#!/usr/bin/env bash
# LeNet on Fashion-MNIST trains through parameter servers in every mode
# (docs/distributed.md): 3 workers under mpirun, 100 iterations of batch 64,
# then a test on 1000 images; ssp (staleness 1, 2 servers; staleness 4,
# which with BVLC's momentum 0.9 diverged by iteration 100 while the server
# applied whole clocks), async and bmuf (blocks of 5) each reach at least
# 0.6 and lie within 0.1 of the all-reduce's accuracy.  (The bit-for-bit
# and clock checks are tests/test_ps_mpi.c; bench/ps_accuracy.sh the
# 2000-iteration figures.)
set -euo pipefail
dir=${CORTADO_TMP:?}/sh_ps_lenet_mpi
rm -rf "$dir" && mkdir -p "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
# Minutes under the sanitizers: the release build's run is the one that counts.
[ "${CORTADO_SANITIZED:-0}" = 1 ] && { echo "skip under sanitizers"; exit 77; }
. "$(dirname "$0")/lenet_precision.sh"
lenet_data "$dir"
sed -e "s#examples/fashion_mnist/lenet_train_test.prototxt#$dir/net.prototxt#" \
    -e "s#^snapshot_prefix.*#snapshot_prefix: \"$dir/lenet\"#" -e "s#^snapshot:.*#snapshot: 0#" \
    -e "s#^test_interval.*#test_interval: 100#" -e "s#^test_iter.*#test_iter: 10#" \
    -e "s#^max_iter.*#max_iter: 100#" -e "s#^display.*#display: 50#" \
    "$CORTADO_SRC/examples/fashion_mnist/lenet_solver.prototxt" >"$dir/solver.prototxt"
echo "random_seed: 1" >>"$dir/solver.prototxt"
echo "snapshot_after_train: false" >>"$dir/solver.prototxt"
# accuracy RANKS FLAGS...: the final test accuracy of one run
accuracy() {
  local np=$1 log
  shift
  log="$dir/train_$(tr -c 'a-z0-9' _ <<<"$*").log"
  timeout 300 mpirun --oversubscribe --bind-to none -np "$np" "${CORTADO_BIN:?}" train \
    --solver="$dir/solver.prototxt" "$@" >"$log" 2>&1 || { tail -20 "$log" >&2; return 1; }
  grep "Test net output #0: accuracy" "$log" | tail -1 | sed 's/.*= //'
}
ref=$(accuracy 3)
fail=0
check() { # what accuracy
  awk -v a="$2" -v r="$ref" -v w="$1" 'BEGIN {
    ok = a >= 0.6 && a >= r - 0.1;
    printf "%s %s: accuracy %.3f (all-reduce %.3f)\n", ok ? "ok  " : "FAIL", w, a, r; exit !ok }' || fail=1
}
check "ssp, staleness 1, 2 servers" "$(accuracy 5 --dp_mode=ssp --staleness=1 --num_servers=2)"
check "ssp, staleness 4" "$(accuracy 4 --dp_mode=ssp --staleness=4)"
check "async" "$(accuracy 4 --dp_mode=async)"
check "bmuf, blocks of 5" "$(accuracy 4 --dp_mode=bmuf --bmuf_sync_period=5)"
exit $fail
