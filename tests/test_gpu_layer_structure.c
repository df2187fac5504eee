#include <math.h>
/* GPU paths of the structure and core layers: each against the CPU on the
 * same inputs (tu_compare_cpu_gpu) and the gradient checker on GPU 0.
 * Exits 77 (skipped) without a GPU. */
#include <stdio.h>

#include "layers/layer.h"
#include "layertest.h"
#include "testutil.h"

#define TOL 1e-4

static Caffe__LayerParameter layer(const char *name, const char *type) {
  Caffe__LayerParameter p = CAFFE__LAYER_PARAMETER__INIT;
  p.name = (char *)name;
  p.type = (char *)type;
  return p;
}

/* GPU against CPU, then the gradient checker on GPU 0 (unless no_grad). */
static void check(const Caffe__LayerParameter *p, const char *shapes, int ntop,
                  void (*prepare)(tu_layer_case *c), const ct_gradcheck_opts *o) {
  tu_compare_cpu_gpu(p, CT_PHASE_TRAIN, shapes, ntop, TOL, prepare);
  if (!o) return;
  tu_layer_case c;
  tu_layer_case_init(&c, p, 0, CT_PHASE_TRAIN, shapes, ntop);
  if (prepare) prepare(&c);
  tu_check_gradient(&c, o);
  tu_layer_case_free(&c);
}

static ct_gradcheck_opts defaults(void) { return ct_gradcheck_defaults(); }

/* ---------------------------------------------------------------- core */

static void test_gpu_input_dummy_parameter(void **state) {
  int64_t dims[] = {2, 3, 4};
  Caffe__BlobShape s = CAFFE__BLOB_SHAPE__INIT;
  s.dim = dims, s.n_dim = 3;
  Caffe__BlobShape *shapes[] = {&s};
  Caffe__InputParameter ip = CAFFE__INPUT_PARAMETER__INIT;
  ip.shape = shapes, ip.n_shape = 1;
  Caffe__LayerParameter p = layer("in", "Input");
  p.input_param = &ip;
  check(&p, "", 2, NULL, NULL);

  Caffe__FillerParameter u = CAFFE__FILLER_PARAMETER__INIT, k = CAFFE__FILLER_PARAMETER__INIT;
  u.type = "uniform", u.has_min = u.has_max = 1, u.min = -2, u.max = 2;
  k.type = "constant", k.has_value = 1, k.value = 1.5f;
  /* constant fillers give the same tops on both devices; random ones draw on
   * the device (test_gpu_dummy_device_fill) */
  Caffe__FillerParameter *fs[] = {&k, &k};
  Caffe__DummyDataParameter dp = CAFFE__DUMMY_DATA_PARAMETER__INIT;
  dp.shape = shapes, dp.n_shape = 1, dp.data_filler = fs, dp.n_data_filler = 2;
  p = layer("dd", "DummyData");
  p.dummy_data_param = &dp;
  check(&p, "", 2, NULL, NULL);
  (void)u;

  Caffe__ParameterParameter pp = CAFFE__PARAMETER_PARAMETER__INIT;
  pp.shape = &s;
  p = layer("par", "Parameter");
  p.parameter_param = &pp;
  ct_gradcheck_opts o = defaults();
  check(&p, "", 1, NULL, &o);
}

/* DummyData's uniform and gaussian fillers draw on the GPU: the values have
 * the filler's range and moments, and each forward draws new ones. */
static void test_gpu_dummy_device_fill(void **state) {
  int64_t dims[] = {20000};
  Caffe__BlobShape s = CAFFE__BLOB_SHAPE__INIT;
  s.dim = dims, s.n_dim = 1;
  Caffe__BlobShape *shapes[] = {&s};
  Caffe__FillerParameter u = CAFFE__FILLER_PARAMETER__INIT, g = CAFFE__FILLER_PARAMETER__INIT;
  u.type = "uniform", u.has_min = u.has_max = 1, u.min = -2, u.max = 2;
  g.type = "gaussian", g.has_mean = g.has_std = 1, g.mean = 1, g.std = 2;
  Caffe__FillerParameter *fs[] = {&u, &g};
  Caffe__DummyDataParameter dp = CAFFE__DUMMY_DATA_PARAMETER__INIT;
  dp.shape = shapes, dp.n_shape = 1, dp.data_filler = fs, dp.n_data_filler = 2;
  Caffe__LayerParameter p = layer("dd", "DummyData");
  p.dummy_data_param = &dp;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, 0, CT_PHASE_TRAIN, "", 2);
  /* drawn on the device from its draw counter: a CUDA graph captures it */
  assert_true(ct_layer_replayable(c.l));
  tu_forward(&c);
  float *a = tu_values(c.top[0]), *b = tu_values(c.top[1]);
  double su = 0, sg = 0, sg2 = 0;
  for (int i = 0; i < 20000; i++) {
    assert_true(a[i] >= -2.0f && a[i] < 2.0f);
    su += a[i];
    sg += b[i];
    sg2 += (double)b[i] * b[i];
  }
  double mg = sg / 20000, sd = sqrt(sg2 / 20000 - mg * mg);
  assert_true(fabs(su / 20000) < 0.05);
  assert_true(fabs(mg - 1.0) < 0.05 && fabs(sd - 2.0) < 0.05);
  tu_forward(&c);
  float *a2 = tu_values(c.top[0]);
  int same = 0;
  for (int i = 0; i < 20000; i++) same += a2[i] == a[i];
  assert_true(same < 100);
  free(a), free(b), free(a2);
  tu_layer_case_free(&c);
}

