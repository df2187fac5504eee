/* Scale and Bias: broadcast shapes (one and two bottoms, axis, num_axes,
 * scalars, element-wise), learned blobs (Caffe's order, shapes, fillers),
 * gradient checks, in place, and bad shapes. */
#include "neurontest.h"

typedef struct {
  const char *shapes; /* bottoms */
  int axis, num_axes; /* UNSET: leave the field unset */
  bool bias_term;
} bcase;

#define UNSET (-1000)

static Caffe__FillerParameter g_gauss = CAFFE__FILLER_PARAMETER__INIT;

static Caffe__LayerParameter scale_param(Caffe__ScaleParameter *sp, const bcase *bc) {
  Caffe__LayerParameter p = nt_layer("scale", "Scale");
  caffe__scale_parameter__init(sp);
  if (bc->axis != UNSET) {
    sp->has_axis = 1;
    sp->axis = bc->axis;
  }
  if (bc->num_axes != UNSET) {
    sp->has_num_axes = 1;
    sp->num_axes = bc->num_axes;
  }
  sp->has_bias_term = 1;
  sp->bias_term = bc->bias_term;
  g_gauss.type = "gaussian";
  sp->filler = &g_gauss;
  sp->bias_filler = &g_gauss;
  p.scale_param = sp;
  return p;
}

static Caffe__LayerParameter bias_param(Caffe__BiasParameter *bp, const bcase *bc) {
  Caffe__LayerParameter p = nt_layer("bias", "Bias");
  caffe__bias_parameter__init(bp);
  if (bc->axis != UNSET) {
    bp->has_axis = 1;
    bp->axis = bc->axis;
  }
  if (bc->num_axes != UNSET) {
    bp->has_num_axes = 1;
    bp->num_axes = bc->num_axes;
  }
  g_gauss.type = "gaussian";
  bp->filler = &g_gauss;
  p.bias_param = bp;
  return p;
}

/* The operand's (first axis, ndim) within bottom 0, computed independently. */
static void operand_place(const ct_tensor *bottom, const ct_tensor *operand, int axis, int *first) {
  if (operand->ndim == 0) *first = 0;
  else *first = axis < 0 ? axis + bottom->ndim : axis;
}

/* Index into the operand of flat bottom index i. */
static size_t operand_index(const ct_tensor *bottom, const ct_tensor *operand, int first,
                            size_t i) {
  int idx[CT_MAX_AXES];
  size_t r = i;
  for (int a = bottom->ndim - 1; a >= 0; a--) {
    idx[a] = (int)(r % (size_t)bottom->shape[a]);
    r /= (size_t)bottom->shape[a];
  }
  size_t k = 0;
  for (int a = 0; a < operand->ndim; a++)
    k = k * (size_t)operand->shape[a] + (size_t)idx[first + a];
  return k;
}

/* ---------------------------------------------------------------- Scale */
static const bcase k_scale_cases[] = {
    {"2,3,4,5", UNSET, UNSET, false},  /* learned (C) */
    {"2,3,4,5", UNSET, UNSET, true},   /* with bias */
    {"2,3,4,5", 0, 0, true},           /* learned scalar */
    {"2,3,4,5", 2, -1, false},         /* learned (4, 5) */
    {"2,3,4,5", -3, 2, true},          /* learned (3, 4) */
    {"2,3,4,5; 3,4", UNSET, UNSET, false}, /* broadcast middle */
    {"2,3,4,5; 3,4", UNSET, UNSET, true},
    {"2,3,4,5; 2,3,4,5", 0, UNSET, false}, /* element-wise */
    {"2,3,4,5; 2,3", 0, UNSET, true},      /* broadcast begin */
    {"2,3,4,5; 4,5", 2, UNSET, false},     /* broadcast end */
    {"2,3,4,5; -", 2, UNSET, true},        /* scalar bottom: axis ignored */
    {"6; 6", 0, UNSET, false},
};
#define NSCALE (sizeof k_scale_cases / sizeof k_scale_cases[0])

