/* Pooling: hand-checked values of Caffe's rules, a loop reference in double
 * for MAX / AVE / global / padding / rounding cases, the argmax mask top,
 * STOCHASTIC, gradient checks and bad parameters. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "vision_cases.h"

#define NCASES (sizeof k_pool_cases / sizeof k_pool_cases[0])

/* Caffe's rules written out again, plainly, in double. */
static void reference(const pool_cfg *c, int N, int C, int H, int W, const float *x, double *y,
                      int *arg) {
  int kh = c->global ? H : c->kh, kw = c->global ? W : c->kw;
  for (int nc = 0; nc < N * C; nc++)
    for (int oh = 0; oh < c->out_h; oh++)
      for (int ow = 0; ow < c->out_w; ow++) {
        int hs = oh * c->sh - c->ph, ws = ow * c->sw - c->pw;
        int he = hs + kh, we = ws + kw;
        if (he > H + c->ph) he = H + c->ph;
        if (we > W + c->pw) we = W + c->pw;
        double divisor = (double)(he - hs) * (we - ws);
        double best = -FLT_MAX, sum = 0;
        int besti = -1;
        for (int h = hs; h < he; h++)
          for (int w = ws; w < we; w++) {
            if (h < 0 || w < 0 || h >= H || w >= W) continue;
            double v = x[(size_t)nc * H * W + h * W + w];
            sum += v;
            if (v > best) {
              best = v;
              besti = h * W + w;
            }
          }
        size_t o = ((size_t)nc * c->out_h + oh) * c->out_w + ow;
        y[o] = c->method == MAX ? best : sum / divisor;
        if (arg) arg[o] = besti;
      }
}

static void test_forward_cases(void **state) {
  for (size_t i = 0; i < NCASES; i++) {
    const pool_cfg *c = &k_pool_cases[i];
    pool_param st;
    pool_make_param(&st, c);
    tu_layer_case lc;
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, 1);
    tu_forward(&lc);
    const ct_tensor *b = lc.bottom[0], *t = lc.top[0];
    assert_int_equal(t->ndim, 4);
    assert_int_equal(t->shape[0], b->shape[0]);
    assert_int_equal(t->shape[1], b->shape[1]);
    if (t->shape[2] != c->out_h || t->shape[3] != c->out_w)
      fail_msg("%s: pooled %dx%d, want %dx%d", c->name, t->shape[2], t->shape[3], c->out_h,
               c->out_w);
    float *x = tu_values(b), *y = tu_values(t);
    double *ref = malloc(t->count * sizeof *ref);
    reference(c, b->shape[0], b->shape[1], b->shape[2], b->shape[3], x, ref, NULL);
    for (size_t k = 0; k < t->count; k++)
      if (fabs(y[k] - ref[k]) > 1e-6 * fmax(1.0, fabs(ref[k])))
        fail_msg("%s [%zu]: got %.8g, want %.8g", c->name, k, y[k], ref[k]);
    free(x);
    free(y);
    free(ref);
    tu_layer_case_free(&lc);
  }
}

/* Values worked out by hand: AVE 2x2 stride 1 pad 1 over [[1, 2], [3, 4]]
 * divides by 4 everywhere, padded positions included. */
static void test_ave_divisor_by_hand(void **state) {
  pool_cfg c = {"hand", "1,1,2,2", AVE, 2, 2, 1, 1, 1, 1, false, false, 3, 3};
  pool_param st;
  pool_make_param(&st, &c);
  tu_layer_case lc;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c.shape, 1);
  const float x[4] = {1, 2, 3, 4};
  tu_set_values(lc.bottom[0], x);
  tu_forward(&lc);
  const float want[9] = {0.25f, 0.75f, 0.5f, 1.0f, 2.5f, 1.5f, 0.75f, 1.75f, 1.0f};
  float *y = tu_values(lc.top[0]);
  assert_int_equal(lc.top[0]->count, 9);
  for (int i = 0; i < 9; i++) assert_float_equal(y[i], want[i], 1e-7);
  free(y);
  tu_layer_case_free(&lc);
}

/* MAX with two tops: the second is the argmax within each plane, and the
 * backward routes each top diff there. */
