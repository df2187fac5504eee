/* Convolution and Deconvolution against direct loops in double (a gather for
 * convolution, a scatter for deconvolution), gradient checks, chunking, and
 * bad parameters.  The host's default engine is the fast one (oneDNN when
 * built); the chunking tests pin engine CAFFE, the im2col + GEMM reference
 * whose chunks they test (test_layer_vision_conv_engines.c compares the
 * two engines). */
#include <math.h>
#include <stdio.h>

#include "layers/conv/conv_common.h"
#include "vision_cases.h"

/* The reference's view of a bottom: N images (product of the axes before
 * the channel axis), C channels, 3 spatial axes (unit ones in front). */
typedef struct ref_geom {
  int n, c, in[3], out[3];
} ref_geom;

static ref_geom ref_shape(const conv_cfg *c, const ct_tensor *bottom, bool deconv) {
  ref_geom g = {1, 0, {1, 1, 1}, {1, 1, 1}};
  for (int i = 0; i < c->axis; i++) g.n *= bottom->shape[i];
  g.c = bottom->shape[c->axis];
  for (int i = 0; i < c->nsp; i++) g.in[3 - c->nsp + i] = bottom->shape[c->axis + 1 + i];
  for (int a = 0; a < 3; a++) {
    int ext = c->d[a] * (c->k[a] - 1) + 1;
    g.out[a] = deconv ? c->s[a] * (g.in[a] - 1) + ext - 2 * c->p[a]
                      : (g.in[a] + 2 * c->p[a] - ext) / c->s[a] + 1;
  }
  return g;
}

/* y[n][oc][o] = bias[oc] + sum over the group's input channels and the
 * kernel of x * w (a gather). */
static void ref_conv(const conv_cfg *c, const ref_geom *g, const float *x, const float *w,
                     const float *bias, double *y) {
  const int cg = g->c / c->group, kg = c->nout / c->group;
  const int osz = g->out[0] * g->out[1] * g->out[2], isz = g->in[0] * g->in[1] * g->in[2];
  for (int n = 0; n < g->n; n++)
    for (int oc = 0; oc < c->nout; oc++)
      for (int o0 = 0; o0 < g->out[0]; o0++)
        for (int o1 = 0; o1 < g->out[1]; o1++)
          for (int o2 = 0; o2 < g->out[2]; o2++) {
            double s = bias ? bias[oc] : 0.0;
            int grp = oc / kg;
            for (int ic = 0; ic < cg; ic++)
              for (int a = 0; a < c->k[0]; a++)
                for (int b = 0; b < c->k[1]; b++)
                  for (int e = 0; e < c->k[2]; e++) {
                    int i0 = o0 * c->s[0] - c->p[0] + a * c->d[0];
                    int i1 = o1 * c->s[1] - c->p[1] + b * c->d[1];
                    int i2 = o2 * c->s[2] - c->p[2] + e * c->d[2];
                    if (i0 < 0 || i0 >= g->in[0] || i1 < 0 || i1 >= g->in[1] || i2 < 0 ||
                        i2 >= g->in[2])
                      continue;
                    size_t xi = ((size_t)(n * g->c + grp * cg + ic) * g->in[0] + i0) * g->in[1];
                    xi = (xi + i1) * g->in[2] + i2;
                    size_t wi = (((size_t)(oc * cg + ic) * c->k[0] + a) * c->k[1] + b) * c->k[2] + e;
                    s += (double)x[xi] * w[wi];
                  }
            y[((size_t)(n * c->nout + oc) * g->out[0] + o0) * g->out[1] * g->out[2] +
              o1 * g->out[2] + o2] = s;
          }
  (void)osz;
  (void)isz;
}

/* Deconvolution as a scatter: every bottom value spreads x * w over the top
 * window it maps to. */
