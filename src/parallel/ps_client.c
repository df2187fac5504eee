/* The worker side of the parameter server (ps.h): pushes, pulls, block
 * syncs and snapshot fetches over the communicator's point-to-point calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/settings.h"
#include "parallel/comm_mpi.h"
#include "parallel/ps_gpu.h"
#include "parallel/ps_internal.h"

struct ct_ps_client {
  ct_comm *comm;           /* borrowed */
  ct_ps_opts opts;
  int workers;
  ct_net *net;             /* borrowed: flat_data, flat_diff */
  int clock;               /* iterations this worker has finished */
  int max_iter;
  bool stop;               /* a server said the run stops */
  int relayed;             /* wishes the servers relayed in their last answers */
  int pending_wish;        /* bmuf: wishes waiting for the block's end */
  int nshards;
  ct_ps_shard *shards;     /* (nshards) */
  float *msg;              /* (CT_PS_HEADER + largest shard x (1 + 2 history slots)) */
  size_t msg_count;
  ps_link *link;           /* liveness connections to the servers, from the start to the finish */
  const int *cancel;       /* the communicator's cancel flag before the link took it */
  /* A GPU worker's pushes (ssp, async): each shard's message is staged in
   * pinned memory as backward finalises it and leaves once its copy is
   * done, at the latest before the pull (ps_gpu.h); NULL: pushes copy and
   * send at once. */
  ct_ps_gpu *gpu;
  bool *staged;            /* (nshards) a push waits in its buffer */
};

const char *ct_dp_mode_name(ct_dp_mode mode) {
  switch (mode) {
    case CT_DP_ALLREDUCE: return "allreduce";
    case CT_DP_SSP: return "ssp";
    case CT_DP_ASYNC: return "async";
    case CT_DP_BMUF: return "bmuf";
  }
  return "?";
}

ct_status ct_dp_mode_parse(const char *name, ct_dp_mode *mode, ct_error *err) {
  for (int m = CT_DP_ALLREDUCE; m <= CT_DP_BMUF; m++)
    if (name && strcmp(name, ct_dp_mode_name((ct_dp_mode)m)) == 0) {
      *mode = (ct_dp_mode)m;
      return CT_OK;
    }
  return ct_error_set(err, CT_ERR_INVALID, "unknown data-parallel mode '%s' (known: allreduce, ssp, async, bmuf)",
                      name ? name : "");
}

void ct_ps_plan(const ct_net *net, int k, ct_ps_shard *out) {
  CT_ASSERT(k >= 1);
  int p = 0;
  size_t lo = 0;
  for (int i = 0; i < k; i++) {
    /* shard i ends at the first parameter boundary at or past (i + 1) / k of the values */
    const size_t target = net->flat_count / (size_t)k * (size_t)(i + 1);
    out[i].lo = lo;
    out[i].first_param = p;
    while (p < net->nparams && (i == k - 1 || net->params[p].offset < target)) p++;
    out[i].end_param = p;
    out[i].hi = i == k - 1 || p == net->nparams ? net->flat_count : net->params[p].offset;
    lo = out[i].hi;
  }
}

