/* NVCaffe's BatchNorm scale_bias: the layer's own scale and bias blobs (3
 * and 4, filled by scale_filler and bias_filler), its output against a
 * double-precision reference with batch and with stored statistics, the
 * gradient checker on x, scale and bias (training and frozen statistics),
 * in place, and the blobs as a .caffemodel holds them. */
#include "net/net.h"
#include "neurontest.h"
#include "proto/textformat.h"

#define SHAPE "5,3,2,3"

/* A scale_bias BatchNorm; use_global < 0 leaves use_global_stats unset. */
static Caffe__LayerParameter sb_param(Caffe__BatchNormParameter *bp, int use_global) {
  Caffe__LayerParameter p = nt_layer("bn", "BatchNorm");
  caffe__batch_norm_parameter__init(bp);
  bp->has_scale_bias = 1;
  bp->scale_bias = 1;
  if (use_global >= 0) {
    bp->has_use_global_stats = 1;
    bp->use_global_stats = use_global;
  }
  p.batch_norm_param = bp;
  return p;
}

static void random_affine(tu_layer_case *c) {
  tu_fill(c->l->params[3], 0.5f, 1.5f, 31);
  tu_fill(c->l->params[4], -0.5f, 0.5f, 32);
}

static void stored_stats(tu_layer_case *c) {
  const float ms[3] = {0.4f, -0.2f, 1.0f}, vs[3] = {2.0f, 0.5f, 1.2f}, factor = 2.5f;
  tu_set_values(c->l->params[0], ms);
  tu_set_values(c->l->params[1], vs);
  tu_set_values(c->l->params[2], &factor);
  random_affine(c);
}

static void test_blobs(void **state) {
  Caffe__BatchNormParameter bp;
  Caffe__LayerParameter p = sb_param(&bp, -1);
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, SHAPE, 1);
  assert_int_equal(c.l->nparams, 5);
  const int want_shape[5] = {3, 3, 1, 3, 3};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(c.l->params[i]->ndim, 1);
    assert_int_equal(c.l->params[i]->shape[0], want_shape[i]);
    assert_int_equal(c.l->param_propagate_down[i], i >= 3);
  }
  float *g = tu_values(c.l->params[3]), *b = tu_values(c.l->params[4]);
  for (int i = 0; i < 3; i++) {
    assert_float_equal(g[i], 1.0f, 0.0f);
    assert_float_equal(b[i], 0.0f, 0.0f);
  }
  free(g);
  free(b);
  tu_layer_case_free(&c);
  /* a filler alone turns scale_bias on, and fills */
  caffe__batch_norm_parameter__init(&bp);
  Caffe__FillerParameter two = CAFFE__FILLER_PARAMETER__INIT, half = CAFFE__FILLER_PARAMETER__INIT;
  two.type = half.type = "constant";
  two.has_value = half.has_value = 1;
  two.value = 2.0f;
  half.value = 0.5f;
  bp.bias_filler = &half;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, SHAPE, 1);
  assert_int_equal(c.l->nparams, 5);
  b = tu_values(c.l->params[4]);
  assert_float_equal(b[2], 0.5f, 0.0f);
  free(b);
  tu_layer_case_free(&c);
  bp.bias_filler = NULL;
  bp.scale_filler = &two;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, SHAPE, 1);
  g = tu_values(c.l->params[3]);
  assert_float_equal(g[1], 2.0f, 0.0f);
  free(g);
  tu_layer_case_free(&c);
  /* without either: Caffe's three blobs */
  bp.scale_filler = NULL;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, SHAPE, 1);
  assert_int_equal(c.l->nparams, 3);
  tu_layer_case_free(&c);
}

/* y = gamma (x - mean) / sqrt(var + eps) + beta per channel. */
static void expect_affine(tu_layer_case *c, const double *mean, const double *var) {
  const ct_tensor *bt = c->bottom[0];
  const int N = bt->shape[0], C = bt->shape[1];
  const size_t S = bt->count / ((size_t)N * C);
  float *x = tu_values(bt), *y = tu_values(c->top[0]);
  float *g = tu_values(c->l->params[3]), *b = tu_values(c->l->params[4]);
  double *want = malloc(bt->count * sizeof(double));
  for (size_t i = 0; i < bt->count; i++) {
    int ch = (int)(i / S % (size_t)C);
    want[i] = g[ch] * (x[i] - mean[ch]) / sqrt(var[ch] + 1e-5) + b[ch];
  }
  nt_expect_close("BatchNorm scale_bias", y, want, bt->count, 2e-5);
  free(want);
  free(x);
  free(y);
  free(g);
  free(b);
}

