/* Winograd F(2x2, 5x5) convolution in strict FP32: the forward and backward
 * data directions of 5x5, stride-1 convolutions (cifar10_quick's three
 * layers), raced against cuDNN beside the implicit-GEMM kernels (see
 * conv_igemm.h and IG_WINO_CONFIGS in conv_igemm_impl.cuh).
 *
 * Each 2x2 block of outputs (a tile) is computed from the 6x6 input patch
 * under it as Y = A^T [(G g G^T) . (B^T d B)] A, with the interpolation
 * points 0, 1, -1, 2, -2 and infinity:
 *   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *          0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *   G   = [1/4 0 0 0 0; -1/6 (1 1 1 1 1); -1/6 (1 -1 1 -1 1);
 *          1/24 (1 2 4 8 16); 1/24 (1 -2 4 -8 16); 0 0 0 0 1]
 *   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1]
 * 36 multiplications per tile and channel pair instead of 100: in the
 * transformed domain the convolution is 36 independent products of
 * (output channels x input channels) by (input channels x tiles), summed in
 * FP32 with FMAs like any strict-FP32 GEMM.  The transforms round as well
 * (their coefficients reach 16/24 and 5), so results differ from a direct
 * sum by up to about 5e-6 of the largest value (tests/emu/wino-emu.sh's worst
 * case over its shapes; cuDNN's Winograd and FFT algorithms differ in the
 * same way in FP32).
 *
 * Two kernels per call: the filter transform into the workspace
 * (U[point][input channel][output channel]), then the fused kernel.  Its
 * block takes a rectangle of tiles of one image and the input channels a
 * chunk at a time, through a two-stage cp.async pipeline (the raw input
 * rectangle under the tiles and the chunk's U); transforms the patches in
 * shared memory (columns, then rows, one per thread); multiplies them with
 * U in registers; and transforms the products back.  Backward data is the
 * same convolution of dY with the filter turned 180 degrees, input and
 * output channels swapped, and pad 4 - pad.  Fixed order of sums
 * everywhere: deterministic.
 *
 * On an H100 (session 11, conv_bench, ms per call) the race picks them for
 * cifar10_quick's conv2 and conv3: conv2 forward 0.062 against 0.068 for
 * the best implicit GEMM and 0.067-0.086 for cuDNN's best; conv3 forward
 * 0.034-0.036 against 0.040 and 0.052, conv3 backward data 0.037-0.038
 * against 0.046 and 0.040-0.047.  They lose conv1 (3 input channels: the
 * transforms dominate).  That is about 21 TFLOP/s of direct-convolution
 * work, a third of the FMA peak.  The kernel is latency-bound: Nsight
 * Compute found no eligible warp in 54% of the cycles of a version with
 * one block per multiprocessor, and barriers separate the transform and
 * product phases.
 *
 * tests/emu/wino-emu.sh compiles the kernels of this file on the host
 * (WG_HOST_EMULATION) and runs them, thread by thread, against a double
 * reference. */
#ifndef WG_HOST_EMULATION
#include <stdint.h>
#include <string.h>

#include "gpu/gpu.h"
#include "layers/conv/conv_igemm.h"
#include "layers/conv/conv_igemm_impl.cuh"
extern "C" {
#include "core/log.h"
}
#define WG_LDG(p) __ldg(p)
#define WG_SMEM_DECL extern __shared__ __align__(16) float wg_smem[]
#endif

/* ---------------------------------------------------------------- transforms */

/* B^T d of one column (or row) of 6 values, in place. */
__host__ __device__ __forceinline__ void wg_bt(float &d0, float &d1, float &d2, float &d3,
                                               float &d4, float &d5) {
  const float a = d4 - d2, b = d3 - d1;
  const float o0 = fmaf(4.0f, d0, fmaf(-5.0f, d2, d4));
  const float o1 = fmaf(-4.0f, d1 + d2, d3 + d4);
  const float o2 = fmaf(4.0f, d1 - d2, d4 - d3);
  const float o3 = fmaf(2.0f, b, a);
  const float o4 = fmaf(-2.0f, b, a);
  const float o5 = fmaf(4.0f, d1, fmaf(-5.0f, d3, d5));
  d0 = o0;
  d1 = o1;
  d2 = o2;
  d3 = o3;
  d4 = o4;
  d5 = o5;
}

