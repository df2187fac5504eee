// Host emulator of the depthwise convolution kernels
// (src/layers/conv/conv_depthwise.cu), for checking their index arithmetic
// without a GPU (tests/emu/dwconv-emu.sh cuts the kernels out and builds
// this around them).  Every shape runs forward, backward data and the filter
// gradient in NCHW and NHWC, the filter gradient in 1, 2 and 3 slices and in
// as many as a GPU of 132 multiprocessors gets, added onto a dW that already
// holds values, against a double reference.
#include <cuda_runtime.h>

#include "../fibers.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define __shared__ static
static dim3 gridDim;
using std::min;
#include "math/typed.cuh"
#include "kernels.inc"

struct Shape {
  const char *name;
  int N, C, H, W, M, R, S, sh, sw, ph, pw, dh, dw;
};

static const Shape k_shapes[] = {
    {"3x3 pad 1", 2, 8, 9, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1},
    {"3x3 stride 2", 2, 8, 10, 9, 1, 3, 3, 2, 2, 1, 1, 1, 1},
    {"2 filters, dilation 2", 3, 6, 8, 8, 2, 3, 3, 1, 1, 2, 2, 2, 2},
    {"5x5 stride 3", 2, 4, 13, 11, 1, 5, 5, 3, 3, 0, 0, 1, 1},
    {"3x1, strides 1 and 2", 2, 5, 6, 9, 1, 3, 1, 1, 2, 1, 0, 1, 1},
    {"37 channels (2 blocks)", 1, 37, 5, 6, 1, 3, 3, 1, 1, 1, 1, 1, 1},
    {"3 channels x 2, 5x5 stride 2", 2, 3, 13, 11, 2, 5, 5, 2, 2, 0, 0, 1, 1},
    /* channel counts that fill 16 bytes of float32: the vector kernels too */
    {"12 channels, 3x3 stride 2", 2, 12, 9, 8, 1, 3, 3, 2, 2, 1, 1, 1, 1},
    {"136 channels (5 vector blocks)", 1, 136, 4, 5, 1, 3, 3, 1, 1, 1, 1, 1, 1},
    {"8 channels, 5x5 dilation 2", 2, 8, 11, 10, 1, 5, 5, 1, 1, 4, 4, 2, 2},
};

static size_t at(bool nhwc, int n, int c, int h, int w, int C, int H, int W) {
  return nhwc ? (((size_t)n * H + h) * W + w) * C + c : (((size_t)n * C + c) * H + h) * W + w;
}

static int g_failures = 0;

static void expect(const char *what, const Shape &s, bool nhwc, const std::vector<float> &got,
                   const std::vector<double> &want) {
  double big = 0, err = 0;
  for (size_t i = 0; i < want.size(); i++) big = std::max(big, std::fabs(want[i]));
  for (size_t i = 0; i < want.size(); i++) err = std::max(err, std::fabs(got[i] - want[i]));
  const bool ok = err <= 1e-5 * std::max(1.0, big);
  printf("%s, %s, %s: error %.3g of %.3g %s\n", s.name, nhwc ? "NHWC" : "NCHW", what, err, big,
         ok ? "ok" : "FAILED");
  if (!ok) g_failures++;
}

