# Sourced by the SIGTERM tests (sh_sigterm*.sh, sh_gpu_sigterm.sh): a run to
# send SIGTERM to, and the checks of what it leaves.
#   write_term_job DIR MODE [EXTRA]   DIR/net.prototxt (kill_job.sh's net of dummy
#                         data) and DIR/solver.prototxt, trained practically
#                         for ever, snapshots under DIR/run (MODE: CPU or GPU;
#                         EXTRA: more solver lines)
#   wait_line LOG TEXT PID    waits (up to 120 s) for TEXT in LOG while PID runs
#   snapshot_iter LOG         the iteration of the one snapshot LOG reports
#   check_term_exit NAME RC LOG DIR   status 0, "Optimization stopped early.", one
#                         snapshot pair on disk and in the log
#   term_rank1_mpi DIR FLAGS NAME [NP [RANK]]   the CPU job under mpirun -np NP
#                         (2) with FLAGS, SIGTERM to rank RANK (1) alone, then
#                         check_term_exit
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

. "$(dirname "${BASH_SOURCE[0]}")/kill_job.sh"

write_term_job() {
  local dir=$1 mode=$2 extra=${3:-}
  write_kill_job "$dir" # its net; the solver is ours
  cat >"$dir/solver.prototxt" <<SOLVER
net: "$dir/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" momentum: 0.9
max_iter: 100000000 display: 10 random_seed: 3
snapshot_prefix: "$dir/run" solver_mode: $mode
$extra
SOLVER
}

wait_line() {
  local log=$1 text=$2 pid=$3
  for _ in $(seq 1 1200); do
    grep -qF -- "$text" "$log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || fail "the run ended before '$text' appeared in $log: $(tail -3 "$log")"
    sleep 0.1
  done
  fail "no '$text' in $log within 120 s"
}

snapshot_iter() {
  grep -oE "Snapshotting to binary proto file .*_iter_[0-9]+\.caffemodel" "$1" | grep -oE "[0-9]+\.caffemodel" |
    sed 's/\.caffemodel//'
}

check_term_exit() {
  local name=$1 rc=$2 log=$3 dir=$4
  [ "$rc" = 0 ] || fail "$name: exit status $rc after SIGTERM: $(tail -3 "$log")"
  grep -q "Optimization stopped early." "$log" || fail "$name: no 'Optimization stopped early.' in $log"
  local iters
  iters=$(snapshot_iter "$log")
  [ "$(echo "$iters" | wc -w)" = 1 ] || fail "$name: wanted one snapshot, the log reports: $iters"
  [ "$(ls "$dir"/run_iter_*.caffemodel | wc -l)" = 1 ] || fail "$name: $(ls "$dir")"
  [ -s "$dir/run_iter_$iters.caffemodel" ] && [ -s "$dir/run_iter_$iters.solverstate" ] ||
    fail "$name: no snapshot files of iteration $iters"
  echo "ok   $name: SIGTERM -> a snapshot at iteration $iters, then a clean stop (status 0)"
}

# mpirun -np 2 cortado train on DIR's CPU job with FLAGS, SIGTERM to rank 1
# alone once iteration 30 is logged, then check_term_exit NAME.
term_rank1_mpi() {
  local dir=$1 flags=$2 name=$3 np=${4:-2} rank=${5:-1}
  write_term_job "$dir" CPU
  # shellcheck disable=SC2086
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" \
    LSAN_OPTIONS="suppressions=${CORTADO_SRC:-.}/tests/data/lsan_mpi.supp:print_suppressions=0" \
    mpirun -np "$np" --oversubscribe --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS \
    "$bin" train --solver="$dir/solver.prototxt" $flags >"$dir/mpi.log" 2>&1 &
  local mpirun_pid=$! victim="" rc=0
  wait_line "$dir/mpi.log" "Iteration 30, lr" $mpirun_pid
  # The rank's process by its command line and environment (not by being
  # mpirun's child), tried for up to 5 s: looking among mpirun's children
  # once failed now and then in CI ("cannot find rank 1") and left the job
  # running.
  local job="^$bin train --solver=$dir/solver.prototxt"
  for _ in $(seq 1 50); do
    for pid in $(pgrep -f "$job"); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank"; then victim=$pid; fi
    done
    [ -n "$victim" ] && break
    sleep 0.1
  done
  if [ -z "$victim" ]; then
    kill -KILL $mpirun_pid 2>/dev/null || true
    pkill -KILL -f "$job" || true
    fail "cannot find rank $rank of mpirun's job: $(pgrep -af "$job" | head -3)"
  fi
  kill -TERM "$victim"
  wait $mpirun_pid || rc=$?
  check_term_exit "$name" $rc "$dir/mpi.log" "$dir"
}