/* G g of 5 values into 6. */
__host__ __device__ __forceinline__ void wg_g(const float g[5], float u[6]) {
  const float e = g[0] + g[2] + g[4], o = g[1] + g[3];
  const float e2 = fmaf(16.0f, g[4], fmaf(4.0f, g[2], g[0])), o2 = fmaf(8.0f, g[3], 2.0f * g[1]);
  u[0] = 0.25f * g[0];
  u[1] = -(e + o) * (1.0f / 6.0f);
  u[2] = -(e - o) * (1.0f / 6.0f);
  u[3] = (e2 + o2) * (1.0f / 24.0f);
  u[4] = (e2 - o2) * (1.0f / 24.0f);
  u[5] = g[4];
}

/* A^T m of 6 values into 2. */
__host__ __device__ __forceinline__ void wg_at(float m0, float m1, float m2, float m3, float m4,
                                               float m5, float &y0, float &y1) {
  y0 = m0 + m1 + m2 + m3 + m4;
  y1 = fmaf(2.0f, m3 - m4, m1 - m2 + m5);
}

/* Row i of U = G g G^T for a 5x5 filter g (row-major; turned 180 degrees
 * when flip): u[j * stride] = U[i][j] for j < 6. */
__host__ __device__ __forceinline__ void wg_filter_row(const float *g, bool flip, int i, float *u,
                                                       size_t stride) {
  float t[5]; /* row i of G g */
  for (int x = 0; x < 5; x++) {
    float col[5], o[6];
    for (int y = 0; y < 5; y++) col[y] = flip ? g[(4 - y) * 5 + (4 - x)] : g[y * 5 + x];
    wg_g(col, o);
    t[x] = o[i];
  }
  float o[6];
  wg_g(t, o);
  for (int j = 0; j < 6; j++) u[(size_t)j * stride] = o[j];
}

/* The workspace's filters, in the order the fused kernel copies them: for
 * output-channel block kb (BK channels) and input-channel chunk ch (CC
 * channels), the 36 points' CC x BK transforms side by side,
 *   u[((kb * nch + ch) * 36 + point) * CC * BK + cc * BK + k]
 * for output channel kb * BK + k and input channel ch * CC + cc, zero past
 * cout and cin: a block's chunk is one contiguous run that it copies 16
 * bytes at a time with no bounds to test (the copies' index arithmetic took
 * as many instructions as the products when the filters were laid out by
 * channel).  One thread per row of a transform, output channels fastest
 * (writes side by side; one thread per pair took 6-8 us for cifar10_quick's
 * 32 x 32 pairs on an H100).  Forward (flip false): w is (cout, cin, 5, 5).
 * Backward data (flip true): w is the forward's (cin, cout, 5, 5), read
 * turned 180 degrees. */
__global__ void wg_filter_kernel(const float *__restrict__ w, int cin, int cout, int flip, int bk,
                                 int cc_per_chunk, int nch, int nkb, float *__restrict__ u) {
  const int cols = nkb * bk, rows = nch * cc_per_chunk;
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= 6 * rows * cols) return;
  const int co = e % cols, r = e / cols, ci = r % rows, i = r / rows;
  const size_t run = (size_t)cc_per_chunk * bk; /* one point's floats in a chunk */
  const int kb = co / bk, ch = ci / cc_per_chunk;
  float *dst = u + ((size_t)(kb * nch + ch) * 36 + (size_t)i * 6) * run +
               (size_t)(ci - ch * cc_per_chunk) * bk + (co - kb * bk);
  if (co >= cout || ci >= cin) {
    for (int j = 0; j < 6; j++) dst[j * run] = 0.0f;
    return;
  }
  const float *g = flip ? w + ((size_t)ci * cout + co) * 25 : w + ((size_t)co * cin + ci) * 25;
  wg_filter_row(g, flip != 0, i, dst, run);
}

/* Floats of the transformed filters for cin -> cout with output-channel
 * blocks of bk and input-channel chunks of cc (wg_filter_kernel's layout). */
__host__ __device__ inline size_t wg_filter_floats(int cin, int cout, int bk, int cc) {
  return (size_t)36 * ((cout + bk - 1) / bk * bk) * ((cin + cc - 1) / cc * cc);
}

