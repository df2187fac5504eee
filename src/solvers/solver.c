/* The solver's life cycle and training loop: Caffe's Solver::Init, Step,
 * Solve and SGDSolver::ApplyUpdate. */
#include "solvers/solver.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/settings.h"
#include "core/trace.h"
#include "math/math.h"
#include "proto/catalog.h"
#include "proto/srcpos.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"
#include "runtime/program.h"
#include "runtime/stages.h"
#include "solvers/solver_internal.h"

static Caffe__SolverParameter *clone_param(const Caffe__SolverParameter *p) {
  size_t n = caffe__solver_parameter__get_packed_size(p);
  uint8_t *buf = ct_xcalloc(n + 1, 1);
  caffe__solver_parameter__pack(p, buf);
  Caffe__SolverParameter *c = caffe__solver_parameter__unpack(NULL, n, buf);
  free(buf);
  CT_ASSERT(c != NULL);
  return c;
}

/* Caffe's CheckSnapshotWritePermissions. */
static ct_status check_snapshot_prefix(const ct_solver *s, ct_error *err) {
  if (s->param->snapshot <= 0 || !ct_solver_is_root(s)) return CT_OK;
  if (!s->param->snapshot_prefix)
    return ct_error_set(err, CT_ERR_INVALID,
                        "In solver params, snapshot is specified but snapshot_prefix is not");
  char *probe = ct_solver_snapshot_filename(s, ".tempfile");
  FILE *f = fopen(probe, "w");
  if (f) {
    fclose(f);
    remove(probe);
  }
  free(probe);
  if (!f)
    return ct_error_set(err, CT_ERR_IO,
                        "Cannot write to snapshot prefix '%s'.  Make sure that the directory "
                        "exists and is writable.",
                        s->param->snapshot_prefix);
  return CT_OK;
}

/* The fields Caffe reads without a dedicated check, validated up front. */
static ct_status check_param(const Caffe__SolverParameter *p, ct_error *err) {
  if (p->average_loss < 1)
    return ct_error_set(err, CT_ERR_INVALID, "average_loss: must be at least 1, got %d",
                        p->average_loss);
  if (p->iter_size < 1)
    return ct_error_set(err, CT_ERR_INVALID, "iter_size: must be at least 1, got %d", p->iter_size);
  if (p->display < 0)
    return ct_error_set(err, CT_ERR_INVALID, "display: must be >= 0, got %d", p->display);
  if (p->snapshot < 0)
    return ct_error_set(err, CT_ERR_INVALID, "snapshot: must be >= 0, got %d", p->snapshot);
  if (p->snapshot_format == CAFFE__SOLVER_PARAMETER__SNAPSHOT_FORMAT__HDF5)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "snapshot_format: HDF5 is not supported; use BINARYPROTO");
  if (p->weight_decay != 0.0f && strcmp(p->regularization_type, "L2") != 0 &&
      strcmp(p->regularization_type, "L1") != 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "regularization_type: unknown type '%s' (known types: L1, L2)",
                        p->regularization_type);
  for (size_t i = 0; i < p->n_test_iter; i++)
    if (p->test_iter[i] < 0)
      return ct_error_set(err, CT_ERR_INVALID, "test_iter[%zu]: must be >= 0, got %d", i,
                          p->test_iter[i]);
  return CT_OK;
}

static void seed_context(ct_solver *s) {
  uint64_t seed;
  if (s->param->random_seed >= 0) {
    seed = (uint64_t)s->param->random_seed + (uint64_t)s->ctx->rank;
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^
           ((uint64_t)getpid() << 32) ^ (uint64_t)s->ctx->rank;
  }
  ct_rng_seed(&s->ctx->rng, seed);
  s->ctx->seed = seed;
  /* Data order must agree across workers (each takes its own part of one
   * permutation): random_seed itself, never offset by the rank.  Without a
   * random_seed, one worker alone shuffles from the clock; several share a
   * fixed seed, since they cannot agree on a clock reading. */
  if (s->param->random_seed >= 0) s->ctx->data_seed = (uint64_t)s->param->random_seed;
  else if (s->ctx->world > 1) s->ctx->data_seed = 0x636F727461646Full;
  else s->ctx->data_seed = seed;
}

