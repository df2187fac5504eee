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
#include "runtime/slots.h"
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
  double *partials;            /* (CT_UPDATE_CLIP_BLOCKS) GPU scratch */
  unsigned *counter;           /* (1) GPU scratch */
  ct_loss_scale_state *ls_dev; /* (1) loss scaling's state on the device; NULL: none */
  void *ls_slots;              /* two ct_loss_scale_state: each iteration's, after its update */
};

static void *dev_upload(ct_context *ctx, const void *host, size_t bytes) {
  void *p = ct_mem_alloc(ctx->device, bytes ? bytes : 1);
  if (bytes) ct_mem_copy(ctx->device, p, CT_DEVICE_CPU, host, bytes);
  return p;
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
  ct_update_fused *u = &g->fused_plain;
  u->kind = s->rule->kind;
  u->count = net->flat_count;
  u->nseg = n;
  u->seg_start = g->seg_start;
  u->seg_lr_mult = g->seg_lr;
  u->seg_decay_mult = g->seg_decay;
  u->seg_count = g->seg_count;
  u->weight_decay = p->weight_decay;
  u->l1 = strcmp(p->regularization_type, "L1") == 0;
  u->iter_size = p->iter_size;
  u->clip = p->clip_gradients;
  u->momentum = p->momentum;
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

/* Iteration iter's rate (advancing a step schedule) and Adam's correction. */
static ct_update_step step_of(ct_solver *s, int iter) {
  const Caffe__SolverParameter *p = s->param;
  ct_update_step step;
  step.rate = ct_lr_rate(&s->lr, iter, &s->current_step);
  step.correction = s->rule->kind == CT_UPDATE_ADAM
                        ? ct_update_adam_correction(p->momentum, p->momentum2, iter)
                        : 1.0f;
  return step;
}

float ct_solver_update_prepare(ct_solver *s, int iter, unsigned seq) {
  ct_update_step *step = ct_slot(s->update->step_slots, sizeof *step, seq);
  *step = step_of(s, iter);
  return step->rate;
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

/* The step's work with u's guards. */
static void enqueue(ct_solver *s, const ct_update_fused *u) {
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
  ct_update_fused_run(s->ctx, u, net->flat_data, net->flat_diff, h0, h1, g->step_dev, g->clip_dev,
                      g->partials, g->counter);
  if (u->clip >= 0) ct_slots_store_async(clock, NULL, g->clip_slots, g->clip_dev, sizeof *g->clip_dev);
  if (scaled) {
    ct_loss_scale_adjust(s->ctx, g->ls_dev, &s->loss_scale);
    ct_slots_store_async(clock, NULL, g->ls_slots, g->ls_dev, sizeof *g->ls_dev);
  }
}

ct_status ct_solver_update_step(void *solver, int arg, ct_error *err) {
  ct_solver *s = solver;
  enqueue(s, &s->update->fused);
  return CT_OK;
}

void ct_solver_update_plain(ct_solver *s) { enqueue(s, &s->update->fused_plain); }

ct_update_clip ct_solver_update_clip(const ct_solver *s, unsigned seq) {
  if (s->param->clip_gradients < 0) return (ct_update_clip){.scale = 1.0f, .l2 = 0.0f};
  return *(const ct_update_clip *)ct_slot(s->update->clip_slots, sizeof(ct_update_clip), seq);
}

void ct_solver_update_reset_halt(ct_solver *s) {
  const unsigned zero = 0;
  ct_mem_copy(s->ctx->device, s->update->halt, CT_DEVICE_CPU, &zero, sizeof zero);
}
