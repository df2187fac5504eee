/* cortado.h: solvers and their callbacks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "net/net_load.h"
#include "parallel/comm_nccl.h"
#include "proto/reflect.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

/* A callback of the caller's, and the solver whose nets it may touch. */
typedef struct api_callback {
  cortado_solver_callback cb;
  cortado_solver *owner;
} api_callback;

/* The caller's callbacks, kept with the solver that calls them. */
struct api_callbacks {
  api_callback **list;
  int n;
};

cortado_solver *api_solver_wrap(ct_solver *s, cortado_context *cctx, bool owned) {
  cortado_solver *cs = ct_xcalloc(1, sizeof *cs);
  cs->s = s;
  cs->cctx = cctx;
  if (cctx) api_context_retain(cctx);
  cs->owned = owned;
  cs->train = api_net_wrap(s->net, cctx, false);
  cs->tests = ct_xcalloc((size_t)s->ntest_nets + 1, sizeof *cs->tests);
  for (int i = 0; i < s->ntest_nets; i++) cs->tests[i] = api_net_wrap(s->test_nets[i], cctx, false);
  snprintf(cs->type, sizeof cs->type, "%s", s->param->type ? s->param->type : "SGD");
  return cs;
}

void api_solver_unwrap(cortado_solver *cs) {
  if (!cs) return;
  api_net_unwrap(cs->train);
  for (int i = 0; i < cs->s->ntest_nets; i++) api_net_unwrap(cs->tests[i]);
  free(cs->tests);
  api_callbacks *cbs = cs->callbacks;
  for (int i = 0; cbs && i < cbs->n; i++) free(cbs->list[i]);
  if (cbs) free(cbs->list);
  free(cbs);
  if (cs->owned) ct_solver_free(cs->s);
  if (cs->comm) ct_comm_free(cs->comm);
  cortado_context_free(cs->cctx);
  free(cs);
}

/* Every net of the solver, for the GPU host copies around its work. */
static void flush_all(cortado_solver *cs) {
  api_net_flush(cs->train);
  for (int i = 0; i < cs->s->ntest_nets; i++) api_net_flush(cs->tests[i]);
}

static void touched_all(cortado_solver *cs) {
  api_net_touched(cs->train);
  for (int i = 0; i < cs->s->ntest_nets; i++) api_net_touched(cs->tests[i]);
}

/* ------------------------------------------------------------------ building */

void api_apply_train_state(Caffe__SolverParameter *sp, int level, const char *const *stages, int nstages) {
  if (level == 0 && nstages == 0) return;
  const ProtobufCFieldDescriptor *f = ct_pb_field(&caffe__solver_parameter__descriptor, "train_state");
  Caffe__NetState *st = (Caffe__NetState *)ct_pb_mutable_message(&sp->base, f);
  st->has_level = 1;
  st->level = level;
  if (nstages > 0) {
    st->stage = ct_xrealloc(st->stage, (st->n_stage + (size_t)nstages) * sizeof(char *));
    for (int i = 0; i < nstages; i++) st->stage[st->n_stage++] = ct_xstrdup(stages[i]);
  }
}

static cortado_status build(cortado_context *ctx, Caffe__SolverParameter *sp,
                            const cortado_solver_options *opts, cortado_solver **out) {
  static const cortado_solver_options defaults = CORTADO_SOLVER_OPTIONS_INIT;
  if (!opts) opts = &defaults;
  if (opts->type)
    ct_pb_set_string(&sp->base, ct_pb_field(&caffe__solver_parameter__descriptor, "type"), opts->type);
  api_apply_train_state(sp, opts->level, opts->stages, opts->nstages);
  ct_solver_opts o = {0};
  o.quiet_nets = opts->quiet;
  o.keep_blob_diffs = opts->keep_blob_diffs;
  ct_error err;
  ct_solver *s = NULL;
  ct_status st = ct_solver_init(&s, sp, &o, &ctx->ctx, &err);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  if (st != CT_OK) return api_fail(&err);
  *out = api_solver_wrap(s, ctx, true);
  return CORTADO_OK;
}

cortado_status cortado_solver_create(cortado_context *ctx, const char *path,
                                     const cortado_solver_options *opts, cortado_solver **out) {
  *out = NULL;
  ct_error err;
  Caffe__SolverParameter *sp;
  if (ct_solver_param_read(path, &sp, &err) != CT_OK) return api_fail(&err);
  return build(ctx, sp, opts, out);
}

