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
 * sum by up to about 5e-6 of the largest value (scripts/wino-emu.sh's worst
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
 * scripts/wino-emu.sh compiles the kernels of this file on the host
 * (WG_HOST_EMULATION) and runs them, thread by thread, against a double
 * reference. */
#ifndef WG_HOST_EMULATION
#include <stdint.h>
#include <string.h>

#include "gpu/gpu.h"
#include "layers/conv_igemm.h"
#include "layers/conv_igemm_impl.cuh"
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

/* The workspace's filters: u[(p * cin + ci) * coutp + co] = the transform
 * of w's filter for that pair, coutp = cout rounded up to 4 (zeros past
 * cout), so that a block copies them 16 bytes at a time; one thread per
 * row of a transform, output channels fastest (writes side by side; one
 * thread per pair took 6-8 us for cifar10_quick's 32 x 32 pairs on an
 * H100, on the iteration's critical path four times).  Forward (flip
 * false): w is (cout, cin, 5, 5).  Backward data (flip true): w is the
 * forward's (cin, cout, 5, 5), read turned 180 degrees. */
__global__ void wg_filter_kernel(const float *__restrict__ w, int cin, int cout, int coutp,
                                 int flip, float *__restrict__ u) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= 6 * cin * coutp) return;
  const int co = e % coutp, r = e / coutp, ci = r % cin, i = r / cin;
  const size_t stride = (size_t)cin * coutp;
  float *dst = u + (size_t)i * 6 * stride + (size_t)ci * coutp + co;
  if (co >= cout) {
    for (int j = 0; j < 6; j++) dst[j * stride] = 0.0f;
    return;
  }
  const float *g = flip ? w + ((size_t)ci * cout + co) * 25 : w + ((size_t)co * cin + ci) * 25;
  wg_filter_row(g, flip != 0, i, dst, stride);
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
 * filters at stride 1 and pads ph, pw, through u (coutp apart, see
 * wg_filter_kernel); TH x TW tiles per image, the blocks' rectangles of
 * tiles NBY x NBX per image. */
