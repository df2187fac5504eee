/* ct_comm over Gloo (see comm_gloo.h): the collectives of comm.h mapped onto
 * the shim's, with messages naming the back end, the operation and the rank. */
#include "parallel/comm_gloo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message header that probe has taken from the transport and recv has not
 * yet: its sender, tag and length in floats. */
typedef struct probed {
  int peer, tag;
  size_t count;
} probed;

typedef struct gloo_comm {
  ct_gloo_context *ctx;
  ct_gloo_store *store; /* borrowed: the run's store, for splits */
  char prefix[96];      /* the store keys of this mesh ("" for the run's own) */
  int splits;           /* splits made so far (the same count on every rank) */
  int aborted;
  probed *probed; /* oldest first */
  int nprobed, cap;
} gloo_comm;

static ct_status op_failed(ct_comm *c, const char *op, ct_error *err) {
  if (err && err->code == CT_ERR_INTERRUPTED) /* a receive its cancel word cut short */
    return ct_error_set(err, CT_ERR_INTERRUPTED, "gloo %s on rank %d: cancelled", op, c->rank);
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
  free(g->probed);
  free(g);
  free(c);
}

/* ---------------------------------------------------------------- point to point
 *
 * Gloo has no probe and a receive must name the byte count, so each message
 * goes as a header (magic, tag, length in floats) in the tag's header slot,
 * then its floats in the tag's payload slot (none for 0 floats).  Messages
 * from one rank in one slot arrive in order, so the k-th payload follows the
 * k-th header.  probe takes the next header from whichever rank sends first
 * and keeps it for the recv that names that rank and tag.  One thread
 * receives a tag at a time. */
#define P2P_MAGIC 0x50544743u /* "CGTP" */
static uint64_t header_slot(int tag) { return (UINT64_C(0x70) << 56) | (uint32_t)tag; }
static uint64_t payload_slot(int tag) { return (UINT64_C(0x71) << 56) | (uint32_t)tag; }

typedef struct p2p_header {
  uint32_t magic, tag, count_lo, count_hi;
} p2p_header;

static p2p_header header_of(int tag, size_t count) {
  return (p2p_header){P2P_MAGIC, (uint32_t)tag, (uint32_t)count, (uint32_t)((uint64_t)count >> 32)};
}
static size_t count_of(const p2p_header *h) { return (size_t)h->count_lo | ((size_t)h->count_hi << 32); }

static ct_status check_header(ct_comm *c, const p2p_header *h, int peer, int tag, ct_error *err);

/* A send or a receive posted ahead, in flight: its header (which must
 * outlive it) and both parts; a receive also what it expects. */
typedef struct gloo_req {
  bool recv;
  p2p_header h;
  ct_gloo_send_req *head, *body;   /* a send's */
  ct_gloo_recv_req *rhead, *rbody; /* a receive's */
  int peer, tag;
  size_t count;
} gloo_req;

static ct_status gloo_isend(ct_comm *c, const float *buf, size_t count, int peer, int tag, void **req,
                            ct_error *err) {
  gloo_comm *g = c->priv;
  *req = NULL;
  CT_TRY(check_usable(c, "send", err));
  CT_ASSERT(peer >= 0 && peer < c->size && peer != c->rank && tag >= 0);
  gloo_req *r = ct_xcalloc(1, sizeof *r);
  r->h = header_of(tag, count);
  if (ct_gloo_isend(g->ctx, &r->h, sizeof r->h, peer, header_slot(tag), &r->head, err) != CT_OK ||
      ct_gloo_isend(g->ctx, buf, count * sizeof(float), peer, payload_slot(tag), &r->body, err) !=
          CT_OK) {
    ct_error dropped;
    ct_gloo_send_wait(g->ctx, r->head, &dropped);
    free(r);
    return op_failed(c, "send", err);
  }
  *req = r;
  return CT_OK;
}

/* ct_comm_ops.irecv: the header's and the values' receives posted at once,
 * so that the sender's two messages leave as soon as it sends (a receive
 * posted later costs a handshake through Gloo's network thread each). */
static ct_status gloo_irecv(ct_comm *c, float *buf, size_t count, int peer, int tag, void **req,
                            ct_error *err) {
  gloo_comm *g = c->priv;
  *req = NULL;
  CT_TRY(check_usable(c, "receive", err));
  gloo_req *r = ct_xcalloc(1, sizeof *r);
  r->recv = true;
  r->peer = peer;
  r->tag = tag;
  r->count = count;
  if (ct_gloo_irecv(g->ctx, &r->h, sizeof r->h, peer, header_slot(tag), &r->rhead, err) != CT_OK ||
      ct_gloo_irecv(g->ctx, buf, count * sizeof(float), peer, payload_slot(tag), &r->rbody, err) !=
          CT_OK) {
    ct_gloo_recv_free(r->rhead);
    free(r);
    return op_failed(c, "receive", err);
  }
  *req = r;
  return CT_OK;
}