static int cmp_caffe_order(const void *a, const void *b, void *net_) {
  const ct_net *net = net_;
  const ct_net_param *pa = &net->params[*(const int *)a], *pb = &net->params[*(const int *)b];
  if (pa->layer != pb->layer) return pa->layer < pb->layer ? -1 : 1;
  return pa->index - pb->index;
}

/* The callbacks' on_gradients, in order: the program's callback step (from
 * the first callback that has one on). */
static ct_status run_gradient_callbacks(void *user, int arg, ct_error *err) {
  ct_solver *s = user;
  for (int i = 0; i < s->ncallbacks; i++)
    if (s->callbacks[i].on_gradients) CT_TRY(s->callbacks[i].on_gradients(s->callbacks[i].user, err));
  return CT_OK;
}

/* The iteration's program: the train net's passes, the solver's update
 * step and the callbacks' on_gradients. */
static ct_status make_runtime(ct_solver *s, ct_error *err) {
  ct_rt_opts o = {.iter_size = s->param->iter_size,
                  .update = ct_solver_update_step,
                  .update_user = s,
                  .no_graphs = s->opts.no_replay,
                  .no_launch_ahead = s->opts.no_launch_ahead};
  return ct_runtime_new(&s->rt, s->net, &o, err);
}

static ct_status init_update_state(ct_solver *s, ct_error *err) {
  const ct_net *net = s->net;
  size_t bytes = (size_t)s->rule->nslots * net->flat_count * sizeof(float);
  s->history = ct_mem_alloc(s->ctx->device, bytes); /* zeroed, as Caffe's fresh history */
  s->caffe_order = ct_xcalloc((size_t)net->nparams + 1, sizeof(int));
  for (int i = 0; i < net->nparams; i++) s->caffe_order[i] = i;
  qsort_r(s->caffe_order, (size_t)net->nparams, sizeof(int), cmp_caffe_order, (void *)net);
  CT_TRY(make_runtime(s, err));
  return ct_solver_update_init(s, err);
}

static void log_param(const ct_solver *s) {
  if (!ct_solver_is_root(s) || ct_log_get_level() > CT_LOG_INFO) return;
  char *text = ct_text_print(&s->param->base);
  if (text) LOG_INFO("Initializing solver from parameters: \n%s", text);
  free(text);
}

static ct_status solver_init(ct_solver *s, ct_error *err) {
  Caffe__SolverParameter *p = s->param;
  CT_TRY(ct_solver_upgrade(p, NULL, NULL, err));
  log_param(s);
  CT_TRY(ct_update_rule_lookup(p->type, &s->rule, err));
  if (s->rule->check) CT_TRY(s->rule->check(p, err));
  CT_TRY(ct_lr_schedule_init(&s->lr, p, err));
  CT_TRY(check_param(p, err));
  CT_TRY(check_snapshot_prefix(s, err));
  if (p->debug_info) LOG_WARNING("debug_info: per-layer debug output is not supported; ignored");
  CT_TRY(ct_solver_check_nvcaffe(s, !s->opts.replica, err));
  if (!s->opts.replica) ct_caffe_log_ignored_fields(&p->base);
  seed_context(s);
  CT_TRY(ct_solver_build_nets(s, err));
  if (ct_solver_is_root(s)) LOG_INFO("Solver scaffolding done.");
  CT_TRY(init_update_state(s, err));
  s->losses = ct_xcalloc((size_t)p->average_loss, sizeof(float));
  s->test_scores = ct_xcalloc((size_t)s->ntest_nets + 1, sizeof(float *));
  s->ntest_scores = ct_xcalloc((size_t)s->ntest_nets + 1, sizeof(int));
  s->iter = 0;
  s->current_step = 0;
  return CT_OK;
}

ct_status ct_solver_init(ct_solver **out, const Caffe__SolverParameter *param,
                         const ct_solver_opts *opts, ct_context *ctx, ct_error *err) {
  *out = NULL;
  ct_solver *s = ct_xcalloc(1, sizeof *s);
  s->param = clone_param(param);
  s->ctx = ctx;
  if (opts) s->opts = *opts;
  ct_status st = solver_init(s, err);
  if (st != CT_OK) {
    ct_srcpos_locate(err, &param->base); /* "lr_policy: ..." gets the field's FILE:LINE:COL */
    ct_solver_free(s);
    return st;
  }
  *out = s;
  return CT_OK;
}

