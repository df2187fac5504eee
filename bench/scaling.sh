#!/usr/bin/env bash
# Data-parallel scaling: training throughput of `cortado train` on 1 and N
# GPUs (TF32; N = the count in GPUS), per-GPU batch as in Caffe, and of
# PyTorch DDP on the same prototxts; then the per-bucket all-reduce timing of
# the N-GPU runs, which shows the buckets overlapping backward.
#
#   bench/scaling.sh [BUILD_DIR]
#
# Environment:
#   NETS      which nets (default "alexnet googlenet resnet50")
#   ITERS     iterations per cortado run (default 120; display every 20, the
#             first window is warm-up and not counted)
#   DATA      "dummy" (default: --dummy_data) or "lmdb" (a synthetic JPEG LMDB
#             made by `cortado make_synthetic_db`, read through the Data layer
#             with its crop and mirror), or "both"
#   TORCH     1 (default) runs the PyTorch peer too, 0 skips it
#   TORCH_PY  the peer script (default .bench/torch_from_prototxt.py)
#   FIXTURES  folder of the BVLC prototxts (default: CORTADO_FIXTURES, else
#             the first of ../shared/fixtures/caffe, ../../shared/fixtures/caffe,
#             shared/fixtures/caffe, .bench that has them)
#   GPUS      the GPUs of the multi-GPU runs (default "0,1"; "0,1,2,3" for 4);
#             several sets separated by spaces ("0,1,2,3 0,1,2,3,4,5,6,7") give
#             a row per set against one 1-GPU run
#   SYNTH_NUM records in the synthetic LMDB (default 8000)
#   EACH_GPU  1 (default) also trains alone on every GPU of the sets, all at
#             once, and adds the N-GPU rate over N x the slowest of its GPUs
#             alone: GPUs of one machine differ by a few percent, and a
#             data-parallel iteration goes at the slowest one's pace; 0 skips
#   PRECISION tf32 (default), bf16 or fp16: Cortado's --precision, and the
#             peer's mode (tf32, or bf16cl: AMP with channels-last)
#   CORTADO_FLAGS extra flags of the multi-GPU cortado runs (e.g.
#             "--dp_workers=threads")
#   ROUNDS    how many times (default 1) each pair of runs (1 GPU, then N) is
#             repeated, one pair after the other; the table then holds the
#             medians (images/s, and the scaling of each pair) and every round
#             is listed below it: one 100-iteration run moves by a few percent
#             from one start to the next, on one GPU too
#   SAME_ALGOS 1 (default): every cortado run of one net and data mode runs
#             the cuDNN convolution algorithms the first one benchmarked
#             (CORTADO_CUDNN_ALGOS=$OUT/<net>_<data>.algos), so that a 1-GPU
#             run and the N-GPU run it is compared with run the same kernels:
#             near-tied algorithms otherwise swap between runs and move one
#             run's rate by a few percent; 0 lets every run benchmark its own
#   OUT       where logs go (default /tmp/cortado_scaling)
#
# Images/s of cortado come from its "Iteration N (X iter/s, ...)" lines:
# img/s = iter/s x batch x GPUs, averaged over the windows after the first.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=${1:-"$repo/build"}
bin="$build/cortado"
NETS=${NETS:-"alexnet googlenet resnet50"}
ITERS=${ITERS:-120}
DISPLAY_EVERY=20
DATA=${DATA:-dummy}
TORCH=${TORCH:-1}
TORCH_PY=${TORCH_PY:-"$repo/.bench/torch_from_prototxt.py"}
GPUS=${GPUS:-0,1}
ROUNDS=${ROUNDS:-1}
OUT=${OUT:-/tmp/cortado_scaling}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
mkdir -p "$OUT"
if (( ITERS < 3 * DISPLAY_EVERY )); then
  echo "ITERS=$ITERS: at least $((3 * DISPLAY_EVERY)) (the first display window is warm-up)" >&2
  exit 2
fi

[[ -x "$bin" ]] || cmake --build "$build" --target cortado -j"$(nproc)"

fixtures=${FIXTURES:-${CORTADO_FIXTURES:-}}
if [[ -z "$fixtures" ]]; then
  for d in "$repo/../shared/fixtures/caffe" "$repo/../../shared/fixtures/caffe" \
    "$repo/shared/fixtures/caffe" "$repo/.bench"; do
    [[ -f "$d/bvlc_alexnet_train_val.prototxt" ]] && { fixtures=$d; break; }
  done
fi

