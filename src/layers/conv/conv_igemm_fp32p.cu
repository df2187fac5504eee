/* Implicit-GEMM convolution kernels in strict FP32 (fmaf only: no TF32,
 * no tensor cores) fed by a cp.async pipeline: the same GEMMs, gathers and
 * results layout as the register-prefetch kernels of conv_igemm.cu, and the
 * pipeline of conv_igemm_tf32.cu.  See conv_igemm.h and
 * conv_igemm_impl.cuh.
 *
 * A block streams the reduction through STAGES shared-memory buffers of BK
 * steps each: every operand value is one 4-byte cp.async (zero-filled where
 * the gather falls outside the image, the table or the tile), issued
 * STAGES - 1 steps ahead of the math.  The buffers hold both operands
 * step-major, A as [step][row] and B as [step][column], so that each thread
 * reads its TM rows and 8 columns of a step as float4s (rows tm*4.. and
 * BM/2 + tm*4.., columns tn*4.. and BN/2 + tn*4..: a warp's float4s are
 * neighbours).  The operands that are written across steps (A, and both of
 * backward filter's) are loaded by warps of 8 steps x 4 rows into rows
 * padded to 4 (mod 32) floats: the 32 stores of a warp hit 32 banks.  The
 * S groups of a block take each stage's steps in S contiguous slices, and
 * their sums add up in group order at the end.  No atomics: every sum has a
 * fixed order. */
#include <stdint.h>

#include "gpu/gpu.h"
#include "layers/conv/conv_igemm_impl.cuh"

/* ---------------------------------------------------------------- shape and math */

/* The shape of a pipelined configuration (see IG_PIPE_GEMM_CONFIGS). */
template <int BM, int BN, int TM, int S, int BK, int STAGES>
struct ig_pipe_shape {
  static constexpr int TN = 8;
  static constexpr int TG = BM / TM * (BN / TN); /* threads of a group */
  static constexpr int T = TG * S;
  static constexpr int RPG = BK / S; /* steps of a stage per group */
  /* The step-major loaders: thread tid takes step row() of each stage and
   * the rows (or columns) col() + q * CR of the tile, so that a warp covers
   * 8 steps x 4 neighbouring rows. */
  static constexpr int CR = T / BK;
  static constexpr int SA = BM + 4; /* A's rows: 4 (mod 32) */
  /* blocks per multiprocessor that the register budget must allow: at
   * least 384 threads (12 warps) to hide the gathers' latency */
  static constexpr int MIN_BLOCKS = T >= 256 ? 2 : T >= 128 ? 3 : 6;
  static_assert(TM == 4 || TM == 8, "thread tiles of 4 x 8 or 8 x 8");
  static_assert(BM % 32 == 0 && BN % 32 == 0, "rows padded to 4 (mod 32); warps of 8 columns");
  static_assert(TG % 32 == 0, "groups of whole warps");
  static_assert(BK % 8 == 0 && BK % S == 0 && IG_TABLE_STEP % BK == 0,
                "steps of 8, split evenly among the groups, inside the padded table");
  static_assert(T % (4 * BK) == 0 && BM % CR == 0, "the step-major loaders' warps");
  static_assert(STAGES >= 2, "a pipeline");
  __device__ static int row(int tid) { return tid / 32 % (BK / 8) * 8 + tid % 8; }
  __device__ static int col(int tid) { return tid / (4 * BK) * 4 + tid / 8 % 4; }
};

/* acc[i][j] += sum over R steps of As[step][row i] * Bs[step][column j],
 * As and Bs at the first step, rows SA and SB floats apart. */