/* The test nets' pipelines (ct_solver_set_pipeline), if any. */
static void free_test_stages(ct_solver *s) {
  for (int i = 0; s->test_stages && i < s->ntest_nets; i++) {
    ct_program_free(s->test_progs[i]);
    ct_stages_free(s->test_stages[i]);
  }
  free(s->test_stages);
  free(s->test_progs);
  s->test_stages = NULL;
  s->test_progs = NULL;
}

void ct_solver_free(ct_solver *s) {
  if (!s) return;
  free_test_stages(s);
  ct_runtime_free(s->rt);
  ct_solver_update_free(s);
  free(s->callbacks);
  for (int i = 0; i < s->ntest_nets; i++) ct_net_free(s->test_nets[i]);
  free(s->test_nets);
  if (s->history) ct_mem_free(s->ctx->device, s->history);
  ct_net_free(s->net);
  ct_lr_schedule_free(&s->lr);
  free(s->caffe_order);
  free(s->losses);
  for (int i = 0; s->test_scores && i < s->ntest_nets; i++) free(s->test_scores[i]);
  free(s->test_scores);
  free(s->ntest_scores);
  if (s->param) protobuf_c_message_free_unpacked(&s->param->base, NULL);
  free(s);
}

void ct_solver_add_callback(ct_solver *s, const ct_solver_callback *cb) {
  s->callbacks = ct_xrealloc(s->callbacks, (size_t)(s->ncallbacks + 1) * sizeof *s->callbacks);
  s->callbacks[s->ncallbacks++] = *cb;
  if (cb->on_gradients) ct_runtime_set_gradients_callback(s->rt, run_gradient_callbacks, s);
}

ct_status ct_solver_set_reduce(ct_solver *s, ct_comm *comm, const ct_reduce_opts *opts,
                               bool log_timing, int *requests, ct_error *err) {
  CT_TRY(ct_runtime_set_reduce(s->rt, comm, opts, log_timing, requests, err));
  return ct_runtime_broadcast_params(s->rt, 0, err);
}

ct_status ct_solver_set_ps(ct_solver *s, ct_ps_client *ps, int *requests, ct_error *err) {
  CT_TRY(ct_runtime_set_ps(s->rt, ps, requests, err));
  return ct_ps_client_start(ps, s->history, s->rule->nslots, err);
}

ct_status ct_solver_set_pipeline(ct_solver *s, ct_comm *comm, const char *const *after, int nafter,
                                 const ct_stages_opts *opts, ct_error *err) {
  /* each stage would skip its update alone when its gradient overflows */
  if (s->loss_scale.mode != CT_LOSS_SCALE_OFF)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "--pipeline with loss scaling (float16, or global_grad_scale): the stages "
                        "would each decide alone to skip an update; use --precision=bf16 or fp32");
  CT_TRY(ct_runtime_set_pipeline(s->rt, comm, after, nafter, opts, err));
  ct_solver_update_set_stages(s, ct_runtime_stages(s->rt));
  free_test_stages(s);
  if (s->ntest_nets == 0) return CT_OK;
  s->test_stages = ct_xcalloc((size_t)s->ntest_nets, sizeof *s->test_stages);
  s->test_progs = ct_xcalloc((size_t)s->ntest_nets, sizeof *s->test_progs);
  for (int i = 0; i < s->ntest_nets; i++) {
    const ct_status st = ct_stages_create(&s->test_stages[i], s->test_nets[i], comm, after, nafter,
                                          1, NULL, err);
    if (st != CT_OK) {
      free_test_stages(s);
      return ct_error_prefix(err, "test net #%d", i);
    }
    s->test_progs[i] = ct_program_new(s->ctx, false);
    ct_stages_build_forward(s->test_stages[i], s->test_progs[i]);
  }
  return CT_OK;
}

void ct_solver_request(ct_solver *s, int actions) { ct_runtime_request(s->rt, actions); }

/* ------------------------------------------------------------------ update */

