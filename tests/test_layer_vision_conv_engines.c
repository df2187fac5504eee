/* The host's fast convolution engine (oneDNN, with the direct kernels for
 * few input channels) against the im2col + GEMM reference (engine CAFFE):
 * forward, bottom gradient, weight and bias gradients of Convolution and
 * Deconvolution agree within 1e-5 (relative, floor 1) for every case of
 * vision_cases.h and for the shapes the direct kernels take; both engines
 * pass the gradient checker, keep Caffe's backward conventions, and the
 * engine field picks the engine. */
#include <math.h>
#include <stdio.h>

#include "layers/conv/conv_common.h"
#include "layers/conv/conv_dnnl.h"
#include "vision_cases.h"

enum { ENGINE_DEFAULT = CAFFE__CONVOLUTION_PARAMETER__ENGINE__DEFAULT,
       ENGINE_CAFFE = CAFFE__CONVOLUTION_PARAMETER__ENGINE__CAFFE };

/* Shapes of the direct kernels (1-4 input channels, stride 1): output widths
 * below, at and past 8 and 32, a 7-wide kernel, pads, no bias, batch 5. */
static const conv_cfg k_direct_cases[] = {
    {"direct 1ch 5x5 (LeNet conv1)", "3,1,12,12", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, 5, true},
    {"direct 3ch 5x5 pad 2 (CIFAR conv1)", "2,3,8,8", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 7, true},
    {"direct 2ch width 13", "5,2,6,15", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, 4, false},
    {"direct 4ch width 37", "2,4,3,37", 1, 2, {1, 2, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, 9, true},
    {"direct 1ch 3x7", "2,1,9,20", 1, 2, {1, 3, 7}, {1, 1, 1}, {0, 1, 3}, {1, 1, 1}, 1, 3, true},
};

/* Channel counts that fill oneDNN's blocks of 8: its blocked layouts, with
 * reorders kept between forward and backward. */
static const conv_cfg k_blocked_cases[] = {
    {"blocked 8->16 3x3 pad 1", "2,8,5,6", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, 16, true},
    {"blocked 16->8 stride 2 group 2", "3,16,7,6", 1, 2, {1, 3, 2}, {1, 2, 1}, {0, 1, 0}, {1, 1, 1}, 2, 8, false},
};

#define NCASES (sizeof k_conv_cases / sizeof k_conv_cases[0])
#define NBLOCKED (sizeof k_blocked_cases / sizeof k_blocked_cases[0])
#define NDIRECT (sizeof k_direct_cases / sizeof k_direct_cases[0])

static void make_param(conv_param *st, const conv_cfg *c, bool deconv, int engine) {
  conv_make_param(st, c, deconv ? "Deconvolution" : "Convolution");
  st->cp.has_engine = 1;
  st->cp.engine = engine;
}

/* Forward and backward of one engine with fixed inputs, weights (the same
 * seed gives both engines the same fillers) and top diffs; returns every
 * top, bottom diff and parameter diff concatenated (malloc'd). */
static float *run_engine(const conv_cfg *c, bool deconv, int engine, int nbottom, size_t *n,
                         bool *fast) {
  conv_param st;
  make_param(&st, c, deconv, engine);
  char shapes[128];
  snprintf(shapes, sizeof shapes, nbottom == 2 ? "%s;%s" : "%s", c->shape, c->shape);
  tu_layer_case lc;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, nbottom);
  *fast = ((ct_conv *)lc.l->priv)->fast != NULL;
  if (nbottom == 2) tu_fill(lc.bottom[1], -1.0f, 1.0f, 77);
  tu_forward(&lc);
  size_t total = 0;
  for (int t = 0; t < nbottom; t++) {
    float *dy = malloc(lc.top[t]->count * sizeof *dy);
    tu_fill_uniform(dy, lc.top[t]->count, -1.0f, 1.0f, 5 + t);
    ct_tensor_upload_diff(lc.top[t], dy);
    free(dy);
    total += lc.top[t]->count + lc.bottom[t]->count;
  }
  for (int i = 0; i < lc.l->nparams; i++) {
    ct_tensor_zero_diff(lc.l->params[i]);
    total += lc.l->params[i]->count;
  }
  bool prop[2] = {true, true};
  ct_layer_backward(lc.l, lc.top, prop, lc.bottom);
  float *out = malloc(total * sizeof *out), *p = out;
  for (int t = 0; t < nbottom; t++) {
    ct_tensor_download(lc.top[t], p);
    p += lc.top[t]->count;
    ct_tensor_download_diff(lc.bottom[t], p);
    p += lc.bottom[t]->count;
  }
  for (int i = 0; i < lc.l->nparams; i++) {
    ct_tensor_download_diff(lc.l->params[i], p);
    p += lc.l->params[i]->count;
  }
  *n = total;
  tu_layer_case_free(&lc);
  return out;
}

