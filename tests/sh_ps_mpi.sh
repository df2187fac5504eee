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
. "$(dirname "$0")/expect_mpi.sh"
small_job_db
small_net "" >net.prototxt
small_solver net.prototxt >solver.prototxt
small_solver net.prototxt "clip_gradients: 1" >solver_clip.prototxt
expect "no mpirun" 0 solver.prototxt "--dp_mode=ssp --num_servers=2" \
  "--dp_mode=ssp needs mpirun or shards: start W workers and 2 parameter servers as mpirun -np W+2, or as --num_shards=W+2 (CPU ranks)"
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
