/* Implicit-GEMM convolution kernels on TF32 tensor cores (mma.sync
 * m16n8k8): the same GEMMs, gathers and results layout as the strict FP32
 * kernels of conv_igemm.cu, for plans whose math allows TF32.  See
 * conv_igemm.h and conv_igemm_impl.cuh.
 *
 * A block keeps a BM x BN output tile in registers (warps of 32 x WN, as
 * 2 x WN/8 fragments of 16 x 8) and streams the reduction through STAGES
 * shared-memory buffers of 32 steps each: every operand value is one 4-byte
 * cp.async (zero-filled where the gather falls outside the image, the
 * table or the tile), issued STAGES - 1 steps ahead of the math.  Operands
 * are rounded to TF32 (cvt.rna) as they leave shared memory.  Rows of the
 * shared buffers are padded so that the fragment loads of a warp hit 32
 * different banks.  No atomics: every sum has a fixed order. */
#include <stdint.h>

#include "gpu/gpu.h"
#include "layers/conv/conv_igemm_impl.cuh"

/* ---------------------------------------------------------------- primitives */

__device__ __forceinline__ uint32_t ig_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

/* d += a (16 x 8, row-major fragment) * b (8 x 8, column fragment):
 * lane = 4 * gid + tig holds a = {(gid, tig), (gid + 8, tig), (gid, tig + 4),
 * (gid + 8, tig + 4)}, b = {(tig, gid), (tig + 4, gid)} and d = {(gid,
 * 2 tig), (gid, 2 tig + 1), (gid + 8, 2 tig), (gid + 8, 2 tig + 1)} as
 * (row, column). */
__device__ __forceinline__ void ig_mma(float (&d)[4], const uint32_t (&a)[4],
                                       const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* One warp's share of one pipeline stage: the 32-deep reduction step as
 * four 8-deep slices, of which warp group grp (of S) takes slices grp,
 * grp + S, ...  As points at the warp's 32 rows of the A buffer, stored
 * [row][k] with row stride SA; Bs at the warp's WN columns of the B buffer,
 * where element (k, column) is at k * BKS + column * BNS.  With SA = 4
 * (mod 32) and either BKS = 8 (mod 32), BNS = 1 or BKS = 1, BNS = 4
 * (mod 32), the 32 lanes of every fragment load hit 32 different banks. */
template <int WN, int S, int SA, int BKS, int BNS>
__device__ __forceinline__ void ig_tf32_step(float (&acc)[2][WN / 8][4], const float *As,
                                             const float *Bs, int grp, int gid, int tig) {
  static_assert(4 % S == 0, "the groups split the four 8-deep slices evenly");
#pragma unroll
  for (int q = 0; q < 4 / S; q++) {
    const int k8 = (q * S + grp) * 8;
    uint32_t a[2][4], b[WN / 8][2];
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
      const float *p = As + (mt * 16 + gid) * SA + k8 + tig;
      a[mt][0] = ig_tf32(p[0]);
      a[mt][1] = ig_tf32(p[8 * SA]);
      a[mt][2] = ig_tf32(p[4]);
      a[mt][3] = ig_tf32(p[8 * SA + 4]);
    }
#pragma unroll
    for (int nt = 0; nt < WN / 8; nt++) {
      const float *p = Bs + (nt * 8 + gid) * BNS + (k8 + tig) * BKS;
      b[nt][0] = ig_tf32(p[0]);
      b[nt][1] = ig_tf32(p[4 * BKS]);
    }
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
      for (int nt = 0; nt < WN / 8; nt++) ig_mma(acc[mt][nt], a[mt], b[nt]);
  }
}

/* The S groups' accumulators added into group 0's, in group order, through
 * red (shared, (S - 1) * WN * TG floats, free for reuse: the caller has
 * drained its cp.async groups and synchronised).  Every thread calls it. */
template <int WN, int S, int TG>
__device__ __forceinline__ void ig_tf32_add_groups(float (&acc)[2][WN / 8][4], float *red, int grp,
                                                   int tig_block) {
  if (S == 1) return;
  constexpr int NACC = 2 * (WN / 8) * 4;
  if (grp > 0) {
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
      for (int nt = 0; nt < WN / 8; nt++)
#pragma unroll
        for (int q = 0; q < 4; q++)
          red[((grp - 1) * NACC + (mt * (WN / 8) + nt) * 4 + q) * TG + tig_block] = acc[mt][nt][q];
  }
  __syncthreads();
  if (grp == 0) {
    for (int s = 1; s < S; s++)
#pragma unroll
      for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < WN / 8; nt++)
#pragma unroll
          for (int q = 0; q < 4; q++)
            acc[mt][nt][q] += red[((s - 1) * NACC + (mt * (WN / 8) + nt) * 4 + q) * TG + tig_block];
  }
}

