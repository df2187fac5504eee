/* The server side of the parameter server (ps.h): one shard, its clocks,
 * the updates it applies through the solver and the answers it owes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "parallel/comm_mpi.h"
#include "parallel/ps_internal.h"

/* A request that waits for its answer (at most one per worker: a worker
 * waits for each answer before it asks again). */
typedef struct pending {
  int type;   /* PS_PULL, PS_BLOCK, PS_FETCH; 0: none */
  int clock;
  bool last;
} pending;

typedef struct server {
  ct_comm *comm;
  ct_ps_opts o;
  int workers;
  int index;                 /* this server's shard */
  const ct_ps_update *u;
  ct_ps_shard sh;
  size_t n;                  /* values in the shard */
  float *w;                  /* (n) the shard's weights: u->net->flat_data + lo */
  bool started;              /* rank 0's PS_INIT arrived */
  int nslots;                /* history slots rank 0 sent */
  int base;                  /* the clock training starts at */
  int applied;               /* ssp by clocks: clocks whose update is applied (absolute) */
  long updates;              /* async, ssp above staleness 0: pushes applied */
  int *pushed;               /* (workers) clocks each worker has pushed (absolute) */
  int ndone;
  bool *done;                /* (workers) said PS_DONE */
  bool *gone;                /* (workers) died: left out of every clock from then on */
  int ngone;
  ps_link *link;             /* the workers' liveness connections */
  bool stopping;             /* the root stopped early: every answer says stop */
  int wishes;                /* stop and snapshot wishes for the root's next answer */
  int ring;                  /* ssp: clocks in flight (S + 1) */
  float *grads;              /* ssp: (ring x workers x n) each clock's gradients by worker */
  float *block;              /* bmuf: (workers x n) each worker's weights of the block */
  float *delta;              /* bmuf: (n) the block momentum D */
  float block_momentum;
  bool *in_block;            /* bmuf: (workers) whose weights of this block are in */
  pending *pend;             /* (workers) */
  float **reply;             /* (workers) each worker's answer while it is sent */
  void **req;                /* (workers) the send of reply[w], or NULL */
  size_t reply_count;
  float *msg;                /* (CT_PS_HEADER + 3 n) a request */
} server;

static ct_status bad_message(const server *s, int from, const char *what, ct_error *err) {
  return ct_error_set(err, CT_ERR_COMM, "parameter server %d: %s from rank %d", s->index, what, from);
}

/* The fewest clocks any worker still alive has pushed (the root, whose
 * death ends the job, is always among them). */
static int slowest(const server *s) {
  int m = s->pushed[0];
  for (int w = 1; w < s->workers; w++)
    if (!s->gone[w] && s->pushed[w] < m) m = s->pushed[w];
  return m;
}

/* ssp at staleness 0 applies by clocks: one update with the mean of every
 * worker's gradient of a clock once all are in (bulk synchronous, the
 * all-reduce's arithmetic); above 0 each push is applied as it comes, a
 * W-th of a step as under async, and only the reads wait for the bound
 * (Ho et al.'s reads see the updates inside the window too: fed whole
 * steps S clocks old, heavy-ball momentum diverges at S = 4). */
static bool by_clocks(const server *s) { return s->o.mode == CT_DP_SSP && s->o.staleness == 0; }

/* Whether worker w's pending request can be answered now. */
static bool answerable(const server *s, int w) {
  const pending *p = &s->pend[w];
  if (!p->type) return false;
  if (s->stopping) return true;
  if (!s->started) return false;
  switch (p->type) {
    case PS_PULL:
      /* ssp: every worker has pushed the clocks before c - S (and by
       * clocks, they are applied as they are pushed) */
      if (s->o.mode == CT_DP_SSP) return slowest(s) >= (p->last ? p->clock : p->clock - s->o.staleness);
      return !p->last || slowest(s) >= p->clock;
    case PS_FETCH:
      return s->o.mode != CT_DP_SSP || slowest(s) >= p->clock;
    case PS_BLOCK:
      return false; /* answered together when the block is filtered */
  }
  return false;
}

/* Sends worker w its answer without blocking: the weights (bmuf: w_g, or
 * w_g + m D to start the next block from), for a fetch also the history. */