ct_status ct_ps_client_new(ct_ps_client **out, ct_comm *comm, const ct_ps_opts *opts, int workers,
                           ct_net *net, int start_clock, int max_iter, ct_error *err) {
  *out = NULL;
  if (comm->size != workers + opts->num_servers)
    return ct_error_set(err, CT_ERR_INVALID, "%d ranks are not %d workers and %d parameter servers",
                        comm->size, workers, opts->num_servers);
  ct_ps_client *c = ct_xcalloc(1, sizeof *c);
  c->comm = comm;
  c->opts = *opts;
  c->workers = workers;
  c->net = net;
  c->clock = start_clock;
  c->max_iter = max_iter;
  c->nshards = opts->num_servers;
  c->shards = ct_xcalloc((size_t)c->nshards, sizeof *c->shards);
  ct_ps_plan(net, c->nshards, c->shards);
  size_t largest = 0;
  for (int k = 0; k < c->nshards; k++)
    if (c->shards[k].hi - c->shards[k].lo > largest) largest = c->shards[k].hi - c->shards[k].lo;
  c->msg_count = CT_PS_HEADER + largest * 3; /* weights and up to two history slots */
  c->msg = ct_xcalloc(c->msg_count, sizeof *c->msg);
  c->staged = ct_xcalloc((size_t)c->nshards, sizeof *c->staged);
  if (net->ctx->device != CT_DEVICE_CPU && opts->mode != CT_DP_BMUF &&
      ct_setting_bool("CORTADO_PS_OVERLAP_PUSHES")) {
    size_t *words = ct_xcalloc((size_t)c->nshards, sizeof *words);
    for (int k = 0; k < c->nshards; k++) words[k] = CT_PS_HEADER + (c->shards[k].hi - c->shards[k].lo);
    const ct_status st = ct_ps_gpu_new(&c->gpu, net->ctx, c->nshards, words, err);
    free(words);
    if (st != CT_OK) {
      ct_ps_client_free(c);
      return st;
    }
  }
  *out = c;
  return CT_OK;
}

/* Stops watching the servers: the communicator's cancel flag is its own
 * again; `bye` tells them this worker ended normally. */
static void unlink_servers(ct_ps_client *c, bool bye) {
  if (!c->link) return;
  ct_comm_set_watchdog(c->comm, 0, c->cancel);
  ps_link_close(c->link, bye);
  c->link = NULL;
}

/* A failure of the communicator while a server is gone is that server's
 * death: the message says so (a dead server ends the job).  The transport
 * may fail first (Gloo's reset connection): the link gets a moment to see
 * the death. */
static ct_status cause(ct_ps_client *c, ct_status st, ct_error *err) {
  if (st == CT_OK || !c->link) return st;
  if (st == CT_ERR_COMM) ps_link_await(ps_link_wake(c->link));
  for (int k = 0; k < c->nshards; k++)
    if (ps_link_state(c->link, k) == PS_PEER_GONE)
      return ct_error_set(err, CT_ERR_COMM,
                          "parameter server %d (rank %d) is gone (its connection closed): the job stops", k,
                          c->workers + k);
  return st;
}

void ct_ps_client_free(ct_ps_client *c) {
  if (!c) return;
  unlink_servers(c, false);
  ct_ps_gpu_free(c->gpu);
  free(c->staged);
  free(c->shards);
  free(c->msg);
  free(c);
}

const ct_ps_opts *ct_ps_client_opts(const ct_ps_client *c) { return &c->opts; }
int ct_ps_client_shards(const ct_ps_client *c) { return c->nshards; }
size_t ct_ps_client_shard_end(const ct_ps_client *c, int k) { return c->shards[k].hi; }
bool ct_ps_client_local_update(const ct_ps_client *c) { return c->opts.mode == CT_DP_BMUF; }
bool ct_ps_stop_seen(const ct_ps_client *c) { return c->stop; }

static int server_rank(const ct_ps_client *c, int k) { return c->workers + k; }
static size_t shard_count(const ct_ps_client *c, int k) { return c->shards[k].hi - c->shards[k].lo; }

/* Sends header {type, a, b, d} and n payload values from each of the
 * arrays src[0 .. nsrc) (shard k's part of each) to server k. */
static ct_status send_request4(ct_ps_client *c, int k, int type, int a, int b, int d, const float *const *src,
                               int nsrc, ct_error *err) {
  const size_t n = shard_count(c, k);
  ps_header_put(c->msg, type, a, b, d);
  for (int i = 0; i < nsrc; i++)
    if (src[i])
      ct_mem_copy(CT_DEVICE_CPU, c->msg + CT_PS_HEADER + (size_t)i * n, c->net->ctx->device,
                  src[i] + c->shards[k].lo, n * sizeof(float)); /* waits for the device */
    else memset(c->msg + CT_PS_HEADER + (size_t)i * n, 0, n * sizeof(float));
  return ct_comm_send(c->comm, c->msg, CT_PS_HEADER + (size_t)nsrc * n, server_rank(c, k),
                      CT_PS_TAG_REQUEST, NULL, err);
}

