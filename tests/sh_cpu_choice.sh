#!/usr/bin/env bash
# A CPU-only user and Caffe's own example solver (solver_mode: GPU): --cpu
# and --gpu=none train, test and time on the CPU; without them the error
# names the real cause (no driver, no GPU) and both ways out, never a CUDA
# version mismatch; `--gpu all` (a space, as in Caffe) is read as --gpu=all.
# The checks of the error need a machine without a GPU (the others run
# anywhere).  Needs CORTADO_BIN and CORTADO_FIXTURES (set by ctest).
set -euo pipefail
BIN=${CORTADO_BIN:?CORTADO_BIN is not set}
FIX=${CORTADO_FIXTURES:?CORTADO_FIXTURES is not set}
TMP=${CORTADO_TMP:-/tmp}/sh_cpu_choice
rm -rf "$TMP"
mkdir -p "$TMP/examples/mnist"
source "$(dirname "$0")/gpu_count.sh"
failures=0
run() { # run ARGS...: exit status in $rc, stderr in $err (run in the Caffe root)
  set +e
  (cd "$TMP" && "$BIN" "$@") >"$TMP/out" 2>"$TMP/err"
  rc=$?
  set -e
  err=$(cat "$TMP/err")
}
fail() { echo "FAIL: $*" >&2; tail -n 5 <<<"$err" >&2; failures=$((failures + 1)); }
expect_rc() { [ "$rc" -eq "$1" ] || fail "$2: exit status $rc, expected $1"; }
expect_err() { grep -qF -- "$1" <<<"$err" || fail "$2: stderr lacks '$1'"; }
expect_no_err() { if grep -qF -- "$1" <<<"$err"; then fail "$2: stderr has '$1'"; fi; }

# Caffe's root as the example expects it: its net and solver, a small
# MNIST-shaped database; the solver trains 20 iterations and keeps
# solver_mode: GPU.
cp "$FIX/lenet_train_test.prototxt" "$TMP/examples/mnist/"
sed -e 's/^max_iter:.*/max_iter: 20/' -e 's/^test_interval:.*/test_interval: 10/' \
    -e 's/^test_iter:.*/test_iter: 2/' -e 's/^snapshot:.*/snapshot: 0/' -e 's/^display:.*/display: 10/' \
    "$FIX/lenet_solver.prototxt" >"$TMP/examples/mnist/lenet_solver.prototxt"
grep -q '^solver_mode: GPU' "$TMP/examples/mnist/lenet_solver.prototxt" || { echo "FAIL: the fixture changed"; exit 1; }
for db in mnist_train_lmdb mnist_test_lmdb; do
  "$BIN" make_synthetic_db "$TMP/examples/mnist/$db" --num=256 --shape=1,28,28 --labels=10 --log_level=1
done
solver=examples/mnist/lenet_solver.prototxt

# --- the CPU, chosen on the command line
for way in --cpu --gpu=none "--gpu none"; do
  run train --solver=$solver $way
  expect_rc 0 "train $way"
  expect_err "] Use CPU." "train $way"
  expect_err "Iteration 20, loss = " "train $way"
  expect_err "Optimization Done." "train $way"
done
run train --solver=$solver --cpu
expect_err "subnormals flushed to zero" "train --cpu logs the CPU setup"
run time --model=examples/mnist/lenet_train_test.prototxt --cpu --iterations=2
expect_rc 0 "time --cpu"
expect_err "Average Forward-Backward: " "time --cpu"
run test --model=examples/mnist/lenet_train_test.prototxt --weights="$FIX/lenet_iter_10000.caffemodel" --gpu=none --iterations=2
expect_rc 0 "test --gpu=none"
expect_err "Use CPU." "test --gpu=none"
run train --solver=$solver --cpu --gpu=0
expect_rc 2 "--cpu with --gpu=0"
expect_err "cortado: error: give --cpu or --gpu=0, not both" "--cpu with --gpu=0"
run time --model=examples/mnist/lenet_train_test.prototxt --cpu --gpu=all
expect_rc 2 "time --cpu with --gpu=all"
expect_err "cortado: error: give --cpu or --gpu=all, not both" "time --cpu with --gpu=all"

# --- the pools: thread count from the CPUs this process may use, a user's
# wait policy kept
if command -v taskset >/dev/null 2>&1; then
  set +e
  err=$(cd "$TMP" && env -u OMP_WAIT_POLICY -u OMP_NUM_THREADS taskset -c 0 "$BIN" time \
        --model=examples/mnist/lenet_train_test.prototxt --iterations=1 2>&1)
  set -e
  expect_err "CPU: 1 thread (1 CPU available), OMP_WAIT_POLICY=PASSIVE, subnormals flushed to zero" \
    "one CPU under taskset, the wait policy set by cortado"
fi
set +e
err=$(cd "$TMP" && env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=1000 "$BIN" time \
      --model=examples/mnist/lenet_train_test.prototxt --iterations=1 2>&1)
set -e
expect_err ", GOMP_SPINCOUNT=1000, subnormals flushed to zero" "the user's GOMP_SPINCOUNT is kept"

# --- no GPU: the real cause and the ways out
if [ "$(ct_gpu_count)" -eq 0 ]; then
  if ldconfig -p 2>/dev/null | grep 'libcuda\.so\.1 ' >/dev/null; then
    cause="no CUDA device: the NVIDIA driver sees no GPU"
  else
    cause="no CUDA device: no NVIDIA driver is installed on this machine"
  fi
  dq=$("$BIN" device_query 2>&1 || true)
  if grep -qF "this build has no CUDA" <<<"$dq"; then
    cause="no CUDA device (this build has no CUDA)"
  fi
  run train --solver=$solver
  expect_rc 1 "solver_mode: GPU without a GPU"
  expect_err "cortado: error: $solver says solver_mode: GPU: $cause; train on the CPU with --cpu (or --gpu=none), or set solver_mode: CPU" \
    "solver_mode: GPU without a GPU"
  expect_no_err "version" "solver_mode: GPU without a GPU: no version mismatch"
  run train --solver=$solver --gpu all
  expect_rc 1 "--gpu all without a GPU"
  expect_err "cortado: error: --gpu=all: $cause; --cpu (or --gpu=none) trains on the CPU" "--gpu all without a GPU"
  run time --model=examples/mnist/lenet_train_test.prototxt --gpu 0
  expect_rc 1 "time --gpu 0 without a GPU"
  expect_err "cortado: error: --gpu=0: $cause; leave out --gpu (or give --cpu) to run on the CPU" \
    "time --gpu 0 without a GPU"
  run device_query
  expect_err "cortado: error: $cause" "device_query without a GPU"
else
  echo "a GPU is visible: the no-GPU messages are not checked here"
fi

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed" >&2; exit 1; }
echo "all CPU-choice checks passed"