static ct_status answer(server *s, int w, ct_error *err) {
  pending *p = &s->pend[w];
  CT_TRY(ct_comm_send_wait(s->comm, s->req[w], err));
  s->req[w] = NULL;
  float *r = s->reply[w], *pay = r + CT_PS_HEADER;
  const int relay = w == 0 ? s->wishes : 0;
  if (w == 0) s->wishes = 0;
  ps_header_put(r, s->stopping ? PS_REPLY_STOP : PS_REPLY_OK, s->applied, relay, s->ngone);
  memcpy(pay, s->w, s->n * sizeof(float));
  size_t count = CT_PS_HEADER + s->n;
  if (p->type == PS_BLOCK && s->o.nesterov && !p->last && !s->stopping)
    for (size_t i = 0; i < s->n; i++) pay[i] += s->block_momentum * s->delta[i];
  if (p->type == PS_FETCH && s->o.mode != CT_DP_BMUF) {
    const size_t fc = s->u->net->flat_count;
    for (int k = 0; k < s->nslots; k++)
      memcpy(pay + (size_t)(1 + k) * s->n, s->u->history + (size_t)k * fc + s->sh.lo, s->n * sizeof(float));
    count += (size_t)s->nslots * s->n;
  }
  if (p->type == PS_PULL && s->index == 0 && !s->stopping) {
    char bound[32] = "none";
    if (s->o.mode == CT_DP_SSP) snprintf(bound, sizeof bound, "%d", s->o.staleness);
    const int m = slowest(s);
    LOG_INFO("PS clock: worker %d at clock %d, slowest at %d, gap %d (bound %s)", w, p->clock, m,
             p->clock - m, bound);
  }
  p->type = 0;
  return ct_comm_isend(s->comm, r, count, w, CT_PS_TAG_REPLY, &s->req[w], err);
}

static ct_status answer_ready(server *s, ct_error *err) {
  for (int w = 0; w < s->workers; w++)
    if (!s->gone[w] && answerable(s, w)) CT_TRY(answer(s, w, err));
  return CT_OK;
}

/* The solver's update of the shard from the gradient in its flat_diff. */
static void apply(server *s, int iter) {
  s->u->apply(s->u->solver, iter, s->sh.first_param, s->sh.end_param);
}

/* ssp: every clock that all workers have pushed is applied in order, with
 * the mean of their gradients (summed in rank order, then divided by the
 * worker count, as the all-reduce averages). */
static void apply_clocks(server *s) {
  float *g = s->u->net->flat_diff + s->sh.lo;
  while (slowest(s) > s->applied) {
    const float *at = s->grads + (size_t)(s->applied % s->ring) * (size_t)s->workers * s->n;
    /* the workers that pushed this clock: all of them, or once one has
     * died, the others (and the dead one if it pushed it before dying) */
    int in = 0;
    for (int w = 0; w < s->workers; w++) {
      if (s->pushed[w] <= s->applied) continue;
      if (in++ == 0) memcpy(g, at + (size_t)w * s->n, s->n * sizeof(float));
      else
        for (size_t i = 0; i < s->n; i++) g[i] += at[(size_t)w * s->n + i];
    }
    if (in > 1)
      for (size_t i = 0; i < s->n; i++) g[i] /= (float)in;
    apply(s, s->applied);
    s->applied++;
  }
}

static ct_status on_push(server *s, int w, int clock, const float *grad, ct_error *err) {
  if (!s->started || clock != s->pushed[w])
    return bad_message(s, w, "a push out of order", err);
  if (s->o.mode == CT_DP_SSP && clock > slowest(s) + s->o.staleness)
    return bad_message(s, w, "a push past the staleness bound", err);
  if (by_clocks(s)) {
    float *at = s->grads + ((size_t)(clock % s->ring) * (size_t)s->workers + (size_t)w) * s->n;
    memcpy(at, grad, s->n * sizeof(float));
    s->pushed[w]++;
    apply_clocks(s);
    return CT_OK;
  }
  /* async, ssp above staleness 0: this gradient alone, a W-th of it, as
   * iteration base + updates / W */
  float *g = s->u->net->flat_diff + s->sh.lo;
  for (size_t i = 0; i < s->n; i++) g[i] = s->workers > 1 ? grad[i] / (float)s->workers : grad[i];
  apply(s, s->base + (int)(s->updates / s->workers));
  s->updates++;
  s->pushed[w]++;
  return CT_OK;
}

