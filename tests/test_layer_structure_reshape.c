/* Flatten and Reshape: shape rules and views of the bottom's storage. */
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
  char buf[256];
  if (t->ndim != ndim) fail_msg("shape %s has %d axes, want %d", ct_tensor_shape_string(t, buf, sizeof buf), t->ndim, ndim);
  for (int i = 0; i < ndim; i++)
    if (t->shape[i] != shape[i])
      fail_msg("shape %s differs on axis %d (want %d)", ct_tensor_shape_string(t, buf, sizeof buf), i, shape[i]);
}

static void expect_error(const Caffe__LayerParameter *p, const char *shapes, const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

/* The top is a view of the bottom: same data and diff, no copy; forward
 * keeps the values; the gradient passes straight through. */
static void check_view(tu_layer_case *c) {
  assert_int_equal(c->top[0]->count, c->bottom[0]->count);
  assert_ptr_equal(c->top[0]->data, c->bottom[0]->data);
  assert_ptr_equal(c->top[0]->diff, c->bottom[0]->diff);
  tu_forward(c);
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  tu_check_gradient(c, &o);
}

/* The layer's view follows the bottom when it is reshaped (and reallocated). */
static void check_view_after_growth(tu_layer_case *c, const int *grown, int ndim) {
  ct_error err;
  ct_tensor_reshape_or_die(c->bottom[0], ndim, grown);
  assert_int_equal(ct_layer_reshape(c->l, c->bottom, c->top, &err), CT_OK);
  assert_int_equal(c->top[0]->count, c->bottom[0]->count);
  assert_ptr_equal(c->top[0]->data, c->bottom[0]->data);
  assert_ptr_equal(c->top[0]->diff, c->bottom[0]->diff);
}

/* ---------------------------------------------------------------- Flatten */

static void test_flatten(void **state) {
  Caffe__FlattenParameter fp = CAFFE__FLATTEN_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("flat", "Flatten");
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
  assert_shape(c.top[0], 2, (int[]){2, 60});
  check_view(&c);
  check_view_after_growth(&c, (int[]){4, 3, 4, 5}, 4);
  assert_shape(c.top[0], 2, (int[]){4, 60});
  tu_layer_case_free(&c);
  p.flatten_param = &fp;
  struct {
    int axis, end;
    int ndim, shape[5];
  } cases[] = {{2, 3, 3, {2, 3, 20}},   {-3, -2, 3, {2, 12, 5}}, {0, -1, 1, {120}},
               {1, 1, 4, {2, 3, 4, 5}}, {1, 0, 5, {2, 1, 3, 4, 5}}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fp.has_axis = fp.has_end_axis = 1;
    fp.axis = cases[k].axis, fp.end_axis = cases[k].end;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    assert_shape(c.top[0], cases[k].ndim, cases[k].shape);
    check_view(&c);
    tu_layer_case_free(&c);
  }
}

static void test_flatten_bad(void **state) {
  Caffe__FlattenParameter fp = CAFFE__FLATTEN_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("flat", "Flatten");
  p.flatten_param = &fp;
  fp.has_axis = 1, fp.axis = 4;
  expect_error(&p, "2,3,4,5", "layer 'flat' (Flatten): axis 4 out of range for a 4-axis bottom");
  fp.axis = 1, fp.has_end_axis = 1, fp.end_axis = -5;
  expect_error(&p, "2,3,4,5", "layer 'flat' (Flatten): end_axis -5 out of range for a 4-axis bottom");
  fp.axis = 3, fp.end_axis = 1;
  expect_error(&p, "2,3,4,5",
               "layer 'flat' (Flatten): end_axis 1 (axis 1) comes before axis 3 (axis 3)");
}

/* In place is refused (Caffe's rule for Flatten, Reshape and Split). */
static void test_not_in_place(void **state) {
  const char *types[2] = {"Flatten", "Reshape"};
  for (int k = 0; k < 2; k++) {
    Caffe__LayerParameter p = layer("v", types[k]);
    ct_context ctx;
    ct_error err;
    assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err), CT_OK);
    ct_tensor *b = ct_tensor_new_shape(CT_DEVICE_CPU, "b", 2, (int[]){2, 3}, true);
    ct_tensor *bottom[1] = {b}, *top[1] = {b};
    ct_layer *l;
    assert_int_equal(ct_layer_create(&p, CT_PHASE_TRAIN, &ctx, 1, 1, &l, &err), CT_OK);
    assert_int_equal(ct_layer_setup(l, bottom, top, &err), CT_ERR_INVALID);
    char want[128];
    snprintf(want, sizeof want, "layer 'v' (%s): does not work in place (top and bottom are one blob)",
             types[k]);
    assert_string_equal(err.msg, want);
    ct_layer_free(l);
    ct_tensor_free(b);
    ct_context_free(&ctx);
  }
}

/* ---------------------------------------------------------------- Reshape */

typedef struct {
  int64_t dims[6];
  int ndims;
  int axis, num_axes;
  int out_ndim, out[6];
} reshape_case;

