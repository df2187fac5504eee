/* The update step of the iteration's program (runtime/runtime.h), on every
 * device: one fused step over the net's flat buffers (ct_update_fused_run),
 * whose rate and Adam correction come from the iteration's slot, which the
 * host filled when it launched the iteration (ct_solver_update_prepare), and
 * whose clip norm goes back into another slot, read when the iteration is
 * finished.  So the same step can be replayed from a CUDA graph, and the
 * host can launch iteration n + 1 before it reads n's results.
 *
 * The step guards itself: when a deferred check failed or (unless
 * continue_on_nonfinite) the iteration's loss is not finite it changes
 * nothing, and it leaves a halt word that keeps every later update (an
 * iteration launched ahead) from changing anything either, until the next
 * ct_solver_step clears it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/strutil.h"
#include "math/math.h"
#include "runtime/slots.h"
#include "runtime/stages.h"
#include "solvers/solver_internal.h"

struct ct_solver_update {
  ct_update_fused fused;       /* guarded: for the iteration program */
  ct_update_fused fused_plain; /* unguarded: for ct_solver_apply_update */
  size_t *seg_start;           /* (nparams + 1) on the device */
  size_t *seg_count;           /* (nparams) host (the CPU's loop) */
  float *seg_lr;               /* (nparams) on the device */
  float *seg_decay;            /* (nparams) on the device */
  void *step_slots;            /* two ct_update_step: each iteration's rate, written by the host */
  void *clip_slots;            /* two ct_update_clip: each iteration's clip norm */
  ct_update_step *step_dev;    /* the iteration's ct_update_step, loaded from its slot */
  ct_update_clip *clip_dev;
  unsigned *halt;              /* (1) on the device: an update was skipped for a non-finite loss */
  size_t *tile_start;          /* LARC on a GPU: (ntiles) device, see ct_update_fused */
  int *tile_seg, *seg_tiles;   /* (ntiles), (nparams + 1) device */
  double *tile_sumsq;          /* (2 ntiles) device scratch */
  float *seg_norm;             /* (2 nparams) device scratch */
  double *partials;            /* (CT_UPDATE_CLIP_BLOCKS) GPU scratch */
  unsigned *counter;           /* (1) GPU scratch */
  ct_loss_scale_state *ls_dev; /* (1) loss scaling's state on the device; NULL: none */
  void *ls_slots;              /* two ct_loss_scale_state: each iteration's, after its update */
  ct_stages *stages;           /* pipeline stages (CPU ranks): clip_gradients' norm is over
                                  every stage's gradient (ct_solver_update_set_stages) */
};

static void *dev_upload(ct_context *ctx, const void *host, size_t bytes) {
  void *p = ct_mem_alloc(ctx->device, bytes ? bytes : 1);
  if (bytes) ct_mem_copy(ctx->device, p, CT_DEVICE_CPU, host, bytes);
  return p;
}

/* LARC's tiles on a GPU: each segment [start[i], start[i + 1]) cut into
 * tiles of at most CT_UPDATE_LARC_TILE values (padding is zero and adds
 * nothing to the norms). */
static void larc_tiles_init(ct_solver_update *g, ct_context *ctx, const size_t *start, int n,
                            ct_update_fused *u) {
  int ntiles = 0;
  for (int i = 0; i < n; i++)
    ntiles += (int)((start[i + 1] - start[i] + CT_UPDATE_LARC_TILE - 1) / CT_UPDATE_LARC_TILE);
  size_t *tile_start = ct_xcalloc((size_t)ntiles + 1, sizeof *tile_start);
  int *tile_seg = ct_xcalloc((size_t)ntiles + 1, sizeof *tile_seg);
  int *seg_tiles = ct_xcalloc((size_t)n + 1, sizeof *seg_tiles);
  int t = 0;
  for (int i = 0; i < n; i++) {
    seg_tiles[i] = t;
    for (size_t at = start[i]; at < start[i + 1]; at += CT_UPDATE_LARC_TILE, t++) {
      tile_start[t] = at;
      tile_seg[t] = i;
    }
  }
  seg_tiles[n] = t;
  g->tile_start = dev_upload(ctx, tile_start, (size_t)ntiles * sizeof *tile_start);
  g->tile_seg = dev_upload(ctx, tile_seg, (size_t)ntiles * sizeof *tile_seg);
  g->seg_tiles = dev_upload(ctx, seg_tiles, ((size_t)n + 1) * sizeof *seg_tiles);
  g->tile_sumsq = ct_mem_alloc(ctx->device, 2 * ((size_t)ntiles + 1) * sizeof(double));
  g->seg_norm = ct_mem_alloc(ctx->device, 2 * ((size_t)n + 1) * sizeof(float));
  free(tile_start);
  free(tile_seg);
  free(seg_tiles);
  u->ntiles = ntiles;
  u->tile_start = g->tile_start;
  u->tile_seg = g->tile_seg;
  u->seg_tiles = g->seg_tiles;
  u->tile_sumsq = g->tile_sumsq;
  u->seg_norm = g->seg_norm;
}