/* bmuf: once every worker's weights of the block are in, the filter:
 * G = mean - start, D = m D + lr_b G, w_g += D, where start is where the
 * block began (w_g + m D with Nesterov: G is then the progress measured
 * at the look-ahead point, as Nesterov's momentum takes its gradient
 * there); then every worker's answer. */
static ct_status filter_block(server *s, ct_error *err) {
  int in = 0;
  for (int v = 0; v < s->workers; v++) {
    if (!s->gone[v] && !s->in_block[v]) return CT_OK; /* a live worker's weights are still to come */
    in += s->in_block[v];
  }
  if (in == 0) return CT_OK;
  for (size_t i = 0; i < s->n; i++) {
    float sum = 0;
    bool first = true;
    for (int v = 0; v < s->workers; v++) {
      if (!s->in_block[v]) continue;
      sum = first ? s->block[(size_t)v * s->n + i] : sum + s->block[(size_t)v * s->n + i];
      first = false;
    }
    const float start = s->o.nesterov ? s->w[i] + s->block_momentum * s->delta[i] : s->w[i];
    const float g = sum / (float)in - start;
    s->delta[i] = s->block_momentum * s->delta[i] + s->o.block_lr * g;
    s->w[i] += s->delta[i];
  }
  for (int v = 0; v < s->workers; v++) {
    if (!s->in_block[v]) continue;
    s->in_block[v] = false;
    s->pushed[v] = s->pend[v].clock;
    if (!s->gone[v]) CT_TRY(answer(s, v, err));
  }
  return CT_OK;
}

static ct_status on_block(server *s, int w, const float *weights, ct_error *err) {
  memcpy(s->block + (size_t)w * s->n, weights, s->n * sizeof(float));
  s->in_block[w] = true;
  return filter_block(s, err);
}

static void on_init(server *s, int clock, int nslots, const float *payload) {
  const size_t fc = s->u->net->flat_count;
  memcpy(s->w, payload, s->n * sizeof(float));
  /* slots rank 0 did not send stay as the server's solver made them (zeros) */
  const int given = nslots < s->u->nslots ? nslots : s->u->nslots;
  for (int k = 0; k < given; k++)
    memcpy(s->u->history + (size_t)k * fc + s->sh.lo, payload + (size_t)(1 + k) * s->n, s->n * sizeof(float));
  s->nslots = s->u->nslots;
  s->base = s->applied = clock;
  for (int w = 0; w < s->workers; w++) s->pushed[w] = clock;
  s->started = true;
}

/* One request from rank `from`. */
static ct_status handle(server *s, int from, size_t count, ct_error *err) {
  if (from >= s->workers || count < CT_PS_HEADER || count > s->reply_count) return bad_message(s, from, "a message that is no request", err);
  /* A worker killed in the middle of its message never sends the rest (or,
   * with Open MPI's single-copy transfers, leaves nothing to read): its
   * death ends the wait, the message is dropped with it and notice_deaths
   * takes it out of the clocks. */
  const int *cancel = s->comm->cancel;
  ct_comm_set_watchdog(s->comm, 0, ps_link_dead(s->link, from));
  ct_status st = ct_comm_recv(s->comm, s->msg, count, from, CT_PS_TAG_REQUEST, NULL, err);
  ct_comm_set_watchdog(s->comm, 0, cancel);
  if (st == CT_ERR_COMM) ps_link_await(ps_link_dead(s->link, from));
  if ((st == CT_ERR_INTERRUPTED || st == CT_ERR_COMM) && ps_link_state(s->link, from) == PS_PEER_GONE)
    return CT_OK;
  CT_TRY(st);
  if (s->gone[from]) return CT_OK; /* sent before it died: it is out of the clocks */
  int32_t h[CT_PS_HEADER];
  ps_header_get(s->msg, h);
  const float *payload = s->msg + CT_PS_HEADER;
  const size_t values = count - CT_PS_HEADER;
  switch (h[0]) {
    case PS_INIT:
      if (from != 0 || values != (size_t)(1 + h[2]) * s->n) return bad_message(s, from, "a bad start", err);
      on_init(s, h[1], h[2], payload);
      break;
    case PS_PUSH:
      if (values != s->n) return bad_message(s, from, "a push of the wrong size", err);
      CT_TRY(on_push(s, from, h[1], payload, err));
      break;
    case PS_PULL:
    case PS_FETCH:
    case PS_BLOCK:
      if (s->pend[from].type) return bad_message(s, from, "a second request before the answer", err);
      s->pend[from] = (pending){.type = h[0], .clock = h[1], .last = h[2] != 0};
      s->wishes |= h[3];
      if (h[0] == PS_BLOCK) {
        if (values != s->n) return bad_message(s, from, "block weights of the wrong size", err);
        if (!s->stopping) CT_TRY(on_block(s, from, payload, err));
      }
      break;
    case PS_DONE:
      s->done[from] = true;
      s->ndone++;
      if (h[2]) s->stopping = true;
      break;
    default:
      return bad_message(s, from, "a message of unknown type", err);
  }
  return answer_ready(s, err);
}