template <int BM, int BN, int TM, int R, int SA, int SB>
__device__ __forceinline__ void ig_pipe_step(float (&acc)[TM][8], const float *As,
                                             const float *Bs, int tm, int tn) {
#pragma unroll
  for (int r = 0; r < R; r++) {
    float a[TM], b[8];
    const float4 a0 = *(const float4 *)(As + r * SA + tm * 4);
    a[0] = a0.x;
    a[1] = a0.y;
    a[2] = a0.z;
    a[3] = a0.w;
    if constexpr (TM == 8) {
      const float4 a1 = *(const float4 *)(As + r * SA + BM / 2 + tm * 4);
      a[4] = a1.x;
      a[5] = a1.y;
      a[6] = a1.z;
      a[7] = a1.w;
    }
    const float4 b0 = *(const float4 *)(Bs + r * SB + tn * 4);
    const float4 b1 = *(const float4 *)(Bs + r * SB + BN / 2 + tn * 4);
    b[0] = b0.x;
    b[1] = b0.y;
    b[2] = b0.z;
    b[3] = b0.w;
    b[4] = b1.x;
    b[5] = b1.y;
    b[6] = b1.z;
    b[7] = b1.w;
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
      for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

/* Row i (0..TM-1) of thread row tm in a tile BM high. */
template <int BM>
__device__ __forceinline__ int ig_pipe_row(int tm, int i) {
  return i < 4 ? tm * 4 + i : BM / 2 + tm * 4 + (i - 4);
}

/* The S groups' accumulators added into group 0's, in group order, through
 * red (shared, SMEM floats, free for reuse: the caller has drained its
 * cp.async groups and synchronised), as many groups a round as fit.  Every
 * thread calls it. */
template <int TM, int S, int TG, int SMEM>
__device__ __forceinline__ void ig_pipe_add_groups(float (&acc)[TM][8], float *red, int grp,
                                                   int tig) {
  if constexpr (S > 1) {
    constexpr int NACC = TM * 8;
    constexpr int FIT = SMEM / (NACC * TG);
    constexpr int NR = FIT < S - 1 ? FIT : S - 1; /* groups a round */
    static_assert(NR >= 1, "one group's sums fit the pipeline's buffers");
#pragma unroll 1
    for (int base = 1; base < S; base += NR) {
      if (grp >= base && grp < base + NR) {
        float *dst = red + (grp - base) * NACC * TG + tig;
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
          for (int j = 0; j < 8; j++) dst[(i * 8 + j) * TG] = acc[i][j];
      }
      __syncthreads();
      if (grp == 0) {
        const int end = base + NR < S ? base + NR : S;
        for (int s = base; s < end; s++) {
          const float *src = red + (s - base) * NACC * TG + tig;
#pragma unroll
          for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] += src[(i * 8 + j) * TG];
        }
      }
      __syncthreads();
    }
  }
}

/* ---------------------------------------------------------------- forward and backward data */

/* out[image, m, pix] = sum_k A[m * a_stride + table[k].x] * gather(k, n)
 * (+ bias[m], then ReLU), n = (image, pix) < N, m < M.  Shared memory per
 * stage: A as [BK][BM + 4], B as [BK][BN].  A thread loads A at one step
 * and several rows m (step-major loader), and B at one or more fixed
 * columns n (their gather positions computed once) and several steps, so
 * that a warp's 32 lanes read one table entry and 32 neighbouring
 * columns. */
template <int BM, int BN, int TM, int S, int BK, int STAGES>
__global__ void __launch_bounds__(ig_pipe_shape<BM, BN, TM, S, BK, STAGES>::T,
                                  ig_pipe_shape<BM, BN, TM, S, BK, STAGES>::MIN_BLOCKS)
    ig_pipe_gemm_kernel(const float *__restrict__ A, int a_stride,
                        const int4 *__restrict__ table, int K, ig_gather g, int N, int M,
                        float *__restrict__ out, const float *__restrict__ bias, int relu) {
  using C = ig_pipe_shape<BM, BN, TM, S, BK, STAGES>;
  constexpr int T = C::T, TG = C::TG, SA = C::SA, SB = BN, CR = C::CR, RPG = C::RPG;
  constexpr int A_STAGE = BK * SA, STAGE = A_STAGE + BK * SB, SMEM = STAGES * STAGE;
  constexpr int A_PER = BM / CR;
  /* B: columns bcol + j * TB, steps brow + i * B_RSTEP */
  constexpr int TB = T < BN ? T : BN, NCOLS = BN / TB, B_RSTEP = T / TB, B_ROWS = BK / B_RSTEP;
  static_assert(TB % 32 == 0 && BN % TB == 0 && T % TB == 0 && BK % B_RSTEP == 0, "B loads");
  static_assert(SMEM * sizeof(float) <= 48 * 1024, "static shared memory");
  __shared__ __align__(16) float smem[SMEM];
  const int tid = threadIdx.x, grp = tid / TG, tig = tid % TG;
  const int tn = tig % (BN / 8), tm = tig / (BN / 8);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int KT = (K + BK - 1) / BK;
  const int arow = C::row(tid), acol = C::col(tid);
  const int bcol = tid % TB, brow = tid / TB;
  int bpos[NCOLS], by0[NCOLS], bx0[NCOLS];
  ig_columns<NCOLS, TB>(g, n0 + bcol, N, bpos, by0, bx0);
  auto load = [&](int kt, int slot) {
    float *As = smem + slot * STAGE, *Bs = As + A_STAGE;
    const int kb = kt * BK;
    {
      const int k = kb + arow;
      const int aoff = __ldg(&table[k].x); /* padded table: k < KT * BK is inside */
#pragma unroll
      for (int q = 0; q < A_PER; q++) {
        const int ml = acol + q * CR, m = m0 + ml;
        const bool ok = k < K && m < M;
        ig_cp4(As + arow * SA + ml, ok ? A + (size_t)m * a_stride + aoff : A, ok);
      }
    }
    ig_gather_stage<B_ROWS, B_RSTEP, NCOLS, TB, SB>(Bs, table, kb, brow, bcol, g, bpos, by0, bx0);
  };
  float acc[TM][8];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
  auto step = [&](int slot) {
    const float *As = smem + slot * STAGE;
    ig_pipe_step<BM, BN, TM, RPG, SA, SB>(acc, As + grp * RPG * SA,
                                          As + A_STAGE + grp * RPG * SB, tm, tn);
  };
  ig_pipeline<STAGES>(KT, load, step);
  ig_pipe_add_groups<TM, S, TG, SMEM>(acc, smem, grp, tig);
  if (grp != 0) return;
  /* the epilogue: each run of four columns at once where they lie in one
   * image and out is 16-byte aligned there */
  const bool vec = g.P % 4 == 0 && ((uintptr_t)out & 15) == 0;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int n = n0 + h * (BN / 2) + tn * 4; /* the run's first column */
    if (n >= N) continue;
    const int img = n / g.P, pix = n - img * g.P;
    const size_t at = (size_t)img * M * g.P + pix;
    const bool quad = vec && n + 3 < N;
#pragma unroll
    for (int i = 0; i < TM; i++) {
      const int m = m0 + ig_pipe_row<BM>(tm, i);
      if (m >= M) continue;
      const float b = bias ? __ldg(bias + m) : 0.0f;
      float v[4];
#pragma unroll
      for (int c = 0; c < 4; c++) {
        v[c] = acc[i][h * 4 + c] + b;
        if (relu) v[c] = fmaxf(v[c], 0.0f);
      }
      if (quad) {
        *(float4 *)(out + at + (size_t)m * g.P) = make_float4(v[0], v[1], v[2], v[3]);
        continue;
      }
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int nc = n + c;
        if (nc >= N) break;
        const int ic = nc / g.P, pc = nc - ic * g.P;
        out[((size_t)ic * M + m) * g.P + pc] = v[c];
      }
    }
  }
}