/* NVCaffe's LARC applies to its SGD solver only (ct_solver_check_nvcaffe
 * has warned about others). */
static ct_update_larc larc_of(const ct_solver *s) {
  const Caffe__SolverParameter *p = s->param;
  if (!p->larc || s->rule->kind != CT_UPDATE_SGD) return CT_UPDATE_LARC_NONE;
  return strcmp(p->larc_policy, "clip") == 0 ? CT_UPDATE_LARC_CLIP : CT_UPDATE_LARC_SCALE;
}

ct_status ct_solver_check_nvcaffe(const ct_solver *s, bool log, ct_error *err) {
  const Caffe__SolverParameter *p = s->param;
  static const char *const policies[] = {"scale", "clip"};
  const char *name = p->larc_policy ? p->larc_policy : "scale";
  if (strcmp(name, policies[0]) != 0 && strcmp(name, policies[1]) != 0) {
    const char *near = ct_suggest(name, policies, 2);
    if (near)
      return ct_error_set(err, CT_ERR_INVALID,
                          "larc_policy: unknown policy '%s' (known: scale, clip; did you mean '%s'?)",
                          name, near);
    return ct_error_set(err, CT_ERR_INVALID, "larc_policy: unknown policy '%s' (known: scale, clip)",
                        name);
  }
  if (!log || s->rule->kind == CT_UPDATE_SGD) return CT_OK;
  if (p->larc)
    LOG_WARNING("larc: NVCaffe's LARC applies to solver type SGD only; the %s solver ignores it",
                s->rule->type);
  if (s->lr.momentum_policy != CT_MOMENTUM_POLICY_FIXED)
    LOG_WARNING("momentum_policy: NVCaffe schedules the momentum of solver type SGD only; the %s "
                "solver keeps momentum %g",
                s->rule->type, (double)p->momentum);
  return CT_OK;
}

