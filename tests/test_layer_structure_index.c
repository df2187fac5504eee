/* Embed, BatchReindex and Filter: layers driven by index or selector blobs. */
#include <math.h>
#include <stdio.h>

#include "layers/layer.h"
#include "layertest.h"
#include "testutil.h"

static Caffe__LayerParameter layer(const char *name, const char *type) {
  Caffe__LayerParameter p = CAFFE__LAYER_PARAMETER__INIT;
  p.name = (char *)name;
  p.type = (char *)type;
  return p;
}

static void assert_shape(const ct_tensor *t, int ndim, const int *shape) {
  assert_int_equal(t->ndim, ndim);
  for (int i = 0; i < ndim; i++) assert_int_equal(t->shape[i], shape[i]);
}

static void expect_error(const Caffe__LayerParameter *p, const char *shapes, int ntop,
                         const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, ntop, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

static void expect_forward_error(tu_layer_case *c, const char *msg) {
  ct_error err;
  assert_int_equal(ct_layer_forward(c->l, c->bottom, c->top, NULL, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
}

/* ---------------------------------------------------------------- Embed */

static Caffe__LayerParameter embed_layer(Caffe__EmbedParameter *ep, Caffe__FillerParameter *wf,
                                         Caffe__FillerParameter *bf, bool bias) {
  *wf = (Caffe__FillerParameter)CAFFE__FILLER_PARAMETER__INIT;
  *bf = (Caffe__FillerParameter)CAFFE__FILLER_PARAMETER__INIT;
  wf->type = "uniform", wf->has_min = wf->has_max = 1, wf->min = -1, wf->max = 1;
  bf->type = "gaussian";
  *ep = (Caffe__EmbedParameter)CAFFE__EMBED_PARAMETER__INIT;
  ep->has_num_output = 1, ep->num_output = 4;
  ep->has_input_dim = 1, ep->input_dim = 5;
  ep->has_bias_term = 1, ep->bias_term = bias;
  ep->weight_filler = wf, ep->bias_filler = bf;
  Caffe__LayerParameter p = layer("emb", "Embed");
  p.embed_param = ep;
  return p;
}

static void test_embed(void **state) {
  for (int bias = 0; bias < 2; bias++) {
    Caffe__EmbedParameter ep;
    Caffe__FillerParameter wf, bf;
    Caffe__LayerParameter p = embed_layer(&ep, &wf, &bf, bias);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3", 1);
    assert_int_equal(c.l->nparams, bias ? 2 : 1);
    assert_shape(c.l->params[0], 2, (int[]){5, 4});
    if (bias) assert_shape(c.l->params[1], 1, (int[]){4});
    const float idx[6] = {0, 4, 2, 2, 1, 3.7f}; /* 3.7 truncates to 3, as Caffe's cast */
    const int row[6] = {0, 4, 2, 2, 1, 3};
    tu_set_values(c.bottom[0], idx);
    tu_forward(&c);
    assert_shape(c.top[0], 3, (int[]){2, 3, 4});
    float *w = tu_values(c.l->params[0]), *b = bias ? tu_values(c.l->params[1]) : NULL;
    float *y = tu_values(c.top[0]);
    for (int m = 0; m < 6; m++)
      for (int n = 0; n < 4; n++)
        assert_float_equal(y[m * 4 + n], w[row[m] * 4 + n] + (b ? b[n] : 0.0f), 1e-6);
    /* Backward: rows of the table accumulate the diffs of every use. */
    float dy[24], dw[20], db[4], dx[6];
    tu_fill_uniform(dy, 24, -1, 1, 3);
    ct_tensor_upload_diff(c.top[0], dy);
    for (int i = 0; i < c.l->nparams; i++) ct_tensor_zero_diff(c.l->params[i]);
    bool prop[1] = {true};
    ct_layer_backward(c.l, c.top, prop, c.bottom);
    ct_tensor_download_diff(c.l->params[0], dw);
    for (int r = 0; r < 5; r++)
      for (int n = 0; n < 4; n++) {
        double g = 0;
        for (int m = 0; m < 6; m++)
          if (row[m] == r) g += dy[m * 4 + n];
        assert_float_equal(dw[r * 4 + n], g, 1e-6);
      }
    if (bias) {
      ct_tensor_download_diff(c.l->params[1], db);
      for (int n = 0; n < 4; n++) {
        double g = 0;
        for (int m = 0; m < 6; m++) g += dy[m * 4 + n];
        assert_float_equal(db[n], g, 1e-5);
      }
    }
    ct_tensor_download_diff(c.bottom[0], dx);
    for (int m = 0; m < 6; m++) assert_float_equal(dx[m], 0.0f, 0);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.skip_bottom[0] = true;
    tu_check_gradient(&c, &o);
    free(w);
    free(b);
    free(y);
    tu_layer_case_free(&c);
  }
}

static void test_embed_bad(void **state) {
  Caffe__EmbedParameter ep;
  Caffe__FillerParameter wf, bf;
  Caffe__LayerParameter p = embed_layer(&ep, &wf, &bf, true);
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3", 1);
  const float high[3] = {0, 5, 1}, low[3] = {0, 1, -1}, nan_[3] = {NAN, 0, 0};
  tu_set_values(c.bottom[0], high);
  expect_forward_error(&c, "layer 'emb' (Embed): index 5 at position 1 is out of range [0, 5)");
  tu_set_values(c.bottom[0], low);
  expect_forward_error(&c, "layer 'emb' (Embed): index -1 at position 2 is out of range [0, 5)");
  tu_set_values(c.bottom[0], nan_);
  expect_forward_error(&c, "layer 'emb' (Embed): index nan at position 0 is out of range [0, 5)");
  tu_layer_case_free(&c);
  ep.num_output = 0;
  expect_error(&p, "3", 1, "layer 'emb' (Embed): embed_param.num_output is 0 (must be at least 1)");
  ep.num_output = 4, ep.has_input_dim = 0, ep.input_dim = 0;
  expect_error(&p, "3", 1, "layer 'emb' (Embed): embed_param.input_dim is 0 (must be at least 1)");
  ep.has_input_dim = 1, ep.input_dim = 5, wf.type = "xavierr";
  expect_error(&p, "3", 1,
               "layer 'emb' (Embed): embed_param.weight_filler: unknown filler type 'xavierr' (did "
               "you mean 'xavier'?)");
}

/* ---------------------------------------------------------------- BatchReindex */

static void test_batch_reindex(void **state) {
  Caffe__LayerParameter p = layer("ri", "BatchReindex");
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,2,3; 5", 1);
  const float idx[5] = {3, 0, 3, 1, 2};
  tu_set_values(c.bottom[1], idx);
  tu_forward(&c);
  assert_shape(c.top[0], 3, (int[]){5, 2, 3});
  float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
  for (int j = 0; j < 5; j++) assert_memory_equal(y + j * 6, x + (int)idx[j] * 6, 6 * sizeof(float));
  float dy[30], dx[24];
  tu_fill_uniform(dy, 30, -1, 1, 5);
  ct_tensor_upload_diff(c.top[0], dy);
  bool prop[2] = {true, false};
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  ct_tensor_download_diff(c.bottom[0], dx);
  for (int n = 0; n < 4; n++)
    for (int k = 0; k < 6; k++) {
      double g = 0;
      for (int j = 0; j < 5; j++)
        if ((int)idx[j] == n) g += dy[j * 6 + k];
      assert_float_equal(dx[n * 6 + k], g, 1e-6);
    }
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.skip_bottom[1] = true;
  tu_check_gradient(&c, &o);
  const float bad_high[5] = {3, 0, 4, 1, 2}, bad_low[5] = {-0.5f, 0, 0, 0, 0};
  tu_set_values(c.bottom[1], bad_high);
  expect_forward_error(&c, "layer 'ri' (BatchReindex): bottom 1 value 4 at position 2 is not an "
                           "index into a batch of 4");
  tu_set_values(c.bottom[1], bad_low);
  expect_forward_error(&c, "layer 'ri' (BatchReindex): bottom 1 value -0.5 at position 0 is not an "
                           "index into a batch of 4");
  free(x);
  free(y);
  tu_layer_case_free(&c);
  expect_error(&p, "4,2; 2,2", 1,
               "layer 'ri' (BatchReindex): bottom 1 (the indices) must have 1 axis, got 2");
}

/* ---------------------------------------------------------------- Filter */

static void test_filter(void **state) {
  Caffe__LayerParameter p = layer("f", "Filter");
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,3; 4,2,2; 4,1", 2);
  /* Before the first forward the tops hold the whole batch. */
  assert_shape(c.top[0], 2, (int[]){4, 3});
  const float sel[4] = {1, 0, 0, -2};
  tu_set_values(c.bottom[2], sel);
  tu_forward(&c);
  assert_shape(c.top[0], 2, (int[]){2, 3});
  assert_shape(c.top[1], 3, (int[]){2, 2, 2});
  const int kept[2] = {0, 3};
  for (int t = 0; t < 2; t++) {
    size_t dim = c.bottom[t]->count / 4;
    float *x = tu_values(c.bottom[t]), *y = tu_values(c.top[t]);
    for (int j = 0; j < 2; j++)
      assert_memory_equal(y + j * dim, x + kept[j] * dim, dim * sizeof(float));
    /* Backward: kept items get the top's diff, the others zero. */
    float dy[8], dx[16];
    tu_fill_uniform(dy, 2 * dim, -1, 1, 13 + t);
    ct_tensor_upload_diff(c.top[t], dy);
    bool prop[3] = {t == 0, t == 1, false};
    ct_layer_backward(c.l, c.top, prop, c.bottom);
    ct_tensor_download_diff(c.bottom[t], dx);
    for (int n = 0; n < 4; n++)
      for (size_t k = 0; k < dim; k++) {
        float want = n == 0 ? dy[k] : (n == 3 ? dy[dim + k] : 0.0f);
        assert_float_equal(dx[n * dim + k], want, 0);
      }
    free(x);
    free(y);
  }
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.skip_bottom[2] = true;
  tu_check_gradient(&c, &o);
  /* Nothing selected: empty tops. */
  const float none[4] = {0, 0, 0, 0};
  tu_set_values(c.bottom[2], none);
  tu_forward(&c);
  assert_shape(c.top[0], 2, (int[]){0, 3});
  /* A reshape after the first one follows the selector too. */
  const float one[4] = {0, 0, 5, 0};
  tu_set_values(c.bottom[2], one);
  ct_error err;
  assert_int_equal(ct_layer_reshape(c.l, c.bottom, c.top, &err), CT_OK);
  assert_shape(c.top[1], 3, (int[]){1, 2, 2});
  tu_layer_case_free(&c);
}

static void test_filter_bad(void **state) {
  Caffe__LayerParameter p = layer("f", "Filter");
  expect_error(&p, "4,3; 4,2; 4", 1,
               "layer 'f' (Filter): needs one top per filtered bottom: 3 bottoms (the last is the "
               "selector) but 1 tops");
  expect_error(&p, "4,3; 4,2", 1,
               "layer 'f' (Filter): the selector (bottom 1) must be 1 on every axis after the first; "
               "axis 1 is 2");
  expect_error(&p, "4,3; 5,1", 1,
               "layer 'f' (Filter): bottom 0 must have the selector's batch size 5 on its first axis");
  expect_error(&p, "4,3", 1, "layer 'f' (Filter) takes at least 2 bottom blobs, got 1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embed),         cmocka_unit_test(test_embed_bad),
      cmocka_unit_test(test_batch_reindex), cmocka_unit_test(test_filter),
      cmocka_unit_test(test_filter_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
