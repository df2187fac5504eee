#!/usr/bin/env bash
# SIGTERM (what cluster schedulers send before they kill) stops a training
# run with a snapshot by default (--sigterm_effect=snapshot_stop): one
# snapshot of the iteration it stopped at, status 0, and the snapshot
# resumes.  --sigterm_effect=stop stops without one (snapshot_after_train
# off), =none keeps training.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_sigterm
rm -rf "$dir" && mkdir -p "$dir"
. "$(dirname "$0")/sigterm_job.sh"

# the default
write_term_job "$dir" CPU
"$bin" train --solver="$dir/solver.prototxt" >"$dir/default.log" 2>&1 &
pid=$!
wait_line "$dir/default.log" "Iteration 30, lr" $pid
kill -TERM $pid
rc=0 && wait $pid || rc=$?
check_term_exit "one process" $rc "$dir/default.log" "$dir"
k=$(snapshot_iter "$dir/default.log")
sed -i "s/max_iter: 100000000/max_iter: $((k + 3))/" "$dir/solver.prototxt"
"$bin" train --solver="$dir/solver.prototxt" --snapshot="$dir/run_iter_$k.solverstate" >"$dir/resume.log" 2>&1 ||
  fail "resuming from the SIGTERM snapshot: $(tail -3 "$dir/resume.log")"
grep -q "Iteration $((k + 3)), loss = " "$dir/resume.log" || grep -q "Optimization Done." "$dir/resume.log" ||
  fail "the resumed run did not finish: $(tail -3 "$dir/resume.log")"
echo "ok   the SIGTERM snapshot resumes to iteration $((k + 3))"

# stop: no snapshot (snapshot_after_train off), status 0
rm -rf "$dir/stop" && mkdir -p "$dir/stop"
write_term_job "$dir/stop" CPU "snapshot_after_train: false"
"$bin" train --solver="$dir/stop/solver.prototxt" --sigterm_effect=stop >"$dir/stop.log" 2>&1 &
pid=$!
wait_line "$dir/stop.log" "Iteration 30, lr" $pid
kill -TERM $pid
rc=0 && wait $pid || rc=$?
[ $rc = 0 ] || fail "--sigterm_effect=stop: status $rc"
grep -q "Optimization stopped early." "$dir/stop.log" || fail "--sigterm_effect=stop did not stop early"
[ -z "$(ls "$dir/stop" | grep _iter_ || true)" ] || fail "--sigterm_effect=stop wrote $(ls "$dir/stop")"
echo "ok   --sigterm_effect=stop: a clean stop, no snapshot"

# none: SIGTERM changes nothing; training goes on until SIGINT stops it
rm -rf "$dir/none" && mkdir -p "$dir/none"
write_term_job "$dir/none" CPU "snapshot_after_train: false"
"$bin" train --solver="$dir/none/solver.prototxt" --sigterm_effect=none >"$dir/none.log" 2>&1 &
pid=$!
wait_line "$dir/none.log" "Iteration 30, lr" $pid
kill -TERM $pid
last=$(grep -oE "Iteration [0-9]+, lr" "$dir/none.log" | tail -1 | grep -oE "[0-9]+")
wait_line "$dir/none.log" "Iteration $((last + 20)), lr" $pid
kill -INT $pid
rc=0 && wait $pid || rc=$?
[ $rc = 0 ] || fail "--sigterm_effect=none: status $rc after SIGINT"
[ -z "$(ls "$dir/none" | grep _iter_ || true)" ] || fail "--sigterm_effect=none snapshotted: $(ls "$dir/none")"
echo "ok   --sigterm_effect=none: training went on past SIGTERM"