cortado_status cortado_solver_create_from_text(cortado_context *ctx, const char *text, size_t len,
                                               const cortado_solver_options *opts,
                                               cortado_solver **out) {
  *out = NULL;
  ct_error err;
  ProtobufCMessage *m;
  if (ct_text_parse(&caffe__solver_parameter__descriptor, text, len, "<solver text>", &m, &err) != CT_OK)
    return api_fail(&err);
  Caffe__SolverParameter *sp = (Caffe__SolverParameter *)m;
  if (ct_solver_upgrade(sp, NULL, "<solver text>", &err) != CT_OK) {
    protobuf_c_message_free_unpacked(m, NULL);
    return api_fail(&err);
  }
  return build(ctx, sp, opts, out);
}

void cortado_solver_free(cortado_solver *cs) {
  if (!cs) return;
  CT_ASSERTF(cs->owned, "cortado_solver_free: this solver belongs to a data-parallel worker");
  api_solver_unwrap(cs);
}

/* ------------------------------------------------------------------ looking */

const char *cortado_solver_type(const cortado_solver *cs) { return cs->type; }
cortado_net *cortado_solver_net(cortado_solver *cs) { return cs->train; }
int cortado_solver_num_test_nets(const cortado_solver *cs) { return cs->s->ntest_nets; }

cortado_net *cortado_solver_test_net(cortado_solver *cs, int i) {
  CT_ASSERTF(i >= 0 && i < cs->s->ntest_nets, "test net %d of %d", i, cs->s->ntest_nets);
  return cs->tests[i];
}

int cortado_solver_iter(const cortado_solver *cs) { return cs->s->iter; }
int cortado_solver_max_iter(const cortado_solver *cs) { return cs->s->param->max_iter; }
float cortado_solver_smoothed_loss(const cortado_solver *cs) { return cs->s->smoothed_loss; }
float cortado_solver_rate(const cortado_solver *cs) { return cs->s->rate; }
int cortado_solver_rank(const cortado_solver *cs) { return cs->s->ctx->rank; }
int cortado_solver_world(const cortado_solver *cs) { return cs->s->ctx->world > 0 ? cs->s->ctx->world : 1; }

/* ------------------------------------------------------------------ running */

/* After a step: the failure a custom layer's backward recorded comes first
 * (the step went on past it), else the step's own. */
static cortado_status finish(cortado_solver *cs, ct_status st, ct_error *err) {
  touched_all(cs);
  ct_error layer_err;
  ct_status lst = api_custom_take_failure(cs->s->net, &layer_err);
  if (lst != CT_OK) return api_fail(&layer_err);
  return api_result(st, err);
}

cortado_status cortado_solver_step(cortado_solver *cs, int iters) {
  ct_error err;
  if (iters < 0) return cortado_set_error(CORTADO_ERR_INVALID, "step: %d iterations", iters);
  flush_all(cs);
  sigset_t mask;
  const bool shielded = api_shield(&mask);
  ct_status st = ct_solver_step(cs->s, iters, &err);
  api_unshield(shielded, &mask);
  return finish(cs, st, &err);
}

cortado_status cortado_solver_solve(cortado_solver *cs, const char *resume) {
  ct_error err;
  flush_all(cs);
  sigset_t mask;
  const bool shielded = api_shield(&mask);
  ct_status st = ct_solver_solve(cs->s, resume && *resume ? resume : NULL, &err);
  api_unshield(shielded, &mask);
  return finish(cs, st, &err);
}

cortado_status cortado_solver_restore(cortado_solver *cs, const char *path) {
  ct_error err;
  flush_all(cs);
  ct_status st = ct_solver_restore(cs->s, path, &err);
  touched_all(cs);
  return api_result(st, &err);
}

cortado_status cortado_solver_snapshot(cortado_solver *cs) {
  ct_error err;
  flush_all(cs);
  return api_result(ct_solver_snapshot(cs->s, &err), &err);
}

cortado_status cortado_solver_test_all(cortado_solver *cs) {
  ct_error err;
  flush_all(cs);
  sigset_t mask;
  const bool shielded = api_shield(&mask);
  ct_status st = ct_solver_test_all(cs->s, &err);
  api_unshield(shielded, &mask);
  return finish(cs, st, &err);
}

