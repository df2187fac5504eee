#!/usr/bin/env bash
# `mpirun -np 2 cortado train --trace` on the CPU: rank 0 writes one file
# with both ranks (a process each), their clocks aligned (the ranks'
# all-reduces of one bucket overlap), each rank's all-reduces on its
# communication track inside its iterations (tests/trace_check.py).  Needs
# CORTADO_BIN, mpirun and python3 (ctest sets OMPI_ALLOW_RUN_AS_ROOT* for
# root).
set -euo pipefail
bin=${CORTADO_BIN:?CORTADO_BIN is not set}
here=$(cd "$(dirname "$0")" && pwd)
dir=${CORTADO_TMP:-/tmp}/sh_trace_mpi
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
. "$here/trace_job.sh"
write_trace_job
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=${CORTADO_SRC:-.}/tests/data/lsan_mpi.supp:print_suppressions=0"
timeout 300 mpirun --oversubscribe --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS -np 2 \
  "$bin" train --solver=solver.prototxt --trace=mpi.json --trace_iters=2:5 >mpi.log 2>&1 ||
  { tail -5 mpi.log; echo "FAIL: mpirun train --trace"; exit 1; }
grep -q "Trace of 2 ranks written to mpi.json" mpi.log || { echo "FAIL: no trace line"; exit 1; }
python3 "$here/trace_check.py" mpi.json 2 2 5 --reduce --test