static void test_max_mask_top(void **state) {
  const pool_cfg *c = &k_pool_cases[1];
  pool_param st;
  pool_make_param(&st, c);
  tu_layer_case lc;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, 2);
  tu_forward(&lc);
  const ct_tensor *b = lc.bottom[0];
  size_t n = lc.top[0]->count;
  assert_true(ct_tensor_same_shape(lc.top[1], lc.top[0]));
  float *x = tu_values(b), *mask = tu_values(lc.top[1]);
  double *ref = malloc(n * sizeof *ref);
  int *arg = malloc(n * sizeof *arg);
  reference(c, b->shape[0], b->shape[1], b->shape[2], b->shape[3], x, ref, arg);
  for (size_t k = 0; k < n; k++) assert_int_equal((int)mask[k], arg[k]);
  float *dy = malloc(n * sizeof *dy);
  tu_fill_uniform(dy, n, -1, 1, 9);
  ct_tensor_upload_diff(lc.top[0], dy);
  bool prop = true;
  ct_layer_backward(lc.l, lc.top, &prop, lc.bottom);
  float *dx = malloc(b->count * sizeof *dx);
  ct_tensor_download_diff(b, dx);
  double *want = calloc(b->count, sizeof *want);
  size_t plane_out = (size_t)c->out_h * c->out_w, plane_in = (size_t)b->shape[2] * b->shape[3];
  for (size_t k = 0; k < n; k++) want[(k / plane_out) * plane_in + (size_t)arg[k]] += dy[k];
  for (size_t k = 0; k < b->count; k++) assert_float_equal(dx[k], want[k], 1e-6);
  free(x);
  free(mask);
  free(ref);
  free(arg);
  free(dy);
  free(dx);
  free(want);
  tu_layer_case_free(&lc);
}

/* Planes wide and many enough for the host kernels' groups of eight
 * outputs (full, partial) and for several threads, on values with many ties
 * (MAX: small integers, so the first maximum in (h, w) order must win):
 * tops, the mask top and bottom diffs against the reference. */
static const pool_cfg k_wide_cases[] = {
    /* ceil(16/2)+1 = 9, ceil(34/2)+1 = 18 */
    {"wide max 3x3 s2", "3,20,19,37", MAX, 3, 3, 2, 2, 0, 0, false, false, 9, 18},
    /* ceil(18/2)+1 = 10 (18 < 20), ceil(36/2)+1 = 19 (36 < 38) */
    {"wide ave 3x3 s2 pad 1", "3,20,19,37", AVE, 3, 3, 2, 2, 1, 1, false, false, 10, 19},
    {"wide max 3x3 s1 pad 1", "2,9,19,37", MAX, 3, 3, 1, 1, 1, 1, false, false, 19, 37},
    /* ceil(18/2)+1 = 10 (18 < 21), ceil(36/3)+1 = 13 (36 < 38) */
    {"wide ave 5x3 s(2,3) pad (2,1)", "2,9,19,37", AVE, 5, 3, 2, 3, 2, 1, false, false, 10, 13},
    {"LeNet max 2x2 s2", "4,20,24,24", MAX, 2, 2, 2, 2, 0, 0, false, false, 12, 12},
    /* floor(15/3)+1 = 6, floor(33/3)+1 = 12 */
    {"wide max 4x4 s3 floor", "2,9,19,37", MAX, 4, 4, 3, 3, 0, 0, false, true, 6, 12},
    {"ave global 9x11", "4,30,9,11", AVE, 0, 0, 1, 1, 0, 0, true, false, 1, 1},
};

