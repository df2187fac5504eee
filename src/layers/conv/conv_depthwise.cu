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

struct ct_conv_dw {
  float *partial;      /* slices x K x taps */
  size_t partial_cap;  /* floats */
  float *bias_scratch; /* ct_bias_grad_scratch floats */
  size_t bias_cap;
  int slices;          /* of the N P output rows, for the filter gradient */
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

template <typename T, bool NHWC>
__global__ static void dw_forward(dw_geom g, const T *__restrict__ x, const float *__restrict__ w,
                                  const float *__restrict__ bias, T *__restrict__ y, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    unsigned k, p, q, b, r;
    if (NHWC) {
      r = i / g.K;
      k = i - r * g.K;
      b = r / g.Q;
      q = r - b * g.Q;
      r = b / g.P;
      p = b - r * g.P;
    } else {
      r = i / g.Q;
      q = i - r * g.Q;
      b = r / g.P;
      p = r - b * g.P;
      r = b / g.K;
      k = b - r * g.K;
    }
    const unsigned nimg = r, ch = k / g.M;
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
    unsigned ch, h, v, b, r;
    if (NHWC) {
      r = i / g.C;
      ch = i - r * g.C;
      b = r / g.W;
      v = r - b * g.W;
      r = b / g.H;
      h = b - r * g.H;
    } else {
      r = i / g.W;
      v = i - r * g.W;
      b = r / g.H;
      h = r - b * g.H;
      r = b / g.C;
      ch = b - r * g.C;
    }
    const unsigned nimg = r;
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

/* ---------------------------------------------------------------- host */

/* Blocks of the filter gradient's first kernel along channels. */
static unsigned channel_blocks(const dw_geom &g, bool nhwc) {
  return nhwc ? (unsigned)(g.K + 31) / 32 : (unsigned)g.K;
}

/* Slices of the N P rows: about 4 blocks per SM in all, each slice at least
 * 4 rows. */
static int slices_of(const dw_geom &g, bool nhwc) {
  const unsigned rows = (unsigned)g.N * g.P;
  const unsigned want = (4u * 132u + channel_blocks(g, nhwc) - 1) / channel_blocks(g, nhwc);
  unsigned s = want < 1 ? 1 : want;
  if (s > (rows + 3) / 4) s = (rows + 3) / 4;
  return s < 1 ? 1 : (int)s;
}

extern "C" ct_conv_dw *ct_conv_dw_plan(ct_conv_dw *old, const ct_conv *c, int device) {
  ct_conv_dw *d = old ? old : (ct_conv_dw *)ct_xcalloc(1, sizeof *d);
  const dw_geom g = geom_of(c);
  /* the larger of the two orders' needs, so a change of order needs nothing */
  const int slices = slices_of(g, false) > slices_of(g, true) ? slices_of(g, false) : slices_of(g, true);
  const size_t want = (size_t)slices * g.K * g.R * g.S;
  if (want > d->partial_cap) {
    if (d->partial) ct_mem_free(device, d->partial);
    d->partial = (float *)ct_mem_alloc(device, want * sizeof(float));
    d->partial_cap = want;
  }
  const size_t b1 = ct_bias_grad_scratch(g.N * g.P * g.Q, g.K, 1);
  const size_t b2 = ct_bias_grad_scratch(g.N, g.K, (size_t)g.P * g.Q);
  const size_t bias = b1 > b2 ? b1 : b2;
  if (bias > d->bias_cap) {
    if (d->bias_scratch) ct_mem_free(device, d->bias_scratch);
    d->bias_scratch = (float *)ct_mem_alloc(device, bias * sizeof(float));
    d->bias_cap = bias;
  }
  d->slices = slices;
  return d;
}

extern "C" void ct_conv_dw_free(ct_conv_dw *d, int device) {
  if (!d) return;
  if (d->partial) ct_mem_free(device, d->partial);
  if (d->bias_scratch) ct_mem_free(device, d->bias_scratch);
  free(d);
}

template <typename T>
static void forward_t(cudaStream_t st, const dw_geom &g, bool nhwc, const void *x, const float *w,
                      const float *bias, void *y) {
  const unsigned n = (unsigned)((size_t)g.N * g.K * g.P * g.Q);
  if (nhwc)
    dw_forward<T, true><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(g, (const T *)x, w, bias, (T *)y, n);
  else
    dw_forward<T, false><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(g, (const T *)x, w, bias, (T *)y, n);
  CT_CUDA_LAUNCH_CHECK();
}

template <typename T>
static void backward_data_t(cudaStream_t st, const dw_geom &g, bool nhwc, const void *dy,
                            const float *w, void *dx) {
  const unsigned n = (unsigned)((size_t)g.N * g.C * g.H * g.W);
  if (nhwc)
    dw_backward_data<T, true><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(g, (const T *)dy, w, (T *)dx, n);
  else
    dw_backward_data<T, false><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(g, (const T *)dy, w, (T *)dx, n);
  CT_CUDA_LAUNCH_CHECK();
}

template <typename T, int MAXT>
static void wgrad_t(cudaStream_t st, const dw_geom &g, bool nhwc, int slices, const void *x,
                    const void *dy, float *partial) {
  const unsigned rows = (unsigned)g.N * g.P;
  const unsigned rows_per = (rows + slices - 1) / slices;
  const dim3 grid(channel_blocks(g, nhwc), (unsigned)slices);
  if (nhwc)
    dw_wgrad_nhwc<T, MAXT><<<grid, dim3(32, 8), 0, st>>>(g, (const T *)x, (const T *)dy, rows_per, partial);
  else
    dw_wgrad_nchw<T, MAXT><<<grid, 256, 0, st>>>(g, (const T *)x, (const T *)dy, rows_per, partial);
  CT_CUDA_LAUNCH_CHECK();
}

#define DW_DISPATCH(type, call)                                   \
  switch (type) {                                                 \
    case CT_F32: call(float); break;                              \
    case CT_BF16: call(__nv_bfloat16); break;                     \
    case CT_F16: call(__half); break;                             \
    default: CT_ASSERT(!"depthwise convolution: element type"); \
  }

extern "C" void ct_conv_dw_forward(ct_context *ctx, const ct_conv *c, ct_dtype type, bool nhwc,
                                   const void *x, const float *w, const float *bias, void *y) {
  const dw_geom g = geom_of(c);
  const cudaStream_t st = (cudaStream_t)ctx->stream;
#define FWD(T) forward_t<T>(st, g, nhwc, x, w, bias, y)
  DW_DISPATCH(type, FWD)
#undef FWD
}

extern "C" void ct_conv_dw_backward_data(ct_context *ctx, const ct_conv *c, ct_dtype type,
                                         bool nhwc, const void *dy, const float *w, void *dx) {
  const dw_geom g = geom_of(c);
  const cudaStream_t st = (cudaStream_t)ctx->stream;
#define BWD(T) backward_data_t<T>(st, g, nhwc, dy, w, dx)
  DW_DISPATCH(type, BWD)
#undef BWD
}

extern "C" void ct_conv_dw_backward_params(ct_context *ctx, ct_conv_dw *d, const ct_conv *c,
                                           ct_dtype type, bool nhwc, const void *x, const void *dy,
                                           float *dw, float *dbias) {
  const dw_geom g = geom_of(c);
  const cudaStream_t st = (cudaStream_t)ctx->stream;
  if (dw) {
    const int slices = slices_of(g, nhwc);
    CT_ASSERT((size_t)slices * g.K * g.R * g.S <= d->partial_cap);
    const bool small = g.R * g.S <= 9;
#define WG(T) small ? wgrad_t<T, 9>(st, g, nhwc, slices, x, dy, d->partial) \
                    : wgrad_t<T, CT_CONV_DW_MAX_TAPS>(st, g, nhwc, slices, x, dy, d->partial)
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
