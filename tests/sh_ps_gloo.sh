#!/usr/bin/env bash
# Parameter servers over Gloo shards (processes started one by one, a file
# store, TCP over loopback): the last --num_servers shards serve.  SSP with
# S = 0 gives the all-reduce's .caffemodel bytes and printed losses (2
# workers: all-reduce over 2 shards against 2 workers + 1 server); async,
# BMUF, and SSP over 2 servers train.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_ps_gloo
rm -rf "$dir" && mkdir -p "$dir/store"
cd "$dir"
. "$(dirname "$0")/expect_mpi.sh"
small_job_db
small_net "" >net.prototxt
small_solver net.prototxt 'random_seed: 1
snapshot_prefix: "snap"' | sed 's/max_iter: 2/max_iter: 6/; s/snapshot_after_train: false/snapshot_after_train: true/' \
  >solver.prototxt

# run NAME SHARDS FLAGS...: every shard of a run in its own folder NAME
run() {
  local name=$1 rc=0
  start_shards "$@" || rc=$?
  if [ $rc != 0 ]; then
    echo "FAIL $name: a shard ended with status $rc"
    for f in "$name"/shard_*.log; do echo "-- $f"; tail -5 "$f"; done
    exit 1
  fi
  [ -s "$name/snap_iter_6.caffemodel" ] || { echo "FAIL $name: no snapshot"; exit 1; }
  echo "ok   $name trains"
}

run allreduce 2
run ssp0 3 --dp_mode=ssp --staleness=0
grep -q "parameter servers: ssp (staleness 0), 1 server: rank 2-2" ssp0/shard_0.log ||
  { echo "FAIL ssp0: no parameter-server line"; grep dp.c ssp0/shard_0.log; exit 1; }
cmp allreduce/snap_iter_6.caffemodel ssp0/snap_iter_6.caffemodel ||
  { echo "FAIL: SSP at S = 0 over Gloo did not give the all-reduce's weights"; exit 1; }
diff <(grep -o "Iteration [0-9]*, loss = .*" allreduce/shard_0.log) \
  <(grep -o "Iteration [0-9]*, loss = .*" ssp0/shard_0.log) ||
  { echo "FAIL: SSP at S = 0 over Gloo printed other losses"; exit 1; }
echo "ok   ssp S = 0 over Gloo: the all-reduce's bytes and losses"

# the first server logs every worker's clock (a shard's worker thread is
# quiet unless it is rank 0 or server 0), the gap within the bound
run ssp1 3 --dp_mode=ssp --staleness=1
n=$(cat ssp1/shard_*.log | grep -c "PS clock: worker" || true)
[ "$n" -ge 12 ] || { echo "FAIL ssp1: $n clock lines from the server shard (want one per pull)"; exit 1; }
cat ssp1/shard_*.log | grep -oE "gap -?[0-9]+ \(bound 1\)" | awk '{ if ($2 > 1) { print "gap " $2; bad = 1 } } END { exit bad }' ||
  { echo "FAIL ssp1: a clock gap past the bound"; exit 1; }
echo "ok   ssp S = 1 over Gloo: $n clock lines, every gap within 1"

run async 3 --dp_mode=async
run bmuf 3 --dp_mode=bmuf --bmuf_sync_period=2
run ssp1_2servers 4 --dp_mode=ssp --staleness=1 --num_servers=2
grep -q "2 servers: ranks 2-3" ssp1_2servers/shard_0.log ||
  { echo "FAIL ssp1_2servers: no parameter-server line"; grep dp.c ssp1_2servers/shard_0.log; exit 1; }
echo "all passed"
