/* Pooling on a GPU: one thread per output in forward; backward gathers, one
 * thread per input value, over the windows that contain it (no atomics, so
 * deterministic).  With 32-bit indices (every tensor below 2^31 values) the
 * kernels split flat indices with precomputed multiply-shift dividers: the
 * divisions by W, H, PW, PH and the strides were most of their time (cifar10_quick's
 * 3x3/2 MAX backward over 100x32x32x32 took 41 us on an H100 with hardware
 * division, about a third of that without).  A ReLU fused on either side
 * (pooling.h) costs a compare. */
#include <float.h>

#include "gpu/gpu.h"
#include "layers/pooling.h"

enum { POOL_MAX = 0, POOL_AVE = 1, POOL_STO = 2 };

/* n / d for n < 2^31 by a multiply and a shift (d >= 1): with
 * s = ceil(log2 d) and m = floor(2^32 (2^s - d) / d) + 1,
 * n / d = (umulhi(n, m) + n) >> s, and the sum cannot overflow. */
typedef struct fast_div {
  unsigned d, m, s;
} fast_div;

static fast_div fast_div_of(unsigned d) {
  fast_div f;
  f.d = d;
  f.s = 0;
  while ((1ull << f.s) < d) f.s++;
  f.m = (unsigned)(((1ull << 32) * ((1ull << f.s) - d)) / d + 1);
  return f;
}

__device__ __forceinline__ unsigned div_of(unsigned n, const fast_div &f) {
  return (__umulhi(n, f.m) + n) >> f.s;
}

/* Plain division for the 64-bit kernels, with the same interface. */
__device__ __forceinline__ size_t div_of(size_t n, const fast_div &f) { return n / f.d; }

/* The dividers a kernel needs. */
typedef struct pool_divs {
  fast_div W, H, PW, PH, sh, sw, C;
} pool_divs;

static pool_divs divs_of(const ct_pool_geom *g) {
  return {fast_div_of((unsigned)g->W),  fast_div_of((unsigned)g->H),  fast_div_of((unsigned)g->PW),
          fast_div_of((unsigned)g->PH), fast_div_of((unsigned)g->sh), fast_div_of((unsigned)g->sw),
          fast_div_of((unsigned)g->C)};
}

/* Caffe's AVE divisor of output (ph, pw): its window clipped to the padded
 * input. */
__device__ __forceinline__ int ave_divisor(const ct_pool_geom &g, int ph, int pw) {
  const int hs = ph * g.sh - g.ph, ws = pw * g.sw - g.pw;
  return (min(hs + g.kh, g.H + g.ph) - hs) * (min(ws + g.kw, g.W + g.pw) - ws);
}

/* Window of output (ph, pw) clipped to the input, and Caffe's AVE divisor. */
__device__ static void window(const ct_pool_geom &g, int ph, int pw, int *h0, int *h1, int *w0,
                              int *w1, int *size) {
  int hs = ph * g.sh - g.ph, ws = pw * g.sw - g.pw;
  int he = min(hs + g.kh, g.H + g.ph), we = min(ws + g.kw, g.W + g.pw);
  *size = ave_divisor(g, ph, pw);
  *h0 = max(hs, 0);
  *w0 = max(ws, 0);
  *h1 = min(he, g.H);
  *w1 = min(we, g.W);
}

/* STOCHASTIC at test time: s1 = FLT_MIN + the window's sum, s2 = the sum
 * of its squares (output s2 / s1; Caffe's order of sums). */
__device__ static void sto_sums(const ct_pool_geom &g, const float *xp, int h0, int h1, int w0,
                                int w1, float *s1, float *s2) {
  float a = FLT_MIN, b = 0.0f;
  for (int h = h0; h < h1; h++)
    for (int w = w0; w < w1; w++) {
      const float v = xp[h * g.W + w];
      a += v;
      b += v * v;
    }
  *s1 = a;
  *s2 = b;
}

#define POOL_LOOP(I, i, n) \
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (I)blockDim.x * gridDim.x)

