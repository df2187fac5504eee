/* The MPI back end of ct_comm (host buffers).  Only built with MPI. */
#ifndef CT_PARALLEL_COMM_MPI_H
#define CT_PARALLEL_COMM_MPI_H

#include <stdbool.h>

#include "parallel/comm.h"

/* True when this process was started by mpirun or another PMI launcher
 * (Open MPI's OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, Slurm's SLURM_NTASKS
 * with SLURM_PROCID...) with more than one rank. */
bool ct_mpi_launched(void);
/* Rank in the job from the launcher's environment (OMPI_COMM_WORLD_RANK,
 * PMI_RANK, PMIX_RANK, SLURM_PROCID), or -1 when unknown; usable before MPI
 * is initialised (e.g. to silence logs). */
int ct_mpi_rank_from_env(void);
/* Local rank on this node (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
 * SLURM_LOCALID), or -1 when unknown. */
int ct_mpi_local_rank_from_env(void);

/* Initialises MPI once per process (thread level FUNNELED is enough) and
 * returns a communicator over MPI_COMM_WORLD with MPI's errors returned, not
 * fatal, and the default watchdog timeout.  Its abort ends the whole job
 * (MPI_Abort).  Only built with MPI (CORTADO_HAVE_MPI). */
ct_status ct_comm_mpi_create(ct_comm **out, ct_error *err);
/* MPI_Finalize when we initialised MPI (call once at exit), unless
 * ct_mpi_skip_finalize was called. */
void ct_mpi_finalize(void);
/* Makes ct_mpi_finalize do nothing: a rank of the job has died (under
 * mpirun --enable-recovery), and Open MPI 4.1's MPI_Finalize may wait for
 * it for ever.  Any thread. */
void ct_mpi_skip_finalize(void);
/* Broadcasts `bytes` of host data from rank 0 of MPI_COMM_WORLD (used to
 * share an NCCL unique id), under the default watchdog timeout. */
ct_status ct_mpi_broadcast_bytes(void *data, size_t bytes, ct_error *err);
/* MPI_Abort on MPI_COMM_WORLD with `code` when MPI is initialised (ends every
 * rank of the job; does not return then); a no-op otherwise.  The abort
 * path of distributed runs.  It waits a second first, so that the launcher
 * forwards the message printed before it. */
void ct_mpi_abort_job(int code);

#endif
