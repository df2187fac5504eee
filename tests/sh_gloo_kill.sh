#!/usr/bin/env bash
# Kill one shard of a run without MPI: two `cortado train` CPU shards meet
# through a file store and average gradients through Gloo; SIGKILL shard 1
# mid-training: shard 0 must exit within 60 s, failing, with a message that
# names the collective, its rank and the cause (the connection closed).
# Then the same with shard 1 stopped (SIGSTOP: alive but hung), which only
# the Gloo timeout (--comm_timeout=5) can detect.
# Needs CORTADO_BIN (set by ctest).
set -euo pipefail

BIN=${CORTADO_BIN:?CORTADO_BIN is not set}
TMP=${CORTADO_TMP:-/tmp}/sh_gloo_kill
rm -rf "$TMP"
mkdir -p "$TMP"

. "$(dirname "$0")/kill_job.sh"
write_kill_job "$TMP"

S0="" S1=""
cleanup() {
  for p in $S0 $S1; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  [ -n "${LOG:-}" ] && tail -n 20 "$LOG" >&2
  exit 1
}

# run_case NAME SIGNAL PATTERN: starts both shards, sends SIGNAL to shard 1
# once training runs, checks that shard 0 fails within 60 s with output
# matching PATTERN (extended regex).
run_case() {
  local name=$1 sig=$2 pattern=$3
  local store=$TMP/$name.store
  mkdir -p "$store"
  LOG=$TMP/$name.shard0.log
  local flags=(--solver="$TMP/solver.prototxt" --num_shards=2 --run_id="$name" --file_store_path="$store"
    --gloo_iface=lo --comm_timeout=5 --rendezvous_timeout=60)
  "$BIN" train "${flags[@]}" --shard_id=0 >"$LOG" 2>&1 &
  S0=$!
  "$BIN" train "${flags[@]}" --shard_id=1 >"$TMP/$name.shard1.log" 2>&1 &
  S1=$!

  for _ in $(seq 1 600); do
    grep -q "Iteration 400 " "$LOG" && break
    kill -0 "$S0" 2>/dev/null || fail "$name: shard 0 ended before training got going"
    sleep 0.1
  done
  grep -q "Iteration 400 " "$LOG" || fail "$name: no training progress within 60 s"

  local start end rc
  start=$(date +%s.%N)
  kill -s "$sig" "$S1"
  for _ in $(seq 1 600); do
    kill -0 "$S0" 2>/dev/null || break
    sleep 0.1
  done
  end=$(date +%s.%N)
  kill -0 "$S0" 2>/dev/null && fail "$name: shard 0 still running 60 s after shard 1 got SIG$sig"
  set +e
  wait "$S0"
  rc=$?
  set -e
  kill -9 "$S1" 2>/dev/null || true
  wait "$S1" 2>/dev/null || true
  S0="" S1=""
  echo "$name: shard 0 ended $(echo "$end - $start" | bc)s after SIG$sig to shard 1 (exit status $rc)"
  [ "$rc" -ne 0 ] || fail "$name: shard 0 exited with status 0"
  grep -Eq "$pattern" "$LOG" || fail "$name: the output does not match '$pattern'"
  grep -E "$pattern" "$LOG" | head -n 2
}

# A dead shard: its connections close and shard 0 fails at once.
run_case killed KILL "cortado: error: shard 0 of 2: worker 0 \(CPU\) failed at iteration [0-9]+: gloo allreduce( \(host\))? on rank 0: .*(Connection reset by peer|Connection closed by peer|Socket closed)"
# A hung shard (stopped): Gloo's timeout gives up after --comm_timeout.
run_case stopped STOP "cortado: error: shard 0 of 2: worker 0 \(CPU\) failed at iteration [0-9]+: gloo allreduce( \(host\))? on rank 0: not finished after 5 s \(another shard died"
echo "PASS"
