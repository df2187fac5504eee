/* Pooling in the 16-bit types (and float32, for the tests), in either
 * memory order (core/tensor.h): MAX and AVE with Caffe's windows, divisors
 * and argmax (a byte per output, its place in the window, or the index
 * h * W + w within the plane for windows of more than 255 positions:
 * pooling.h; in the order of the outputs), and the fused ReLUs of
 * ct_pool_geom.  Values are compared and summed in float32 and rounded once.
 * One thread per output in forward; backward gathers, one thread per input,
 * over the windows that contain it (no atomics, so deterministic).  In NHWC
 * neighbouring threads take neighbouring channels, so that every load and
 * store runs along memory. */
#include <float.h>

#include "gpu/gpu.h"
#include "layers/pooling.h"
#include "math/typed.cuh"

enum { POOL_MAX = 0, POOL_AVE = 1 };

/* (n, c, h, w) of flat index i of a (N, C, A, B) tensor in its order, and
 * the offset of (n, c, a, b).  I: the index type, unsigned when every
 * tensor has fewer than 2^31 values (64-bit division takes a GPU dozens of
 * instructions: the kernels' time went to it). */
struct place {
  int n, c, a, b;
};
template <typename I>
__device__ static __forceinline__ place place_of(I i, int C, int A, int B, bool nhwc) {
  place p;
  if (nhwc) {
    I q = i / (I)C;
    p.c = (int)(i - q * (I)C);
    I r = q / (I)B;
    p.b = (int)(q - r * (I)B);
    q = r / (I)A;
    p.a = (int)(r - q * (I)A);
    p.n = (int)q;
  } else {
    I q = i / (I)B;
    p.b = (int)(i - q * (I)B);
    I r = q / (I)A;
    p.a = (int)(q - r * (I)A);
    q = r / (I)C;
    p.c = (int)(r - q * (I)C);
    p.n = (int)q;
  }
  return p;
}
__device__ static __forceinline__ size_t offset_of(int n, int c, int a, int b, int C, int A, int B,
                                                   bool nhwc) {
  return nhwc ? (((size_t)n * A + a) * B + b) * C + c : (((size_t)n * C + c) * A + a) * B + b;
}

__device__ static __forceinline__ int divisor(const ct_pool_geom &g, int ph, int pw) {
  const int hs = ph * g.sh - g.ph, ws = pw * g.sw - g.pw;
  return (min(hs + g.kh, g.H + g.ph) - hs) * (min(ws + g.kw, g.W + g.pw) - ws);
}

/* MAX's argmax as stored (M: uint8_t or float, pooling.h): the maximum's
 * place in the window of corner (hs, ws), or in the plane. */
template <typename M>
__device__ static __forceinline__ int arg_code(const ct_pool_geom &g, int h, int w, int hs, int ws) {
  return sizeof(M) == 1 ? (h - hs) * g.kw + (w - ws) : h * g.W + w;
}

#define LOOP(I, i, n) \
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (I)blockDim.x * gridDim.x)

template <typename T, typename I, typename M>
__global__ static void fwd_k(I n, ct_pool_geom g, bool nhwc, const T *x, T *y, M *idx) {
  LOOP(I, i, n) {
    const place o = place_of<I>(i, g.C, g.PH, g.PW, nhwc);
    const int hs = o.a * g.sh - g.ph, ws = o.b * g.sw - g.pw;
    const int h0 = max(hs, 0), w0 = max(ws, 0);
    const int h1 = min(min(hs + g.kh, g.H + g.ph), g.H), w1 = min(min(ws + g.kw, g.W + g.pw), g.W);
    float out;
    if (g.method == POOL_MAX) {
      float best = -FLT_MAX;
      int arg = -1;
      for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++) {
          const float v = ct_ld(x[offset_of(o.n, o.c, h, w, g.C, g.H, g.W, nhwc)]);
          if (v > best) {
            best = v;
            arg = arg_code<M>(g, h, w, hs, ws);
          }
        }
      out = best;
      idx[i] = (M)arg; /* -1: 255 as a byte */
    } else {
      float sum = 0.0f;
      for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++) sum += ct_ld(x[offset_of(o.n, o.c, h, w, g.C, g.H, g.W, nhwc)]);
      const int size = divisor(g, o.a, o.b);
      out = size > 0 ? sum / size : 0.0f;
    }
    if (g.bias) out += g.bias[o.c];
    y[i] = ct_st<T>(g.relu_top ? fmaxf(out, 0.0f) : out);
  }
}

