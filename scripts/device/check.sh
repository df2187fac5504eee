#!/usr/bin/env bash
# There (the GPU machine): one session's checks, in phases that fit a device
# call each (the build stays while the machine is warm); logs go to $OUT (or
# /tmp/cortado_check).
#   bash scripts/device/check.sh table    build; bench/gpu_vs_pytorch.sh on
#                                         every net, fp32 on GPU 0 and tf32 on
#                                         GPU 1 at the same time (one GPU
#                                         each); then the two-GPU tests
#   bash scripts/device/check.sh tests    the single-GPU tests on GPU 1
#                                         (TEST_GPU), and compute-sanitizer
#                                         memcheck, then racecheck, on every
#                                         test of every single-GPU test
#                                         binary, one test per process, on
#                                         GPU 0 (SAN_GPU)
#   bash scripts/device/check.sh scaling  allreduce_bw on each GPU set and
#                                         bench/scaling.sh (DATA=dummy|lmdb|both,
#                                         NETS, GPUS="0,1" or "0,1,2,3 0,...,7")
#   bash scripts/device/check.sh compare  a base tree (BASE_SRC, default .base:
#                                         e.g. `git archive` of the commit
#                                         before a change) built into
#                                         build-base, then the table with
#                                         BASE=build-base (both builds against
#                                         the same PyTorch runs)
#   bash scripts/device/check.sh scaling-compare  bench/scaling.sh on 2 GPUs,
#                                         net by net, the base build then this
#                                         one (TORCH=0, EACH_GPU=0)
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

# build-base: the base tree's build (compare, scaling-compare)
base_src=${BASE_SRC:-.base}
build_base() {
  [[ -x build-base/cortado ]] && return 0
  { cmake -S "$base_src" -B build-base -DCMAKE_BUILD_TYPE=Release -DCORTADO_TESTS=OFF \
      -DCORTADO_FIXTURES_DIR="$PWD/.fixtures" && cmake --build build-base --target cortado -j"$(nproc)"; } \
    >"$out/build_base.log" 2>&1 || { tail -30 "$out/build_base.log"; exit 1; }
}

case ${1:-} in
table | compare)
  [[ $1 == compare ]] && build_base
  for m in fp32:0 tf32:1; do
    CUDA_VISIBLE_DEVICES=${m#*:} MODES=${m%:*} NETS=${NETS:-"LeNet cifar10_quick AlexNet GoogLeNet ResNet-50"} \
      BASE=$([[ $1 == compare ]] && echo "$PWD/build-base") \
      ITERS=${ITERS:-30} timeout "${BENCH_S:-400}" bash bench/gpu_vs_pytorch.sh $b /tmp/gvp_${m%:*} \
      >"$out/gvp_${m%:*}.log" 2>&1 &
  done
  wait
  if [[ $1 == compare ]]; then
    cat /tmp/gvp_fp32/gpu_vs_pytorch.md /tmp/gvp_tf32/gpu_vs_pytorch.md 2>/dev/null >"$out/table.md"
    break_after=1
  fi
  if [[ -z ${break_after:-} ]]; then
    (cd $b && CORTADO_COMM_TIMEOUT=40 timeout "${DP_S:-110}" ctest -R "gpu_dp|gloo_gpu" --timeout 100 \
      --output-on-failure >"$out/dp_tests.log" 2>&1; echo "ctest rc=$?" >>"$out/dp_tests.log")
    cat /tmp/gvp_fp32/gpu_vs_pytorch.md /tmp/gvp_tf32/gpu_vs_pytorch.md 2>/dev/null | grep -v "^| net\|^| ---" \
      >"$out/table.md"
  fi
  ;;
scaling-compare)
  build_base
  for net in ${NETS:-alexnet googlenet resnet50}; do
    for which in base new; do
      dir=$b
      [[ $which == base ]] && dir=build-base
      NETS=$net ITERS=${ITERS:-60} FIXTURES=$PWD/.fixtures TORCH=0 EACH_GPU=0 OUT=/tmp/sc_$which \
        timeout "${SCALING_S:-200}" bash bench/scaling.sh "$dir" >>"$out/scaling_$which.log" 2>&1
    done
  done
  ;;
tests)
  (
    export CUDA_VISIBLE_DEVICES=${TEST_GPU:-1}
    cd $b && timeout "${TESTS_S:-300}" ctest -L gpu -E "gpu_dp|gloo" --timeout 250 --output-on-failure \
      >"$out/gpu_tests.log" 2>&1
    echo "ctest rc=$?" >>"$out/gpu_tests.log"
  ) &
  (
    # One test per process (argv[1] is each binary's test filter): a whole
    # binary can outlast any limit under racecheck. Every memcheck first,
    # then every racecheck (SAN_TOOLS), SAN_P processes at once, SAN_S
    # seconds each.  SAN_TABLE=1: each test first runs plainly with
    # CORTADO_CUDNN_ALGOS=FILE (its convolution choices written), then under
    # the tool with the same FILE (read back), so the checked run skips the
    # benchmark of every cuDNN algorithm and the race of Cortado's own
    # configurations (checked themselves by test_gpu_conv_igemm's direct
    # tests) and runs the kernels the plain run chose; test_algorithm_table,
    # which counts the table's new entries, runs without.
    export CUDA_VISIBLE_DEVICES=${SAN_GPU:-0} sanitizer b SAN_TABLE=${SAN_TABLE:-0}
    logs=/tmp/cortado_san
    mkdir -p "$logs/algos"
    for tool in ${SAN_TOOLS:-memcheck racecheck}; do
      for src in tests/test_gpu_*.c; do
        n=$(basename "$src" .c)
        [[ $n == test_gpu_dp ]] && continue
        grep -oE 'cmocka_unit_test\([A-Za-z0-9_]+\)' "$src" | sed "s/.*(\(.*\))/$tool $n \1/"
      done
    done | xargs -P "${SAN_P:-8}" -L 1 bash -c '
      extra=; [[ $0 == memcheck ]] && extra="--leak-check no"
      if [[ $SAN_TABLE == 1 && $2 != test_algorithm_table ]]; then
        export CORTADO_CUDNN_ALGOS="'"$logs"'/algos/$0_$1_$2.bin"
        timeout "${SAN_S:-300}" "$b/tests/$1" "$2" >"'"$logs"'/plain_$0_$1_$2.txt" 2>&1
      fi
      timeout "${SAN_S:-300}" "$sanitizer" --tool $0 $extra --error-exitcode 9 "$b/tests/$1" "$2" \
        >"'"$logs"'/$0_$1_$2.log" 2>&1'
    for f in "$logs"/*.log; do
      s=$(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$f" | tail -1 | sed 's/^=* *//')
      printf '%s: %s\n' "$(basename "$f" .log)" "${s:-no summary (time limit)}"
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
  echo "usage: $0 table|tests|scaling|compare|scaling-compare" >&2
  exit 2
  ;;
esac
grep -hE "tests passed|tests failed|rc=|\*\*\*Failed|Timeout" "$out"/*.log 2>/dev/null
cat "$out/sanitizers.txt" "$out/table.md" 2>/dev/null
tail -n 25 "$out/scaling.log" "$out/scaling_base.log" "$out/scaling_new.log" "$out/allreduce.log" 2>/dev/null
logs=$(ls -d /tmp/gvp_* /tmp/sc /tmp/sc_* /tmp/cortado_san 2>/dev/null)
[[ -z $logs ]] || tar czf "$out/logs_$1.tgz" $logs 2>/dev/null|| true
