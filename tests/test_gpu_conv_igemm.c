/* Cortado's implicit-GEMM convolution kernels (layers/conv/conv_igemm.h), forced
 * in every direction they can run (CT_IGEMM_FORCE): forward, backward data
 * and backward filter against the CPU in strict FP32, and through the
 * gradient checker, on the vision tests' 2-D group-1 cases and on shapes
 * that reach the kernels' edges (partial tiles in every dimension, a
 * reduction length that is not a multiple of the step, several channel
 * tiles, split filter-gradient sums, stride 2, dilation, rectangles); the
 * layer must say that it runs them, and a strict FP32 layer never a TF32
 * configuration.  Deconvolution and groups stay on cuDNN.  Then every
 * configuration of every direction called directly (register-prefetch
 * FP32, TF32 at a looser tolerance, pipelined FP32, Winograd) against a CPU
 * reference in double on cifar10_quick's shapes and the edge shapes, each
 * run twice for the same bits (and each family alone, in short runs for
 * compute-sanitizer); a strict plan times every FP32
 * configuration and never a TF32 one; and the layer in TF32 math.  Exits
 * 77 (skipped) without a GPU. */
#include <stdio.h>
#include <string.h>

#include "cudnntest.h"
#include "layers/conv/conv_common.h"
#ifdef CORTADO_HAVE_CUDA
#include "gpu/gpu.h"
#include "layers/conv/conv_cudnn.h"
#include "layers/conv/conv_igemm.h"
#endif
#include "vision_cases.h"

#define TOL 1e-4
#define TF32_TOL 3e-3 /* TF32 rounds the inputs to 10-bit mantissas */

#ifdef CORTADO_HAVE_CUDA
/* Whether each direction's description names the kernels, as expected, in
 * the math given: strict FP32 shows no TF32 configuration and no star; a
 * TF32 configuration always carries its star. */
static void expect_igemm_math(const conv_param *st, const char *shape, bool fwd, bool data,
                              bool filter, bool tf32) {
  tu_layer_case lc;
  cd_gpu_case(&lc, &st->lp, CT_PHASE_TRAIN, shape, 1, tf32, false);
  char buf[256];
  ct_conv_cudnn_describe(lc.l, buf, sizeof buf);
  const char *d = strstr(buf, "bwd-data"), *f = strstr(buf, "bwd-filter");
  assert_non_null(d);
  assert_non_null(f);
  const char *seg[3] = {buf, d, f}, *end[3] = {d, f, buf + strlen(buf)};
  const bool want[3] = {fwd, data, filter};
  for (int i = 0; i < 3; i++) {
    const char *ig = strstr(seg[i], "IGEMM"), *t = strstr(seg[i], "IGEMM_TF32_");
    const char *star = strchr(seg[i], '*');
    if ((ig != NULL && ig < end[i]) != want[i])
      fail_msg("%s %s: '%s', direction %d", st->lp.type, shape, buf, i);
    if (!tf32 && ((t && t < end[i]) || (star && star < end[i])))
      fail_msg("%s %s: strict FP32 but '%s', direction %d", st->lp.type, shape, buf, i);
    if (t && t < end[i] && !(star && star < end[i]))
      fail_msg("%s %s: a TF32 configuration without its star in '%s'", st->lp.type, shape, buf);
  }
  printf("%-8s %-14s %s %s\n", st->lp.type, shape, tf32 ? "tf32" : "fp32", buf);
  tu_layer_case_free(&lc);
}

static void expect_igemm(const conv_param *st, const char *shape, bool fwd, bool data,
                         bool filter) {
  expect_igemm_math(st, shape, fwd, data, filter, false);
}

static void check(const conv_cfg *c, bool gradient) {
  conv_param st;
  conv_make_param(&st, c, "Convolution");
  const int nsp = c->nsp;
  const bool unit_stride = c->s[3 - nsp + 0] == 1 && c->s[2] == 1;
  expect_igemm(&st, c->shape, true, unit_stride, true);
  cd_compare3(&st.lp, CT_PHASE_TRAIN, c->shape, 1, CD_CUDNN, false, TOL, NULL);
  if (gradient) {
    /* A convolution is linear in its bottom and its weights: a central
     * difference is exact at any step, and a longer step divides the
     * forward's rounding by more.  At the default 1e-2, a Winograd
     * forward's rounding (a few 1e-7 of the largest output) came out of
     * the difference at about 1e-3, the threshold. */
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.step = 1e-1f;
    cd_gradient(&st.lp, CT_PHASE_TRAIN, c->shape, CD_CUDNN, &o, NULL);
  }
}

/* The vision tests' 2-D and 1-D cases with one group. */
static void test_vision_cases(void **state) {
  const size_t n = sizeof k_conv_cases / sizeof k_conv_cases[0];
  int ran = 0;
  for (size_t i = 0; i < n; i++) {
    const conv_cfg *c = &k_conv_cases[i];
    if (c->group != 1 || c->nsp > 2) continue;
    check(c, true);
    ran++;
  }
  assert_true(ran >= 4);
}