/* The shape of a TF32 configuration. */
template <int BM, int BN, int WN, int S, int STAGES>
struct ig_tf32_shape {
  static constexpr int BK = IG_TF32_STEP;
  static constexpr int WARPS_M = BM / 32, WARPS_N = BN / WN;
  static constexpr int TG = 32 * WARPS_M * WARPS_N; /* threads of a warp group */
  static constexpr int T = TG * S;
  static constexpr int SA = BK + 4; /* rows stored [row][k]: 4 (mod 32) */
  static constexpr int RED = (S - 1) * WN * TG;
  /* blocks per multiprocessor that the register budget must allow: at
   * least 384 threads (12 warps) to hide the gathers' latency */
  static constexpr int MIN_BLOCKS = T >= 256 ? 2 : T >= 128 ? 3 : 6;
  static_assert(BM % 32 == 0 && BN % WN == 0 && WN % 8 == 0, "warp tiles of 32 x WN");
  static_assert(STAGES >= 2, "a pipeline");
  static_assert(BK == 32, "four 8-deep slices per stage; stores of a warp along one 32-step row");
};

/* ---------------------------------------------------------------- forward and backward data */

/* out[image, m, pix] = sum_k A[m * a_stride + table[k].x] * gather(k, n)
 * (+ bias[m], then ReLU), n = (image, pix) < N, m < M.  Shared memory per
 * stage: A as [BM][BK + 4] (k contiguous), B as [BK][BN + 8] (n
 * contiguous).  A thread loads A at one k and several m, and B at one or
 * more fixed columns n (their gather positions computed once) and several
 * k, so that a warp's 32 lanes read one table entry and 32 neighbouring
 * columns. */
template <int BM, int BN, int WN, int S, int STAGES>
__global__ void __launch_bounds__(ig_tf32_shape<BM, BN, WN, S, STAGES>::T,
                                  ig_tf32_shape<BM, BN, WN, S, STAGES>::MIN_BLOCKS)
    ig_tf32_gemm_kernel(const float *__restrict__ A, int a_stride,
                        const int4 *__restrict__ table, int K, ig_gather g, int N, int M,
                        float *__restrict__ out, const float *__restrict__ bias, int relu) {
  using C = ig_tf32_shape<BM, BN, WN, S, STAGES>;
  constexpr int BK = C::BK, T = C::T, TG = C::TG, SA = C::SA;
  constexpr int SB = BN + 8; /* 8 (mod 32) */
  constexpr int A_STAGE = BM * SA, STAGE = A_STAGE + BK * SB;
  /* A: column akl of the stage, rows aml + q * A_RSTEP */
  constexpr int A_RSTEP = T / BK, A_PER = BM / A_RSTEP;
  /* B: columns bcol + j * TB, rows brow + i * B_RSTEP */
  constexpr int TB = T < BN ? T : BN, NCOLS = BN / TB, B_RSTEP = T / TB, B_ROWS = BK / B_RSTEP;
  static_assert(T % BK == 0 && BM % A_RSTEP == 0, "A loads");
  static_assert(TB % 32 == 0 && BN % TB == 0 && T % TB == 0 && BK % B_RSTEP == 0, "B loads");
  static_assert((SB - 8) % 32 == 0, "B rows 8 (mod 32) apart");
  static_assert(STAGES * STAGE >= C::RED, "the groups' sums fit the pipeline's buffers");
  extern __shared__ __align__(16) float ig_tf32_gemm_smem[];
  float *smem = ig_tf32_gemm_smem;
  const int tid = threadIdx.x, lane = tid & 31;
  const int grp = tid / TG, tig_block = tid % TG;
  const int wi = tig_block / 32, wm = wi / C::WARPS_N, wn = wi % C::WARPS_N;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int KT = (K + BK - 1) / BK;
  const int akl = tid % BK, aml = tid / BK;
  const int bcol = tid % TB, brow = tid / TB;
  int bpos[NCOLS], by0[NCOLS], bx0[NCOLS];
  ig_columns<NCOLS, TB>(g, n0 + bcol, N, bpos, by0, bx0);
  auto load = [&](int kt, int slot) {
    float *As = smem + slot * STAGE, *Bs = As + A_STAGE;
    const int kb = kt * BK;
    {
      const int k = kb + akl;
      const int aoff = __ldg(&table[k].x); /* padded table: k < KT * BK is inside */
#pragma unroll
      for (int q = 0; q < A_PER; q++) {
        const int ml = aml + q * A_RSTEP, m = m0 + ml;
        const bool ok = k < K && m < M;
        ig_cp4(As + ml * SA + akl, ok ? A + (size_t)m * a_stride + aoff : A, ok);
      }
    }
    ig_gather_stage<B_ROWS, B_RSTEP, NCOLS, TB, SB>(Bs, table, kb, brow, bcol, g, bpos, by0, bx0);
  };
  float acc[2][WN / 8][4];
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int nt = 0; nt < WN / 8; nt++)
#pragma unroll
      for (int q = 0; q < 4; q++) acc[mt][nt][q] = 0.0f;
  auto step = [&](int slot) {
    const float *As = smem + slot * STAGE;
    ig_tf32_step<WN, S, SA, SB, 1>(acc, As + wm * 32 * SA, As + A_STAGE + wn * WN, grp,
                                   lane >> 2, lane & 3);
  };
  ig_pipeline<STAGES>(KT, load, step);
  ig_tf32_add_groups<WN, S, TG>(acc, smem, grp, tig_block);
  if (grp != 0) return;
  /* the epilogue: each of the thread's columns once, then its rows */
  const int gid = lane >> 2, tig = lane & 3;
  size_t col_at[WN / 8][2];
  bool col_ok[WN / 8][2];
