/* Depthwise convolution kernels: see conv_depthwise.h.
 *
 * Shapes: x (N, C, H, W), y (N, K, P, Q) with K = M C (M filters per
 * channel; output channel k reads input channel k / M), taps R x S, in NCHW
 * or NHWC.  Forward: one thread per output.  Backward data: one thread per
 * input, gathering the outputs whose windows hold it.  Filter gradient: each
 * block sums one slice of the N P output rows for its channels with every
 * tap in registers, the slices' sums go to scratch, and a second kernel adds
 * them in slice order into dw. */
#include "gpu/gpu.h"
#include "layers/conv/conv_depthwise.h"
#include "math/typed.cuh"

struct dw_geom {
  int N, C, H, W;  /* x */
  int K, P, Q;     /* y */
  int M;           /* K / C */
  int R, S;        /* taps */
  int sh, sw, ph, pw, dh, dw;
};


static dw_geom geom_of(const ct_conv *c) {
  dw_geom g;
  g.N = c->num;
  g.C = c->x_channels;
  g.H = c->geom.in[0];
  g.W = c->geom.in[1];
  g.K = c->y_channels;
  g.P = c->geom.out[0];
  g.Q = c->geom.out[1];
  g.M = g.K / g.C;
  g.R = c->geom.kernel[0];
  g.S = c->geom.kernel[1];
  g.sh = c->geom.stride[0];
  g.sw = c->geom.stride[1];
  g.ph = c->geom.pad[0];
  g.pw = c->geom.pad[1];
  g.dh = c->geom.dilation[0];
  g.dw = c->geom.dilation[1];
  return g;
}

extern "C" bool ct_conv_dw_fits(const ct_conv *c) {
  if (c->reverse || c->nspatial != 2 || c->group < 2 || c->group != c->x_channels) return false;
  if (c->y_channels % c->group != 0) return false;
  if (c->geom.kernel[0] * c->geom.kernel[1] > CT_CONV_DW_MAX_TAPS) return false;
  const size_t x = (size_t)c->num * c->x_channels * c->x_spatial;
  const size_t y = (size_t)c->num * c->y_channels * c->y_spatial;
  return x > 0 && y > 0 && x < (1u << 31) && y < (1u << 31);
}

/* ---------------------------------------------------------------- forward */

/* (n, c, a, b) of flat index i of an (N, C, A, B) tensor in its order
 * (NHWC: c fastest). */
struct dw_place {
  unsigned n, c, a, b;
};
template <bool NHWC>
__device__ static __forceinline__ dw_place place_of(unsigned i, unsigned C, unsigned A, unsigned B) {
  dw_place p;
  if (NHWC) {
    unsigned q = i / C;
    p.c = i - q * C;
    const unsigned r = q / B;
    p.b = q - r * B;
    q = r / A;
    p.a = r - q * A;
    p.n = q;
  } else {
    unsigned q = i / B;
    p.b = i - q * B;
    const unsigned r = q / A;
    p.a = q - r * A;
    q = r / C;
    p.c = r - q * C;
    p.n = q;
  }
  return p;
}

template <typename T, bool NHWC>
__global__ static void dw_forward(dw_geom g, const T *__restrict__ x, const float *__restrict__ w,
                                  const float *__restrict__ bias, T *__restrict__ y, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const dw_place o = place_of<NHWC>(i, g.K, g.P, g.Q);
    const unsigned nimg = o.n, k = o.c, p = o.a, q = o.b, ch = k / g.M;
    const int h0 = (int)p * g.sh - g.ph, w0 = (int)q * g.sw - g.pw;
    const float *wk = w + (size_t)k * g.R * g.S;
    float acc = bias ? bias[k] : 0.0f;
    for (int a = 0; a < g.R; a++) {
      const int h = h0 + a * g.dh;
      if (h < 0 || h >= g.H) continue;
      for (int s = 0; s < g.S; s++) {
        const int v = w0 + s * g.dw;
        if (v < 0 || v >= g.W) continue;
        const size_t at = NHWC ? (((size_t)nimg * g.H + h) * g.W + v) * g.C + ch
                               : (((size_t)nimg * g.C + ch) * g.H + h) * g.W + v;
        acc += ct_ld(x[at]) * wk[a * g.S + s];
      }
    }
    y[i] = ct_st<T>(acc);
  }
}

