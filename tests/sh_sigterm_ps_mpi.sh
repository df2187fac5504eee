#!/usr/bin/env bash
# SIGTERM under parameter servers (docs/distributed.md): a signal that
# reaches one worker other than the root, or one server, goes to the root
# through the servers; the root snapshots (the servers' state) and stops,
# the servers tell the other workers to stop, and the job ends with status
# 0 and one snapshot.
set -euo pipefail
bin=${CORTADO_BIN:?}
dir=${CORTADO_TMP:?}/sh_sigterm_ps_mpi
rm -rf "$dir" && mkdir -p "$dir"/worker "$dir"/server "$dir"/bmuf
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$(dirname "$0")/sigterm_job.sh"
term_rank1_mpi "$dir/worker" "--dp_mode=ssp --staleness=1" "ssp, SIGTERM to worker 1" 3 1
term_rank1_mpi "$dir/server" "--dp_mode=async" "async, SIGTERM to the server" 3 2
term_rank1_mpi "$dir/bmuf" "--dp_mode=bmuf --bmuf_sync_period=4" "bmuf, SIGTERM to worker 1" 3 1