/* The 16-byte kernels (4 float32 values a thread here) on the same values. */
static void run_vector(const dw_geom &g, const std::vector<float> &x, const std::vector<float> &w,
                       const std::vector<float> &bias, const std::vector<float> &dy,
                       const std::vector<double> &y_ref, const std::vector<double> &dx_ref,
                       const std::vector<double> &dw_ref, const Shape &s) {
  const unsigned V = 4, K = g.K, taps = g.R * g.S, CV = g.C / V;
  std::vector<float> wt(w.size(), NAN), y(dy.size(), NAN), dx(x.size(), NAN);
  reg(wt.data(), wt.size() * 4);
  gridDim = dim3((K * taps + 255) / 256);
  run_grid(gridDim, 256, 0, [&] { dw_transpose(K, taps, w.data(), wt.data()); });
  const unsigned ny = (unsigned)y.size() / V, nx = (unsigned)x.size() / V;
  gridDim = dim3((ny + 255) / 256);
  run_grid(gridDim, 256, 0, [&] { dw_forward_vec<float>(g, x.data(), wt.data(), bias.data(), y.data(), ny); });
  expect("forward, 16 bytes a thread", s, true, y, y_ref);
  gridDim = dim3((nx + 255) / 256);
  run_grid(gridDim, 256, 0, [&] { dw_backward_data_vec<float>(g, dy.data(), wt.data(), dx.data(), nx); });
  expect("backward data, 16 bytes a thread", s, true, dx, dx_ref);
  if (taps > 9) return;
  unsigned bx = 1;
  while (bx * 2 <= CV && bx < 32) bx *= 2;
  const dim3 block(bx, DW_VEC_THREADS / bx);
  const unsigned rows = (unsigned)g.N * g.P, cblocks = (CV + bx - 1) / bx;
  for (unsigned slices : {1u, 3u}) {
    if (slices > rows) continue;
    const unsigned rows_per = (rows + slices - 1) / slices;
    std::vector<float> partial((size_t)slices * K * taps, NAN), dwv(w.size());
    for (size_t i = 0; i < w.size(); i++) dwv[i] = 0.5f * (i % 7);
    reg(partial.data(), partial.size() * 4);
    gridDim = dim3(cblocks, slices);
    run_grid(gridDim, block, 0, [&] { dw_wgrad_vec<float>(g, x.data(), dy.data(), rows_per, partial.data()); });
    const unsigned kt = K * taps;
    gridDim = dim3((kt + 255) / 256);
    run_grid(gridDim, 256, 0, [&] { dw_wgrad_sum(kt, (int)slices, partial.data(), dwv.data()); });
    char what[80];
    snprintf(what, sizeof what, "filter gradient, 16 bytes a thread, %u slice%s", slices, slices > 1 ? "s" : "");
    expect(what, s, true, dwv, dw_ref);
  }
}

