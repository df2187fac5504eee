/* Communicators: the few collectives data parallelism needs, behind one small
 * interface with several back ends:
 *   - "local":   one worker, every collective a no-op (single-process runs);
 *   - "threads": host buffers shared by the threads of one process (CPU
 *                workers in one process; tests of the threaded driver);
 *   - "mpi":     host buffers through MPI (CPU workers, `mpirun -np N`);
 *   - "nccl":    device buffers through NCCL on a communication stream (GPUs,
 *                threads of one process or processes of many machines);
 *   - "gloo":    host buffers through Gloo's TCP transport after a file-store or
 *                Redis rendezvous (Caffe2-style shards).
 *
 * Every operation is collective: all ranks call it in the same order.  A
 * failure (a dead peer, a timeout, an aborted communicator) returns
 * CT_ERR_COMM with a message naming the back end, the operation and the
 * rank; it never hangs past the communicator's timeout.  When the
 * communicator's cancel flag (shared by the workers of one process) turns
 * non-zero, pending and later waits give up with CT_ERR_INTERRUPTED: another
 * worker has failed and the caller reports that worker's error instead.
 *
 * Device back ends only enqueue work on the given stream (NULL: the
 * communicator's own stream); ct_comm_wait blocks until that stream's work
 * is done, under the watchdog.  Host back ends finish each call before
 * returning, and their wait is a no-op. */
#ifndef CT_PARALLEL_COMM_H
#define CT_PARALLEL_COMM_H

#include <stddef.h>

#include "core/dtype.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_comm ct_comm;

/* The reduction of an all-reduce. */
typedef enum ct_comm_op {
  CT_COMM_SUM = 0, /* the sum over ranks */
  CT_COMM_AVG = 1  /* the sum over ranks divided by the rank count */
} ct_comm_op;

typedef struct ct_comm_ops {
  const char *name;
  /* In place: buf (count floats, on the back end's kind of memory) becomes
   * the reduction over ranks; every rank gets the same values.  `stream` is
   * a cudaStream_t for NCCL (the call only enqueues work on it; NULL means
   * the communicator's stream), ignored elsewhere. */
  ct_status (*allreduce)(ct_comm *c, float *buf, size_t count, ct_comm_op op, void *stream,
                         ct_error *err);
  /* In place: buf becomes root's values. */
  ct_status (*broadcast)(ct_comm *c, float *buf, size_t count, int root, void *stream,
                         ct_error *err);
  /* Host doubles, summed over ranks (for losses, accuracies, flags); done on
   * return. */
  ct_status (*allreduce_host_f64)(ct_comm *c, double *buf, size_t count, ct_error *err);
  ct_status (*barrier)(ct_comm *c, ct_error *err);
  /* Blocks until the work enqueued on stream is done (device back ends),
   * with the watchdog; a no-op for host back ends. */
  ct_status (*wait)(ct_comm *c, void *stream, ct_error *err);
  /* Best effort: make this rank's pending and future collectives fail fast
   * and, where the back end can, the other ranks' too (used when this rank
   * has failed).  MPI's abort ends the whole job. */
  void (*abort)(ct_comm *c);
  void (*destroy)(ct_comm *c);
  /* Point to point (pipeline stages; NULL where the back end has none):
   * send gives buf (count floats) to rank peer, recv fills buf from it;
   * messages between two ranks with the same tag arrive in the order they
   * were sent.  Done on return for host back ends. */
  ct_status (*send)(ct_comm *c, const float *buf, size_t count, int peer, int tag, void *stream,
                    ct_error *err);
  ct_status (*recv)(ct_comm *c, float *buf, size_t count, int peer, int tag, void *stream,
                    ct_error *err);
  /* A send that returns at once: *req gets what send_wait completes (NULL:
   * done already); buf must stay as it is until then. */
  ct_status (*isend)(ct_comm *c, const float *buf, size_t count, int peer, int tag, void **req,
                     ct_error *err);
  ct_status (*send_wait)(ct_comm *c, void *req, ct_error *err);
  /* Whether isend's req is done, without waiting (*done; done frees req
   * as send_wait does); it also moves the back end's transfers along (MPI
   * moves a large message only inside its calls).  NULL where the back end
   * has none. */
  ct_status (*send_test)(ct_comm *c, void *req, bool *done, ct_error *err);
  /* A receive posted ahead: returns at once, *req gets a request that
   * send_wait or send_test completes as they complete a send's (buf is
   * written until then).  NULL where the back end has none. */
  ct_status (*irecv)(ct_comm *c, float *buf, size_t count, int peer, int tag, void **req,
                     ct_error *err);
  /* Blocks (under the watchdog) until a message with this tag from any
   * rank can be received: *peer gets its sender, *count its length in
   * floats; the message stays to be taken by recv (a parameter server
   * serving whichever worker comes first).  NULL where the back end has
   * none. */
  ct_status (*probe)(ct_comm *c, int tag, int *peer, size_t *count, ct_error *err);
  /* probe stops listening to rank peer (one that died, or never sends what
   * is probed for): Gloo's wait from any rank fails when any of them drops
   * its connection.  NULL where probe needs no telling (MPI's). */
  void (*forget_peer)(ct_comm *c, int peer);
  /* allreduce of count values of type (core/dtype.h) at buf (device back
   * ends, in 16-bit types: half the bytes of float32); NULL where the back
   * end has none. */
  ct_status (*allreduce_typed)(ct_comm *c, void *buf, size_t count, ct_dtype type, ct_comm_op op,
                               void *stream, ct_error *err);
  /* Collective over c: the ranks that give the same color form a new
   * communicator *out (freed with ct_comm_free, before c), ranked by key,
   * then by their rank in c; it keeps c's watchdog.  NULL where the back end
   * has none. */
  ct_status (*split)(ct_comm *c, int color, int key, ct_comm **out, ct_error *err);
} ct_comm_ops;

