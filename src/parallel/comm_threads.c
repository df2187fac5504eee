/* The "threads" back end of ct_comm: ranks are threads of one process that
 * exchange host buffers through shared memory.
 *
 * A collective is two barriers: every rank publishes its buffer pointer and
 * arrives; each rank then reduces its own slice of the buffers (adding the
 * ranks in rank order, so all get identical bits) and writes the result into
 * every rank's buffer; a second barrier keeps the buffers alive until all
 * slices are written.  Barriers wait on a condition variable in short slices
 * so that the timeout and the cancel flag are noticed. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "parallel/comm.h"

struct ct_comm_threads_group {
  int size;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned long generation; /* barriers completed */
  int arrived;              /* ranks waiting in the current barrier */
  int broken;               /* an abort or a timeout: every collective fails */
  int broken_by;            /* the rank that aborted, or -1 for a timeout */
  void **slots;             /* (size) each rank's buffer in the current collective */
  int refs;
};

typedef struct threads_comm {
  ct_comm_threads_group *g;
} threads_comm;

ct_comm_threads_group *ct_comm_threads_group_create(int size) {
  CT_ASSERT(size >= 1);
  ct_comm_threads_group *g = ct_xcalloc(1, sizeof *g);
  g->size = size;
  g->slots = ct_xcalloc((size_t)size, sizeof(void *));
  g->refs = 1;
  g->broken_by = -1;
  pthread_mutex_init(&g->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cv, &attr);
  pthread_condattr_destroy(&attr);
  return g;
}

void ct_comm_threads_group_release(ct_comm_threads_group *g) {
  if (!g) return;
  pthread_mutex_lock(&g->mu);
  int left = --g->refs;
  pthread_mutex_unlock(&g->mu);
  if (left > 0) return;
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g->slots);
  free(g);
}

static ct_status broken_error(const ct_comm *c, const char *what, ct_error *err) {
  const ct_comm_threads_group *g = ((threads_comm *)c->priv)->g;
  if (g->broken_by >= 0)
    return ct_error_set(err, CT_ERR_COMM, "threads %s on rank %d: rank %d aborted the communicator",
                        what, c->rank, g->broken_by);
  return ct_error_set(err, CT_ERR_COMM,
                      "threads %s on rank %d: the communicator broke after a timeout", what, c->rank);
}

/* Waits until all ranks arrive.  Called with g->mu unlocked. */
static ct_status barrier(ct_comm *c, const char *what, ct_error *err) {
  ct_comm_threads_group *g = ((threads_comm *)c->priv)->g;
  pthread_mutex_lock(&g->mu);
  if (g->broken) {
    ct_status st = broken_error(c, what, err);
    pthread_mutex_unlock(&g->mu);
    return st;
  }
  unsigned long gen = g->generation;
  if (++g->arrived == g->size) {
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return CT_OK;
  }
  const double deadline = ct_monotonic_s() + c->timeout_s;
  ct_status st = CT_OK;
  while (g->generation == gen) {
    if (g->broken) {
      st = broken_error(c, what, err);
      break;
    }
    if (ct_comm_cancelled(c)) {
      g->broken = 1;
      pthread_cond_broadcast(&g->cv);
      st = ct_error_set(err, CT_ERR_INTERRUPTED, "threads %s on rank %d: cancelled", what, c->rank);
      break;
    }
    double now = ct_monotonic_s();
    if (now >= deadline) {
      g->broken = 1;
      pthread_cond_broadcast(&g->cv);
      st = ct_error_set(err, CT_ERR_COMM,
                        "threads %s on rank %d: only %d of %d ranks arrived within %g s", what, c->rank,
                        g->arrived, g->size, c->timeout_s);
      break;
    }
    double until = now + 0.05 < deadline ? now + 0.05 : deadline;
    struct timespec ts;
    ts.tv_sec = (time_t)until;
    ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
    int rc = pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    CT_ASSERT(rc == 0 || rc == ETIMEDOUT);
  }
  pthread_mutex_unlock(&g->mu);
  return st;
}

/* This rank's share [lo, hi) of count values. */
static void slice(const ct_comm *c, size_t count, size_t *lo, size_t *hi) {
  *lo = count * (size_t)c->rank / (size_t)c->size;
  *hi = count * (size_t)(c->rank + 1) / (size_t)c->size;
}

#define CT_THREADS_BLOCK 512