/* ---------------------------------------------------------------- backward data */

template <typename T, bool NHWC>
__global__ static void dw_backward_data(dw_geom g, const T *__restrict__ dy,
                                        const float *__restrict__ w, T *__restrict__ dx,
                                        unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const dw_place in = place_of<NHWC>(i, g.C, g.H, g.W);
    const unsigned nimg = in.n, ch = in.c, h = in.a, v = in.b;
    float acc = 0.0f;
    for (int a = 0; a < g.R; a++) {
      const int pn = (int)h + g.ph - a * g.dh; /* p * sh */
      if (pn < 0 || pn % g.sh) continue;
      const int p = pn / g.sh;
      if (p >= g.P) continue;
      for (int s = 0; s < g.S; s++) {
        const int qn = (int)v + g.pw - s * g.dw;
        if (qn < 0 || qn % g.sw) continue;
        const int q = qn / g.sw;
        if (q >= g.Q) continue;
        for (int m = 0; m < g.M; m++) {
          const unsigned k = ch * g.M + m;
          const size_t at = NHWC ? (((size_t)nimg * g.P + p) * g.Q + q) * g.K + k
                                 : (((size_t)nimg * g.K + k) * g.P + p) * g.Q + q;
          acc += ct_ld(dy[at]) * w[((size_t)k * g.R + a) * g.S + s];
        }
      }
    }
    dx[i] = ct_st<T>(acc);
  }
}

/* ---------------------------------------------------------------- filter gradient */

/* The taps of output channel k at output (nimg, p, q) times dy into acc. */
template <typename T, bool NHWC, int MAXT>
__device__ static __forceinline__ void add_taps(const dw_geom &g, const T *__restrict__ x,
                                                unsigned nimg, int p, int q, unsigned k, float d,
                                                float *acc) {
  const unsigned ch = k / g.M;
  const int h0 = p * g.sh - g.ph, w0 = q * g.sw - g.pw;
#pragma unroll
  for (int t = 0; t < MAXT; t++) {
    if (t >= g.R * g.S) break;
    const int a = t / g.S, s = t - (t / g.S) * g.S;
    const int h = h0 + a * g.dh, v = w0 + s * g.dw;
    if (h < 0 || h >= g.H || v < 0 || v >= g.W) continue;
    const size_t at = NHWC ? (((size_t)nimg * g.H + h) * g.W + v) * g.C + ch
                           : (((size_t)nimg * g.C + ch) * g.H + h) * g.W + v;
    acc[t] += d * ct_ld(x[at]);
  }
}

/* NHWC: block (32 channels, 8 row phases), grid (channel tiles, slices);
 * slice z sums output rows (nimg, p) [z L, z L + L) of N P, L = rows_per. */
template <typename T, int MAXT>
__global__ static void dw_wgrad_nhwc(dw_geom g, const T *__restrict__ x, const T *__restrict__ dy,
                                     unsigned rows_per, float *__restrict__ partial) {
  __shared__ float red[8][32][MAXT];
  const unsigned k = blockIdx.x * 32 + threadIdx.x;
  const unsigned rows = (unsigned)g.N * g.P;
  const unsigned r0 = blockIdx.y * rows_per, r1 = min(rows, r0 + rows_per);
  const int taps = g.R * g.S;
  float acc[MAXT];
#pragma unroll
  for (int t = 0; t < MAXT; t++) acc[t] = 0.0f;
  if (k < (unsigned)g.K) {
    for (unsigned row = r0 + threadIdx.y; row < r1; row += 8) {
      const unsigned nimg = row / g.P, p = row - nimg * g.P;
      const T *dyr = dy + (size_t)row * g.Q * g.K + k;
      for (int q = 0; q < g.Q; q++)
        add_taps<T, true, MAXT>(g, x, nimg, (int)p, q, k, ct_ld(dyr[(size_t)q * g.K]), acc);
    }
  }
#pragma unroll
  for (int t = 0; t < MAXT; t++) red[threadIdx.y][threadIdx.x][t] = acc[t];
  __syncthreads();
  if (threadIdx.y == 0 && k < (unsigned)g.K) {
    for (int t = 0; t < taps; t++) {
      float sum = 0.0f;
      for (int j = 0; j < 8; j++) sum += red[j][threadIdx.x][t];
      partial[((size_t)blockIdx.y * g.K + k) * taps + t] = sum;
    }
  }
}