static ct_status send_request(ct_ps_client *c, int k, int type, int a, int b, const float *const *src,
                              int nsrc, ct_error *err) {
  return send_request4(c, k, type, a, b, 0, src, nsrc, err);
}

/* Receives server k's reply with ndst arrays of its shard into dst[i]
 * (shard k's part); a stop in the header is remembered. */
static ct_status recv_reply(ct_ps_client *c, int k, float *const *dst, int ndst, ct_error *err) {
  const size_t n = shard_count(c, k);
  CT_TRY(ct_comm_recv(c->comm, c->msg, CT_PS_HEADER + (size_t)ndst * n, server_rank(c, k),
                      CT_PS_TAG_REPLY, NULL, err));
  int32_t h[CT_PS_HEADER];
  ps_header_get(c->msg, h);
  if (h[0] == PS_REPLY_STOP) c->stop = true;
  if (h[3] > 0) ct_mpi_skip_finalize(); /* a worker died */
  c->relayed |= h[2];
  for (int i = 0; i < ndst; i++)
    if (dst[i])
      ct_mem_copy(c->net->ctx->device, dst[i] + c->shards[k].lo, CT_DEVICE_CPU,
                  c->msg + CT_PS_HEADER + (size_t)i * n, n * sizeof(float));
  return CT_OK;
}

/* The weights of clock c->clock from every server (the wish goes to the
 * first). */
static ct_status pull_weights(ct_ps_client *c, int wish, ct_error *err) {
  const bool last = c->clock >= c->max_iter;
  for (int k = 0; k < c->nshards; k++)
    CT_TRY(send_request4(c, k, PS_PULL, c->clock, last, k == 0 ? wish : 0, NULL, 0, err));
  float *const dst[1] = {c->net->flat_data};
  for (int k = 0; k < c->nshards; k++) CT_TRY(recv_reply(c, k, dst, 1, err));
  return CT_OK;
}

static ct_status start(ct_ps_client *c, const float *history, int nslots, ct_error *err) {
  CT_TRY(ps_link_connect(&c->link, c->comm, c->workers, c->nshards, err));
  /* a server's death ends this worker's waits at once */
  c->cancel = c->comm->cancel;
  ct_comm_set_watchdog(c->comm, 0, ps_link_wake(c->link));
  if (c->comm->rank == 0) {
    const size_t fc = c->net->flat_count;
    const float *src[3] = {c->net->flat_data, history, history && nslots > 1 ? history + fc : NULL};
    for (int k = 0; k < c->nshards; k++)
      CT_TRY(send_request(c, k, PS_INIT, c->clock, nslots, src, 1 + nslots, err));
  }
  return pull_weights(c, 0, err);
}

ct_status ct_ps_client_start(ct_ps_client *c, const float *history, int nslots, ct_error *err) {
  CT_ASSERT(nslots >= 0 && nslots <= 2);
  return cause(c, start(c, history, nslots, err), err);
}

ct_status ct_ps_push(ct_ps_client *c, int k, ct_error *err) {
  if (c->gpu) {
    /* staged: it leaves in send_staged, while the GPU computes on */
    CT_ASSERT(!c->staged[k]);
    float *buf = ct_ps_gpu_buffer(c->gpu, k);
    ps_header_put(buf, PS_PUSH, c->clock, 0, 0);
    CT_TRY(ct_ps_gpu_copy_out(c->gpu, k, CT_PS_HEADER, c->net->flat_diff + c->shards[k].lo,
                              shard_count(c, k), err));
    c->staged[k] = true;
    return CT_OK;
  }
  const float *src[1] = {c->net->flat_diff};
  return cause(c, send_request(c, k, PS_PUSH, c->clock, 0, src, 1, err), err);
}