/* Shapes at the kernels' edges (see the top of the file). */
static void test_edges(void **state) {
  const conv_cfg cases[] = {
      /* cifar10_quick's 5x5 pad 2, small */
      {"5x5 pad 2", "3,5,12,10", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 12, true},
      /* 70 outputs: two tiles of 64 rows; K = 180 */
      {"70 outputs", "2,20,6,5", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, 70, true},
      /* 25600 columns: the filter gradient's sum split among blocks */
      {"split sums", "64,3,20,20", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 8, true},
      /* stride 2, a rectangular kernel, unequal pads: backward data stays on cuDNN */
      {"stride 2", "3,4,11,9", 1, 2, {1, 4, 3}, {1, 2, 1}, {0, 1, 2}, {1, 1, 1}, 1, 5, true,
       false, true},
      /* dilation with a rectangle, no bias */
      {"dilated", "2,3,8,13", 1, 2, {1, 3, 5}, {1, 1, 1}, {0, 0, 2}, {1, 2, 1}, 1, 6, false},
      /* cifar10_quick's conv2 at batch 10 */
      {"cifar conv2", "10,32,16,16", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 32,
       true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check(&cases[i], i == 0 || i == 3 || i == 4);
}

/* Deconvolution and groups stay on cuDNN whatever the mode. */
static void test_not_for_others(void **state) {
  conv_cfg c = k_conv_cases[0];
  conv_param st;
  conv_make_param(&st, &c, "Deconvolution");
  expect_igemm(&st, c.shape, false, false, false);
  conv_cfg g = k_conv_cases[1];
  conv_make_param(&st, &g, "Convolution");
  expect_igemm(&st, g.shape, false, false, false);
}

/* The ReLU fused into the forward's epilogue (net_fuse.c's absorb): the
 * layer's top is max(conv + bias, 0) on the GPU. */
static void test_fused_relu(void **state) {
  conv_cfg c = {"fused", "4,6,9,9", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 10, true};
  conv_param st;
  conv_make_param(&st, &c, "Convolution");
  tu_layer_case cpu, gpu;
  tu_layer_case_init(&cpu, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c.shape, 1);
  cd_gpu_case(&gpu, &st.lp, CT_PHASE_TRAIN, c.shape, 1, false, false);
  bool backward_too = true;
  assert_true(ct_conv_cudnn_absorb_relu(gpu.l, true, &backward_too));
  assert_false(backward_too); /* a float32 layer: the ReLU keeps its backward */
  ct_tensor_copy_data(gpu.bottom[0], cpu.bottom[0]);
  for (int i = 0; i < cpu.l->nparams; i++) ct_tensor_copy_data(gpu.l->params[i], cpu.l->params[i]);
  tu_forward(&cpu);
  tu_forward(&gpu);
  const size_t n = cpu.top[0]->count;
  float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
  ct_tensor_download(cpu.top[0], want);
  ct_tensor_download(gpu.top[0], got);
  size_t negative = 0;
  for (size_t i = 0; i < n; i++) {
    const float r = want[i] > 0.0f ? want[i] : 0.0f;
    negative += want[i] < 0.0f;
    if (fabsf(got[i] - r) > TOL * (1.0f + fabsf(r)))
      fail_msg("fused ReLU value %zu: %g, want %g", i, got[i], r);
  }
  assert_true(negative > 0);
  free(want);
  free(got);
  tu_layer_case_free(&cpu);
  tu_layer_case_free(&gpu);
}

/* y (forward) and dx (backward for a fixed dy) of layer case g, in host
 * memory (free them); prepared first when prepare (with the bottom
 * gradient's transform when bottom_grad, which must then have work). */
static void run_layer(tu_layer_case *g, bool prepare, bool bottom_grad, const float *dy,
                      float **y, float **dx) {
  if (prepare) {
    const bool work = ct_layer_prepare_async(g->l, g->l->ctx, bottom_grad);
    if (bottom_grad) assert_true(work);
  }
  tu_forward(g);
  ct_tensor_upload_diff(g->top[0], dy);
  const bool down = true;
  ct_layer_backward(g->l, g->top, &down, g->bottom);
  *y = tu_values(g->top[0]);
  *dx = malloc(g->bottom[0]->count * sizeof(float));
  ct_tensor_download_diff(g->bottom[0], *dx);
}

static void expect_bits(const char *what, const float *a, const float *b, size_t n, bool same) {
  const bool equal = memcmp(a, b, n * sizeof(float)) == 0;
  if (equal != same) fail_msg("%s: %s", what, same ? "differ" : "are the same");
}

/* Winograd's filter transforms done ahead of the layer (ct_layer_prepare_async,
 * as a net does at a pass's start) give the bits of the transforms done in
 * the calls; a preparation feeds the next forward and the backward after it
 * only, so a forward without one, after the weights changed, and its
 * backward use the weights as they are. */
static void test_prepared_layer(void **state) {
  conv_cfg c = {"prepared", "10,32,16,16", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1,
                32, true};
  conv_param st;
  conv_make_param(&st, &c, "Convolution");
  tu_layer_case g;
  cd_gpu_case(&g, &st.lp, CT_PHASE_TRAIN, c.shape, 1, false, false);
  char algos[256];
  printf("%s\n", ct_conv_cudnn_describe(g.l, algos, sizeof algos));
  if (!ct_layer_prepare_async(g.l, NULL, true)) {
    /* the race picked no Winograd configuration here: nothing to prepare */
    printf("no Winograd configuration chosen: nothing prepared\n");
    tu_layer_case_free(&g);
    return;
  }
  const size_t ny = g.top[0]->count, nx = g.bottom[0]->count, nw = g.l->params[0]->count;
  float *dy = malloc(ny * sizeof(float)), *w = malloc(nw * sizeof(float));
  tu_fill(g.bottom[0], -1.0f, 1.0f, 41);
  for (size_t i = 0; i < ny; i++) dy[i] = (float)((i * 7919) % 201) / 100.0f - 1.0f;
  float *y0, *dx0, *y1, *dx1, *y2, *dx2, *y3, *dx3;
  run_layer(&g, false, true, dy, &y0, &dx0);
  run_layer(&g, true, true, dy, &y1, &dx1);
  expect_bits("prepared forward", y0, y1, ny, true);
  expect_bits("prepared backward data", dx0, dx1, nx, true);
  /* prepared, then new weights and a pass without a preparation */
  assert_true(ct_layer_prepare_async(g.l, g.l->ctx, true));
  tu_forward(&g);
  ct_tensor_download(g.l->params[0], w);
  for (size_t i = 0; i < nw; i++) w[i] = -2.0f * w[i];
  ct_tensor_upload(g.l->params[0], w);
  run_layer(&g, false, true, dy, &y2, &dx2); /* the preparation above fed its forward only */
  run_layer(&g, false, true, dy, &y3, &dx3);
  expect_bits("forward after new weights", y2, y0, ny, false);
  expect_bits("forward after new weights, again", y2, y3, ny, true);
  expect_bits("backward data after new weights", dx2, dx0, nx, false);
  expect_bits("backward data after new weights, again", dx2, dx3, nx, true);
  /* prepared without the bottom gradient's transform (a net's first
   * layer): the backward must not take the one left from the old weights */
  float *y4, *dx4;
  run_layer(&g, true, false, dy, &y4, &dx4);
  expect_bits("forward prepared without backward data", y4, y2, ny, true);
  expect_bits("backward data not prepared", dx4, dx2, nx, true);
  free(y4), free(dx4);
  free(y0), free(dx0), free(y1), free(dx1), free(y2), free(dx2), free(y3), free(dx3);
  free(dy), free(w);
  tu_layer_case_free(&g);
}

/* ---------------------------------------------------------------- the kernels called directly */

static ct_igemm_geom geom(int n, int c, int h, int w, int m, int kh, int kw, int sh, int sw,
                          int ph, int pw, int dh, int dw) {
  ct_igemm_geom g = {n, c, h, w, m, (h + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1,
                     (w + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1, kh, kw, sh, sw, ph, pw, dh, dw};
  return g;
}

/* The input position of output (oy, ox) at tap (ky, kx), or false outside. */
static bool tap(const ct_igemm_geom *g, int oy, int ox, int ky, int kx, int *iy, int *ix) {
  *iy = oy * g->sh - g->ph + ky * g->dh;
  *ix = ox * g->sw - g->pw + kx * g->dw;
  return *iy >= 0 && *iy < g->h && *ix >= 0 && *ix < g->w;
}

#define FOR_EACH_TAP(g, i, m, oy, ox, c, ky, kx)         \
  for (int i = 0; i < (g)->n; i++)                       \
    for (int m = 0; m < (g)->m; m++)                     \
      for (int oy = 0; oy < (g)->oh; oy++)               \
        for (int ox = 0; ox < (g)->ow; ox++)             \
          for (int c = 0; c < (g)->c; c++)               \
            for (int ky = 0; ky < (g)->kh; ky++)         \
              for (int kx = 0; kx < (g)->kw; kx++)

/* The three directions in double on the host: y = conv(x, w) (+ bias, then
 * ReLU), dx = conv^T(dy, w), dw = dw0 + the weight gradient. */
typedef struct reference {
  float *y, *y_plain, *dx, *dw;
} reference;

static void reference_make(const ct_igemm_geom *g, const float *x, const float *w,
                           const float *bias, const float *dy, const float *dw0, reference *r) {
  const size_t ny = (size_t)g->n * g->m * g->oh * g->ow, nx = (size_t)g->n * g->c * g->h * g->w;
  const size_t nw = (size_t)g->m * g->c * g->kh * g->kw;
  double *y = calloc(ny, sizeof *y), *dx = calloc(nx, sizeof *dx), *dw = calloc(nw, sizeof *dw);
  FOR_EACH_TAP(g, i, m, oy, ox, c, ky, kx) {
    int iy, ix;
    if (!tap(g, oy, ox, ky, kx, &iy, &ix)) continue;
    const size_t yi = (((size_t)i * g->m + m) * g->oh + oy) * g->ow + ox;
    const size_t xi = (((size_t)i * g->c + c) * g->h + iy) * g->w + ix;
    const size_t wi = (((size_t)m * g->c + c) * g->kh + ky) * g->kw + kx;
    y[yi] += (double)w[wi] * x[xi];
    dx[xi] += (double)w[wi] * dy[yi];
    dw[wi] += (double)dy[yi] * x[xi];
  }
  r->y = malloc(ny * sizeof(float));
  r->y_plain = malloc(ny * sizeof(float));
  r->dx = malloc(nx * sizeof(float));
  r->dw = malloc(nw * sizeof(float));
  for (size_t k = 0; k < ny; k++) {
    const double v = y[k] + bias[k / (g->oh * g->ow) % g->m];
    r->y[k] = (float)(v > 0.0 ? v : 0.0);
    r->y_plain[k] = (float)y[k];
  }
  for (size_t k = 0; k < nx; k++) r->dx[k] = (float)dx[k];
  for (size_t k = 0; k < nw; k++) r->dw[k] = (float)(dw0[k] + dw[k]);
  free(y);
  free(dx);
  free(dw);
}

static void reference_free(reference *r) {
  free(r->y);
  free(r->y_plain);
  free(r->dx);
  free(r->dw);
}

/* A device copy of n host floats. */
static float *upload(const float *h, size_t n) {
  float *d = ct_gpu_malloc(0, n * sizeof(float));
  ct_gpu_memcpy(0, d, CT_DEVICE_CPU, h, n * sizeof(float));
  return d;
}

/* One run's result against want: within tol of the largest value, and (for
 * a second run) the same bits as `first`. */
static void expect_result(const char *what, const float *dev, size_t n, const float *want,
                          double tol, float *got, const float *first) {
  ct_gpu_memcpy(CT_DEVICE_CPU, got, 0, dev, n * sizeof(float));
  const double e = cd_err(got, want, n);
  if (!(e <= tol)) fail_msg("%s: error %g relative to the largest value > %g", what, e, tol);
  if (first && memcmp(got, first, n * sizeof(float)) != 0)
    fail_msg("%s: a second run gave other bits", what);
}

/* The most workspace any configuration of any direction of p needs. */
static size_t most_workspace(const ct_igemm *p) {
  size_t most = 0;
  for (int dir = 0; dir < 3; dir++) {
    const ct_igemm_dir d = (ct_igemm_dir)dir;
    const int n = d == CT_IGEMM_BWD_FILTER ? CT_IGEMM_WGRAD_CONFIGS : CT_IGEMM_GEMM_CONFIGS;
    for (int c = 1; c <= n; c++) {
      const size_t bytes = ct_igemm_workspace(p, d, c);
      if (bytes > most) most = bytes;
    }
  }
  return most;
}

/* A convolution for the direct checks, and its name in their lines. */
typedef struct named_geom {
  const char *name;
  ct_igemm_geom g;
} named_geom;

/* The family of a configuration's name: "TF32", "PIPE", "WINO", "DIRECT" or
 * "FDIRECT" after "IGEMM_", else "FP32" (the register-prefetch ones, e.g.
 * "IGEMM_32x64x1"). */
static const char *family(const char *cname) {
  static const char *const named[] = {"TF32", "PIPE", "WINO", "DIRECT", "FDIRECT"};
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
    if (!strncmp(cname + 6, named[i], strlen(named[i]))) return named[i];
  return "FP32";
}

/* Every configuration of every direction that g supports (only those of
 * family `only`, unless NULL), on a TF32 plan, against the reference,
 * twice for the same bits. */
static void check_direct(const char *name, const ct_igemm_geom *g, const char *only) {
  ct_context ctx;
  ct_error err;
  if (ct_context_init(&ctx, 0, 5, &err) != CT_OK) fail_msg("%s", err.msg);
  const size_t ny = (size_t)g->n * g->m * g->oh * g->ow, nx = (size_t)g->n * g->c * g->h * g->w;
  const size_t nw = (size_t)g->m * g->c * g->kh * g->kw;
  float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
  float *b = malloc(g->m * sizeof(float)), *dy = malloc(ny * sizeof(float));
  float *dw0 = malloc(nw * sizeof(float));
  tu_fill_uniform(x, nx, -1.0f, 1.0f, 31);
  tu_fill_uniform(w, nw, -0.5f, 0.5f, 32);
  tu_fill_uniform(b, g->m, -1.0f, 1.0f, 33);
  tu_fill_uniform(dy, ny, -1.0f, 1.0f, 34);
  tu_fill_uniform(dw0, nw, -1.0f, 1.0f, 35);
  reference r;
  reference_make(g, x, w, b, dy, dw0, &r);
  float *x_dev = upload(x, nx), *w_dev = upload(w, nw), *b_dev = upload(b, g->m);
  float *dy_dev = upload(dy, ny);
  /* the kernels' outputs: y, dx and dw on the device */
  float *out_y = ct_gpu_malloc(0, ny * sizeof(float));
  float *out_x = ct_gpu_malloc(0, nx * sizeof(float));
  float *out_w = ct_gpu_malloc(0, nw * sizeof(float));
  size_t big = ny > nx ? ny : nx;
  big = big > nw ? big : nw;
  float *got = malloc(big * sizeof(float)), *first = malloc(big * sizeof(float));
  ct_igemm *p = ct_igemm_new(&ctx, g, true);
  const size_t ws_bytes = most_workspace(p);
  float *ws = ct_gpu_malloc(0, ws_bytes ? ws_bytes : 4);
  /* a prepared configuration's second run takes its weight-only work from
   * here, done ahead by ct_igemm_prepare (the first run does it in the call) */
  float *prep = ct_gpu_malloc(0, ws_bytes ? ws_bytes : 4);
  int ran_prepared = 0;
  const bool data = !ct_igemm_unsupported(g, CT_IGEMM_BWD_DATA);
  /* the Winograd configurations run 5x5 stride-1 forwards and data gradients */
  const bool wino = g->kh == 5 && g->kw == 5 && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
                    g->dw == 1 && g->ph <= 4 && g->pw <= 4;
  /* the direct filter gradients run 5x5 stride-1 ones; all of them where
   * the output rows are at most 8 wide */
  const bool direct = g->kh == 5 && g->kw == 5 && g->sh == 1 && g->sw == 1 && g->dh == 1 &&
                      g->dw == 1;
  /* the direct forward runs 5x5 stride-1 ones with at most 4 input
   * channels and rows of at most 32 outputs */
  const bool fdirect = direct && g->c <= 4 && g->ow <= 32;
  int ran = 0, ran_wino = 0, ran_direct = 0, ran_fdirect = 0;
  char what[160], cname[48];
  for (int dir = 0; dir < 3; dir++) {
    const ct_igemm_dir d = (ct_igemm_dir)dir;
    if (d == CT_IGEMM_BWD_DATA && !data) continue;
    const int n = d == CT_IGEMM_BWD_FILTER ? CT_IGEMM_WGRAD_CONFIGS : CT_IGEMM_GEMM_CONFIGS;
    for (int c = 1; c <= n; c++) {
      if (!ct_igemm_choice_runs(p, d, c)) continue;
      ct_igemm_choice_name(d, c, cname, sizeof cname);
      if (only && strcmp(family(cname), only) != 0) continue;
      const bool tf32 = ct_igemm_choice_tf32(d, c);
      const double tol = tf32 ? TF32_TOL : TOL;
      snprintf(what, sizeof what, "%s direction %d %s", name, dir,
               ct_igemm_choice_name(d, c, cname, sizeof cname));
      for (int run = 0; run < 2; run++) {
        const float *same = run ? first : NULL;
        float *keep = run ? got : first;
        const float *pre = NULL;
        if (run && d != CT_IGEMM_BWD_FILTER && ct_igemm_prepared_bytes(p, d, c) > 0) {
          assert_true(ct_igemm_prepared_bytes(p, d, c) <= ws_bytes);
          ct_gpu_memset(0, prep, 0xff, ws_bytes); /* NaN where nothing is written */
          ct_igemm_prepare(&ctx, p, d, c, w_dev, prep);
          ct_gpu_memset(0, ws, 0xff, ws_bytes); /* nothing left from the first run */
          pre = prep;
          ran_prepared++;
        }
        if (d == CT_IGEMM_FWD) {
          /* odd choices with bias and ReLU, even ones without */
          const bool epilogue = c % 2 == 1;
          ct_gpu_memset(0, out_y, 0xff, ny * sizeof(float)); /* NaN where nothing is written */
          ct_igemm_forward(&ctx, p, c, x_dev, w_dev, pre, epilogue ? b_dev : NULL, epilogue, ws,
                           ws_bytes, out_y);
          expect_result(what, out_y, ny, epilogue ? r.y : r.y_plain, tol, keep, same);
        } else if (d == CT_IGEMM_BWD_DATA) {
          ct_gpu_memset(0, out_x, 0xff, nx * sizeof(float));
          ct_igemm_backward_data(&ctx, p, c, dy_dev, w_dev, pre, ws, ws_bytes, out_x);
          expect_result(what, out_x, nx, r.dx, tol, keep, same);
        } else {
          ct_gpu_memcpy(0, out_w, CT_DEVICE_CPU, dw0, nw * sizeof(float));
          ct_igemm_backward_filter(&ctx, p, c, x_dev, dy_dev, ws, ws_bytes, out_w);
          expect_result(what, out_w, nw, r.dw, tol, keep, same);
        }
      }
      ran++;
      if (!strncmp(cname, "IGEMM_WINO", 10)) ran_wino++;
      if (!strncmp(cname, "IGEMM_DIRECT", 12)) ran_direct++;
      if (!strncmp(cname, "IGEMM_FDIRECT", 13)) ran_fdirect++;
    }
  }
  /* forward and backward data share the list; the direct forward is
   * forward only */
  const int gemm = CT_IGEMM_GEMM_CONFIGS - (wino ? 0 : CT_IGEMM_GEMM_WINO_CONFIGS) -
                   CT_IGEMM_GEMM_FDIRECT_CONFIGS;
  const int wgrad = CT_IGEMM_WGRAD_CONFIGS - CT_IGEMM_WGRAD_DIRECT_CONFIGS + ran_direct;
  /* the register-prefetch, TF32 and pipelined configurations run on every
   * geometry */
  const int mul = data ? 2 : 1;
  const int want = !only                  ? gemm * mul + ran_fdirect + wgrad
                   : !strcmp(only, "FP32") ? CT_IGEMM_GEMM_FP32_CONFIGS * mul +
                                                 CT_IGEMM_WGRAD_FP32_CONFIGS
                   : !strcmp(only, "TF32") ? CT_IGEMM_GEMM_TF32_CONFIGS * mul +
                                                 CT_IGEMM_WGRAD_TF32_CONFIGS
                   : !strcmp(only, "PIPE") ? CT_IGEMM_GEMM_PIPE_CONFIGS * mul +
                                                 CT_IGEMM_WGRAD_PIPE_CONFIGS
                                           : ran_wino + ran_direct + ran_fdirect;
  assert_int_equal(ran, want);
  const bool fdirect_runs = fdirect && (!only || !strcmp(only, "FDIRECT"));
  assert_int_equal(ran_fdirect, fdirect_runs ? CT_IGEMM_GEMM_FDIRECT_CONFIGS : 0);
  const bool wino_runs = wino && (!only || !strcmp(only, "WINO"));
  assert_int_equal(ran_wino, wino_runs ? 2 * CT_IGEMM_GEMM_WINO_CONFIGS : 0);
  assert_int_equal(ran_prepared, ran_wino); /* the Winograd ones, and only they */
  if (!direct || (only && strcmp(only, "DIRECT"))) assert_int_equal(ran_direct, 0);
  else if (g->ow <= 8) assert_int_equal(ran_direct, CT_IGEMM_WGRAD_DIRECT_CONFIGS);
  printf("%-12s n %d c %d %dx%d m %d: %d configurations against the reference (%d Winograd, "
         "%d direct filter gradients, %d direct forwards)\n",
         name, g->n, g->c, g->h, g->w, g->m, ran, ran_wino, ran_direct, ran_fdirect);
  ct_igemm_free(p);
  ct_gpu_free(0, ws);
  ct_gpu_free(0, prep);
  ct_gpu_free(0, out_w);
  ct_gpu_free(0, out_x);
  ct_gpu_free(0, out_y);
  ct_gpu_free(0, dy_dev);
  ct_gpu_free(0, b_dev);
  ct_gpu_free(0, w_dev);
  ct_gpu_free(0, x_dev);
  free(got);
  free(first);
  reference_free(&r);
  free(x);
  free(w);
  free(b);
  free(dy);
  free(dw0);
  ct_context_free(&ctx);
}

/* check_direct on each of n named geometries. */
static void check_list(const named_geom *cases, size_t n, const char *only) {
  for (size_t i = 0; i < n; i++) check_direct(cases[i].name, &cases[i].g, only);
}

/* cifar10_quick's three convolutions at small batches (configurations whose
 * names hold `only`, unless NULL). */
static void check_cifar(const char *only) {
  const named_geom cases[] = {
      {"cifar conv1", geom(2, 3, 32, 32, 32, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"cifar conv2", geom(2, 32, 16, 16, 32, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"cifar conv3", geom(3, 32, 8, 8, 64, 5, 5, 1, 1, 2, 2, 1, 1)},
  };
  check_list(cases, sizeof cases / sizeof cases[0], only);
}

/* The edges: reductions of 27, 75 and 180 (not multiples of the 16- and
 * 32-deep steps), output channels that fill no tile (5, 6, 12, 70), columns
 * that fill no tile, images smaller than a step of the filter gradient's
 * reduction (3x3 outputs: a step crosses several), stride 2, dilation,
 * rectangles, and 25600 columns for the filter gradient's split sums. */
static void check_edges(const char *only) {
  const named_geom cases[] = {
      {"70 outputs", geom(2, 20, 6, 5, 70, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"5x5 pad 2", geom(3, 5, 12, 10, 12, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"stride 2", geom(3, 4, 11, 9, 5, 4, 3, 2, 1, 1, 2, 1, 1)},
      {"dilated", geom(2, 3, 8, 13, 6, 3, 5, 1, 1, 0, 2, 2, 1)},
      {"split sums", geom(64, 3, 20, 20, 8, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"3x3 images", geom(7, 3, 3, 3, 5, 3, 3, 1, 1, 1, 1, 1, 1)},
  };
  check_list(cases, sizeof cases / sizeof cases[0], only);
}

/* Every configuration on cifar10_quick's shapes and the edges. */
static void test_direct(void **state) {
  (void)state;
  check_cifar(NULL);
  check_edges(NULL);
}

/* test_direct's register-prefetch FP32 configurations alone, its TF32 ones
 * alone and its pipelined FP32 ones alone, each on the cifar shapes and the
 * edges apart: short runs for compute-sanitizer's racecheck (test_direct
 * runs them all too).  test_<fam>_<shapes> runs check_<shapes>(FAMILY). */
#define FAMILY_TEST(fam, shapes, FAMILY)              \
  static void test_##fam##_##shapes(void **state) { \
    (void)state;                                    \
    check_##shapes(FAMILY);                         \
  }
FAMILY_TEST(fp32, cifar, "FP32")
FAMILY_TEST(fp32, edges, "FP32")
FAMILY_TEST(tf32, cifar, "TF32")
FAMILY_TEST(tf32, edges, "TF32")
FAMILY_TEST(pipe, cifar, "PIPE")
FAMILY_TEST(pipe, edges, "PIPE")
#undef FAMILY_TEST

/* The Winograd configurations (only "WINO") or the direct filter-gradient
 * ones ("DIRECT") alone on cifar10_quick's 5x5 layers and odd shapes (short
 * runs for compute-sanitizer's racecheck and memcheck; the full test_direct
 * runs them too). */
static void check_5x5_alone(const char *only) {
  const named_geom cases[] = {
      {"cifar conv1", geom(2, 3, 32, 32, 32, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"cifar conv2", geom(2, 32, 16, 16, 32, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"cifar conv3", geom(3, 32, 8, 8, 64, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"odd, pad 0", geom(2, 10, 9, 11, 20, 5, 5, 1, 1, 0, 0, 1, 1)},
      {"pads 4 and 1", geom(1, 17, 5, 6, 33, 5, 5, 1, 1, 4, 1, 1, 1)},
  };
  check_list(cases, sizeof cases / sizeof cases[0], only);
}

static void test_winograd(void **state) {
  (void)state;
  check_5x5_alone("WINO");
}

/* The direct forward alone on few-channel 5x5 layers: cifar10_quick's and
 * LeNet's first (pad 0, 24-wide rows, 20 channels), and rows that are no
 * multiple of 4 with more channels than a block's 32. */
static void test_direct_forward(void **state) {
  (void)state;
  const named_geom cases[] = {
      {"cifar conv1", geom(3, 3, 32, 32, 32, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"lenet conv1", geom(4, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 1, 1)},
      {"odd rows", geom(2, 4, 9, 7, 40, 5, 5, 1, 1, 1, 2, 1, 1)},
      {"one pixel", geom(5, 2, 1, 1, 7, 5, 5, 1, 1, 2, 2, 1, 1)},
  };
  check_list(cases, sizeof cases / sizeof cases[0], "FDIRECT");
}

static void test_direct_wgrad(void **state) {
  (void)state;
  check_5x5_alone("DIRECT");
}

/* A strict FP32 plan times and picks only FP32 configurations (the
 * register-prefetch, pipelined, Winograd and direct ones that can run); a
 * TF32 plan times all of those that can run.
 * The choices' math and names. */
static void test_strict_plan(void **state) {
  const int gemm_pipe = CT_IGEMM_GEMM_FP32_CONFIGS + CT_IGEMM_GEMM_TF32_CONFIGS + 1;
  const int wgrad_pipe = CT_IGEMM_WGRAD_FP32_CONFIGS + CT_IGEMM_WGRAD_TF32_CONFIGS + 1;
  const int gemm_wino = gemm_pipe + CT_IGEMM_GEMM_PIPE_CONFIGS;
  const int gemm_fdirect = gemm_wino + CT_IGEMM_GEMM_WINO_CONFIGS;
  assert_int_equal(CT_IGEMM_GEMM_CONFIGS, gemm_fdirect - 1 + CT_IGEMM_GEMM_FDIRECT_CONFIGS);
  const int wgrad_direct = wgrad_pipe + CT_IGEMM_WGRAD_PIPE_CONFIGS;
  assert_int_equal(CT_IGEMM_WGRAD_CONFIGS, wgrad_direct - 1 + CT_IGEMM_WGRAD_DIRECT_CONFIGS);
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_FWD, 0));
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_FWD, CT_IGEMM_GEMM_FP32_CONFIGS));
  assert_true(ct_igemm_choice_tf32(CT_IGEMM_FWD, CT_IGEMM_GEMM_FP32_CONFIGS + 1));
  assert_true(ct_igemm_choice_tf32(CT_IGEMM_BWD_DATA, gemm_pipe - 1));
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_BWD_DATA, gemm_pipe));
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_BWD_DATA, CT_IGEMM_GEMM_CONFIGS));
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_BWD_DATA, CT_IGEMM_GEMM_CONFIGS + 1));
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_BWD_FILTER, CT_IGEMM_WGRAD_FP32_CONFIGS));
  assert_true(ct_igemm_choice_tf32(CT_IGEMM_BWD_FILTER, CT_IGEMM_WGRAD_FP32_CONFIGS + 1));
  assert_true(ct_igemm_choice_tf32(CT_IGEMM_BWD_FILTER, wgrad_pipe - 1));
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_BWD_FILTER, wgrad_pipe));
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_BWD_FILTER, CT_IGEMM_WGRAD_CONFIGS));
  char buf[48];
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_FWD, 1, buf, sizeof buf), "IGEMM_32x64x1");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_BWD_FILTER, 1, buf, sizeof buf), "IGEMM_32x64");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_FWD, CT_IGEMM_GEMM_FP32_CONFIGS + 1, buf,
                                           sizeof buf),
                      "IGEMM_TF32_32x64x1");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_BWD_FILTER, wgrad_pipe - 1, buf, sizeof buf),
                      "IGEMM_TF32_64x128x1");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_FWD, gemm_pipe, buf, sizeof buf),
                      "IGEMM_PIPE_32x128x1");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_BWD_DATA, gemm_wino - 1, buf, sizeof buf),
                      "IGEMM_PIPE_32x32x8t4");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_FWD, gemm_wino, buf, sizeof buf),
                      "IGEMM_WINO_16x32_8x8c8");
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_FWD, gemm_wino));
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_FWD, gemm_fdirect - 1, buf, sizeof buf),
                      "IGEMM_WINO_16x64_8x8c4");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_FWD, gemm_fdirect, buf, sizeof buf),
                      "IGEMM_FDIRECT5_r2");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_FWD, CT_IGEMM_GEMM_CONFIGS, buf, sizeof buf),
                      "IGEMM_FDIRECT5_r8");
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_FWD, gemm_fdirect));
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_BWD_FILTER, wgrad_pipe, buf, sizeof buf),
                      "IGEMM_PIPE_32x32x4t4");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_BWD_FILTER, wgrad_direct - 1, buf,
                                           sizeof buf),
                      "IGEMM_PIPE_64x64x4");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_BWD_FILTER, wgrad_direct, buf, sizeof buf),
                      "IGEMM_DIRECT5_16x2_4x16r16");
  assert_false(ct_igemm_choice_tf32(CT_IGEMM_BWD_FILTER, wgrad_direct));
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_BWD_FILTER, CT_IGEMM_WGRAD_CONFIGS, buf,
                                           sizeof buf),
                      "IGEMM_DIRECT5_8x2_8x16r8");
  assert_string_equal(ct_igemm_choice_name(CT_IGEMM_FWD, CT_IGEMM_GEMM_CONFIGS + 1, buf,
                                           sizeof buf),
                      "?");
  for (int dir = 0; dir < 3; dir++) {
    const ct_igemm_dir d = (ct_igemm_dir)dir;
    const int n = d == CT_IGEMM_BWD_FILTER ? CT_IGEMM_WGRAD_CONFIGS : CT_IGEMM_GEMM_CONFIGS;
    for (int i = 1; i <= n; i++)
      for (int j = i + 1; j <= n; j++) {
        char other[48];
        if (!strcmp(ct_igemm_choice_name(d, i, buf, sizeof buf),
                    ct_igemm_choice_name(d, j, other, sizeof other)))
          fail_msg("direction %d: choices %d and %d are both %s", dir, i, j, buf);
      }
  }
  ct_context ctx;
  ct_error err;
  if (ct_context_init(&ctx, 0, 5, &err) != CT_OK) fail_msg("%s", err.msg);
  const ct_igemm_geom g = geom(4, 32, 16, 16, 32, 5, 5, 1, 1, 2, 2, 1, 1);
  const size_t ny = (size_t)g.n * g.m * g.oh * g.ow, nx = (size_t)g.n * g.c * g.h * g.w;
  const size_t nw = (size_t)g.m * g.c * g.kh * g.kw, ws_bytes = 64u << 20;
  float *x = ct_gpu_malloc(0, nx * sizeof(float)), *y = ct_gpu_malloc(0, ny * sizeof(float));
  float *w = ct_gpu_malloc(0, nw * sizeof(float)), *ws = ct_gpu_malloc(0, ws_bytes);
  ct_igemm *strict = ct_igemm_new(&ctx, &g, false), *tf32 = ct_igemm_new(&ctx, &g, true);
  float ms[CT_IGEMM_GEMM_CONFIGS];
  for (int dir = 0; dir < 3; dir++) {
    const ct_igemm_dir d = (ct_igemm_dir)dir;
    const int n = d == CT_IGEMM_BWD_FILTER ? CT_IGEMM_WGRAD_CONFIGS : CT_IGEMM_GEMM_CONFIGS;
    ct_igemm_time_each(&ctx, strict, d, x, w, y, ws, ws_bytes, ms);
    for (int c = 1; c <= n; c++)
      if ((ms[c - 1] >= 0.0f) !=
          (!ct_igemm_choice_tf32(d, c) && ct_igemm_choice_runs(strict, d, c)))
        fail_msg("strict plan, direction %d, choice %d: %g ms", dir, c, ms[c - 1]);
    int choice = 0;
    float best = 0.0f;
    assert_true(ct_igemm_time(&ctx, strict, d, x, w, y, ws, ws_bytes, &choice, &best));
    assert_true(choice >= 1 && choice <= n);
    assert_false(ct_igemm_choice_tf32(d, choice));
    printf("direction %d: fastest on a strict plan %s, %.4f ms\n", dir,
           ct_igemm_choice_name(d, choice, (char[48]){0}, 48), best);
    ct_igemm_time_each(&ctx, tf32, d, x, w, y, ws, ws_bytes, ms);
    for (int c = 1; c <= n; c++)
      if ((ms[c - 1] >= 0.0f) != ct_igemm_choice_runs(tf32, d, c))
        fail_msg("TF32 plan, direction %d, choice %d: %g ms", dir, c, ms[c - 1]);
    assert_true(ct_igemm_time(&ctx, tf32, d, x, w, y, ws, ws_bytes, &choice, &best));
    printf("direction %d: fastest on a TF32 plan %s, %.4f ms\n", dir,
           ct_igemm_choice_name(d, choice, (char[48]){0}, 48), best);
  }
  ct_igemm_free(strict);
  ct_igemm_free(tf32);
  ct_gpu_free(0, x);
  ct_gpu_free(0, y);
  ct_gpu_free(0, w);
  ct_gpu_free(0, ws);
  ct_context_free(&ctx);
}