/* NCHW: a block of 256 threads per (output channel, slice); the slice's
 * outputs of that channel, neighbouring threads on neighbouring q. */
template <typename T, int MAXT>
__global__ static void dw_wgrad_nchw(dw_geom g, const T *__restrict__ x, const T *__restrict__ dy,
                                     unsigned rows_per, float *__restrict__ partial) {
  __shared__ float red[MAXT][256];
  const unsigned k = blockIdx.x;
  const unsigned rows = (unsigned)g.N * g.P;
  const unsigned r0 = blockIdx.y * rows_per, r1 = min(rows, r0 + rows_per);
  const int taps = g.R * g.S;
  float acc[MAXT];
#pragma unroll
  for (int t = 0; t < MAXT; t++) acc[t] = 0.0f;
  const unsigned count = (r1 > r0 ? r1 - r0 : 0) * (unsigned)g.Q;
  for (unsigned e = threadIdx.x; e < count; e += 256) {
    const unsigned rr = e / g.Q, q = e - rr * g.Q, row = r0 + rr;
    const unsigned nimg = row / g.P, p = row - nimg * g.P;
    const float d = ct_ld(dy[(((size_t)nimg * g.K + k) * g.P + p) * g.Q + q]);
    add_taps<T, false, MAXT>(g, x, nimg, (int)p, (int)q, k, d, acc);
  }
#pragma unroll
  for (int t = 0; t < MAXT; t++) red[t][threadIdx.x] = acc[t];
  __syncthreads();
  for (unsigned half = 128; half > 0; half >>= 1) {
    if (threadIdx.x < half)
      for (int t = 0; t < taps; t++) red[t][threadIdx.x] += red[t][threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x < (unsigned)taps)
    partial[((size_t)blockIdx.y * g.K + k) * taps + threadIdx.x] = red[threadIdx.x][0];
}

/* dw[k taps + t] += the slices' partial sums, in slice order. */
__global__ static void dw_wgrad_sum(unsigned kt, int slices, const float *__restrict__ partial,
                                    float *__restrict__ dw) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < kt; i += blockDim.x * gridDim.x) {
    float sum = 0.0f;
    for (int z = 0; z < slices; z++) sum += partial[(size_t)z * kt + i];
    dw[i] += sum;
  }
}

/* ---------------------------------------------------------------- NHWC, 16 bytes a thread */

/* NHWC with one filter per channel (M = 1) and C a multiple of V, the
 * values in 16 bytes of T: a thread takes V neighbouring channels of one
 * position with 16-byte loads and stores, and the weights come transposed
 * to (taps, C) (wt, dw_transpose), so that a tap's V weights are
 * neighbours too.  Forward and backward data add the same products in the
 * same order as the kernels above. */
__global__ static void dw_transpose(unsigned K, unsigned taps, const float *__restrict__ w,
                                    float *__restrict__ wt) {
  const unsigned n = K * taps;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const unsigned k = i / taps, t = i - k * taps;
    wt[(size_t)t * K + k] = w[i];
  }
}

template <typename T>
__global__ static void dw_forward_vec(dw_geom g, const T *__restrict__ x,
                                      const float *__restrict__ wt,
                                      const float *__restrict__ bias, T *__restrict__ y,
                                      unsigned n) {
  constexpr unsigned V = ct_v16<T>::V;
  const unsigned CV = g.C / V;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const dw_place o = place_of<true>(i, CV, g.P, g.Q);
    const unsigned nimg = o.n, cv = o.c, p = o.a, q = o.b, c0 = cv * V;
    float acc[V];
#pragma unroll
    for (unsigned j = 0; j < V; j++) acc[j] = bias ? bias[c0 + j] : 0.0f;
    const int h0 = (int)p * g.sh - g.ph, w0 = (int)q * g.sw - g.pw;
    for (int a = 0; a < g.R; a++) {
      const int h = h0 + a * g.dh;
      if (h < 0 || h >= g.H) continue;
      for (int s = 0; s < g.S; s++) {
        const int v = w0 + s * g.dw;
        if (v < 0 || v >= g.W) continue;
        const ct_v16<T> xv = ct_v16<T>::load(x, (((size_t)nimg * g.H + h) * g.W + v) * CV + cv);
        const float *wk = wt + (size_t)(a * g.S + s) * g.C + c0;
#pragma unroll
        for (unsigned j = 0; j < V; j++) acc[j] += xv[j] * wk[j];
      }
    }
    ct_v16<T> out;
#pragma unroll
    for (unsigned j = 0; j < V; j++) out.set(j, acc[j]);
    out.store(y, i);
  }
}