# net name -> prototxt, per-GPU batch, sample shape C,H,W (H,W = crop_size)
net_file() {
  case $1 in
    alexnet) echo "$fixtures/bvlc_alexnet_train_val.prototxt" ;;
    googlenet) echo "$fixtures/bvlc_googlenet_train_val.prototxt" ;;
    resnet50) echo "$repo/models/resnet50/train_val.prototxt" ;;
  esac
}
net_batch() { case $1 in alexnet) echo 256 ;; *) echo 128 ;; esac; }
net_shape() { case $1 in alexnet) echo 3,227,227 ;; *) echo 3,224,224 ;; esac; }

# prepare NAME BATCH [LMDB]: a copy of the net with every batch_size set to
# BATCH (the solver builds no test net, so only the TRAIN one matters) and,
# for LMDB, its sources pointed at the synthetic database and mean files
# replaced by mean values; prints the copy's path.
prepare() {
  local name=$1 batch=$2 lmdb=${3:-} src dst
  src=$(net_file "$name")
  dst="$OUT/${name}_b${batch}${lmdb:+_lmdb}.prototxt"
  [[ -f "$src" ]] || { : >"$dst"; echo "$dst"; return; }
  sed -E "s/batch_size: *[0-9]+/batch_size: $batch/" "$src" >"$dst"
  if [[ -n "$lmdb" ]]; then
    sed -i -E "s#source: *\"[^\"]*\"#source: \"$lmdb\"#; s#mean_file: *\"[^\"]*\"#mean_value: 104 mean_value: 117 mean_value: 123#" "$dst"
  fi
  echo "$dst"
}

write_solver() { # write_solver NET_FILE SOLVER_FILE
  cat >"$2" <<EOF
net: "$1"
base_lr: 0.01 lr_policy: "fixed" momentum: 0.9 weight_decay: 0.0005
max_iter: $ITERS display: $DISPLAY_EVERY average_loss: 1
snapshot: 0 snapshot_after_train: false solver_mode: GPU random_seed: 1
EOF
}

