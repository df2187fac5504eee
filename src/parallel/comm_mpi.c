/* ct_comm over MPI: allreduce and broadcast of host floats on MPI_COMM_WORLD. */
#include "parallel/comm_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool g_we_initialised;

static int env_int(const char *name) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : -1;
}

bool ct_mpi_launched(void) {
  static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                      "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS"};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    if (env_int(sizes[i]) > 1) return true;
  return false;
}

int ct_mpi_local_rank_from_env(void) {
  static const char *const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                      "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    int v = env_int(names[i]);
    if (v >= 0) return v;
  }
  return -1;
}

static ct_status mpi_fail(int rc, const char *op, ct_error *err) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return ct_error_set(err, CT_ERR_COMM, "MPI %s failed on rank %d: %.*s", op, rank, len, msg);
}

static ct_status mpi_allreduce(ct_comm *c, float *buf, size_t count, void *stream, ct_error *err) {
  /* MPI counts are int: reduce in chunks. */
  const size_t chunk = (size_t)1 << 28;
  for (size_t off = 0; off < count; off += chunk) {
    int n = (int)(count - off < chunk ? count - off : chunk);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf + off, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "allreduce", err);
  }
  return CT_OK;
}

static ct_status mpi_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream,
                               ct_error *err) {
  const size_t chunk = (size_t)1 << 28;
  for (size_t off = 0; off < count; off += chunk) {
    int n = (int)(count - off < chunk ? count - off : chunk);
    int rc = MPI_Bcast(buf + off, n, MPI_FLOAT, root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcast", err);
  }
  return CT_OK;
}

static ct_status mpi_host_f64(ct_comm *c, double *buf, size_t count, ct_error *err) {
  int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? CT_OK : mpi_fail(rc, "allreduce (host)", err);
}

static ct_status mpi_barrier(ct_comm *c, ct_error *err) {
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? CT_OK : mpi_fail(rc, "barrier", err);
}

static void mpi_abort(ct_comm *c) { MPI_Abort(MPI_COMM_WORLD, 1); }
static void mpi_destroy(ct_comm *c) { free(c); }

static const ct_comm_ops k_mpi_ops = {"mpi",       mpi_allreduce, mpi_broadcast, mpi_host_f64,
                                      mpi_barrier, mpi_abort,     mpi_destroy};

static ct_status mpi_init_once(ct_error *err) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return CT_OK;
  int provided = 0;
  int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) return ct_error_set(err, CT_ERR_COMM, "MPI_Init_thread failed (%d)", rc);
  g_we_initialised = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return CT_OK;
}

ct_status ct_comm_mpi_create(ct_comm **out, ct_error *err) {
  *out = NULL;
  CT_TRY(mpi_init_once(err));
  ct_comm *c = ct_xcalloc(1, sizeof *c);
  c->ops = &k_mpi_ops;
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c->size);
  *out = c;
  return CT_OK;
}

void ct_mpi_finalize(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (g_we_initialised && !fin) MPI_Finalize();
}

ct_status ct_mpi_broadcast_bytes(void *data, size_t bytes, ct_error *err) {
  CT_TRY(mpi_init_once(err));
  int rc = MPI_Bcast(data, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? CT_OK : mpi_fail(rc, "broadcast of bytes", err);
}
