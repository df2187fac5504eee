/* The filter gradient of small stride-1 convolutions as a direct
 * correlation in strict FP32 (cifar10_quick's conv2 and conv3), raced
 * against cuDNN and the implicit-GEMM kernels (see conv_igemm.h and
 * IG_DIRECT_WGRAD_CONFIGS in conv_igemm_impl.cuh).
 *
 *   dW[m, c, ky, kx] = sum over images, oy, ox of
 *                      dY[image, m, oy, ox] * X[image, c, oy + ky - ph, ox + kx - pw]
 *
 * The lanes of a warp take neighbouring output columns ox (OWL of them, at
 * least the row's width: 8 or 16 in the configurations), so that every
 * shared-memory read of a warp is of neighbouring words: no broadcasts,
 * which cost a shared-memory cycle per value.  A thread owns TM output channels x one
 * input channel x all KW x KW taps (TM * KW * KW sums in registers) at its
 * column, and walks down it: per output row it reads TM values of dY and
 * one new row of KW values of X into a window of KW rows (rotated by
 * unrolling KW rows at a time), then runs TM * KW * KW FMAs.  At the end
 * the columns' sums are added across the lanes (a fixed butterfly).
 *
 * The work is cut into units: a band of R output rows of one image.  A
 * block takes MB output channels x CB input channels and a slice of the
 * units, one unit per step, through a two-stage cp.async pipeline that
 * copies the band's dY rows and the X rows under them (zeros outside the
 * image) into shared memory.  The block's sums go to its slice of the
 * workspace (summed over the slices in a fixed order afterwards by
 * conv_igemm.cu) or, for a single slice, onto dW.  Deterministic.
 *
 * On an H100 (session 12, conv_bench, ms per call with the slices' sum)
 * it wins cifar10_quick's conv2: 0.065 against 0.074-0.075 for cuDNN's best
 * and 0.078 for the best implicit GEMM, about 20 TFLOP/s.  It loses conv3
 * narrowly (0.046 against 0.043).  Nsight Compute on an earlier version:
 * 4 warps per scheduler (109 registers), 2.8 instructions issued per cycle,
 * half of them FMAs; the copies into shared memory were most of the rest
 * (16-byte dY copies then took conv2 from 0.077 to 0.065 ms).
 *
 * tests/emu/dwgrad-emu.sh compiles the kernel on the host (DW_HOST_EMULATION)
 * and runs it, thread by thread, against a double reference. */
#ifndef DW_HOST_EMULATION
#include <stdint.h>
#include <string.h>

#include "gpu/gpu.h"
#include "layers/conv/conv_igemm.h"
#include "layers/conv/conv_igemm_impl.cuh"
extern "C" {
#include "core/log.h"
}
#define DW_SMEM_DECL extern __shared__ __align__(16) float dw_smem[]

/* v[0 .. n) of each lane += those of the other lanes of its group of
 * `lanes` (a power of 2 up to 32) by a butterfly of shuffles (the host
 * emulation gives its own DW_LANE_SUMS). */
template <int N, int LANES>
__device__ __forceinline__ void dw_lane_sums(float *v) {
#pragma unroll
  for (int j = 0; j < N; j++)
#pragma unroll
    for (int l = 1; l < LANES; l *= 2) v[j] += __shfl_xor_sync(0xffffffffu, v[j], l);
}
#define DW_LANE_SUMS(v, n, lanes) dw_lane_sums<(n), (lanes)>(v)
#endif

/* A launch's geometry and shared-memory layout (dw_layout). */
typedef struct dw_args {
  const float *x, *dy;
  float *out;      /* dW (accumulate) or the workspace's slices (M * C * KW * KW apart) */
  int accumulate;
  int C, H, W, M, OH, OW, ph, pw;
  int R, NB, units, chunk; /* rows per unit, units per image, units in all, units per block */
  /* shared memory of a stage: X[c][row][col] at c * XS_C + row * PWP + col
   * (R + KW - 1 rows), dY[i][row][col] at DOFF + i * R * OWL + row * OWL +
   * col (PWP = OWL + KW - 1) */
  int PWP, XS_C, DOFF, SF; /* SF: floats of a stage */
} dw_args;

/* KW x KW filters; OWL lanes along a row; TM output channels per thread;
 * MB output channels x CB input channels per block. */