template <typename I>
__global__ static void pool_fwd(I n, ct_pool_geom g, pool_divs d, bool train, const float *x,
                                float *y, float *idx) {
  POOL_LOOP(I, i, n) {
    const I q = div_of(i, d.PW), nc = div_of(q, d.PH);
    const int pw = (int)(i - q * (I)g.PW), ph = (int)(q - nc * (I)g.PH);
    const float *xp = x + (size_t)nc * g.H * g.W;
    int h0, h1, w0, w1, size;
    window(g, ph, pw, &h0, &h1, &w0, &w1, &size);
    float out;
    if (g.method == POOL_MAX) {
      float best = -FLT_MAX;
      int arg = -1;
      for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++)
          if (xp[h * g.W + w] > best) {
            best = xp[h * g.W + w];
            arg = h * g.W + w;
          }
      out = best;
      idx[i] = (float)arg;
    } else if (g.method == POOL_AVE) {
      float sum = 0.0f;
      for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++) sum += xp[h * g.W + w];
      out = size > 0 ? sum / size : 0.0f;
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
      out = xp[pick];
    } else {
      float s1, s2;
      sto_sums(g, xp, h0, h1, w0, w1, &s1, &s2);
      out = s2 / s1;
    }
    if (g.bias) out += g.bias[nc - div_of(nc, d.C) * (I)g.C];
    y[i] = g.relu_top ? fmaxf(out, 0.0f) : out;
  }
}

/* Outputs [*p0, *p1) along one axis whose window contains input position
 * `at` (before clipping the window to the padded input). */
template <typename I>
__device__ static void covering(int at, int pad, int k, const fast_div &s, int nout, int *p0,
                                int *p1) {
  const int t = at + pad;
  *p0 = t < k ? 0 : (int)div_of((I)(t - k), s) + 1;
  *p1 = min((int)div_of((I)t, s) + 1, nout);
}

/* y: the top's data, read for relu_top (only outputs above 0 pass a
 * gradient); x: the bottom's data, read for relu_bottom (only inputs above
 * 0 take one) and by STOCHASTIC in test. */
template <typename I>
__global__ static void pool_bwd(I n, ct_pool_geom g, pool_divs d, bool train, const float *x,
                                const float *y, const float *dy, const float *idx, float *dx) {
  POOL_LOOP(I, i, n) {
    const I q = div_of(i, d.W), nc = div_of(q, d.H);
    const int w = (int)(i - q * (I)g.W), h = (int)(q - nc * (I)g.H);
    const size_t out0 = (size_t)nc * g.PH * g.PW;
    const float *dyp = dy + out0;
    const float *idxp = idx ? idx + out0 : NULL;
    const float *yp = y ? y + out0 : NULL;
    const float *xp = x + (size_t)nc * g.H * g.W;
    int ph0, ph1, pw0, pw1;
    covering<I>(h, g.ph, g.kh, d.sh, g.PH, &ph0, &ph1);
    covering<I>(w, g.pw, g.kw, d.sw, g.PW, &pw0, &pw1);
    float grad = 0.0f;
    const int self = h * g.W + w;
    for (int ph = ph0; ph < ph1; ph++)
      for (int pw = pw0; pw < pw1; pw++) {
        const int o = ph * g.PW + pw;
        if (g.relu_top && !(yp[o] > 0.0f)) continue;
        if (g.method == POOL_MAX || (g.method == POOL_STO && train)) {
          if ((int)idxp[o] == self) grad += dyp[o];
        } else if (g.method == POOL_AVE) {
          const int size = ave_divisor(g, ph, pw);
          if (size > 0) grad += dyp[o] / size;
        } else {
          int h0, h1, w0, w1, size;
          window(g, ph, pw, &h0, &h1, &w0, &w1, &size);
          float s1, s2;
          sto_sums(g, xp, h0, h1, w0, w1, &s1, &s2);
          grad += dyp[o] * (2.0f * xp[self] * s1 - s2) / (s1 * s1);
        }
      }
    if (g.relu_bottom && !(xp[self] > 0.0f)) grad = 0.0f;
    dx[i] = grad;
  }
}

/* MAX and AVE forward for windows of at most K x K: the window's loads are
 * all issued before the first compare (the generic loop waits for each in
 * turn, and these kernels are bound by that latency, not by bandwidth).
 * Same order of compares and sums as pool_fwd. */