static void compare_engines(const conv_cfg *c, bool deconv, int nbottom) {
  size_t n_ref, n_fast;
  bool ref_fast, fast_fast;
  float *ref = run_engine(c, deconv, ENGINE_CAFFE, nbottom, &n_ref, &ref_fast);
  float *fast = run_engine(c, deconv, ENGINE_DEFAULT, nbottom, &n_fast, &fast_fast);
  assert_false(ref_fast);
#ifdef CORTADO_HAVE_DNNL
  if (!fast_fast) fail_msg("%s: engine DEFAULT did not take the fast engine", c->name);
#else
  assert_false(fast_fast);
#endif
  assert_int_equal(n_ref, n_fast);
  double e = tu_max_rel_err(fast, ref, n_ref, 1.0);
  if (e > 1e-5)
    fail_msg("%s %s (%d bottoms): fast engine differs from the reference by %g",
             deconv ? "deconv" : "conv", c->name, nbottom, e);
  free(ref);
  free(fast);
}

static void test_fast_matches_reference(void **state) {
  for (int d = 0; d < 2; d++) {
    for (size_t i = 0; i < NCASES; i++) compare_engines(&k_conv_cases[i], d, 1);
    for (size_t i = 0; i < NDIRECT; i++) compare_engines(&k_direct_cases[i], d, 1);
    for (size_t i = 0; i < NBLOCKED; i++) compare_engines(&k_blocked_cases[i], d, 1);
    compare_engines(&k_conv_cases[1], d, 2);
    compare_engines(&k_direct_cases[1], d, 2);
    compare_engines(&k_blocked_cases[0], d, 2);
  }
}

/* The direct kernels take the few-channel cases (where the build has them),
 * and only those. */
static void test_direct_kernels_chosen(void **state) {
#if defined(CORTADO_HAVE_DNNL) && defined(__AVX2__) && defined(__FMA__)
  for (size_t i = 0; i < NDIRECT + 1; i++) {
    const conv_cfg *c = i < NDIRECT ? &k_direct_cases[i] : &k_conv_cases[1]; /* group 2: not */
    conv_param st;
    make_param(&st, c, false, ENGINE_DEFAULT);
    tu_layer_case lc;
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, 1);
    char desc[256];
    ct_conv_dnnl_describe(((ct_conv *)lc.l->priv)->fast, desc, sizeof desc);
    const bool direct = strstr(desc, "forward direct:avx2") != NULL &&
                        strstr(desc, "backward weights direct:avx2") != NULL;
    if (direct != (i < NDIRECT)) fail_msg("%s: engine %s", c->name, desc);
    tu_layer_case_free(&lc);
  }
#else
  skip();
#endif
}

static void check_gradient(const conv_cfg *c, bool deconv, int engine) {
  conv_param st;
  make_param(&st, c, deconv, engine);
  tu_layer_case lc;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, 1);
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  tu_check_gradient(&lc, &o);
  tu_layer_case_free(&lc);
}

/* test_layer_vision_conv checks the default engine's gradients on every
 * case; here the reference's, and both on the direct kernels' shapes. */
static void test_gradients(void **state) {
  for (int d = 0; d < 2; d++) {
    for (size_t i = 0; i < NCASES; i++) check_gradient(&k_conv_cases[i], d, ENGINE_CAFFE);
    for (size_t i = 0; i < NDIRECT; i++) {
      check_gradient(&k_direct_cases[i], d, ENGINE_CAFFE);
      check_gradient(&k_direct_cases[i], d, ENGINE_DEFAULT);
    }
    for (size_t i = 0; i < NBLOCKED; i++) check_gradient(&k_blocked_cases[i], d, ENGINE_DEFAULT);
  }
}

/* Backward writes the bottom diff and accumulates the parameter diffs; with
 * propagate_down false it leaves the bottom diff alone; forward after
 * backward sees new bottom values (no stale reorder). */