/* N values (a multiple of 4) of shared memory, 16-byte aligned, into v. */
template <int N>
__device__ __forceinline__ void wg_lds(const float *src, float (&v)[N]) {
#pragma unroll
  for (int i = 0; i < N; i += 4) {
    const float4 q = *(const float4 *)(src + i);
    v[i] = q.x;
    v[i + 1] = q.y;
    v[i + 2] = q.z;
    v[i + 3] = q.w;
  }
}

/* ---------------------------------------------------------------- the fused kernel */

/* One convolution: src (n, cin, H, W) -> dst (n, cout, OH, OW) with 5x5
 * filters at stride 1 and pads ph, pw, through u (wg_filter_kernel's layout
 * for the configuration's BK and CC, nch chunks of input channels); TH x TW
 * tiles per image, the blocks' rectangles of tiles NBY x NBX per image. */
typedef struct wg_args {
  const float *src, *u, *bias;
  float *dst;
  int cin, H, W, cout, nch, OH, OW, ph, pw;
  int TH, TW, NBY, NBX;
  int relu;
} wg_args;

/* The shape of configuration (BY, BX, BK, TT, TK, CC): a block computes a
 * BY x BX rectangle of tiles (BT of them; 2 BY x 2 BX outputs) of one
 * image for BK output channels, with one thread per (point, TT tiles, TK
 * channels), taking the input channels CC at a time through a two-stage
 * cp.async pipeline: the raw input rectangle under its tiles (RH x RW per
 * channel) and the transformed filters. */
template <int BY, int BX, int BK, int TT, int TK, int CC>
struct wg_shape {
  static constexpr int BT = BY * BX;
  static constexpr int GT = BT / TT, GK = BK / TK;
  static constexpr int T = 36 * GT * GK; /* threads */
  /* two blocks of 288 threads per multiprocessor: at most 96 registers
   * each (8 x 8 products per thread spill 12 bytes) */
  static constexpr int MIN_BLOCKS = T <= 288 ? 2 : 1;
  static constexpr int RH = 2 * BY + 4, RW = 2 * BX + 4, RAW = CC * RH * RW;
  static constexpr int VS = CC * BT + 4, US = CC * BK + 4; /* per-point strides, padded */
  static constexpr int U_FLOATS = 36 * US;
  /* shared memory: Us[2], Rs[2], Vs; at the end one slice of TK channels'
   * products, 37 apart */
  static constexpr int U_OFF = 0, R_OFF = 2 * U_FLOATS, V_OFF = R_OFF + 2 * RAW;
  static constexpr int CHUNK = V_OFF + 36 * VS;
  /* the products go back SL slices of TK channels at a time: as many as
   * the pipeline's shared memory holds (SL divides GK) */
  static constexpr int slices(int n) {
    return n <= 1 ? 1 : GK % n == 0 && n * TK * BT * 37 <= CHUNK ? n : slices(n - 1);
  }
  static constexpr int SL = slices(GK);
  static constexpr int OUT = SL * TK * BT * 37;
  /* after both, the raw rectangle's offsets in the image (int, -1 outside) */
  static constexpr int TAB_OFF = CHUNK > OUT ? CHUNK : OUT;
  static constexpr int FLOATS = TAB_OFF + RH * RW;
  static_assert(BT % TT == 0 && BK % TK == 0 && TT % 4 == 0 && TK % 4 == 0, "wg_shape");
  static_assert((CC * BT) % 32 == 0 && (CC * BK) % 32 == 0, "wg_shape: padded strides");
  static_assert(RAW % 4 == 0 && BK % 4 == 0, "wg_shape: 16-byte alignment");
};

