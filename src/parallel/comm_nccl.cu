/* ct_comm over NCCL with non-blocking communicators and a watchdog
 * (see comm_nccl.h). */
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "gpu/gpu.h"
#include "parallel/comm_nccl.h"

static_assert(sizeof(ncclUniqueId) == CT_NCCL_ID_BYTES, "ct_nccl_id must hold an ncclUniqueId");

typedef struct nccl_comm {
  ncclComm_t comm;     /* NULL once aborted */
  int device;
  cudaStream_t stream; /* the communicator's own stream */
  cudaEvent_t done;    /* recorded by waits */
  char aborted_by[160]; /* why the communicator was aborted ("" while alive) */
  double *dev_f64;     /* (f64_cap) scratch for host reductions */
  double *pinned_f64;  /* (f64_cap) pinned staging */
  size_t f64_cap;
  double wait_s[2];    /* how long the last wait took (seconds; 0 before the first): [0] on
                          the communicator's stream, [1] on a caller's (an iteration) */
} nccl_comm;

static nccl_comm *priv(const ct_comm *c) { return (nccl_comm *)c->priv; }

/* Spins for the first 2 ms of a wait (a bucket usually finishes within
 * that), then sleeps 50 us between polls. */
static void backoff(double started) {
  if (ct_monotonic_s() - started < 0.002) return;
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
}

/* A wait expected to take about `expect` seconds (the previous one's time;
 * 0 when unknown): sleeps between polls only until 0.5 ms before then, and
 * spins (yielding) from there to twice the expected time, so that the end
 * of a long iteration is seen at once, not up to a sleep (50 us plus the
 * timer's slack) late; beyond that it sleeps again. */
static void backoff_expecting(double started, double expect) {
  const double el = ct_monotonic_s() - started;
  if (expect > 0 && el > expect - 0.0005 && el < 2 * expect + 0.002) {
    sched_yield();
    return;
  }
  backoff(started);
}

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static void set_nccl_env(void) { setenv("NCCL_NVLS_ENABLE", "0", 0); }

static void abort_comm(ct_comm *c, const char *why) {
  nccl_comm *n = priv(c);
  if (!n->comm) return;
  ncclCommAbort(n->comm);
  n->comm = NULL;
  snprintf(n->aborted_by, sizeof n->aborted_by, "%s", why);
}

/* An NCCL error: the message names the operation, rank, GPU and NCCL's
 * explanation; the communicator is aborted. */
static ct_status fail(ct_comm *c, const char *what, ncclResult_t r, ct_error *err) {
  nccl_comm *n = priv(c);
  const char *detail = n->comm ? ncclGetLastError(n->comm) : "";
  ct_status st = ct_error_set(err, CT_ERR_COMM, "NCCL %s on rank %d (GPU %d) failed: %s%s%s", what,
                              c->rank, n->device, ncclGetErrorString(r),
                              detail && *detail ? ": " : "", detail ? detail : "");
  abort_comm(c, "after an NCCL error");
  return st;
}

static ct_status aborted_error(const ct_comm *c, const char *what, ct_error *err) {
  return ct_error_set(err, CT_ERR_COMM, "NCCL %s on rank %d (GPU %d): the communicator was aborted %s",
                      what, c->rank, priv(c)->device, priv(c)->aborted_by);
}

/* The checks every poll makes besides its own condition: the async error,
 * the cancel flag and the deadline.  CT_OK means "keep waiting". */
static ct_status poll_watchdog(ct_comm *c, const char *what, double deadline, bool *in_progress,
                               ct_error *err) {
  nccl_comm *n = priv(c);
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(n->comm, &state);
  if (r != ncclSuccess) return fail(c, what, r, err);
  if (state != ncclSuccess && state != ncclInProgress) return fail(c, what, state, err);
  if (in_progress) *in_progress = state == ncclInProgress;
  if (ct_comm_cancelled(c)) {
    abort_comm(c, "because another worker failed");
    return ct_error_set(err, CT_ERR_INTERRUPTED, "NCCL %s on rank %d (GPU %d): cancelled", what,
                        c->rank, n->device);
  }
  if (ct_monotonic_s() >= deadline) {
    abort_comm(c, "by the watchdog");
    return ct_error_set(err, CT_ERR_COMM,
                        "NCCL %s on rank %d (GPU %d): not finished after %g s (another rank died, "
                        "hangs or is far behind; CORTADO_COMM_TIMEOUT sets the limit); communicator "
                        "aborted",
                        what, c->rank, n->device, c->timeout_s);
  }
  return CT_OK;
}

/* Waits until the communicator leaves ncclInProgress (after an init, an
 * enqueue that reported it, or a finalize). */
