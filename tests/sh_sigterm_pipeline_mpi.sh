#!/usr/bin/env bash
# SIGTERM to a pipeline: `mpirun -np 2 cortado train --pipeline=relu` on the
# CPU, SIGTERM to rank 1 alone (the loss stage; a scheduler's signal to one
# of the job's processes): both stages stop after the same iteration, stage 0
# writes the snapshot (gathered from both), the job ends with status 0.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_sigterm_pipeline_mpi
rm -rf "$dir" && mkdir -p "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$(dirname "$0")/sigterm_job.sh"
write_term_job "$dir" CPU
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" \
  LSAN_OPTIONS="suppressions=${CORTADO_SRC:-.}/tests/data/lsan_mpi.supp:print_suppressions=0" \
  mpirun -np 2 --oversubscribe --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS \
  "$bin" train --solver="$dir/solver.prototxt" --pipeline=relu --microbatches=2 --comm_timeout=30 >"$dir/mpi.log" 2>&1 &
mpirun_pid=$!
wait_line "$dir/mpi.log" "Iteration 30, lr" $mpirun_pid
victim=""
for pid in $(pgrep -P $mpirun_pid); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim=$pid; fi
done
[ -n "$victim" ] || fail "cannot find rank 1 among the children of mpirun"
kill -TERM "$victim"
rc=0 && wait $mpirun_pid || rc=$?
check_term_exit "mpirun -np 2 --pipeline, SIGTERM to stage 1" $rc "$dir/mpi.log" "$dir"