template <typename T>
__global__ static void dw_backward_data_vec(dw_geom g, const T *__restrict__ dy,
                                            const float *__restrict__ wt, T *__restrict__ dx,
                                            unsigned n) {
  constexpr unsigned V = ct_v16<T>::V;
  const unsigned CV = g.C / V;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const dw_place in = place_of<true>(i, CV, g.H, g.W);
    const unsigned nimg = in.n, cv = in.c, h = in.a, v = in.b, c0 = cv * V;
    float acc[V];
#pragma unroll
    for (unsigned j = 0; j < V; j++) acc[j] = 0.0f;
    for (int a = 0; a < g.R; a++) {
      const int pn = (int)h + g.ph - a * g.dh;
      if (pn < 0 || pn % g.sh) continue;
      const int p = pn / g.sh;
      if (p >= g.P) continue;
      for (int s = 0; s < g.S; s++) {
        const int qn = (int)v + g.pw - s * g.dw;
        if (qn < 0 || qn % g.sw) continue;
        const int q = qn / g.sw;
        if (q >= g.Q) continue;
        const ct_v16<T> d = ct_v16<T>::load(dy, (((size_t)nimg * g.P + p) * g.Q + q) * CV + cv);
        const float *wk = wt + (size_t)(a * g.S + s) * g.C + c0;
#pragma unroll
        for (unsigned j = 0; j < V; j++) acc[j] += d[j] * wk[j];
      }
    }
    ct_v16<T> out;
#pragma unroll
    for (unsigned j = 0; j < V; j++) out.set(j, acc[j]);
    out.store(dx, i);
  }
}

/* The filter gradient, V channels a thread and every tap (at most 9) in
 * registers: block (bx channel vectors, by row phases), bx by = 128, grid
 * (channel blocks, slices) as dw_wgrad_nhwc. */
#define DW_VEC_THREADS 128
template <typename T>
__global__ static void dw_wgrad_vec(dw_geom g, const T *__restrict__ x, const T *__restrict__ dy,
                                    unsigned rows_per, float *__restrict__ partial) {
  constexpr unsigned V = ct_v16<T>::V;
  constexpr int MAXT = 9;
  __shared__ float red[DW_VEC_THREADS][V * MAXT];
  const unsigned CV = g.C / V, bx = blockDim.x, by = blockDim.y;
  const unsigned cv = blockIdx.x * bx + threadIdx.x;
  const unsigned rows = (unsigned)g.N * g.P;
  const unsigned r0 = blockIdx.y * rows_per, r1 = min(rows, r0 + rows_per);
  const int taps = g.R * g.S;
  float acc[V * MAXT];
#pragma unroll
  for (unsigned e = 0; e < V * MAXT; e++) acc[e] = 0.0f;
  if (cv < CV) {
    for (unsigned row = r0 + threadIdx.y; row < r1; row += by) {
      const unsigned nimg = row / g.P, p = row - nimg * g.P;
      const int h0 = (int)p * g.sh - g.ph;
      for (int q = 0; q < g.Q; q++) {
        const ct_v16<T> d = ct_v16<T>::load(dy, ((size_t)row * g.Q + q) * CV + cv);
        const int w0 = q * g.sw - g.pw;
#pragma unroll
        for (int t = 0; t < MAXT; t++) {
          if (t >= taps) break;
          const int a = t / g.S, s = t - (t / g.S) * g.S;
          const int h = h0 + a * g.dh, v = w0 + s * g.dw;
          if (h < 0 || h >= g.H || v < 0 || v >= g.W) continue;
          const ct_v16<T> xv = ct_v16<T>::load(x, (((size_t)nimg * g.H + h) * g.W + v) * CV + cv);
#pragma unroll
          for (unsigned j = 0; j < V; j++) acc[t * V + j] += d[j] * xv[j];
        }
      }
    }
  }
  const unsigned tid = threadIdx.y * bx + threadIdx.x;
#pragma unroll
  for (unsigned e = 0; e < V * MAXT; e++) red[tid][e] = acc[e];
  __syncthreads();
  if (threadIdx.y == 0 && cv < CV) {
    for (int t = 0; t < taps; t++)
      for (unsigned j = 0; j < V; j++) {
        float sum = 0.0f;
        for (unsigned yy = 0; yy < by; yy++) sum += red[yy * bx + threadIdx.x][t * V + j];
        partial[((size_t)blockIdx.y * g.K + cv * V + j) * taps + t] = sum;
      }
  }
}

