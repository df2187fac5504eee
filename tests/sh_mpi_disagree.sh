#!/usr/bin/env bash
# MPI ranks that would not train alike (mpirun's MPMD form gives each rank
# its own command line) stop before training, every rank with the same
# message naming what differs: another net, another solver.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_mpi_disagree
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$here/shards_disagree_job.sh"
write_disagree_job
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=${CORTADO_SRC:-.}/tests/data/lsan_mpi.supp:print_suppressions=0"
fail=0
expect() { # description, solver of rank 1, wanted message (empty: trains)
  local what=$1 s1=$2 want=$3 rc=0 out
  out=$(timeout 300 mpirun --oversubscribe --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS \
    -np 1 "$bin" train --solver=solver_a.prototxt : -np 1 "$bin" train --solver="$s1" 2>&1) || rc=$?
  if [ -z "$want" ]; then
    [ $rc = 0 ] && echo "ok   $what trains" || { echo "FAIL $what: status $rc: $(tail -2 <<<"$out")"; fail=1; }
    return
  fi
  local n
  n=$(grep -cxF "cortado: error: $want" <<<"$out" || true)
  if [ $rc != 0 ] && [ "$n" -ge 1 ] && ! grep -q "Iteration 2" <<<"$out"; then
    echo "ok   $what: stopped before training ($n rank(s) said so before the job ended): $want"
  else
    echo "FAIL $what: status $rc, wanted 'cortado: error: $want' in:"; tail -5 <<<"$out"; fail=1
  fi
}
expect "another net" solver_b.prototxt \
  "rank 0 and rank 1 do not train alike: net layer 1 'ip' (InnerProduct) has other parameters on rank 1 than on rank 0"
expect "another solver" solver_c.prototxt \
  "rank 0 and rank 1 do not train alike: solver base_lr is 0.01 on rank 0 but 0.02 on rank 1"
expect "the same net over another copy of the data" solver_d.prototxt ""
exit $fail
