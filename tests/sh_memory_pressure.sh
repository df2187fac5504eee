#!/usr/bin/env bash
# Under memory pressure Cortado ends promptly and says why: a failed
# allocation is "cortado: error: ... out of host memory allocating N bytes"
# with status 1 (not an abort), and a SIGINT that a library raises inside
# the process (OpenBLAS, when it cannot start its threads) is named as such,
# even before main and even when the process started with SIGINT ignored
# (a script's background job; OpenBLAS would go on with threads it never
# started, and the run would hang).  Every run is bounded by `timeout`: a
# hang fails the test instead of stalling it.
#  - every build: a preloaded library raises SIGINT in its constructor (as
#    OpenBLAS does); ASan builds also cap single allocations
#    (max_allocation_size_mb, since ASan cannot run under ulimit -v);
#  - other builds: real `ulimit -v` limits, stepped down until the program
#    cannot even be loaded, each run checked.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_memory_pressure
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

cat >net.prototxt <<'NET'
name: "m"
layer { name: "data" type: "DummyData" top: "x" top: "y"
  dummy_data_param { shape { dim: 64 dim: 1000 } shape { dim: 64 dim: 10 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "constant" value: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 20000 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "p"
  inner_product_param { num_output: 10 weight_filler { type: "gaussian" std: 0.01 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "y" top: "loss" }
NET
printf 'net: "net.prototxt"\nbase_lr: 0.001\nlr_policy: "fixed"\nmax_iter: 2\nsolver_mode: CPU\nsnapshot_after_train: false\n' >solver.prototxt

self_sigint="cortado: error: SIGINT was raised inside this process by a library, not sent to it (OpenBLAS raises SIGINT when it cannot start its threads: too little memory, e.g. under ulimit -v, or too many threads; see its lines above)"
oom_re='^cortado: error: .*out of host memory allocating [0-9]+ bytes \([0-9.]+ MB; Cortado holds [0-9.]+ MB of tensors; a memory limit such as ulimit -v\?\)$'

# run NAME CMD...: runs under `timeout 120`; sets rc and out
run() {
  local name=$1
  shift
  rc=0
  out=$(timeout 120 "$@" 2>&1) || rc=$?
  [ $rc != 124 ] || bad "$name: still running after 120 s (a hang)"
}

# --- a library raises SIGINT at load time, as OpenBLAS does
lib=${CT_TEST_RAISE_SIGINT_LIB:?}
for ignored in no yes; do
  trapcmd=""
  [ $ignored = yes ] && trapcmd="trap '' INT;"
  run "preload" bash -c "$trapcmd ASAN_OPTIONS=\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}verify_asan_link_order=0 LD_PRELOAD='$lib' exec '$bin' train --solver=solver.prototxt"
  if [ $rc = 1 ] && [ "$(tail -1 <<<"$out")" = "$self_sigint" ]; then
    echo "ok   a library's SIGINT at load time is named (SIGINT ignored: $ignored), status 1"
  else
    bad "a library's SIGINT at load (SIGINT ignored: $ignored): status $rc, output: $(tail -2 <<<"$out")"
  fi
done
# a SIGINT from outside still does what it did: kills (default) ...
"$bin" train --solver=solver.prototxt --sigint_effect=none >/dev/null 2>&1 &
pid=$!
kill -INT $pid 2>/dev/null || true
rc=0 && wait $pid || rc=$?
case $rc in 0 | 130) echo "ok   a SIGINT from outside keeps its meaning (status $rc)" ;; *) bad "outside SIGINT: status $rc" ;; esac

# --- failed allocations
if [ "${CORTADO_SANITIZED:-0}" = 1 ] || [ "${CORTADO_SANITIZED:-}" = true ]; then
  run "asan cap" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=50" \
    "$bin" train --solver=solver.prototxt
  if [ $rc = 1 ] && tail -1 <<<"$out" | grep -E "$oom_re" >/dev/null && tail -1 <<<"$out" | grep "allocating 80000000 bytes" >/dev/null; then
    echo "ok   ASan build, allocations over 50 MB fail: status 1, $(tail -1 <<<"$out")"
  else
    bad "ASan allocation cap: status $rc, output: $(tail -3 <<<"$out")"
  fi
  exit $fail
fi
seen_oom=0 seen_load=0
for mb in 3000 2000 1500 1300 1200 1150 1100 1050 1000 950 900 800 600 400; do
  run "ulimit -v ${mb} MB" bash -c "ulimit -v $((mb * 1024)); exec '$bin' train --solver=solver.prototxt"
  last=$(tail -1 <<<"$out")
  if [ $rc = 0 ]; then
    what="trains"
  elif [ $rc = 1 ] && grep -Eq "$oom_re" <<<"$last"; then
    what="out of memory, said so: ${last#cortado: error: }"
    seen_oom=1
  elif [ $rc = 1 ] && [ "$last" = "$self_sigint" ]; then
    what="OpenBLAS could not start its threads, said so"
  elif [ $rc = 1 ] && [ "$last" = "libgomp: Thread creation failed: Resource temporarily unavailable" ]; then
    what="OpenMP could not start its threads, said so (libgomp)"
  elif [ $rc = 127 ] && grep -q "error while loading shared libraries" <<<"$last"; then
    what="the loader cannot map the libraries (before any code of Cortado runs)"
    seen_load=1
  else
    bad "ulimit -v ${mb} MB: status $rc without a cause: $(tail -2 <<<"$out")"
    continue
  fi
  echo "ok   ulimit -v ${mb} MB: status $rc, $what"
  [ $seen_load = 1 ] && break
done
[ $seen_oom = 1 ] || bad "no limit made an allocation fail"
exit $fail