/* Caffe's ClipGradients log line, for the clipping iteration seq did. */
static void log_clip(const ct_solver *s, unsigned seq) {
  const float clip = s->param->clip_gradients;
  const ct_update_clip c = ct_solver_update_clip(s, seq);
  if (clip >= 0 && c.l2 > clip)
    LOG_INFO("Gradient clipping: scaling down gradients (L2 norm %g > %g) by scale factor %g",
             (double)c.l2, (double)clip, (double)c.scale);
}

/* Loss scaling's lines for iteration iter (sequence seq): a skipped update
 * always, the scale at each display. */
static void log_loss_scale(ct_solver *s, int iter, unsigned seq) {
  if (!ct_solver_loss_scale_read(s, seq) || !ct_solver_is_root(s)) return;
  const ct_loss_scale_state *ls = &s->loss_scale_now;
  const Caffe__SolverParameter *p = s->param;
  if (ls->overflow)
    LOG_INFO("Iteration %d: the gradient overflowed: update skipped (%u so far), loss scale now %g",
             iter, ls->skipped, (double)ls->scale);
  else if (p->display && iter % p->display == 0)
    LOG_INFO("Iteration %d, loss scale = %g (%u updates skipped)", iter, (double)ls->scale,
             ls->skipped);
}

/* Caffe's line, or with NVCaffe's schedules (a momentum_policy or
 * weight_decay_policy other than fixed, or LARC) NVCaffe's, which adds the
 * momentum and the weight decay of the iteration. */
static void log_rate(const ct_solver *s, int iter, const ct_update_step *step) {
  const Caffe__SolverParameter *p = s->param;
  if (!p->display || iter % p->display != 0 || !ct_solver_is_root(s)) return;
  if (s->lr.momentum_policy != CT_MOMENTUM_POLICY_FIXED ||
      s->lr.decay_policy != CT_DECAY_POLICY_FIXED || p->larc)
    LOG_INFO("Iteration %d, lr = %g, m = %g, wd = %g", iter, (double)step->rate,
             (double)step->momentum, (double)step->weight_decay);
  else LOG_INFO("Iteration %d, lr = %g", iter, (double)step->rate);
}

void ct_solver_apply_update(ct_solver *s) {
  /* outside the iterations: the slots of the last one, which is finished */
  ct_runtime_drain(s->rt);
  const unsigned seq = ct_runtime_clock(s->rt)->launched;
  const ct_update_step step = ct_solver_update_prepare(s, s->iter, seq);
  s->rate = step.rate;
  log_rate(s, s->iter, &step);
  ct_solver_update_plain(s);
  ct_runtime_drain(s->rt);
  log_clip(s, seq);
}

/* ------------------------------------------------------------------ loop */

/* Caffe's UpdateSmoothedLoss. */
static void update_smoothed_loss(ct_solver *s, float loss, int start_iter) {
  int average = s->param->average_loss;
  if (s->nlosses < average) {
    s->losses[s->nlosses++] = loss;
    s->smoothed_loss = (s->smoothed_loss * (float)(s->nlosses - 1) + loss) / (float)s->nlosses;
  } else {
    int idx = (s->iter - start_iter) % average;
    s->smoothed_loss += (loss - s->losses[idx]) / (float)average;
    s->losses[idx] = loss;
  }
}

static void display_outputs(ct_solver *s) {
  double lapse_d = ct_monotonic_s() - s->timer_start;
  float lapse = (float)lapse_d;
  float per_s = (float)(s->iter - s->iterations_last) / (lapse != 0.0f ? lapse : 1.0f);
  LOG_INFO("Iteration %d (%g iter/s, %gs/%d iters), loss = %g", s->iter, (double)per_s,
           (double)lapse, s->param->display, (double)s->smoothed_loss);
  s->timer_start = ct_monotonic_s();
  s->iterations_last = s->iter;
  const ct_net *net = s->net;
  int score = 0;
  for (int j = 0; j < net->noutputs; j++) {
    int b = net->output_ids[j];
    const ct_tensor *t = net->blobs[b];
    float w = ct_solver_blob_loss_weight(net, b);
    float *v = ct_xcalloc(t->count + 1, sizeof(float));
    ct_tensor_download(t, v);
    for (size_t k = 0; k < t->count; k++) {
      if (w != 0.0f)
        LOG_INFO("    Train net output #%d: %s = %g (* %g = %g loss)", score++, t->name,
                 (double)v[k], (double)w, (double)(w * v[k]));
      else
        LOG_INFO("    Train net output #%d: %s = %g", score++, t->name, (double)v[k]);
    }
    free(v);
  }
}

