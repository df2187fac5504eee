/* Helpers of the neuron-group layer tests (test_layer_neuron_*.c and
 * test_gpu_layer_neuron.c).  Header-only: every test program is one file. */
#ifndef CT_TESTS_NEURONTEST_H
#define CT_TESTS_NEURONTEST_H

#include <math.h>
#include <stdio.h>

#include "layertest.h"
#include "testutil.h"

/* A LayerParameter named like its type in lower case, nothing else set. */
static inline Caffe__LayerParameter nt_layer(const char *name, const char *type) {
  Caffe__LayerParameter p = CAFFE__LAYER_PARAMETER__INIT;
  p.name = (char *)name;
  p.type = (char *)type;
  return p;
}

/* Fails unless |got - want| <= tol * max(1, |want|) everywhere. */
static inline void nt_expect_close(const char *what, const float *got, const double *want,
                                   size_t n, double tol) {
  for (size_t i = 0; i < n; i++) {
    double bound = tol * fmax(1.0, fabs(want[i]));
    if (!(fabs((double)got[i] - want[i]) <= bound))
      fail_msg("%s: index %zu is %.9g, want %.9g (tolerance %g)", what, i, (double)got[i], want[i],
               bound);
  }
}

/* Sets every value of t to f(value) on the host. */
static inline void nt_map_values(ct_tensor *t, float (*f)(float)) {
  float *v = tu_values(t);
  for (size_t i = 0; i < t->count; i++) v[i] = f(v[i]);
  tu_set_values(t, v);
  free(v);
}

/* Sets up the layer with top 0 == bottom 0 on the CPU and returns the status
 * (message in err); the layer and tensors are freed. */
static inline ct_status nt_try_in_place(const Caffe__LayerParameter *p, ct_phase phase, int ndim,
                                        const int *shape, ct_error *err) {
  ct_context ctx;
  if (ct_context_init(&ctx, CT_DEVICE_CPU, 1234, err) != CT_OK) return err->code;
  ct_tensor *t = ct_tensor_new_shape(CT_DEVICE_CPU, "inplace", ndim, shape, true);
  ct_layer *l = NULL;
  ct_status s = ct_layer_create(p, phase, &ctx, 1, 1, &l, err);
  if (s == CT_OK) s = ct_layer_setup(l, &t, &t, err);
  ct_layer_free(l);
  ct_tensor_free(t);
  ct_context_free(&ctx);
  return s;
}

static inline void nt_expect_same(const char *what, const ct_tensor *a, const ct_tensor *b,
                                  bool diff, double tol) {
  assert_int_equal(a->count, b->count);
  float *x = malloc(a->count * sizeof(float) + 1), *y = malloc(a->count * sizeof(float) + 1);
  if (diff) {
    ct_tensor_download_diff(a, x);
    ct_tensor_download_diff(b, y);
  } else {
    ct_tensor_download(a, x);
    ct_tensor_download(b, y);
  }
  double e = tu_max_rel_err(x, y, a->count, 1e-3);
  if (!(e <= tol))
    fail_msg("%s: in place differs from out of place, max relative error %g", what, e);
  free(x);
  free(y);
}

/* Runs the layer out of place and in place (top 0 == bottom 0; other
 * bottoms copied) on the same values, parameters, RNG state and top diff on
 * `device`, and asserts that tops, bottom diffs and parameter diffs agree.
 * `prepare` (may be NULL) sets special bottom values on the out-of-place case. */