/* The layer with TF32 allowed: Cortado's kernels (of either math, the
 * fastest) in every direction they run, against the CPU at TF32's
 * tolerance; the FP32 vision cases above show that strict layers never
 * take a TF32 configuration. */
static void test_layer_tf32(void **state) {
  const conv_cfg cases[] = {
      {"cifar conv2", "10,32,16,16", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 32,
       true},
      {"70 outputs", "2,20,6,5", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, 70, true},
      {"stride 2", "3,4,11,9", 1, 2, {1, 4, 3}, {1, 2, 1}, {0, 1, 2}, {1, 1, 1}, 1, 5, true,
       false, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    conv_param st;
    conv_make_param(&st, &cases[i], "Convolution");
    const bool unit_stride = cases[i].s[1] == 1 && cases[i].s[2] == 1;
    expect_igemm_math(&st, cases[i].shape, true, unit_stride, true, true);
    cd_compare3(&st.lp, CT_PHASE_TRAIN, cases[i].shape, 1, CD_CUDNN, true, TF32_TOL, NULL);
  }
}
#endif

int main(int argc, char **argv) {
  tu_require_gpu();
#ifdef CORTADO_HAVE_CUDA
  tu_filter_tests(argc, argv);
  ct_igemm_set_mode(CT_IGEMM_FORCE);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vision_cases),
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_not_for_others),
      cmocka_unit_test(test_fused_relu),
      cmocka_unit_test(test_prepared_layer),
      cmocka_unit_test(test_direct),
      cmocka_unit_test(test_fp32_cifar),
      cmocka_unit_test(test_fp32_edges),
      cmocka_unit_test(test_tf32_cifar),
      cmocka_unit_test(test_tf32_edges),
      cmocka_unit_test(test_pipe_cifar),
      cmocka_unit_test(test_pipe_edges),
      cmocka_unit_test(test_winograd),
      cmocka_unit_test(test_direct_forward),
      cmocka_unit_test(test_direct_wgrad),
      cmocka_unit_test(test_strict_plan),
      cmocka_unit_test(test_layer_tf32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