static Caffe__LayerParameter reshape_layer(Caffe__ReshapeParameter *rp, Caffe__BlobShape *s,
                                           const int64_t *dims, int n, int axis, int num_axes) {
  *s = (Caffe__BlobShape)CAFFE__BLOB_SHAPE__INIT;
  s->dim = (int64_t *)dims;
  s->n_dim = (size_t)n;
  *rp = (Caffe__ReshapeParameter)CAFFE__RESHAPE_PARAMETER__INIT;
  rp->shape = s;
  rp->has_axis = rp->has_num_axes = 1;
  rp->axis = axis, rp->num_axes = num_axes;
  Caffe__LayerParameter p = layer("rs", "Reshape");
  p.reshape_param = rp;
  return p;
}

static void test_reshape_inference(void **state) {
  /* Bottom 2 x 3 x 6 x 5 (180 values). */
  const reshape_case cases[] = {
      {{0, -1}, 2, 0, -1, 2, {2, 90}},
      {{-1, 5}, 2, 0, -1, 2, {36, 5}},
      {{3, 2, -1, 0}, 4, 0, -1, 4, {3, 2, 6, 5}},
      {{0, 0, 0, 0}, 4, 0, -1, 4, {2, 3, 6, 5}},
      {{1, 3}, 2, 1, 1, 5, {2, 1, 3, 6, 5}},
      {{1}, 1, 0, 0, 5, {1, 2, 3, 6, 5}},
      {{1}, 1, -1, 0, 5, {2, 3, 6, 5, 1}},
      {{-1}, 1, 2, -1, 3, {2, 3, 30}},
      {{-1}, 1, -4, 2, 3, {2, 18, 5}}, /* axis -1 is past the last axis */
      {{2, 3, 6, 5}, 4, 0, -1, 4, {2, 3, 6, 5}},
      {{0}, 0, 2, 0, 4, {2, 3, 6, 5}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    Caffe__ReshapeParameter rp;
    Caffe__BlobShape s;
    Caffe__LayerParameter p =
        reshape_layer(&rp, &s, cases[k].dims, cases[k].ndims, cases[k].axis, cases[k].num_axes);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,6,5", 1);
    assert_shape(c.top[0], cases[k].out_ndim, cases[k].out);
    check_view(&c);
    tu_layer_case_free(&c);
  }
  /* A copied (0) and an inferred (-1) dim follow the bottom's new shape. */
  Caffe__ReshapeParameter rp;
  Caffe__BlobShape s;
  const int64_t dims[] = {0, -1};
  Caffe__LayerParameter p = reshape_layer(&rp, &s, dims, 2, 0, -1);
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,6,5", 1);
  check_view_after_growth(&c, (int[]){7, 3, 6, 5}, 4);
  assert_shape(c.top[0], 2, (int[]){7, 90});
  tu_layer_case_free(&c);
}

static void test_reshape_bad(void **state) {
  Caffe__ReshapeParameter rp;
  Caffe__BlobShape s;
  const int64_t two_infer[] = {2, -1, -1}, seven[] = {7, -1}, small[] = {2, 3}, copies[] = {0, 0},
                minus2[] = {2, -2};
  Caffe__LayerParameter p = reshape_layer(&rp, &s, two_infer, 3, 0, -1);
  expect_error(&p, "2,3,6,5", "layer 'rs' (Reshape): shape dims 2 x -1 x -1 has more than one -1");
  p = reshape_layer(&rp, &s, seven, 2, 0, -1);
  expect_error(&p, "2,3,6,5",
               "layer 'rs' (Reshape): bottom count 180 is not divisible by the product 7 of the "
               "other dims (7 x -1 with -1 to infer)");
  p = reshape_layer(&rp, &s, small, 2, 0, -1);
  expect_error(&p, "2,3,6,5",
               "layer 'rs' (Reshape): top shape 2 x 3 has 6 values but the bottom has 180");
  p = reshape_layer(&rp, &s, copies, 2, 3, 1);
  expect_error(&p, "2,3,6,5",
               "layer 'rs' (Reshape): shape dim 1 is 0 (copy) but the bottom has no axis 4 to copy");
  p = reshape_layer(&rp, &s, small, 2, 5, 0);
  expect_error(&p, "2,3,6,5", "layer 'rs' (Reshape): axis 5 out of range for a 4-axis bottom");
  p = reshape_layer(&rp, &s, small, 2, -6, 0);
  expect_error(&p, "2,3,6,5", "layer 'rs' (Reshape): axis -6 out of range for a 4-axis bottom");
  p = reshape_layer(&rp, &s, small, 2, 0, -2);
  expect_error(&p, "2,3,6,5", "layer 'rs' (Reshape): num_axes -2: give 0 or more, or -1 for all axes");
  p = reshape_layer(&rp, &s, small, 2, 2, 3);
  expect_error(&p, "2,3,6,5",
               "layer 'rs' (Reshape): axis 2 + num_axes 3 = 5 is past the end of a 4-axis bottom");
  p = reshape_layer(&rp, &s, minus2, 2, 0, -1);
  expect_error(&p, "2,3,6,5",
               "layer 'rs' (Reshape): shape dims 2 x -2: dim 1 is -2 (give a size, 0 to copy or -1 "
               "to infer)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flatten),           cmocka_unit_test(test_flatten_bad),
      cmocka_unit_test(test_not_in_place),      cmocka_unit_test(test_reshape_inference),
      cmocka_unit_test(test_reshape_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