static void test_scale_forward(void **state) {
  for (size_t k = 0; k < NSCALE; k++) {
    const bcase *bc = &k_scale_cases[k];
    Caffe__ScaleParameter sp;
    Caffe__LayerParameter p = scale_param(&sp, bc);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, bc->shapes, 1);
    int axis = bc->axis == UNSET ? 1 : bc->axis;
    const ct_tensor *b0 = c.bottom[0];
    const ct_tensor *sc = c.nb > 1 ? c.bottom[1] : c.l->params[0];
    /* Learned blobs in Caffe's order and shapes. */
    assert_int_equal(c.l->nparams, (c.nb == 1) + bc->bias_term);
    if (c.nb == 1) {
      int first = axis < 0 ? axis + b0->ndim : axis;
      int n = bc->num_axes == UNSET ? 1 : (bc->num_axes < 0 ? b0->ndim - first : bc->num_axes);
      assert_int_equal(sc->ndim, n);
      for (int a = 0; a < n; a++) assert_int_equal(sc->shape[a], b0->shape[first + a]);
    }
    const ct_tensor *bias = bc->bias_term ? c.l->params[c.l->nparams - 1] : NULL;
    if (bias) assert_int_equal(bias->ndim, sc->ndim);
    tu_forward(&c);
    int first, bfirst = 0;
    operand_place(b0, sc, axis, &first);
    if (bias) operand_place(b0, bias, axis, &bfirst);
    float *x = tu_values(b0), *s = tu_values(sc), *y = tu_values(c.top[0]);
    float *bv = bias ? tu_values(bias) : NULL;
    double *want = malloc(b0->count * sizeof(double));
    for (size_t i = 0; i < b0->count; i++) {
      want[i] = (double)x[i] * s[operand_index(b0, sc, first, i)];
      if (bias) want[i] += bv[operand_index(b0, bias, bfirst, i)];
    }
    nt_expect_close(bc->shapes, y, want, b0->count, 1e-6);
    free(want);
    free(x);
    free(s);
    free(y);
    free(bv);
    tu_layer_case_free(&c);
  }
}

static void test_scale_default_fillers(void **state) {
  Caffe__LayerParameter p = nt_layer("scale", "Scale");
  Caffe__ScaleParameter sp = CAFFE__SCALE_PARAMETER__INIT;
  sp.has_bias_term = 1;
  sp.bias_term = 1;
  p.scale_param = &sp;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4", 1);
  assert_int_equal(c.l->nparams, 2);
  float *s = tu_values(c.l->params[0]), *b = tu_values(c.l->params[1]);
  for (int i = 0; i < 3; i++) {
    assert_float_equal(s[i], 1.0f, 0);
    assert_float_equal(b[i], 0.0f, 0);
  }
  free(s);
  free(b);
  tu_layer_case_free(&c);
}

static void test_scale_gradient(void **state) {
  for (size_t k = 0; k < NSCALE; k++) {
    const bcase *bc = &k_scale_cases[k];
    Caffe__ScaleParameter sp;
    Caffe__LayerParameter p = scale_param(&sp, bc);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, bc->shapes, 1);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
    nt_check_in_place(&p, CT_PHASE_TRAIN, bc->shapes, NULL);
    if (!strchr(bc->shapes, ';') || bc->bias_term) nt_check_param_diffs_accumulate(&p, bc->shapes);
  }
}

/* Learned scale diffs accumulate; a bottom[1] scale's diff is written. */
static void test_scale_diff_accumulation(void **state) {
  for (int two = 0; two < 2; two++) {
    bcase bc = {two ? "1,2,2; 2" : "1,2,2", UNSET, UNSET, false};
    Caffe__ScaleParameter sp;
    Caffe__LayerParameter p = scale_param(&sp, &bc);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, bc.shapes, 1);
    const float x[4] = {1, 2, 3, 4}, dy[4] = {1, 1, 2, -1};
    tu_set_values(c.bottom[0], x);
    tu_forward(&c);
    ct_tensor_upload_diff(c.top[0], dy);
    ct_tensor *sc = two ? c.bottom[1] : c.l->params[0];
    ct_tensor_zero_diff(sc);
    bool prop[2] = {true, true};
    ct_layer_backward(c.l, c.top, prop, c.bottom);
    ct_layer_backward(c.l, c.top, prop, c.bottom);
    float ds[2];
    ct_tensor_download_diff(sc, ds);
    float k = two ? 1.0f : 2.0f;
    assert_float_equal(ds[0], k * 3.0f, 0);
    assert_float_equal(ds[1], k * 2.0f, 0);
    tu_layer_case_free(&c);
  }
}