struct ct_comm {
  const ct_comm_ops *ops;
  int rank;
  int size;
  /* Watchdog: a wait gives up after timeout_s seconds without completion
   * (set at creation from ct_comm_default_timeout()). */
  double timeout_s;
  /* Optional (NULL): read atomically; non-zero means "another worker of this
   * process failed: stop waiting". */
  const int *cancel;
  void *priv;
};

/* A world of one: every collective returns at once. */
ct_comm *ct_comm_local(void);

/* The watchdog default: CORTADO_COMM_TIMEOUT (seconds, > 0) from the
 * environment, else 300. */
double ct_comm_default_timeout(void);

/* Sets the watchdog of c: timeout_s > 0 replaces the timeout; cancel (may be
 * NULL) is the flag its waits watch. */
void ct_comm_set_watchdog(ct_comm *c, double timeout_s, const int *cancel);

/* True when c's cancel flag is set. */
int ct_comm_cancelled(const ct_comm *c);

static inline ct_status ct_comm_allreduce(ct_comm *c, float *buf, size_t count, ct_comm_op op,
                                          void *stream, ct_error *err) {
  return c->ops->allreduce(c, buf, count, op, stream, err);
}
/* ct_comm_ops.allreduce_typed; float32 goes to allreduce.  CT_ERR_UNSUPPORTED
 * naming the back end where it has no typed all-reduce. */
ct_status ct_comm_allreduce_typed(ct_comm *c, void *buf, size_t count, ct_dtype type, ct_comm_op op,
                                  void *stream, ct_error *err);