template <typename I, int K>
__global__ static void pool_fwd_small(I n, ct_pool_geom g, pool_divs d, const float *x, float *y,
                                      float *idx) {
  POOL_LOOP(I, i, n) {
    const I q = div_of(i, d.PW), nc = div_of(q, d.PH);
    const int pw = (int)(i - q * (I)g.PW), ph = (int)(q - nc * (I)g.PH);
    const float *xp = x + (size_t)nc * g.H * g.W;
    int h0, h1, w0, w1, size;
    window(g, ph, pw, &h0, &h1, &w0, &w1, &size);
    float v[K][K];
#pragma unroll
    for (int a = 0; a < K; a++)
#pragma unroll
      for (int b = 0; b < K; b++)
        v[a][b] = h0 + a < h1 && w0 + b < w1 ? __ldg(xp + (h0 + a) * g.W + w0 + b) : 0.0f;
    float out;
    if (g.method == POOL_MAX) {
      float best = -FLT_MAX;
      int arg = -1;
#pragma unroll
      for (int a = 0; a < K; a++)
#pragma unroll
        for (int b = 0; b < K; b++)
          if (h0 + a < h1 && w0 + b < w1 && v[a][b] > best) {
            best = v[a][b];
            arg = (h0 + a) * g.W + w0 + b;
          }
      out = best;
      idx[i] = (float)arg;
    } else {
      float sum = 0.0f;
#pragma unroll
      for (int a = 0; a < K; a++)
#pragma unroll
        for (int b = 0; b < K; b++)
          if (h0 + a < h1 && w0 + b < w1) sum += v[a][b];
      out = size > 0 ? sum / size : 0.0f;
    }
    if (g.bias) out += g.bias[nc - div_of(nc, d.C) * (I)g.C];
    y[i] = g.relu_top ? fmaxf(out, 0.0f) : out;
  }
}

/* MAX, AVE and STOCHASTIC-train backward with one thread per S x S cell of
 * the input (stride S on both axes; S = 1: one input): the at most C x C
 * outputs that cover any value of the cell are all loaded before the sums,
 * once for the whole cell (cifar10_quick's 3x3/2 MAX backward: 4 outputs
 * for 4 inputs instead of 4 for each; pool_bwd waits for each load in
 * turn, and these kernels are bound by that latency, not by bandwidth).
 * Every input adds its covering outputs in pool_bwd's order, so the bits
 * are pool_bwd's.  cw and ch divide by the cells per row and per plane's
 * column. */
template <typename I, int S, int C>
__global__ static void pool_bwd_cell(I n, ct_pool_geom g, pool_divs d, fast_div cw, fast_div ch,
                                     const float *x, const float *y, const float *dy,
                                     const float *idx, float *dx) {
  const bool by_index = g.method != POOL_AVE;
  const I CW = (I)cw.d, CH = (I)ch.d;
  POOL_LOOP(I, i, n) {
    const I q = div_of(i, cw), nc = div_of(q, ch);
    const int h_first = (int)(q - nc * CH) * S, w_first = (int)(i - q * CW) * S;
    const int h_last = min(h_first + S - 1, g.H - 1), w_last = min(w_first + S - 1, g.W - 1);
    const size_t out0 = (size_t)nc * g.PH * g.PW, in0 = (size_t)nc * g.H * g.W;
    int ph0, ph1, pw0, pw1, unused;
    covering<I>(h_first, g.ph, g.kh, d.sh, g.PH, &ph0, &unused);
    covering<I>(h_last, g.ph, g.kh, d.sh, g.PH, &unused, &ph1);
    covering<I>(w_first, g.pw, g.kw, d.sw, g.PW, &pw0, &unused);
    covering<I>(w_last, g.pw, g.kw, d.sw, g.PW, &unused, &pw1);
    float dv[C][C], yv[C][C];
    int iv[C][C];
#pragma unroll
    for (int a = 0; a < C; a++)
#pragma unroll
      for (int b = 0; b < C; b++) {
        const bool in = ph0 + a < ph1 && pw0 + b < pw1;
        const size_t o = out0 + (size_t)(ph0 + a) * g.PW + pw0 + b;
        dv[a][b] = in ? __ldg(dy + o) : 0.0f;
        iv[a][b] = in && by_index ? (int)__ldg(idx + o) : -1;
        yv[a][b] = in && g.relu_top ? __ldg(y + o) : 1.0f;
      }
#pragma unroll
    for (int u = 0; u < S; u++) {
      const int h = h_first + u;
      if (h > h_last) break;
      int hp0, hp1;
      covering<I>(h, g.ph, g.kh, d.sh, g.PH, &hp0, &hp1);
#pragma unroll
      for (int v = 0; v < S; v++) {
        const int w = w_first + v;
        if (w > w_last) break;
        int wp0, wp1;
        covering<I>(w, g.pw, g.kw, d.sw, g.PW, &wp0, &wp1);
        const int self = h * g.W + w;
        float grad = 0.0f;
#pragma unroll
        for (int a = 0; a < C; a++)
#pragma unroll
          for (int b = 0; b < C; b++) {
            const int ph = ph0 + a, pw = pw0 + b;
            if (ph < hp0 || ph >= hp1 || pw < wp0 || pw >= wp1 || !(yv[a][b] > 0.0f)) continue;
            if (by_index) {
              if (iv[a][b] == self) grad += dv[a][b];
            } else {
              const int size = ave_divisor(g, ph, pw);
              if (size > 0) grad += dv[a][b] / size;
            }
          }
        if (g.relu_bottom && !(__ldg(x + in0 + self) > 0.0f)) grad = 0.0f;
        dx[in0 + self] = grad;
      }
    }
  }
}

