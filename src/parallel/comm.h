/* Communicators: the few collectives data parallelism needs, behind one small
 * interface with several back ends:
 *   - "local": one worker, every collective a no-op (single-process runs);
 *   - "mpi":   host buffers through MPI (CPU workers, `mpirun -np N`);
 *   - "nccl":  device buffers through NCCL on a communication stream (GPUs,
 *              threads of one process or processes of many machines);
 *   - "gloo":  host buffers through Gloo's TCP transport after a file-store or
 *              Redis rendezvous (Caffe2-style shards).
 *
 * Every operation is collective: all ranks call it in the same order.  A
 * failure (a dead peer, a timeout, an aborted communicator) returns
 * CT_ERR_COMM with a message naming the back end, the operation and, when
 * known, the peer; it never hangs past the communicator's timeout. */
#ifndef CT_PARALLEL_COMM_H
#define CT_PARALLEL_COMM_H

#include <stddef.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_comm ct_comm;

typedef struct ct_comm_ops {
  const char *name;
  /* In place: buf (count floats, on the back end's kind of memory) becomes
   * the sum over ranks.  `stream` is a cudaStream_t for NCCL (the call only
   * enqueues work on it), ignored elsewhere. */
  ct_status (*allreduce_sum)(ct_comm *c, float *buf, size_t count, void *stream, ct_error *err);
  /* In place: buf becomes root's values. */
  ct_status (*broadcast)(ct_comm *c, float *buf, size_t count, int root, void *stream, ct_error *err);
  /* Host doubles, summed over ranks (for losses, accuracies, counters). */
  ct_status (*allreduce_host_f64)(ct_comm *c, double *buf, size_t count, ct_error *err);
  ct_status (*barrier)(ct_comm *c, ct_error *err);
  /* Best effort: make every rank's pending and future collectives fail fast
   * (used when this rank has failed). */
  void (*abort)(ct_comm *c);
  void (*destroy)(ct_comm *c);
} ct_comm_ops;

struct ct_comm {
  const ct_comm_ops *ops;
  int rank;
  int size;
  void *priv;
};

/* A world of one: every collective returns at once. */
ct_comm *ct_comm_local(void);

static inline ct_status ct_comm_allreduce_sum(ct_comm *c, float *buf, size_t count, void *stream,
                                              ct_error *err) {
  return c->ops->allreduce_sum(c, buf, count, stream, err);
}
static inline ct_status ct_comm_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream,
                                          ct_error *err) {
  return c->ops->broadcast(c, buf, count, root, stream, err);
}
static inline ct_status ct_comm_allreduce_host_f64(ct_comm *c, double *buf, size_t count, ct_error *err) {
  return c->ops->allreduce_host_f64(c, buf, count, err);
}
static inline ct_status ct_comm_barrier(ct_comm *c, ct_error *err) { return c->ops->barrier(c, err); }
static inline void ct_comm_abort(ct_comm *c) { c->ops->abort(c); }
void ct_comm_free(ct_comm *c);

#ifdef __cplusplus
}
#endif

#endif
