#!/usr/bin/env bash
# The straggler benchmark of issue 29 (docs/distributed.md): W workers (4)
# and K parameter servers (1) train BVLC's LeNet on Fashion-MNIST (Debian's
# dataset-fashion-mnist) under mpirun, confined to CORES cores, in every
# data-parallel mode: the all-reduce, SSP at staleness 1, 4 and 16, async
# and BMUF; each once as it is and once with worker 1 slowed to half speed
# from outside (bench/straggle.sh: SIGSTOP/SIGCONT, no code path knows).
# Prints a Markdown table (images/s with and without the straggler and the
# share kept; the time to reach TARGET test accuracy; the final accuracy)
# and plots the root's loss and accuracy against seconds with `cortado
# plot` into PLOT (two images: without and with the straggler).
#   CORES=16 bench/ps_stragglers.sh [BIN]
# On GPUs (issue 29's "Must show" 4): GPUS=0,1[,2,3] trains one worker a GPU
# (WORKERS defaults to the GPU count; the servers stay on the host), and the
# straggler is worker 1's GPU shared with a competing process started on it
# before the run and ended after it (COMPETITOR, a command run with
# CUDA_VISIBLE_DEVICES set to that GPU; default: `cortado time` of
# models/resnet50 in bf16 for as long as it takes).
#   GPUS=0,1 bench/ps_stragglers.sh build/cortado
# Settings (environment): TRANSPORT (mpi: mpirun ranks; gloo: Gloo shards
# started one by one, a file store, TCP over loopback), CORES (default:
# every core), WORKERS (4; with GPUS, the GPU count),
# SERVERS (1), ITERS (1000), TEST_EVERY (100; 1000 test images each time),
# TARGET (0.8), PERIOD (0.2 s: the stop/continue cycle), MODES, OUT (the
# logs), PLOT (docs/images/ps_stragglers).
#
# images/s counts what every worker trains while all of them are at it:
# from the clock lines of server 0 (one per iteration of every worker), the
# iterations all workers ran between the first clock past 10% of ITERS and
# the first worker's last; for the all-reduce (workers in step), the root's
# iteration rate times W (BMUF too: its servers log no clocks).  Runs of every worker to ITERS would otherwise
# end at the straggler's pace in every mode.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$here/build/cortado}") # absolute: rank_pid matches command lines
cores=${CORES:-$(nproc)}
gpus=${GPUS:-}
IFS=, read -r -a gpu_ids <<<"$gpus"
workers=${WORKERS:-$([ -n "$gpus" ] && echo "${#gpu_ids[@]}" || echo 4)}
competitor=${COMPETITOR:-"$bin time --model=$here/models/resnet50/train_val.prototxt --gpu=0 --dummy_data --precision=bf16 --iterations=1000000"}
servers=${SERVERS:-1}
iters=${ITERS:-1000}
test_every=${TEST_EVERY:-100}
target=${TARGET:-0.8}
period=${PERIOD:-0.2}
modes=${MODES:-"allreduce ssp:1 ssp:4 ssp:16 async bmuf:10"}
transport=${TRANSPORT:-mpi}
dir=${OUT:-/tmp/ps_stragglers}
plot=${PLOT:-$here/docs/images/ps_stragglers}
batch=64
mkdir -p "$dir" "$(dirname "$plot")"
export CORTADO_BIN=$bin CORTADO_SRC=$here
. "$here/tests/lenet_precision.sh"
. "$here/bench/ps_modes.sh"
lenet_data "$dir"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
threads=$((cores / workers))
[ "$threads" -ge 1 ] || threads=1
last_core=$((cores - 1))

sed -e "s#examples/fashion_mnist/lenet_train_test.prototxt#$dir/net.prototxt#" \
    -e "s#^snapshot_prefix.*#snapshot_prefix: \"$dir/lenet\"#" -e "s#^snapshot:.*#snapshot: 0#" \
    -e "s#^test_interval.*#test_interval: $test_every#" -e "s#^test_iter.*#test_iter: 10#" \
    -e "s#^max_iter.*#max_iter: $iters#" -e "s#^display.*#display: 20#" \
    "$here/examples/fashion_mnist/lenet_solver.prototxt" >"$dir/solver.prototxt"
printf 'random_seed: 1\nsnapshot_after_train: false\n' >>"$dir/solver.prototxt"


