#!/usr/bin/env bash
# There (the GPU machine): one session's checks, in phases that fit a device
# call each (the build stays while the machine is warm); logs go to $OUT (or
# /tmp/cortado_check).
#   bash scripts/device/check.sh table    build; bench/gpu_vs_pytorch.sh on
#                                         every net, fp32 on GPU 0 and tf32 on
#                                         GPU 1 at the same time (one GPU
#                                         each); then the two-GPU tests
#   bash scripts/device/check.sh tests    the single-GPU tests on GPU 1, and
#                                         compute-sanitizer memcheck on every
#                                         single-GPU test binary (GPU 0), then
#                                         racecheck on two
#   bash scripts/device/check.sh scaling  allreduce_bw on each GPU set and
#                                         bench/scaling.sh (DATA=dummy|lmdb|both,
#                                         NETS, GPUS="0,1" or "0,1,2,3 0,...,7")
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
table)
  for m in fp32:0 tf32:1; do
    CUDA_VISIBLE_DEVICES=${m#*:} MODES=${m%:*} NETS=${NETS:-"LeNet cifar10_quick AlexNet GoogLeNet ResNet-50"} \
      ITERS=${ITERS:-30} timeout "${BENCH_S:-400}" bash bench/gpu_vs_pytorch.sh $b /tmp/gvp_${m%:*} \
      >"$out/gvp_${m%:*}.log" 2>&1 &
  done
  wait
  (cd $b && CORTADO_COMM_TIMEOUT=40 timeout "${DP_S:-110}" ctest -R "gpu_dp|gloo_gpu" --timeout 100 \
    --output-on-failure >"$out/dp_tests.log" 2>&1; echo "ctest rc=$?" >>"$out/dp_tests.log")
  cat /tmp/gvp_fp32/gpu_vs_pytorch.md /tmp/gvp_tf32/gpu_vs_pytorch.md 2>/dev/null | grep -v "^| net\|^| ---" \
    >"$out/table.md"
  ;;
tests)
  (
    export CUDA_VISIBLE_DEVICES=1
    cd $b && timeout "${TESTS_S:-300}" ctest -L gpu -E "gpu_dp|gloo" --timeout 250 --output-on-failure \
      >"$out/gpu_tests.log" 2>&1
    echo "ctest rc=$?" >>"$out/gpu_tests.log"
  ) &
  (
    export CUDA_VISIBLE_DEVICES=0
    for t in $b/tests/test_gpu_*; do
      n=$(basename "$t")
      [[ $n == test_gpu_dp ]] && continue
      timeout "${SAN_S:-240}" "$sanitizer" --tool memcheck --leak-check no --error-exitcode 9 "$t" \
        >"$out/memcheck_$n.log" 2>&1 &
    done
    wait
    for n in test_gpu_runtime_update test_gpu_layer_vision; do
      timeout 120 "$sanitizer" --tool racecheck --error-exitcode 9 $b/tests/$n >"$out/racecheck_$n.log" 2>&1
    done
    for f in "$out"/memcheck_*.log "$out"/racecheck_*.log; do
      printf '%s: %s\n' "$(basename "$f" .log)" "$(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$f" | tail -1)"
    done >"$out/sanitizers.txt"
  ) &
  wait
  ;;
scaling)
  nvidia-smi topo -m >"$out/topo.txt" 2>&1
  for set in ${GPUS:-0,1}; do
    n=$(awk -F, '{print NF}' <<<"$set")
    CUDA_VISIBLE_DEVICES=$set timeout 90 bash bench/allreduce_bw.sh $b --gpus "$n" --mb 256,25 --iters 20 \
      --warmup 5 >>"$out/allreduce.log" 2>&1
  done
  NETS=${NETS:-"alexnet googlenet resnet50"} ITERS=${ITERS:-60} FIXTURES=$PWD/.fixtures \
    OUT=/tmp/sc timeout "${SCALING_S:-500}" bash bench/scaling.sh $b >"$out/scaling.log" 2>&1
  ;;
*)
  echo "usage: $0 table|tests|scaling" >&2
  exit 2
  ;;
esac
grep -hE "tests passed|tests failed|rc=|\*\*\*Failed|Timeout" "$out"/*.log 2>/dev/null
cat "$out/sanitizers.txt" "$out/table.md" 2>/dev/null
tail -n 25 "$out/scaling.log" "$out/allreduce.log" 2>/dev/null
tar czf "$out/logs_$1.tgz" /tmp/gvp_* /tmp/sc 2>/dev/null