template <int KW, int OWL, int TM, int CB, int MB>
struct dw_shape {
  static constexpr int T = OWL * CB * (MB / TM);
  static_assert(MB % TM == 0 && 32 % OWL == 0 && T % 32 == 0 && T <= 1024, "dw_shape");
};

template <int KW, int OWL, int TM, int CB, int MB>
__global__ void __launch_bounds__(dw_shape<KW, OWL, TM, CB, MB>::T, 1)
    dw_wgrad_kernel(dw_args a) {
  typedef dw_shape<KW, OWL, TM, CB, MB> S;
  DW_SMEM_DECL;
  const int tid = threadIdx.x;
  const int ox = tid % OWL, q = tid / OWL;
  const int cl = q % CB, mg = q / CB;
  const int c0 = blockIdx.x * CB, m0 = blockIdx.y * MB;
  const int u_begin = blockIdx.z * a.chunk, u_end = min(a.units, u_begin + a.chunk);
  const int xrows = a.R + KW - 1, RD = a.R * OWL;

  /* unit u's rows into stage b: X column by column of PWP (threads past
   * the last column idle), dY column by column of OWL */
  auto load = [&](int u, int b) {
    const int img = u / a.NB, oy0 = (u - img * a.NB) * a.R;
    float *base = dw_smem + b * a.SF;
    const int xpass = S::T / a.PWP, xcol = tid % a.PWP, xslot = tid / a.PWP;
    const int ix = xcol - a.pw;
    const bool xcol_in = ix >= 0 && ix < a.W;
    if (xslot < xpass) {
      int c = 0, r = xslot;
#pragma unroll 1
      for (int rr = xslot; rr < CB * xrows; rr += xpass) {
        while (r >= xrows) {
          r -= xrows;
          c++;
        }
        const int iy = oy0 + r - a.ph, ci = c0 + c;
        const bool ok = xcol_in && ci < a.C && iy >= 0 && iy < a.H;
        ig_cp4(base + c * a.XS_C + r * a.PWP + xcol,
               ok ? a.x + (((size_t)img * a.C + ci) * a.H + iy) * a.W + ix : a.x, ok);
        r += xpass;
      }
    }
    if (a.OW == OWL && OWL % 4 == 0) {
      /* dY's rows of a band are OWL apart both here and in global memory:
       * 16-byte copies, zeros past the last row */
      const int band4 = a.R * OWL / 4;
      int i = 0, e4 = tid;
#pragma unroll 1
      for (int e = tid; e < MB * band4; e += S::T) {
        while (e4 >= band4) {
          e4 -= band4;
          i++;
        }
        const int oy = oy0 + e4 / (OWL / 4), m = m0 + i;
        const bool ok = m < a.M && oy < a.OH;
        ig_cp16(base + a.DOFF + i * RD + 4 * e4,
                ok ? a.dy + (((size_t)img * a.M + m) * a.OH + oy0) * a.OW + 4 * e4 : a.dy, ok);
        e4 += S::T;
      }
      return;
    }
    constexpr int dpass = S::T / OWL;
    const int dcol = tid % OWL, dslot = tid / OWL;
    const bool dcol_in = dcol < a.OW;
    int i = 0, r = dslot;
#pragma unroll 1
    for (int rr = dslot; rr < MB * a.R; rr += dpass) {
      while (r >= a.R) {
        r -= a.R;
        i++;
      }
      const int oy = oy0 + r, m = m0 + i;
      const bool ok = dcol_in && m < a.M && oy < a.OH;
      ig_cp4(base + a.DOFF + i * RD + r * OWL + dcol,
             ok ? a.dy + (((size_t)img * a.M + m) * a.OH + oy) * a.OW + dcol : a.dy, ok);
      r += dpass;
    }
  };

  float acc[TM][KW][KW];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int y = 0; y < KW; y++)
#pragma unroll
      for (int k = 0; k < KW; k++) acc[i][y][k] = 0.0f;

  if (u_begin < u_end) load(u_begin, 0);
  ig_cp_commit();