template <int BY, int BX, int BK, int TT, int TK, int CC>
__global__ void __launch_bounds__(wg_shape<BY, BX, BK, TT, TK, CC>::T,
                                  wg_shape<BY, BX, BK, TT, TK, CC>::MIN_BLOCKS)
    wg_conv_kernel(wg_args a) {
  typedef wg_shape<BY, BX, BK, TT, TK, CC> S;
  constexpr int BT = S::BT;
  WG_SMEM_DECL;
  float *Vs = wg_smem + S::V_OFF; /* [point][cc][tile], VS apart */
  const int tid = threadIdx.x;
  const int p = tid % 36, grp = tid / 36;
  const int t0 = (grp % S::GT) * TT, k0 = (grp / S::GT) * TK;
  const int per_img = a.NBY * a.NBX;
  const int img = blockIdx.x / per_img, rb = blockIdx.x - img * per_img;
  const int ty0 = (rb / a.NBX) * BY, tx0 = (rb - (rb / a.NBX) * a.NBX) * BX;
  const int kblk = blockIdx.y * BK;
  const int iy0 = 2 * ty0 - a.ph, ix0 = 2 * tx0 - a.pw; /* the raw rectangle's origin */
  const int plane = a.H * a.W;

  /* the raw rectangle's offsets in an image plane, once: -1 outside */
  int *tab = (int *)(wg_smem + S::TAB_OFF);
  for (int e = tid; e < S::RH * S::RW; e += S::T) {
    const int yy = iy0 + e / S::RW, xx = ix0 + e % S::RW;
    tab[e] = (unsigned)yy < (unsigned)a.H && (unsigned)xx < (unsigned)a.W ? yy * a.W + xx : -1;
  }
  __syncthreads();

  /* chunk k's copies into buffer b: the raw rectangle (zeros outside the
   * image and past cin) and the chunk's filters (one contiguous run) */
  auto load = [&](int k, int b) {
    float *Rs = wg_smem + S::R_OFF + b * S::RAW;
    const int c0 = k * CC, ci0 = img * a.cin + c0; /* the chunk's first plane */
    /* not unrolled: unrolled, their addresses stay live across the chunk
     * loop and take registers that the products need */
#pragma unroll 1
    for (int e = tid; e < S::RAW; e += S::T) {
      const int cc = (unsigned)e / (S::RH * S::RW), o = tab[e - cc * (S::RH * S::RW)];
      const bool ok = o >= 0 && c0 + cc < a.cin;
      ig_cp4(Rs + e, ok ? a.src + (size_t)(ci0 + cc) * plane + o : a.src, ok);
    }
    float *Us = wg_smem + S::U_OFF + b * S::U_FLOATS;
    const float *uk = a.u + (size_t)(blockIdx.y * a.nch + k) * 36 * (CC * BK);
    constexpr int RUN4 = CC * BK / 4; /* one point's 16-byte copies */
#pragma unroll 1
    for (int e = tid; e < 36 * RUN4; e += S::T) {
      const int q = (unsigned)e / RUN4;
      ig_cp16(Us + q * S::US + 4 * (e - q * RUN4), uk + 4 * e, true);
    }
    ig_cp_commit();
  };

  float acc[TK][TT];
#pragma unroll
  for (int i = 0; i < TK; i++)
#pragma unroll
    for (int j = 0; j < TT; j++) acc[i][j] = 0.0f;

  load(0, 0);
  for (int k = 0; k < a.nch; k++) {
    const int b = k & 1;
    if (k + 1 < a.nch) {
      load(k + 1, b ^ 1);
      ig_cp_wait<1>();
    } else {
      ig_cp_wait<0>();
    }
    __syncthreads();
    /* the chunk's patches, transformed into Vs: B^T d column by column
     * (one column of one (channel, tile) per thread), then B^T d B row by
     * row, in place */
    const float *Rs = wg_smem + S::R_OFF + b * S::RAW;
    for (unsigned e = tid; e < 6 * CC * BT; e += S::T) {
      const unsigned t = e % BT, r = e / BT, cc = r % CC, j = r / CC;
      const float *col = Rs + (cc * S::RH + 2 * (t / BX)) * S::RW + 2 * (t % BX) + j;
      float d[6];
#pragma unroll
      for (int i = 0; i < 6; i++) d[i] = col[i * S::RW];
      wg_bt(d[0], d[1], d[2], d[3], d[4], d[5]);
#pragma unroll
      for (int i = 0; i < 6; i++) Vs[(i * 6 + j) * S::VS + cc * BT + t] = d[i];
    }
    __syncthreads();
    for (unsigned e = tid; e < 6 * CC * BT; e += S::T) {
      const unsigned t = e % BT, r = e / BT, cc = r % CC, i = r / CC;
      float *v = Vs + i * 6 * S::VS + cc * BT + t;
      float d[6];
#pragma unroll
      for (int j = 0; j < 6; j++) d[j] = v[j * S::VS];
      wg_bt(d[0], d[1], d[2], d[3], d[4], d[5]);
#pragma unroll
      for (int j = 0; j < 6; j++) v[j * S::VS] = d[j];
    }
    __syncthreads();
    /* point p's products: acc[TK channels][TT tiles] over the chunk */
    const float *ur = wg_smem + S::U_OFF + b * S::U_FLOATS + p * S::US + k0;
    const float *vr = Vs + p * S::VS + t0;
#pragma unroll 2
    for (int cc = 0; cc < CC; cc++) {
      float uv[TK], vv[TT];
      wg_lds(ur + cc * BK, uv);
      wg_lds(vr + cc * BT, vv);
#pragma unroll
      for (int i = 0; i < TK; i++)
#pragma unroll
        for (int j = 0; j < TT; j++) acc[i][j] = fmaf(uv[i], vv[j], acc[i][j]);
    }
    __syncthreads();
  }

  /* back from the transformed domain, SL slices of TK channels at a time:
   * the slices' owners put their points in shared memory, then every
   * thread transforms (channel, tile) pairs */
  float *Ms = wg_smem;
  for (int s0 = 0; s0 < S::GK; s0 += S::SL) {
    const int mine = k0 / TK - s0;
    if (mine >= 0 && mine < S::SL)
#pragma unroll
      for (int i = 0; i < TK; i++)
#pragma unroll
        for (int j = 0; j < TT; j++) Ms[((mine * TK + i) * BT + t0 + j) * 37 + p] = acc[i][j];
    __syncthreads();
    for (unsigned e = tid; e < S::SL * TK * BT; e += S::T) {
      const int t = e % BT, i = e / BT;
      const int co = kblk + s0 * TK + i, ty = ty0 + t / BX, tx = tx0 + t % BX;
      if (co >= a.cout || ty >= a.TH || tx >= a.TW) continue;
      const float *m = Ms + e * 37;
      float r[2][6];
#pragma unroll
      for (int x = 0; x < 6; x++)
        wg_at(m[x], m[6 + x], m[12 + x], m[18 + x], m[24 + x], m[30 + x], r[0][x], r[1][x]);
      float y[2][2];
#pragma unroll
      for (int i2 = 0; i2 < 2; i2++)
        wg_at(r[i2][0], r[i2][1], r[i2][2], r[i2][3], r[i2][4], r[i2][5], y[i2][0], y[i2][1]);
      const float bias = a.bias ? WG_LDG(a.bias + co) : 0.0f;
      float *out = a.dst + ((size_t)img * a.cout + co) * a.OH * a.OW;
#pragma unroll
      for (int dy = 0; dy < 2; dy++)
#pragma unroll
        for (int dx = 0; dx < 2; dx++) {
          const int oy = 2 * ty + dy, ox = 2 * tx + dx;
          if (oy >= a.OH || ox >= a.OW) continue;
          float v = y[dy][dx] + bias;
          if (a.relu) v = fmaxf(v, 0.0f);
          out[(size_t)oy * a.OW + ox] = v;
        }
    }
    __syncthreads();
  }
}

