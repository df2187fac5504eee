#!/usr/bin/env bash
# Shards that would not train alike are stopped at the rendezvous, every
# shard with the same message naming what differs: another net (before, Gloo
# ran mismatched collectives and could end the process from its network
# thread with status 134), another solver (before, training went on
# silently), another --bucket_mb.  Shards whose only difference is where
# their copy of the data lives train.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_shards_disagree_gloo
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
. "$here/shards_disagree_job.sh"
write_disagree_job
fail=0
run=0
# two_shards SOLVER0 SOLVER1 [EXTRA FLAGS OF SHARD 1]: rc0, rc1, out0, out1
two_shards() {
  run=$((run + 1))
  mkdir -p store$run
  local f=(--num_shards=2 --run_id=r$run --file_store_path=store$run --gloo_iface=lo --rendezvous_timeout=60)
  "$bin" train --solver="$1" "${f[@]}" --shard_id=0 >s0_$run.log 2>&1 &
  local p0=$!
  "$bin" train --solver="$2" "${f[@]}" --shard_id=1 "${@:3}" >s1_$run.log 2>&1 &
  local p1=$!
  rc0=0 && wait $p0 || rc0=$?
  rc1=0 && wait $p1 || rc1=$?
  out0=$(tail -1 s0_$run.log)
  out1=$(tail -1 s1_$run.log)
}
expect_refused() { # description, solver1, message (after the rendezvous prefix), shard 1's extra flags
  local what=$1 s1=$2 want=$3
  two_shards solver_a.prototxt "$s1" "${@:4}"
  local prefix="cortado: error: rendezvous run 'r$run' (file store $dir/store$run): "
  if [ $rc0 = 1 ] && [ $rc1 = 1 ] && [ "$out0" = "$prefix$want" ] && [ "$out1" = "$prefix$want" ]; then
    echo "ok   $what: both shards stop with: $want"
  else
    echo "FAIL $what: status $rc0/$rc1"; echo "  shard 0: $out0"; echo "  shard 1: $out1"; echo "  wanted: $prefix$want"
    fail=1
  fi
}
expect_refused "another net" solver_b.prototxt \
  "shard 0 and shard 1 do not train alike: net layer 1 'ip' (InnerProduct) has other parameters on shard 1 than on shard 0"
expect_refused "another solver" solver_c.prototxt \
  "shard 0 and shard 1 do not train alike: solver base_lr is 0.01 on shard 0 but 0.02 on shard 1"
expect_refused "another --bucket_mb" solver_a.prototxt \
  "shard 0 and shard 1 do not train alike: flag --bucket_mb is 25 on shard 0 but 1 on shard 1" --bucket_mb=1
two_shards solver_a.prototxt solver_d.prototxt
if [ $rc0 = 0 ] && [ $rc1 = 0 ]; then
  echo "ok   the same net over another copy of the data trains"
else
  echo "FAIL the same net over another copy of the data: $rc0/$rc1: $out0 / $out1"; fail=1
fi
exit $fail