#pragma unroll
  for (int nt = 0; nt < WN / 8; nt++)
#pragma unroll
    for (int c = 0; c < 2; c++) {
      const int n = n0 + wn * WN + nt * 8 + 2 * tig + c;
      col_ok[nt][c] = n < N;
      const int img = n / g.P, pix = n - img * g.P;
      col_at[nt][c] = (size_t)img * M * g.P + pix;
    }
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int m = m0 + wm * 32 + mt * 16 + gid + h * 8;
      if (m >= M) continue;
      const float b = bias ? __ldg(bias + m) : 0.0f;
#pragma unroll
      for (int nt = 0; nt < WN / 8; nt++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
          if (!col_ok[nt][c]) continue;
          float v = acc[mt][nt][h * 2 + c] + b;
          if (relu) v = fmaxf(v, 0.0f);
          out[col_at[nt][c] + (size_t)m * g.P] = v;
        }
    }
}

/* ---------------------------------------------------------------- backward filter */

/* out[m, k] (+)= sum over n in this block's slice of dY[image, m, pix] *
 * gather(k, n): blockIdx.z is the slice [z * chunk, (z + 1) * chunk) of the
 * N columns; its BM x BN tile (m, filter tap k) goes to out + z * M * K
 * (accumulate 0) or is added to out (accumulate 1, one slice only).  The
 * reduction runs over n: shared memory per stage holds dY as [BM][BK + 4]
 * and the gathered X as [BN][BK + 4] (n contiguous in both).  Lane l of
 * every warp loads column n = step + l for several m and k, so that one
 * division per step gives its image, row and column, and the block's table
 * entries sit in shared memory. */
