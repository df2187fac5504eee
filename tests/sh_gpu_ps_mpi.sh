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
small_job_db
small_net "" >net.prototxt
small_solver net.prototxt 'momentum: 0.9
weight_decay: 0.0005
random_seed: 7
snapshot_prefix: "snap"' | sed 's/max_iter: 2/max_iter: 40/; s/snapshot_after_train: false/snapshot_after_train: true/; s/solver_mode: CPU/solver_mode: GPU/' \
  >solver.prototxt

# "iteration loss" per display line (Caffe's: Iteration N (rate), loss = X)
losses() { grep -oE "Iteration [0-9]+ \(.*\), loss = [-0-9.e+]+" "$1" | awk '{print $2, $NF}'; }

"$bin" train --solver=solver.prototxt --gpu=0 >plain.log 2>&1 || { echo "FAIL plain: $(tail -3 plain.log)"; exit 1; }
mkdir -p ps && cp net.prototxt solver.prototxt ps/ && ln -sfn ../db ps/db
(cd ps && timeout 300 mpirun -np 2 --oversubscribe --bind-to none -x ASAN_OPTIONS "$bin" train \
  --solver=solver.prototxt --gpu=0 --dp_mode=ssp --staleness=0 >../ps.log 2>&1) ||
  { echo "FAIL ps: $(tail -5 ps.log)"; exit 1; }
grep -q "1 GPU, servers on CPUs" ps.log || { echo "FAIL: no line saying where the ranks run"; grep dp.c ps.log | head; exit 1; }
[ "$(losses plain.log | wc -l)" -ge 40 ] || { echo "FAIL: the plain run printed $(losses plain.log | wc -l) losses"; exit 1; }
paste <(losses plain.log) <(losses ps.log) | awk '
  { n++; if ($1 != $3) { print "iteration " $1 " against " $3; bad = 1; exit }
    d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
    if (d > 1e-4 * (m > 1e-3 ? m : 1e-3)) { print "iteration " $1 ": loss " $4 " through the server, " $2 " alone"; bad = 1 } }
  END { if (n < 40) { print "only " n " losses to compare"; bad = 1 } exit bad }' ||
  { echo "FAIL: SSP at staleness 0 with a GPU worker does not print one GPU's losses"; exit 1; }
echo "ok   a GPU worker and a CPU server (ssp, S = 0): one GPU's losses, 40 iterations"
# two servers: the worker's two pushes staged as backward finalises each
# (copied out beside the compute stream), sent before the pull
mkdir -p ps2 && cp net.prototxt solver.prototxt ps2/ && ln -sfn ../db ps2/db
(cd ps2 && timeout 300 mpirun -np 3 --oversubscribe --bind-to none -x ASAN_OPTIONS "$bin" train \
  --solver=solver.prototxt --gpu=0 --dp_mode=ssp --staleness=0 --num_servers=2 >../ps2.log 2>&1) ||
  { echo "FAIL ps2: $(tail -5 ps2.log)"; exit 1; }
paste <(losses plain.log) <(losses ps2.log) | awk '
  { n++; d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
    if ($1 != $3 || d > 1e-4 * (m > 1e-3 ? m : 1e-3)) { print "iteration " $1 ": " $4 " against " $2; bad = 1 } }
  END { if (n < 40) { print "only " n " losses"; bad = 1 } exit bad }' ||
  { echo "FAIL: two servers with a GPU worker do not print one GPU's losses"; exit 1; }
echo "ok   a GPU worker and two CPU servers (ssp, S = 0): one GPU's losses"
[ -s ps/snap_iter_40.caffemodel ] || { echo "FAIL: no snapshot from the servers"; ls ps; exit 1; }
sed 's/max_iter: 40/max_iter: 44/' solver.prototxt >resume.prototxt
"$bin" train --solver=resume.prototxt --gpu=0 --snapshot=ps/snap_iter_40.solverstate >resume.log 2>&1 ||
  { echo "FAIL resume: $(tail -3 resume.log)"; exit 1; }
echo "ok   the servers' snapshot resumes on one GPU"
echo PASS