static void run(const Shape &s, bool nhwc) {
  dw_geom g;
  g.N = s.N, g.C = s.C, g.H = s.H, g.W = s.W, g.M = s.M, g.K = s.C * s.M, g.R = s.R, g.S = s.S;
  g.sh = s.sh, g.sw = s.sw, g.ph = s.ph, g.pw = s.pw, g.dh = s.dh, g.dw = s.dw;
  g.P = (s.H + 2 * s.ph - (s.dh * (s.R - 1) + 1)) / s.sh + 1;
  g.Q = (s.W + 2 * s.pw - (s.dw * (s.S - 1) + 1)) / s.sw + 1;
  const int K = g.K, taps = s.R * s.S;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x((size_t)s.N * s.C * s.H * s.W), w((size_t)K * taps), bias(K);
  std::vector<float> dy((size_t)s.N * K * g.P * g.Q);
  for (auto *v : {&x, &w, &bias, &dy})
    for (auto &e : *v) e = u(g_rng);
  reg(x.data(), x.size() * 4), reg(w.data(), w.size() * 4), reg(bias.data(), bias.size() * 4);
  reg(dy.data(), dy.size() * 4);

  /* the double reference, in the logical order (n, c, h, w) of each layout */
  std::vector<double> y_ref(dy.size()), dx_ref(x.size(), 0.0), dw_ref(w.size());
  for (size_t i = 0; i < w.size(); i++) dw_ref[i] = 0.5 * (i % 7); /* dW holds values before */
  for (int n = 0; n < s.N; n++)
    for (int k = 0; k < K; k++)
      for (int p = 0; p < g.P; p++)
        for (int q = 0; q < g.Q; q++) {
          const size_t yi = at(nhwc, n, k, p, q, K, g.P, g.Q);
          double acc = bias[k];
          for (int a = 0; a < s.R; a++)
            for (int b = 0; b < s.S; b++) {
              const int h = p * s.sh - s.ph + a * s.dh, v = q * s.sw - s.pw + b * s.dw;
              if (h < 0 || h >= s.H || v < 0 || v >= s.W) continue;
              const size_t xi = at(nhwc, n, k / s.M, h, v, s.C, s.H, s.W);
              acc += (double)x[xi] * w[(size_t)k * taps + a * s.S + b];
              dx_ref[xi] += (double)dy[yi] * w[(size_t)k * taps + a * s.S + b];
              dw_ref[(size_t)k * taps + a * s.S + b] += (double)dy[yi] * x[xi];
            }
          y_ref[yi] = acc;
        }

  /* forward and backward data: one thread per value, blocks of 256 */
  std::vector<float> y(dy.size(), NAN), dx(x.size(), NAN);
  const unsigned ny = (unsigned)y.size(), nx = (unsigned)x.size();
  gridDim = dim3((ny + 255) / 256);
  run_grid(gridDim, 256, 0, [&] {
    if (nhwc) dw_forward<float, true>(g, x.data(), w.data(), bias.data(), y.data(), ny);
    else dw_forward<float, false>(g, x.data(), w.data(), bias.data(), y.data(), ny);
  });
  expect("forward", s, nhwc, y, y_ref);
  gridDim = dim3((nx + 255) / 256);
  run_grid(gridDim, 256, 0, [&] {
    if (nhwc) dw_backward_data<float, true>(g, dy.data(), w.data(), dx.data(), nx);
    else dw_backward_data<float, false>(g, dy.data(), w.data(), dx.data(), nx);
  });
  expect("backward data", s, nhwc, dx, dx_ref);

  /* the filter gradient in several slice counts */
  const unsigned rows = (unsigned)s.N * g.P;
  const unsigned cblocks = nhwc ? (unsigned)(K + 31) / 32 : (unsigned)K;
  unsigned gpu_slices = (4u * 132u + cblocks - 1) / cblocks;
  gpu_slices = std::max(1u, std::min(gpu_slices, (rows + 3) / 4));
  for (unsigned slices : {1u, 2u, 3u, gpu_slices}) {
    if (slices > rows) continue;
    const unsigned rows_per = (rows + slices - 1) / slices;
    std::vector<float> partial((size_t)slices * K * taps, NAN), dwv(w.size());
    for (size_t i = 0; i < w.size(); i++) dwv[i] = 0.5f * (i % 7);
    reg(partial.data(), partial.size() * 4);
    gridDim = dim3(cblocks, slices);
    if (nhwc)
      run_grid(gridDim, dim3(32, 8), 0, [&] {
        if (taps <= 9) dw_wgrad_nhwc<float, 9>(g, x.data(), dy.data(), rows_per, partial.data());
        else dw_wgrad_nhwc<float, 25>(g, x.data(), dy.data(), rows_per, partial.data());
      });
    else
      run_grid(gridDim, 256, 0, [&] {
        if (taps <= 9) dw_wgrad_nchw<float, 9>(g, x.data(), dy.data(), rows_per, partial.data());
        else dw_wgrad_nchw<float, 25>(g, x.data(), dy.data(), rows_per, partial.data());
      });
    const unsigned kt = (unsigned)K * taps;
    gridDim = dim3((kt + 255) / 256);
    run_grid(gridDim, 256, 0, [&] { dw_wgrad_sum(kt, (int)slices, partial.data(), dwv.data()); });
    char what[64];
    snprintf(what, sizeof what, "filter gradient in %u slice%s", slices, slices > 1 ? "s" : "");
    expect(what, s, nhwc, dwv, dw_ref);
  }
  if (nhwc && s.M == 1 && s.C % 4 == 0) run_vector(g, x, w, bias, dy, y_ref, dx_ref, dw_ref, s);
  g_ranges.clear();
}

int main() {
  for (const Shape &s : k_shapes)
    for (bool nhwc : {false, true}) run(s, nhwc);
  printf("%d failures\n", g_failures);
  return g_failures ? 1 : 0;
}