typedef struct wg_args {
  const float *src, *u, *bias;
  float *dst;
  int cin, H, W, cout, coutp, OH, OW, ph, pw;
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
  static constexpr int FLOATS = CHUNK > OUT ? CHUNK : OUT;
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
  const size_t plane = (size_t)a.H * a.W;
  const float *src_img = a.src + (size_t)img * a.cin * plane;

  /* chunk c0's copies into buffer b: the raw rectangle (zeros outside the
   * image and past cin) and the filters (zeros past cin) */
  auto load = [&](int c0, int b) {
    float *Rs = wg_smem + S::R_OFF + b * S::RAW;
    /* not unrolled: unrolled, their addresses stay live across the chunk
     * loop and take registers that the products need */
#pragma unroll 1
    for (int e = tid; e < S::RAW; e += S::T) {
      const int x = e % S::RW, r = e / S::RW, y = r % S::RH, cc = r / S::RH;
      const int yy = iy0 + y, xx = ix0 + x, c = c0 + cc;
      const bool ok = c < a.cin && (unsigned)yy < (unsigned)a.H && (unsigned)xx < (unsigned)a.W;
      ig_cp4(Rs + e, ok ? src_img + c * plane + (size_t)yy * a.W + xx : a.src, ok);
    }
    float *Us = wg_smem + S::U_OFF + b * S::U_FLOATS;
#pragma unroll 1
    for (int e = tid; e < 36 * CC * (BK / 4); e += S::T) {
      const int k4 = e % (BK / 4), r = e / (BK / 4), cc = r % CC, q = r / CC;
      const int c = c0 + cc, co = kblk + 4 * k4;
      const bool ok = c < a.cin && co < a.coutp;
      ig_cp16(Us + q * S::US + cc * BK + 4 * k4,
              ok ? a.u + ((size_t)q * a.cin + c) * a.coutp + co : a.u, ok);
    }
    ig_cp_commit();
  };

  float acc[TK][TT];
#pragma unroll
  for (int i = 0; i < TK; i++)
#pragma unroll
    for (int j = 0; j < TT; j++) acc[i][j] = 0.0f;

  const int chunks = (a.cin + CC - 1) / CC;
  load(0, 0);
  for (int k = 0; k < chunks; k++) {
    const int b = k & 1;
    if (k + 1 < chunks) {
      load((k + 1) * CC, b ^ 1);
      ig_cp_wait<1>();
    } else {
      ig_cp_wait<0>();
    }
    __syncthreads();
    /* the chunk's patches, transformed into Vs: B^T d column by column
     * (one column of one (channel, tile) per thread), then B^T d B row by
     * row, in place */
    const float *Rs = wg_smem + S::R_OFF + b * S::RAW;
    for (int e = tid; e < 6 * CC * BT; e += S::T) {
      const int t = e % BT, r = e / BT, cc = r % CC, j = r / CC;
      const float *col = Rs + (cc * S::RH + 2 * (t / BX)) * S::RW + 2 * (t % BX) + j;
      float d[6];
#pragma unroll
      for (int i = 0; i < 6; i++) d[i] = col[i * S::RW];
      wg_bt(d[0], d[1], d[2], d[3], d[4], d[5]);
#pragma unroll
      for (int i = 0; i < 6; i++) Vs[(i * 6 + j) * S::VS + cc * BT + t] = d[i];
    }
    __syncthreads();
    for (int e = tid; e < 6 * CC * BT; e += S::T) {
      const int t = e % BT, r = e / BT, cc = r % CC, i = r / CC;
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
    for (int e = tid; e < S::SL * TK * BT; e += S::T) {
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

/* ---------------------------------------------------------------- the filter gradient */

/* With U = G g G^T and Y = A^T [U . V] A per tile, the filter gradient is
 * dg = G^T dU G with dU = sum over tiles of (A dY A^T) . (B^T x B): per
 * point a product of (output channels x tiles) by (tiles x input
 * channels).  Blocks split the tiles (rectangles, taken in a fixed
 * stride) and write their sums per point; the split sums are then added in
 * order, transformed back and added into dw.  Deterministic. */

/* A y of 2 values into 6 (z_i = A^T[0][i] y0 + A^T[1][i] y1). */
__host__ __device__ __forceinline__ void wg_a(float y0, float y1, float z[6]) {
  z[0] = y0;
  z[1] = y0 + y1;
  z[2] = y0 - y1;
  z[3] = fmaf(2.0f, y1, y0);
  z[4] = fmaf(-2.0f, y1, y0);
  z[5] = y1;
}

/* G^T s of 6 values into 5. */
__host__ __device__ __forceinline__ void wg_gt(const float s[6], float o[5]) {
  const float a = (s[1] + s[2]) * (1.0f / 6.0f), b = (s[2] - s[1]) * (1.0f / 6.0f);
  const float c = (s[3] + s[4]) * (1.0f / 24.0f), d = (s[3] - s[4]) * (1.0f / 24.0f);
  o[0] = fmaf(0.25f, s[0], c - a);
  o[1] = fmaf(2.0f, d, b);
  o[2] = fmaf(4.0f, c, -a);
  o[3] = fmaf(8.0f, d, b);
  o[4] = fmaf(16.0f, c, s[5] - a);
}

/* The filter gradient of x (n, C, H, W) and dy (n, K, OH, OW) with 5x5
 * filters at stride 1 and pads ph, pw: TH x TW tiles per image in
 * rectangles of NBY x NBX per image, `rects` in all, split among `splits`
 * blocks per channel block; part[split][point][K][C]. */
typedef struct wg_wargs {
  const float *x, *dy;
  float *part;
  int C, H, W, K, OH, OW, ph, pw;
  int TH, TW, NBY, NBX, rects, splits;
} wg_wargs;

/* Configuration (BY, BX, BK, BC, TK, TC): a block takes BY x BX
 * rectangles of tiles, one at a time through a two-stage cp.async pipeline
 * (the raw x rectangle under them for BC input channels, the raw dY for
 * BK output channels), and sums BK x BC per point, each thread TK x TC of
 * one point. */
template <int BY, int BX, int BK, int BC, int TK, int TC>
struct wg_wshape {
  static constexpr int BT = BY * BX;
  static constexpr int GK = BK / TK, GC = BC / TC;
  static constexpr int T = 36 * GK * GC; /* threads */
  static constexpr int MIN_BLOCKS = T <= 288 ? 2 : 1;
  /* raw rectangles, channel strides padded to odd (no bank conflicts
   * between channels) */
  static constexpr int RH = 2 * BY + 4, RW = 2 * BX + 4, XC = RH * RW + 1, XRAW = BC * XC;
  static constexpr int DH = 2 * BY, DW = 2 * BX, DC = DH * DW + 1, DRAW = BK * DC;
  static constexpr int RAW = (XRAW + DRAW + 3) / 4 * 4;
  static constexpr int VS = BT * BC + 4, ZS = BT * BK + 4; /* per point: [tile][channel] */
  static constexpr int V_OFF = 2 * RAW, Z_OFF = V_OFF + 36 * VS;
  static constexpr int FLOATS = Z_OFF + 36 * ZS;
  static_assert(BK % TK == 0 && BC % TC == 0 && TK % 4 == 0 && TC % 4 == 0, "wg_wshape");
  static_assert((BT * BC) % 32 == 0 && (BT * BK) % 32 == 0, "wg_wshape: padded strides");
};

template <int BY, int BX, int BK, int BC, int TK, int TC>
__global__ void __launch_bounds__(wg_wshape<BY, BX, BK, BC, TK, TC>::T,
                                  wg_wshape<BY, BX, BK, BC, TK, TC>::MIN_BLOCKS)
    wg_wgrad_kernel(wg_wargs a) {
  typedef wg_wshape<BY, BX, BK, BC, TK, TC> S;
  constexpr int BT = S::BT;
  WG_SMEM_DECL;
  float *Vs = wg_smem + S::V_OFF, *Zs = wg_smem + S::Z_OFF;
  const int tid = threadIdx.x;
  const int p = tid % 36, grp = tid / 36;
  const int k0 = (grp % S::GK) * TK, c0 = (grp / S::GK) * TC;
  const int nkb = (a.K + BK - 1) / BK;
  const int kblk = (blockIdx.y % nkb) * BK, cblk = (blockIdx.y / nkb) * BC;
  const int per_img = a.NBY * a.NBX;
  const size_t xplane = (size_t)a.H * a.W, yplane = (size_t)a.OH * a.OW;

  /* rectangle r's copies into buffer b */
  auto load = [&](int r, int b) {
    const int img = r / per_img, rb = r - img * per_img;
    const int ty0 = (rb / a.NBX) * BY, tx0 = (rb - (rb / a.NBX) * a.NBX) * BX;
    const int iy0 = 2 * ty0 - a.ph, ix0 = 2 * tx0 - a.pw;
    float *Xr = wg_smem + b * S::RAW, *Dr = Xr + S::XRAW;
    const float *xi = a.x + (size_t)img * a.C * xplane;
    const float *yi = a.dy + (size_t)img * a.K * yplane;
#pragma unroll 1
    for (int e = tid; e < BC * S::RH * S::RW; e += S::T) {
      const int x = e % S::RW, rr = e / S::RW, y = rr % S::RH, cc = rr / S::RH;
      const int yy = iy0 + y, xx = ix0 + x, c = cblk + cc;
      const bool ok = c < a.C && (unsigned)yy < (unsigned)a.H && (unsigned)xx < (unsigned)a.W;
      ig_cp4(Xr + cc * S::XC + y * S::RW + x, ok ? xi + c * xplane + (size_t)yy * a.W + xx : a.x,
             ok);
    }
#pragma unroll 1
    for (int e = tid; e < BK * S::DH * S::DW; e += S::T) {
      const int x = e % S::DW, rr = e / S::DW, y = rr % S::DH, kk = rr / S::DH;
      const int oy = 2 * ty0 + y, ox = 2 * tx0 + x, k = kblk + kk;
      const bool ok = k < a.K && oy < a.OH && ox < a.OW;
      ig_cp4(Dr + kk * S::DC + y * S::DW + x, ok ? yi + k * yplane + (size_t)oy * a.OW + ox : a.dy,
             ok);
    }
    ig_cp_commit();
  };

  float acc[TK][TC];
#pragma unroll
  for (int i = 0; i < TK; i++)
#pragma unroll
    for (int j = 0; j < TC; j++) acc[i][j] = 0.0f;

  if (blockIdx.x < (unsigned)a.rects) load(blockIdx.x, 0);
  int it = 0;
  for (int r = blockIdx.x; r < a.rects; r += a.splits, it++) {
    const int b = it & 1;
    if (r + a.splits < a.rects) {
      load(r + a.splits, b ^ 1);
      ig_cp_wait<1>();
    } else {
      ig_cp_wait<0>();
    }
    __syncthreads();
    const float *Xr = wg_smem + b * S::RAW, *Dr = Xr + S::XRAW;
    /* B^T x column by column, into Vs[point][tile][channel] */
    for (int e = tid; e < 6 * BC * BT; e += S::T) {
      const int c = e % BC, rr = e / BC, t = rr % BT, j = rr / BT;
      const float *col = Xr + c * S::XC + 2 * (t / BX) * S::RW + 2 * (t % BX) + j;
      float d[6];
#pragma unroll
      for (int i = 0; i < 6; i++) d[i] = col[i * S::RW];
      wg_bt(d[0], d[1], d[2], d[3], d[4], d[5]);
#pragma unroll
      for (int i = 0; i < 6; i++) Vs[(i * 6 + j) * S::VS + t * BC + c] = d[i];
    }
    /* A dY A^T of each (channel, tile), into Zs[point][tile][channel] */
    for (int e = tid; e < BK * BT; e += S::T) {
      const int k = e % BK, t = e / BK;
      const float *y = Dr + k * S::DC + 2 * (t / BX) * S::DW + 2 * (t % BX);
      float z0[6], z1[6];
      wg_a(y[0], y[S::DW], z0);
      wg_a(y[1], y[S::DW + 1], z1);
#pragma unroll
      for (int i = 0; i < 6; i++) {
        float z[6];
        wg_a(z0[i], z1[i], z);
#pragma unroll
        for (int j = 0; j < 6; j++) Zs[(i * 6 + j) * S::ZS + t * BK + k] = z[j];
      }
    }
    __syncthreads();
    /* B^T x B: the rows, in place */
    for (int e = tid; e < 6 * BC * BT; e += S::T) {
      const int c = e % BC, rr = e / BC, t = rr % BT, i = rr / BT;
      float *v = Vs + i * 6 * S::VS + t * BC + c;
      float d[6];
#pragma unroll
      for (int j = 0; j < 6; j++) d[j] = v[j * S::VS];
      wg_bt(d[0], d[1], d[2], d[3], d[4], d[5]);
#pragma unroll
      for (int j = 0; j < 6; j++) v[j * S::VS] = d[j];
    }
    __syncthreads();
    /* point p's sums over the rectangle's tiles */
    const float *zr = Zs + p * S::ZS + k0, *vr = Vs + p * S::VS + c0;
#pragma unroll 2
    for (int t = 0; t < BT; t++) {
      float zv[TK], vv[TC];
      wg_lds(zr + t * BK, zv);
      wg_lds(vr + t * BC, vv);
#pragma unroll
      for (int i = 0; i < TK; i++)
#pragma unroll
        for (int j = 0; j < TC; j++) acc[i][j] = fmaf(zv[i], vv[j], acc[i][j]);
    }
    __syncthreads();
  }
  float *out = a.part + ((size_t)blockIdx.x * 36 + p) * a.K * a.C;
#pragma unroll
  for (int i = 0; i < TK; i++) {
    const int k = kblk + k0 + i;
    if (k >= a.K) continue;
#pragma unroll
    for (int j = 0; j < TC; j++) {
      const int c = cblk + c0 + j;
      if (c < a.C) out[(size_t)k * a.C + c] = acc[i][j];
    }
  }
}

/* sum[e] = the splits' part[s * n + e] added in split order, e < n. */
__global__ void wg_wgrad_sum_kernel(const float *__restrict__ part, int splits, int n,
                                    float *__restrict__ sum) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  float s = 0.0f;
  for (int i = 0; i < splits; i++) s += WG_LDG(part + (size_t)i * n + e);
  sum[e] = s;
}

/* dw[k][c] += G^T dU G for each (k, c) < K x C, dU = sum[point][k][c]. */
__global__ void wg_wgrad_finish_kernel(const float *__restrict__ sum, int K, int C,
                                       float *__restrict__ dw) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= K * C) return;
  const size_t stride = (size_t)K * C;
  float t[5][6];
  for (int j = 0; j < 6; j++) {
    float s[6], o[5];
    for (int i = 0; i < 6; i++) s[i] = WG_LDG(sum + (size_t)(i * 6 + j) * stride + e);
    wg_gt(s, o);
    for (int u = 0; u < 5; u++) t[u][j] = o[u];
  }
  float *d = dw + (size_t)e * 25;
  for (int u = 0; u < 5; u++) {
    float o[5];
    wg_gt(t[u], o);
    for (int v = 0; v < 5; v++) d[u * 5 + v] += o[v];
  }
}

#ifndef WG_HOST_EMULATION
/* ---------------------------------------------------------------- launchers */

template <int BY, int BX, int BK, int TT, int TK, int CC>
static void launch(cudaStream_t st, wg_args a, int n) {
  typedef wg_shape<BY, BX, BK, TT, TK, CC> S;
  a.NBY = (a.TH + BY - 1) / BY;
  a.NBX = (a.TW + BX - 1) / BX;
  dim3 grid((unsigned)(n * a.NBY * a.NBX), (unsigned)((a.cout + BK - 1) / BK));
  wg_conv_kernel<BY, BX, BK, TT, TK, CC><<<grid, S::T, S::FLOATS * sizeof(float), st>>>(a);
  CT_CUDA_LAUNCH_CHECK();
}

typedef void (*wg_launcher)(cudaStream_t, wg_args, int);
#define WG_LAUNCHER(BY, BX, BK, TT, TK, CC) launch<BY, BX, BK, TT, TK, CC>,
static const wg_launcher k_launchers[] = {IG_WINO_CONFIGS(WG_LAUNCHER)};
#undef WG_LAUNCHER

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
#define WG_WATTR(BY, BX, BK, BC, TK, TC)                                                  \
  CT_CUDA_CHECK(cudaFuncSetAttribute(                                                      \
      wg_wgrad_kernel<BY, BX, BK, BC, TK, TC>, cudaFuncAttributeMaxDynamicSharedMemorySize,\
      (int)(wg_wshape<BY, BX, BK, BC, TK, TC>::FLOATS * sizeof(float))));                 \
  CT_CUDA_CHECK(cudaFuncSetAttribute(wg_wgrad_kernel<BY, BX, BK, BC, TK, TC>,              \
                                     cudaFuncAttributePreferredSharedMemoryCarveout,       \
                                     cudaSharedmemCarveoutMaxShared));
  IG_WINO_WGRAD_CONFIGS(WG_WATTR)
#undef WG_WATTR
}

