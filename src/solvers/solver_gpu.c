/* The solver's GPU iteration: one program (net_exec.h) of
 *
 *   advance the device's iteration count (gpu/iter_slots.h),
 *   clear the flat gradient and the loss sum,
 *   iter_size x (forward, backward),
 *   the on_gradients hook (plain host code, or captured when the hooks say
 *   it only enqueues capturable work: a data-parallel all-reduce),
 *   load this step's rate from its slot, clip reduction, fused update,
 *   store the loss sum (and the deferred-check word, the clip norm) in the
 *   iteration's slots,
 *
 * replayed as CUDA graphs after two plain runs.  The host launches an
 * iteration (ct_solver_gpu_launch) and later finishes it
 * (ct_solver_gpu_finish: the on_iteration_end hook, where a data-parallel
 * worker waits under its watchdog, or a wait for the iteration's end event;
 * then the slots are read).  Because every value the host exchanges with an
 * iteration sits in that iteration's slot, the solver may launch iteration
 * n + 1 before it finishes n (solver.c decides when), and the device never
 * waits for the host between them.  The update kernel guards itself: when a
 * deferred check failed or (unless continue_on_nonfinite) the loss is not
 * finite it changes nothing, as the CPU solver returns before updating, and
 * it leaves a halt word that keeps every later update (an iteration launched
 * ahead) from changing anything either, until the next ct_solver_step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "gpu/gpu.h"
#include "gpu/gpu_context.h"
#include "gpu/iter_slots.h"
#include "net/net_program.h"
#include "solvers/solver_internal.h"

struct ct_solver_gpu {
  ct_update_fused fused;       /* guarded: for the iteration program */
  ct_update_fused fused_plain; /* unguarded: for ct_solver_apply_update */
  size_t *seg_start;           /* (nparams + 1) device */
  float *seg_lr;               /* (nparams) device */
  float *seg_decay;            /* (nparams) device */
  void *step_slots;            /* two ct_update_step: each iteration's rate, written by the host */
  ct_update_step *step_dev;
  ct_update_clip *clip_dev;
  void *clip_slots;            /* two ct_update_clip: each iteration's clip norm */
  unsigned *halt_dev;          /* (1) device: an update was skipped for a non-finite loss */
  double *partials;            /* (CT_UPDATE_CLIP_BLOCKS) device */
  unsigned *counter;           /* (1) device */
  ct_exec *exec;               /* the iteration program, built at first use */
  int exec_iter_size;
  unsigned exec_hooks;         /* hooks_of() the program was built with */
};

static void *dev_upload(ct_context *ctx, const void *host, size_t bytes) {
  void *p = ct_mem_alloc(ctx->device, bytes ? bytes : 1);
  if (bytes) ct_mem_copy(ctx->device, p, CT_DEVICE_CPU, host, bytes);
  return p;
}

