#!/usr/bin/env bash
# Pipeline stages over Gloo shards (processes started one by one, meeting
# through a file store, TCP over loopback; no MPI): one shard a stage, the
# blobs and their diffs crossing by Gloo's send and receive.  The weights
# are those of one process with iter_size M, to the byte: GPipe over 2
# shards, 1F1B over 3 with kept activations; a snapshot and a resume; 2
# replicas of 2 stages over 4 shards (D x P); `cortado time --pipeline`
# over shards; and the refusals of nets that differ where they cross and
# of a shard count that is not a multiple of the stage count.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_pipeline_gloo
rm -rf "$dir" && mkdir -p "$dir/store"
cd "$dir"
. "$(dirname "$0")/expect_mpi.sh"
small_job_db
small_net "" >net.prototxt
small_solver net.prototxt 'random_seed: 1
momentum: 0.9
weight_decay: 0.001
snapshot: 3
snapshot_prefix: "snap"' | sed 's/max_iter: 2/max_iter: 6/; s/snapshot_after_train: false/snapshot_after_train: true/' \
  >solver.prototxt

must_shards() {
  local name=$1
  start_shards "$@" || {
    echo "FAIL $name: a shard failed"
    for f in "$name"/shard_*.log; do echo "-- $f"; tail -5 "$f"; done
    exit 1
  }
}

# one process: iter_size M, the reference
one() {
  local name=$1 m=$2
  mkdir -p "$name" && ln -sfn ../db "$name/db" && cp net.prototxt "$name/"
  sed "s/snapshot: 3/snapshot: 3\niter_size: $m/" solver.prototxt >"$name/solver.prototxt"
  (cd "$name" && "$bin" train --solver=solver.prototxt >train.log 2>&1) ||
    { echo "FAIL $name"; tail -5 "$name/train.log"; exit 1; }
}

same() {
  cmp "$1/snap_iter_6.caffemodel" "$2/snap_iter_6.caffemodel" ||
    { echo "FAIL: $1's weights are not $2's"; exit 1; }
}

one one2 2
must_shards gpipe 2 --pipeline=relu --microbatches=2
grep -q "Pipeline: shard 0 of 2 (run 'gpipe' (file store .*/store)), Gloo listens on 127.0.0.1" gpipe/shard_0.log ||
  { echo "FAIL gpipe: no shard line"; grep -i pipeline gpipe/shard_0.log | head; exit 1; }
grep -q "Pipeline stage 1 of 2: layers 3-4 ('ip2' to 'loss')" gpipe/shard_1.log ||
  { echo "FAIL gpipe: no stage line on shard 1"; grep -i pipeline gpipe/shard_1.log | head; exit 1; }
same gpipe one2
diff <(grep -o "Iteration [0-9]*, loss = .*" one2/train.log) <(grep -o "Iteration [0-9]*, loss = .*" gpipe/shard_0.log) ||
  { echo "FAIL gpipe: the losses stage 0 displays are not one process's"; exit 1; }
echo "ok   2 stages over 2 Gloo shards, GPipe: one process's bytes and losses"

one one3 3
must_shards kept 3 --pipeline=ip1,relu --microbatches=3 --schedule=1f1b --recompute=false
grep -q "activations kept" kept/shard_0.log || { echo "FAIL kept: not kept"; exit 1; }
same kept one3
echo "ok   3 stages over 3 Gloo shards, 1F1B, kept activations: one process's bytes"

# resumed from stage 0's snapshot at 3: the same end
mkdir -p resumed && cp gpipe/snap_iter_3.* resumed/
must_shards resumed 2 --pipeline=relu --microbatches=2 --snapshot=snap_iter_3.solverstate
same resumed one2
echo "ok   resumed from iteration 3 over shards: the same bytes"

# D x P: 4 shards are 2 replicas of 2 stages (shard r * 2 + s holds stage s
# of replica r); each stage's gradients are averaged over its replicas in a
# Gloo group of their own.  The weights: 2 data-parallel shards' with
# iter_size 2, to the byte.
mkdir -p ref/store && cp net.prototxt ref/ && ln -sfn ../db ref/db
sed "s/snapshot: 3/snapshot: 3\niter_size: 2/" solver.prototxt >ref/solver.prototxt
(cd ref && start_shards dp 2) || { echo "FAIL dp"; tail -5 ref/dp/shard_*.log; exit 1; }
must_shards dxp 4 --pipeline=relu --microbatches=2
grep -q "Pipeline: 2 replicas of 2 stages (4 ranks)" dxp/shard_0.log ||
  { echo "FAIL dxp: no replicas line"; grep -i pipeline dxp/shard_0.log | head; exit 1; }
same dxp ref/dp
echo "ok   2 x 2 over 4 Gloo shards: 2 data-parallel shards' bytes"

# `cortado time --pipeline` over 2 shards: stage 0 reports both stages
mkdir -p timed/store && pids=()
for k in 0 1; do
  timeout 300 "$bin" time --model=net.prototxt --pipeline=relu --microbatches=2 --iterations=3 \
    --num_shards=2 --shard_id=$k --run_id=timed --file_store_path=timed/store --gloo_iface=lo \
    --rendezvous_timeout=60 >"timed/shard_$k.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL timed: a shard failed"; tail -n 3 timed/shard_*.log; exit 1; }; done
for want in "Pipeline stage 0: forward" "Pipeline stage 1: forward" "Average Forward-Backward"; do
  grep -q "$want" timed/shard_0.log || { echo "FAIL timed: no '$want'"; tail -5 timed/shard_0.log; exit 1; }
done
echo "ok   cortado time --pipeline over 2 Gloo shards: each stage's time"

# shards given nets that differ where they cross: both stages name the blob
# (before any receive is posted ahead, which would take what is not sent)
mkdir -p differ/store && pids=()
sed 's/num_output: 6/num_output: 7/' net.prototxt >differ/wide.prototxt
for k in 0 1; do
  net=net.prototxt
  [ $k = 1 ] && net=differ/wide.prototxt
  timeout 300 "$bin" time --model="$net" --pipeline=relu --microbatches=2 --iterations=2 --num_shards=2 \
    --shard_id=$k --run_id=differ --file_store_path=differ/store --gloo_iface=lo --rendezvous_timeout=60 \
    >"differ/shard_$k.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do if wait "$p"; then echo "FAIL differ: a shard ran"; exit 1; fi; done
grep -q "pipeline stage 0: blob 'h' leaves its stage as 96 bytes and arrives expected as 112: the processes were given nets that differ" differ/shard_0.log ||
  { echo "FAIL differ: stage 0's message"; tail -n 2 differ/shard_0.log; exit 1; }
grep -q "pipeline stage 1: blob 'h' leaves" differ/shard_1.log || { echo "FAIL differ: stage 1's message"; tail -n 2 differ/shard_1.log; exit 1; }
echo "ok   nets that differ where they cross: refused, the blob named"

# a shard count that is not a multiple of the stage count
if start_shards wrong 3 --pipeline=relu --microbatches=2; then echo "FAIL wrong: 3 shards trained 2 stages"; exit 1; fi
grep -q -- "--pipeline over shards: 2 stages need --num_shards=2 (one shard a stage) or a multiple of it (replicas of the stages), not 3" wrong/shard_0.log ||
  { echo "FAIL wrong: message"; tail -3 wrong/shard_0.log; exit 1; }
echo "ok   3 shards for 2 stages: refused"
echo "all passed"