const char *ig_wino_unsupported(const ct_igemm_geom *g, ct_igemm_dir dir) {
  (void)dir;
  if (g->kh != 5 || g->kw != 5) return "Winograd: 5x5 filters only";
  if (g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1)
    return "Winograd: stride 1 and dilation 1 only";
  if (g->ph > 4 || g->pw > 4) return "Winograd: pads up to 4 only";
  return NULL;
}

/* cout rounded up to 4 */
static int padded(int cout) { return (cout + 3) / 4 * 4; }

size_t ig_wino_workspace(const ct_igemm_geom *g) {
  /* either direction's: cin x coutp pairs */
  const size_t fwd = (size_t)g->c * padded(g->m), data = (size_t)g->m * padded(g->c);
  return 36 * (fwd > data ? fwd : data) * sizeof(float);
}

void ig_wino_conv(int index, cudaStream_t st, const ct_igemm_geom *g, bool data,
                  const float *src, const float *w, const float *bias, bool relu, float *ws,
                  float *dst) {
  const int n = (int)(sizeof k_launchers / sizeof k_launchers[0]);
  CT_ASSERTF(index >= 0 && index < n, "Winograd configuration %d", index);
  CT_ASSERT(!ig_wino_unsupported(g, data ? CT_IGEMM_BWD_DATA : CT_IGEMM_FWD));
  wg_args a;
  a.src = src;
  a.u = ws;
  a.bias = bias;
  a.dst = dst;
  a.relu = relu ? 1 : 0;
  if (!data) {
    a.cin = g->c, a.H = g->h, a.W = g->w, a.cout = g->m, a.OH = g->oh, a.OW = g->ow;
    a.ph = g->ph, a.pw = g->pw;
  } else {
    a.cin = g->m, a.H = g->oh, a.W = g->ow, a.cout = g->c, a.OH = g->h, a.OW = g->w;
    a.ph = 4 - g->ph, a.pw = 4 - g->pw;
  }
  a.coutp = padded(a.cout);
  a.TH = (a.OH + 1) / 2;
  a.TW = (a.OW + 1) / 2;
  const int rows = 6 * a.cin * a.coutp;
  wg_filter_kernel<<<(unsigned)((rows + 127) / 128), 128, 0, st>>>(w, a.cin, a.cout, a.coutp,
                                                                   data ? 1 : 0, ws);
  CT_CUDA_LAUNCH_CHECK();
  k_launchers[index](st, a, g->n);
}
/* ---------------------------------------------------------------- the filter gradient's launchers */