#ifndef WG_HOST_EMULATION
/* ---------------------------------------------------------------- launchers */

/* Configuration (.., BK, .., CC)'s filter transform of w into u, and its
 * fused kernel from u: a's cin and cout set. */
template <int BY, int BX, int BK, int TT, int TK, int CC>
static void filters(cudaStream_t st, const wg_args &a, const float *w, bool flip, float *u) {
  const int nch = (a.cin + CC - 1) / CC, nkb = (a.cout + BK - 1) / BK;
  const int rows = 6 * nch * CC * nkb * BK;
  wg_filter_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, st>>>(w, a.cin, a.cout, flip ? 1 : 0,
                                                                   BK, CC, nch, nkb, u);
  CT_CUDA_LAUNCH_CHECK();
}

template <int BY, int BX, int BK, int TT, int TK, int CC>
static void apply(cudaStream_t st, wg_args a, int n) {
  typedef wg_shape<BY, BX, BK, TT, TK, CC> S;
  a.nch = (a.cin + CC - 1) / CC;
  a.NBY = (a.TH + BY - 1) / BY;
  a.NBX = (a.TW + BX - 1) / BX;
  dim3 grid((unsigned)(n * a.NBY * a.NBX), (unsigned)((a.cout + BK - 1) / BK));
  wg_conv_kernel<BY, BX, BK, TT, TK, CC><<<grid, S::T, S::FLOATS * sizeof(float), st>>>(a);
  CT_CUDA_LAUNCH_CHECK();
}