static void check_wide(const pool_cfg *c) {
  pool_param st;
  pool_make_param(&st, c);
  tu_layer_case lc;
  const int ntop = c->method == MAX ? 2 : 1;
  tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, ntop);
  const ct_tensor *b = lc.bottom[0];
  if (c->method == MAX) {
    float *v = malloc(b->count * sizeof *v);
    for (size_t i = 0; i < b->count; i++) v[i] = (float)((i * 7919) % 4);
    tu_set_values(lc.bottom[0], v);
    free(v);
  }
  tu_forward(&lc);
  const size_t n = lc.top[0]->count;
  if (lc.top[0]->shape[2] != c->out_h || lc.top[0]->shape[3] != c->out_w)
    fail_msg("%s: pooled %dx%d, want %dx%d", c->name, lc.top[0]->shape[2], lc.top[0]->shape[3],
             c->out_h, c->out_w);
  float *x = tu_values(b), *y = tu_values(lc.top[0]);
  double *ref = malloc(n * sizeof *ref);
  int *arg = malloc(n * sizeof *arg);
  reference(c, b->shape[0], b->shape[1], b->shape[2], b->shape[3], x, ref, arg);
  for (size_t k = 0; k < n; k++)
    if (fabs(y[k] - ref[k]) > 1e-6 * fmax(1.0, fabs(ref[k])))
      fail_msg("%s [%zu]: got %.8g, want %.8g", c->name, k, y[k], ref[k]);
  if (c->method == MAX) {
    float *mask = tu_values(lc.top[1]);
    for (size_t k = 0; k < n; k++)
      if ((int)mask[k] != arg[k]) fail_msg("%s mask [%zu]: got %g, want %d", c->name, k, mask[k], arg[k]);
    free(mask);
  }
  float *dy = malloc(n * sizeof *dy), *dx = malloc(b->count * sizeof *dx);
  tu_fill_uniform(dy, n, -1, 1, 9);
  ct_tensor_upload_diff(lc.top[0], dy);
  bool prop = true;
  ct_layer_backward(lc.l, lc.top, &prop, lc.bottom);
  ct_tensor_download_diff(b, dx);
  /* The reference backward: MAX to the argmax, AVE spread over the window. */
  const int H = b->shape[2], W = b->shape[3];
  const int kh = c->global ? H : c->kh, kw = c->global ? W : c->kw;
  const size_t plane_out = (size_t)c->out_h * c->out_w, plane_in = (size_t)H * W;
  double *want = calloc(b->count, sizeof *want);
  for (size_t k = 0; k < n; k++) {
    const size_t base = (k / plane_out) * plane_in;
    if (c->method == MAX) {
      want[base + (size_t)arg[k]] += dy[k];
      continue;
    }
    const int oh = (int)(k % plane_out) / c->out_w, ow = (int)(k % plane_out) % c->out_w;
    int hs = oh * c->sh - c->ph, ws = ow * c->sw - c->pw, he = hs + kh, we = ws + kw;
    if (he > H + c->ph) he = H + c->ph;
    if (we > W + c->pw) we = W + c->pw;
    const double d = dy[k] / ((double)(he - hs) * (we - ws));
    for (int h = hs < 0 ? 0 : hs; h < (he < H ? he : H); h++)
      for (int w = ws < 0 ? 0 : ws; w < (we < W ? we : W); w++) want[base + (size_t)h * W + w] += d;
  }
  for (size_t k = 0; k < b->count; k++)
    if (fabs(dx[k] - want[k]) > 1e-5 * fmax(1.0, fabs(want[k])))
      fail_msg("%s dx [%zu]: got %.8g, want %.8g", c->name, k, dx[k], want[k]);
  free(want);
  free(dx);
  free(dy);
  free(arg);
  free(ref);
  free(y);
  free(x);
  tu_layer_case_free(&lc);
}

static void test_wide_planes(void **state) {
  for (size_t i = 0; i < sizeof k_wide_cases / sizeof k_wide_cases[0]; i++)
    check_wide(&k_wide_cases[i]);
}

static void test_gradients(void **state) {
  for (size_t i = 0; i < NCASES; i++) {
    const pool_cfg *c = &k_pool_cases[i];
    pool_param st;
    pool_make_param(&st, c);
    tu_layer_case lc;
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c->shape, 1);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    if (c->method == MAX) {  /* Caffe's choice for max pooling */
      o.step = 1e-4f;
      o.threshold = 1e-2f;
      distinct_values(lc.bottom[0]);
    } else {
      o.threshold = 1e-2f;
    }
    tu_check_gradient(&lc, &o);
    tu_layer_case_free(&lc);
  }
}

/* STOCHASTIC in train picks one value of each window (with positive inputs,
 * never outside it); in test it is sum(x^2) / sum(x). */