# mean iter/s over the display windows after the first, from a cortado log
iter_per_s() {
  awk -v d="$DISPLAY_EVERY" '
    /\] Iteration [0-9]+ \([0-9.e+-]+ iter\/s/ {
      match($0, /Iteration [0-9]+ \(/); it = substr($0, RSTART + 10, RLENGTH - 12) + 0
      match($0, /\([0-9.e+-]+ iter\/s/); v = substr($0, RSTART + 1, RLENGTH - 8) + 0
      if (it > d) { s += v; n++ }
    }
    END { if (n) printf "%.4f", s / n; else print "nan" }' "$1"
}

# cortado_run LABEL NET_FILE GPU_LIST [extra flags]: img/s (or "fail")
cortado_run() {
  local label=$1 netf=$2 gpus=$3; shift 3
  local solver="$OUT/$label.solver.prototxt" log="$OUT/$label.log"
  write_solver "$netf" "$solver"
  if ! "$bin" train --solver="$solver" --gpu="$gpus" --precision="${PRECISION:-tf32}" "$@" >"$log" 2>&1; then
    echo fail
    return
  fi
  local ngpu batch ips
  ngpu=$(awk -F, '{print NF}' <<<"$gpus")
  batch=$(grep -m1 -oE "batch_size: *[0-9]+" "$netf" | grep -oE "[0-9]+")
  ips=$(iter_per_s "$log")
  awk -v i="$ips" -v b="$batch" -v g="$ngpu" 'BEGIN { if (i == "nan") print "fail"; else printf "%.1f", i * b * g }'
}

# torch_run NET_FILE GPU_LIST BATCH SHAPE: global img/s from the peer's JSON (or "-")
# the peer's mode for PRECISION
torch_mode() { [[ ${PRECISION:-tf32} == tf32 ]] && echo tf32 || echo bf16cl; }

torch_run() {
  local netf=$1 gpus=$2 batch=$3 shape=$4 log nproc
  nproc=$(awk -F, '{print NF}' <<<"$gpus")
  log="$OUT/torch_$(basename "$netf" .prototxt)_$nproc.log"
  [[ "$TORCH" == 1 && -f "$TORCH_PY" ]] || { echo "-"; return; }
  if [[ $nproc -gt 1 ]]; then
    CUDA_VISIBLE_DEVICES=$gpus python3 -m torch.distributed.run --standalone --nproc_per_node="$nproc" \
      "$TORCH_PY" "$netf" --batch "$batch" --input "$shape" --mode "$(torch_mode)" >"$log" 2>&1
  else
    CUDA_VISIBLE_DEVICES=$gpus python3 "$TORCH_PY" "$netf" --batch "$batch" --input "$shape" \
      --mode "$(torch_mode)" >"$log" 2>&1
  fi
  grep -oE '"img_s": *[0-9.]+' "$log" | tail -n1 | grep -oE '[0-9.]+$' || echo "fail"
}

# median FORMAT NUMBERS...: printf FORMAT of the median (words that are not
# numbers, e.g. "fail", count as missing; "-" when none is left)
median() {
  local fmt=$1
  shift
  printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g | awk -v f="$fmt" '{ v[NR] = $1 }
    END { if (!NR) print "-"; else printf f, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3fx", b / a; else print "-" }'; }

lmdb=""
if [[ "$DATA" == lmdb || "$DATA" == both ]]; then
  lmdb="$OUT/synthetic_jpeg_lmdb"
  if [[ ! -d "$lmdb" ]]; then
    echo "making $lmdb (${SYNTH_NUM:-8000} JPEG 3x256x256, 1000 labels)..."
    "$bin" make_synthetic_db "$lmdb" --num="${SYNTH_NUM:-8000}" --shape=3,256,256 --labels=1000 --encode_type=jpg \
      >"$OUT/make_synthetic_db.log" 2>&1 || { echo "make_synthetic_db failed: see $OUT/make_synthetic_db.log"; lmdb=""; }
  fi
fi

read -r -a gpu_sets <<<"$GPUS"
first_gpu=${gpu_sets[0]%%,*}
EACH_GPU=${EACH_GPU:-1}
all_gpus=$(tr ', ' '\n\n' <<<"$GPUS" | awk 'NF && !seen[$1]++' | tr '\n' ' ')
rows=()
round_rows=()
alone_rows=()
timing_logs=()

# alone_runs LABEL NET_FILE FLAGS...: img/s of one training alone on each GPU
# of all_gpus, all at once, into $OUT/LABEL_alone_g<G>.val
alone_runs() {
  local label=$1 netf=$2 g
  shift 2
  for g in $all_gpus; do
    cortado_run "${label}_alone_g$g" "$netf" "$g" "$@" >"$OUT/${label}_alone_g$g.val" &
  done
  wait
}

# slowest_alone LABEL GPU_LIST: the lowest img/s of those GPUs alone (or "-")
slowest_alone() {
  local label=$1 g v min=""
  for g in ${2//,/ }; do
    v=$(cat "$OUT/${label}_alone_g$g.val" 2>/dev/null)
    [[ "$v" =~ ^[0-9.]+$ ]] || { echo "-"; return; }
    if [[ -z "$min" ]] || awk -v a="$v" -v b="$min" 'BEGIN { exit !(a < b) }'; then min=$v; fi
  done
  echo "${min:--}"
}
for name in $NETS; do
  batch=$(net_batch "$name")
  shape=$(net_shape "$name")
  netf=$(prepare "$name" "$batch")
  if [[ ! -s "$netf" ]]; then
    echo "== $name: $(net_file "$name") not found (set FIXTURES)"
    rows+=("$name|-|$batch|-|missing|missing|-|-|-|-|-")
    continue
  fi
  variants=()
  [[ "$DATA" == dummy || "$DATA" == both ]] && variants+=(dummy)
  [[ -n "$lmdb" ]] && variants+=(lmdb)
  for v in "${variants[@]}"; do
    if [[ $v == dummy ]]; then
      f=$netf
      flags=(--dummy_data --dummy_shape="$shape")
    else
      f=$(prepare "$name" "$batch" "$lmdb")
      flags=()
    fi
    echo "== $name ($v data), batch $batch per GPU"
    if [[ "${SAME_ALGOS:-1}" == 1 ]]; then
      export CORTADO_CUDNN_ALGOS="$OUT/${name}_${v}.algos"
      rm -f "$CORTADO_CUDNN_ALGOS"
    fi
    # ROUNDS rounds of (1 GPU, then each set): a pair's runs are minutes apart at most
    declare -A runs=()
    ones=""
    for ((k = 1; k <= ROUNDS; k++)); do
      sfx=""
      (( ROUNDS > 1 )) && sfx="_r$k"
      o=$(cortado_run "${name}_${v}_1gpu$sfx" "$f" "$first_gpu" "${flags[@]}")
      ones+=" $o"
      for set in "${gpu_sets[@]}"; do
        ngpus=$(awk -F, '{print NF}' <<<"$set")
        # shellcheck disable=SC2086
        t=$(cortado_run "${name}_${v}_${ngpus}gpu$sfx" "$f" "$set" --dp_timing=3 ${CORTADO_FLAGS:-} "${flags[@]}")
        runs[$set]+=" $t"
        runs[$set:scaling]+=" $(ratio "$o" "$t")"
      done
    done
    one=$(median %.1f $ones)
    if [[ "$EACH_GPU" == 1 ]]; then
      alone_runs "${name}_${v}" "$f" "${flags[@]}"
      line="$name|$v"
      for g in $all_gpus; do line+="|$g:$(cat "$OUT/${name}_${v}_alone_g$g.val")"; done
      alone_rows+=("$line")
    fi
    t1="-"
    [[ $v == dummy ]] && t1=$(torch_run "$netf" "$first_gpu" "$batch" "$shape")
    for set in "${gpu_sets[@]}"; do
      ngpus=$(awk -F, '{print NF}' <<<"$set")
      two=$(median %.1f ${runs[$set]})
      timing_logs+=("$name ($v, $ngpus GPUs)|$OUT/${name}_${v}_${ngpus}gpu$sfx.log")
      (( ROUNDS > 1 )) && round_rows+=("$name ($v, $ngpus GPUs): 1 GPU${ones}; $ngpus GPUs${runs[$set]}; scaling${runs[$set:scaling]}")
      t2="-"
      [[ $v == dummy ]] && t2=$(torch_run "$netf" "$set" "$batch" "$shape")
      slow="-"
      [[ "$EACH_GPU" == 1 ]] && slow=$(slowest_alone "${name}_${v}" "$set")
      vs_slow=$(ratio "$slow" "$two")
      sc=$(ratio "$one" "$two")
      (( ROUNDS > 1 )) && sc="$(median %.3f ${runs[$set:scaling]//x/})x"
      rows+=("$name|$v|$batch|$ngpus|$one|$two|$sc|$vs_slow|$t1|$t2|$(ratio "$t1" "$t2")")
    done
    unset runs
    unset CORTADO_CUDNN_ALGOS
  done
done

echo
echo "Training throughput, ${PRECISION:-tf32}, batch per GPU; images/s (scaling = N GPUs / 1 GPU on GPU $first_gpu;"
echo "vs slowest = N GPUs / (the slowest of those GPUs alone, all trained at once), in units of one GPU)"
printf "%-10s %-6s %6s %4s | %12s %12s %8s %10s | %12s %12s %8s\n" net data batch N "cortado 1" "cortado N" scaling \
  "vs slowest" "torch 1" "torch DDP N" scaling
printf -- "-%.0s" {1..118}; echo
for r in "${rows[@]}"; do
  IFS='|' read -r n v b g c1 c2 cs vs t1 t2 ts <<<"$r"
  printf "%-10s %-6s %6s %4s | %12s %12s %8s %10s | %12s %12s %8s\n" "$n" "$v" "$b" "$g" "$c1" "$c2" "$cs" "$vs" \
    "$t1" "$t2" "$ts"
done
if (( ${#round_rows[@]} > 0 )); then
  echo
  echo "Every round (images/s; scaling of each round's pair; the table holds the medians)"
  for r in "${round_rows[@]}"; do echo "$r"; done
fi
if (( ${#alone_rows[@]} > 0 )); then
  echo
  echo "Each GPU alone, all at once (images/s, GPU:rate)"
  for r in "${alone_rows[@]}"; do
    IFS='|' read -r -a f <<<"$r"
    echo "${f[0]} (${f[1]}): ${f[*]:2}"
  done
fi
echo
echo "Per-bucket all-reduce timing on rank 0 (ms after backward starts; the last timed iteration)"
for entry in "${timing_logs[@]}"; do
  label=${entry%%|*} log=${entry#*|}
  echo "-- $label"
  [[ -f "$log" ]] || { echo "   (no log)"; continue; }
  grep -oE "gradient averaging: .*" "$log" | head -n1 | sed 's/^/   /'
  last=$(grep -oE "dp timing, reduction [0-9]+" "$log" | tail -n1)
  if [[ -z "$last" ]]; then
    echo "   (no timing lines: the run failed or was too short; see $log)"
    continue
  fi
  awk -v key="$last" '
    index($0, key ":") { on = 1; sub(/.*\] /, ""); print "   " $0; next }
    on && /dp bucket / { sub(/.*\] /, ""); print "     " $0; next }
    on { on = 0 }' "$log"
done
echo
echo "logs: $OUT"
