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

# started NAME EXTRA_SOLVER_LINE FLAGS...: a run in $dir/NAME, its log in
# $dir/NAME.log, going (30 iterations done); sets pid
started() {
  local name=$1 extra=$2
  shift 2
  mkdir -p "$dir/$name"
  write_term_job "$dir/$name" CPU "$extra"
  "$bin" train --solver="$dir/$name/solver.prototxt" "$@" >"$dir/$name.log" 2>&1 &
  pid=$!
  wait_line "$dir/$name.log" "Iteration 30, lr" $pid
}
# no_snapshots NAME: fails when the run of NAME wrote one
no_snapshots() { [ -z "$(ls "$dir/$1" | grep _iter_ || true)" ] || fail "$1 snapshotted: $(ls "$dir/$1")"; }

# the default
started default ""
kill -TERM $pid
rc=0 && wait $pid || rc=$?
check_term_exit "one process" $rc "$dir/default.log" "$dir/default"
k=$(snapshot_iter "$dir/default.log")
sed -i "s/max_iter: 100000000/max_iter: $((k + 3))/" "$dir/default/solver.prototxt"
"$bin" train --solver="$dir/default/solver.prototxt" --snapshot="$dir/default/run_iter_$k.solverstate" \
  >"$dir/resume.log" 2>&1 || fail "resuming from the SIGTERM snapshot: $(tail -3 "$dir/resume.log")"
grep -q "Optimization Done." "$dir/resume.log" || fail "the resumed run did not finish: $(tail -3 "$dir/resume.log")"
echo "ok   the SIGTERM snapshot resumes to iteration $((k + 3))"

# stop: no snapshot (snapshot_after_train off), status 0
started stop "snapshot_after_train: false" --sigterm_effect=stop
kill -TERM $pid
rc=0 && wait $pid || rc=$?
[ $rc = 0 ] || fail "--sigterm_effect=stop: status $rc"
grep -q "Optimization stopped early." "$dir/stop.log" || fail "--sigterm_effect=stop did not stop early"
no_snapshots stop
echo "ok   --sigterm_effect=stop: a clean stop, no snapshot"

# none: SIGTERM changes nothing; training goes on until SIGINT stops it
started none "snapshot_after_train: false" --sigterm_effect=none
kill -TERM $pid
last=$(grep -oE "Iteration [0-9]+, lr" "$dir/none.log" | tail -1 | grep -oE "[0-9]+")
wait_line "$dir/none.log" "Iteration $((last + 20)), lr" $pid
kill -INT $pid
rc=0 && wait $pid || rc=$?
[ $rc = 0 ] || fail "--sigterm_effect=none: status $rc after SIGINT"
no_snapshots none
echo "ok   --sigterm_effect=none: training went on past SIGTERM"
