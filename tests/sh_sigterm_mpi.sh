#!/usr/bin/env bash
# SIGTERM under MPI: `mpirun -np 2 cortado train` on the CPU, SIGTERM to
# rank 1 alone (a scheduler's signal to one of the job's processes): both
# ranks agree to stop after the same iteration, rank 0 writes the snapshot,
# the job ends with status 0.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_sigterm_mpi
rm -rf "$dir" && mkdir -p "$dir"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$(dirname "$0")/sigterm_job.sh"
term_rank1_mpi "$dir" "" "mpirun -np 2, SIGTERM to rank 1"