static void ref_deconv(const conv_cfg *c, const ref_geom *g, const float *x, const float *w,
                       const float *bias, double *y) {
  const int cg = g->c / c->group, kg = c->nout / c->group;
  const size_t osz = (size_t)g->out[0] * g->out[1] * g->out[2];
  for (int n = 0; n < g->n; n++)
    for (int oc = 0; oc < c->nout; oc++)
      for (size_t q = 0; q < osz; q++) y[(size_t)(n * c->nout + oc) * osz + q] = bias ? bias[oc] : 0;
  for (int n = 0; n < g->n; n++)
    for (int ic = 0; ic < g->c; ic++)
      for (int i0 = 0; i0 < g->in[0]; i0++)
        for (int i1 = 0; i1 < g->in[1]; i1++)
          for (int i2 = 0; i2 < g->in[2]; i2++) {
            double v = x[((size_t)(n * g->c + ic) * g->in[0] + i0) * g->in[1] * g->in[2] +
                         i1 * g->in[2] + i2];
            int grp = ic / cg;
            for (int j = 0; j < kg; j++)
              for (int a = 0; a < c->k[0]; a++)
                for (int b = 0; b < c->k[1]; b++)
                  for (int e = 0; e < c->k[2]; e++) {
                    int o0 = i0 * c->s[0] - c->p[0] + a * c->d[0];
                    int o1 = i1 * c->s[1] - c->p[1] + b * c->d[1];
                    int o2 = i2 * c->s[2] - c->p[2] + e * c->d[2];
                    if (o0 < 0 || o0 >= g->out[0] || o1 < 0 || o1 >= g->out[1] || o2 < 0 ||
                        o2 >= g->out[2])
                      continue;
                    size_t wi = (((size_t)(ic * kg + j) * c->k[0] + a) * c->k[1] + b) * c->k[2] + e;
                    size_t yi = ((size_t)(n * c->nout + grp * kg + j) * g->out[0] + o0) *
                                    g->out[1] * g->out[2] + o1 * g->out[2] + o2;
                    y[yi] += v * w[wi];
                  }
          }
}

#define NCASES (sizeof k_conv_cases / sizeof k_conv_cases[0])

enum { ENGINE_DEFAULT = CAFFE__CONVOLUTION_PARAMETER__ENGINE__DEFAULT,
       ENGINE_CAFFE = CAFFE__CONVOLUTION_PARAMETER__ENGINE__CAFFE };

static void make_param(conv_param *st, const conv_cfg *c, bool deconv, int engine) {
  conv_make_param(st, c, deconv ? "Deconvolution" : "Convolution");
  st->cp.has_engine = 1;
  st->cp.engine = engine;
}

/* Forward of one case against the reference; returns nothing, fails the test. */
static void check_forward(const conv_cfg *c, bool deconv, int nbottom, int engine) {
  conv_param st;
  make_param(&st, c, deconv, engine);
  char shapes[128];
  snprintf(shapes, sizeof shapes, nbottom == 2 ? "%s;%s" : "%s", c->shape, c->shape);
  tu_layer_case lc;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, nbottom);
  if (nbottom == 2) tu_fill(lc.bottom[1], -1.0f, 1.0f, 77);
  tu_forward(&lc);
  ref_geom g = ref_shape(c, lc.bottom[0], deconv);
  /* Weight blob shape as Caffe's. */
  const ct_tensor *w = lc.l->params[0];
  assert_int_equal(w->ndim, 2 + c->nsp);
  assert_int_equal(w->shape[0], deconv ? g.c : c->nout);
  assert_int_equal(w->shape[1], deconv ? c->nout / c->group : g.c / c->group);
  for (int i = 0; i < c->nsp; i++) assert_int_equal(w->shape[2 + i], c->k[3 - c->nsp + i]);
  assert_int_equal(lc.l->nparams, c->bias ? 2 : 1);
  if (c->bias) {
    assert_int_equal(lc.l->params[1]->ndim, 1);
    assert_int_equal(lc.l->params[1]->shape[0], c->nout);
  }
  float *wv = tu_values(w), *bv = c->bias ? tu_values(lc.l->params[1]) : NULL;
  for (int t = 0; t < nbottom; t++) {
    const ct_tensor *top = lc.top[t];
    assert_int_equal(top->ndim, lc.bottom[0]->ndim);
    assert_int_equal(top->shape[c->axis], c->nout);
    for (int i = 0; i < c->nsp; i++)
      assert_int_equal(top->shape[c->axis + 1 + i], g.out[3 - c->nsp + i]);
    float *x = tu_values(lc.bottom[t]), *y = tu_values(top);
    double *ref = malloc(top->count * sizeof *ref);
    if (deconv) ref_deconv(c, &g, x, wv, bv, ref);
    else ref_conv(c, &g, x, wv, bv, ref);
    for (size_t i = 0; i < top->count; i++)
      if (fabs(y[i] - ref[i]) > 1e-4 * fmax(1.0, fabs(ref[i])))
        fail_msg("%s %s top %d [%zu]: got %.7g, want %.7g", deconv ? "deconv" : "conv", c->name, t,
                 i, y[i], ref[i]);
    free(ref);
    free(x);
    free(y);
  }
  free(wv);
  free(bv);
  tu_layer_case_free(&lc);
}

static void test_conv_forward(void **state) {
  for (size_t i = 0; i < NCASES; i++) {
    check_forward(&k_conv_cases[i], false, 1, ENGINE_DEFAULT);
    check_forward(&k_conv_cases[i], false, 1, ENGINE_CAFFE);
  }
}

static void test_deconv_forward(void **state) {
  for (size_t i = 0; i < NCASES; i++) {
    check_forward(&k_conv_cases[i], true, 1, ENGINE_DEFAULT);
    check_forward(&k_conv_cases[i], true, 1, ENGINE_CAFFE);
  }
}

