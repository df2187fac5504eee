# Sourced by the shell tests of flags that stop `cortado train` under mpirun
# (sh_pipeline_mpi.sh, sh_ps_mpi.sh).  Needs $bin, and ASAN_OPTIONS and
# LSAN_OPTIONS exported.  Sets fail=1 on a mismatch.
#   expect DESCRIPTION RANKS SOLVER FLAGS MESSAGE
# runs `cortado train --solver=SOLVER FLAGS` under `mpirun -np RANKS` (alone
# when RANKS is 0); an empty MESSAGE wants it to train (status 0), any
# other wants a failure with the line "cortado: error: MESSAGE" and no
# "Iteration 1" before it.
fail=0
expect() {
  local what=$1 np=$2 s=$3 flags=$4 want=$5 rc=0 out
  if [ "$np" = 0 ]; then
    # shellcheck disable=SC2086
    out=$("$bin" train --solver="$s" $flags 2>&1) || rc=$?
  else
    # shellcheck disable=SC2086
    out=$(timeout 300 mpirun --oversubscribe --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS \
      -np "$np" "$bin" train --solver="$s" $flags 2>&1) || rc=$?
  fi
  if [ -z "$want" ]; then
    [ $rc = 0 ] && echo "ok   $what trains" || { echo "FAIL $what: status $rc: $(tail -3 <<<"$out")"; fail=1; }
    return
  fi
  if [ $rc != 0 ] && grep -qxF "cortado: error: $want" <<<"$out" && ! grep -q "Iteration 1" <<<"$out"; then
    echo "ok   $what: $want"
  else
    echo "FAIL $what: status $rc, wanted 'cortado: error: $want' in:"; tail -5 <<<"$out"; fail=1
  fi
}