/* ---------------------------------------------------------------- host */

/* Which kernels run a layer: the scalar ones in NCHW or NHWC, or the
 * 16-byte ones (NHWC, M = 1, C a multiple of V). */
enum dw_kind { DW_NCHW, DW_NHWC, DW_VEC };

static dw_kind kind_of(const dw_geom &g, ct_dtype type, bool nhwc) {
  const unsigned V = 16 / (unsigned)ct_dtype_size(type);
  if (nhwc && g.M == 1 && g.C % V == 0) return DW_VEC;
  return nhwc ? DW_NHWC : DW_NCHW;
}

/* The filter gradient's block shape: the vector kernel's channel vectors
 * across (a power of two up to 32) and row phases down. */
static dim3 vec_block(const dw_geom &g, ct_dtype type) {
  const unsigned CV = (unsigned)g.C / (16 / (unsigned)ct_dtype_size(type));
  unsigned bx = 1;
  while (bx * 2 <= CV && bx < 32) bx *= 2;
  return dim3(bx, DW_VEC_THREADS / bx);
}

/* Blocks of the filter gradient's first kernel along channels. */
static unsigned channel_blocks(const dw_geom &g, dw_kind kind, ct_dtype type) {
  if (kind == DW_VEC) {
    const unsigned CV = (unsigned)g.C / (16 / (unsigned)ct_dtype_size(type));
    return (CV + vec_block(g, type).x - 1) / vec_block(g, type).x;
  }
  return kind == DW_NHWC ? (unsigned)(g.K + 31) / 32 : (unsigned)g.K;
}

/* The vector filter gradient keeps 9 taps in registers: larger windows
 * take the scalar NHWC kernel. */
static dw_kind wgrad_kind(const dw_geom &g, ct_dtype type, bool nhwc) {
  const dw_kind k = kind_of(g, type, nhwc);
  return k == DW_VEC && g.R * g.S > 9 ? DW_NHWC : k;
}

/* Slices of the N P rows: about 4 blocks per multiprocessor of a large GPU
 * (132) in all, each slice at least 4 rows. */
static int slices_of(const dw_geom &g, dw_kind kind, ct_dtype type) {
  const unsigned rows = (unsigned)g.N * g.P, cb = channel_blocks(g, kind, type);
  unsigned s = (4u * 132u + cb - 1) / cb;
  if (s > (rows + 3) / 4) s = (rows + 3) / 4;
  return s < 1 ? 1 : (int)s;
}

struct ct_conv_dw {
  float *partial;      /* slices x K x taps */
  size_t partial_cap;  /* floats */
  float *bias_scratch; /* ct_bias_grad_scratch floats */
  size_t bias_cap;
  float *wt;           /* the weights as (taps, K), for the vector kernels */
  size_t wt_cap;
};

static void grow(float **buf, size_t *cap, size_t want, int device) {
  if (want <= *cap) return;
  if (*buf) ct_mem_free(device, *buf);
  *buf = (float *)ct_mem_alloc(device, want * sizeof(float));
  *cap = want;
}