/* Each filter-gradient configuration's rectangle and channel blocks. */
typedef struct wg_wcfg {
  int by, bx, bk, bc;
} wg_wcfg;
#define WG_WCFG(BY, BX, BK, BC, TK, TC) {BY, BX, BK, BC},
static const wg_wcfg k_wcfgs[] = {IG_WINO_WGRAD_CONFIGS(WG_WCFG)};
#undef WG_WCFG

/* The filter gradient's arguments for configuration `index` (the partial
 * sums at ws); *blocks_y: its channel blocks. */
static wg_wargs wgrad_args(int index, const ct_igemm_geom *g, int sms, int *blocks_y) {
  const int n = (int)(sizeof k_wcfgs / sizeof k_wcfgs[0]);
  CT_ASSERTF(index >= 0 && index < n, "Winograd filter-gradient configuration %d", index);
  const wg_wcfg *cf = &k_wcfgs[index];
  wg_wargs a;
  memset(&a, 0, sizeof a);
  a.C = g->c, a.H = g->h, a.W = g->w, a.K = g->m, a.OH = g->oh, a.OW = g->ow;
  a.ph = g->ph, a.pw = g->pw;
  a.TH = (a.OH + 1) / 2;
  a.TW = (a.OW + 1) / 2;
  a.NBY = (a.TH + cf->by - 1) / cf->by;
  a.NBX = (a.TW + cf->bx - 1) / cf->bx;
  a.rects = g->n * a.NBY * a.NBX;
  *blocks_y = ((a.K + cf->bk - 1) / cf->bk) * ((a.C + cf->bc - 1) / cf->bc);
  /* about two blocks per multiprocessor */
  int splits = (2 * (sms > 0 ? sms : 1) + *blocks_y - 1) / *blocks_y;
  if (splits > a.rects) splits = a.rects;
  a.splits = splits < 1 ? 1 : splits;
  return a;
}

