/* ct_comm over MPI: collectives on host buffers over MPI_COMM_WORLD or a
 * part of it (ct_comm_split).  Each
 * collective is started non-blocking and polled, so that a dead or stuck
 * rank turns into CT_ERR_COMM after the communicator's timeout instead of a
 * hang. */
#include "parallel/comm_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"

static bool g_we_initialised;

/* A ct_comm over an MPI communicator. */
typedef struct {
  ct_comm c;
  MPI_Comm comm; /* MPI_COMM_WORLD, or a split of it (freed with the ct_comm) */
} mpi_comm;

static MPI_Comm of(const ct_comm *c) { return ((const mpi_comm *)c)->comm; }

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

int ct_mpi_rank_from_env(void) {
  static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    int v = env_int(names[i]);
    if (v >= 0) return v;
  }
  return -1;
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

/* Polls a non-blocking operation to completion under the watchdog.  Polls
 * sleep after the first few so that a waiting rank leaves the cores to the
 * ranks still computing (CPU workers are often oversubscribed). */
static ct_status wait_request(MPI_Request *req, double timeout_s, const int *cancel, const char *op,
                              ct_error *err) {
  const double deadline = ct_monotonic_s() + timeout_s;
  for (int polls = 0;; polls++) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, op, err);
    if (done) return CT_OK;
    int rank = -1;
    if (cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE)) {
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      return ct_error_set(err, CT_ERR_INTERRUPTED, "MPI %s on rank %d: cancelled", op, rank);
    }
    if (ct_monotonic_s() >= deadline) {
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      return ct_error_set(err, CT_ERR_COMM,
                          "MPI %s on rank %d: not finished after %g s (another rank died, hangs "
                          "or is far behind; CORTADO_COMM_TIMEOUT sets the limit)",
                          op, rank, timeout_s);
    }
    if (polls >= 32) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  }
}

/* MPI counts are int: large buffers go in chunks. */
#define CT_MPI_CHUNK ((size_t)1 << 28)

static ct_status mpi_allreduce(ct_comm *c, float *buf, size_t count, ct_comm_op op, void *stream,
                               ct_error *err) {
  for (size_t off = 0; off < count; off += CT_MPI_CHUNK) {
    int n = (int)(count - off < CT_MPI_CHUNK ? count - off : CT_MPI_CHUNK);
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + off, n, MPI_FLOAT, MPI_SUM, of(c), &req);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "allreduce", err);
    CT_TRY(wait_request(&req, c->timeout_s, c->cancel, "allreduce", err));
  }
  if (op == CT_COMM_AVG && c->size > 1) {
    const float inv = (float)c->size;
    for (size_t i = 0; i < count; i++) buf[i] /= inv;
  }
  return CT_OK;
}

static ct_status mpi_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream,
                               ct_error *err) {
  for (size_t off = 0; off < count; off += CT_MPI_CHUNK) {
    int n = (int)(count - off < CT_MPI_CHUNK ? count - off : CT_MPI_CHUNK);
    MPI_Request req;
    int rc = MPI_Ibcast(buf + off, n, MPI_FLOAT, root, of(c), &req);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcast", err);
    CT_TRY(wait_request(&req, c->timeout_s, c->cancel, "broadcast", err));
  }
  return CT_OK;
}

static ct_status mpi_host_f64(ct_comm *c, double *buf, size_t count, ct_error *err) {
  MPI_Request req;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_DOUBLE, MPI_SUM, of(c), &req);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "allreduce (host)", err);
  return wait_request(&req, c->timeout_s, c->cancel, "allreduce (host)", err);
}

static ct_status mpi_barrier(ct_comm *c, ct_error *err) {
  MPI_Request req;
  int rc = MPI_Ibarrier(of(c), &req);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "barrier", err);
  return wait_request(&req, c->timeout_s, c->cancel, "barrier", err);
}

/* Point to point, in chunks like the collectives; each chunk polled under
 * the watchdog, so that a dead peer is an error, not a hang. */