/* pool_bwd_cell over every S x S cell of g's input (32-bit indices). */
template <int S, int C>
static void launch_cells(cudaStream_t st, const ct_pool_geom *g, const pool_divs &d,
                         const float *x, const float *y, const float *dy, const float *idx,
                         float *dx) {
  const unsigned CH = (unsigned)((g->H + S - 1) / S), CW = (unsigned)((g->W + S - 1) / S);
  const size_t cells = (size_t)g->N * g->C * CH * CW;
  pool_bwd_cell<unsigned, S, C><<<ct_cuda_blocks(cells), CT_CUDA_THREADS, 0, st>>>(
      (unsigned)cells, *g, d, fast_div_of(CW), fast_div_of(CH), x, y, dy, idx, dx);
}
typedef void (*cell_launcher)(cudaStream_t, const ct_pool_geom *, const pool_divs &, const float *,
                              const float *, const float *, const float *, float *);

/* Whether n values and every tensor of g fit the 32-bit kernels. */
static bool fits_32(const ct_pool_geom *g) {
  const size_t in = (size_t)g->N * g->C * g->H * g->W, out = (size_t)g->N * g->C * g->PH * g->PW;
  return in < 0x7fffffffu && out < 0x7fffffffu;
}

extern "C" void ct_pool_forward_gpu(ct_context *ctx, const ct_pool_geom *g, bool train,
                                    const float *x, float *y, float *idx) {
  size_t n = (size_t)g->N * g->C * g->PH * g->PW;
  if (!n) return;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const pool_divs d = divs_of(g);
  const bool small = fits_32(g) && (g->method == POOL_MAX || g->method == POOL_AVE);
  if (small && g->kh <= 2 && g->kw <= 2)
    pool_fwd_small<unsigned, 2>
        <<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)n, *g, d, x, y, idx);
  else if (small && g->kh <= 3 && g->kw <= 3)
    pool_fwd_small<unsigned, 3>
        <<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)n, *g, d, x, y, idx);
  else if (fits_32(g))
    pool_fwd<unsigned><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)n, *g, d, train, x,
                                                                     y, idx);
  else
    pool_fwd<size_t><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(n, *g, d, train, x, y, idx);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_pool_backward_gpu(ct_context *ctx, const ct_pool_geom *g, bool train,
                                     const float *x, const float *y, const float *dy,
                                     const float *idx, float *dx) {
  size_t n = (size_t)g->N * g->C * g->H * g->W;
  if (!n) return;
  CT_ASSERT(!g->relu_top || y);
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const pool_divs d = divs_of(g);
  const int S = g->sh == g->sw ? g->sh : 0;
  /* The outputs covering a cell's inputs along an axis are the multiples of
   * S in a half-open interval k + S - 1 long: at most ceil((k + S - 1) / S)
   * of them, 2 for cifar10_quick's and AlexNet's 3x3/2, 3 for GoogLeNet's
   * 3x3/1. */
  const int cover = S ? (max(g->kh, g->kw) + 2 * S - 2) / S : 0;
  if (fits_32(g) && S >= 1 && S <= 3 && cover <= 3 &&
      (g->method == POOL_MAX || g->method == POOL_AVE || (g->method == POOL_STO && train))) {
    static const cell_launcher launchers[3][2] = {{launch_cells<1, 2>, launch_cells<1, 3>},
                                                  {launch_cells<2, 2>, launch_cells<2, 3>},
                                                  {launch_cells<3, 2>, launch_cells<3, 3>}};
    launchers[S - 1][cover <= 2 ? 0 : 1](st, g, d, x, y, dy, idx, dx);
  } else if (fits_32(g)) {
    pool_bwd<unsigned><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)n, *g, d, train, x,
                                                                     y, dy, idx, dx);
  } else {
    pool_bwd<size_t><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(n, *g, d, train, x, y, dy, idx,
                                                                   dx);
  }
  CT_CUDA_LAUNCH_CHECK();
}