/* Outputs [*p0, *p1) along one axis whose window holds input position at. */
__device__ static __forceinline__ void covering(int at, int pad, int k, int s, int nout, int *p0,
                                                int *p1) {
  const int t = at + pad;
  *p0 = t < k ? 0 : (t - k) / s + 1;
  *p1 = min(t / s + 1, nout);
}

template <typename T, typename I, typename M>
__global__ static void bwd_k(I n, ct_pool_geom g, bool nhwc, const T *x, const T *y, const T *dy,
                             const M *idx, T *dx) {
  LOOP(I, i, n) {
    const place p = place_of<I>(i, g.C, g.H, g.W, nhwc);
    int ph0, ph1, pw0, pw1;
    covering(p.a, g.ph, g.kh, g.sh, g.PH, &ph0, &ph1);
    covering(p.b, g.pw, g.kw, g.sw, g.PW, &pw0, &pw1);
    float grad = 0.0f;
    for (int ph = ph0; ph < ph1; ph++)
      for (int pw = pw0; pw < pw1; pw++) {
        const size_t o = offset_of(p.n, p.c, ph, pw, g.C, g.PH, g.PW, nhwc);
        if (g.relu_top && !(ct_ld(y[o]) > 0.0f)) continue;
        if (g.method == POOL_MAX) {
          const int self = arg_code<M>(g, p.a, p.b, ph * g.sh - g.ph, pw * g.sw - g.pw);
          if ((int)idx[o] == self) grad += ct_ld(dy[o]);
        } else {
          const int size = divisor(g, ph, pw);
          if (size > 0) grad += ct_ld(dy[o]) / size;
        }
      }
    if (g.relu_bottom && !(ct_ld(x[i]) > 0.0f)) grad = 0.0f;
    dx[i] = ct_st<T>(grad);
  }
}

/* The argmax of V channels, V values of M, moved as whole words: float4s,
 * or V bytes as one 4- or 8-byte word. */
template <typename M, unsigned V>
__device__ static __forceinline__ void store_args(M *idx, size_t i, const int *arg) {
  if constexpr (sizeof(M) == 1) {
    unsigned long long w = 0;
#pragma unroll
    for (unsigned j = 0; j < V; j++) w |= (unsigned long long)(unsigned char)arg[j] << (8 * j);
    if constexpr (V == 8) *reinterpret_cast<unsigned long long *>(idx + i * V) = w;
    else if constexpr (V == 4) *reinterpret_cast<unsigned *>(idx + i * V) = (unsigned)w;
    else
#pragma unroll
      for (unsigned j = 0; j < V; j++) idx[i * V + j] = (M)arg[j];
  } else {
    float4 *d = reinterpret_cast<float4 *>(idx + i * V);
#pragma unroll
    for (unsigned j = 0; j < V; j += 4)
      d[j / 4] = make_float4((float)arg[j], (float)arg[j + 1], (float)arg[j + 2], (float)arg[j + 3]);
  }
}

template <typename M, unsigned V>
__device__ static __forceinline__ void load_args(const M *idx, size_t o, int *m) {
  if constexpr (sizeof(M) == 1) {
    unsigned long long w;
    if constexpr (V == 8) w = *reinterpret_cast<const unsigned long long *>(idx + o * V);
    else if constexpr (V == 4) w = *reinterpret_cast<const unsigned *>(idx + o * V);
    else {
      w = 0;
#pragma unroll
      for (unsigned j = 0; j < V; j++) w |= (unsigned long long)idx[o * V + j] << (8 * j);
    }
#pragma unroll
    for (unsigned j = 0; j < V; j++) m[j] = (int)((w >> (8 * j)) & 0xffu);
  } else {
    const float4 *s4 = reinterpret_cast<const float4 *>(idx + o * V);
#pragma unroll
    for (unsigned j = 0; j < V; j += 4) {
      const float4 f = s4[j / 4];
      m[j] = (int)f.x, m[j + 1] = (int)f.y, m[j + 2] = (int)f.z, m[j + 3] = (int)f.w;
    }
  }
}

/* NHWC with C a multiple of V = ct_v16<T>::V: a thread takes V channels of
 * one output (forward) or input (backward) position, 16 bytes a load.
 * n: vectors. */
