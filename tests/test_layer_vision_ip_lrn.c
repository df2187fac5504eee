/* InnerProduct and LRN against loop references in double, gradient checks
 * and bad parameters.  The WITHIN_CHANNEL reference follows Caffe's chain
 * literally (square, average pool with padding and Caffe's divisor rule,
 * power, product). */
#include <math.h>
#include <stdio.h>

#include "vision_cases.h"

/* ---------------------------------------------------------------- InnerProduct */

static void test_ip_forward(void **state) {
  for (size_t k = 0; k < sizeof k_ip / sizeof k_ip[0]; k++) {
    const ip_cfg *c = &k_ip[k];
    ip_param st;
    make_ip(&st, c);
    tu_layer_case lc;
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, 1);
    tu_forward(&lc);
    const ct_tensor *w = lc.l->params[0], *t = lc.top[0];
    assert_int_equal(w->ndim, 2);
    assert_int_equal(w->shape[0], c->transpose ? c->K : c->nout);
    assert_int_equal(w->shape[1], c->transpose ? c->nout : c->K);
    assert_int_equal(lc.l->nparams, c->bias ? 2 : 1);
    if (c->bias) assert_int_equal(lc.l->params[1]->shape[0], c->nout);
    int axis = c->axis < 0 ? c->axis + lc.bottom[0]->ndim : c->axis;
    assert_int_equal(t->ndim, axis + 1);
    for (int i = 0; i < axis; i++) assert_int_equal(t->shape[i], lc.bottom[0]->shape[i]);
    assert_int_equal(t->shape[axis], c->nout);
    float *x = tu_values(lc.bottom[0]), *wv = tu_values(w), *y = tu_values(t);
    float *b = c->bias ? tu_values(lc.l->params[1]) : NULL;
    for (int m = 0; m < c->M; m++)
      for (int n = 0; n < c->nout; n++) {
        double s = b ? b[n] : 0;
        for (int i = 0; i < c->K; i++)
          s += (double)x[m * c->K + i] * (c->transpose ? wv[i * c->nout + n] : wv[n * c->K + i]);
        assert_float_equal(y[m * c->nout + n], s, 1e-5 * fmax(1, fabs(s)));
      }
    free(x);
    free(wv);
    free(y);
    free(b);
    tu_layer_case_free(&lc);
  }
}

static void test_ip_gradient(void **state) {
  for (size_t k = 0; k < sizeof k_ip / sizeof k_ip[0]; k++) {
    ip_param st;
    make_ip(&st, &k_ip[k]);
    tu_layer_case lc;
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, k_ip[k].shape, 1);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    tu_check_gradient(&lc, &o);
    tu_layer_case_free(&lc);
  }
}

static void test_ip_bad(void **state) {
  ip_param st;
  make_ip(&st, &k_ip[0]);
  st.ip.has_num_output = 0;
  tu_layer_case lc;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'ip' (InnerProduct): inner_product_param.num_output must be "
                               "given");
  tu_layer_case_free(&lc);
  make_ip(&st, &k_ip[0]);
  st.ip.axis = 4;
  assert_int_equal(tu_layer_case_try(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'ip' (InnerProduct): inner_product_param: axis 4 out of "
                               "range for a 4-axis blob bottom0");
  tu_layer_case_free(&lc);
  /* A new bottom shape with another K is refused at reshape. */
  make_ip(&st, &k_ip[0]);
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
  ct_tensor_reshape4(lc.bottom[0], 2, 3, 4, 6);
  assert_int_equal(ct_layer_reshape(lc.l, lc.bottom, lc.top, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'ip' (InnerProduct): the bottom (2 3 4 6 (144)) no longer "
                               "has 60 values per item from axis 1");
  /* Another batch size is fine. */
  ct_tensor_reshape4(lc.bottom[0], 7, 3, 4, 5);
  assert_int_equal(ct_layer_reshape(lc.l, lc.bottom, lc.top, &err), CT_OK);
  assert_int_equal(lc.top[0]->shape[0], 7);
  tu_layer_case_free(&lc);
}

/* ---------------------------------------------------------------- LRN */

static void ref_lrn(const lrn_cfg *c, int N, int C, int H, int W, const float *x, double *y) {
  const int half = (c->size - 1) / 2;
  for (int n = 0; n < N; n++)
    for (int ch = 0; ch < C; ch++)
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) {
          size_t i = (((size_t)n * C + ch) * H + h) * W + w;
          double scale;
          if (!c->within) {
            double s = 0;
            for (int cc = ch - half; cc <= ch + half; cc++)
              if (cc >= 0 && cc < C) {
                double v = x[(((size_t)n * C + cc) * H + h) * W + w];
                s += v * v;
              }
            scale = c->k + c->alpha / c->size * s;
          } else {
            /* Caffe's AVE pooling of the squares: kernel size, pad half,
             * stride 1, divisor from the window clipped to the padded map. */
            int hs = h - half, ws = w - half;
            int he = hs + c->size < H + half ? hs + c->size : H + half;
            int we = ws + c->size < W + half ? ws + c->size : W + half;
            double divisor = (double)(he - hs) * (we - ws), s = 0;
            for (int hh = hs; hh < he; hh++)
              for (int ww = ws; ww < we; ww++)
                if (hh >= 0 && ww >= 0 && hh < H && ww < W) {
                  double v = x[(((size_t)n * C + ch) * H + hh) * W + ww];
                  s += v * v;
                }
            scale = 1.0 + c->alpha * (s / divisor);  /* Caffe's power layer: shift 1 */
          }
          y[i] = x[i] * pow(scale, -c->beta);
        }
}