static void test_gpu_split_silence(void **state) {
  ct_gradcheck_opts o = defaults();
  Caffe__LayerParameter p = layer("sp", "Split");
  check(&p, "2,3,4", 3, NULL, &o);
  p = layer("sil", "Silence");
  check(&p, "2,3; 5", 0, NULL, NULL);
}

/* ---------------------------------------------------------------- eltwise */

static void test_gpu_eltwise(void **state) {
  float coeff[3] = {0.5f, -1.0f, 2.0f};
  Caffe__EltwiseParameter ep = CAFFE__ELTWISE_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("elt", "Eltwise");
  p.eltwise_param = &ep;
  const char *shapes = "2,3,4,5; 2,3,4,5; 2,3,4,5";
  ct_gradcheck_opts o = defaults();
  ep.has_operation = 1;
  ep.operation = CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM;
  check(&p, shapes, 1, NULL, &o);
  ep.coeff = coeff, ep.n_coeff = 3;
  check(&p, shapes, 1, NULL, &o);
  ep.n_coeff = 0;
  ep.operation = CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD;
  check(&p, shapes, 1, NULL, &o);
  ep.has_stable_prod_grad = 1, ep.stable_prod_grad = 0;
  check(&p, shapes, 1, NULL, &o);
  ep.operation = CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__MAX;
  o.step = 1e-4f, o.threshold = 1e-2f;
  check(&p, shapes, 1, NULL, &o);
}

/* ---------------------------------------------------------------- block copies */

static void test_gpu_concat_slice_tile(void **state) {
  ct_gradcheck_opts o = defaults();
  Caffe__ConcatParameter cp = CAFFE__CONCAT_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("cat", "Concat");
  p.concat_param = &cp;
  check(&p, "2,3,4,5; 2,2,4,5", 1, NULL, &o);
  cp.has_axis = 1, cp.axis = 0;
  check(&p, "2,3,4; 1,3,4; 3,3,4", 1, NULL, &o);
  cp.axis = -1;
  check(&p, "2,3,4; 2,3,1", 1, NULL, &o);

  uint32_t points[] = {1, 4};
  Caffe__SliceParameter sp = CAFFE__SLICE_PARAMETER__INIT;
  sp.slice_point = points, sp.n_slice_point = 2;
  p = layer("sl", "Slice");
  p.slice_param = &sp;
  check(&p, "2,6,3", 3, NULL, &o);
  sp.n_slice_point = 0, sp.has_axis = 1, sp.axis = -1;
  check(&p, "2,3,6", 2, NULL, &o);

  Caffe__TileParameter tp = CAFFE__TILE_PARAMETER__INIT;
  tp.has_tiles = 1, tp.tiles = 3;
  p = layer("tile", "Tile");
  p.tile_param = &tp;
  check(&p, "2,3,4", 1, NULL, &o);
  tp.has_axis = 1, tp.axis = 0;
  check(&p, "2,3,4", 1, NULL, &o);
  tp.axis = -1;
  check(&p, "2,3,4", 1, NULL, &o);
}

static void test_gpu_crop(void **state) {
  ct_gradcheck_opts o = defaults();
  uint32_t offsets[] = {1, 2, 3};
  Caffe__CropParameter cp = CAFFE__CROP_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("crop", "Crop");
  p.crop_param = &cp;
  check(&p, "2,3,6,7; 1,1,4,5", 1, NULL, &o);
  cp.offset = offsets, cp.n_offset = 2;
  check(&p, "2,3,6,7; 2,3,4,5", 1, NULL, &o);
  cp.has_axis = 1, cp.axis = 1, cp.n_offset = 1;
  check(&p, "2,4,5,6; 2,2,3,4", 1, NULL, &o);
  cp.axis = 0, cp.n_offset = 3;
  check(&p, "3,5,7; 2,3,4", 1, NULL, &o);
}

/* ---------------------------------------------------------------- views */

static void test_gpu_flatten_reshape(void **state) {
  ct_gradcheck_opts o = defaults();
  Caffe__LayerParameter p = layer("flat", "Flatten");
  check(&p, "2,3,4,5", 1, NULL, &o);
  Caffe__FlattenParameter fp = CAFFE__FLATTEN_PARAMETER__INIT;
  fp.has_axis = fp.has_end_axis = 1, fp.axis = 2, fp.end_axis = 3;
  p.flatten_param = &fp;
  check(&p, "2,3,4,5", 1, NULL, &o);

  int64_t dims[] = {0, -1, 2};
  Caffe__BlobShape s = CAFFE__BLOB_SHAPE__INIT;
  s.dim = dims, s.n_dim = 3;
  Caffe__ReshapeParameter rp = CAFFE__RESHAPE_PARAMETER__INIT;
  rp.shape = &s;
  p = layer("rs", "Reshape");
  p.reshape_param = &rp;
  check(&p, "2,3,4,5", 1, NULL, &o);
}