template <typename T, typename M>
__global__ static void fwd_v16(unsigned n, ct_pool_geom g, const T *x, T *y, M *idx) {
  constexpr unsigned V = ct_v16<T>::V;
  const unsigned CV = (unsigned)g.C / V;
  LOOP(unsigned, i, n) {
    const unsigned cv = i % CV, q = i / CV, b = q % (unsigned)g.PW, r = q / (unsigned)g.PW;
    const unsigned a = r % (unsigned)g.PH, nn = r / (unsigned)g.PH;
    const int hs = (int)a * g.sh - g.ph, ws = (int)b * g.sw - g.pw;
    const int h0 = max(hs, 0), w0 = max(ws, 0);
    const int h1 = min(min(hs + g.kh, g.H + g.ph), g.H), w1 = min(min(ws + g.kw, g.W + g.pw), g.W);
    float acc[V];
    int arg[V];
#pragma unroll
    for (unsigned j = 0; j < V; j++) acc[j] = g.method == POOL_MAX ? -FLT_MAX : 0.0f, arg[j] = -1;
    for (int h = h0; h < h1; h++)
      for (int w = w0; w < w1; w++) {
        const ct_v16<T> v = ct_v16<T>::load(x, (((size_t)nn * g.H + h) * g.W + w) * CV + cv);
#pragma unroll
        for (unsigned j = 0; j < V; j++) {
          if (g.method != POOL_MAX) acc[j] += v[j];
          else if (v[j] > acc[j]) acc[j] = v[j], arg[j] = arg_code<M>(g, h, w, hs, ws);
        }
      }
    const int size = g.method == POOL_MAX ? 1 : divisor(g, (int)a, (int)b);
    ct_v16<T> o;
#pragma unroll
    for (unsigned j = 0; j < V; j++) {
      float out = g.method == POOL_MAX ? acc[j] : size > 0 ? acc[j] / size : 0.0f;
      if (g.bias) out += g.bias[cv * V + j];
      o.set(j, g.relu_top ? fmaxf(out, 0.0f) : out);
    }
    o.store(y, i);
    if (g.method == POOL_MAX) store_args<M, V>(idx, i, arg);
  }
}

template <typename T, typename M>
__global__ static void bwd_v16(unsigned n, ct_pool_geom g, const T *x, const T *y, const T *dy,
                               const M *idx, T *dx) {
  constexpr unsigned V = ct_v16<T>::V;
  const unsigned CV = (unsigned)g.C / V;
  LOOP(unsigned, i, n) {
    const unsigned cv = i % CV, q = i / CV, b = q % (unsigned)g.W, r = q / (unsigned)g.W;
    const unsigned a = r % (unsigned)g.H, nn = r / (unsigned)g.H;
    int ph0, ph1, pw0, pw1;
    covering((int)a, g.ph, g.kh, g.sh, g.PH, &ph0, &ph1);
    covering((int)b, g.pw, g.kw, g.sw, g.PW, &pw0, &pw1);
    float grad[V];
#pragma unroll
    for (unsigned j = 0; j < V; j++) grad[j] = 0.0f;
    for (int ph = ph0; ph < ph1; ph++)
      for (int pw = pw0; pw < pw1; pw++) {
        const size_t o = (((size_t)nn * g.PH + ph) * g.PW + pw) * CV + cv;
        const ct_v16<T> d = ct_v16<T>::load(dy, o);
        ct_v16<T> top = d;
        if (g.relu_top) top = ct_v16<T>::load(y, o);
        if (g.method == POOL_MAX) {
          int m[V];
          load_args<M, V>(idx, o, m);
          const int self = arg_code<M>(g, (int)a, (int)b, ph * g.sh - g.ph, pw * g.sw - g.pw);
#pragma unroll
          for (unsigned j = 0; j < V; j++)
            if (m[j] == self && !(g.relu_top && !(top[j] > 0.0f))) grad[j] += d[j];
        } else {
          const int size = divisor(g, ph, pw);
#pragma unroll
          for (unsigned j = 0; j < V; j++)
            if (size > 0 && !(g.relu_top && !(top[j] > 0.0f))) grad[j] += d[j] / size;
        }
      }
    ct_v16<T> xv;
    if (g.relu_bottom) xv = ct_v16<T>::load(x, i);
    ct_v16<T> out;
#pragma unroll
    for (unsigned j = 0; j < V; j++) out.set(j, g.relu_bottom && !(xv[j] > 0.0f) ? 0.0f : grad[j]);
    out.store(dx, i);
  }
}

/* Whether the NHWC vector kernels take g: V | C, 32-bit indices, every
 * pointer 16-byte aligned. */
template <typename T>
static bool vectors_take(const ct_pool_geom *g, bool nhwc, const void *a, const void *b,
                         const void *c, const void *d) {
  return nhwc && g->C % ct_v16<T>::V == 0 && (size_t)g->N * g->C * g->H * g->W < 0x7fffffffu &&
         (size_t)g->N * g->C * g->PH * g->PW < 0x7fffffffu && ct_v16_fits(16, 1, a, b, c, d);
}

#define GRID(n) ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream

