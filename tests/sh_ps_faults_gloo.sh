#!/usr/bin/env bash
# Faults under parameter servers over Gloo shards (processes started one by
# one, meeting through a file store; docs/distributed.md, "Faults"), each a
# SIGKILL to one shard mid-run:
#   - a worker (async, 3 workers and a server): the server logs it gone and
#     leaves it out; the others train on; a SIGTERM to the root then
#     snapshots and ends every other shard with status 0;
#   - a server (of two, ssp): every worker stops naming it, and so does the
#     other server, whose probe the liveness links cut short (a Gloo wait
#     otherwise lasts until --comm_timeout): every shard is gone within 60 s.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_ps_faults_gloo
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/sigterm_job.sh"

# start NAME SHARDS FLAGS...: every shard of $dir/NAME in the background
# (PIDS; logs NAME/shard_K.log); --comm_timeout stays at 300 s, so that a
# shard that waits for a dead peer's message cannot end in time.
start() {
  local name=$1 n=$2
  shift 2
  mkdir -p "$dir/$name/store"
  write_term_job "$dir/$name" CPU
  PIDS=()
  for k in $(seq 0 $((n - 1))); do
    "$bin" train --solver="$dir/$name/solver.prototxt" --num_shards="$n" --shard_id="$k" \
      --run_id="$name" --file_store_path="$dir/$name/store" --gloo_iface=lo --rendezvous_timeout=60 \
      "$@" >"$dir/$name/shard_$k.log" 2>&1 &
    PIDS+=($!)
  done
}

# ended_within NAME SECONDS: every shard is gone in time; STATUS[k] gets
# shard k's exit status
ended_within() {
  local name=$1 limit=$2 t0 live
  t0=$(date +%s)
  while :; do
    live=0
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && live=1; done
    [ $live = 0 ] && break
    [ $(($(date +%s) - t0)) -lt "$limit" ] || fail "$name: a shard still runs $limit s after the kill"
    sleep 0.1
  done
  STATUS=()
  for p in "${PIDS[@]}"; do
    local rc=0
    wait "$p" || rc=$?
    STATUS+=("$rc")
  done
  echo "     $name: every shard ended within $(($(date +%s) - t0)) s"
}

logs() { cat "$dir/$1"/shard_*.log; }
has() { grep -hqE -- "$2" "$dir/$1"/shard_*.log || fail "$1: no line matching '$2': $(logs "$1" | grep -E 'error|gone' | tail -5)"; }

# A worker dies under async: the server leaves it out, the others go on.
start worker 4 --dp_mode=async
wait_line "$dir/worker/shard_0.log" "Iteration 30, lr" "${PIDS[0]}"
kill -KILL "${PIDS[2]}"
wait_line "$dir/worker/shard_3.log" "PS: worker 2 (rank 2) is gone at clock" "${PIDS[3]}"
has worker "PS: worker 2 \(rank 2\) is gone at clock [0-9]+ \(its connection closed\): left out of the clocks, 2 of 3 workers go on; its data shard \(2 of 3\) is skipped"
iter=$(grep -oE "Iteration [0-9]+, lr" "$dir/worker/shard_0.log" | tail -1 | grep -oE "[0-9]+")
wait_line "$dir/worker/shard_0.log" "Iteration $(((iter / 10 + 10) * 10)), lr" "${PIDS[0]}"
kill -TERM "${PIDS[0]}"
ended_within worker 60
for k in 0 1 3; do
  [ "${STATUS[$k]}" = 0 ] || fail "worker: shard $k ended with status ${STATUS[$k]}: $(tail -3 "$dir/worker/shard_$k.log")"
done
check_term_exit "a dead worker over Gloo shards, then SIGTERM to the root" 0 "$dir/worker/shard_0.log" "$dir/worker"
echo "ok   a dead worker is left out over Gloo shards; the others train on and stop on SIGTERM"

# A server dies (one of two): the workers and the other server stop, naming
# the cause.
start server 4 --dp_mode=ssp --staleness=1 --num_servers=2
wait_line "$dir/server/shard_0.log" "Iteration 30, lr" "${PIDS[0]}"
kill -KILL "${PIDS[3]}"
ended_within server 60
for k in 0 1; do
  grep -qE "shard $k of 4: worker $k \(CPU\) failed at iteration [0-9]+: parameter server 1 \(rank 3\) is gone \(its connection closed\): the job stops" \
    "$dir/server/shard_$k.log" || fail "server: worker $k does not name the dead server: $(tail -3 "$dir/server/shard_$k.log")"
done
for k in 0 1 2; do
  [ "${STATUS[$k]}" != 0 ] || fail "server: shard $k ended with status 0"
done
grep -qE "shard 2 of 4: worker 2 \(CPU\) failed: parameter server 0: worker 0 \(rank 0\) is gone \(its connection closed\): it tests, snapshots and decides for the job, which stops" \
  "$dir/server/shard_2.log" || fail "server: the other server does not say why it stops: $(tail -3 "$dir/server/shard_2.log")"
! grep -hq "Optimization Done" "$dir/server"/shard_*.log || fail "server: a shard finished training"
echo "ok   a dead server stops every worker and the other server over Gloo shards, each naming the cause"
echo PASS