/* A receive's completion: the header names the tag and the count posted. */
static ct_status recv_done(ct_comm *c, gloo_req *r, ct_error *err) {
  gloo_comm *g = c->priv;
  ct_status st = ct_gloo_recv_wait(g->ctx, r->rhead, err);
  r->rhead = NULL;
  if (st == CT_OK) st = check_header(c, &r->h, r->peer, r->tag, err);
  if (st == CT_OK && count_of(&r->h) != r->count)
    st = ct_error_set(err, CT_ERR_COMM,
                      "gloo receive on rank %d: rank %d sent %zu floats with tag %d where %zu were "
                      "expected",
                      c->rank, r->peer, count_of(&r->h), r->tag, r->count);
  if (st != CT_OK) {
    ct_gloo_recv_free(r->rbody); /* its message may never come */
    return st;
  }
  return ct_gloo_recv_wait(g->ctx, r->rbody, err) == CT_OK ? CT_OK : op_failed(c, "receive", err);
}

/* ct_comm_ops.send_wait: a send's two messages have left, or a posted
 * receive's have arrived. */
static ct_status gloo_send_wait(ct_comm *c, void *req, ct_error *err) {
  gloo_comm *g = c->priv;
  gloo_req *r = req;
  if (!r) return CT_OK;
  if (r->recv) {
    const ct_status st = recv_done(c, r, err);
    free(r);
    return st;
  }
  ct_status st = ct_gloo_send_wait(g->ctx, r->head, err);
  ct_error second;
  const ct_status st2 = ct_gloo_send_wait(g->ctx, r->body, st == CT_OK ? err : &second);
  free(r);
  if (st == CT_OK) st = st2;
  return st == CT_OK ? CT_OK : op_failed(c, "send", err);
}

static ct_status gloo_send(ct_comm *c, const float *buf, size_t count, int peer, int tag,
                           void *stream, ct_error *err) {
  void *req = NULL;
  CT_TRY(gloo_isend(c, buf, count, peer, tag, &req, err));
  return gloo_send_wait(c, req, err);
}

/* A header read from the transport is Cortado's for that tag. */
static ct_status check_header(ct_comm *c, const p2p_header *h, int peer, int tag, ct_error *err) {
  if (h->magic != P2P_MAGIC || h->tag != (uint32_t)tag)
    return ct_error_set(err, CT_ERR_COMM,
                        "gloo receive on rank %d: rank %d sent a header that is not Cortado's for "
                        "tag %d (magic 0x%08x, tag %u)",
                        c->rank, peer, tag, h->magic, h->tag);
  return CT_OK;
}

static ct_status gloo_probe(ct_comm *c, int tag, int *peer, size_t *count, ct_error *err) {
  gloo_comm *g = c->priv;
  CT_TRY(check_usable(c, "probe", err));
  for (int i = 0; i < g->nprobed; i++)
    if (g->probed[i].tag == tag) {
      *peer = g->probed[i].peer;
      *count = g->probed[i].count;
      return CT_OK;
    }
  p2p_header h;
  int from = -1;
  /* cut short by the cancel word: a parameter server's link saw a peer die */
  if (ct_gloo_recv_any(g->ctx, &h, sizeof h, header_slot(tag), &from, c->cancel, err) != CT_OK)
    return op_failed(c, "probe", err);
  CT_TRY(check_header(c, &h, from, tag, err));
  if (g->nprobed == g->cap) {
    g->cap = g->cap ? 2 * g->cap : 8;
    g->probed = ct_xrealloc(g->probed, (size_t)g->cap * sizeof *g->probed);
  }
  const size_t n = count_of(&h);
  g->probed[g->nprobed++] = (probed){from, tag, n};
  *peer = from;
  *count = n;
  return CT_OK;
}

static ct_status gloo_recv(ct_comm *c, float *buf, size_t count, int peer, int tag, void *stream,
                           ct_error *err) {
  gloo_comm *g = c->priv;
  CT_TRY(check_usable(c, "receive", err));
  CT_ASSERT(peer >= 0 && peer < c->size && peer != c->rank && tag >= 0);
  size_t sent = 0;
  int found = -1;
  for (int i = 0; i < g->nprobed && found < 0; i++)
    if (g->probed[i].peer == peer && g->probed[i].tag == tag) found = i;
  if (found >= 0) {
    sent = g->probed[found].count;
    memmove(&g->probed[found], &g->probed[found + 1],
            (size_t)(g->nprobed - found - 1) * sizeof *g->probed);
    g->nprobed--;
  } else {
    p2p_header h;
    if (ct_gloo_recv(g->ctx, &h, sizeof h, peer, header_slot(tag), c->cancel, err) != CT_OK)
      return op_failed(c, "receive", err);
    CT_TRY(check_header(c, &h, peer, tag, err));
    sent = count_of(&h);
  }
  if (sent != count)
    return ct_error_set(err, CT_ERR_COMM,
                        "gloo receive on rank %d: rank %d sent %zu floats with tag %d where %zu "
                        "were expected",
                        c->rank, peer, sent, tag, count);
  if (ct_gloo_recv(g->ctx, buf, count * sizeof(float), peer, payload_slot(tag), c->cancel, err) !=
      CT_OK)
    return op_failed(c, "receive", err);
  return CT_OK;
}