ct_status ct_solver_gpu_init(ct_solver *s, ct_error *err) {
  ct_context *ctx = s->ctx;
  const ct_net *net = s->net;
  const Caffe__SolverParameter *p = s->param;
  ct_solver_gpu *g = ct_xcalloc(1, sizeof *g);
  s->gpu = g;
  int n = net->nparams;
  size_t *start = ct_xcalloc((size_t)n + 1, sizeof *start);
  float *lr = ct_xcalloc((size_t)n + 1, sizeof *lr), *decay = ct_xcalloc((size_t)n + 1, sizeof *decay);
  for (int i = 0; i < n; i++) {
    start[i] = net->params[i].offset;
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
  g->step_slots = ct_gpu_slots_new(sizeof(ct_update_step));
  g->clip_slots = ct_gpu_slots_new(sizeof(ct_update_clip));
  g->halt_dev = ct_mem_alloc(ctx->device, sizeof(unsigned));
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
  u->weight_decay = p->weight_decay;
  u->l1 = strcmp(p->regularization_type, "L1") == 0;
  u->iter_size = p->iter_size;
  u->clip = p->clip_gradients;
  u->momentum = p->momentum;
  u->momentum2 = p->momentum2;
  u->rms_decay = p->rms_decay;
  u->delta = p->delta;
  g->fused = g->fused_plain;
  g->fused.check_word = ctx->check_word;
  g->fused.loss = s->opts.continue_on_nonfinite ? NULL : net->loss_dev;
  g->fused.halt = s->opts.continue_on_nonfinite ? NULL : g->halt_dev;
  (void)err;
  return CT_OK;
}

void ct_solver_gpu_free(ct_solver *s) {
  ct_solver_gpu *g = s->gpu;
  if (!g) return;
  int dev = s->ctx->device;
  ct_exec_free(g->exec);
  ct_mem_free(dev, g->seg_start);
  ct_mem_free(dev, g->seg_lr);
  ct_mem_free(dev, g->seg_decay);
  ct_mem_free(dev, g->step_dev);
  ct_mem_free(dev, g->clip_dev);
  ct_mem_free(dev, g->partials);
  ct_mem_free(dev, g->counter);
  ct_mem_free(dev, g->halt_dev);
  ct_gpu_slots_free(g->step_slots);
  ct_gpu_slots_free(g->clip_slots);
  free(g);
  s->gpu = NULL;
}

/* Host part of the update of iteration iter: the rate (advancing a step
 * schedule), its log line when log (the iteration logs it after the loss
 * lines, where the CPU solver does), and the values the device loads, in
 * the slot of seq.  iter is s->iter, or s->iter + 1 for an iteration
 * launched ahead. */
static void prepare_step(ct_solver *s, bool log, int iter, unsigned seq) {
  const Caffe__SolverParameter *p = s->param;
  float rate = ct_lr_rate(&s->lr, iter, &s->current_step);
  s->rate = rate;
  if (log && p->display && iter % p->display == 0 && ct_solver_is_root(s))
    LOG_INFO("Iteration %d, lr = %g", iter, (double)rate);
  ct_update_step *step = ct_gpu_slot(s->gpu->step_slots, sizeof *step, seq);
  step->rate = rate;
  step->correction = s->rule->kind == CT_UPDATE_ADAM
                         ? ct_update_adam_correction(p->momentum, p->momentum2, iter)
                         : 1.0f;
}

/* Device part: the step values, then the fused kernel (and the clip norm
 * copied back for the log).  Capturable. */
static void enqueue_update(ct_solver *s, const ct_update_fused *u) {
  ct_solver_gpu *g = s->gpu;
  ct_net *net = s->net;
  ct_gpu_slots_load_async(s->ctx, NULL, g->step_dev, g->step_slots, sizeof *g->step_dev);
  float *h0 = s->history, *h1 = s->rule->nslots > 1 ? s->history + net->flat_count : NULL;
  ct_update_fused_gpu(s->ctx, u, net->flat_data, net->flat_diff, h0, h1, g->step_dev, g->clip_dev,
                      g->partials, g->counter);
  if (u->clip >= 0)
    ct_gpu_slots_store_async(s->ctx, NULL, g->clip_slots, g->clip_dev, sizeof *g->clip_dev);
}

static void log_clip(const ct_solver *s, unsigned seq) {
  const float clip = s->param->clip_gradients;
  const ct_update_clip *c = ct_gpu_slot(s->gpu->clip_slots, sizeof *c, seq);
  if (clip >= 0 && c->l2 > clip)
    LOG_INFO("Gradient clipping: scaling down gradients (L2 norm %g > %g) by scale factor %g",
             (double)c->l2, (double)clip, (double)c->scale);
}

void ct_solver_gpu_apply_update(ct_solver *s) {
  /* Outside the iterations: the slots of the last one, which is finished. */
  ct_context_sync(s->ctx);
  prepare_step(s, true, s->iter, s->ctx->seq);
  enqueue_update(s, &s->gpu->fused_plain);
  ct_context_sync(s->ctx);
  log_clip(s, s->ctx->seq);
}

/* ------------------------------------------------------------------ program */

static ct_status step_seq(void *user, int arg, ct_error *err) {
  ct_solver *s = user;
  ct_gpu_seq_advance_async(s->ctx);
  return CT_OK;
}

static ct_status step_on_gradients(void *user, int arg, ct_error *err) {
  ct_solver *s = user;
  return s->hooks.on_gradients(s->hooks.user, err);
}

static ct_status step_on_backward(void *user, int pass, ct_error *err) {
  ct_solver *s = user;
  s->hooks.on_backward(s->hooks.user, pass, s->param->iter_size);
  return CT_OK;
}

static ct_status step_capture_end(void *user, int arg, ct_error *err) {
  ct_solver *s = user;
  return s->hooks.on_capture_end(s->hooks.user, err);
}

static ct_status step_update(void *user, int arg, ct_error *err) {
  ct_solver *s = user;
  enqueue_update(s, &s->gpu->fused);
  return CT_OK;
}

/* Which hooks the program calls: bit 0 on_gradients, bit 1 on_backward,
 * bit 2 on_gradients captured, bit 3 on_capture_end. */
static unsigned hooks_of(const ct_solver *s) {
  return (s->hooks.on_gradients ? 1u : 0u) | (s->hooks.on_backward ? 2u : 0u) |
         (s->hooks.gradients_capturable ? 4u : 0u) | (s->hooks.on_capture_end ? 8u : 0u);
}

static void build_program(ct_solver *s) {
  ct_solver_gpu *g = s->gpu;
  ct_exec_free(g->exec);
  g->exec = ct_exec_new(s->ctx, !s->opts.no_cuda_graphs);
  g->exec_iter_size = s->param->iter_size;
  g->exec_hooks = hooks_of(s);
  if (s->hooks.on_capture_end) ct_exec_set_capture_end(g->exec, step_capture_end, s);
  ct_exec_add(g->exec, (ct_exec_step){step_seq, s, 0, true, "iteration count"});
  ct_net_program_begin(s->net, g->exec, true);
  for (int i = 0; i < s->param->iter_size; i++) {
    ct_net_program_forward(s->net, g->exec);
    if (s->hooks.on_backward)
      ct_exec_add(g->exec, (ct_exec_step){step_on_backward, s, i, false, "on_backward"});
    ct_net_program_backward(s->net, g->exec);
  }
  if (s->hooks.on_gradients)
    ct_exec_add(g->exec, (ct_exec_step){step_on_gradients, s, 0, s->hooks.gradients_capturable,
                                        "on_gradients"});
  ct_exec_add(g->exec, (ct_exec_step){step_update, s, 0, true, "update"});
  ct_net_program_end(s->net, g->exec);
}

/* The program exists and was built for the current hooks and iter_size. */
static bool program_current(const ct_solver *s) {
  const ct_solver_gpu *g = s->gpu;
  return g && g->exec && g->exec_iter_size == s->param->iter_size && g->exec_hooks == hooks_of(s);
}

void ct_solver_gpu_reset_halt(ct_solver *s) {
  ct_gpu_memset(s->ctx->device, s->gpu->halt_dev, 0, sizeof(unsigned));
}

ct_status ct_solver_gpu_launch(ct_solver *s, int iter, unsigned *seq, ct_error *err) {
  ct_solver_gpu *g = s->gpu;
  if (!program_current(s)) build_program(s);
  const unsigned n = ++s->ctx->seq;
  prepare_step(s, false, iter, n);
  if (s->hooks.on_launch) s->hooks.on_launch(s->hooks.user, n);
  ct_status st = ct_exec_run(g->exec, ct_net_signature(s->net), err);
  if (st != CT_OK) {
    ct_context_sync(s->ctx); /* leave nothing in flight that reads the slots */
    return st;
  }
  ct_gpu_seq_record_end(s->ctx);
  *seq = n;
  return CT_OK;
}

ct_status ct_solver_gpu_finish(ct_solver *s, unsigned seq, float *loss, ct_error *err) {
  ct_status st = CT_OK;
  if (s->hooks.on_iteration_end) st = s->hooks.on_iteration_end(s->hooks.user, seq, err);
  else ct_gpu_seq_wait(s->ctx, seq);
  double sum = 0;
  if (st == CT_OK) st = ct_net_readback_take(s->net, seq, &sum, err);
  if (st != CT_OK) {
    ct_context_sync(s->ctx); /* an iteration launched ahead: leave nothing in flight */
    return st;
  }
  *loss = (float)sum / (float)s->param->iter_size;
  log_clip(s, seq);
  return CT_OK;
}

bool ct_solver_gpu_steady(const ct_solver *s) {
  return program_current(s) && ct_exec_steady(s->gpu->exec);
}

void ct_solver_exec_stats(const ct_solver *s, ct_exec_stats *st) {
  if (s->gpu && s->gpu->exec) ct_exec_get_stats(s->gpu->exec, st);
  else memset(st, 0, sizeof *st);
}
