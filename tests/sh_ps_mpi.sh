#!/usr/bin/env bash
# `cortado train --dp_mode`: flags that do not go together, and jobs that
# parameter servers cannot run, stop before training with a message that
# says why (the command itself, or every rank alike).  Training through
# the servers is tests/test_ps_mpi.c and tests/sh_ps_lenet_mpi.sh.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_ps_mpi
rm -rf "$dir" && mkdir -p "$dir"
cd "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=${CORTADO_SRC:-.}/tests/data/lsan_mpi.supp:print_suppressions=0"
"$bin" make_synthetic_db db --num=16 --shape=1,4,4 --labels=3 --log_level=1
cat >net.prototxt <<NET
name: "ps"
layer { name: "data" type: "Data" top: "x" top: "label"
  data_param { source: "db" batch_size: 4 backend: LMDB } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "p"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "p" bottom: "label" top: "loss" }
NET
solver() { printf 'net: "net.prototxt"\nbase_lr: 0.01\nlr_policy: "fixed"\nmax_iter: 2\ndisplay: 1\nsolver_mode: CPU\nsnapshot_after_train: false\n%s\n' "${1:-}"; }
solver >solver.prototxt
solver "clip_gradients: 1" >solver_clip.prototxt
. "$(dirname "$0")/expect_mpi.sh"
expect "no mpirun" 0 solver.prototxt "--dp_mode=ssp --num_servers=2" \
  "--dp_mode=ssp needs mpirun: start W workers and 2 parameter servers as mpirun -np W+2 (CPU ranks)"
expect "--staleness without ssp" 0 solver.prototxt "--dp_mode=async --staleness=2" \
  "--staleness goes with --dp_mode=ssp (the mode is async)"
expect "--num_servers with the all-reduce" 0 solver.prototxt "--num_servers=2" \
  "--num_servers goes with parameter servers (--dp_mode=ssp, async or bmuf)"
expect "a bmuf flag without bmuf" 0 solver.prototxt "--dp_mode=ssp --bmuf_sync_period=4" \
  "--bmuf_sync_period goes with --dp_mode=bmuf (the mode is ssp)"
expect "a block momentum of 1" 0 solver.prototxt "--dp_mode=bmuf --bmuf_block_momentum=1" \
  "--bmuf_block_momentum must lie in [0, 1), got 1"
expect "an unknown mode" 0 solver.prototxt "--dp_mode=hogwild" \
  "invalid value 'hogwild' for flag '--dp_mode': expected one of allreduce, ssp, async, bmuf"
expect "a trace" 0 solver.prototxt "--dp_mode=ssp --trace=t.json" \
  "--trace does not go with --dp_mode=ssp yet (the servers are not traced)"
expect "pipeline stages" 2 solver.prototxt "--dp_mode=ssp --pipeline=relu" \
  "--dp_mode=ssp does not go with pipeline stages (--pipeline)"
expect "no rank left to train" 2 solver.prototxt "--dp_mode=async --num_servers=2" \
  "--dp_mode=async: 2 ranks leave no worker beside 2 parameter servers (start mpirun -np W+2 for W workers)"
expect "clipping over two servers" 3 solver_clip.prototxt "--dp_mode=ssp --num_servers=2" \
  "--dp_mode=ssp: clip_gradients needs the norm of the whole gradient, which no one of 2 parameter servers sees (use --num_servers=1)"
expect "clipping on one server" 3 solver_clip.prototxt "--dp_mode=ssp --staleness=1" ""
expect "bmuf on two servers" 4 solver.prototxt "--dp_mode=bmuf --num_servers=2 --bmuf_nesterov=false" ""
exit $fail
