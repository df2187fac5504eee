/* Pooling on a GPU: one thread per output in forward; backward gathers, one
 * thread per input value, over the windows that contain it (no atomics).
 * Index arithmetic is 32-bit when the tensors allow it (64-bit division is
 * emulated on the GPU and dominated these kernels). */
#include <float.h>

#include "gpu/gpu.h"
#include "layers/pooling.h"

enum { POOL_MAX = 0, POOL_AVE = 1, POOL_STO = 2 };

/* Window of output (ph, pw) clipped to the input, and Caffe's AVE divisor. */
__device__ static void window(const ct_pool_geom &g, int ph, int pw, int *h0, int *h1, int *w0,
                              int *w1, int *size) {
  int hs = ph * g.sh - g.ph, ws = pw * g.sw - g.pw;
  int he = min(hs + g.kh, g.H + g.ph), we = min(ws + g.kw, g.W + g.pw);
  *size = (he - hs) * (we - ws);
  *h0 = max(hs, 0);
  *w0 = max(ws, 0);
  *h1 = min(he, g.H);
  *w1 = min(we, g.W);
}

#define POOL_LOOP(I, i, n) \
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (I)blockDim.x * gridDim.x)

template <typename I>
__global__ static void pool_fwd(I n, ct_pool_geom g, bool train, const float *x, float *y,
                                float *idx) {
  const I PW = (I)g.PW, PH = (I)g.PH;
  POOL_LOOP(I, i, n) {
    I q = i / PW;
    int pw = (int)(i - q * PW), ph = (int)(q % PH);
    size_t nc = (size_t)(q / PH);
    const float *xp = x + nc * g.H * g.W;
    int h0, h1, w0, w1, size;
    window(g, ph, pw, &h0, &h1, &w0, &w1, &size);
    if (g.method == POOL_MAX) {
      float best = -FLT_MAX;
      int arg = -1;
      for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++)
          if (xp[h * g.W + w] > best) {
            best = xp[h * g.W + w];
            arg = h * g.W + w;
          }
      y[i] = best;
      idx[i] = (float)arg;
    } else if (g.method == POOL_AVE) {
      float sum = 0.0f;
      for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++) sum += xp[h * g.W + w];
      y[i] = size > 0 ? sum / size : 0.0f;
    } else if (train) {
      float total = 0.0f;
      for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++) total += xp[h * g.W + w];
      float thresh = idx[i] * total, cum = 0.0f;
      int pick = h0 * g.W + w0;
      bool found = false;
      for (int h = h0; h < h1 && !found; h++)
        for (int w = w0; w < w1 && !found; w++) {
          cum += xp[h * g.W + w];
          if (cum >= thresh) {
            pick = h * g.W + w;
            found = true;
          }
        }
      idx[i] = (float)pick;
      y[i] = xp[pick];
    } else {
      float s1 = FLT_MIN, s2 = 0.0f;
      for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++) {
          float v = xp[h * g.W + w];
          s1 += v;
          s2 += v * v;
        }
      y[i] = s2 / s1;
    }
  }
}

/* Outputs [*p0, *p1) along one axis whose window contains input position
 * `at` (before clipping the window to the padded input). */
__device__ static void covering(int at, int pad, int k, int s, int nout, int *p0, int *p1) {
  int t = at + pad;
  *p0 = t < k ? 0 : (t - k) / s + 1;
  *p1 = min(t / s + 1, nout);
}

template <typename I>
__global__ static void pool_bwd(I n, ct_pool_geom g, bool train, const float *x,
                                const float *dy, const float *idx, float *dx) {
  const I W = (I)g.W, H = (I)g.H;
  POOL_LOOP(I, i, n) {
    I q = i / W;
    int w = (int)(i - q * W), h = (int)(q % H);
    size_t nc = (size_t)(q / H);
    const float *dyp = dy + nc * g.PH * g.PW;
    const float *idxp = idx ? idx + nc * g.PH * g.PW : NULL;
    const float *xp = x + nc * g.H * g.W;
    int ph0, ph1, pw0, pw1;
    covering(h, g.ph, g.kh, g.sh, g.PH, &ph0, &ph1);
    covering(w, g.pw, g.kw, g.sw, g.PW, &pw0, &pw1);
    float grad = 0.0f;
    const int self = h * g.W + w;
    for (int ph = ph0; ph < ph1; ph++)
      for (int pw = pw0; pw < pw1; pw++) {
        int o = ph * g.PW + pw;
        if (g.method == POOL_MAX || (g.method == POOL_STO && train)) {
          if ((int)idxp[o] == self) grad += dyp[o];
        } else {
          int h0, h1, w0, w1, size;
          window(g, ph, pw, &h0, &h1, &w0, &w1, &size);
          if (g.method == POOL_AVE) {
            if (size > 0) grad += dyp[o] / size;
          } else {
            float s1 = FLT_MIN, s2 = 0.0f;
            for (int hh = h0; hh < h1; hh++)
              for (int ww = w0; ww < w1; ww++) {
                float v = xp[hh * g.W + ww];
                s1 += v;
                s2 += v * v;
              }
            grad += dyp[o] * (2.0f * xp[self] * s1 - s2) / (s1 * s1);
          }
        }
      }
    dx[i] = grad;
  }
}

extern "C" void ct_pool_forward_gpu(ct_context *ctx, const ct_pool_geom *g, bool train,
                                    const float *x, float *y, float *idx) {
  size_t n = (size_t)g->N * g->C * g->PH * g->PW;
  if (!n) return;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  if (n < 0x7fffffffu)
    pool_fwd<unsigned><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)n, *g, train, x, y, idx);
  else
    pool_fwd<size_t><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(n, *g, train, x, y, idx);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_pool_backward_gpu(ct_context *ctx, const ct_pool_geom *g, bool train,
                                     const float *x, const float *dy, const float *idx,
                                     float *dx) {
  size_t n = (size_t)g->N * g->C * g->H * g->W;
  if (!n) return;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  if (n < 0x7fffffffu)
    pool_bwd<unsigned><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)n, *g, train, x, dy,
                                                                     idx, dx);
  else
    pool_bwd<size_t><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(n, *g, train, x, dy, idx, dx);
  CT_CUDA_LAUNCH_CHECK();
}