ct_status ct_solver_update_init(ct_solver *s, ct_error *err) {
  ct_context *ctx = s->ctx;
  const ct_net *net = s->net;
  const Caffe__SolverParameter *p = s->param;
  ct_solver_update *g = ct_xcalloc(1, sizeof *g);
  s->update = g;
  const int n = net->nparams;
  size_t *start = ct_xcalloc((size_t)n + 1, sizeof *start);
  float *lr = ct_xcalloc((size_t)n + 1, sizeof *lr), *decay = ct_xcalloc((size_t)n + 1, sizeof *decay);
  g->seg_count = ct_xcalloc((size_t)n + 1, sizeof *g->seg_count);
  for (int i = 0; i < n; i++) {
    start[i] = net->params[i].offset;
    g->seg_count[i] = net->params[i].count;
    lr[i] = net->params[i].lr_mult;
    decay[i] = net->params[i].decay_mult;
  }
  start[n] = net->flat_count;
  g->seg_start = dev_upload(ctx, start, ((size_t)n + 1) * sizeof *start);
  g->seg_lr = dev_upload(ctx, lr, (size_t)n * sizeof *lr);
  g->seg_decay = dev_upload(ctx, decay, (size_t)n * sizeof *decay);
  ct_update_fused *u = &g->fused_plain;
  u->larc = larc_of(s);
  u->larc_eta = p->larc_eta;
  if (u->larc != CT_UPDATE_LARC_NONE && ctx->device != CT_DEVICE_CPU)
    larc_tiles_init(g, ctx, start, n, u);
  free(start);
  free(lr);
  free(decay);
  g->step_slots = ct_slots_new(ctx, sizeof(ct_update_step));
  g->clip_slots = ct_slots_new(ctx, sizeof(ct_update_clip));
  g->halt = ct_mem_alloc(ctx->device, sizeof(unsigned));
  g->step_dev = ct_mem_alloc(ctx->device, sizeof *g->step_dev);
  g->clip_dev = ct_mem_alloc(ctx->device, sizeof *g->clip_dev);
  g->partials = ct_mem_alloc(ctx->device, CT_UPDATE_CLIP_BLOCKS * sizeof(double));
  g->counter = ct_mem_alloc(ctx->device, sizeof(unsigned));
  u->kind = s->rule->kind;
  u->count = net->flat_count;
  u->nseg = n;
  u->seg_start = g->seg_start;
  u->seg_lr_mult = g->seg_lr;
  u->seg_decay_mult = g->seg_decay;
  u->seg_count = g->seg_count;
  u->l1 = strcmp(p->regularization_type, "L1") == 0;
  u->iter_size = p->iter_size;
  u->clip = p->clip_gradients;
  u->momentum2 = p->momentum2;
  u->rms_decay = p->rms_decay;
  u->delta = p->delta;
  g->fused = g->fused_plain;
  g->fused.check_word = ctx->check_word; /* NULL on the CPU, whose checks fail at once */
  g->fused.loss = s->opts.continue_on_nonfinite ? NULL : ct_runtime_loss_sum(s->rt);
  g->fused.halt = s->opts.continue_on_nonfinite ? NULL : g->halt;
  if (s->loss_scale.mode != CT_LOSS_SCALE_OFF) {
    const ct_loss_scale_state first = {.scale = s->loss_scale.init};
    g->ls_dev = dev_upload(ctx, &first, sizeof first);
    g->ls_slots = ct_slots_new(ctx, sizeof(ct_loss_scale_state));
    g->fused.skip = &g->ls_dev->overflow;
    s->net->loss_scale = g->ls_dev;
    s->loss_scale_now = first;
  }
  (void)err;
  return CT_OK;
}

ct_status ct_solver_loss_scale_resolve(ct_solver *s, const Caffe__NetParameter *np, ct_error *err) {
  ct_loss_scale_opts o = s->opts.loss_scale;
  const char *from = "--loss_scale";
  if (o.mode == CT_LOSS_SCALE_AUTO) {
    bool f16 = false;
    for (int i = 0; i < s->net->nlayers; i++) f16 |= s->net->layers[i]->dtype == CT_F16;
    if (np && np->has_global_grad_scale && (np->global_grad_scale != 1.0f ||
                                           np->global_grad_scale_adaptive)) {
      o.mode = np->global_grad_scale_adaptive ? CT_LOSS_SCALE_DYNAMIC : CT_LOSS_SCALE_STATIC;
      o.init = np->global_grad_scale;
      from = "global_grad_scale";
    } else {
      o.mode = f16 ? CT_LOSS_SCALE_DYNAMIC : CT_LOSS_SCALE_OFF;
    }
  }
  if (o.init == 0.0f) o.init = CT_LOSS_SCALE_INIT;
  if (o.window == 0) o.window = CT_LOSS_SCALE_WINDOW;
  if (o.mode != CT_LOSS_SCALE_OFF && !(isfinite(o.init) && o.init > 0.0f))
    return ct_error_set(err, CT_ERR_INVALID, "%s: the loss scale must be positive and finite, got %g",
                        from, (double)o.init);
  s->loss_scale = o;
  if (o.mode == CT_LOSS_SCALE_STATIC)
    LOG_INFO("Loss scaling: static, %g (from %s); an update whose gradient overflows is skipped",
             (double)o.init, from);
  else if (o.mode == CT_LOSS_SCALE_DYNAMIC)
    LOG_INFO("Loss scaling: dynamic from %g (from %s): halved, and the update skipped, when the "
             "gradient overflows; doubled after %u clean updates",
             (double)o.init, from, o.window);
  return CT_OK;
}