extern "C" ct_conv_dw *ct_conv_dw_plan(ct_conv_dw *old, const ct_conv *c, int device) {
  ct_conv_dw *d = old ? old : (ct_conv_dw *)ct_xcalloc(1, sizeof *d);
  const dw_geom g = geom_of(c);
  /* enough for any type and order, so that neither needs more */
  int slices = 1;
  const ct_dtype types[3] = {CT_F32, CT_BF16, CT_F16};
  for (int t = 0; t < 3; t++)
    for (int o = 0; o < 2; o++) {
      const int sl = slices_of(g, wgrad_kind(g, types[t], o), types[t]);
      slices = sl > slices ? sl : slices;
    }
  const size_t taps = (size_t)g.R * g.S;
  grow(&d->partial, &d->partial_cap, (size_t)slices * g.K * taps, device);
  const size_t b1 = ct_bias_grad_scratch(g.N * g.P * g.Q, g.K, 1);
  const size_t b2 = ct_bias_grad_scratch(g.N, g.K, (size_t)g.P * g.Q);
  grow(&d->bias_scratch, &d->bias_cap, b1 > b2 ? b1 : b2, device);
  grow(&d->wt, &d->wt_cap, taps * g.K, device);
  return d;
}

extern "C" void ct_conv_dw_free(ct_conv_dw *d, int device) {
  if (!d) return;
  if (d->partial) ct_mem_free(device, d->partial);
  if (d->bias_scratch) ct_mem_free(device, d->bias_scratch);
  if (d->wt) ct_mem_free(device, d->wt);
  free(d);
}

static void transpose_weights(cudaStream_t st, const dw_geom &g, const float *w, float *wt) {
  const unsigned n = (unsigned)g.K * g.R * g.S;
  dw_transpose<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)g.K, (unsigned)(g.R * g.S),
                                                              w, wt);
  CT_CUDA_LAUNCH_CHECK();
}

template <typename T>
static void forward_t(cudaStream_t st, const dw_geom &g, dw_kind kind, const void *x,
                      const float *w, const float *wt, const float *bias, void *y) {
  const size_t ny = (size_t)g.N * g.K * g.P * g.Q;
  if (kind == DW_VEC) {
    const unsigned n = (unsigned)(ny / ct_v16<T>::V);
    dw_forward_vec<T><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(g, (const T *)x, wt, bias, (T *)y, n);
  } else if (kind == DW_NHWC) {
    dw_forward<T, true><<<ct_cuda_blocks(ny), CT_CUDA_THREADS, 0, st>>>(g, (const T *)x, w, bias, (T *)y, (unsigned)ny);
  } else {
    dw_forward<T, false><<<ct_cuda_blocks(ny), CT_CUDA_THREADS, 0, st>>>(g, (const T *)x, w, bias, (T *)y, (unsigned)ny);
  }
  CT_CUDA_LAUNCH_CHECK();
}

template <typename T>
static void backward_data_t(cudaStream_t st, const dw_geom &g, dw_kind kind, const void *dy,
                            const float *w, const float *wt, void *dx) {
  const size_t nx = (size_t)g.N * g.C * g.H * g.W;
  if (kind == DW_VEC) {
    const unsigned n = (unsigned)(nx / ct_v16<T>::V);
    dw_backward_data_vec<T><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(g, (const T *)dy, wt, (T *)dx, n);
  } else if (kind == DW_NHWC) {
    dw_backward_data<T, true><<<ct_cuda_blocks(nx), CT_CUDA_THREADS, 0, st>>>(g, (const T *)dy, w, (T *)dx, (unsigned)nx);
  } else {
    dw_backward_data<T, false><<<ct_cuda_blocks(nx), CT_CUDA_THREADS, 0, st>>>(g, (const T *)dy, w, (T *)dx, (unsigned)nx);
  }
  CT_CUDA_LAUNCH_CHECK();
}

template <typename T>
static void wgrad_t(cudaStream_t st, const dw_geom &g, ct_dtype type, dw_kind kind, int slices,
                    const void *x, const void *dy, float *partial) {
  const unsigned rows = (unsigned)g.N * g.P;
  const unsigned rows_per = (rows + slices - 1) / slices;
  const dim3 grid(channel_blocks(g, kind, type), (unsigned)slices);
  const bool small = g.R * g.S <= 9;
  if (kind == DW_VEC)
    dw_wgrad_vec<T><<<grid, vec_block(g, type), 0, st>>>(g, (const T *)x, (const T *)dy, rows_per, partial);
  else if (kind == DW_NHWC && small)
    dw_wgrad_nhwc<T, 9><<<grid, dim3(32, 8), 0, st>>>(g, (const T *)x, (const T *)dy, rows_per, partial);
  else if (kind == DW_NHWC)
    dw_wgrad_nhwc<T, CT_CONV_DW_MAX_TAPS><<<grid, dim3(32, 8), 0, st>>>(g, (const T *)x, (const T *)dy, rows_per, partial);
  else if (small)
    dw_wgrad_nchw<T, 9><<<grid, 256, 0, st>>>(g, (const T *)x, (const T *)dy, rows_per, partial);
  else
    dw_wgrad_nchw<T, CT_CONV_DW_MAX_TAPS><<<grid, 256, 0, st>>>(g, (const T *)x, (const T *)dy, rows_per, partial);
  CT_CUDA_LAUNCH_CHECK();
}

