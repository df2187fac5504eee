/* Concat, Slice, Tile and Crop: block-copy layers against naive references. */
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

static void check_gradient(tu_layer_case *c) {
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  tu_check_gradient(c, &o);
}

/* Element (multi-index idx) of a row-major array of the given shape. */
static size_t offset_of(const int *shape, int ndim, const int *idx) {
  size_t o = 0;
  for (int k = 0; k < ndim; k++) o = o * (size_t)shape[k] + (size_t)idx[k];
  return o;
}

/* Multi-index of flat position i in shape. */
static void index_of(const int *shape, int ndim, size_t i, int *idx) {
  for (int k = ndim - 1; k >= 0; k--) {
    idx[k] = (int)(i % (size_t)shape[k]);
    i /= (size_t)shape[k];
  }
}

/* ---------------------------------------------------------------- Concat */

/* Checks top == concatenation of the bottoms along axis, element by element. */
static void check_concat(tu_layer_case *c, int axis) {
  const ct_tensor *t = c->top[0];
  float *y = tu_values(t), *x[TU_MAX_BLOBS];
  for (int b = 0; b < c->nb; b++) x[b] = tu_values(c->bottom[b]);
  for (size_t i = 0; i < t->count; i++) {
    int idx[CT_MAX_AXES];
    index_of(t->shape, t->ndim, i, idx);
    int b = 0;
    while (idx[axis] >= c->bottom[b]->shape[axis]) idx[axis] -= c->bottom[b++]->shape[axis];
    assert_float_equal(y[i], x[b][offset_of(c->bottom[b]->shape, t->ndim, idx)], 0);
  }
  free(y);
  for (int b = 0; b < c->nb; b++) free(x[b]);
}

static void test_concat_axes(void **state) {
  Caffe__ConcatParameter cp = CAFFE__CONCAT_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("cat", "Concat");
  p.concat_param = &cp;
  tu_layer_case c;
  /* Default axis 1. */
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5; 2,2,4,5; 2,1,4,5", 1);
  assert_shape(c.top[0], 4, (int[]){2, 6, 4, 5});
  tu_forward(&c);
  check_concat(&c, 1);
  check_gradient(&c);
  tu_layer_case_free(&c);
  /* Axis 0. */
  cp.has_axis = 1, cp.axis = 0;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4; 3,3,4", 1);
  assert_shape(c.top[0], 3, (int[]){5, 3, 4});
  tu_forward(&c);
  check_concat(&c, 0);
  check_gradient(&c);
  tu_layer_case_free(&c);
  /* The last axis, counted from the end. */
  cp.axis = -1;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4; 2,3,2", 1);
  assert_shape(c.top[0], 3, (int[]){2, 3, 6});
  tu_forward(&c);
  check_concat(&c, 2);
  check_gradient(&c);
  tu_layer_case_free(&c);
  /* Legacy concat_dim. */
  cp.has_axis = 0, cp.has_concat_dim = 1, cp.concat_dim = 2;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,1,5; 2,3,3,5", 1);
  assert_shape(c.top[0], 4, (int[]){2, 3, 4, 5});
  tu_forward(&c);
  check_concat(&c, 2);
  tu_layer_case_free(&c);
  /* A single bottom is copied through. */
  cp.has_concat_dim = 0;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3", 1);
  tu_forward(&c);
  check_concat(&c, 1);
  tu_layer_case_free(&c);
}

static void test_concat_bad(void **state) {
  Caffe__ConcatParameter cp = CAFFE__CONCAT_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("cat", "Concat");
  p.concat_param = &cp;
  expect_error(&p, "2,3,4,5; 2,3,4,6", 1,
               "layer 'cat' (Concat): bottom 1 has shape 2 3 4 6 (144) but bottom 0 has 2 3 4 5 "
               "(120): only the concat axis 1 may differ");
  expect_error(&p, "2,3,4,5; 2,3,4", 1,
               "layer 'cat' (Concat): bottom 1 has 3 axes but bottom 0 has 4");
  cp.has_axis = 1, cp.axis = 4;
  expect_error(&p, "2,3,4,5; 2,3,4,5", 1,
               "layer 'cat' (Concat): axis 4 out of range for a 4-axis bottom");
  cp.has_concat_dim = 1, cp.concat_dim = 1;
  expect_error(&p, "2,3; 2,3", 1,
               "layer 'cat' (Concat): concat_param: give either axis or concat_dim, not both");
  cp.has_axis = 0, cp.concat_dim = 2;
  expect_error(&p, "2,3; 2,3", 1,
               "layer 'cat' (Concat): concat_dim 2 out of range for a 2-axis bottom");
}

