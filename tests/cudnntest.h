/* Helpers of the cuDNN engine tests (test_gpu_cudnn_*.c): one layer on the
 * CPU, on GPU 0 with the cuDNN engine and on GPU 0 with the CAFFE engine,
 * compared.  Header-only: every test program is one file.
 *
 * Errors are measured against the largest magnitude of the reference,
 *     max |got - want| / max |want|,
 * so that values that cancel to nearly 0 do not turn the rounding of a
 * different summation order (or TF32) into a large relative error. */
#ifndef CT_TESTS_CUDNNTEST_H
#define CT_TESTS_CUDNNTEST_H

#include <math.h>
#include <stdio.h>

#include "gpu/cudnn_util.h"
#include "layertest.h"
#include "testutil.h"

/* Expectation on which engine a GPU case runs. */
enum { CD_ANY = -1, CD_CAFFE = 0, CD_CUDNN = 1 };

static inline double cd_err(const float *got, const float *want, size_t n) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(got[i]) != isnan(want[i]) || isinf(got[i]) != isinf(want[i])) return INFINITY;
    double d = fabs((double)got[i] - (double)want[i]);
    if (d > worst) worst = d;
    if (fabs((double)want[i]) > scale) scale = fabs((double)want[i]);
  }
  return worst / (scale > 1e-6 ? scale : 1e-6);
}

static inline void cd_expect_close(const char *what, const ct_tensor *got, const ct_tensor *want,
                                   bool diff, double tol) {
  assert_int_equal(got->count, want->count);
  float *a = malloc(got->count * sizeof(float) + 1), *b = malloc(want->count * sizeof(float) + 1);
  if (diff) {
    ct_tensor_download_diff(got, a);
    ct_tensor_download_diff(want, b);
  } else {
    ct_tensor_download(got, a);
    ct_tensor_download(want, b);
  }
  double e = cd_err(a, b, got->count);
  free(a);
  free(b);
  if (!(e <= tol)) fail_msg("%s: error %g relative to the largest value > %g", what, e, tol);
}

/* TF32 on or off for the case, then a reshape, which replans the layer's
 * GPU side (convolutions read ctx->tf32 at reshape). */
static inline void cd_set_math(tu_layer_case *c, bool tf32) {
  ct_error err;
  ct_context_set_tf32(&c->ctx, tf32);
  if (ct_layer_reshape(c->l, c->bottom, c->top, &err) != CT_OK)
    fail_msg("reshape after the math change failed: %s", err.msg);
}

static inline void cd_expect_engine(const ct_layer *l, int expect, const char *what) {
  if (expect == CD_ANY) return;
  bool cudnn = l->gpu_priv != NULL;
  if (cudnn != (expect == CD_CUDNN))
    fail_msg("%s: layer '%s' (%s) runs the %s engine, expected %s", what, l->name, l->ops->type,
             cudnn ? "cuDNN" : "CAFFE", expect == CD_CUDNN ? "cuDNN" : "CAFFE");
}

/* A GPU case with the math given and the engine expected; cuDNN disabled
 * while it is built when caffe is true. */
static inline void cd_gpu_case(tu_layer_case *c, const Caffe__LayerParameter *p, ct_phase phase,
                               const char *shapes, int ntop, bool tf32, bool caffe) {
  if (caffe) ct_cudnn_set_enabled(false);
  tu_layer_case_init(c, p, 0, phase, shapes, ntop);
  cd_set_math(c, tf32);
  if (caffe) ct_cudnn_set_enabled(true);
}

/* Tops, parameter values, bottom diffs and parameter diffs of the cuDNN
 * and CAFFE GPU engines against the CPU, on the same bottoms, parameters
 * and top diffs.  expect says which engine the default GPU case must run
 * (CD_CUDNN, CD_CAFFE or CD_ANY); prepare (may be NULL) sets bottom or
 * parameter values on the CPU case, which are then copied to the GPU. */
