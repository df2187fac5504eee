#!/usr/bin/env bash
# SIGTERM under data parallelism without MPI: two CPU shards meeting through
# a file store; SIGTERM reaches shard 1 alone (the one that does not write
# snapshots).  Both shards agree to stop after the same iteration, shard 0
# writes the snapshot, both end with status 0.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_sigterm_gloo
rm -rf "$dir" && mkdir -p "$dir/store"
. "$(dirname "$0")/sigterm_job.sh"
write_term_job "$dir" CPU
flags=(--num_shards=2 --run_id=sigterm --file_store_path="$dir/store" --gloo_iface=lo --rendezvous_timeout=60)
"$bin" train --solver="$dir/solver.prototxt" "${flags[@]}" --shard_id=0 >"$dir/shard0.log" 2>&1 &
p0=$!
"$bin" train --solver="$dir/solver.prototxt" "${flags[@]}" --shard_id=1 >"$dir/shard1.log" 2>&1 &
p1=$!
wait_line "$dir/shard0.log" "Iteration 30, lr" $p0
kill -TERM $p1
rc0=0 && wait $p0 || rc0=$?
rc1=0 && wait $p1 || rc1=$?
[ $rc1 = 0 ] || fail "shard 1: status $rc1: $(tail -3 "$dir/shard1.log")"
check_term_exit "2 shards, SIGTERM to shard 1" $rc0 "$dir/shard0.log" "$dir"
