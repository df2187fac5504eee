#!/usr/bin/env bash
# Parameter servers with GPU workers (docs/distributed.md): under
# `mpirun -np W+K --gpu=...` the workers train on GPUs and the servers run on
# the host, every shard copied out of and into the GPU around its message.
# One GPU is enough: a worker on it and a server on the CPU, SSP at
# staleness 0, print the losses of one process on that GPU (the update runs
# on the server's CPU instead of the GPU: within 1e-4), and the run ends
# with the servers' snapshot, which a plain run resumes.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_gpu_ps_mpi
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
. "$(dirname "$0")/gpu_count.sh"
[ "$(ct_gpu_count)" -ge 1 ] || { echo "no GPU: skipped"; exit 77; }
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$(dirname "$0")/expect_mpi.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
. "$(dirname "$0")/gpu_ps_job.sh"
gpu_ps_job
gpu_ps_folder ps
(cd ps && timeout 300 mpirun -np 2 --oversubscribe --bind-to none -x ASAN_OPTIONS "$bin" train \
  --solver=solver.prototxt --gpu=0 --dp_mode=ssp --staleness=0 >../ps.log 2>&1) ||
  { echo "FAIL ps: $(tail -5 ps.log)"; exit 1; }
grep -q "1 GPU, servers on CPUs" ps.log || { echo "FAIL: no line saying where the ranks run"; grep dp.c ps.log | head; exit 1; }
same_losses ps.log "a GPU worker and a CPU server (ssp, S = 0)"
# two servers: the worker's two pushes staged as backward finalises each
# (copied out beside the compute stream), sent before the pull
gpu_ps_folder ps2
(cd ps2 && timeout 300 mpirun -np 3 --oversubscribe --bind-to none -x ASAN_OPTIONS "$bin" train \
  --solver=solver.prototxt --gpu=0 --dp_mode=ssp --staleness=0 --num_servers=2 >../ps2.log 2>&1) ||
  { echo "FAIL ps2: $(tail -5 ps2.log)"; exit 1; }
same_losses ps2.log "a GPU worker and two CPU servers (ssp, S = 0)"
resumes ps
echo PASS