static void check_conventions(const conv_cfg *c, bool deconv, int engine) {
  conv_param st;
  make_param(&st, c, deconv, engine);
  tu_layer_case lc;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, 1);
  tu_forward(&lc);
  size_t nt = lc.top[0]->count, nb = lc.bottom[0]->count, nw = lc.l->params[0]->count;
  float *dy = malloc(nt * 4), *y1 = malloc(nt * 4), *y2 = malloc(nt * 4);
  tu_fill_uniform(dy, nt, -1.0f, 1.0f, 3);
  ct_tensor_upload_diff(lc.top[0], dy);
  for (int i = 0; i < lc.l->nparams; i++) ct_tensor_zero_diff(lc.l->params[i]);
  bool prop = true;
  ct_layer_backward(lc.l, lc.top, &prop, lc.bottom);
  float *dx1 = malloc(nb * 4), *dw1 = malloc(nw * 4), *dx2 = malloc(nb * 4), *dw2 = malloc(nw * 4);
  ct_tensor_download_diff(lc.bottom[0], dx1);
  ct_tensor_download_diff(lc.l->params[0], dw1);
  ct_layer_backward(lc.l, lc.top, &prop, lc.bottom);
  ct_tensor_download_diff(lc.bottom[0], dx2);
  ct_tensor_download_diff(lc.l->params[0], dw2);
  for (size_t i = 0; i < nb; i++) assert_float_equal(dx2[i], dx1[i], 1e-6);
  for (size_t i = 0; i < nw; i++) assert_float_equal(dw2[i], 2 * dw1[i], 1e-5);
  float *marker = malloc(nb * 4);
  for (size_t i = 0; i < nb; i++) marker[i] = 42.0f;
  ct_tensor_upload_diff(lc.bottom[0], marker);
  prop = false;
  ct_layer_backward(lc.l, lc.top, &prop, lc.bottom);
  ct_tensor_download_diff(lc.bottom[0], dx2);
  for (size_t i = 0; i < nb; i++) assert_float_equal(dx2[i], 42.0f, 0);
  /* New bottom values: forward must not reuse the old ones. */
  ct_tensor_download(lc.top[0], y1);
  tu_fill(lc.bottom[0], -2.0f, 2.0f, 99);
  tu_forward(&lc);
  ct_tensor_download(lc.top[0], y2);
  assert_true(tu_max_rel_err(y2, y1, nt, 1.0) > 1e-3);
  free(marker);
  free(dx1);
  free(dw1);
  free(dx2);
  free(dw2);
  free(dy);
  free(y1);
  free(y2);
  tu_layer_case_free(&lc);
}

static void test_backward_conventions(void **state) {
  for (int d = 0; d < 2; d++)
    for (int e = 0; e < 2; e++) {
      const int engine = e ? ENGINE_CAFFE : ENGINE_DEFAULT;
      check_conventions(&k_conv_cases[1], d, engine);
      check_conventions(&k_direct_cases[1], d, engine);
      check_conventions(&k_blocked_cases[0], d, engine);
    }
}

/* A new batch size re-plans the fast engine: after reshaping both engines'
 * layers from 3 images to 1, their tops still agree. */
static void test_reshape_replans(void **state) {
  const conv_cfg *c = &k_conv_cases[0];
  tu_layer_case lc[2];
  for (int e = 0; e < 2; e++) {
    conv_param st;
    make_param(&st, c, false, e ? ENGINE_CAFFE : ENGINE_DEFAULT);
    tu_layer_case_init(&lc[e], &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,4,6,5", 1);
    tu_forward(&lc[e]);
    ct_tensor_reshape4(lc[e].bottom[0], 1, 4, 6, 5);
    tu_fill(lc[e].bottom[0], -1.0f, 1.0f, 7);
    ct_error err;
    assert_int_equal(ct_layer_reshape(lc[e].l, lc[e].bottom, lc[e].top, &err), CT_OK);
    assert_int_equal(lc[e].top[0]->shape[0], 1);
    tu_forward(&lc[e]);
  }
  float *fast = tu_values(lc[0].top[0]), *ref = tu_values(lc[1].top[0]);
  assert_int_equal(lc[0].top[0]->count, lc[1].top[0]->count);
  double e = tu_max_rel_err(fast, ref, lc[0].top[0]->count, 1.0);
  if (e > 1e-5) fail_msg("after reshape the engines differ by %g", e);
  free(fast);
  free(ref);
  for (int i = 0; i < 2; i++) tu_layer_case_free(&lc[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fast_matches_reference), cmocka_unit_test(test_direct_kernels_chosen),
      cmocka_unit_test(test_gradients),              cmocka_unit_test(test_backward_conventions),
      cmocka_unit_test(test_reshape_replans),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