/* Two bottom/top pairs share the weights; the gradient check runs with a
 * batch of 3 in chunks of 2 and 1, so backward walks both bottoms' chunks in
 * reverse and reuses forward's last unfolding only where it is valid. */
static void test_two_bottoms_share_weights(void **state) {
  for (int e = 0; e < 2; e++) {
    check_forward(&k_conv_cases[1], false, 2, e ? ENGINE_CAFFE : ENGINE_DEFAULT);
    check_forward(&k_conv_cases[1], true, 2, e ? ENGINE_CAFFE : ENGINE_DEFAULT);
  }
  for (int d = 0; d < 2; d++) {
    conv_param st;
    make_param(&st, &k_conv_cases[1], d, ENGINE_CAFFE);
    tu_layer_case lc;
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,4,7,6", 1);
    ct_conv *cv = lc.l->priv;
    size_t per = ((size_t)cv->group * cv->kernel_dim + cv->y_channels) * cv->y_spatial * 4;
    tu_layer_case_free(&lc);
    ct_conv_set_chunk_bytes(2 * per);
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,4,7,6; 3,4,7,6", 2);
    assert_int_equal(((ct_conv *)lc.l->priv)->chunk, 2);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    tu_check_gradient(&lc, &o);
    tu_layer_case_free(&lc);
    ct_conv_set_chunk_bytes(0);
  }
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

static void test_conv_gradient(void **state) {
  for (size_t i = 0; i < NCASES; i++) check_gradient(&k_conv_cases[i], false, ENGINE_DEFAULT);
}

static void test_deconv_gradient(void **state) {
  for (size_t i = 0; i < NCASES; i++) check_gradient(&k_conv_cases[i], true, ENGINE_DEFAULT);
}

/* Runs forward + backward with fixed top diffs; returns top, bottom diff and
 * parameter diffs concatenated (malloc'd) and the chunk the layer used. */
static float *run_all(const conv_cfg *c, bool deconv, const char *shape, size_t *n, int *chunk) {
  conv_param st;
  make_param(&st, c, deconv, ENGINE_CAFFE);
  tu_layer_case lc;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1);
  *chunk = ((ct_conv *)lc.l->priv)->chunk;
  tu_forward(&lc);
  float *dy = malloc(lc.top[0]->count * sizeof *dy);
  tu_fill_uniform(dy, lc.top[0]->count, -1.0f, 1.0f, 5);
  ct_tensor_upload_diff(lc.top[0], dy);
  free(dy);
  for (int i = 0; i < lc.l->nparams; i++) ct_tensor_zero_diff(lc.l->params[i]);
  bool prop = true;
  ct_layer_backward(lc.l, lc.top, &prop, lc.bottom);
  size_t total = lc.top[0]->count + lc.bottom[0]->count;
  for (int i = 0; i < lc.l->nparams; i++) total += lc.l->params[i]->count;
  float *out = malloc(total * sizeof *out), *p = out;
  ct_tensor_download(lc.top[0], p);
  p += lc.top[0]->count;
  ct_tensor_download_diff(lc.bottom[0], p);
  p += lc.bottom[0]->count;
  for (int i = 0; i < lc.l->nparams; i++) {
    ct_tensor_download_diff(lc.l->params[i], p);
    p += lc.l->params[i]->count;
  }
  *n = total;
  tu_layer_case_free(&lc);
  return out;
}

/* A batch of 5 split into chunks of 2, 2, 1 gives the same forward, bottom
 * and parameter gradients as one chunk; and the chunked forward matches the
 * reference and passes the gradient check. */
static void test_chunking(void **state) {
  const int which[] = {0, 1, 3, 7};
  for (int d = 0; d < 2; d++) {
    for (size_t j = 0; j < sizeof which / sizeof which[0]; j++) {
      conv_cfg c = k_conv_cases[which[j]];
      char shape[64];
      snprintf(shape, sizeof shape, "5%s", strchr(c.shape, ','));
      c.shape = shape;
      size_t n1, n2;
      int chunk1, chunk2;
      ct_conv_set_chunk_bytes(0);
      float *whole = run_all(&c, d, shape, &n1, &chunk1);
      assert_int_equal(chunk1, 5);
      /* Budget for two images of this case's scratch. */
      conv_param st;
      make_param(&st, &c, d, ENGINE_CAFFE);
      tu_layer_case lc;
      tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1);
      ct_conv *cv = lc.l->priv;
      size_t per = ((size_t)cv->group * cv->kernel_dim + cv->y_channels) * cv->y_spatial * 4;
      tu_layer_case_free(&lc);
      ct_conv_set_chunk_bytes(2 * per + per / 2);
      float *chunked = run_all(&c, d, shape, &n2, &chunk2);
      assert_int_equal(chunk2, 2);
      assert_int_equal(n1, n2);
      double e = tu_max_rel_err(chunked, whole, n1, 1.0);
      if (e > 1e-5) fail_msg("%s chunked differs from whole batch by %g", c.name, e);
      check_forward(&c, d, 1, ENGINE_CAFFE);
      check_gradient(&c, d, ENGINE_CAFFE);
      ct_conv_set_chunk_bytes(0);
      free(whole);
      free(chunked);
    }
  }
}