#define DW_DISPATCH(type, call)                                   \
  switch (type) {                                                 \
    case CT_F32: call(float); break;                              \
    case CT_BF16: call(__nv_bfloat16); break;                     \
    case CT_F16: call(__half); break;                             \
    default: CT_ASSERT(!"depthwise convolution: element type"); \
  }

/* The 16-byte kernels where kind_of allows them and every pointer is
 * 16-byte aligned. */
static dw_kind kind_for(const dw_geom &g, ct_dtype type, bool nhwc, const void *a, const void *b) {
  const dw_kind k = kind_of(g, type, nhwc);
  if (k == DW_VEC && (((uintptr_t)a | (uintptr_t)b) & 15)) return DW_NHWC;
  return k;
}

extern "C" void ct_conv_dw_forward(ct_context *ctx, ct_conv_dw *d, const ct_conv *c, ct_dtype type,
                                   bool nhwc, const void *x, const float *w, const float *bias,
                                   void *y) {
  const dw_geom g = geom_of(c);
  const cudaStream_t st = (cudaStream_t)ctx->stream;
  const dw_kind kind = kind_for(g, type, nhwc, x, y);
  if (kind == DW_VEC) transpose_weights(st, g, w, d->wt);
#define FWD(T) forward_t<T>(st, g, kind, x, w, d->wt, bias, y)
  DW_DISPATCH(type, FWD)
#undef FWD
}

extern "C" void ct_conv_dw_backward_data(ct_context *ctx, ct_conv_dw *d, const ct_conv *c,
                                         ct_dtype type, bool nhwc, const void *dy, const float *w,
                                         void *dx) {
  const dw_geom g = geom_of(c);
  const cudaStream_t st = (cudaStream_t)ctx->stream;
  const dw_kind kind = kind_for(g, type, nhwc, dy, dx);
  if (kind == DW_VEC) transpose_weights(st, g, w, d->wt);
#define BWD(T) backward_data_t<T>(st, g, kind, dy, w, d->wt, dx)
  DW_DISPATCH(type, BWD)
#undef BWD
}

extern "C" void ct_conv_dw_backward_params(ct_context *ctx, ct_conv_dw *d, const ct_conv *c,
                                           ct_dtype type, bool nhwc, const void *x, const void *dy,
                                           float *dw, float *dbias) {
  const dw_geom g = geom_of(c);
  const cudaStream_t st = (cudaStream_t)ctx->stream;
  if (dw) {
    dw_kind kind = wgrad_kind(g, type, nhwc);
    if (kind == DW_VEC && kind_for(g, type, nhwc, x, dy) != DW_VEC) kind = DW_NHWC;
    const int slices = slices_of(g, kind, type);
    CT_ASSERT((size_t)slices * g.K * g.R * g.S <= d->partial_cap);
#define WG(T) wgrad_t<T>(st, g, type, kind, slices, x, dy, d->partial)
    DW_DISPATCH(type, WG)
#undef WG
    const unsigned kt = (unsigned)g.K * g.R * g.S;
    dw_wgrad_sum<<<ct_cuda_blocks(kt), CT_CUDA_THREADS, 0, st>>>(kt, slices, d->partial, dw);
    CT_CUDA_LAUNCH_CHECK();
  }
  if (dbias) {
    if (nhwc)
      ct_bias_grad_gpu_typed(ctx, type, dy, g.N * g.P * g.Q, g.K, 1, d->bias_scratch, dbias);
    else
      ct_bias_grad_gpu_typed(ctx, type, dy, g.N, g.K, (size_t)g.P * g.Q, d->bias_scratch, dbias);
  }
}