/* ---------------------------------------------------------------- reduction */

static void test_gpu_reduction(void **state) {
  const Caffe__ReductionParameter__ReductionOp ops[4] = {
      CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__SUM, CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__ASUM,
      CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__SUMSQ,
      CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__MEAN};
  Caffe__ReductionParameter rp = CAFFE__REDUCTION_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("red", "Reduction");
  p.reduction_param = &rp;
  rp.has_operation = rp.has_axis = rp.has_coeff = 1;
  for (int i = 0; i < 4; i++)
    for (int axis = 0; axis < 3; axis++) {
      rp.operation = ops[i], rp.axis = axis, rp.coeff = axis == 1 ? -0.5f : 2.0f;
      ct_gradcheck_opts o = defaults();
      if (ops[i] == CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__ASUM) o.kink = 0, o.kink_range = 0.011f;
      check(&p, "2,3,4", 1, NULL, &o);
    }
  /* A long row: the block reduction's tree sums many values. */
  rp.operation = ops[0], rp.axis = 1, rp.coeff = 1;
  check(&p, "3,1000", 1, NULL, NULL);
}

/* ---------------------------------------------------------------- indices */

static void embed_indices(tu_layer_case *c) {
  const float idx[6] = {0, 4, 2, 2, 1, 3};
  tu_set_values(c->bottom[0], idx);
}

static void reindex_indices(tu_layer_case *c) {
  const float idx[5] = {3, 0, 3, 1, 2};
  tu_set_values(c->bottom[1], idx);
}

static void filter_selector(tu_layer_case *c) {
  const float sel[4] = {1, 0, 0, 2};
  tu_set_values(c->bottom[c->nb - 1], sel);
}

static void test_gpu_embed(void **state) {
  Caffe__FillerParameter wf = CAFFE__FILLER_PARAMETER__INIT, bf = CAFFE__FILLER_PARAMETER__INIT;
  wf.type = "uniform", wf.has_min = wf.has_max = 1, wf.min = -1, wf.max = 1;
  bf.type = "gaussian";
  Caffe__EmbedParameter ep = CAFFE__EMBED_PARAMETER__INIT;
  ep.has_num_output = ep.has_input_dim = 1, ep.num_output = 4, ep.input_dim = 5;
  ep.weight_filler = &wf, ep.bias_filler = &bf;
  Caffe__LayerParameter p = layer("emb", "Embed");
  p.embed_param = &ep;
  ct_gradcheck_opts o = defaults();
  o.skip_bottom[0] = true;
  check(&p, "2,3", 1, embed_indices, &o);
  ep.has_bias_term = 1, ep.bias_term = 0;
  check(&p, "2,3", 1, embed_indices, &o);
  /* An index out of range is an error on the GPU too. */
  tu_layer_case c;
  tu_layer_case_init(&c, &p, 0, CT_PHASE_TRAIN, "3", 1);
  const float bad[3] = {0, 1, 7};
  tu_set_values(c.bottom[0], bad);
  ct_error err;
  assert_int_equal(ct_layer_forward(c.l, c.bottom, c.top, NULL, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'emb' (Embed): index 7 at position 2 is out of range [0, 5)");
  tu_layer_case_free(&c);
}

static void test_gpu_batch_reindex_filter(void **state) {
  ct_gradcheck_opts o = defaults();
  o.skip_bottom[1] = true;
  Caffe__LayerParameter p = layer("ri", "BatchReindex");
  check(&p, "4,2,3; 5", 1, reindex_indices, &o);
  tu_layer_case c;
  tu_layer_case_init(&c, &p, 0, CT_PHASE_TRAIN, "4,2; 2", 1);
  const float bad[2] = {1, 4};
  tu_set_values(c.bottom[1], bad);
  ct_error err;
  assert_int_equal(ct_layer_forward(c.l, c.bottom, c.top, NULL, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'ri' (BatchReindex): bottom 1 value 4 at position 1 is not "
                               "an index into a batch of 4");
  tu_layer_case_free(&c);

  p = layer("f", "Filter");
  ct_gradcheck_opts of = defaults();
  of.skip_bottom[2] = true;
  check(&p, "4,3; 4,2,2; 4,1", 2, filter_selector, &of);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_input_dummy_parameter), cmocka_unit_test(test_gpu_dummy_device_fill),
      cmocka_unit_test(test_gpu_split_silence),
      cmocka_unit_test(test_gpu_eltwise),               cmocka_unit_test(test_gpu_concat_slice_tile),
      cmocka_unit_test(test_gpu_crop),                  cmocka_unit_test(test_gpu_flatten_reshape),
      cmocka_unit_test(test_gpu_reduction),             cmocka_unit_test(test_gpu_embed),
      cmocka_unit_test(test_gpu_batch_reindex_filter),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