static inline void nt_check_in_place_on(int device, const Caffe__LayerParameter *p, ct_phase phase,
                                        const char *shapes, void (*prepare)(tu_layer_case *c)) {
  tu_layer_case c;
  tu_layer_case_init(&c, p, device, phase, shapes, 1);
  if (prepare) prepare(&c);
  ct_context ctx;
  ct_error err;
  if (ct_context_init(&ctx, device, 1234, &err) != CT_OK) fail_msg("%s", err.msg);
  ct_tensor *b[TU_MAX_BLOBS];
  for (int i = 0; i < c.nb; i++) {
    b[i] = ct_tensor_new_shape(device, "inplace", c.bottom[i]->ndim, c.bottom[i]->shape, true);
    ct_tensor_copy_data(b[i], c.bottom[i]);
  }
  ct_layer *l;
  if (ct_layer_create(p, phase, &ctx, c.nb, 1, &l, &err) != CT_OK ||
      ct_layer_setup(l, b, b, &err) != CT_OK)
    fail_msg("in-place setup failed: %s", err.msg);
  assert_int_equal(l->nparams, c.l->nparams);
  for (int i = 0; i < l->nparams; i++) {
    ct_tensor *h = l->params[i];
    l->params[i] = ct_tensor_new_shape(device, NULL, h->ndim, h->shape, true);
    ct_tensor_free(h);
    ct_tensor_copy_data(l->params[i], c.l->params[i]);
  }
  ctx.rng = c.ctx.rng;
  tu_forward(&c);
  if (ct_layer_forward(l, b, b, NULL, &err) != CT_OK) fail_msg("in-place forward: %s", err.msg);
  ct_context_sync(&c.ctx);
  ct_context_sync(&ctx);
  nt_expect_same("top", c.top[0], b[0], false, 1e-6);
  if (c.l->ops->backward_cpu) {
    float *dy = malloc(c.top[0]->count * sizeof(float) + 1);
    tu_fill_uniform(dy, c.top[0]->count, -1.0f, 1.0f, 77);
    ct_tensor_upload_diff(c.top[0], dy);
    ct_tensor_upload_diff(b[0], dy);
    free(dy);
    bool prop[TU_MAX_BLOBS];
    for (int i = 0; i < c.nb; i++) prop[i] = true;
    for (int i = 0; i < l->nparams; i++) {
      ct_tensor_zero_diff(l->params[i]);
      ct_tensor_zero_diff(c.l->params[i]);
    }
    ct_layer_backward(c.l, c.top, prop, c.bottom);
    ct_layer_backward(l, b, prop, b);
    ct_context_sync(&c.ctx);
    ct_context_sync(&ctx);
    for (int i = 0; i < c.nb; i++) nt_expect_same("bottom diff", c.bottom[i], b[i], true, 1e-5);
    for (int i = 0; i < l->nparams; i++)
      nt_expect_same("param diff", c.l->params[i], l->params[i], true, 1e-5);
  }
  ct_layer_free(l);
  for (int i = 0; i < c.nb; i++) ct_tensor_free(b[i]);
  ct_context_free(&ctx);
  tu_layer_case_free(&c);
}

static inline void nt_check_in_place(const Caffe__LayerParameter *p, ct_phase phase,
                                     const char *shapes, void (*prepare)(tu_layer_case *c)) {
  nt_check_in_place_on(CT_DEVICE_CPU, p, phase, shapes, prepare);
}

/* Two backward passes leave twice one pass's parameter diffs (diffs
 * accumulate, for shared weights and iter_size), and bottom diffs unchanged
 * (they are written). */
static inline void nt_check_param_diffs_accumulate(const Caffe__LayerParameter *p,
                                                   const char *shapes) {
  tu_layer_case c;
  tu_layer_case_init(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, 1);
  assert_true(c.l->nparams > 0);
  tu_forward(&c);
  float *dy = malloc(c.top[0]->count * sizeof(float) + 1);
  tu_fill_uniform(dy, c.top[0]->count, -1.0f, 1.0f, 78);
  ct_tensor_upload_diff(c.top[0], dy);
  free(dy);
  bool prop[TU_MAX_BLOBS];
  for (int i = 0; i < c.nb; i++) prop[i] = true;
  for (int i = 0; i < c.l->nparams; i++) ct_tensor_zero_diff(c.l->params[i]);
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  float *once[CT_LAYER_MAX_PARAMS], *dx = malloc(c.bottom[0]->count * sizeof(float) + 1);
  ct_tensor_download_diff(c.bottom[0], dx);
  for (int i = 0; i < c.l->nparams; i++) {
    once[i] = malloc(c.l->params[i]->count * sizeof(float) + 1);
    ct_tensor_download_diff(c.l->params[i], once[i]);
  }
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  float *dx2 = malloc(c.bottom[0]->count * sizeof(float) + 1);
  ct_tensor_download_diff(c.bottom[0], dx2);
  assert_memory_equal(dx, dx2, c.bottom[0]->count * sizeof(float));
  for (int i = 0; i < c.l->nparams; i++) {
    size_t n = c.l->params[i]->count;
    float *twice = malloc(n * sizeof(float) + 1);
    double *want = malloc(n * sizeof(double) + 1);
    ct_tensor_download_diff(c.l->params[i], twice);
    for (size_t k = 0; k < n; k++) want[k] = 2.0 * once[i][k];
    nt_expect_close("accumulated param diff", twice, want, n, 1e-6);
    free(twice);
    free(want);
    free(once[i]);
  }
  free(dx);
  free(dx2);
  tu_layer_case_free(&c);
}

/* Gradient-checker options of Caffe's tests: step, threshold, and a kink
 * band (kink_range < 0 for none). */
static inline ct_gradcheck_opts nt_opts(float step, float threshold, float kink, float kink_range) {
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.step = step;
  o.threshold = threshold;
  o.kink = kink;
  o.kink_range = kink_range;
  return o;
}

#endif
