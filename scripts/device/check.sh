#!/usr/bin/env bash
# There (the GPU machine): one session's checks, in phases that fit a device
# call each; logs go to $OUT (or /tmp/cortado_check).
#   bash scripts/device/check.sh single   build; GPU 1: the single-GPU tests,
#                                         then compute-sanitizer; GPU 0 at the
#                                         same time: gpu_vs_pytorch on $NETS;
#                                         then the two-GPU tests
#   bash scripts/device/check.sh scaling  bench/scaling.sh and allreduce_bw
set -uo pipefail
cd "$(dirname "$0")/../.."
eval "$(bash scripts/device/setup.sh)"
out=${OUT:-/tmp/cortado_check}
mkdir -p "$out"
b=build-dev
if [[ ! -x $b/cortado ]]; then
  { cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DCORTADO_FIXTURES_DIR="$PWD/.fixtures" &&
    cmake --build $b -j"$(nproc)"; } >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
# what ctest gives the tests, for running binaries under compute-sanitizer
export CORTADO_FIXTURES=$PWD/.fixtures CORTADO_SRC=$PWD CORTADO_BIN=$PWD/$b/cortado
export CORTADO_TMP=$PWD/$b/test-tmp OMP_WAIT_POLICY=passive NCCL_NVLS_ENABLE=0
mkdir -p "$CORTADO_TMP"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

case ${1:-} in
single)
  (
    export CUDA_VISIBLE_DEVICES=1
    cd $b && timeout "${TESTS_S:-260}" ctest -L gpu -E "gpu_dp|gloo" --timeout 250 --output-on-failure \
      >"$out/gpu_tests.log" 2>&1
    echo "ctest rc=$?" >>"$out/gpu_tests.log"
    timeout 100 "$sanitizer" --tool memcheck --leak-check no --error-exitcode 9 tests/test_gpu_layer_structure \
      >"$out/memcheck.log" 2>&1
    echo "memcheck rc=$?" >>"$out/memcheck.log"
    timeout 80 "$sanitizer" --tool racecheck --error-exitcode 9 tests/test_gpu_runtime_update \
      >"$out/racecheck.log" 2>&1
    echo "racecheck rc=$?" >>"$out/racecheck.log"
  ) &
  CUDA_VISIBLE_DEVICES=0 NETS=${NETS:-"GoogLeNet ResNet-50"} ITERS=${ITERS:-30} \
    timeout "${BENCH_S:-250}" bash bench/gpu_vs_pytorch.sh $b /tmp/gvp >"$out/gvp.log" 2>&1
  wait
  (cd $b && CORTADO_COMM_TIMEOUT=40 timeout "${DP_S:-110}" ctest -R "gpu_dp|gloo_gpu" --timeout 100 \
    --output-on-failure >"$out/dp_tests.log" 2>&1; echo "ctest rc=$?" >>"$out/dp_tests.log")
  ;;
scaling)
  timeout 60 bash bench/allreduce_bw.sh $b >"$out/allreduce.log" 2>&1
  NETS=${NETS:-"alexnet googlenet resnet50"} ITERS=${ITERS:-60} FIXTURES=$PWD/.fixtures \
    OUT=/tmp/sc timeout "${SCALING_S:-400}" bash bench/scaling.sh $b >"$out/scaling.log" 2>&1
  ;;
*)
  echo "usage: $0 single|scaling" >&2
  exit 2
  ;;
esac
grep -hE "tests passed|tests failed|rc=|ERROR SUMMARY|RACECHECK SUMMARY|\*\*\*Failed|Timeout" "$out"/*.log 2>/dev/null
tail -n 25 "$out/gvp.log" "$out/scaling.log" "$out/allreduce.log" 2>/dev/null
tar czf "$out/logs_$1.tgz" /tmp/gvp /tmp/sc 2>/dev/null