/* Gives up the answer in flight to worker w, which died: it will never
 * take it, so it is not waited for past one look. */
static void drop_answer(server *s, int w) {
  if (!s->req[w]) return;
  const double timeout = s->comm->timeout_s;
  ct_comm_set_watchdog(s->comm, 1e-9, s->comm->cancel);
  (void)ct_comm_send_wait(s->comm, s->req[w], NULL);
  ct_comm_set_watchdog(s->comm, timeout, s->comm->cancel);
  s->req[w] = NULL;
}

/* The workers whose liveness connection closed without a goodbye since the
 * last look: each is left out of the clocks (the others no longer wait for
 * it; clocks average the workers that pushed them), its data shard is
 * skipped, and server 0 logs it.  The root's death ends the job: it alone
 * tests, snapshots and decides.  Errors: CT_ERR_COMM for the root. */
static ct_status notice_deaths(server *s, ct_error *err) {
  ps_link_rearm(s->link);
  bool any = false;
  for (int w = 0; w < s->workers; w++) {
    if (s->gone[w] || s->done[w] || ps_link_state(s->link, w) != PS_PEER_GONE) continue;
    if (w == 0)
      return ct_error_set(err, CT_ERR_COMM,
                          "worker 0 (rank 0) is gone (its connection closed): it tests, snapshots and "
                          "decides for the job, which stops");
    s->gone[w] = true;
    s->ngone++;
    ct_comm_forget_peer(s->comm, w);
    ct_mpi_skip_finalize();
    s->pend[w].type = 0;
    drop_answer(s, w);
    any = true;
    if (s->index == 0)
      LOG_WARNING("PS: worker %d (rank %d) is gone at clock %d (its connection closed): left out of the "
               "clocks, %d of %d workers go on; its data shard (%d of %d) is skipped",
               w, w, s->pushed[w], s->workers - s->ngone, s->workers, w, s->workers);
  }
  if (!any || !s->started) return CT_OK;
  if (by_clocks(s)) apply_clocks(s);
  if (s->o.mode == CT_DP_BMUF) CT_TRY(filter_block(s, err));
  return answer_ready(s, err);
}

static void server_free(server *s) {
  for (int w = 0; w < s->workers; w++) free(s->reply[w]);
  free(s->reply);
  free(s->req);
  free(s->pend);
  free(s->pushed);
  free(s->done);
  free(s->gone);
  free(s->in_block);
  free(s->grads);
  free(s->block);
  free(s->delta);
  free(s->msg);
}