static void reduce_f32(void *const *slots, int size, size_t lo, size_t hi, ct_comm_op op) {
  float acc[CT_THREADS_BLOCK];
  for (size_t i = lo; i < hi; i += CT_THREADS_BLOCK) {
    size_t n = hi - i < CT_THREADS_BLOCK ? hi - i : CT_THREADS_BLOCK;
    memcpy(acc, (const float *)slots[0] + i, n * sizeof(float));
    for (int k = 1; k < size; k++) {
      const float *src = (const float *)slots[k] + i;
      for (size_t j = 0; j < n; j++) acc[j] += src[j];
    }
    if (op == CT_COMM_AVG)
      for (size_t j = 0; j < n; j++) acc[j] /= (float)size;
    for (int k = 0; k < size; k++) memcpy((float *)slots[k] + i, acc, n * sizeof(float));
  }
}

static void reduce_f64(void *const *slots, int size, size_t lo, size_t hi) {
  double acc[CT_THREADS_BLOCK];
  for (size_t i = lo; i < hi; i += CT_THREADS_BLOCK) {
    size_t n = hi - i < CT_THREADS_BLOCK ? hi - i : CT_THREADS_BLOCK;
    memcpy(acc, (const double *)slots[0] + i, n * sizeof(double));
    for (int k = 1; k < size; k++) {
      const double *src = (const double *)slots[k] + i;
      for (size_t j = 0; j < n; j++) acc[j] += src[j];
    }
    for (int k = 0; k < size; k++) memcpy((double *)slots[k] + i, acc, n * sizeof(double));
  }
}

static ct_status threads_allreduce(ct_comm *c, float *buf, size_t count, ct_comm_op op, void *stream,
                                   ct_error *err) {
  ct_comm_threads_group *g = ((threads_comm *)c->priv)->g;
  g->slots[c->rank] = buf;
  CT_TRY(barrier(c, "allreduce", err));
  size_t lo, hi;
  slice(c, count, &lo, &hi);
  reduce_f32(g->slots, g->size, lo, hi, op);
  return barrier(c, "allreduce", err);
}

static ct_status threads_host_f64(ct_comm *c, double *buf, size_t count, ct_error *err) {
  ct_comm_threads_group *g = ((threads_comm *)c->priv)->g;
  g->slots[c->rank] = buf;
  CT_TRY(barrier(c, "allreduce (host)", err));
  size_t lo, hi;
  slice(c, count, &lo, &hi);
  reduce_f64(g->slots, g->size, lo, hi);
  return barrier(c, "allreduce (host)", err);
}

static ct_status threads_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream,
                                   ct_error *err) {
  ct_comm_threads_group *g = ((threads_comm *)c->priv)->g;
  g->slots[c->rank] = buf;
  CT_TRY(barrier(c, "broadcast", err));
  if (c->rank != root && count) memcpy(buf, g->slots[root], count * sizeof(float));
  return barrier(c, "broadcast", err);
}

static ct_status threads_barrier(ct_comm *c, ct_error *err) { return barrier(c, "barrier", err); }
static ct_status threads_wait(ct_comm *c, void *stream, ct_error *err) { return CT_OK; }

static void threads_abort(ct_comm *c) {
  ct_comm_threads_group *g = ((threads_comm *)c->priv)->g;
  pthread_mutex_lock(&g->mu);
  if (!g->broken) g->broken_by = c->rank;
  g->broken = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void threads_destroy(ct_comm *c) {
  threads_comm *t = c->priv;
  ct_comm_threads_group_release(t->g);
  free(t);
  free(c);
}

static const ct_comm_ops k_threads_ops = {"threads",        threads_allreduce, threads_broadcast,
                                          threads_host_f64, threads_barrier,   threads_wait,
                                          threads_abort,    threads_destroy};

ct_comm *ct_comm_threads_create(ct_comm_threads_group *g, int rank) {
  CT_ASSERT(rank >= 0 && rank < g->size);
  pthread_mutex_lock(&g->mu);
  g->refs++;
  pthread_mutex_unlock(&g->mu);
  threads_comm *t = ct_xcalloc(1, sizeof *t);
  t->g = g;
  ct_comm *c = ct_xcalloc(1, sizeof *c);
  c->ops = &k_threads_ops;
  c->rank = rank;
  c->size = g->size;
  c->timeout_s = ct_comm_default_timeout();
  c->priv = t;
  return c;
}
