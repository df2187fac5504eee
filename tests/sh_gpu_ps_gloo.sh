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
. "$(dirname "$0")/gpu_ps_job.sh"
gpu_ps_job
gpu_ps_folder ps
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
same_losses shard_0.log "a GPU worker shard and a CPU server shard (ssp, S = 0, Gloo)"
resumes ps
if [ "$(ct_gpu_count)" -ge 2 ]; then
  out=$(cd ps && timeout 60 "$bin" train --solver=solver.prototxt --gpu=0,1 --dp_mode=ssp --num_shards=2 \
    --shard_id=0 --run_id=two --file_store_path=../store --gloo_iface=lo --rendezvous_timeout=5 2>&1) && {
    echo "FAIL: a worker shard with two GPUs trained"; exit 1; }
  grep -q "a worker shard trains on one GPU, but --gpu lists 2" <<<"$out" ||
    { echo "FAIL: two GPUs per shard: $(tail -2 <<<"$out")"; exit 1; }
  echo "ok   two GPUs for one worker shard: refused"
fi
echo PASS