#pragma unroll 1
  for (int u = u_begin; u < u_end; u++) {
    const int s = u - u_begin;
    if (u + 1 < u_end) {
      load(u + 1, (s + 1) & 1);
      ig_cp_commit();
      ig_cp_wait<1>();
    } else {
      ig_cp_wait<0>();
    }
    __syncthreads();
    const int rows = min(a.R, a.OH - (u % a.NB) * a.R);
    const float *base = dw_smem + (s & 1) * a.SF;
    const float *xs = base + cl * a.XS_C + ox;
    const float *ds = base + a.DOFF + mg * TM * RD + ox;
    /* win[row % KW][kx]: X rows r .. r + KW - 1 at columns ox .. ox + KW - 1 */
    float win[KW][KW];
#pragma unroll
    for (int y = 0; y < KW - 1; y++)
#pragma unroll
      for (int k = 0; k < KW; k++) win[y][k] = xs[y * a.PWP + k];
#pragma unroll 1
    for (int r0 = 0; r0 < rows; r0 += KW) {
#pragma unroll
      for (int p = 0; p < KW; p++) {
        const int r = r0 + p;
        if (r >= rows) break;
        const float *xr = xs + (r + KW - 1) * a.PWP;
#pragma unroll
        for (int k = 0; k < KW; k++) win[(p + KW - 1) % KW][k] = xr[k];
        float d[TM];
#pragma unroll
        for (int i = 0; i < TM; i++) d[i] = ds[i * RD + r * OWL];
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
          for (int y = 0; y < KW; y++)
#pragma unroll
            for (int k = 0; k < KW; k++)
              acc[i][y][k] = fmaf(d[i], win[(p + y) % KW][k], acc[i][y][k]);
      }
    }
    __syncthreads();
  }

  /* the columns' sums, across the OWL lanes: every lane ends with the
   * same sums, added in the same order */
  DW_LANE_SUMS(&acc[0][0][0], TM * KW * KW, OWL);
  const int c = c0 + cl;
  if (c >= a.C) return;
  const size_t MK = (size_t)a.M * a.C * KW * KW;
  float *dst = a.accumulate ? a.out : a.out + blockIdx.z * MK;
  /* lane ox writes taps ox, ox + OWL, ... of each of its channels */
#pragma unroll
  for (int i = 0; i < TM; i++) {
    const int m = m0 + mg * TM + i;
    if (m >= a.M) continue;
    float *p = dst + ((size_t)m * a.C + c) * KW * KW;
#pragma unroll
    for (int j = 0; j < KW * KW; j++)
      if (j % OWL == ox) p[j] = a.accumulate ? p[j] + acc[i][j / KW][j % KW] : acc[i][j / KW][j % KW];
  }
}

/* ---------------------------------------------------------------- layout */

/* The largest dynamic shared memory a block may take (an H100's 227 KiB). */
#define DW_SMEM_MAX (227 * 1024)

/* a's layout for g (false: it does not fit).  X's channel stride XS_C is
 * OWL more than a multiple of 32 words: the 32 / OWL channels a warp reads
 * then fall in distinct banks. */
static bool dw_layout(const ct_igemm_geom *g, int KW, int OWL, int TM, int CB, int MB, int R,
                      dw_args *a, size_t *smem_bytes) {
  const int T = OWL * CB * (MB / TM);
  a->C = g->c, a->H = g->h, a->W = g->w, a->M = g->m, a->OH = g->oh, a->OW = g->ow;
  a->ph = g->ph, a->pw = g->pw;
  a->R = R < g->oh ? R : g->oh;
  a->NB = (g->oh + a->R - 1) / a->R;
  a->units = g->n * a->NB;
  a->PWP = OWL + KW - 1;
  if (g->ow > OWL || a->PWP > T) return false;
  const int plane = (a->R + KW - 1) * a->PWP;
  a->XS_C = (plane - OWL % 32 + 31) / 32 * 32 + OWL % 32;
  a->DOFF = (CB * a->XS_C + 3) / 4 * 4;
  a->SF = (a->DOFF + MB * a->R * OWL + 3) / 4 * 4;
  *smem_bytes = (size_t)2 * a->SF * sizeof(float);
  return *smem_bytes <= DW_SMEM_MAX;
}

/* Units per block and slices: one block per multiprocessor for each block
 * that fits there at once (by shared memory, threads, and about 128
 * registers a thread), each slice as long as the others but the last. */
