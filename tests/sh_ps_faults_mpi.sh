#!/usr/bin/env bash
# Faults under parameter servers (docs/distributed.md, "Faults"), each a
# SIGKILL to one rank of `mpirun --enable-recovery` mid-run:
#   - a worker (ssp, staleness 1; async; bmuf): server 0 logs it gone and leaves
#     it out of the clocks; the others train on (their clock gap stays within
#     the bound); a SIGTERM to the root then snapshots from the servers and
#     ends every other rank with status 0; the snapshot resumes, and under
#     staleness 0 resumes to the all-reduce's bytes;
#   - a server (of two): every worker stops, each naming the dead server,
#     with status 1, and the whole job is gone within 60 s;
#   - the root: the servers stop, naming it, and so does every worker.
# mpirun --enable-recovery returns 0 whatever its ranks return (Open MPI
# 4.1), so every rank runs under a shell that logs its own exit status
# (the ranks that fail end with MPI_Abort, which may take their shell
# along before it says so: for those, no status 0 is what is checked).
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_ps_faults_mpi
rm -rf "$dir" && mkdir -p "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$(dirname "$0")/sigterm_job.sh"

export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=${CORTADO_SRC:-.}/tests/data/lsan_mpi.supp:print_suppressions=0"

# start NAME NP FLAGS: the job of $dir/NAME in the background (MPIRUN, LOG)
start() {
  local name=$1 np=$2 flags=$3
  mkdir -p "$dir/$name"
  write_term_job "$dir/$name" CPU
  LOG=$dir/$name/mpi.log
  # shellcheck disable=SC2086
  mpirun -np "$np" --oversubscribe --bind-to none --enable-recovery -x ASAN_OPTIONS -x LSAN_OPTIONS \
    bash -c '"$0" "$@"; echo "rank $OMPI_COMM_WORLD_RANK exit status $?"' \
    "$bin" train --solver="$dir/$name/solver.prototxt" $flags >"$LOG" 2>&1 &
  MPIRUN=$!
}