size_t ig_wino_wgrad_workspace(const ct_igemm_geom *g, int index, int sms) {
  int blocks_y;
  const wg_wargs a = wgrad_args(index, g, sms, &blocks_y);
  return ((size_t)a.splits + 1) * 36 * g->m * g->c * sizeof(float);
}

template <int BY, int BX, int BK, int BC, int TK, int TC>
static void launch_wgrad(cudaStream_t st, const wg_wargs &a, int blocks_y) {
  typedef wg_wshape<BY, BX, BK, BC, TK, TC> S;
  wg_wgrad_kernel<BY, BX, BK, BC, TK, TC>
      <<<dim3((unsigned)a.splits, (unsigned)blocks_y), S::T, S::FLOATS * sizeof(float), st>>>(a);
  CT_CUDA_LAUNCH_CHECK();
}

typedef void (*wg_wlauncher)(cudaStream_t, const wg_wargs &, int);
#define WG_WLAUNCHER(BY, BX, BK, BC, TK, TC) launch_wgrad<BY, BX, BK, BC, TK, TC>,
static const wg_wlauncher k_wlaunchers[] = {IG_WINO_WGRAD_CONFIGS(WG_WLAUNCHER)};
#undef WG_WLAUNCHER

void ig_wino_wgrad(int index, cudaStream_t st, const ct_igemm_geom *g, int sms, const float *x,
                   const float *dy, float *ws, float *dw) {
  CT_ASSERT(!ig_wino_unsupported(g, CT_IGEMM_BWD_FILTER));
  int blocks_y;
  wg_wargs a = wgrad_args(index, g, sms, &blocks_y);
  a.x = x;
  a.dy = dy;
  a.part = ws;
  k_wlaunchers[index](st, a, blocks_y);
  const int n = 36 * g->m * g->c, pairs = g->m * g->c;
  float *sum = ws + (size_t)a.splits * n;
  wg_wgrad_sum_kernel<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(ws, a.splits, n, sum);
  CT_CUDA_LAUNCH_CHECK();
  wg_wgrad_finish_kernel<<<(unsigned)((pairs + 127) / 128), 128, 0, st>>>(sum, g->m, g->c, dw);
  CT_CUDA_LAUNCH_CHECK();
}
#endif