static void gloo_forget_peer(ct_comm *c, int peer) {
  gloo_comm *g = c->priv;
  ct_gloo_forget_peer(g->ctx, peer);
}

static ct_status gloo_split(ct_comm *c, int color, int key, ct_comm **out, ct_error *err);

static const ct_comm_ops k_gloo_ops = {.name = "gloo",
                                       .allreduce = gloo_allreduce,
                                       .broadcast = gloo_broadcast,
                                       .allreduce_host_f64 = gloo_host_f64,
                                       .barrier = gloo_barrier,
                                       .wait = gloo_wait,
                                       .abort = gloo_abort,
                                       .destroy = gloo_destroy,
                                       .send = gloo_send,
                                       .recv = gloo_recv,
                                       .isend = gloo_isend,
                                       .send_wait = gloo_send_wait,
                                       .irecv = gloo_irecv,
                                       .probe = gloo_probe,
                                       .forget_peer = gloo_forget_peer,
                                       .split = gloo_split};

/* The communicator around a connected context. */
static ct_comm *wrap(ct_gloo_context *ctx, ct_gloo_store *store, const char *prefix, int rank, int size,
                     double timeout_s) {
  gloo_comm *g = ct_xcalloc(1, sizeof *g);
  g->ctx = ctx;
  g->store = store;
  snprintf(g->prefix, sizeof g->prefix, "%s", prefix);
  ct_comm *c = ct_xcalloc(1, sizeof *c);
  c->ops = &k_gloo_ops;
  c->rank = rank;
  c->size = size;
  c->timeout_s = timeout_s;
  c->priv = g;
  return c;
}

ct_status ct_comm_gloo_create(ct_comm **out, ct_gloo_store *store, int rank, int size,
                              const ct_gloo_bind *bind, double connect_timeout_s, double timeout_s,
                              ct_error *err) {
  *out = NULL;
  CT_ASSERT(size >= 1 && rank >= 0 && rank < size);
  const double op_timeout = timeout_s > 0 ? timeout_s : ct_comm_default_timeout();
  ct_gloo_context *ctx = NULL;
  if (ct_gloo_connect(&ctx, store, rank, size, bind, connect_timeout_s, op_timeout, err) != CT_OK)
    return ct_error_prefix(err, "gloo connect on rank %d", rank);
  *out = wrap(ctx, store, "", rank, size, op_timeout);
  return CT_OK;
}

/* ct_comm_ops.split: every rank's color and key through one host
 * all-reduce, then the members of this rank's color connect as a mesh of
 * their own under the store keys "<prefix>split<N>/<color>/" (N counts this
 * communicator's splits, the same on every rank), on this context's
 * device. */
static ct_status gloo_split(ct_comm *c, int color, int key, ct_comm **out, ct_error *err) {
  gloo_comm *g = c->priv;
  *out = NULL;
  double *all = ct_xcalloc((size_t)c->size * 2, sizeof *all);
  all[2 * c->rank] = color;
  all[2 * c->rank + 1] = key;
  ct_status st = gloo_host_f64(c, all, (size_t)c->size * 2, err);
  int rank = 0, size = 0;
  for (int r = 0; st == CT_OK && r < c->size; r++) {
    if (all[2 * r] != color) continue;
    size++;
    if (all[2 * r + 1] < key || (all[2 * r + 1] == key && r < c->rank)) rank++;
  }
  free(all);
  if (st != CT_OK) return ct_error_prefix(err, "gloo split");
  char prefix[96];
  const int n = snprintf(prefix, sizeof prefix, "%ssplit%d/%d/", g->prefix, g->splits++, color);
  CT_ASSERT(n > 0 && (size_t)n < sizeof prefix);
  ct_gloo_context *ctx = NULL;
  if (ct_gloo_connect_group(&ctx, g->ctx, g->store, prefix, rank, size, c->timeout_s, err) != CT_OK)
    return ct_error_prefix(err, "gloo split of rank %d (color %d)", c->rank, color);
  ct_comm *sub = wrap(ctx, g->store, prefix, rank, size, c->timeout_s);
  sub->cancel = c->cancel;
  *out = sub;
  return CT_OK;
}

const char *ct_comm_gloo_address(const ct_comm *c) {
  const gloo_comm *g = c->priv;
  return ct_gloo_context_address(g->ctx);
}
