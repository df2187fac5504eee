/* Builds without MPI: the launcher probes still work (so that cortado can
 * say it was started by mpirun but cannot join the job), MPI itself is
 * unsupported. */
#ifndef CORTADO_HAVE_MPI
#include <stdlib.h>

#include "parallel/comm_mpi.h"

static int env_int(const char *name) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : -1;
}

bool ct_mpi_launched(void) {
  return env_int("OMPI_COMM_WORLD_SIZE") > 1 || env_int("PMI_SIZE") > 1 || env_int("PMIX_SIZE") > 1 ||
         env_int("MV2_COMM_WORLD_SIZE") > 1;
}

int ct_mpi_rank_from_env(void) {
  static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    int v = env_int(names[i]);
    if (v >= 0) return v;
  }
  return -1;
}

int ct_mpi_local_rank_from_env(void) {
  int v = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
  return v >= 0 ? v : env_int("MPI_LOCALRANKID");
}

ct_status ct_comm_mpi_create(ct_comm **out, ct_error *err) {
  *out = NULL;
  return ct_error_set(err, CT_ERR_UNSUPPORTED,
                      "this process was started by an MPI launcher, but this build of Cortado has "
                      "no MPI (rebuild with an MPI library installed)");
}

void ct_mpi_finalize(void) {}

ct_status ct_mpi_broadcast_bytes(void *data, size_t bytes, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "this build of Cortado has no MPI");
}

void ct_mpi_abort_job(int code) {}
#endif