/* ---------------------------------------------------------------- backward filter */

/* out[m, k] (+)= sum over n in this block's slice of dY[image, m, pix] *
 * gather(k, n): blockIdx.z is the slice [z * chunk, (z + 1) * chunk) of the
 * N columns; its BM x BN tile (m, filter tap k) goes to out + z * M * K
 * (accumulate 0) or is added to out (accumulate 1, one slice only).  The
 * reduction runs over n: shared memory per stage holds dY as [BK][BM + 4]
 * and the gathered X as [BK][BN + 4].  Both operands go through the
 * step-major loader: a thread takes one column n per stage (its image, row
 * and column walked forward by BK without divisions) and several m and k,
 * and the block's table entries sit in shared memory. */
template <int BM, int BN, int TM, int S, int BK, int STAGES>
__global__ void __launch_bounds__(ig_pipe_shape<BM, BN, TM, S, BK, STAGES>::T,
                                  ig_pipe_shape<BM, BN, TM, S, BK, STAGES>::MIN_BLOCKS)
    ig_pipe_wgrad_kernel(const float *__restrict__ dy, int M, const int4 *__restrict__ table,
                         int K, ig_gather g, int N, int chunk, float *__restrict__ out,
                         int accumulate) {
  using C = ig_pipe_shape<BM, BN, TM, S, BK, STAGES>;
  constexpr int T = C::T, TG = C::TG, SA = C::SA, SB = BN + 4, CR = C::CR, RPG = C::RPG;
  constexpr int A_STAGE = BK * SA, STAGE = A_STAGE + BK * SB, SMEM = STAGES * STAGE;
  constexpr int A_PER = BM / CR, B_PER = BN / CR;
  static_assert(BN % CR == 0, "B loads");
  static_assert(IG_TABLE_STEP % BN == 0, "a block's table entries lie inside the padded table");
  static_assert(SMEM * sizeof(float) + BN * sizeof(int4) <= 48 * 1024, "static shared memory");
  __shared__ __align__(16) float smem[SMEM];
  __shared__ int4 tab[BN];
  const int tid = threadIdx.x, grp = tid / TG, tig = tid % TG;
  const int tn = tig % (BN / 8), tm = tig / (BN / 8);
  const int k0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int n_begin = blockIdx.z * chunk;
  const int n_end = min(N, n_begin + chunk);
  for (int i = tid; i < BN; i += T) tab[i] = __ldg(&table[k0 + i]);
  __syncthreads();
  const int KT = n_end > n_begin ? (n_end - n_begin + BK - 1) / BK : 0;
  const int row = C::row(tid), col = C::col(tid);
  /* this thread's column n of the next stage to load, as (img, oy, ox)
   * when n < n_end (it only grows: past n_end nothing is read) */
  int n = n_begin + row, img = 0, oy = 0, ox = 0;
  if (n < n_end) {
    img = n / g.P;
    const int pix = n - img * g.P;
    oy = pix / g.OW;
    ox = pix - oy * g.OW;
  }
  const int dq = BK / g.OW, dr = BK - dq * g.OW; /* a stage's BK columns in rows */
  /* the stages come in order 0, 1, ..., KT - 1 (ig_pipeline): n walks on */
  auto load = [&](int /* kt */, int slot) {
    float *As = smem + slot * STAGE, *Bs = As + A_STAGE;
    const bool nok = n < n_end;
    int abase = 0, pos = 0, y0 = IG_FAR, x0 = 0;
    if (nok) {
      abase = img * M * g.P + oy * g.OW + ox;
      y0 = oy * g.sy + g.y_off;
      x0 = ox * g.sx + g.x_off;
      pos = img * g.img_stride + y0 * g.SW + x0;
    }
#pragma unroll
    for (int q = 0; q < A_PER; q++) {
      const int ml = col + q * CR, m = m0 + ml;
      const bool ok = nok && m < M;
      ig_cp4(As + row * SA + ml, ok ? dy + abase + (size_t)m * g.P : dy, ok);
    }
#pragma unroll
    for (int q = 0; q < B_PER; q++) {
      const int kc = col + q * CR;
      const int4 e = tab[kc];
      const bool ok =
          (unsigned)(y0 + e.z) < (unsigned)g.SH && (unsigned)(x0 + e.w) < (unsigned)g.SW;
      ig_cp4(Bs + row * SB + kc, g.src + (ok ? pos + e.y : 0), ok);
    }
    /* n + BK: dq rows and dr columns on, carried into rows and images */
    n += BK;
    ox += dr;
    oy += dq;
    if (ox >= g.OW) {
      ox -= g.OW;
      oy++;
    }
    if (oy >= g.OH) {
      const int carry = oy / g.OH;
      img += carry;
      oy -= carry * g.OH;
    }
  };
  float acc[TM][8];
#pragma unroll
  for (int i = 0; i < TM; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
  auto step = [&](int slot) {
    const float *As = smem + slot * STAGE;
    ig_pipe_step<BM, BN, TM, RPG, SA, SB>(acc, As + grp * RPG * SA,
                                          As + A_STAGE + grp * RPG * SB, tm, tn);
  };
  ig_pipeline<STAGES>(KT, load, step);
  ig_pipe_add_groups<TM, S, TG, SMEM>(acc, smem, grp, tig);
  if (grp != 0) return;
  float *dst = accumulate ? out : out + (size_t)blockIdx.z * M * K;
  const bool vec = K % 4 == 0 && ((uintptr_t)dst & 15) == 0;
#pragma unroll
  for (int i = 0; i < TM; i++) {
    const int m = m0 + ig_pipe_row<BM>(tm, i);
    if (m >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int k = k0 + h * (BN / 2) + tn * 4; /* the run's first tap */
      if (k >= K) continue;
      float *p = dst + (size_t)m * K + k;
      float v[4];
#pragma unroll
      for (int c = 0; c < 4; c++) v[c] = acc[i][h * 4 + c];
      if (vec && k + 3 < K) {
        float4 r = make_float4(v[0], v[1], v[2], v[3]);
        if (accumulate) {
          const float4 o = *(const float4 *)p;
          r = make_float4(o.x + r.x, o.y + r.y, o.z + r.z, o.w + r.w);
        }
        *(float4 *)p = r;
        continue;
      }
#pragma unroll
      for (int c = 0; c < 4; c++)
        if (k + c < K) p[c] = accumulate ? p[c] + v[c] : v[c];
    }
  }
}

/* ---------------------------------------------------------------- launchers */

template <int BM, int BN, int TM, int S, int BK, int STAGES>
static void launch_gemm(cudaStream_t st, const float *A, int a_stride, const int4 *table, int K,
                        const ig_gather &g, int N, int M, float *out, const float *bias,
                        bool relu) {
  dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
  ig_pipe_gemm_kernel<BM, BN, TM, S, BK, STAGES>
      <<<grid, ig_pipe_shape<BM, BN, TM, S, BK, STAGES>::T, 0, st>>>(A, a_stride, table, K, g,
                                                                     N, M, out, bias,
                                                                     relu ? 1 : 0);
  CT_CUDA_LAUNCH_CHECK();
}

template <int BM, int BN, int TM, int S, int BK, int STAGES>
static void launch_wgrad(cudaStream_t st, const float *dy, int M, const int4 *table, int K,
                         const ig_gather &g, int N, int chunk, int splits, float *out,
                         bool accumulate) {
  dim3 grid((unsigned)((K + BN - 1) / BN), (unsigned)((M + BM - 1) / BM), (unsigned)splits);
  ig_pipe_wgrad_kernel<BM, BN, TM, S, BK, STAGES>
      <<<grid, ig_pipe_shape<BM, BN, TM, S, BK, STAGES>::T, 0, st>>>(dy, M, table, K, g, N,
                                                                     chunk, out,
                                                                     accumulate ? 1 : 0);
  CT_CUDA_LAUNCH_CHECK();
}

#define IG_GEMM_LAUNCHER(BM, BN, TM, S, BK, STAGES) launch_gemm<BM, BN, TM, S, BK, STAGES>,
#define IG_WGRAD_LAUNCHER(BM, BN, TM, S, BK, STAGES) launch_wgrad<BM, BN, TM, S, BK, STAGES>,
static const ig_gemm_launcher k_gemm_launchers[] = {IG_PIPE_GEMM_CONFIGS(IG_GEMM_LAUNCHER)};
static const ig_wgrad_launcher k_wgrad_launchers[] = {IG_PIPE_WGRAD_CONFIGS(IG_WGRAD_LAUNCHER)};
#undef IG_GEMM_LAUNCHER
#undef IG_WGRAD_LAUNCHER

void ig_pipe_gemm(int index, cudaStream_t st, const float *A, int a_stride, const int4 *table,
                  int K, const ig_gather &g, int N, int M, float *out, const float *bias,
                  bool relu) {
  ig_launcher_at(k_gemm_launchers, index, "pipelined implicit GEMM")(st, A, a_stride, table, K, g, N,
                                                                 M, out, bias, relu);
}

void ig_pipe_wgrad(int index, cudaStream_t st, const float *dy, int M, const int4 *table, int K,
                   const ig_gather &g, int N, int chunk, int splits, float *out, bool accumulate) {
  ig_launcher_at(k_wgrad_launchers, index, "pipelined implicit GEMM filter")(
      st, dy, M, table, K, g, N, chunk, splits, out, accumulate);
}
