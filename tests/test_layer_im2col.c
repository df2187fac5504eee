/* Im2col on the CPU: every case of im2col_cases.h against a direct
 * evaluation of Caffe's column layout, gradient checks, and the settings
 * Caffe refuses. */
#include <stdio.h>

#include "im2col_cases.h"

/* The value sample i of the bottom gives row r (channel c, kernel offset
 * k...), column o... of the top, straight from the definition. */
static void check_forward(const ic_case *ic) {
  ic_param p;
  ic_make(&p, ic);
  tu_layer_case c;
  tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, ic->shape, 1);
  tu_forward(&c);
  const ct_tensor *b = c.bottom[0], *t = c.top[0];
  const int axis = ic->axis, ns = b->ndim - axis - 1, C = b->shape[axis];
  int kernel[3], stride[3], pad[3], dil[3], in[3], out[3];
  size_t K = 1, O = 1, I = 1;
  for (int d = 0; d < ns; d++) {
    kernel[d] = ic->nk ? ic->kernel[ic->nk == 1 ? 0 : d] : (d == 0 ? ic->kh : ic->kw);
    stride[d] = ic->ns ? ic->stride[ic->ns == 1 ? 0 : d] : 1;
    pad[d] = ic->np ? ic->pad[ic->np == 1 ? 0 : d] : 0;
    dil[d] = ic->nd ? ic->dilation[ic->nd == 1 ? 0 : d] : 1;
    in[d] = b->shape[axis + 1 + d];
    out[d] = (in[d] + 2 * pad[d] - (dil[d] * (kernel[d] - 1) + 1)) / stride[d] + 1;
    assert_int_equal(t->shape[axis + 1 + d], out[d]);
    K *= (size_t)kernel[d];
    O *= (size_t)out[d];
    I *= (size_t)in[d];
  }
  assert_int_equal(t->ndim, b->ndim);
  assert_int_equal(t->shape[axis], C * (int)K);
  const size_t num = ct_tensor_count_range(b, 0, axis);
  float *x = tu_values(b), *y = tu_values(t);
  for (size_t n = 0; n < num; n++)
    for (int ch = 0; ch < C; ch++)
      for (size_t k = 0; k < K; k++)
        for (size_t o = 0; o < O; o++) {
          size_t kr = k, orem = o, src = 0;
          bool inside = true;
          for (int d = ns - 1; d >= 0; d--) {
            const int kd = (int)(kr % (size_t)kernel[d]), od = (int)(orem % (size_t)out[d]);
            kr /= (size_t)kernel[d];
            orem /= (size_t)out[d];
            const int pos = od * stride[d] - pad[d] + kd * dil[d];
            if (pos < 0 || pos >= in[d]) inside = false;
            size_t step = 1;
            for (int e = d + 1; e < ns; e++) step *= (size_t)in[e];
            src += (size_t)(inside ? pos : 0) * step;
          }
          const float want = inside ? x[(n * C + (size_t)ch) * I + src] : 0.0f;
          const float got = y[((n * C + (size_t)ch) * K + k) * O + o];
          if (got != want)
            fail_msg("case %s axis %d: item %zu channel %d kernel %zu column %zu: %g, want %g",
                     ic->shape, axis, n, ch, k, o, (double)got, (double)want);
        }
  free(x);
  free(y);
  tu_layer_case_free(&c);
}

static void test_forward(void **state) {
  for (size_t i = 0; i < sizeof k_ic_cases / sizeof k_ic_cases[0]; i++) check_forward(&k_ic_cases[i]);
}

static void test_gradient(void **state) {
  for (size_t i = 0; i < sizeof k_ic_cases / sizeof k_ic_cases[0]; i++) {
    ic_param p;
    ic_make(&p, &k_ic_cases[i]);
    tu_layer_case c;
    tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, k_ic_cases[i].shape, 1);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

static void expect_error(ic_param *p, const char *shape, const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p->lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

static void test_errors(void **state) {
  ic_param p;
  ic_make(&p, &k_ic_cases[0]);
  p.cp.n_kernel_size = 0;
  expect_error(&p, "2,3,6,5",
               "layer 'im2col' (Im2col): convolution_param.kernel_size must be given (or "
               "kernel_h and kernel_w)");
  ic_make(&p, &k_ic_cases[0]);
  expect_error(&p, "2,3", "layer 'im2col' (Im2col): the bottom needs at least one spatial axis "
                          "after the channel axis 1");
  ic_make(&p, &k_ic_cases[0]);
  expect_error(&p, "2,3,2,5",
               "layer 'im2col' (Im2col): output size 0 along spatial axis 0 is not positive "
               "(input 2, kernel extent 3, pad 0, stride 1)");
  /* num_output, group and bias are not Im2col's business (as in Caffe) */
  ic_make(&p, &k_ic_cases[0]);
  p.cp.has_num_output = 1;
  p.cp.num_output = 7;
  p.cp.has_group = 1;
  p.cp.group = 2;
  tu_layer_case c;
  tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,6,5", 1);
  assert_int_equal(c.top[0]->shape[1], 27);
  assert_int_equal(c.l->nparams, 0);
  tu_layer_case_free(&c);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward),
      cmocka_unit_test(test_gradient),
      cmocka_unit_test(test_errors),
  };
  tu_filter_tests(argc, argv);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