rank_pid() { # MPIRUN_PID RANK
  local pid env
  for pid in $(pgrep -f "^$bin train --solver=$dir/solver.prototxt"); do
    # read whole, not piped into grep -q: its early exit would fail the pipe
    # (pipefail) and, through set -e, the script
    env=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || continue
    if grep -qx "OMPI_COMM_WORLD_RANK=$2" <<<"$env"; then
      echo "$pid"
      return
    fi
  done
  return 0
}

# compete START|STOP: the competing process on worker 1's GPU (GPU runs)
competing=""
compete() {
  if [ "$1" = start ]; then
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=${gpu_ids[1]} setsid $competitor >"$dir/competitor.log" 2>&1 &
    competing=$!
    sleep "${COMPETE_WARMUP:-15}" # its set-up (cuDNN's algorithm search) done: it computes
    kill -0 "$competing" 2>/dev/null || { echo "the competitor ended: $(tail -2 "$dir/competitor.log")" >&2; competing=""; }
  elif [ -n "$competing" ]; then
    kill -TERM -- "-$competing" 2>/dev/null || kill "$competing" 2>/dev/null || true
    wait "$competing" 2>/dev/null || true
    competing=""
  fi
}

# start_shards RANKS FLAGS NAME LOG: every Gloo shard in the background
# (PIDS), appending to one log as mpirun gathers its ranks' output; on GPUs
# worker shard k takes its GPU (--gpu=ID) and the servers the host
start_shards() {
  local np=$1 rest=$2 name=$3 log=$4 store=$dir/store_$3 k dev
  rm -rf "$store" && mkdir -p "$store" && : >"$log"
  PIDS=()
  for k in $(seq 0 $((np - 1))); do
    dev=()
    if [ -n "$gpus" ]; then
      dev=(--cpu)
      [ "$k" -lt "$workers" ] && dev=(--gpu="${gpu_ids[$((k % ${#gpu_ids[@]}))]}")
    fi
    # shellcheck disable=SC2086
    OMP_NUM_THREADS=$threads taskset -c "0-$last_core" "$bin" train --solver="$dir/solver.prototxt" $rest \
      "${dev[@]}" --num_shards="$np" --shard_id="$k" --run_id="$name" --file_store_path="$store" \
      --gloo_iface=lo --rendezvous_timeout=120 >>"$log" 2>&1 &
    PIDS+=($!)
  done
}

# run MODE SLOW: trains, writes $dir/NAME.log (NAME: mode, + "_straggler");
# the straggler is worker 1: on the CPU stopped and continued from outside,
# on GPUs its GPU shared with a competing process
run() {
  local mode=$1 slow=$2 np rest name log mpirun_pid victim="" helper="" dev=() rc=0 k
  name=$(tr ':' '_' <<<"$mode")
  [ "$slow" = 1 ] && name=${name}_straggler
  log=$dir/$name.log
  read -r np rest <<<"$(ps_mode_flags "$mode" "$workers" "$servers")"
  [ "$slow" = 1 ] && [ -n "$gpus" ] && compete start
  if [ "$transport" = gloo ]; then
    start_shards "$np" "$rest" "$name" "$log"
    if [ "$slow" = 1 ] && [ -z "$gpus" ]; then "$here/bench/straggle.sh" "${PIDS[1]}" "$period" 0.5 & helper=$!; fi
    for k in "${PIDS[@]}"; do wait "$k" || rc=$?; done
    [ $rc = 0 ] || echo "$name failed: $(tail -3 "$log")" >&2
  else
    # on GPUs a worker takes the GPU of the list at its local rank
    [ -n "$gpus" ] && dev=(--gpu="$gpus")
    # shellcheck disable=SC2086
    taskset -c "0-$last_core" mpirun --oversubscribe --bind-to none -np "$np" -x OMP_NUM_THREADS="$threads" \
      "$bin" train --solver="$dir/solver.prototxt" $rest "${dev[@]}" >"$log" 2>&1 &
    mpirun_pid=$!
    if [ "$slow" = 1 ] && [ -z "$gpus" ]; then
      for _ in $(seq 1 300); do
        victim=$(rank_pid "$mpirun_pid" 1)
        [ -n "$victim" ] && break
        sleep 0.1
      done
      [ -n "$victim" ] && { "$here/bench/straggle.sh" "$victim" "$period" 0.5 & helper=$!; }
    fi
    wait "$mpirun_pid" || { echo "$name failed: $(tail -3 "$log")" >&2; }
  fi
  if [ -n "$helper" ]; then kill "$helper" 2>/dev/null || true; fi
  compete stop
  wait 2>/dev/null || true
}