static ct_status mpi_send(ct_comm *c, const float *buf, size_t count, int peer, int tag,
                          void *stream, ct_error *err) {
  for (size_t off = 0; off < count; off += CT_MPI_CHUNK) {
    int n = (int)(count - off < CT_MPI_CHUNK ? count - off : CT_MPI_CHUNK);
    MPI_Request req;
    int rc = MPI_Isend(buf + off, n, MPI_FLOAT, peer, tag, of(c), &req);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "send", err);
    CT_TRY(wait_request(&req, c->timeout_s, c->cancel, "send", err));
  }
  return CT_OK;
}

static ct_status mpi_recv(ct_comm *c, float *buf, size_t count, int peer, int tag, void *stream,
                          ct_error *err) {
  for (size_t off = 0; off < count; off += CT_MPI_CHUNK) {
    int n = (int)(count - off < CT_MPI_CHUNK ? count - off : CT_MPI_CHUNK);
    MPI_Request req;
    int rc = MPI_Irecv(buf + off, n, MPI_FLOAT, peer, tag, of(c), &req);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "receive", err);
    CT_TRY(wait_request(&req, c->timeout_s, c->cancel, "receive", err));
  }
  return CT_OK;
}

/* Buffers past one chunk go blocking (*req NULL): pipeline tops are far
 * smaller than 2^28 floats. */
static ct_status mpi_isend(ct_comm *c, const float *buf, size_t count, int peer, int tag, void **req,
                           ct_error *err) {
  *req = NULL;
  if (count > CT_MPI_CHUNK) return mpi_send(c, buf, count, peer, tag, NULL, err);
  MPI_Request *r = ct_xcalloc(1, sizeof *r);
  int rc = MPI_Isend(buf, (int)count, MPI_FLOAT, peer, tag, of(c), r);
  if (rc != MPI_SUCCESS) {
    free(r);
    return mpi_fail(rc, "send", err);
  }
  *req = r;
  return CT_OK;
}

static ct_status mpi_send_wait(ct_comm *c, void *req, ct_error *err) {
  ct_status st = wait_request(req, c->timeout_s, c->cancel, "send", err);
  free(req);
  return st;
}

/* Receives past one chunk are refused (a bug of the caller): pipeline tops
 * are far smaller than 2^28 floats. */
static ct_status mpi_irecv(ct_comm *c, float *buf, size_t count, int peer, int tag, void **req,
                           ct_error *err) {
  CT_ASSERT(count <= CT_MPI_CHUNK);
  MPI_Request *r = ct_xcalloc(1, sizeof *r);
  const int rc = MPI_Irecv(buf, (int)count, MPI_FLOAT, peer, tag, of(c), r);
  if (rc != MPI_SUCCESS) {
    free(r);
    *req = NULL;
    return mpi_fail(rc, "receive", err);
  }
  *req = r;
  return CT_OK;
}

static ct_status mpi_send_test(ct_comm *c, void *req, bool *done, ct_error *err) {
  int flag = 0;
  const int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
  *done = rc != MPI_SUCCESS || flag;
  if (*done) free(req);
  return rc == MPI_SUCCESS ? CT_OK : mpi_fail(rc, "send", err);
}

/* MPI_Iprobe polled like the requests above: the same watchdog, the same
 * sleeps once it has waited a while. */
static ct_status mpi_probe(ct_comm *c, int tag, int *peer, size_t *count, ct_error *err) {
  const double deadline = ct_monotonic_s() + c->timeout_s;
  for (int polls = 0;; polls++) {
    int found = 0;
    MPI_Status status;
    int rc = MPI_Iprobe(MPI_ANY_SOURCE, tag, of(c), &found, &status);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "probe", err);
    if (found) {
      int n = 0;
      rc = MPI_Get_count(&status, MPI_FLOAT, &n);
      if (rc != MPI_SUCCESS) return mpi_fail(rc, "probe", err);
      *peer = status.MPI_SOURCE;
      *count = (size_t)n;
      return CT_OK;
    }
    if (c->cancel && __atomic_load_n(c->cancel, __ATOMIC_ACQUIRE))
      return ct_error_set(err, CT_ERR_INTERRUPTED, "MPI probe on rank %d: cancelled", c->rank);
    if (ct_monotonic_s() >= deadline)
      return ct_error_set(err, CT_ERR_COMM,
                          "MPI probe on rank %d: no message after %g s (every worker died, hangs "
                          "or is far behind; --comm_timeout sets the limit)",
                          c->rank, c->timeout_s);
    if (polls >= 32) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  }
}

