#!/usr/bin/env bash
# SIGTERM to a pipeline: `mpirun -np 2 cortado train --pipeline=relu` on the
# CPU, SIGTERM to rank 1 alone (the loss stage; a scheduler's signal to one
# of the job's processes): both stages stop after the same iteration, stage 0
# writes the snapshot (gathered from both), the job ends with status 0.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_sigterm_pipeline_mpi
rm -rf "$dir" && mkdir -p "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$(dirname "$0")/sigterm_job.sh"
term_rank1_mpi "$dir" "--pipeline=relu --microbatches=2 --comm_timeout=30" "mpirun -np 2 --pipeline, SIGTERM to stage 1"