static void test_stochastic(void **state) {
  pool_cfg c = {"sto", "2,3,6,5", STO, 3, 3, 2, 2, 0, 0, false, false, 3, 2};
  pool_param st;
  pool_make_param(&st, &c);
  for (int phase = 0; phase < 2; phase++) {
    tu_layer_case lc;
    tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, phase ? CT_PHASE_TEST : CT_PHASE_TRAIN,
                       c.shape, 1);
    tu_fill(lc.bottom[0], 0.1f, 1.0f, 31);
    tu_forward(&lc);
    const ct_tensor *b = lc.bottom[0];
    int H = b->shape[2], W = b->shape[3];
    float *x = tu_values(b), *y = tu_values(lc.top[0]);
    int distinct_picks = 0;
    for (int nc = 0; nc < 6; nc++)
      for (int oh = 0; oh < 3; oh++)
        for (int ow = 0; ow < 2; ow++) {
          int hs = oh * 2, ws = ow * 2, he = hs + 3 < H ? hs + 3 : H, we = ws + 3 < W ? ws + 3 : W;
          double s1 = 0, s2 = 0;
          bool found = false;
          float got = y[(nc * 3 + oh) * 2 + ow];
          for (int h = hs; h < he; h++)
            for (int w = ws; w < we; w++) {
              float v = x[nc * H * W + h * W + w];
              s1 += v;
              s2 += (double)v * v;
              found = found || v == got;
            }
          if (phase == 0) {
            assert_true(found);
            distinct_picks += got != x[nc * H * W + hs * W + ws];
          } else {
            assert_float_equal(got, s2 / s1, 1e-5);
          }
        }
    if (phase == 0) assert_true(distinct_picks > 0);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.step = 1e-4f;
    o.threshold = 1e-2f;
    tu_check_gradient(&lc, &o);
    free(x);
    free(y);
    tu_layer_case_free(&lc);
  }
}

/* ---------------------------------------------------------------- SPP */

typedef struct spp_param_st {
  Caffe__LayerParameter lp;
  Caffe__SPPParameter sp;
} spp_param_st;

static void make_spp(spp_param_st *st, int height, int method) {
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__SPPParameter sp = CAFFE__SPPPARAMETER__INIT;
  st->lp = lp;
  st->sp = sp;
  st->lp.name = "spp";
  st->lp.type = "SPP";
  st->lp.spp_param = &st->sp;
  st->sp.has_pyramid_height = 1;
  st->sp.pyramid_height = (uint32_t)height;
  st->sp.has_pool = 1;
  st->sp.pool = method;
}

/* Caffe's pooled size (CEIL), with the last-window rule. */
static int pooled(int in, int k, int pad, int stride) {
  int out = (int)ceil((double)(in + 2 * pad - k) / stride) + 1;
  if (pad && (out - 1) * stride >= in + pad) out--;
  return out;
}

/* Level i of an H x W map: kernel ceil(H / 2^i), pad half the shortfall. */
static pool_cfg spp_level(int i, int method, int H, int W) {
  int bins = 1 << i;
  int kh = (H + bins - 1) / bins, kw = (W + bins - 1) / bins;
  int ph = (kh * bins - H + 1) / 2, pw = (kw * bins - W + 1) / 2;
  pool_cfg c = {"level", "", method, kh, kw, kh, kw, ph, pw, false, false,
                pooled(H, kh, ph, kh), pooled(W, kw, pw, kw)};
  return c;
}