# glog time of day (HH:MM:SS.micro in field 2) in seconds
secs='function t(s) { split(s, hms, ":"); return hms[1] * 3600 + hms[2] * 60 + hms[3] }'

images_per_s() { # LOG MODE
  if [ "$2" = allreduce ] || [ "${2%%:*}" = bmuf ]; then # no clock lines: the root's rate x W
    awk -v w="$workers" -v b="$batch" -v from=$((iters / 10)) "$secs"'
      /solver.c.*\] Iteration [0-9]+ \(/ { split($0, x, "] Iteration "); split(x[2], y, " "); it = y[1] + 0
        if (it >= from && !t0) { t0 = t($2); i0 = it } if (t0) { t1 = t($2); i1 = it } }
      END { if (t1 > t0) printf "%.0f", (i1 - i0) * w * b / (t1 - t0); else printf "n/a" }' "$1"
  else
    awk -v b="$batch" -v from=$((iters / 10)) -v last="$iters" "$secs"'
      /PS clock: worker/ { c = $0; sub(/.* at clock /, "", c); c = c + 0; now = t($2)
        if (!t0 && c >= from) t0 = now
        if (t0 && !t1) n++
        if (c >= last && !t1) t1 = now }
      END { if (t1 > t0) printf "%.0f", n * b / (t1 - t0); else printf "n/a" }' "$1"
  fi
}

time_to() { # LOG: seconds from the first iteration to a test accuracy >= target, and the last accuracy
  awk -v target="$target" "$secs"'
    /\] Iteration 0[ ,]/ && !t0 { t0 = t($2) }
    /Test net output #0: accuracy = / { a = $NF + 0; at = t($2) }
    # a diverged net (a test loss of -log(FLT_MIN) = 87.34, or nan) scores an
    # accuracy of 1 in Caffe'"'"'s Accuracy layer: its accuracy is taken as 0
    /Test net output #1: loss = / { l = $11; if (l == "nan" || l + 0 >= 87) a = 0; last = a
      if (a >= target && !hit) hit = at - t0 }
    END { printf "%s %s", hit ? sprintf("%.1f s", hit) : "never", (last == 0 && l != "" && (l == "nan" || l + 0 >= 87)) ? "diverged" : last }' "$1" | sed 's/ s / s_/'
}

field() { # TEXT N: the Nth field of time_to's answer ("12.3 s_0.81" or "never 0.7")
  tr '_' ' ' <<<"$1" | awk -v n="$2" '{ if ($2 == "s") { t = $1 " s"; a = $3 } else { t = $1; a = $2 } print (n == 1 ? t : a) }' 
}

if [ -n "$gpus" ]; then
  echo "GPUs $gpus ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)), $workers workers x batch $batch, $servers server(s) on the host, $iters iterations, over $transport;"
  echo "straggler: worker 1's GPU shared with a competing process ($competitor); target accuracy $target"
else
  echo "CPU: $cores cores ($(nproc) here), $workers workers x batch $batch, $servers server(s), $iters iterations, over $transport;"
  echo "straggler: worker 1 at half speed (SIGSTOP/SIGCONT, period $period s); target accuracy $target"
fi
echo
echo "| mode | images/s | images/s, straggler | kept | time to $target | with straggler | final acc | with straggler |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for mode in $modes; do
  run "$mode" 0
  run "$mode" 1
  name=$(tr ':' '_' <<<"$mode")
  a=$(images_per_s "$dir/$name.log" "$mode")
  b=$(images_per_s "$dir/${name}_straggler.log" "$mode")
  kept=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0 && b > 0) printf "%.0f%%", 100 * b / a; else print "n/a" }')
  x=$(time_to "$dir/$name.log")
  y=$(time_to "$dir/${name}_straggler.log")
  echo "| $mode | $a | $b | $kept | $(field "$x" 1) | $(field "$y" 1) | $(field "$x" 2) | $(field "$y" 2) |"
done
logs=() slow=()
for mode in $modes; do
  name=$(tr ':' '_' <<<"$mode")
  logs+=("$dir/$name.log")
  slow+=("$dir/${name}_straggler.log")
done
"$bin" plot "${logs[@]}" --out="$plot.png" --x=seconds --y=loss,accuracy >/dev/null 2>&1 ||
  echo "cortado plot failed for $plot.png" >&2
"$bin" plot "${slow[@]}" --out="${plot}_straggler.png" --x=seconds --y=loss,accuracy >/dev/null 2>&1 ||
  echo "cortado plot failed for ${plot}_straggler.png" >&2
echo
echo "plots: $plot.png, ${plot}_straggler.png"
