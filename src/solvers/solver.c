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
#include "math/math.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"
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

static ct_status init_update_state(ct_solver *s, ct_error *err) {
  const ct_net *net = s->net;
  size_t bytes = (size_t)s->rule->nslots * net->flat_count * sizeof(float);
  s->history = ct_mem_alloc(s->ctx->device, bytes); /* zeroed, as Caffe's fresh history */
  s->caffe_order = ct_xcalloc((size_t)net->nparams + 1, sizeof(int));
  for (int i = 0; i < net->nparams; i++) s->caffe_order[i] = i;
  qsort_r(s->caffe_order, (size_t)net->nparams, sizeof(int), cmp_caffe_order, (void *)net);
  if (s->ctx->device != CT_DEVICE_CPU) CT_TRY(ct_solver_gpu_init(s, err));
  return CT_OK;
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
    ct_solver_free(s);
    return st;
  }
  *out = s;
  return CT_OK;
}

void ct_solver_free(ct_solver *s) {
  if (!s) return;
  ct_solver_gpu_free(s);
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

void ct_solver_set_hooks(ct_solver *s, const ct_solver_hooks *hooks) {
  if (hooks) s->hooks = *hooks;
  else memset(&s->hooks, 0, sizeof s->hooks);
}

void ct_solver_request(ct_solver *s, int actions) {
  if (actions & CT_SOLVER_ACTION_STOP) s->stop_requested = 1;
  if (actions & CT_SOLVER_ACTION_SNAPSHOT) s->snapshot_requested = 1;
}

/* Takes the pending requests (flags cleared). */
static int take_requests(ct_solver *s) {
  int a = 0;
  if (s->snapshot_requested) {
    s->snapshot_requested = 0;
    a |= CT_SOLVER_ACTION_SNAPSHOT;
  }
  if (s->stop_requested) {
    s->stop_requested = 0;
    a |= CT_SOLVER_ACTION_STOP;
  }
  return a;
}

float ct_solver_learning_rate(ct_solver *s) {
  return ct_lr_rate(&s->lr, s->iter, &s->current_step);
}

/* ------------------------------------------------------------------ update */

/* Caffe's ClipGradients: the factor that brings the global L2 norm of the
 * (not yet normalised) gradient down to clip_gradients, or 1. */
static float clip_factor(ct_solver *s) {
  const float clip = s->param->clip_gradients;
  if (clip < 0) return 1.0f;
  const ct_net *net = s->net;
  double sumsq = 0;
  for (int i = 0; i < net->nparams; i++)
    sumsq += ct_dev_sumsq(s->ctx, net->params[i].count, net->flat_diff + net->params[i].offset);
  float l2 = (float)sqrt(sumsq);
  if (l2 <= clip) return 1.0f;
  float factor = clip / l2;
  LOG_INFO("Gradient clipping: scaling down gradients (L2 norm %g > %g) by scale factor %g",
           (double)l2, (double)clip, (double)factor);
  return factor;
}

void ct_solver_apply_update(ct_solver *s) {
  if (s->ctx->device != CT_DEVICE_CPU) {
    ct_solver_gpu_apply_update(s);
    return;
  }
  const Caffe__SolverParameter *p = s->param;
  float rate = ct_solver_learning_rate(s);
  s->rate = rate;
  if (p->display && s->iter % p->display == 0 && ct_solver_is_root(s))
    LOG_INFO("Iteration %d, lr = %g", s->iter, (double)rate);
  ct_update_hparams hp = {0};
  hp.grad_scale = clip_factor(s);
  if (p->iter_size > 1) hp.grad_scale *= 1.0f / (float)p->iter_size;
  hp.l1 = strcmp(p->regularization_type, "L1") == 0;
  hp.momentum = p->momentum;
  hp.momentum2 = p->momentum2;
  hp.rms_decay = p->rms_decay;
  hp.delta = p->delta;
  float correction = 1.0f;
  if (strcmp(s->rule->type, "Adam") == 0)
    correction = ct_update_adam_correction(p->momentum, p->momentum2, s->iter);
  ct_net *net = s->net;
  for (int i = 0; i < net->nparams; i++) {
    const ct_net_param *np = &net->params[i];
    hp.lr = rate * np->lr_mult * correction;
    hp.decay = p->weight_decay * np->decay_mult;
    float *w = net->flat_data + np->offset, *g = net->flat_diff + np->offset;
    float *h0 = s->history + np->offset;
    float *h1 = s->rule->nslots > 1 ? h0 + net->flat_count : NULL;
    s->rule->cpu(np->count, w, g, h0, h1, &hp);
  }
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
  return s->opts.on_display(s->opts.display_user, &d, err);
}

/* One iteration's forward and backward passes; *loss gets their mean. */
static ct_status forward_backward(ct_solver *s, float *loss, ct_error *err) {
  float sum = 0.0f;
  for (int i = 0; i < s->param->iter_size; i++) {
    double l = 0;
    CT_TRY(ct_net_forward(s->net, &l, err));
    if (s->hooks.on_backward) s->hooks.on_backward(s->hooks.user, i, s->param->iter_size);
    ct_net_backward(s->net);
    sum += (float)l;
  }
  *loss = sum / (float)s->param->iter_size;
  return CT_OK;
}

static bool launch_ahead_allowed(const ct_solver *s) {
  if (s->opts.no_launch_ahead) return false;
  return ct_setting_bool("CORTADO_LAUNCH_AHEAD");
}

/* GPU: whether iteration s->iter + 1 may be launched before s->iter is
 * finished.  Not when the host needs the net between them: s->iter
 * displays (it reads the outputs), s->iter + 1 tests first, a snapshot
 * follows s->iter, a request is pending, or s->iter is the last; nor while
 * the program still watches or captures.  Every data-parallel worker
 * decides alike: the inputs are the shared schedule, agreed requests and
 * the hooks' answer. */
static bool may_launch_ahead(const ct_solver *s, int stop_iter) {
  const Caffe__SolverParameter *p = s->param;
  const int next = s->iter + 1;
  if (next >= stop_iter || !launch_ahead_allowed(s)) return false;
  if (p->display && s->iter % p->display == 0) return false;
  if (p->test_interval && next % p->test_interval == 0) return false;
  if (p->snapshot && next % p->snapshot == 0) return false;
  if (s->stop_requested || s->snapshot_requested) return false;
  if (s->hooks.may_launch_ahead && !s->hooks.may_launch_ahead(s->hooks.user)) return false;
  return ct_solver_gpu_steady(s);
}

/* A GPU iteration that was launched: its sequence number and the rate of
 * the update before it (what a display reports). */
typedef struct {
  unsigned seq;
  float rate_before;
} launched;

static ct_status launch_gpu(ct_solver *s, int iter, launched *it, ct_error *err) {
  if (s->hooks.on_start) s->hooks.on_start(s->hooks.user);
  it->rate_before = s->rate;
  return ct_solver_gpu_launch(s, iter, &it->seq, err);
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
  const bool gpu = s->ctx->device != CT_DEVICE_CPU;
  if (gpu && iters > 0) ct_solver_gpu_reset_halt(s);
  launched cur = {0}, next = {0};
  bool ahead = false; /* GPU: iteration s->iter was launched while the one before it ran */
  while (s->iter < stop_iter) {
    if (!ahead) {
      if (!gpu) ct_net_clear_param_diffs(s->net);
      if (p->test_interval && s->iter % p->test_interval == 0 &&
          (s->iter > 0 || p->test_initialization)) {
        if (ct_solver_runs_tests(s)) CT_TRY(ct_solver_test_all(s, err));
        if (s->requested_early_exit) break;
      }
      if (gpu) {
        CT_TRY(launch_gpu(s, s->iter, &cur, err));
      } else {
        if (s->hooks.on_start) s->hooks.on_start(s->hooks.user);
        cur.rate_before = s->rate;
      }
    } else {
      cur = next;
      ahead = false;
    }
    const bool display = p->display && s->iter % p->display == 0;
    float loss;
    /* On a GPU the hook and the update are part of the iteration, which
     * skips the update itself on a non-finite loss (see solver_gpu.c). */
    if (gpu) {
      if (may_launch_ahead(s, stop_iter)) {
        CT_TRY(launch_gpu(s, s->iter + 1, &next, err)); /* on failure nothing is in flight */
        ahead = true;
        s->launched_ahead++;
      }
      CT_TRY(ct_solver_gpu_finish(s, cur.seq, &loss, err)); /* likewise */
    } else {
      CT_TRY(forward_backward(s, &loss, err));
    }
    if (!isfinite(loss)) {
      if (!s->opts.continue_on_nonfinite) {
        if (ahead) ct_context_sync(s->ctx); /* its update was skipped too (the halt word) */
        return nonfinite_loss(s, loss, err);
      }
      LOG_WARNING("Iteration %d: the loss is not finite (%g); continuing as asked", s->iter,
                  (double)loss);
    }
    update_smoothed_loss(s, loss, start_iter);
    if (display && root) display_outputs(s);
    if (!gpu) {
      if (s->hooks.on_gradients) CT_TRY(s->hooks.on_gradients(s->hooks.user, err));
      ct_solver_apply_update(s);
      if (s->hooks.on_iteration_end) CT_TRY(s->hooks.on_iteration_end(s->hooks.user, 0, err));
    } else if (display && root) {
      LOG_INFO("Iteration %d, lr = %g", s->iter, (double)s->rate);
    }
    if (display) CT_TRY(notify_display(s, start_iter, cur.rate_before, err));
    ++s->iter;

    /* A request that arrives while the next iteration is in flight acts
     * after it (the next round launches nothing ahead while one waits). */
    if (ahead) continue;
    int request = take_requests(s);
    if (root && ((p->snapshot && s->iter % p->snapshot == 0) ||
                 (request & CT_SOLVER_ACTION_SNAPSHOT)))
      CT_TRY(ct_solver_snapshot(s, err));
    if (request & CT_SOLVER_ACTION_STOP) {
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
    CT_TRY(ct_net_forward(s->net, &loss, err));
    update_smoothed_loss(s, (float)loss, start_iter);
    LOG_INFO("Iteration %d, loss = %g", s->iter, (double)s->smoothed_loss);
  }
  if (p->test_interval && s->iter % p->test_interval == 0 && ct_solver_runs_tests(s))
    CT_TRY(ct_solver_test_all(s, err));
  if (display) CT_TRY(notify_display(s, start_iter, s->rate, err));
  LOG_INFO("Optimization Done.");
  return CT_OK;
}