static inline void cd_compare3(const Caffe__LayerParameter *p, ct_phase phase, const char *shapes,
                               int ntop, int expect, bool tf32, double tol,
                               void (*prepare)(tu_layer_case *c)) {
  tu_layer_case cpu, g[2];
  const char *names[2] = {"default engine", "CAFFE engine"};
  tu_layer_case_init(&cpu, p, CT_DEVICE_CPU, phase, shapes, ntop);
  cd_gpu_case(&g[0], p, phase, shapes, ntop, tf32, false);
  cd_gpu_case(&g[1], p, phase, shapes, ntop, tf32, true);
  cd_expect_engine(g[0].l, expect, shapes);
  cd_expect_engine(g[1].l, CD_CAFFE, shapes);
  if (prepare) prepare(&cpu);
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < cpu.nb; i++) ct_tensor_copy_data(g[k].bottom[i], cpu.bottom[i]);
    for (int i = 0; i < cpu.l->nparams; i++)
      ct_tensor_copy_data(g[k].l->params[i], cpu.l->params[i]);
  }
  tu_forward(&cpu);
  char what[320];
  for (int k = 0; k < 2; k++) {
    tu_forward(&g[k]);
    for (int i = 0; i < ntop; i++) {
      snprintf(what, sizeof what, "%s %s (%s) top %d", p->type, shapes, names[k], i);
      cd_expect_close(what, g[k].top[i], cpu.top[i], false, tol);
    }
    for (int i = 0; i < cpu.l->nparams; i++) {
      snprintf(what, sizeof what, "%s %s (%s) param %d after forward", p->type, shapes, names[k],
               i);
      cd_expect_close(what, g[k].l->params[i], cpu.l->params[i], false, tol);
    }
  }
  if (!cpu.l->ops->backward_cpu) goto done;
  for (int i = 0; i < ntop; i++) {
    if (cpu.l->loss_weight[i] != 0.0f) continue;
    float *h = malloc(cpu.top[i]->count * sizeof(float) + 1);
    tu_fill_uniform(h, cpu.top[i]->count, -1.0f, 1.0f, 900 + (uint64_t)i);
    ct_tensor_upload_diff(cpu.top[i], h);
    for (int k = 0; k < 2; k++) ct_tensor_upload_diff(g[k].top[i], h);
    free(h);
  }
  bool prop[TU_MAX_BLOBS];
  for (int i = 0; i < cpu.nb; i++) prop[i] = !(cpu.l->ops->no_force_backward_bottoms & (1u << i));
  for (int i = 0; i < cpu.l->nparams; i++) {
    ct_tensor_zero_diff(cpu.l->params[i]);
    for (int k = 0; k < 2; k++) ct_tensor_zero_diff(g[k].l->params[i]);
  }
  ct_layer_backward(cpu.l, cpu.top, prop, cpu.bottom);
  for (int k = 0; k < 2; k++) {
    ct_layer_backward(g[k].l, g[k].top, prop, g[k].bottom);
    for (int i = 0; i < cpu.nb; i++) {
      if (!prop[i]) continue;
      snprintf(what, sizeof what, "%s %s (%s) bottom %d diff", p->type, shapes, names[k], i);
      cd_expect_close(what, g[k].bottom[i], cpu.bottom[i], true, tol);
    }
    for (int i = 0; i < cpu.l->nparams; i++) {
      snprintf(what, sizeof what, "%s %s (%s) param %d diff", p->type, shapes, names[k], i);
      cd_expect_close(what, g[k].l->params[i], cpu.l->params[i], true, tol);
    }
  }
done:
  tu_layer_case_free(&cpu);
  tu_layer_case_free(&g[0]);
  tu_layer_case_free(&g[1]);
}

/* The gradient checker on the default GPU engine in strict FP32. */
static inline void cd_gradient(const Caffe__LayerParameter *p, ct_phase phase, const char *shapes,
                               int expect, const ct_gradcheck_opts *o,
                               void (*prepare)(tu_layer_case *c)) {
  tu_layer_case c;
  cd_gpu_case(&c, p, phase, shapes, 1, false, false);
  cd_expect_engine(c.l, expect, shapes);
  if (prepare) prepare(&c);
  tu_check_gradient(&c, o);
  tu_layer_case_free(&c);
}

/* The layer in place (top 0 is bottom 0) on GPU 0 against the CPU out of
 * place: top, bottom diff and parameter values and diffs.  Strict FP32. */
static inline void cd_in_place(const Caffe__LayerParameter *p, ct_phase phase, const char *shape,
                               int expect, double tol, void (*prepare)(tu_layer_case *c)) {
  tu_layer_case cpu;
  tu_layer_case_init(&cpu, p, CT_DEVICE_CPU, phase, shape, 1);
  if (prepare) prepare(&cpu);
  ct_context ctx;
  ct_error err;
  if (ct_context_init(&ctx, 0, 1234, &err) != CT_OK) fail_msg("%s", err.msg);
  ct_context_set_tf32(&ctx, false);
  ct_tensor *b = ct_tensor_new_shape(0, "inplace", cpu.bottom[0]->ndim, cpu.bottom[0]->shape, true);
  ct_tensor_copy_data(b, cpu.bottom[0]);
  ct_layer *l;
  if (ct_layer_create(p, phase, &ctx, 1, 1, &l, &err) != CT_OK ||
      ct_layer_setup(l, &b, &b, &err) != CT_OK)
    fail_msg("in-place setup failed: %s", err.msg);
  cd_expect_engine(l, expect, "in place");
  for (int i = 0; i < l->nparams; i++) {
    ct_tensor *h = l->params[i];
    l->params[i] = ct_tensor_new_shape(0, NULL, h->ndim, h->shape, true);
    ct_tensor_free(h);
    ct_tensor_copy_data(l->params[i], cpu.l->params[i]);
  }
  tu_forward(&cpu);
  if (ct_layer_forward(l, &b, &b, NULL, &err) != CT_OK) fail_msg("in-place forward: %s", err.msg);
  char what[128];
  snprintf(what, sizeof what, "%s in place top", p->type);
  cd_expect_close(what, b, cpu.top[0], false, tol);
  for (int i = 0; i < l->nparams; i++) {
    snprintf(what, sizeof what, "%s in place param %d", p->type, i);
    cd_expect_close(what, l->params[i], cpu.l->params[i], false, tol);
  }
  float *dy = malloc(b->count * sizeof(float) + 1);
  tu_fill_uniform(dy, b->count, -1.0f, 1.0f, 77);
  ct_tensor_upload_diff(cpu.top[0], dy);
  ct_tensor_upload_diff(b, dy);
  free(dy);
  bool prop[1] = {true};
  ct_layer_backward(cpu.l, cpu.top, prop, cpu.bottom);
  ct_layer_backward(l, &b, prop, &b);
  snprintf(what, sizeof what, "%s in place bottom diff", p->type);
  cd_expect_close(what, b, cpu.bottom[0], true, tol);
  ct_layer_free(l);
  ct_tensor_free(b);
  ct_context_free(&ctx);
  tu_layer_case_free(&cpu);
}

#endif
