#!/usr/bin/env bash
# Pipeline stages on GPUs (issue 30, "Must show" 2 and 3): one model's
# pipelined iterations (`mpirun -np P cortado time --pipeline=CUTS --gpu=GPUS`,
# forward and backward of M micro-batches, no update) beside the same
# model on one GPU, under GPipe and 1F1B.  Prints a markdown table: ms per
# iteration, images/s, each stage's bubble and its GPU memory peak.
#
#   NET=FILE CUTS=A[,B...] [GPUS=0,1] [M=4] [BATCH=N] [PRECISION=bf16]
#   [ITERS=10] [SCHEDULES="gpipe 1f1b"] bench/pipeline_gpus.sh BUILD_DIR [OUT_DIR]
#
# P is one more than the cut count; rank r takes the GPU of GPUS at its local
# rank (ranks beyond the list share its GPUs: with one GPU the stages share
# it and time-slice, so only the boundary's cost and the memory are
# meaningful there).  BATCH rewrites the data layers' batch_size (a batch
# that does not fit one GPU: the single-GPU run then reports what it ran out
# of, and the stages show what each GPU holds).  The net runs with
# --dummy_data.  Needs mpirun (OMPI_ALLOW_RUN_AS_ROOT=1
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 as root).
set -euo pipefail
build=${1:?usage: NET=... CUTS=... bench/pipeline_gpus.sh BUILD_DIR [OUT_DIR]}
out=${2:-$(mktemp -d)}
net=${NET:?NET=prototxt}
cuts=${CUTS:?CUTS=layer[,layer...]}
gpus=${GPUS:-0}
m=${M:-4}
prec=${PRECISION:-bf16}
iters=${ITERS:-10}
schedules=${SCHEDULES:-gpipe 1f1b}
bin="$build/cortado"
mkdir -p "$out"
p=$(($(tr -cd ',' <<<"$cuts" | wc -c) + 2)) # the stage count: one more than the cuts
model="$out/net.prototxt"
if [ -n "${BATCH:-}" ]; then
  sed -E "s/batch_size: *[0-9]+/batch_size: $BATCH/" "$net" >"$model"
else
  cp "$net" "$model"
fi
batch=$(grep -oE "batch_size: *[0-9]+" "$model" | head -1 | grep -oE "[0-9]+")

field() { { grep -oE "$2" "$1" || true; } | head -1 | { grep -oE "[0-9.]+" || true; } | head -1; }

echo "| run | GPUs | micro-batches | ms/iter | img/s | stage: bubble, GPU peak MB |"
echo "| --- | --- | --- | --- | --- | --- |"
rc=0
"$bin" time --model="$model" --gpu="${gpus%%,*}" --dummy_data --iterations="$iters" \
  --precision="$prec" >"$out/one.txt" 2>&1 || rc=$?
if [ $rc = 0 ]; then
  ms=$(field "$out/one.txt" "Average Forward-Backward: [0-9.]+")
  peak=$(field "$out/one.txt" "Peak GPU memory: [0-9.]+")
  echo "| one GPU, batch $batch | 1 | 1 | $ms | $(awk -v b="$batch" -v t="$ms" 'BEGIN { printf "%.0f", b * 1000 / t }') | ${peak:+$peak MB} |"
else
  echo "| one GPU, batch $batch | 1 | 1 | failed: $(grep -m1 -oE "error: .{0,120}" "$out/one.txt" || tail -1 "$out/one.txt") | | |"
fi
for s in $schedules; do
  log="$out/pipe_$s.txt"
  rc=0
  timeout 600 mpirun -np "$p" --oversubscribe --bind-to none "$bin" time --model="$model" --gpu="$gpus" \
    --dummy_data --pipeline="$cuts" --microbatches="$m" --schedule="$s" --iterations="$iters" \
    --precision="$prec" >"$log" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    echo "| $s, $p stages | $gpus | $m | failed: $(grep -m1 -oE "error: .{0,120}" "$log" || tail -1 "$log") | | |"
    continue
  fi
  ms=$(field "$log" "Average Forward-Backward: [0-9.]+")
  stages=$(grep -oE "Pipeline stage [0-9]+: .*" "$log" | awk '{
    s = $3; sub(":", "", s)
    match($0, /bubble [0-9.]+%/); bub = substr($0, RSTART + 7, RLENGTH - 7)
    peak = "-"; if (match($0, /GPU memory [0-9]+ bytes, peak [0-9]+/)) {
      t = substr($0, RSTART, RLENGTH); sub(/.*peak /, "", t); peak = sprintf("%.0f MB", t / 1048576) }
    printf "%s%s: %s, %s", (NR > 1 ? "; " : ""), s, bub, peak }')
  echo "| $s, $p stages | $gpus | $m | $ms | $(awk -v b="$batch" -v k="$m" -v t="$ms" 'BEGIN { printf "%.0f", b * k * 1000 / t }') | $stages |"
done