/* The staged pushes leave, in shard order, each once its copy is done
 * (the first while the GPU still computes the gradients of the later). */
static ct_status send_staged(ct_ps_client *c, ct_error *err) {
  for (int k = 0; c->gpu && k < c->nshards; k++) {
    if (!c->staged[k]) continue;
    c->staged[k] = false;
    CT_TRY(ct_ps_gpu_wait(c->gpu, k, err));
    CT_TRY(cause(c, ct_comm_send(c->comm, ct_ps_gpu_buffer(c->gpu, k), CT_PS_HEADER + shard_count(c, k),
                                 server_rank(c, k), CT_PS_TAG_REQUEST, NULL, err),
                 err));
  }
  return CT_OK;
}

/* bmuf: this worker's weights to every server at the end of a block, the
 * filtered weights back. */
static ct_status block_sync(ct_ps_client *c, int wish, ct_error *err) {
  const bool last = c->clock >= c->max_iter;
  const float *src[1] = {c->net->flat_data};
  for (int k = 0; k < c->nshards; k++)
    CT_TRY(send_request4(c, k, PS_BLOCK, c->clock, last, k == 0 ? wish : 0, src, 1, err));
  float *const dst[1] = {c->net->flat_data};
  for (int k = 0; k < c->nshards; k++) CT_TRY(recv_reply(c, k, dst, 1, err));
  return CT_OK;
}

ct_status ct_ps_pull(ct_ps_client *c, int wish, int *relayed, ct_error *err) {
  CT_TRY(send_staged(c, err));
  c->clock++;
  c->relayed = 0;
  c->pending_wish |= wish; /* bmuf: it waits for the block's end */
  const bool bmuf = c->opts.mode == CT_DP_BMUF;
  ct_status st = CT_OK;
  if (!bmuf || c->clock % c->opts.sync_period == 0 || c->clock >= c->max_iter) {
    const int w = c->pending_wish;
    c->pending_wish = 0;
    st = bmuf ? block_sync(c, w, err) : pull_weights(c, w, err);
  }
  *relayed = c->comm->rank == 0 ? c->relayed : 0;
  return cause(c, st, err);
}

int ct_ps_client_rank(const ct_ps_client *c) { return c->comm->rank; }

bool ct_ps_launcher_keeps_survivors(void) {
  if (!ct_mpi_launched()) return true; /* processes started one by one (Gloo shards) */
  const char *v = getenv("OMPI_MCA_orte_enable_recovery");
  return v && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
}

ct_status ct_ps_fetch(ct_ps_client *c, float *flat, float *history, int nslots, ct_error *err) {
  const bool bmuf = c->opts.mode == CT_DP_BMUF;
  const size_t fc = c->net->flat_count;
  float *const dst[3] = {flat, history, history && nslots > 1 ? history + fc : NULL};
  const int n = bmuf ? 1 : 1 + nslots;
  ct_status st = CT_OK;
  for (int k = 0; k < c->nshards && st == CT_OK; k++) st = send_request(c, k, PS_FETCH, c->clock, 0, NULL, 0, err);
  for (int k = 0; k < c->nshards && st == CT_OK; k++) st = recv_reply(c, k, dst, n, err);
  return cause(c, st, err);
}

ct_status ct_ps_client_finish(ct_ps_client *c, bool stopped, ct_error *err) {
  ct_status st = CT_OK;
  for (int k = 0; k < c->nshards && st == CT_OK; k++)
    st = send_request(c, k, PS_DONE, c->clock, stopped, NULL, 0, err);
  st = cause(c, st, err);
  unlink_servers(c, st == CT_OK);
  return st;
}
