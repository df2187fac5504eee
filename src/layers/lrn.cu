/* LRN on a GPU: one thread per value, summing its window directly (the
 * windows are small: local_size channels or a local_size^2 box). */
#include "gpu/gpu.h"
#include "layers/lrn.h"

/* S(v) at value i of (N, C, H, W). */
__device__ static float window_sum(const ct_lrn_geom &g, const float *v, size_t i) {
  const int half = (g.size - 1) / 2;
  const size_t plane = (size_t)g.H * g.W;
  int w = (int)(i % g.W), h = (int)((i / g.W) % g.H), c = (int)((i / plane) % g.C);
  float sum = 0.0f;
  if (!g.within) {
    const float *base = v + (i - (size_t)c * plane);
    int c0 = max(c - half, 0), c1 = min(c + half, g.C - 1);
    for (int cc = c0; cc <= c1; cc++) sum += base[(size_t)cc * plane];
  } else {
    const float *p = v + (i - (size_t)h * g.W - w);
    int h0 = max(h - half, 0), h1 = min(h + half, g.H - 1);
    int w0 = max(w - half, 0), w1 = min(w + half, g.W - 1);
    for (int hh = h0; hh <= h1; hh++)
      for (int ww = w0; ww <= w1; ww++) sum += p[hh * g.W + ww];
  }
  return sum;
}

__global__ static void square(size_t n, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] * x[i];
}

/* scale from the squares (kept in y until overwritten), then y. */
__global__ static void lrn_scale(size_t n, ct_lrn_geom g, const float *sq, float *scale) {
  CT_CUDA_KERNEL_LOOP(i, n) scale[i] = g.k + g.alpha * window_sum(g, sq, i);
}

__global__ static void lrn_out(size_t n, float beta, const float *x, const float *scale, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] * powf(scale[i], -beta);
}

__global__ static void lrn_ratio(size_t n, const float *y, const float *dy, const float *scale,
                                 float *ratio) {
  CT_CUDA_KERNEL_LOOP(i, n) ratio[i] = dy[i] * y[i] / scale[i];
}

__global__ static void lrn_bwd(size_t n, ct_lrn_geom g, const float *x, const float *dy,
                               const float *scale, const float *ratio, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    dx[i] = dy[i] * powf(scale[i], -g.beta) -
            2.0f * g.alpha * g.beta * x[i] * window_sum(g, ratio, i);
  }
}

extern "C" void ct_lrn_forward_gpu(ct_context *ctx, const ct_lrn_geom *g, const float *x,
                                   float *scale, float *y) {
  size_t n = (size_t)g->N * g->C * g->H * g->W;
  if (!n) return;
  cudaStream_t s = (cudaStream_t)ctx->stream;
  square<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, x, y);
  CT_CUDA_LAUNCH_CHECK();
  lrn_scale<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, *g, y, scale);
  CT_CUDA_LAUNCH_CHECK();
  lrn_out<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, g->beta, x, scale, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_lrn_backward_gpu(ct_context *ctx, const ct_lrn_geom *g, const float *x,
                                    const float *y, const float *dy, const float *scale,
                                    float *tmp, float *dx) {
  size_t n = (size_t)g->N * g->C * g->H * g->W;
  if (!n) return;
  cudaStream_t s = (cudaStream_t)ctx->stream;
  lrn_ratio<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, y, dy, scale, tmp);
  CT_CUDA_LAUNCH_CHECK();
  lrn_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, *g, x, dy, scale, tmp, dx);
  CT_CUDA_LAUNCH_CHECK();
}