/* The bottom gradient is written, not accumulated; the parameter gradients
 * accumulate; propagate_down false leaves the bottom diff alone. */
static void test_backward_conventions(void **state) {
  const conv_cfg *c = &k_conv_cases[1];
  conv_param st;
  conv_make_param(&st, c, "Convolution");
  tu_layer_case lc;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, 1);
  tu_forward(&lc);
  float *dy = malloc(lc.top[0]->count * sizeof *dy);
  tu_fill_uniform(dy, lc.top[0]->count, -1.0f, 1.0f, 3);
  ct_tensor_upload_diff(lc.top[0], dy);
  free(dy);
  for (int i = 0; i < lc.l->nparams; i++) ct_tensor_zero_diff(lc.l->params[i]);
  bool prop = true;
  ct_layer_backward(lc.l, lc.top, &prop, lc.bottom);
  size_t nb = lc.bottom[0]->count, nw = lc.l->params[0]->count;
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
  free(marker);
  free(dx1);
  free(dw1);
  free(dx2);
  free(dw2);
  tu_layer_case_free(&lc);
}

static void expect_error(const conv_cfg *c, const char *type, const char *shape,
                         void (*edit)(conv_param *), ct_status code, const char *msg) {
  conv_param st;
  conv_make_param(&st, c, type);
  if (edit) edit(&st);
  tu_layer_case lc;
  ct_error err;
  ct_status s = tu_layer_case_try(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1, &err);
  assert_int_equal(s, code);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&lc);
}

static void no_kernel(conv_param *st) { st->cp.n_kernel_size = 0; }
static void no_num_output(conv_param *st) { st->cp.has_num_output = 0; }
static void kernel_both(conv_param *st) {
  st->cp.has_kernel_h = st->cp.has_kernel_w = 1;
  st->cp.kernel_h = st->cp.kernel_w = 3;
}
static void two_strides(conv_param *st) { st->cp.n_stride = 3; }
static void bad_axis(conv_param *st) { st->cp.axis = 4; }
static void zero_stride(conv_param *st) { st->s[0] = 0; }
static void huge_weights(conv_param *st) {
  st->cp.num_output = 1u << 20;
  st->k[0] = 1000;
}

static void test_bad_params(void **state) {
  const conv_cfg *c = &k_conv_cases[0];
  expect_error(c, "Convolution", "2,4,6,5", no_kernel, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param.kernel_size must be given (or "
               "kernel_h and kernel_w)");
  expect_error(c, "Convolution", "2,4,6,5", no_num_output, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param.num_output must be given");
  expect_error(c, "Convolution", "2,4,6,5", kernel_both, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param: give either kernel_size or "
               "kernel_h and kernel_w, not both");
  expect_error(c, "Convolution", "2,4,6,5", two_strides, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param.stride must be given once or once "
               "per spatial axis (given 3 times for 2 spatial axes)");
  expect_error(&k_conv_cases[7], "Convolution", "2,2,4,5,4", kernel_both, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param.kernel_h and kernel_w can only be "
               "used for 2-D convolution (the bottom has 3 spatial axes)");
  expect_error(c, "Convolution", "2,4,6,5", bad_axis, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param: axis 4 out of range for a 4-axis "
               "blob bottom0");
  expect_error(c, "Convolution", "2,4,6,5", zero_stride, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param.stride is 0 (must be at least 1)");
  expect_error(c, "Convolution", "2,4,6,5", huge_weights, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param: the weights would have more than "
               "2^31 values");
  expect_error(&k_conv_cases[1], "Convolution", "2,3,7,6", NULL, CT_ERR_INVALID,
               "layer 'conv' (Convolution): convolution_param.group 2 does not divide the 3 input "
               "channels");
  expect_error(&k_conv_cases[3], "Convolution", "2,4,7,1", NULL, CT_ERR_INVALID,
               "layer 'conv' (Convolution): output size 0 along spatial axis 1 is not positive "
               "(input 1, kernel extent 2, pad 0, stride 1)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_forward),     cmocka_unit_test(test_deconv_forward),
      cmocka_unit_test(test_two_bottoms_share_weights),
      cmocka_unit_test(test_conv_gradient),    cmocka_unit_test(test_deconv_gradient),
      cmocka_unit_test(test_chunking),         cmocka_unit_test(test_backward_conventions),
      cmocka_unit_test(test_bad_params),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
