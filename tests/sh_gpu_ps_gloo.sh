#!/usr/bin/env bash
# Parameter servers with a GPU worker over Gloo shards (docs/distributed.md):
# shards started one by one, `--gpu=0 --dp_mode=ssp`; the worker shard
# trains on the GPU, the server shard on the host, every shard copied out
# of and into the GPU around its message.  One GPU is enough: at staleness
# 0 the worker prints the losses of one process on that GPU (the update
# runs on the server's CPU instead: within 1e-4), and the servers'
# snapshot resumes on the GPU.  A worker shard given two GPUs is refused.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_gpu_ps_gloo
rm -rf "$dir" && mkdir -p "$dir/store"
cd "$dir"
. "$(dirname "$0")/gpu_count.sh"
[ "$(ct_gpu_count)" -ge 1 ] || { echo "no GPU: skipped"; exit 77; }
. "$(dirname "$0")/expect_mpi.sh"
small_job_db
small_net "" >net.prototxt
small_solver net.prototxt 'momentum: 0.9
weight_decay: 0.0005
random_seed: 7
snapshot_prefix: "snap"' | sed 's/max_iter: 2/max_iter: 40/; s/snapshot_after_train: false/snapshot_after_train: true/; s/solver_mode: CPU/solver_mode: GPU/' \
  >solver.prototxt

losses() { grep -oE "Iteration [0-9]+ \(.*\), loss = [-0-9.e+]+" "$1" | awk '{print $2, $NF}'; }

"$bin" train --solver=solver.prototxt --gpu=0 >plain.log 2>&1 || { echo "FAIL plain: $(tail -3 plain.log)"; exit 1; }
mkdir -p ps && cp net.prototxt solver.prototxt ps/ && ln -sfn ../db ps/db
pids=()
for k in 0 1; do
  (cd ps && exec timeout 300 "$bin" train --solver=solver.prototxt --gpu=0 --dp_mode=ssp --staleness=0 \
    --num_shards=2 --shard_id=$k --run_id=gpu_ps --file_store_path=../store --gloo_iface=lo \
    --rendezvous_timeout=60 >"../shard_$k.log" 2>&1) &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
[ $rc = 0 ] || { echo "FAIL: a shard ended with status $rc"; tail -5 shard_0.log shard_1.log; exit 1; }
grep -q "1 GPU, servers on CPUs" shard_0.log || { echo "FAIL: no line saying where the shards run"; grep dp.c shard_0.log | head; exit 1; }
grep -q "over TCP, from host memory" shard_0.log || { echo "FAIL: no transport line"; grep dp.c shard_0.log | head; exit 1; }
paste <(losses plain.log) <(losses shard_0.log) | awk '
  { n++; if ($1 != $3) { print "iteration " $1 " against " $3; bad = 1; exit }
    d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
    if (d > 1e-4 * (m > 1e-3 ? m : 1e-3)) { print "iteration " $1 ": loss " $4 " through the server, " $2 " alone"; bad = 1 } }
  END { if (n < 40) { print "only " n " losses to compare"; bad = 1 } exit bad }' ||
  { echo "FAIL: SSP at staleness 0 with a GPU worker shard does not print one GPU's losses"; exit 1; }
echo "ok   a GPU worker shard and a CPU server shard (ssp, S = 0, Gloo): one GPU's losses, 40 iterations"
[ -s ps/snap_iter_40.caffemodel ] || { echo "FAIL: no snapshot from the servers"; ls ps; exit 1; }
sed 's/max_iter: 40/max_iter: 44/' solver.prototxt >resume.prototxt
"$bin" train --solver=resume.prototxt --gpu=0 --snapshot=ps/snap_iter_40.solverstate >resume.log 2>&1 ||
  { echo "FAIL resume: $(tail -3 resume.log)"; exit 1; }
echo "ok   the servers' snapshot resumes on one GPU"
if [ "$(ct_gpu_count)" -ge 2 ]; then
  out=$(cd ps && timeout 60 "$bin" train --solver=solver.prototxt --gpu=0,1 --dp_mode=ssp --num_shards=2 \
    --shard_id=0 --run_id=two --file_store_path=../store --gloo_iface=lo --rendezvous_timeout=5 2>&1) && {
    echo "FAIL: a worker shard with two GPUs trained"; exit 1; }
  grep -q "a worker shard trains on one GPU, but --gpu lists 2" <<<"$out" ||
    { echo "FAIL: two GPUs per shard: $(tail -2 <<<"$out")"; exit 1; }
  echo "ok   two GPUs for one worker shard: refused"
fi
echo PASS