bool ct_solver_loss_scale_read(ct_solver *s, unsigned seq) {
  if (!s->update || !s->update->ls_dev) return false;
  s->loss_scale_now =
      *(const ct_loss_scale_state *)ct_slot(s->update->ls_slots, sizeof(ct_loss_scale_state), seq);
  return true;
}

void ct_solver_loss_scale_set(ct_solver *s, const ct_loss_scale_state *state) {
  if (!s->update || !s->update->ls_dev) return;
  ct_context_sync(s->ctx);
  ct_mem_copy(s->ctx->device, s->update->ls_dev, CT_DEVICE_CPU, state, sizeof *state);
  s->loss_scale_now = *state;
}

void ct_solver_update_free(ct_solver *s) {
  ct_solver_update *g = s->update;
  if (!g) return;
  int dev = s->ctx->device;
  ct_mem_free(dev, g->seg_start);
  ct_mem_free(dev, g->seg_lr);
  ct_mem_free(dev, g->seg_decay);
  ct_mem_free(dev, g->step_dev);
  ct_mem_free(dev, g->clip_dev);
  ct_mem_free(dev, g->partials);
  ct_mem_free(dev, g->counter);
  ct_mem_free(dev, g->halt);
  if (g->tile_start) {
    ct_mem_free(dev, g->tile_start);
    ct_mem_free(dev, g->tile_seg);
    ct_mem_free(dev, g->seg_tiles);
    ct_mem_free(dev, g->tile_sumsq);
    ct_mem_free(dev, g->seg_norm);
  }
  if (g->ls_dev) {
    ct_mem_free(dev, g->ls_dev);
    ct_slots_free(s->ctx, g->ls_slots);
    s->net->loss_scale = NULL;
  }
  ct_slots_free(s->ctx, g->step_slots);
  ct_slots_free(s->ctx, g->clip_slots);
  free(g->seg_count);
  free(g);
  s->update = NULL;
}

/* Iteration iter's rate (advancing a step schedule), Adam's correction,
 * momentum (NVCaffe's momentum_policy schedules SGD's; the other rules keep
 * theirs, as there) and weight decay (weight_decay_policy, every rule). */
static ct_update_step step_of(ct_solver *s, int iter) {
  const Caffe__SolverParameter *p = s->param;
  ct_update_step step;
  step.rate = ct_lr_rate(&s->lr, iter, &s->current_step);
  step.correction = s->rule->kind == CT_UPDATE_ADAM
                        ? ct_update_adam_correction(p->momentum, p->momentum2, iter)
                        : 1.0f;
  step.momentum =
      s->rule->kind == CT_UPDATE_SGD ? ct_momentum_rate(&s->lr, iter, step.rate) : p->momentum;
  step.weight_decay = ct_weight_decay_rate(&s->lr, iter);
  return step;
}

ct_update_step ct_solver_update_prepare(ct_solver *s, int iter, unsigned seq) {
  ct_update_step *step = ct_slot(s->update->step_slots, sizeof *step, seq);
  *step = step_of(s, iter);
  return *step;
}

void ct_solver_update_params(void *solver, int iter, int first, int end) {
  ct_solver *s = solver;
  ct_solver_update *g = s->update;
  ct_net *net = s->net;
  CT_ASSERT(first >= 0 && first <= end && end <= net->nparams);
  /* the GPU's fused kernel spans the whole buffer: servers run on the CPU */
  CT_ASSERT(s->ctx->device == CT_DEVICE_CPU);
  ct_update_fused u = g->fused_plain;
  u.nseg = end - first;
  u.seg_start = g->seg_start + first;
  u.seg_lr_mult = g->seg_lr + first;
  u.seg_decay_mult = g->seg_decay + first;
  u.seg_count = g->seg_count + first;
  const ct_update_step step = step_of(s, iter);
  s->rate = step.rate;
  ct_mem_copy(s->ctx->device, g->step_dev, CT_DEVICE_CPU, &step, sizeof step);
  float *h0 = s->history, *h1 = s->rule->nslots > 1 ? s->history + net->flat_count : NULL;
  ct_update_fused_run(s->ctx, &u, net->flat_data, net->flat_diff, h0, h1, g->step_dev, g->clip_dev,
                      g->partials, g->counter);
  ct_context_sync(s->ctx);
}