static void test_spp(void **state) {
  const int N = 2, C = 3, H = 8, W = 6;
  for (int m = 0; m < 2; m++) {
    int method = m ? AVE : MAX;
    for (int height = 1; height <= 3; height++) {
      spp_param_st st;
      make_spp(&st, height, method);
      tu_layer_case lc;
      tu_layer_case_init(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,8,6", 1);
      tu_forward(&lc);
      float *x = tu_values(lc.bottom[0]), *y = tu_values(lc.top[0]);
      size_t row = 0;
      for (int i = 0; i < height; i++) {
        pool_cfg c = spp_level(i, method, H, W);
        size_t block = (size_t)C * c.out_h * c.out_w;
        double *ref = malloc(N * block * sizeof *ref);
        reference(&c, N, C, H, W, x, ref, NULL);
        size_t total = height == 1 ? block : 0;
        if (height > 1)
          for (int j = 0; j < height; j++) {
            pool_cfg cj = spp_level(j, method, H, W);
            total += (size_t)C * cj.out_h * cj.out_w;
          }
        for (int n = 0; n < N; n++)
          for (size_t k = 0; k < block; k++)
            assert_float_equal(y[n * total + row + k], ref[n * block + k], 1e-6);
        if (height == 1) {
          assert_int_equal(lc.top[0]->ndim, 4);
          assert_int_equal(lc.top[0]->shape[2], 1);
          assert_int_equal(lc.top[0]->shape[3], 1);
        } else {
          assert_int_equal(lc.top[0]->ndim, 2);
          assert_int_equal(lc.top[0]->shape[1], (int)total);
        }
        row += block;
        free(ref);
      }
      /* 3 levels of an 8x6 map: 1x1, 2x2 and 4x4 bins. */
      if (height == 3) assert_int_equal(lc.top[0]->shape[1], C * (1 + 4 + 16));
      ct_gradcheck_opts o = ct_gradcheck_defaults();
      o.threshold = 1e-2f;
      if (method == MAX) {
        o.step = 1e-4f;
        distinct_values(lc.bottom[0]);
      }
      tu_check_gradient(&lc, &o);
      free(x);
      free(y);
      tu_layer_case_free(&lc);
    }
  }
}

static void test_spp_bad(void **state) {
  spp_param_st st;
  make_spp(&st, 0, MAX);
  tu_layer_case lc;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,8,6", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'spp' (SPP): spp_param.pyramid_height must be 1 to 24 (got 0)");
  tu_layer_case_free(&lc);
  /* 5 rows in 4 bins: kernel 2, pad 2, which Caffe's pooling refuses. */
  make_spp(&st, 3, MAX);
  assert_int_equal(tu_layer_case_try(&lc, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,5,8", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'spp' (SPP): pyramid level 2: layer 'spp/level2' (Pooling): "
                               "pooling_param: pad (2, 0) must be smaller than the kernel (2, 2)");
  tu_layer_case_free(&lc);
}

static void expect_error(pool_param *st, const char *shape, int ntop, const char *msg) {
  tu_layer_case lc;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&lc, &st->lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, ntop, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&lc);
}

static void test_bad_params(void **state) {
  pool_param st;
  pool_make_param(&st, &k_pool_cases[0]);
  st.pp.has_kernel_size = 0;
  expect_error(&st, "2,3,6,5", 1,
               "layer 'pool' (Pooling): pooling_param.kernel_size must be given (or both "
               "kernel_h and kernel_w)");
  pool_make_param(&st, &k_pool_cases[0]);
  st.pp.has_kernel_h = 1;
  st.pp.kernel_h = 2;
  expect_error(&st, "2,3,6,5", 1,
               "layer 'pool' (Pooling): pooling_param: give either kernel_size or kernel_h and "
               "kernel_w, not both");
  pool_make_param(&st, &k_pool_cases[1]);
  st.pp.pad = 3;
  expect_error(&st, "2,3,6,5", 1,
               "layer 'pool' (Pooling): pooling_param: pad (3, 3) must be smaller than the "
               "kernel (3, 3)");
  pool_make_param(&st, &k_pool_cases[10]);
  st.pp.has_kernel_size = 1;
  st.pp.kernel_size = 2;
  expect_error(&st, "2,3,6,5", 1,
               "layer 'pool' (Pooling): pooling_param: kernel_size, kernel_h and kernel_w "
               "cannot be given with global_pooling");
  pool_make_param(&st, &k_pool_cases[5]);
  expect_error(&st, "2,3,6,5", 2,
               "layer 'pool' (Pooling): pooling_param: only MAX pooling has a second top (the "
               "argmax mask)");
  pool_make_param(&st, &k_pool_cases[0]);
  expect_error(&st, "2,3,6", 1,
               "layer 'pool' (Pooling): the bottom must have 4 axes (num, channels, height, "
               "width), got 2 3 6 (36)");
  pool_make_param(&st, &k_pool_cases[0]);
  expect_error(&st, "2,3,1,5", 1,
               "layer 'pool' (Pooling): the 3x3 kernel does not fit the 1x5 input with pad (0, 0)");
  pool_make_param(&st, &k_pool_cases[0]);
  st.pp.has_pad_h = 1;
  st.pp.pad_h = 1;
  expect_error(&st, "2,3,6,5", 1,
               "layer 'pool' (Pooling): pooling_param: give either pad or both pad_h and pad_w");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_cases), cmocka_unit_test(test_ave_divisor_by_hand),
      cmocka_unit_test(test_max_mask_top),  cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_stochastic),    cmocka_unit_test(test_bad_params),
      cmocka_unit_test(test_spp),           cmocka_unit_test(test_spp_bad),
      cmocka_unit_test(test_wide_planes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
