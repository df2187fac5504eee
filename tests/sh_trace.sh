#!/usr/bin/env bash
# `cortado train --trace` and `cortado time --trace` on the CPU, one
# process: the file is valid trace event JSON whose layer events sit inside
# their iterations (tests/trace_check.py), --trace_iters picks the
# iterations, and bad uses of the flags fail before anything runs.  Needs
# CORTADO_BIN (set by ctest) and python3.
set -euo pipefail
bin=${CORTADO_BIN:?CORTADO_BIN is not set}
here=$(cd "$(dirname "$0")" && pwd)
dir=${CORTADO_TMP:-/tmp}/sh_trace
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
. "$here/trace_job.sh"
write_trace_job
check() { python3 "$here/trace_check.py" "$@" || exit 1; }

# iterations 3 to 6: the test before iteration 4 and the snapshot after 5
"$bin" train --solver=solver.prototxt --trace=train.json --trace_iters=3:6 >train.log 2>&1 ||
  { tail -5 train.log; echo "FAIL: train --trace"; exit 1; }
grep -q "Trace of 1 rank written to train.json" train.log || { echo "FAIL: no trace line"; exit 1; }
check train.json 1 3 6 --test --snapshot
# every iteration when --trace_iters is left out
"$bin" train --solver=solver.prototxt --trace=all.json --log_level=1 || { echo "FAIL: train --trace"; exit 1; }
check all.json 1 0 7 --test --snapshot
# no trace without --trace
"$bin" train --solver=solver.prototxt --log_level=1
[ "$(ls ./*.json)" = "$(printf './all.json\n./train.json')" ] || { echo "FAIL: a file written without --trace"; exit 1; }

# cortado time: the timed iterations as the runtime runs them
"$bin" time --model=net.prototxt --iterations=3 --trace=time.json --log_level=1 ||
  { echo "FAIL: time --trace"; exit 1; }
check time.json 1 0 2

expect_usage() { # wanted message, args...
  local want=$1 rc=0 out
  shift
  out=$("$bin" "$@" 2>&1) || rc=$?
  if [ $rc = 2 ] && grep -qxF "cortado: error: $want" <<<"$out"; then
    echo "ok   $*"
  else
    echo "FAIL $*: status $rc, wanted 'cortado: error: $want' in:"; tail -3 <<<"$out"; exit 1
  fi
}
expect_usage "--trace_iters=5:2: expected FIRST:LAST, two iteration numbers with 0 <= FIRST <= LAST (e.g. 100:110)" \
  train --solver=solver.prototxt --trace=x.json --trace_iters=5:2
expect_usage "--trace_iters=7: expected FIRST:LAST, two iteration numbers with 0 <= FIRST <= LAST (e.g. 100:110)" \
  train --solver=solver.prototxt --trace=x.json --trace_iters=7
expect_usage "--trace_iters needs --trace=FILE" time --model=net.prototxt --trace_iters=1:2
expect_usage "--trace=no/such/x.json: cannot write into the folder no/such/: No such file or directory" \
  train --solver=solver.prototxt --trace=no/such/x.json
[ ! -e x.json ] || { echo "FAIL: a trace written after a usage error"; exit 1; }
echo "ok"
