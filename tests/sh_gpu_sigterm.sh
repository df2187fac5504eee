#!/usr/bin/env bash
# SIGTERM to `cortado train --gpu=0,1` (one worker process per GPU, started
# by the launcher): the launcher passes it on, the workers agree to stop
# after the same iteration, rank 0 writes the snapshot, all end with status
# 0.  Then SIGTERM to the launcher's whole process group (as Slurm sends it):
# the same.  Needs two GPUs (skipped otherwise).
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_gpu_sigterm
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/sigterm_job.sh"
. "$(dirname "$0")/gpu_count.sh"
n=$(ct_gpu_count)
[ "${n:-0}" -ge 2 ] || { echo "fewer than 2 GPUs: skipped"; exit 77; }
for target in launcher group; do
  rm -rf "$dir/$target" && mkdir -p "$dir/$target"
  write_term_job "$dir/$target" GPU
  setsid "$bin" train --solver="$dir/$target/solver.prototxt" --gpu=0,1 >"$dir/$target.log" 2>&1 &
  pid=$!
  wait_line "$dir/$target.log" "Iteration 30, lr" $pid
  if [ $target = launcher ]; then kill -TERM $pid; else kill -TERM -- -$pid; fi
  rc=0 && wait $pid || rc=$?
  check_term_exit "--gpu=0,1, SIGTERM to the $target" $rc "$dir/$target.log" "$dir/$target"
done