static void test_forward(void **state) {
  Caffe__BatchNormParameter bp;
  Caffe__LayerParameter p = sb_param(&bp, -1);
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, SHAPE, 1);
  random_affine(&c);
  float *x = tu_values(c.bottom[0]);
  double mean[3] = {0}, var[3] = {0};
  const size_t S = 6;
  for (int ch = 0; ch < 3; ch++) {
    for (int n = 0; n < 5; n++)
      for (size_t i = 0; i < S; i++) mean[ch] += x[((size_t)n * 3 + ch) * S + i] / 30.0;
    for (int n = 0; n < 5; n++)
      for (size_t i = 0; i < S; i++) {
        double d = x[((size_t)n * 3 + ch) * S + i] - mean[ch];
        var[ch] += d * d / 30.0;
      }
  }
  free(x);
  tu_forward(&c);
  expect_affine(&c, mean, var);
  tu_layer_case_free(&c);
  /* TEST: the stored statistics (sums over the factor) */
  p = sb_param(&bp, -1);
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TEST, SHAPE, 1);
  stored_stats(&c);
  const double gm[3] = {0.4 / 2.5, -0.2 / 2.5, 1.0 / 2.5}, gv[3] = {2.0 / 2.5, 0.5 / 2.5, 1.2 / 2.5};
  tu_forward(&c);
  expect_affine(&c, gm, gv);
  tu_layer_case_free(&c);
}

static void test_gradient(void **state) {
  Caffe__BatchNormParameter bp;
  /* batch statistics: x, scale and bias */
  Caffe__LayerParameter p = sb_param(&bp, -1);
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, SHAPE, 1);
  random_affine(&c);
  ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
  tu_check_gradient(&c, &o);
  tu_layer_case_free(&c);
  /* frozen statistics in training (fine-tuning): dx = gamma dy / std */
  p = sb_param(&bp, 1);
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, SHAPE, 1);
  stored_stats(&c);
  tu_check_gradient(&c, &o);
  tu_layer_case_free(&c);
}

static void test_in_place(void **state) {
  Caffe__BatchNormParameter bp;
  Caffe__LayerParameter p = sb_param(&bp, -1);
  nt_check_in_place(&p, CT_PHASE_TRAIN, SHAPE, random_affine);
  nt_check_in_place(&p, CT_PHASE_TEST, SHAPE, stored_stats);
  p = sb_param(&bp, 1);
  nt_check_in_place(&p, CT_PHASE_TRAIN, SHAPE, stored_stats);
  p = sb_param(&bp, -1);
  nt_check_param_diffs_accumulate(&p, SHAPE);
}

/* The .caffemodel holds the layer's five blobs in NVCaffe's order and
 * shapes, and reads back. */
static void test_caffemodel(void **state) {
  const char *text =
      "layer { name: 'data' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 4 dim: 3 dim: 3 } } }\n"
      "layer { name: 'bn' type: 'BatchNorm' bottom: 'x' top: 'x'\n"
      "  batch_norm_param { scale_bias: true scale_filler { type: 'constant' value: 1.5 }\n"
      "    bias_filler { type: 'constant' value: -0.25 } } }\n";
  ProtobufCMessage *m = NULL;
  ct_error err;
  assert_int_equal(ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), NULL, &m, &err),
                   CT_OK);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err), CT_OK);
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .quiet = true};
  ct_net *net = NULL;
  assert_int_equal(ct_net_init(&net, (Caffe__NetParameter *)m, &o, &ctx, &err), CT_OK);
  Caffe__NetParameter *saved = ct_net_to_proto(net, false);
  const Caffe__LayerParameter *bn = NULL;
  for (size_t i = 0; i < saved->n_layer; i++)
    if (!strcmp(saved->layer[i]->name, "bn")) bn = saved->layer[i];
  assert_non_null(bn);
  assert_int_equal(bn->n_blobs, 5);
  const int dims[5] = {4, 4, 1, 4, 4};
  for (int i = 0; i < 5; i++) {
    assert_non_null(bn->blobs[i]->shape);
    assert_int_equal(bn->blobs[i]->shape->n_dim, 1);
    assert_int_equal(bn->blobs[i]->shape->dim[0], dims[i]);
  }
  assert_float_equal(bn->blobs[3]->data[2], 1.5f, 0.0f);
  assert_float_equal(bn->blobs[4]->data[0], -0.25f, 0.0f);
  ct_net_proto_free(saved);
  ct_net_free(net);
  ct_context_free(&ctx);
  protobuf_c_message_free_unpacked(m, NULL);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_blobs),    cmocka_unit_test(test_forward),
      cmocka_unit_test(test_gradient), cmocka_unit_test(test_in_place),
      cmocka_unit_test(test_caffemodel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