typedef void (*wg_filters_fn)(cudaStream_t, const wg_args &, const float *, bool, float *);
typedef void (*wg_apply_fn)(cudaStream_t, wg_args, int);
#define WG_FILTERS(BY, BX, BK, TT, TK, CC) filters<BY, BX, BK, TT, TK, CC>,
#define WG_APPLY(BY, BX, BK, TT, TK, CC) apply<BY, BX, BK, TT, TK, CC>,
static const wg_filters_fn k_filters[] = {IG_WINO_CONFIGS(WG_FILTERS)};
static const wg_apply_fn k_apply[] = {IG_WINO_CONFIGS(WG_APPLY)};
#undef WG_FILTERS
#undef WG_APPLY

void ig_wino_allow_smem(void) {
#define WG_ATTR(BY, BX, BK, TT, TK, CC)                                                   \
  CT_CUDA_CHECK(cudaFuncSetAttribute(                                                      \
      wg_conv_kernel<BY, BX, BK, TT, TK, CC>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
      (int)(wg_shape<BY, BX, BK, TT, TK, CC>::FLOATS * sizeof(float))));
  IG_WINO_CONFIGS(WG_ATTR)
#undef WG_ATTR
  /* two blocks of about 100 KiB each per multiprocessor */
#define WG_CARVE(BY, BX, BK, TT, TK, CC)                                                  \
  CT_CUDA_CHECK(cudaFuncSetAttribute(wg_conv_kernel<BY, BX, BK, TT, TK, CC>,               \
                                     cudaFuncAttributePreferredSharedMemoryCarveout,       \
                                     cudaSharedmemCarveoutMaxShared));
  IG_WINO_CONFIGS(WG_CARVE)
#undef WG_CARVE
}

const char *ig_wino_unsupported(const ct_igemm_geom *g, ct_igemm_dir dir) {
  if (dir == CT_IGEMM_BWD_FILTER) return "Winograd: forward and backward data only";
  if (g->kh != 5 || g->kw != 5) return "Winograd: 5x5 filters only";
  if (g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1)
    return "Winograd: stride 1 and dilation 1 only";
  if (g->ph > 4 || g->pw > 4) return "Winograd: pads up to 4 only";
  return NULL;
}

static size_t wider(size_t a, size_t b) { return a > b ? a : b; }

size_t ig_wino_workspace(const ct_igemm_geom *g) {
  /* the largest layout of either direction in any configuration */
  size_t most = 0;
#define WG_FLOATS(BY, BX, BK, TT, TK, CC) \
  most = wider(most, wider(wg_filter_floats(g->c, g->m, BK, CC), wg_filter_floats(g->m, g->c, BK, CC)));
  IG_WINO_CONFIGS(WG_FLOATS)
#undef WG_FLOATS
  return most * sizeof(float);
}

/* The arguments of g's direction (data: backward data) but the tensors. */
static wg_args args_of(const ct_igemm_geom *g, bool data) {
  CT_ASSERT(!ig_wino_unsupported(g, data ? CT_IGEMM_BWD_DATA : CT_IGEMM_FWD));
  wg_args a;
  memset(&a, 0, sizeof a);
  if (!data) {
    a.cin = g->c, a.H = g->h, a.W = g->w, a.cout = g->m, a.OH = g->oh, a.OW = g->ow;
    a.ph = g->ph, a.pw = g->pw;
  } else {
    a.cin = g->m, a.H = g->oh, a.W = g->ow, a.cout = g->c, a.OH = g->h, a.OW = g->w;
    a.ph = 4 - g->ph, a.pw = 4 - g->pw;
  }
  a.TH = (a.OH + 1) / 2;
  a.TW = (a.OW + 1) / 2;
  return a;
}

void ig_wino_filters(int index, cudaStream_t st, const ct_igemm_geom *g, bool data,
                     const float *w, float *u) {
  const wg_filters_fn f = ig_launcher_at(k_filters, index, "Winograd");
  f(st, args_of(g, data), w, data, u);
}

void ig_wino_apply(int index, cudaStream_t st, const ct_igemm_geom *g, bool data,
                   const float *src, const float *u, const float *bias, bool relu, float *dst) {
  const wg_apply_fn f = ig_launcher_at(k_apply, index, "Winograd");
  wg_args a = args_of(g, data);
  a.src = src;
  a.u = u;
  a.bias = bias;
  a.relu = relu ? 1 : 0;
  a.dst = dst;
  f(st, a, g->n);
}

#endif
