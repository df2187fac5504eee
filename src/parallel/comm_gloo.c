/* ct_comm over Gloo (see comm_gloo.h): the collectives of comm.h mapped onto
 * the shim's, with messages naming the back end, the operation and the rank. */
#include "parallel/comm_gloo.h"

#include <stdlib.h>
#include <string.h>

typedef struct gloo_comm {
  ct_gloo_context *ctx;
  int aborted;
} gloo_comm;

static ct_status op_failed(ct_comm *c, const char *op, ct_error *err) {
  if (err && strstr(err->msg, "Timed out"))
    ct_error_prefix(err, "gloo %s on rank %d: not finished after %g s (another shard died, hangs or "
                         "is far behind; --comm_timeout or CORTADO_COMM_TIMEOUT sets the limit)",
                    op, c->rank, c->timeout_s);
  else
    ct_error_prefix(err, "gloo %s on rank %d", op, c->rank);
  return err ? err->code : CT_ERR_COMM;
}

static ct_status check_usable(ct_comm *c, const char *op, ct_error *err) {
  gloo_comm *g = c->priv;
  if (__atomic_load_n(&g->aborted, __ATOMIC_ACQUIRE))
    return ct_error_set(err, CT_ERR_COMM, "gloo %s on rank %d: the communicator was aborted", op, c->rank);
  if (ct_comm_cancelled(c))
    return ct_error_set(err, CT_ERR_INTERRUPTED, "gloo %s on rank %d: cancelled", op, c->rank);
  return CT_OK;
}

static ct_status gloo_allreduce(ct_comm *c, float *buf, size_t count, ct_comm_op op, void *stream,
                                ct_error *err) {
  gloo_comm *g = c->priv;
  CT_TRY(check_usable(c, "allreduce", err));
  if (ct_gloo_allreduce_sum_f32(g->ctx, buf, count, err) != CT_OK) return op_failed(c, "allreduce", err);
  if (op == CT_COMM_AVG && c->size > 1) {
    const float n = (float)c->size;
    for (size_t i = 0; i < count; i++) buf[i] /= n;
  }
  return CT_OK;
}

static ct_status gloo_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream,
                                ct_error *err) {
  gloo_comm *g = c->priv;
  CT_TRY(check_usable(c, "broadcast", err));
  if (ct_gloo_broadcast_f32(g->ctx, buf, count, root, err) != CT_OK) return op_failed(c, "broadcast", err);
  return CT_OK;
}

static ct_status gloo_host_f64(ct_comm *c, double *buf, size_t count, ct_error *err) {
  gloo_comm *g = c->priv;
  CT_TRY(check_usable(c, "allreduce (host)", err));
  if (ct_gloo_allreduce_sum_f64(g->ctx, buf, count, err) != CT_OK) return op_failed(c, "allreduce (host)", err);
  return CT_OK;
}

static ct_status gloo_barrier(ct_comm *c, ct_error *err) {
  gloo_comm *g = c->priv;
  CT_TRY(check_usable(c, "barrier", err));
  if (ct_gloo_barrier(g->ctx, err) != CT_OK) return op_failed(c, "barrier", err);
  return CT_OK;
}

static ct_status gloo_wait(ct_comm *c, void *stream, ct_error *err) { return CT_OK; }

/* Later collectives of this rank fail at once; the peers notice when this
 * process closes its connections (ct_comm_free or exit). */
static void gloo_abort(ct_comm *c) {
  gloo_comm *g = c->priv;
  __atomic_store_n(&g->aborted, 1, __ATOMIC_RELEASE);
}

static void gloo_destroy(ct_comm *c) {
  gloo_comm *g = c->priv;
  ct_gloo_context_free(g->ctx);
  free(g);
  free(c);
}

static const ct_comm_ops k_gloo_ops = {"gloo",       gloo_allreduce, gloo_broadcast, gloo_host_f64,
                                       gloo_barrier, gloo_wait,      gloo_abort,     gloo_destroy};

ct_status ct_comm_gloo_create(ct_comm **out, ct_gloo_store *store, int rank, int size,
                              const ct_gloo_bind *bind, double connect_timeout_s, double timeout_s,
                              ct_error *err) {
  *out = NULL;
  CT_ASSERT(size >= 1 && rank >= 0 && rank < size);
  const double op_timeout = timeout_s > 0 ? timeout_s : ct_comm_default_timeout();
  ct_gloo_context *ctx = NULL;
  if (ct_gloo_connect(&ctx, store, rank, size, bind, connect_timeout_s, op_timeout, err) != CT_OK)
    return ct_error_prefix(err, "gloo connect on rank %d", rank);
  gloo_comm *g = ct_xcalloc(1, sizeof *g);
  g->ctx = ctx;
  ct_comm *c = ct_xcalloc(1, sizeof *c);
  c->ops = &k_gloo_ops;
  c->rank = rank;
  c->size = size;
  c->timeout_s = op_timeout;
  c->priv = g;
  *out = c;
  return CT_OK;
}

const char *ct_comm_gloo_address(const ct_comm *c) {
  const gloo_comm *g = c->priv;
  return ct_gloo_context_address(g->ctx);
}