static inline ct_status ct_comm_allreduce_sum(ct_comm *c, float *buf, size_t count, void *stream,
                                              ct_error *err) {
  return c->ops->allreduce(c, buf, count, CT_COMM_SUM, stream, err);
}
static inline ct_status ct_comm_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream,
                                          ct_error *err) {
  return c->ops->broadcast(c, buf, count, root, stream, err);
}
static inline ct_status ct_comm_allreduce_host_f64(ct_comm *c, double *buf, size_t count, ct_error *err) {
  return c->ops->allreduce_host_f64(c, buf, count, err);
}
static inline ct_status ct_comm_barrier(ct_comm *c, ct_error *err) { return c->ops->barrier(c, err); }
static inline ct_status ct_comm_wait(ct_comm *c, void *stream, ct_error *err) {
  return c->ops->wait(c, stream, err);
}
static inline void ct_comm_abort(ct_comm *c) { c->ops->abort(c); }
/* Point to point (see ct_comm_ops.send and .recv).  CT_ERR_UNSUPPORTED
 * naming the back end where it has none. */
ct_status ct_comm_send(ct_comm *c, const float *buf, size_t count, int peer, int tag, void *stream,
                       ct_error *err);
ct_status ct_comm_recv(ct_comm *c, float *buf, size_t count, int peer, int tag, void *stream,
                       ct_error *err);
/* A send that returns at once (ct_comm_ops.isend); ct_comm_send_wait(c,
 * req) completes it under the watchdog (req NULL: nothing).  Back ends
 * without one send at once (blocking) and give req NULL. */
ct_status ct_comm_isend(ct_comm *c, const float *buf, size_t count, int peer, int tag, void **req,
                        ct_error *err);
ct_status ct_comm_send_wait(ct_comm *c, void *req, ct_error *err);
/* Whether the send of req is done, without waiting (ct_comm_ops.send_test;
 * *done true: req is freed and must not be waited for).  Back ends without
 * the test say not done.  Errors: the back end's (the send failed). */
ct_status ct_comm_send_test(ct_comm *c, void *req, bool *done, ct_error *err);
/* Whether the back end posts receives ahead (ct_comm_ops.irecv). */
bool ct_comm_has_irecv(const ct_comm *c);
/* A receive posted ahead (ct_comm_ops.irecv; the back end must have it):
 * ct_comm_send_wait / ct_comm_send_test complete *req.  Errors: the back
 * end's. */
ct_status ct_comm_irecv(ct_comm *c, float *buf, size_t count, int peer, int tag, void **req,
                        ct_error *err);
/* The next message with `tag` from any rank (ct_comm_ops.probe): its
 * sender and length, left for ct_comm_recv.  CT_ERR_UNSUPPORTED naming the
 * back end where it has none; CT_ERR_COMM after the watchdog's timeout. */
ct_status ct_comm_probe(ct_comm *c, int tag, int *peer, size_t *count, ct_error *err);
/* ct_comm_ops.forget_peer, where the back end has it. */
void ct_comm_forget_peer(ct_comm *c, int peer);
/* ct_comm_ops.split: the sub-communicator of the ranks with this color.
 * CT_ERR_UNSUPPORTED naming the back end where it has none; else the back
 * end's errors. */
ct_status ct_comm_split(ct_comm *c, int color, int key, ct_comm **out, ct_error *err);
void ct_comm_free(ct_comm *c);

/* ------------------------------------------------------------ threads */

/* The shared state of a "threads" communicator: `size` ranks, one per thread
 * of this process.  Reductions add the ranks' values in rank order, so every
 * rank gets bit-identical results.  The group is reference counted: the
 * creator holds one reference (release it with ct_comm_threads_group_release)
 * and each communicator made from it another. */
typedef struct ct_comm_threads_group ct_comm_threads_group;

ct_comm_threads_group *ct_comm_threads_group_create(int size);
void ct_comm_threads_group_release(ct_comm_threads_group *g);
/* The communicator of one rank (0 <= rank < size); call from any thread,
 * once per rank.  Free with ct_comm_free.  Aborting any rank's communicator
 * makes every rank's pending and later collectives fail with CT_ERR_COMM. */
ct_comm *ct_comm_threads_create(ct_comm_threads_group *g, int rank);

#ifdef __cplusplus
}
#endif

#endif