/* Batches of 2 and 300 images (the host spreads enough images over
 * threads). */
static void test_lrn_forward(void **state) {
  static const char *const shapes[] = {"2,6,5,4", "300,6,5,4"};
  for (int b = 0; b < 2; b++)
    for (size_t k = 0; k < sizeof k_lrn / sizeof k_lrn[0]; k++) {
      const lrn_cfg *c = &k_lrn[k];
      lrn_param st;
      make_lrn(&st, c);
      tu_layer_case lc;
      tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes[b], 1);
      tu_fill(lc.bottom[0], -2.0f, 2.0f, 12);
      tu_forward(&lc);
      assert_true(ct_tensor_same_shape(lc.top[0], lc.bottom[0]));
      float *x = tu_values(lc.bottom[0]), *y = tu_values(lc.top[0]);
      double *ref = malloc(lc.top[0]->count * sizeof *ref);
      ref_lrn(c, lc.bottom[0]->shape[0], 6, 5, 4, x, ref);
      for (size_t i = 0; i < lc.top[0]->count; i++)
        if (fabs(y[i] - ref[i]) > 1e-5 * fmax(1, fabs(ref[i])))
          fail_msg("lrn case %zu batch %d [%zu]: got %.7g, want %.7g", k, lc.bottom[0]->shape[0],
                   i, y[i], ref[i]);
      free(x);
      free(y);
      free(ref);
      tu_layer_case_free(&lc);
    }
}

static void test_lrn_gradient(void **state) {
  for (size_t k = 0; k < sizeof k_lrn / sizeof k_lrn[0]; k++) {
    lrn_param st;
    make_lrn(&st, &k_lrn[k]);
    tu_layer_case lc;
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,6,5,4", 1);
    tu_fill(lc.bottom[0], -2.0f, 2.0f, 12);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.threshold = 1e-2f;  /* Caffe's LRN test */
    tu_check_gradient(&lc, &o);
    tu_layer_case_free(&lc);
  }
}

static void test_lrn_bad(void **state) {
  lrn_param st;
  make_lrn(&st, &k_lrn[0]);
  st.rp.local_size = 4;
  tu_layer_case lc;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,6,5,4", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'norm' (LRN): lrn_param.local_size must be odd (got 4)");
  tu_layer_case_free(&lc);
  make_lrn(&st, &k_lrn[0]);
  assert_int_equal(tu_layer_case_try(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,6,5", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'norm' (LRN): the bottom must have 4 axes (num, channels, "
                               "height, width), got 2 6 5 (60)");
  tu_layer_case_free(&lc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ip_forward),  cmocka_unit_test(test_ip_gradient),
      cmocka_unit_test(test_ip_bad),      cmocka_unit_test(test_lrn_forward),
      cmocka_unit_test(test_lrn_gradient), cmocka_unit_test(test_lrn_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
