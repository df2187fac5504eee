#!/usr/bin/env bash
# The `cortado` command line as a user meets it: help, exit statuses, error
# messages with suggestions, the global flags, device_query.
# Needs CORTADO_BIN (set by ctest); scratch files go under CORTADO_TMP.
set -euo pipefail

BIN=${CORTADO_BIN:?CORTADO_BIN is not set}
TMP=${CORTADO_TMP:-/tmp}/sh_cli_basic
rm -rf "$TMP"
mkdir -p "$TMP"
failures=0

# run ARGS...: runs cortado, leaves the exit status in $rc, stdout in $out,
# stderr in $err.
run() {
  set +e
  out=$("$BIN" "$@" 2>"$TMP/stderr")
  rc=$?
  set -e
  err=$(cat "$TMP/stderr")
}

fail() {
  echo "FAIL: $*" >&2
  echo "  stdout: ${out:-}" | head -n 20 >&2
  echo "  stderr: ${err:-}" | head -n 20 >&2
  failures=$((failures + 1))
}

expect_rc() { # expect_rc WANT DESCRIPTION
  [ "$rc" -eq "$1" ] || fail "$2: exit status $rc, expected $1"
}
expect_out() { # expect_out TEXT DESCRIPTION
  grep -qF -- "$1" <<<"$out" || fail "$2: stdout lacks '$1'"
}
expect_err() { # expect_err TEXT DESCRIPTION
  grep -qF -- "$1" <<<"$err" || fail "$2: stderr lacks '$1'"
}
expect_no_err() { # expect_no_err TEXT DESCRIPTION
  if grep -qF -- "$1" <<<"$err"; then fail "$2: stderr has '$1'"; fi
}

commands=(train test time device_query model_info upgrade_net_proto_text
          upgrade_solver_proto_text help)

# --- help
run --help
expect_rc 0 "cortado --help"
for c in "${commands[@]}"; do expect_out "  $c " "cortado --help lists $c"; done

run
expect_rc 2 "cortado with no command"
expect_err "train " "cortado with no command lists the commands"
expect_err "cortado: error: no command given" "cortado with no command"

run help
expect_rc 0 "cortado help"
expect_out "upgrade_solver_proto_text" "cortado help"

for form in "help train" "train --help" "train -help"; do
  # shellcheck disable=SC2086
  run $form
  expect_rc 0 "cortado $form"
  expect_out "usage: cortado train --solver=FILE" "cortado $form"
  expect_out "--solver=FILE" "cortado $form"
  expect_out "--sigint_effect=stop|snapshot|snapshot_stop|none (string, default \"stop\")" "cortado $form"
  expect_out "--sighup_effect=stop|snapshot|snapshot_stop|none (string, default \"snapshot\")" "cortado $form"
  expect_out "--sigterm_effect=stop|snapshot|snapshot_stop|none (string, default \"snapshot_stop\")" "cortado $form"
  expect_out "--log_level=INT" "cortado $form shows the global flags"
done

# Every command's --help parses its own table (a bad default would abort).
for c in "${commands[@]}"; do
  run "$c" --help
  expect_rc 0 "cortado $c --help"
  expect_out "usage: cortado $c" "cortado $c --help"
done
run help test
expect_out "--iterations=INT         (int, default 50)" "cortado help test"
run help time
expect_out "--dummy_data             (bool, default false)" "cortado help time"
expect_out "--phase=TRAIN|TEST" "cortado help time"

# --- usage errors: exit 2 and a suggestion
run trian
expect_rc 2 "unknown command"
expect_err "cortado: error: unknown command 'trian' (did you mean 'train'?)" "unknown command"

run help trian
expect_rc 2 "help for an unknown command"
expect_err "cortado: error: unknown command 'trian' (did you mean 'train'?)" "help trian"

run train --solvr=lenet_solver.prototxt
expect_rc 2 "unknown flag"
expect_err "cortado: error: unknown flag '--solvr' for 'cortado train' (did you mean '--solver'?)" \
  "unknown flag"

run test --iterations=abc
expect_rc 2 "bad integer"
expect_err "cortado: error: invalid value 'abc' for flag '--iterations': expected an integer" \
  "bad integer"

run time --dummy_data=maybe
expect_rc 2 "bad bool"
expect_err "invalid value 'maybe' for flag '--dummy_data': expected true or false" "bad bool"

run train --gpu=-1
expect_rc 2 "negative gpu"
expect_err "invalid value '-1' for flag '--gpu': device ids are 0 or more" "negative gpu"

run train --solver
expect_rc 2 "missing value"
expect_err "missing value for flag '--solver' (expected --solver=FILE)" "missing value"

run model_info
expect_rc 2 "model_info without FILE"
expect_err "missing argument for 'cortado model_info' (usage: cortado model_info FILE)" \
  "model_info without FILE"

run upgrade_net_proto_text a b c
expect_rc 2 "an extra argument"
expect_err "unexpected argument 'c' for 'cortado upgrade_net_proto_text'" "an extra argument"

run --log_level=9 help
expect_rc 2 "log_level out of range"
expect_err "invalid value '9' for flag '--log_level': must be between 0 and 3" "log_level range"

# --- failures: exit 1
run train
[ "$rc" -eq 1 ] || [ "$rc" -eq 2 ] || fail "train without --solver: exit status $rc"
expect_err "cortado: error: " "train without --solver"

run --log_file="$TMP/no/such/dir/x.log" help
expect_rc 1 "unwritable log file"
expect_err "cannot open log file" "unwritable log file"

# --- device_query, the global logging flags
source "$(dirname "$0")/gpu_count.sh"
have_gpu=0
[ "$(ct_gpu_count)" -ge 1 ] && have_gpu=1
run device_query --log_file="$TMP/dq.log"
expect_err "] Querying GPUs all" "device_query logs in glog format"
grep -qF "Querying GPUs all" "$TMP/dq.log" || fail "--log_file did not get the log line"
if [ "$have_gpu" -eq 1 ] && ! grep -qF "this build has no CUDA" <<<"$err"; then
  expect_rc 0 "device_query with a GPU"
  for label in "Name:" "Compute capability:" "Total global memory:" "Warp size:" \
               "Maximum threads per block:" "Clock rate:" "Number of multiprocessors:" \
               "Kernel execution timeout:"; do
    expect_err "$label" "device_query"
  done
  run device_query --gpu=4096
  expect_rc 1 "device_query on a missing device"
  expect_err "cortado: error: no CUDA device 4096" "device_query on a missing device"
else
  expect_rc 1 "device_query without a GPU"
  expect_err "cortado: error: no CUDA device" "device_query without a GPU"
fi

run device_query --log_level=1
expect_no_err "Querying GPUs" "--log_level=1 hides INFO"
set +e
GLOG_minloglevel=1 "$BIN" device_query 2>"$TMP/stderr" >/dev/null
GLOG_minloglevel=1 "$BIN" device_query --log_level=0 2>"$TMP/stderr2" >/dev/null
set -e
if grep -qF "Querying GPUs" "$TMP/stderr"; then fail "GLOG_minloglevel=1 did not hide INFO"; fi
grep -qF "Querying GPUs" "$TMP/stderr2" || fail "--log_level=0 did not win over GLOG_minloglevel=1"

# Flags given before the command apply to it.
run --log_level=1 device_query
expect_no_err "Querying GPUs" "--log_level before the command"

if [ "$failures" -ne 0 ]; then
  echo "sh_cli_basic: $failures check(s) failed" >&2
  exit 1
fi
echo "sh_cli_basic: all checks passed"