static ct_status nonfinite_loss(ct_solver *s, float loss, ct_error *err) {
  int li = ct_net_first_nonfinite_layer(s->net);
  const char *what = isnan(loss) ? "nan" : (loss > 0 ? "inf" : "-inf");
  if (li < 0)
    return ct_error_set(err, CT_ERR_NUMERIC,
                        "iteration %d: the loss is %s, but no layer output is non-finite when "
                        "the forward pass is repeated",
                        s->iter, what);
  const ct_layer *l = s->net->layers[li];
  return ct_error_set(err, CT_ERR_NUMERIC,
                      "iteration %d: the loss is %s; the first non-finite output is from layer "
                      "'%s' (%s)",
                      s->iter, what, l->name, l->ops->type);
}

/* The per-worker batch: the first dimension of the train net's first top. */
static long long train_batch(const ct_net *net) {
  for (int l = 0; l < net->nlayers; l++)
    if (net->layers[l]->ntop > 0 && net->tops[l][0]->ndim > 0) return net->tops[l][0]->shape[0];
  return 0;
}

/* Reports a display to opts.on_display (the root only). */
static ct_status notify_display(ct_solver *s, int start_iter, float lr, ct_error *err) {
  if (!s->opts.on_display || !ct_solver_is_root(s)) return CT_OK;
  ct_solver_display d = {.iter = s->iter,
                         .start_iter = start_iter,
                         .loss = s->smoothed_loss,
                         .lr = lr,
                         .inputs_per_iter = train_batch(s->net) * s->param->iter_size *
                                            (s->ctx->world > 0 ? s->ctx->world : 1),
                         .solver = s};
  if (s->loss_scale.mode != CT_LOSS_SCALE_OFF) {
    d.loss_scale = s->loss_scale_now.scale;
    d.skipped = s->loss_scale_now.skipped;
  }
  return s->opts.on_display(s->opts.display_user, &d, err);
}

/* Whether iteration s->iter + 1 may be launched before s->iter is
 * finished.  Not when the host needs the net between them: s->iter
 * displays (it reads the outputs), s->iter + 1 tests first, a snapshot
 * follows s->iter, or s->iter is the last; nor when the runtime says no (a
 * device that runs at once, a program still watched or captured, a pending
 * request).  Every data-parallel worker decides alike: the inputs are the
 * shared schedule and what the runtime's workers agree on. */
static bool may_launch_ahead(const ct_solver *s, int stop_iter) {
  const Caffe__SolverParameter *p = s->param;
  const int next = s->iter + 1;
  if (next >= stop_iter) return false;
  if (p->display && s->iter % p->display == 0) return false;
  if (p->test_interval && next % p->test_interval == 0) return false;
  if (p->snapshot && next % p->snapshot == 0) return false;
  return ct_runtime_may_launch_ahead(s->rt);
}

/* A launched iteration: its number, its rate and the rate of the update
 * before it (what a display reports). */
typedef struct {
  unsigned seq;
  ct_update_step step;
  float rate_before;
} launched;

/* Caffe's per-iteration start: the callbacks' on_start, the rate from the
 * schedule, then the iteration (forward, backward, update) launched. */
static ct_status launch(ct_solver *s, int iter, launched *it, ct_error *err) {
  for (int i = 0; i < s->ncallbacks; i++)
    if (s->callbacks[i].on_start) s->callbacks[i].on_start(s->callbacks[i].user);
  it->rate_before = s->rate;
  it->step = ct_solver_update_prepare(s, iter, ct_runtime_next(s->rt));
  s->rate = it->step.rate;
  return ct_runtime_launch(s->rt, &it->seq, err);
}