static ct_status wait_state(ct_comm *c, const char *what, ct_error *err) {
  const double started = ct_monotonic_s(), deadline = started + c->timeout_s;
  for (;;) {
    bool in_progress = false;
    CT_TRY(poll_watchdog(c, what, deadline, &in_progress, err));
    if (!in_progress) return CT_OK;
    backoff(started);
  }
}

static ct_status enqueued(ct_comm *c, ncclResult_t r, const char *what, ct_error *err) {
  if (r == ncclSuccess) return CT_OK;
  if (r == ncclInProgress) return wait_state(c, what, err);
  return fail(c, what, r, err);
}

static ct_status cuda_fail(const ct_comm *c, const char *what, cudaError_t e, ct_error *err) {
  return ct_error_set(err, CT_ERR_DEVICE, "NCCL %s on rank %d (GPU %d): CUDA error %s: %s", what,
                      c->rank, priv(c)->device, cudaGetErrorName(e), cudaGetErrorString(e));
}

static ct_status nccl_wait(ct_comm *c, void *stream, ct_error *err) {
  nccl_comm *n = priv(c);
  if (!n->comm) return aborted_error(c, "wait", err);
  cudaStream_t s = stream ? (cudaStream_t)stream : n->stream;
  cudaError_t e = cudaEventRecord(n->done, s);
  if (e != cudaSuccess) return cuda_fail(c, "wait", e, err);
  const double started = ct_monotonic_s(), deadline = started + c->timeout_s;
  for (;;) {
    e = cudaEventQuery(n->done);
    if (e == cudaSuccess) {
      n->wait_s[stream != NULL] = ct_monotonic_s() - started;
      return CT_OK;
    }
    if (e != cudaErrorNotReady) return cuda_fail(c, "wait", e, err);
    CT_TRY(poll_watchdog(c, "wait", deadline, NULL, err));
    backoff_expecting(started, n->wait_s[stream != NULL]);
  }
}

static ct_status nccl_allreduce(ct_comm *c, float *buf, size_t count, ct_comm_op op, void *stream,
                                ct_error *err) {
  nccl_comm *n = priv(c);
  if (!n->comm) return aborted_error(c, "allreduce", err);
  if (count == 0) return CT_OK;
  cudaStream_t s = stream ? (cudaStream_t)stream : n->stream;
  ncclRedOp_t rop = op == CT_COMM_AVG ? ncclAvg : ncclSum;
  return enqueued(c, ncclAllReduce(buf, buf, count, ncclFloat, rop, n->comm, s), "allreduce", err);
}

static ct_status nccl_allreduce_typed(ct_comm *c, void *buf, size_t count, ct_dtype type,
                                      ct_comm_op op, void *stream, ct_error *err) {
  nccl_comm *n = priv(c);
  if (!n->comm) return aborted_error(c, "allreduce", err);
  if (count == 0) return CT_OK;
  cudaStream_t s = stream ? (cudaStream_t)stream : n->stream;
  ncclRedOp_t rop = op == CT_COMM_AVG ? ncclAvg : ncclSum;
  const ncclDataType_t t = type == CT_BF16 ? ncclBfloat16 : type == CT_F16 ? ncclHalf : ncclFloat;
  return enqueued(c, ncclAllReduce(buf, buf, count, t, rop, n->comm, s), "allreduce", err);
}

static ct_status nccl_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream,
                                ct_error *err) {
  nccl_comm *n = priv(c);
  if (!n->comm) return aborted_error(c, "broadcast", err);
  if (count == 0) return CT_OK;
  cudaStream_t s = stream ? (cudaStream_t)stream : n->stream;
  return enqueued(c, ncclBroadcast(buf, buf, count, ncclFloat, root, n->comm, s), "broadcast", err);
}

static ct_status nccl_host_f64(ct_comm *c, double *buf, size_t count, ct_error *err) {
  nccl_comm *n = priv(c);
  if (!n->comm) return aborted_error(c, "allreduce (host)", err);
  if (count == 0) return CT_OK;
  cudaError_t e;
  if (count > n->f64_cap) {
    if (n->dev_f64) cudaFree(n->dev_f64);
    if (n->pinned_f64) cudaFreeHost(n->pinned_f64);
    n->dev_f64 = NULL;
    n->pinned_f64 = NULL;
    n->f64_cap = 0;
    if ((e = cudaMalloc((void **)&n->dev_f64, count * sizeof(double))) != cudaSuccess ||
        (e = cudaMallocHost((void **)&n->pinned_f64, count * sizeof(double))) != cudaSuccess)
      return cuda_fail(c, "allreduce (host)", e, err);
    n->f64_cap = count;
  }
  const size_t bytes = count * sizeof(double);
  memcpy(n->pinned_f64, buf, bytes);
  e = cudaMemcpyAsync(n->dev_f64, n->pinned_f64, bytes, cudaMemcpyHostToDevice, n->stream);
  if (e != cudaSuccess) return cuda_fail(c, "allreduce (host)", e, err);
  CT_TRY(enqueued(c, ncclAllReduce(n->dev_f64, n->dev_f64, count, ncclDouble, ncclSum, n->comm, n->stream),
                  "allreduce (host)", err));
  e = cudaMemcpyAsync(n->pinned_f64, n->dev_f64, bytes, cudaMemcpyDeviceToHost, n->stream);
  if (e != cudaSuccess) return cuda_fail(c, "allreduce (host)", e, err);
  CT_TRY(nccl_wait(c, NULL, err));
  memcpy(buf, n->pinned_f64, bytes);
  return CT_OK;
}