static void expect_scale_error(const bcase *bc, const char *msg) {
  Caffe__ScaleParameter sp;
  Caffe__LayerParameter p = scale_param(&sp, bc);
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, bc->shapes, 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

static void test_scale_bad(void **state) {
  expect_scale_error(
      &(bcase){"2,3,4,5; 4,4", UNSET, UNSET, false},
      "layer 'scale' (Scale): dimension mismatch between bottom[0]->shape(1) = 3 and "
      "scale->shape(0) = 4");
  expect_scale_error(&(bcase){"2,3,4,5; 4,5,6", 2, UNSET, false},
                     "layer 'scale' (Scale): scale's 3 axes extend past bottom[0]'s 4 axes when "
                     "applied from axis 2");
  expect_scale_error(&(bcase){"2,3,4,5", 1, -2, false},
                     "layer 'scale' (Scale): scale_param.num_axes must be non-negative, or -1 to "
                     "extend to the end of bottom[0]; got -2");
  expect_scale_error(&(bcase){"2,3,4,5", 2, 3, false},
                     "layer 'scale' (Scale): scale_param.num_axes 3 from axis 2 extends past "
                     "bottom[0]'s 4 axes");
  expect_scale_error(&(bcase){"2,3,4,5", 4, UNSET, false},
                     "layer 'scale' (Scale): scale_param.axis: axis 4 out of range for a 4-axis "
                     "blob bottom0");
  expect_scale_error(&(bcase){"2,3,4,5; 3,4", -5, UNSET, false},
                     "layer 'scale' (Scale): axis -5 out of range for a 4-axis blob bottom0");
}

/* ---------------------------------------------------------------- Bias */
static const bcase k_bias_cases[] = {
    {"2,3,4,5", UNSET, UNSET, false},     {"2,3,4,5", 0, 0, false},
    {"2,3,4,5", 1, -1, false},            {"2,3,4,5", -1, 1, false},
    {"2,3,4,5; 3,4", UNSET, UNSET, false}, {"2,3,4,5; 2,3,4,5", 0, UNSET, false},
    {"2,3,4,5; 2", 0, UNSET, false},       {"2,3,4,5; -", 3, UNSET, false},
};
#define NBIAS (sizeof k_bias_cases / sizeof k_bias_cases[0])

static void test_bias_forward(void **state) {
  for (size_t k = 0; k < NBIAS; k++) {
    const bcase *bc = &k_bias_cases[k];
    Caffe__BiasParameter bp;
    Caffe__LayerParameter p = bias_param(&bp, bc);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, bc->shapes, 1);
    assert_int_equal(c.l->nparams, c.nb == 1);
    int axis = bc->axis == UNSET ? 1 : bc->axis;
    const ct_tensor *b0 = c.bottom[0], *op = c.nb > 1 ? c.bottom[1] : c.l->params[0];
    int first;
    operand_place(b0, op, axis, &first);
    tu_forward(&c);
    float *x = tu_values(b0), *b = tu_values(op), *y = tu_values(c.top[0]);
    double *want = malloc(b0->count * sizeof(double));
    for (size_t i = 0; i < b0->count; i++)
      want[i] = (double)x[i] + b[operand_index(b0, op, first, i)];
    nt_expect_close(bc->shapes, y, want, b0->count, 1e-6);
    free(want);
    free(x);
    free(b);
    free(y);
    tu_layer_case_free(&c);
  }
  /* The default filler is constant 0. */
  Caffe__LayerParameter p = nt_layer("bias", "Bias");
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3", 1);
  float *b = tu_values(c.l->params[0]);
  for (int i = 0; i < 3; i++) assert_float_equal(b[i], 0.0f, 0);
  free(b);
  tu_layer_case_free(&c);
}

static void test_bias_gradient(void **state) {
  for (size_t k = 0; k < NBIAS; k++) {
    const bcase *bc = &k_bias_cases[k];
    Caffe__BiasParameter bp;
    Caffe__LayerParameter p = bias_param(&bp, bc);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, bc->shapes, 1);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
    nt_check_in_place(&p, CT_PHASE_TRAIN, bc->shapes, NULL);
    if (!strchr(bc->shapes, ';')) nt_check_param_diffs_accumulate(&p, bc->shapes);
  }
}

static void test_bias_bad(void **state) {
  Caffe__BiasParameter bp;
  bcase bc = {"2,3,4,5; 3,5", UNSET, UNSET, false};
  Caffe__LayerParameter p = bias_param(&bp, &bc);
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, bc.shapes, 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'bias' (Bias): dimension mismatch between bottom[0]->shape(2) = 4 and "
                      "bias->shape(1) = 5");
  tu_layer_case_free(&c);
  bc = (bcase){"2,3", 1, 2, false};
  p = bias_param(&bp, &bc);
  assert_int_equal(tu_layer_case_try(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, bc.shapes, 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'bias' (Bias): bias_param.num_axes 2 from axis 1 extends past "
                      "bottom[0]'s 2 axes");
  tu_layer_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scale_forward),
      cmocka_unit_test(test_scale_default_fillers),
      cmocka_unit_test(test_scale_gradient),
      cmocka_unit_test(test_scale_diff_accumulation),
      cmocka_unit_test(test_scale_bad),
      cmocka_unit_test(test_bias_forward),
      cmocka_unit_test(test_bias_gradient),
      cmocka_unit_test(test_bias_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