cortado_status cortado_solver_apply_update(cortado_solver *cs) {
  flush_all(cs);
  sigset_t mask;
  const bool shielded = api_shield(&mask);
  ct_solver_apply_update(cs->s);
  ct_context_sync(cs->s->ctx);
  api_unshield(shielded, &mask);
  touched_all(cs);
  return CORTADO_OK;
}

cortado_status cortado_solver_copy_from(cortado_solver *cs, const char *caffemodels) {
  ct_error err;
  flush_all(cs);
  ct_status st = ct_solver_copy_trained_files(cs->s, caffemodels, &err);
  touched_all(cs);
  return api_result(st, &err);
}

cortado_status cortado_solver_join_nccl(cortado_solver *cs, const unsigned char *id, int rank, int count) {
  ct_error err;
  ct_context *ctx = cs->s->ctx;
  if (ctx->device == CT_DEVICE_CPU)
    return cortado_set_error(CORTADO_ERR_UNSUPPORTED, "NCCL: the solver is on the CPU (set_mode_gpu first)");
  if (cs->comm) return cortado_set_error(CORTADO_ERR_INVALID, "NCCL: this solver has joined already");
  if (count < 1 || rank < 0 || rank >= count || ctx->rank != rank || (ctx->world > 0 ? ctx->world : 1) != count)
    return cortado_set_error(CORTADO_ERR_INVALID,
                             "NCCL: worker %d of %d, but the solver's nets were built as worker %d of %d "
                             "(set_solver_rank and set_solver_count before making the solver)",
                             rank, count, ctx->rank, ctx->world > 0 ? ctx->world : 1);
  ct_nccl_id nid;
  memcpy(nid.bytes, id, sizeof nid.bytes);
  ct_comm_nccl_opts o = {.timeout_s = 0, .cancel = NULL, .max_ctas = 0};
  ct_comm *comm;
  if (ct_comm_nccl_create(&comm, &nid, rank, count, ctx->device, &o, &err) != CT_OK) return api_fail(&err);
  flush_all(cs);
  ct_reduce_opts ro = {0};
  ct_status st = ct_solver_set_reduce(cs->s, comm, &ro, false, NULL, &err);
  touched_all(cs);
  if (st != CT_OK) {
    ct_comm_free(comm);
    return api_fail(&err);
  }
  cs->comm = comm;
  return CORTADO_OK;
}

void cortado_solver_request(cortado_solver *cs, int requests) {
  int a = 0;
  if (requests & CORTADO_REQUEST_STOP) a |= CT_SOLVER_ACTION_STOP;
  if (requests & CORTADO_REQUEST_SNAPSHOT) a |= CT_SOLVER_ACTION_SNAPSHOT;
  ct_solver_request(cs->s, a);
}

/* ------------------------------------------------------------------ callbacks */

/* On a GPU the caller's code may read and write the nets: the device is
 * idle (on_start waits for an iteration launched ahead), the host copies
 * are stale before and copied back after. */
static void on_start(void *user) {
  api_callback *c = user;
  if (!c->cb.on_start) return;
  cortado_solver *cs = c->owner;
  ct_context_sync(cs->s->ctx);
  touched_all(cs);
  c->cb.on_start(c->cb.user);
  flush_all(cs);
}

static ct_status on_gradients(void *user, ct_error *err) {
  api_callback *c = user;
  if (!c->cb.on_gradients) return CT_OK;
  cortado_solver *cs = c->owner;
  touched_all(cs);
  cortado_status st = c->cb.on_gradients(c->cb.user);
  flush_all(cs);
  if (st == CORTADO_OK) return CT_OK;
  api_last_error((ct_status)st, err);
  return (ct_status)st;
}

void cortado_solver_add_callback(cortado_solver *cs, const cortado_solver_callback *cb) {
  api_callbacks *cbs = cs->callbacks;
  if (!cbs) cs->callbacks = cbs = ct_xcalloc(1, sizeof *cbs);
  api_callback *c = ct_xcalloc(1, sizeof *c);
  c->cb = *cb;
  c->owner = cs;
  cbs->list = ct_xrealloc(cbs->list, (size_t)(cbs->n + 1) * sizeof *cbs->list);
  cbs->list[cbs->n++] = c;
  const ct_solver_callback hook = {cb->on_start ? on_start : NULL, cb->on_gradients ? on_gradients : NULL, c};
  ct_solver_add_callback(cs->s, &hook);
}