/* ---------------------------------------------------------------- Slice */

static void test_slice_points(void **state) {
  uint32_t points[] = {1, 3};
  Caffe__SliceParameter sp = CAFFE__SLICE_PARAMETER__INIT;
  sp.slice_point = points, sp.n_slice_point = 2;
  Caffe__LayerParameter p = layer("sl", "Slice");
  p.slice_param = &sp;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,5,3", 3);
  assert_shape(c.top[0], 3, (int[]){2, 1, 3});
  assert_shape(c.top[1], 3, (int[]){2, 2, 3});
  assert_shape(c.top[2], 3, (int[]){2, 2, 3});
  tu_forward(&c);
  float *x = tu_values(c.bottom[0]);
  int start[3] = {0, 1, 3};
  for (int t = 0; t < 3; t++) {
    float *y = tu_values(c.top[t]);
    for (size_t i = 0; i < c.top[t]->count; i++) {
      int idx[3];
      index_of(c.top[t]->shape, 3, i, idx);
      idx[1] += start[t];
      assert_float_equal(y[i], x[offset_of(c.bottom[0]->shape, 3, idx)], 0);
    }
    free(y);
  }
  free(x);
  check_gradient(&c);
  tu_layer_case_free(&c);
}

static void test_slice_equal_and_legacy(void **state) {
  Caffe__SliceParameter sp = CAFFE__SLICE_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("sl", "Slice");
  p.slice_param = &sp;
  sp.has_axis = 1, sp.axis = 0;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "6,2,2", 3);
  tu_forward(&c);
  float *x = tu_values(c.bottom[0]);
  for (int t = 0; t < 3; t++) {
    assert_shape(c.top[t], 3, (int[]){2, 2, 2});
    float *y = tu_values(c.top[t]);
    assert_memory_equal(y, x + t * 8, 8 * sizeof(float));
    free(y);
  }
  free(x);
  check_gradient(&c);
  tu_layer_case_free(&c);
  sp.has_axis = 0, sp.has_slice_dim = 1, sp.slice_dim = 2;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,2,4", 2);
  assert_shape(c.top[1], 3, (int[]){2, 2, 2});
  tu_layer_case_free(&c);
}