static ct_status mpi_wait(ct_comm *c, void *stream, ct_error *err) { return CT_OK; }
static void mpi_abort(ct_comm *c) { ct_mpi_abort_job(1); }
static void mpi_destroy(ct_comm *c) {
  mpi_comm *m = (mpi_comm *)c;
  if (m->comm != MPI_COMM_WORLD) MPI_Comm_free(&m->comm);
  free(m);
}

static ct_status mpi_split(ct_comm *parent, int color, int key, ct_comm **out, ct_error *err);

static const ct_comm_ops k_mpi_ops = {.name = "mpi",
                                      .allreduce = mpi_allreduce,
                                      .broadcast = mpi_broadcast,
                                      .allreduce_host_f64 = mpi_host_f64,
                                      .barrier = mpi_barrier,
                                      .wait = mpi_wait,
                                      .abort = mpi_abort,
                                      .destroy = mpi_destroy,
                                      .send = mpi_send,
                                      .recv = mpi_recv,
                                      .isend = mpi_isend,
                                      .send_wait = mpi_send_wait,
                                      .send_test = mpi_send_test,
                                      .irecv = mpi_irecv,
                                      .probe = mpi_probe,
                                      .split = mpi_split};

void ct_mpi_abort_job(int code) {
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (!inited || fin) return;
  /* the launcher forwards our output asynchronously and drops what is in
   * flight when it kills the job: give the message that explains the abort
   * a moment to arrive */
  fflush(stdout);
  fflush(stderr);
  struct timespec ts = {1, 0};
  nanosleep(&ts, NULL);
  MPI_Abort(MPI_COMM_WORLD, code);
}

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
  mpi_comm *m = ct_xcalloc(1, sizeof *m);
  m->comm = MPI_COMM_WORLD;
  m->c.ops = &k_mpi_ops;
  m->c.timeout_s = ct_comm_default_timeout();
  MPI_Comm_rank(MPI_COMM_WORLD, &m->c.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m->c.size);
  *out = &m->c;
  return CT_OK;
}

/* ct_comm_ops.split: MPI_Comm_split, with parent's watchdog and cancel flag. */
static ct_status mpi_split(ct_comm *parent, int color, int key, ct_comm **out, ct_error *err) {
  *out = NULL;
  mpi_comm *m = ct_xcalloc(1, sizeof *m);
  int rc = MPI_Comm_split(of(parent), color, key, &m->comm);
  if (rc != MPI_SUCCESS) {
    free(m);
    return mpi_fail(rc, "communicator split", err);
  }
  MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
  m->c.ops = &k_mpi_ops;
  m->c.timeout_s = parent->timeout_s;
  m->c.cancel = parent->cancel;
  MPI_Comm_rank(m->comm, &m->c.rank);
  MPI_Comm_size(m->comm, &m->c.size);
  *out = &m->c;
  return CT_OK;
}

static int g_skip_finalize;

void ct_mpi_skip_finalize(void) { __atomic_store_n(&g_skip_finalize, 1, __ATOMIC_RELEASE); }

void ct_mpi_finalize(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (g_we_initialised && !fin && !__atomic_load_n(&g_skip_finalize, __ATOMIC_ACQUIRE)) MPI_Finalize();
}

ct_status ct_mpi_broadcast_bytes(void *data, size_t bytes, ct_error *err) {
  CT_TRY(mpi_init_once(err));
  MPI_Request req;
  int rc = MPI_Ibcast(data, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcast of bytes", err);
  return wait_request(&req, ct_comm_default_timeout(), NULL, "broadcast of bytes", err);
}
