/* The communicator interface's shared parts and the "local" back end. */
#include "parallel/comm.h"

#include <stdlib.h>

#include "core/settings.h"

static ct_status local_allreduce(ct_comm *c, float *buf, size_t count, ct_comm_op op, void *stream,
                                 ct_error *err) {
  return CT_OK;
}
static ct_status local_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream,
                                 ct_error *err) {
  return CT_OK;
}
static ct_status local_host(ct_comm *c, double *buf, size_t count, ct_error *err) { return CT_OK; }
static ct_status local_barrier(ct_comm *c, ct_error *err) { return CT_OK; }
static ct_status local_wait(ct_comm *c, void *stream, ct_error *err) { return CT_OK; }
static void local_abort(ct_comm *c) {}
static void local_destroy(ct_comm *c) { free(c); }

static const ct_comm_ops k_local_ops = {"local",       local_allreduce, local_broadcast,
                                        local_host,    local_barrier,   local_wait,
                                        local_abort,   local_destroy};

ct_comm *ct_comm_local(void) {
  ct_comm *c = ct_xcalloc(1, sizeof *c);
  c->ops = &k_local_ops;
  c->rank = 0;
  c->size = 1;
  c->timeout_s = ct_comm_default_timeout();
  return c;
}

double ct_comm_default_timeout(void) {
  return ct_setting_number("CORTADO_COMM_TIMEOUT");
}

void ct_comm_set_watchdog(ct_comm *c, double timeout_s, const int *cancel) {
  if (timeout_s > 0) c->timeout_s = timeout_s;
  c->cancel = cancel;
}

int ct_comm_cancelled(const ct_comm *c) {
  return c->cancel ? __atomic_load_n(c->cancel, __ATOMIC_ACQUIRE) : 0;
}

void ct_comm_free(ct_comm *c) {
  if (c) c->ops->destroy(c);
}

ct_status ct_comm_allreduce_typed(ct_comm *c, void *buf, size_t count, ct_dtype type, ct_comm_op op,
                                  void *stream, ct_error *err) {
  if (type == CT_F32) return c->ops->allreduce(c, buf, count, op, stream, err);
  if (!c->ops->allreduce_typed)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "the %s communicator cannot all-reduce %s",
                        c->ops->name, ct_dtype_name(type));
  return c->ops->allreduce_typed(c, buf, count, type, op, stream, err);
}

ct_status ct_comm_send(ct_comm *c, const float *buf, size_t count, int peer, int tag, void *stream,
                       ct_error *err) {
  if (!c->ops->send)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "the %s communicator has no point-to-point send",
                        c->ops->name);
  return c->ops->send(c, buf, count, peer, tag, stream, err);
}

ct_status ct_comm_recv(ct_comm *c, float *buf, size_t count, int peer, int tag, void *stream,
                       ct_error *err) {
  if (!c->ops->recv)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "the %s communicator has no point-to-point receive",
                        c->ops->name);
  return c->ops->recv(c, buf, count, peer, tag, stream, err);
}

ct_status ct_comm_isend(ct_comm *c, const float *buf, size_t count, int peer, int tag, void **req,
                        ct_error *err) {
  *req = NULL;
  if (!c->ops->isend) return ct_comm_send(c, buf, count, peer, tag, NULL, err);
  return c->ops->isend(c, buf, count, peer, tag, req, err);
}

ct_status ct_comm_send_wait(ct_comm *c, void *req, ct_error *err) {
  if (!req) return CT_OK;
  CT_ASSERT(c->ops->send_wait);
  return c->ops->send_wait(c, req, err);
}

bool ct_comm_has_irecv(const ct_comm *c) { return c->ops->irecv != NULL; }

ct_status ct_comm_irecv(ct_comm *c, float *buf, size_t count, int peer, int tag, void **req,
                        ct_error *err) {
  CT_ASSERT(c->ops->irecv && peer >= 0 && peer < c->size && peer != c->rank);
  return c->ops->irecv(c, buf, count, peer, tag, req, err);
}

ct_status ct_comm_send_test(ct_comm *c, void *req, bool *done, ct_error *err) {
  *done = false;
  if (!req || !c->ops->send_test) {
    *done = !req;
    return CT_OK;
  }
  return c->ops->send_test(c, req, done, err);
}

void ct_comm_forget_peer(ct_comm *c, int peer) {
  CT_ASSERT(peer >= 0 && peer < c->size && peer != c->rank);
  if (c->ops->forget_peer) c->ops->forget_peer(c, peer);
}

ct_status ct_comm_probe(ct_comm *c, int tag, int *peer, size_t *count, ct_error *err) {
  if (!c->ops->probe)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "the %s communicator cannot wait for a message from any rank",
                        c->ops->name);
  return c->ops->probe(c, tag, peer, count, err);
}

ct_status ct_comm_split(ct_comm *c, int color, int key, ct_comm **out, ct_error *err) {
  *out = NULL;
  if (!c->ops->split)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "the %s communicator cannot be split into groups",
                        c->ops->name);
  return c->ops->split(c, color, key, out, err);
}