/* Slice undoes Concat. */
static void test_concat_slice_round_trip(void **state) {
  Caffe__ConcatParameter cp = CAFFE__CONCAT_PARAMETER__INIT;
  cp.has_axis = 1, cp.axis = 2;
  Caffe__LayerParameter pc = layer("cat", "Concat");
  pc.concat_param = &cp;
  uint32_t points[] = {3};
  Caffe__SliceParameter sp = CAFFE__SLICE_PARAMETER__INIT;
  sp.has_axis = 1, sp.axis = 2, sp.slice_point = points, sp.n_slice_point = 1;
  Caffe__LayerParameter ps = layer("sl", "Slice");
  ps.slice_param = &sp;
  tu_layer_case cat, sl;
  tu_layer_case_init(&cat, &pc, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,3,2; 2,3,4,2", 1);
  tu_forward(&cat);
  char shape[64];
  snprintf(shape, sizeof shape, "%d,%d,%d,%d", cat.top[0]->shape[0], cat.top[0]->shape[1],
           cat.top[0]->shape[2], cat.top[0]->shape[3]);
  tu_layer_case_init(&sl, &ps, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 2);
  ct_tensor_copy_data(sl.bottom[0], cat.top[0]);
  tu_forward(&sl);
  for (int i = 0; i < 2; i++) {
    assert_true(ct_tensor_same_shape(sl.top[i], cat.bottom[i]));
    float *a = tu_values(cat.bottom[i]), *b = tu_values(sl.top[i]);
    assert_memory_equal(a, b, cat.bottom[i]->count * sizeof(float));
    free(a);
    free(b);
  }
  tu_layer_case_free(&cat);
  tu_layer_case_free(&sl);
}

static void test_slice_bad(void **state) {
  uint32_t points[] = {3, 2};
  Caffe__SliceParameter sp = CAFFE__SLICE_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("sl", "Slice");
  p.slice_param = &sp;
  sp.slice_point = points, sp.n_slice_point = 2;
  expect_error(&p, "2,5", 3,
               "layer 'sl' (Slice): slice_param: slice points must increase from above 0: "
               "slice_point[1] = 2 after 3");
  points[0] = 0;
  expect_error(&p, "2,5", 3,
               "layer 'sl' (Slice): slice_param: slice points must increase from above 0: "
               "slice_point[0] = 0 after 0");
  points[0] = 2, points[1] = 6;
  expect_error(&p, "2,5", 3,
               "layer 'sl' (Slice): slice_param: slice_point[1] = 6 is past the end of slice axis 1 "
               "of size 5");
  expect_error(&p, "2,5", 2,
               "layer 'sl' (Slice): slice_param: 2 slice_point values for 2 tops (need 1)");
  expect_error(&p, "2,2", 3, "layer 'sl' (Slice): 3 tops are more than slice axis 1 of size 2");
  sp.n_slice_point = 0;
  expect_error(&p, "2,5", 2, "layer 'sl' (Slice): 2 tops do not evenly divide slice axis 1 of size 5");
  sp.has_axis = 1, sp.axis = -3;
  expect_error(&p, "2,4", 2, "layer 'sl' (Slice): axis -3 out of range for a 2-axis bottom");
  sp.has_slice_dim = 1;
  expect_error(&p, "2,4", 2, "layer 'sl' (Slice): slice_param: give either axis or slice_dim, not both");
}

/* ---------------------------------------------------------------- Tile */

static void test_tile(void **state) {
  Caffe__TileParameter tp = CAFFE__TILE_PARAMETER__INIT;
  tp.has_tiles = 1, tp.tiles = 3;
  Caffe__LayerParameter p = layer("tile", "Tile");
  p.tile_param = &tp;
  for (int k = 0; k < 3; k++) {
    int axis = k == 0 ? 1 : (k == 1 ? 0 : -1);
    tp.has_axis = k != 0, tp.axis = axis;
    int a = axis < 0 ? axis + 3 : axis;
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4", 1);
    int expect[3] = {2, 3, 4};
    expect[a] *= 3;
    assert_shape(c.top[0], 3, expect);
    tu_forward(&c);
    float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
    for (size_t i = 0; i < c.top[0]->count; i++) {
      int idx[3];
      index_of(c.top[0]->shape, 3, i, idx);
      idx[a] %= c.bottom[0]->shape[a];
      assert_float_equal(y[i], x[offset_of(c.bottom[0]->shape, 3, idx)], 0);
    }
    free(x);
    free(y);
    check_gradient(&c);
    tu_layer_case_free(&c);
  }
}

static void test_tile_bad(void **state) {
  Caffe__TileParameter tp = CAFFE__TILE_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("tile", "Tile");
  expect_error(&p, "2,3", 1, "layer 'tile' (Tile): tile_param.tiles must be given");
  p.tile_param = &tp;
  tp.has_tiles = 1, tp.tiles = 0;
  expect_error(&p, "2,3", 1, "layer 'tile' (Tile): tile_param.tiles must be positive, got 0");
  tp.tiles = 2, tp.has_axis = 1, tp.axis = 2;
  expect_error(&p, "2,3", 1, "layer 'tile' (Tile): axis 2 out of range for a 2-axis bottom");
}

/* ---------------------------------------------------------------- Crop */

/* top[idx] == bottom0[idx + offset] on every element. */
static void check_crop(tu_layer_case *c, const int *offset) {
  const ct_tensor *t = c->top[0], *b = c->bottom[0];
  float *x = tu_values(b), *y = tu_values(t);
  for (size_t i = 0; i < t->count; i++) {
    int idx[CT_MAX_AXES];
    index_of(t->shape, t->ndim, i, idx);
    for (int k = 0; k < t->ndim; k++) idx[k] += offset[k];
    assert_float_equal(y[i], x[offset_of(b->shape, b->ndim, idx)], 0);
  }
  free(x);
  free(y);
}

static void test_crop(void **state) {
  uint32_t offsets[] = {1, 2, 3};
  Caffe__CropParameter cp = CAFFE__CROP_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("crop", "Crop");
  p.crop_param = &cp;
  tu_layer_case c;
  /* Default axis 2, no offset: the top-left window. */
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,6,7; 1,1,4,5", 1);
  assert_shape(c.top[0], 4, (int[]){2, 3, 4, 5});
  tu_forward(&c);
  check_crop(&c, (int[]){0, 0, 0, 0});
  tu_layer_case_free(&c);
  /* Axis 2 with one offset per axis. */
  cp.offset = offsets, cp.n_offset = 2;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,6,7; 2,3,4,5", 1);
  tu_forward(&c);
  check_crop(&c, (int[]){0, 0, 1, 2});
  check_gradient(&c);
  tu_layer_case_free(&c);
  /* Axis 1 with one offset for every cropped axis. */
  cp.has_axis = 1, cp.axis = 1, cp.n_offset = 1;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,4,5,6; 9,2,3,4", 1);
  assert_shape(c.top[0], 4, (int[]){2, 2, 3, 4});
  tu_forward(&c);
  check_crop(&c, (int[]){0, 1, 1, 1});
  check_gradient(&c);
  tu_layer_case_free(&c);
  /* Axis -3 of a 3-axis blob (= 0): every axis cropped, offsets per axis. */
  cp.axis = -3, cp.n_offset = 3;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,5,7; 2,3,4", 1);
  assert_shape(c.top[0], 3, (int[]){2, 3, 4});
  tu_forward(&c);
  check_crop(&c, (int[]){1, 2, 3});
  check_gradient(&c);
  tu_layer_case_free(&c);
}

static void test_crop_bad(void **state) {
  uint32_t offsets[] = {1, 2, 3};
  Caffe__CropParameter cp = CAFFE__CROP_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("crop", "Crop");
  p.crop_param = &cp;
  cp.offset = offsets, cp.n_offset = 3;
  expect_error(&p, "2,3,6,7; 2,3,4,5", 1,
               "layer 'crop' (Crop): crop_param: 3 offset values for the 2 axes from axis 2 on "
               "(give one, or one per cropped axis)");
  cp.n_offset = 2, offsets[1] = 3;
  expect_error(&p, "2,3,6,7; 2,3,4,5", 1,
               "layer 'crop' (Crop): the crop of axis 3 is out of bounds: size 5 at offset 3 does "
               "not fit in 7");
  expect_error(&p, "2,3,6,7; 4,5", 1,
               "layer 'crop' (Crop): reference bottom 1 has 2 axes, fewer than the 4 of bottom 0");
  cp.has_axis = 1, cp.axis = 4;
  expect_error(&p, "2,3,6,7; 2,3,4,5", 1, "layer 'crop' (Crop): axis 4 out of range for a 4-axis bottom");
  expect_error(&p, "2,3,6,7", 1, "layer 'crop' (Crop) takes 2 bottom blobs, got 1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concat_axes),     cmocka_unit_test(test_concat_bad),
      cmocka_unit_test(test_slice_points),    cmocka_unit_test(test_slice_equal_and_legacy),
      cmocka_unit_test(test_concat_slice_round_trip), cmocka_unit_test(test_slice_bad),
      cmocka_unit_test(test_tile),            cmocka_unit_test(test_tile_bad),
      cmocka_unit_test(test_crop),            cmocka_unit_test(test_crop_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