static ct_status clip_over_stages(ct_solver *s, const ct_update_fused *u, ct_error *err);

/* The step's work with u's guards; with pipeline stages the clip first
 * (the loss scale taken out of the gradient before). */
static ct_status enqueue(ct_solver *s, const ct_update_fused *u, ct_error *err) {
  ct_solver_update *g = s->update;
  ct_net *net = s->net;
  const ct_iter_clock *clock = ct_runtime_clock(s->rt);
  ct_slots_load_async(clock, NULL, g->step_dev, g->step_slots, sizeof *g->step_dev);
  float *h0 = s->history, *h1 = s->rule->nslots > 1 ? s->history + net->flat_count : NULL;
  /* loss scaling: only the program's passes were seeded with the scale */
  const bool scaled = g->ls_dev && u == &g->fused;
  if (scaled) {
    ct_loss_scale_begin(s->ctx, g->ls_dev);
    ct_loss_scale_unscale(s->ctx, g->ls_dev, net->flat_count, net->flat_diff);
  }
  ct_update_fused staged;
  if (g->stages && u->clip >= 0) {
    CT_TRY(clip_over_stages(s, u, err));
    staged = *u;
    staged.clip_given = g->clip_dev;
    u = &staged;
  }
  ct_update_fused_run(s->ctx, u, net->flat_data, net->flat_diff, h0, h1, g->step_dev, g->clip_dev,
                      g->partials, g->counter);
  if (u->clip >= 0) ct_slots_store_async(clock, NULL, g->clip_slots, g->clip_dev, sizeof *g->clip_dev);
  if (scaled) {
    ct_loss_scale_adjust(s->ctx, g->ls_dev, &s->loss_scale);
    ct_slots_store_async(clock, NULL, g->ls_slots, g->ls_dev, sizeof *g->ls_dev);
  }
  return CT_OK;
}

ct_status ct_solver_update_step(void *solver, int arg, ct_error *err) {
  ct_solver *s = solver;
  return enqueue(s, &s->update->fused, err);
}

void ct_solver_update_plain(ct_solver *s) {
  ct_error err;
  const ct_status st = enqueue(s, &s->update->fused_plain, &err);
  CT_ASSERTF(st == CT_OK, "%s", err.msg);
  (void)st;
}

void ct_solver_update_set_stages(ct_solver *s, ct_stages *stages) {
  s->update->stages = stages;
}

/* Caffe's ClipGradients over a pipeline's whole gradient: each stage's
 * per-parameter sums of squares, gathered in the net's order and added as
 * one process adds them (update_fused.c), into g->clip_dev (the CPU's). */
static ct_status clip_over_stages(ct_solver *s, const ct_update_fused *u, ct_error *err) {
  ct_solver_update *g = s->update;
  const ct_net *net = s->net;
  double *mine = ct_xcalloc((size_t)u->nseg + 1, sizeof *mine);
  for (int k = 0; k < u->nseg; k++)
    mine[k] = ct_dev_sumsq(s->ctx, u->seg_count[k], net->flat_diff + u->seg_start[k]);
  double *all = NULL;
  int total = 0;
  const ct_status st = ct_stages_gather_f64(g->stages, mine, u->nseg, &all, &total, err);
  free(mine);
  CT_TRY(st);
  double sumsq = 0;
  for (int k = 0; k < total; k++) sumsq += all[k];
  free(all);
  const float l2 = (float)sqrt(sumsq);
  const ct_update_clip clip = {.scale = l2 <= u->clip ? 1.0f : u->clip / l2, .l2 = l2};
  ct_mem_copy(s->ctx->device, g->clip_dev, CT_DEVICE_CPU, &clip, sizeof clip);
  return CT_OK;
}

ct_update_clip ct_solver_update_clip(const ct_solver *s, unsigned seq) {
  if (s->param->clip_gradients < 0) return (ct_update_clip){.scale = 1.0f, .l2 = 0.0f};
  return *(const ct_update_clip *)ct_slot(s->update->clip_slots, sizeof(ct_update_clip), seq);
}

void ct_solver_update_reset_halt(ct_solver *s) {
  const unsigned zero = 0;
  ct_mem_copy(s->ctx->device, s->update->halt, CT_DEVICE_CPU, &zero, sizeof zero);
}
