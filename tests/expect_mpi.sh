# Sourced by the shell tests of flags that stop `cortado train` under mpirun
# (sh_pipeline_mpi.sh, sh_ps_mpi.sh).  Needs $bin; works in the current
# folder; exports what sanitizer builds need under mpirun (full stacks, so
# that what Open MPI never frees can be suppressed).
#   small_job_db            an LMDB "db" of 16 records (1x4x4, 3 labels)
#   small_net LAYER         prints a net over it: ip1, LAYER (may be empty),
#                           relu, ip2, loss
#   small_solver NET EXTRA  prints a solver of NET for 2 iterations, EXTRA
#                           appended
#   expect ...              below; sets fail=1 on a mismatch
#   expect DESCRIPTION RANKS SOLVER FLAGS MESSAGE
# runs `cortado train --solver=SOLVER FLAGS` under `mpirun -np RANKS` (alone
# when RANKS is 0); an empty MESSAGE wants it to train (status 0), any
# other wants a failure with the line "cortado: error: MESSAGE" and no
# "Iteration 1" before it.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=${CORTADO_SRC:-.}/tests/data/lsan_mpi.supp:print_suppressions=0"
small_job_db() {
  "$bin" make_synthetic_db db --num=16 --shape=1,4,4 --labels=3 --log_level=1
}
small_net() {
  cat <<NET
name: "small"
layer { name: "data" type: "Data" top: "x" top: "label"
  data_param { source: "db" batch_size: 4 backend: LMDB } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.1 } } }
$1
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "p"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "p" bottom: "label" top: "loss" }
NET
}
small_solver() {
  printf 'net: "%s"\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 2\ndisplay: 1\nsolver_mode: CPU\nsnapshot_after_train: false\n%s\n' \
    "$1" "${2:-}"
}
# start_shards NAME N FLAGS...: the N shards of `cortado train` over Gloo in
# folder NAME (net.prototxt, solver.prototxt and db from here), one log
# each (NAME/shard_K.log), meeting through the file store ../store; returns
# the last failing shard's status
start_shards() {
  local name=$1 n=$2 pids=() rc=0
  shift 2
  mkdir -p "$name" && cp net.prototxt solver.prototxt "$name/" && ln -sfn ../db "$name/db"
  for k in $(seq 0 $((n - 1))); do
    (cd "$name" && exec timeout 300 "$bin" train --solver=solver.prototxt --num_shards="$n" --shard_id="$k" \
      --run_id="$name" --file_store_path=../store --gloo_iface=lo --rendezvous_timeout=60 "$@" \
      >"shard_$k.log" 2>&1) &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}
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