ct_status ct_ps_serve(ct_comm *comm, const ct_ps_opts *opts, int workers, const ct_ps_update *u,
                      ct_error *err) {
  CT_ASSERT(opts->mode != CT_DP_ALLREDUCE && workers >= 1);
  if (u->clip && opts->num_servers > 1 && opts->mode != CT_DP_BMUF)
    return ct_error_set(err, CT_ERR_INVALID,
                        "clip_gradients needs the norm of the whole gradient: use one parameter "
                        "server (--num_servers=1) or no clipping");
  server s;
  memset(&s, 0, sizeof s);
  s.comm = comm;
  s.o = *opts;
  s.workers = workers;
  s.index = comm->rank - workers;
  s.u = u;
  ct_ps_shard *plan = ct_xcalloc((size_t)opts->num_servers, sizeof *plan);
  ct_ps_plan(u->net, opts->num_servers, plan);
  s.sh = plan[s.index];
  free(plan);
  s.n = s.sh.hi - s.sh.lo;
  s.w = u->net->flat_data + s.sh.lo;
  s.pushed = ct_xcalloc((size_t)workers, sizeof *s.pushed);
  s.done = ct_xcalloc((size_t)workers, sizeof *s.done);
  s.gone = ct_xcalloc((size_t)workers, sizeof *s.gone);
  s.in_block = ct_xcalloc((size_t)workers, sizeof *s.in_block);
  s.pend = ct_xcalloc((size_t)workers, sizeof *s.pend);
  s.req = ct_xcalloc((size_t)workers, sizeof *s.req);
  s.reply = ct_xcalloc((size_t)workers, sizeof *s.reply);
  s.reply_count = CT_PS_HEADER + 3 * s.n;
  for (int w = 0; w < workers; w++) s.reply[w] = ct_xcalloc(s.reply_count, sizeof(float));
  s.msg = ct_xcalloc(s.reply_count, sizeof(float));
  if (by_clocks(&s)) {
    s.ring = opts->staleness + 1;
    s.grads = ct_xcalloc((size_t)s.ring * (size_t)workers * s.n + 1, sizeof(float));
  }
  if (opts->mode == CT_DP_BMUF) {
    s.block = ct_xcalloc((size_t)workers * s.n + 1, sizeof(float));
    s.delta = ct_xcalloc(s.n + 1, sizeof(float));
    s.block_momentum = opts->block_momentum >= 0 ? opts->block_momentum : 1.0f - 1.0f / (float)workers;
  }
  LOG_INFO("Parameter server %d of %d (%s): parameters %d-%d, %zu values", s.index, opts->num_servers,
           ct_dp_mode_name(opts->mode), s.sh.first_param, s.sh.end_param - 1, s.n);
  ct_status st = ps_link_serve(&s.link, comm, workers, comm->timeout_s, err);
  const int *cancel = comm->cancel;
  /* requests come from workers only: the other servers are not listened to */
  for (int r = workers; r < comm->size; r++)
    if (r != comm->rank) ct_comm_forget_peer(comm, r);
  while (st == CT_OK && s.ndone + s.ngone < workers) {
    int from = -1;
    size_t count = 0;
    /* a death ends the wait for the next request (a probe leaves nothing
     * in flight to interrupt) */
    ct_comm_set_watchdog(comm, 0, ps_link_wake(s.link));
    st = ct_comm_probe(comm, CT_PS_TAG_REQUEST, &from, &count, err);
    ct_comm_set_watchdog(comm, 0, cancel);
    /* Gloo's wait from any rank fails as a worker's connection drops */
    if (st == CT_ERR_COMM) ps_link_await(ps_link_wake(s.link));
    if ((st == CT_ERR_INTERRUPTED || st == CT_ERR_COMM) &&
        __atomic_load_n(ps_link_wake(s.link), __ATOMIC_ACQUIRE)) {
      st = CT_OK;
      from = -1;
    }
    if (st == CT_OK && u->requests) s.wishes |= __atomic_exchange_n(u->requests, 0, __ATOMIC_SEQ_CST);
    if (st == CT_OK && from >= 0) st = handle(&s, from, count, err);
    if (st == CT_OK) st = notice_deaths(&s, err);
  }
  /* the last answers are waited for, unless this server fails (a worker
   * that died would never take its answer) */
  for (int w = 0; w < workers; w++) {
    if (st != CT_OK || s.gone[w]) drop_answer(&s, w);
    else st = ct_comm_send_wait(comm, s.req[w], err);
    s.req[w] = NULL;
  }
  if (st != CT_OK) ct_error_prefix(err, "parameter server %d", s.index);
  /* a goodbye only when every worker is done: otherwise the workers are
   * to see this server as gone and stop */
  ps_link_close(s.link, st == CT_OK);
  server_free(&s);
  return st;
}