# rank_pid R: the cortado process of rank R
rank_pid() {
  local pid
  for pid in $(pgrep -f "^$bin train --solver=$dir/"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -x "OMPI_COMM_WORLD_RANK=$1" >/dev/null; then
      echo "$pid"
      return
    fi
  done
  fail "cannot find rank $1"
}

# ended_within NAME SECONDS: mpirun and every rank are gone in time
ended_within() {
  local name=$1 limit=$2 t0
  t0=$(date +%s)
  while kill -0 "$MPIRUN" 2>/dev/null || pgrep -f "^$bin train --solver=$dir/$name/" >/dev/null; do
    [ $(($(date +%s) - t0)) -lt "$limit" ] || fail "$name: the job still runs $limit s after the kill"
    sleep 0.1
  done
  wait "$MPIRUN" || true
  echo "     $name: every rank ended within $(($(date +%s) - t0)) s"
}

has() { grep -qE -- "$2" "$LOG" || fail "$1: no line matching '$2' in $LOG: $(tail -5 "$LOG")"; }
lacks() { ! grep -qE -- "$2" "$LOG" || fail "$1: a line matching '$2' in $LOG"; }

# The clock lines after worker W's death: W no longer pulls, and the gap
# stays within BOUND.
check_clocks_after() {
  local name=$1 w=$2 bound=$3
  awk -v w="$w" -v b="$bound" -v name="$name" '
    /is gone at clock/ { dead = 1; next }
    dead && /PS clock: worker/ {
      n++
      if ($0 ~ ("worker " w " at")) { print name ": worker " w " pulled after its death"; bad = 1 }
      match($0, /gap -?[0-9]+/); gap = substr($0, RSTART + 4, RLENGTH - 4) + 0
      if (b != "none" && gap > b + 0) { print name ": gap " gap " over " b; bad = 1 }
    }
    END { if (n < 20) { print name ": only " n " clocks after the death"; bad = 1 } exit bad }' "$LOG" ||
    fail "$name: clocks after the death"
}

# kill_worker NAME NP FLAGS WORKER BOUND: SIGKILL to WORKER, the others go on,
# then SIGTERM to the root
kill_worker() {
  local name=$1 np=$2 flags=$3 w=$4 bound=$5 iter
  start "$name" "$np" "$flags"
  wait_line "$LOG" "Iteration 30, lr" "$MPIRUN"
  kill -KILL "$(rank_pid "$w")"
  wait_line "$LOG" "PS: worker $w (rank $w) is gone at clock" "$MPIRUN"
  has "$name" "PS: worker $w \(rank $w\) is gone at clock [0-9]+ \(its connection closed\): left out of the clocks, 2 of 3 workers go on; its data shard \($w of 3\) is skipped"
  # the others train on: 100 more iterations on the root
  iter=$(grep -oE "Iteration [0-9]+, lr" "$LOG" | tail -1 | grep -oE "[0-9]+")
  wait_line "$LOG" "Iteration $(((iter / 10 + 10) * 10)), lr" "$MPIRUN"
  kill -TERM "$(rank_pid 0)"
  ended_within "$name" 60
  [ "$bound" = blocks ] || check_clocks_after "$name" "$w" "$bound"
  for r in $(seq 0 $((np - 1))); do
    [ "$r" = "$w" ] && continue
    has "$name" "^rank $r exit status 0$"
  done
  check_term_exit "$name" 0 "$LOG" "$dir/$name"
}

# A worker dies under ssp and under async: the others go on.
kill_worker ssp_worker 4 "--dp_mode=ssp --staleness=1" 2 1
kill_worker async_worker 4 "--dp_mode=async" 1 none
# BMUF goes on filtering the live workers' blocks.
kill_worker bmuf_worker 4 "--dp_mode=bmuf --bmuf_sync_period=4" 2 blocks

# The snapshot taken after the death resumes: 20 iterations at staleness 0
# through the servers give the all-reduce's bytes from the same snapshot.
snap=$(ls "$dir"/ssp_worker/run_iter_*.solverstate)
it=$(snapshot_iter "$dir/ssp_worker/mpi.log")
for mode in allreduce ssp; do
  mkdir -p "$dir/resume_$mode"
  sed -e "s#^max_iter: [0-9]*#max_iter: $((it + 20))#" -e "s#$dir/ssp_worker/run#$dir/resume_$mode/run#" \
    "$dir/ssp_worker/solver.prototxt" >"$dir/resume_$mode/solver.prototxt"
  np=3 flags=""
  [ $mode = ssp ] && np=4 flags="--dp_mode=ssp"
  # shellcheck disable=SC2086
  mpirun -np $np --oversubscribe --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS "$bin" train \
    --solver="$dir/resume_$mode/solver.prototxt" --snapshot="$snap" $flags >"$dir/resume_$mode/mpi.log" 2>&1 ||
    fail "resume ($mode): $(tail -3 "$dir/resume_$mode/mpi.log")"
done
cmp "$dir/resume_allreduce/run_iter_$((it + 20)).caffemodel" "$dir/resume_ssp/run_iter_$((it + 20)).caffemodel" ||
  fail "the snapshot after the death resumes differently through the servers"
echo "ok   the snapshot of iteration $it (after the death) resumes to the all-reduce's bytes at $((it + 20))"

# A server dies (one of two): every worker stops, naming it.
start server 5 "--dp_mode=ssp --staleness=1 --num_servers=2"
wait_line "$LOG" "Iteration 30, lr" "$MPIRUN"
kill -KILL "$(rank_pid 4)"
ended_within server 60
for r in 0 1 2; do
  has server "rank $r \(CPU\) failed at iteration [0-9]+: parameter server 1 \(rank 4\) is gone \(its connection closed\): the job stops"
  lacks server "^rank $r exit status 0$"
done
lacks server "Optimization Done"
echo "ok   a dead server stops every worker, which names it"

# The root dies: the servers stop, naming it, and with them the workers.
start root 4 "--dp_mode=async"
wait_line "$LOG" "Iteration 30, lr" "$MPIRUN"
kill -KILL "$(rank_pid 0)"
ended_within root 60
has root "rank 3 \(CPU\) failed: parameter server 0: worker 0 \(rank 0\) is gone \(its connection closed\): it tests, snapshots and decides for the job, which stops"
for r in 1 2 3; do lacks root "^rank $r exit status 0$"; done
lacks root "Optimization Done"
echo "ok   a dead root stops the servers and the workers"
echo PASS