static ct_status nccl_barrier(ct_comm *c, ct_error *err) {
  double one = 1.0;
  return nccl_host_f64(c, &one, 1, err);
}

static void nccl_abort(ct_comm *c) { abort_comm(c, "by its own rank"); }

static void nccl_destroy(ct_comm *c) {
  nccl_comm *n = priv(c);
  cudaSetDevice(n->device);
  if (n->comm) {
    ct_error err;
    ncclResult_t r = ncclCommFinalize(n->comm);
    if ((r == ncclSuccess || r == ncclInProgress) && wait_state(c, "finalize", &err) == CT_OK && n->comm)
      ncclCommDestroy(n->comm);
    else
      abort_comm(c, "at destruction");
    n->comm = NULL;
  }
  if (n->done) cudaEventDestroy(n->done);
  if (n->stream) cudaStreamDestroy(n->stream);
  if (n->dev_f64) cudaFree(n->dev_f64);
  if (n->pinned_f64) cudaFreeHost(n->pinned_f64);
  free(n);
  free(c);
}

static const ct_comm_ops k_nccl_ops = {.name = "nccl",
                                       .allreduce = nccl_allreduce,
                                       .broadcast = nccl_broadcast,
                                       .allreduce_host_f64 = nccl_host_f64,
                                       .barrier = nccl_barrier,
                                       .wait = nccl_wait,
                                       .abort = nccl_abort,
                                       .destroy = nccl_destroy,
                                       .allreduce_typed = nccl_allreduce_typed};

extern "C" ct_status ct_nccl_unique_id(ct_nccl_id *id, ct_error *err) {
  pthread_once(&g_env_once, set_nccl_env);
  ncclUniqueId uid;
  ncclResult_t r = ncclGetUniqueId(&uid);
  if (r != ncclSuccess)
    return ct_error_set(err, CT_ERR_DEVICE, "ncclGetUniqueId failed: %s: %s", ncclGetErrorString(r),
                        ncclGetLastError(NULL));
  memcpy(id->bytes, &uid, sizeof uid);
  return CT_OK;
}

extern "C" ct_status ct_comm_nccl_create(ct_comm **out, const ct_nccl_id *id, int rank, int size,
                                         int device, const ct_comm_nccl_opts *opts, ct_error *err) {
  *out = NULL;
  pthread_once(&g_env_once, set_nccl_env);
  CT_TRY(ct_gpu_set_device(device, err));
  ct_comm *c = (ct_comm *)ct_xcalloc(1, sizeof *c);
  nccl_comm *n = (nccl_comm *)ct_xcalloc(1, sizeof *n);
  c->ops = &k_nccl_ops;
  c->rank = rank;
  c->size = size;
  c->priv = n;
  c->timeout_s = opts && opts->timeout_s > 0 ? opts->timeout_s : ct_comm_default_timeout();
  c->cancel = opts ? opts->cancel : NULL;
  n->device = device;
  ct_status st = CT_OK;
  cudaError_t e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming);
  if (e != cudaSuccess) st = cuda_fail(c, "init", e, err);
  if (st == CT_OK) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    if (opts && opts->max_ctas > 0) cfg.maxCTAs = opts->max_ctas;
    ncclUniqueId uid;
    memcpy(&uid, id->bytes, sizeof uid);
    ncclResult_t r = ncclCommInitRankConfig(&n->comm, size, uid, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
      st = ct_error_set(err, CT_ERR_COMM, "NCCL init on rank %d of %d (GPU %d) failed: %s: %s", rank,
                        size, device, ncclGetErrorString(r), ncclGetLastError(n->comm));
      if (n->comm) abort_comm(c, "after a failed init");
    } else {
      st = wait_state(c, "init", err);
    }
  }
  if (st != CT_OK) {
    nccl_destroy(c);
    return st;
  }
  *out = c;
  return CT_OK;
}

extern "C" void *ct_comm_nccl_stream(const ct_comm *c) { return priv(c)->stream; }

extern "C" const char *ct_nccl_version(void) {
  static char text[32];
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  snprintf(text, sizeof text, "%d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
  return text;
}