ct_status ct_solver_step(ct_solver *s, int iters, ct_error *err) {
  const Caffe__SolverParameter *p = s->param;
  const int start_iter = s->iter, stop_iter = s->iter + iters;
  const bool root = ct_solver_is_root(s);
  s->requested_early_exit = false;
  s->nlosses = 0;
  s->smoothed_loss = 0.0f;
  s->timer_start = ct_monotonic_s();
  s->iterations_last = s->iter;
  if (iters > 0) ct_solver_update_reset_halt(s);
  ct_runtime_set_trace_iter(s->rt, s->iter);
  launched cur = {0}, next = {0};
  bool ahead = false; /* iteration s->iter was launched while the one before it ran */
  while (s->iter < stop_iter) {
    if (!ahead) {
      if (p->test_interval && s->iter % p->test_interval == 0 &&
          (s->iter > 0 || p->test_initialization)) {
        if (ct_solver_runs_tests(s)) CT_TRY(ct_solver_test_all(s, err));
        if (s->requested_early_exit) break;
      }
      CT_TRY(launch(s, s->iter, &cur, err));
    } else {
      cur = next;
      ahead = false;
    }
    if (may_launch_ahead(s, stop_iter)) {
      CT_TRY(launch(s, s->iter + 1, &next, err)); /* on failure nothing is in flight */
      ahead = true;
      s->launched_ahead++;
    }
    ct_rt_result res;
    CT_TRY(ct_runtime_finish(s->rt, cur.seq, &res, err)); /* likewise */
    const float loss = (float)res.loss / (float)p->iter_size;
    if (!isfinite(loss)) {
      if (!s->opts.continue_on_nonfinite) {
        /* the update skipped itself, and that of an iteration launched ahead */
        ct_runtime_drain(s->rt);
        return nonfinite_loss(s, loss, err);
      }
      LOG_WARNING("Iteration %d: the loss is not finite (%g); continuing as asked", s->iter,
                  (double)loss);
    }
    update_smoothed_loss(s, loss, start_iter);
    const bool display = p->display && s->iter % p->display == 0;
    if (display && root) display_outputs(s);
    log_rate(s, s->iter, &cur.step);
    log_loss_scale(s, s->iter, cur.seq);
    if (!s->loss_scale_now.overflow) log_clip(s, cur.seq);
    if (display) CT_TRY(notify_display(s, start_iter, cur.rate_before, err));
    ++s->iter;

    /* A request that arrives while the next iteration is in flight acts
     * after it (the next round launches nothing ahead while one waits). */
    if (ahead) continue;
    if (root && ((p->snapshot && s->iter % p->snapshot == 0) || (res.actions & CT_RT_SNAPSHOT)))
      CT_TRY(ct_solver_snapshot(s, err));
    if (res.actions & CT_RT_STOP) {
      s->requested_early_exit = true;
      break;
    }
  }
  return CT_OK;
}

ct_status ct_solver_solve(ct_solver *s, const char *resume_file, ct_error *err) {
  const Caffe__SolverParameter *p = s->param;
  LOG_INFO("Solving %s", s->net->name);
  LOG_INFO("Learning Rate Policy: %s", p->lr_policy ? p->lr_policy : "");
  s->requested_early_exit = false;
  if (resume_file) {
    LOG_INFO("Restoring previous solver status from %s", resume_file);
    CT_TRY(ct_solver_restore(s, resume_file, err));
  }
  const int start_iter = s->iter;
  CT_TRY(ct_solver_step(s, p->max_iter - s->iter, err));
  if (ct_solver_is_root(s) && p->snapshot_after_train &&
      (!p->snapshot || s->iter % p->snapshot != 0) && s->snapshot_iter_plus1 != s->iter + 1)
    CT_TRY(ct_solver_snapshot(s, err));
  if (s->requested_early_exit) {
    LOG_INFO("Optimization stopped early.");
    return CT_OK;
  }
  const bool display = p->display && s->iter % p->display == 0;
  if (display) {
    double loss = 0;
    CT_TRY(ct_runtime_forward(s->rt, &loss, err));
    update_smoothed_loss(s, (float)loss, start_iter);
    LOG_INFO("Iteration %d, loss = %g", s->iter, (double)s->smoothed_loss);
  }
  if (p->test_interval && s->iter % p->test_interval == 0 && ct_solver_runs_tests(s))
    CT_TRY(ct_solver_test_all(s, err));
  if (display) CT_TRY(notify_display(s, start_iter, s->rate, err));
  LOG_INFO("Optimization Done.");
  return CT_OK;
}

void ct_solver_program_stats(const ct_solver *s, ct_program_stats *st) { ct_runtime_stats(s->rt, st); }