template <int BM, int BN, int WN, int S, int STAGES>
__global__ void __launch_bounds__(ig_tf32_shape<BM, BN, WN, S, STAGES>::T,
                                  ig_tf32_shape<BM, BN, WN, S, STAGES>::MIN_BLOCKS)
    ig_tf32_wgrad_kernel(const float *__restrict__ dy, int M, const int4 *__restrict__ table,
                         int K, ig_gather g, int N, int chunk, float *__restrict__ out,
                         int accumulate) {
  using C = ig_tf32_shape<BM, BN, WN, S, STAGES>;
  constexpr int BK = C::BK, T = C::T, TG = C::TG, SA = C::SA;
  constexpr int A_STAGE = BM * SA, STAGE = (BM + BN) * SA;
  constexpr int RSTEP = T / BK, A_PER = BM / RSTEP, B_PER = BN / RSTEP;
  static_assert(T % BK == 0 && BM % RSTEP == 0 && BN % RSTEP == 0, "loads");
  static_assert(IG_TABLE_STEP % BN == 0, "a block's table entries lie inside the padded table");
  static_assert(STAGES * STAGE >= C::RED, "the groups' sums fit the pipeline's buffers");
  extern __shared__ __align__(16) float ig_tf32_wgrad_smem[];
  __shared__ int4 tab[BN];
  float *smem = ig_tf32_wgrad_smem;
  const int tid = threadIdx.x, lane = tid & 31;
  const int grp = tid / TG, tig_block = tid % TG;
  const int wi = tig_block / 32, wm = wi / C::WARPS_N, wn = wi % C::WARPS_N;
  const int k0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int n_begin = blockIdx.z * chunk;
  const int n_end = min(N, n_begin + chunk);
  for (int i = tid; i < BN; i += T) tab[i] = __ldg(&table[k0 + i]);
  __syncthreads();
  const int KT = n_end > n_begin ? (n_end - n_begin + BK - 1) / BK : 0;
  const int r = tid % BK, row0 = tid / BK;
  auto load = [&](int kt, int slot) {
    float *As = smem + slot * STAGE, *Bs = As + A_STAGE;
    const int n = n_begin + kt * BK + r;
    const bool nok = n < n_end;
    int abase = 0, pos = 0, y0 = IG_FAR, x0 = 0;
    if (nok) {
      const int img = n / g.P, pix = n - img * g.P;
      const int oy = pix / g.OW, ox = pix - oy * g.OW;
      abase = img * M * g.P + pix;
      y0 = oy * g.sy + g.y_off;
      x0 = ox * g.sx + g.x_off;
      pos = img * g.img_stride + y0 * g.SW + x0;
    }
#pragma unroll
    for (int q = 0; q < A_PER; q++) {
      const int ml = row0 + q * RSTEP, m = m0 + ml;
      const bool ok = nok && m < M;
      ig_cp4(As + ml * SA + r, ok ? dy + abase + (size_t)m * g.P : dy, ok);
    }
#pragma unroll
    for (int q = 0; q < B_PER; q++) {
      const int kc = row0 + q * RSTEP;
      const int4 e = tab[kc];
      const bool ok =
          (unsigned)(y0 + e.z) < (unsigned)g.SH && (unsigned)(x0 + e.w) < (unsigned)g.SW;
      ig_cp4(Bs + kc * SA + r, g.src + (ok ? pos + e.y : 0), ok);
    }
  };
  float acc[2][WN / 8][4];
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int nt = 0; nt < WN / 8; nt++)
#pragma unroll
      for (int q = 0; q < 4; q++) acc[mt][nt][q] = 0.0f;
  auto step = [&](int slot) {
    const float *As = smem + slot * STAGE;
    ig_tf32_step<WN, S, SA, 1, SA>(acc, As + wm * 32 * SA, As + A_STAGE + wn * WN * SA, grp,
                                   lane >> 2, lane & 3);
  };
  ig_pipeline<STAGES>(KT, load, step);
  ig_tf32_add_groups<WN, S, TG>(acc, smem, grp, tig_block);
  if (grp != 0) return;
  const int gid = lane >> 2, tig = lane & 3;
  float *dst = accumulate ? out : out + (size_t)blockIdx.z * M * K;
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int m = m0 + wm * 32 + mt * 16 + gid + h * 8;
      if (m >= M) continue;
#pragma unroll
      for (int nt = 0; nt < WN / 8; nt++)
#pragma unroll
        for (int c = 0; c < 2; c++) {
          const int k = k0 + wn * WN + nt * 8 + 2 * tig + c;
          if (k >= K) continue;
          float *p = dst + (size_t)m * K + k;
          const float v = acc[mt][nt][h * 2 + c];
          *p = accumulate ? *p + v : v;
        }
    }
}

/* ---------------------------------------------------------------- launchers */

template <int BM, int BN, int WN, int S, int STAGES>
static size_t gemm_smem_bytes() {
  using C = ig_tf32_shape<BM, BN, WN, S, STAGES>;
  const size_t stages = (size_t)STAGES * (BM * C::SA + C::BK * (BN + 8));
  return (stages > (size_t)C::RED ? stages : (size_t)C::RED) * sizeof(float);
}