/* Whether every tensor of g has fewer than 2^31 values. */
static bool fits_32(const ct_pool_geom *g) {
  return (size_t)g->N * g->C * g->H * g->W < 0x7fffffffu &&
         (size_t)g->N * g->C * g->PH * g->PW < 0x7fffffffu;
}

template <typename T, typename M>
static void forward_t(ct_context *ctx, const ct_pool_geom *g, bool nhwc, const void *x, void *y,
                      M *idx, size_t n) {
  if (vectors_take<T>(g, nhwc, x, y, idx, NULL)) {
    const unsigned nv = (unsigned)(n / ct_v16<T>::V);
    fwd_v16<T, M><<<GRID(nv)>>>(nv, *g, (const T *)x, (T *)y, idx);
  } else if (fits_32(g))
    fwd_k<T, unsigned, M><<<GRID(n)>>>((unsigned)n, *g, nhwc, (const T *)x, (T *)y, idx);
  else
    fwd_k<T, size_t, M><<<GRID(n)>>>(n, *g, nhwc, (const T *)x, (T *)y, idx);
  CT_CUDA_LAUNCH_CHECK();
}

template <typename T, typename M>
static void backward_t(ct_context *ctx, const ct_pool_geom *g, bool nhwc, const void *x,
                       const void *y, const void *dy, const M *idx, void *dx, size_t n) {
  if (vectors_take<T>(g, nhwc, x, y, dy, idx) && ct_v16_fits(16, 1, dx, NULL, NULL, NULL)) {
    const unsigned nv = (unsigned)(n / ct_v16<T>::V);
    bwd_v16<T, M><<<GRID(nv)>>>(nv, *g, (const T *)x, (const T *)y, (const T *)dy, idx, (T *)dx);
  } else if (fits_32(g))
    bwd_k<T, unsigned, M><<<GRID(n)>>>((unsigned)n, *g, nhwc, (const T *)x, (const T *)y,
                                       (const T *)dy, idx, (T *)dx);
  else
    bwd_k<T, size_t, M><<<GRID(n)>>>(n, *g, nhwc, (const T *)x, (const T *)y, (const T *)dy, idx,
                                     (T *)dx);
  CT_CUDA_LAUNCH_CHECK();
}


template <typename M>
static void forward_m(ct_context *ctx, const ct_pool_geom *g, ct_dtype t, bool nhwc, const void *x,
                      void *y, M *idx, size_t n) {
  switch (t) {
    case CT_BF16: forward_t<__nv_bfloat16, M>(ctx, g, nhwc, x, y, idx, n); break;
    case CT_F16: forward_t<__half, M>(ctx, g, nhwc, x, y, idx, n); break;
    default: forward_t<float, M>(ctx, g, nhwc, x, y, idx, n);
  }
}

template <typename M>
static void backward_m(ct_context *ctx, const ct_pool_geom *g, ct_dtype t, bool nhwc,
                       const void *x, const void *y, const void *dy, const M *idx, void *dx,
                       size_t n) {
  switch (t) {
    case CT_BF16: backward_t<__nv_bfloat16, M>(ctx, g, nhwc, x, y, dy, idx, dx, n); break;
    case CT_F16: backward_t<__half, M>(ctx, g, nhwc, x, y, dy, idx, dx, n); break;
    default: backward_t<float, M>(ctx, g, nhwc, x, y, dy, idx, dx, n);
  }
}

extern "C" void ct_pool_forward_gpu_typed(ct_context *ctx, const ct_pool_geom *g, ct_dtype t,
                                          bool nhwc, const void *x, void *y, void *idx) {
  const size_t n = (size_t)g->N * g->C * g->PH * g->PW;
  if (!n) return;
  CT_ASSERT(g->method == POOL_MAX || g->method == POOL_AVE);
  if (ct_pool_typed_arg_bytes(g) == 1)
    forward_m<unsigned char>(ctx, g, t, nhwc, x, y, (unsigned char *)idx, n);
  else
    forward_m<float>(ctx, g, t, nhwc, x, y, (float *)idx, n);
}

extern "C" void ct_pool_backward_gpu_typed(ct_context *ctx, const ct_pool_geom *g, ct_dtype t,
                                           bool nhwc, const void *x, const void *y, const void *dy,
                                           const void *idx, void *dx) {
  const size_t n = (size_t)g->N * g->C * g->H * g->W;
  if (!n) return;
  CT_ASSERT(g->method == POOL_MAX || g->method == POOL_AVE);
  if (ct_pool_typed_arg_bytes(g) == 1)
    backward_m<unsigned char>(ctx, g, t, nhwc, x, y, dy, (const unsigned char *)idx, dx, n);
  else
    backward_m<float>(ctx, g, t, nhwc, x, y, dy, (const float *)idx, dx, n);
}