static void dw_split(const dw_args *a, int tiles, int T, size_t smem_bytes, int sms, int *splits,
                     int *chunk) {
  int per_sm = (int)(DW_SMEM_MAX / (smem_bytes ? smem_bytes : 1));
  if (per_sm > 2048 / T) per_sm = 2048 / T;
  if (per_sm > 65536 / (T * 128)) per_sm = 65536 / (T * 128);
  if (per_sm < 1) per_sm = 1;
  long s = (long)(sms > 0 ? sms : 1) * per_sm / tiles;
  if (s < 1) s = 1;
  *chunk = (int)((a->units + s - 1) / s);
  *splits = (a->units + *chunk - 1) / *chunk;
}

#ifndef DW_HOST_EMULATION
/* ---------------------------------------------------------------- launchers */

typedef struct dw_config {
  int kw, owl, tm, cb, mb, r;
} dw_config;
#define DW_CONFIG(KW, OWL, TM, CB, MB, R) {KW, OWL, TM, CB, MB, R},
static const dw_config k_configs[] = {IG_DIRECT_WGRAD_CONFIGS(DW_CONFIG)};
#undef DW_CONFIG

template <int KW, int OWL, int TM, int CB, int MB>
static void launch(cudaStream_t st, const dw_args &a, size_t smem_bytes, int splits) {
  typedef dw_shape<KW, OWL, TM, CB, MB> S;
  dim3 grid((unsigned)((a.C + CB - 1) / CB), (unsigned)((a.M + MB - 1) / MB), (unsigned)splits);
  dw_wgrad_kernel<KW, OWL, TM, CB, MB><<<grid, S::T, smem_bytes, st>>>(a);
  CT_CUDA_LAUNCH_CHECK();
}

typedef void (*dw_launcher)(cudaStream_t, const dw_args &, size_t, int);
#define DW_LAUNCHER(KW, OWL, TM, CB, MB, R) launch<KW, OWL, TM, CB, MB>,
static const dw_launcher k_launchers[] = {IG_DIRECT_WGRAD_CONFIGS(DW_LAUNCHER)};
#undef DW_LAUNCHER

void ig_direct_allow_smem(void) {
#define DW_ATTR(KW, OWL, TM, CB, MB, R)                                                     \
  CT_CUDA_CHECK(cudaFuncSetAttribute(dw_wgrad_kernel<KW, OWL, TM, CB, MB>,                   \
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, DW_SMEM_MAX)); \
  CT_CUDA_CHECK(cudaFuncSetAttribute(dw_wgrad_kernel<KW, OWL, TM, CB, MB>,                   \
                                     cudaFuncAttributePreferredSharedMemoryCarveout,         \
                                     cudaSharedmemCarveoutMaxShared));
  IG_DIRECT_WGRAD_CONFIGS(DW_ATTR)
#undef DW_ATTR
}

void ig_direct_prepare(int index, const ct_igemm_geom *g, int sms, ig_direct_plan *plan) {
  const dw_config k = ig_launcher_at(k_configs, index, "direct filter gradient");
  memset(plan, 0, sizeof *plan);
  dw_args a;
  if (g->kh != k.kw || g->kw != k.kw) {
    plan->why = "direct filter gradient: another filter size";
  } else if (g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1) {
    plan->why = "direct filter gradient: stride 1 and dilation 1 only";
  } else if (!dw_layout(g, k.kw, k.owl, k.tm, k.cb, k.mb, k.r, &a, &plan->smem_bytes)) {
    plan->why = "direct filter gradient: rows too wide for the configuration";
  } else {
    const int tiles = ((g->c + k.cb - 1) / k.cb) * ((g->m + k.mb - 1) / k.mb);
    dw_split(&a, tiles, k.owl * k.cb * (k.mb / k.tm), plan->smem_bytes, sms, &plan->splits,
             &plan->chunk);
  }
}

void ig_direct_wgrad(int index, cudaStream_t st, const ct_igemm_geom *g,
                     const ig_direct_plan *plan, const float *x, const float *dy, float *out,
                     bool accumulate) {
  const dw_config k = ig_launcher_at(k_configs, index, "direct filter gradient");
  CT_ASSERT(!plan->why && (!accumulate || plan->splits == 1));
  dw_args a;
  size_t smem;
  CT_ASSERT(dw_layout(g, k.kw, k.owl, k.tm, k.cb, k.mb, k.r, &a, &smem) &&
            smem == plan->smem_bytes);
  a.x = x;
  a.dy = dy;
  a.out = out;
  a.accumulate = accumulate ? 1 : 0;
  a.chunk = plan->chunk;
  k_launchers[index](st, a, smem, plan->splits);
}
#endif