template <int BM, int BN, int WN, int S, int STAGES>
static size_t wgrad_smem_bytes() {
  using C = ig_tf32_shape<BM, BN, WN, S, STAGES>;
  const size_t stages = (size_t)STAGES * (BM + BN) * C::SA;
  return (stages > (size_t)C::RED ? stages : (size_t)C::RED) * sizeof(float);
}

template <int BM, int BN, int WN, int S, int STAGES>
static void launch_gemm(cudaStream_t st, const float *A, int a_stride, const int4 *table, int K,
                        const ig_gather &g, int N, int M, float *out, const float *bias,
                        bool relu) {
  dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
  ig_tf32_gemm_kernel<BM, BN, WN, S, STAGES>
      <<<grid, ig_tf32_shape<BM, BN, WN, S, STAGES>::T,
         gemm_smem_bytes<BM, BN, WN, S, STAGES>(), st>>>(A, a_stride, table, K, g, N, M, out,
                                                         bias, relu ? 1 : 0);
  CT_CUDA_LAUNCH_CHECK();
}

template <int BM, int BN, int WN, int S, int STAGES>
static void launch_wgrad(cudaStream_t st, const float *dy, int M, const int4 *table, int K,
                         const ig_gather &g, int N, int chunk, int splits, float *out,
                         bool accumulate) {
  dim3 grid((unsigned)((K + BN - 1) / BN), (unsigned)((M + BM - 1) / BM), (unsigned)splits);
  ig_tf32_wgrad_kernel<BM, BN, WN, S, STAGES>
      <<<grid, ig_tf32_shape<BM, BN, WN, S, STAGES>::T,
         wgrad_smem_bytes<BM, BN, WN, S, STAGES>(), st>>>(dy, M, table, K, g, N, chunk, out,
                                                          accumulate ? 1 : 0);
  CT_CUDA_LAUNCH_CHECK();
}

#define IG_GEMM_LAUNCHER(BM, BN, WN, S, STAGES) launch_gemm<BM, BN, WN, S, STAGES>,
#define IG_WGRAD_LAUNCHER(BM, BN, WN, S, STAGES) launch_wgrad<BM, BN, WN, S, STAGES>,
static const ig_gemm_launcher k_gemm_launchers[] = {IG_TF32_GEMM_CONFIGS(IG_GEMM_LAUNCHER)};
static const ig_wgrad_launcher k_wgrad_launchers[] = {IG_TF32_WGRAD_CONFIGS(IG_WGRAD_LAUNCHER)};
#undef IG_GEMM_LAUNCHER
#undef IG_WGRAD_LAUNCHER

void ig_tf32_gemm(int index, cudaStream_t st, const float *A, int a_stride, const int4 *table,
                  int K, const ig_gather &g, int N, int M, float *out, const float *bias,
                  bool relu) {
  ig_launcher_at(k_gemm_launchers, index, "TF32 implicit GEMM")(st, A, a_stride, table, K, g, N,
                                                                 M, out, bias, relu);
}

void ig_tf32_wgrad(int index, cudaStream_t st, const float *dy, int M, const int4 *table, int K,
                   const ig_gather &g, int N, int chunk, int splits, float *out, bool accumulate) {
  ig_launcher_at(k_wgrad_launchers, index, "TF32 implicit GEMM filter")(
      st, dy, M, table, K, g, N, chunk, splits, out, accumulate);
}

void ig_tf32_allow_smem(void) {
#define IG_GEMM_ATTR(BM, BN, WN, S, STAGES)                                              \
  CT_CUDA_CHECK(cudaFuncSetAttribute(ig_tf32_gemm_kernel<BM, BN, WN, S, STAGES>,          \
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,         \
                                     (int)gemm_smem_bytes<BM, BN, WN, S, STAGES>()));
#define IG_WGRAD_ATTR(BM, BN, WN, S, STAGES)                                             \
  CT_CUDA_CHECK(cudaFuncSetAttribute(ig_tf32_wgrad_kernel<BM, BN, WN, S, STAGES>,         \
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,         \
                                     (int)wgrad_smem_bytes<BM, BN, WN, S, STAGES>()));
  IG_TF32_GEMM_CONFIGS(IG_GEMM_ATTR)
  IG_TF32_WGRAD_CONFIGS(IG_WGRAD_ATTR)
#undef IG_GEMM_ATTR
#undef IG_WGRAD_ATTR
}
