/* Implicit-GEMM convolution kernels in strict FP32, and the plans, choices
 * and timing of every kernel family (the TF32 ones are in
 * conv_igemm_tf32.cu, the pipelined FP32 ones in conv_igemm_fp32p.cu, the
 * Winograd ones in conv_winograd.cu): see conv_igemm.h. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "layers/conv/conv_igemm.h"
#include "layers/conv/conv_igemm_impl.cuh"
extern "C" {
#include "core/log.h"
#include "core/mem.h"
#include "core/settings.h"
}

/* ---------------------------------------------------------------- the gather */

__device__ __forceinline__ float ig_read(const ig_gather &g, int pos, int y0, int x0, int4 e) {
  const int yy = y0 + e.z, xx = x0 + e.w;
  return (unsigned)yy < (unsigned)g.SH && (unsigned)xx < (unsigned)g.SW ? __ldg(g.src + pos + e.y)
                                                                       : 0.0f;
}

/* The 4 x 8 product of one reduction step: acc[i][j] += a[i] * b[j]. */
__device__ __forceinline__ void ig_fma(float acc[4][8], float4 a, float4 b0, float4 b1) {
  const float av[4] = {a.x, a.y, a.z, a.w};
  const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
}

/* Column j (0..7) of thread column group tn in a tile BN wide: two runs of
 * four, so that a warp reads shared memory without bank conflicts. */
template <int BN>
__device__ __forceinline__ int ig_col(int tn, int j) {
  return j < 4 ? tn * 4 + j : BN / 2 + tn * 4 + (j - 4);
}

/* ---------------------------------------------------------------- forward and backward data */

#define IG_BK 16

/* out[image, m, pix] = sum_k A[m * a_stride + table[k].x] * gather(k, n)
 * (+ bias[m], then ReLU), n = (image, pix) < N, m < M.  A block computes a
 * BM x BN tile with S groups of T = BM * BN / 32 threads, each thread a
 * 4 x 8 block of it.  Group g takes the reduction steps g, g + S, ... (more
 * warps for the small grids of small convolutions) and the groups' sums
 * add up in group order at the end.  The next step's values are read into
 * registers while this step's are multiplied from shared memory. */
template <int BM, int BN, int S>
__global__ void __launch_bounds__(BM * BN / 32 * S)
    ig_gemm_kernel(const float *__restrict__ A, int a_stride, const int4 *__restrict__ table,
                   int K, ig_gather g, int N, int M, float *__restrict__ out,
                   const float *__restrict__ bias, int relu) {
  constexpr int T = BM * BN / 32;
  constexpr int B_STEP = T / BN;             /* rows of the B tile loaded together */
  constexpr int B_PER = IG_BK / B_STEP;      /* B values per thread and step */
  constexpr int A_PER = BM * IG_BK / T;      /* A values per thread and step */
  constexpr int TILES = S * IG_BK * (BM + BN);
  constexpr int SMEM = S > 1 && BM * BN > TILES ? BM * BN : TILES;
  __shared__ __align__(16) float smem[SMEM];
  const int grp = threadIdx.x / T, tid = threadIdx.x % T;
  float(*As)[BM] = (float(*)[BM])(smem + grp * IG_BK * (BM + BN));
  float(*Bs)[BN] = (float(*)[BN])(smem + grp * IG_BK * (BM + BN) + IG_BK * BM);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  /* this thread's column of the B tile, fixed over the reduction */
  const int bcol = tid % BN, brow = tid / BN;
  const int nb = n0 + bcol;
  const bool nvalid = nb < N;
  int pos = 0, y0 = 0, x0 = 0;
  if (nvalid) ig_column(g, nb, &pos, &y0, &x0);
  const int tn = tid % (BN / 8), tm = tid / (BN / 8);
  float a_next[A_PER], b_next[B_PER];
  auto load = [&](int k0) {
#pragma unroll
    for (int q = 0; q < A_PER; q++) {
      const int e = tid + q * T, ml = e % BM, kl = e / BM, m = m0 + ml, k = k0 + kl;
      a_next[q] =
          m < M && k < K ? __ldg(A + (size_t)m * a_stride + __ldg(&table[k].x)) : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < B_PER; q++) {
      const int k = k0 + brow + q * B_STEP;
      b_next[q] = nvalid && k < K ? ig_read(g, pos, y0, x0, __ldg(&table[k])) : 0.0f;
    }
  };
  float acc[4][8];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
  load(grp * IG_BK);
  for (int kb = 0; kb < K; kb += S * IG_BK) {
#pragma unroll
    for (int q = 0; q < A_PER; q++) {
      const int e = tid + q * T;
      As[e / BM][e % BM] = a_next[q];
    }
#pragma unroll
    for (int q = 0; q < B_PER; q++) Bs[brow + q * B_STEP][bcol] = b_next[q];
    __syncthreads();
    if (kb + S * IG_BK < K) load(kb + (S + grp) * IG_BK);
#pragma unroll
    for (int kk = 0; kk < IG_BK; kk++)
      ig_fma(acc, *(const float4 *)&As[kk][tm * 4], *(const float4 *)&Bs[kk][tn * 4],
             *(const float4 *)&Bs[kk][BN / 2 + tn * 4]);
    __syncthreads();
  }
  /* the groups' sums, in group order, into group 0 */
#pragma unroll
  for (int s = 1; s < S; s++) {
    if (grp == s)
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) smem[(i * 8 + j) * T + tid] = acc[i][j];
    __syncthreads();
    if (grp == 0)
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] += smem[(i * 8 + j) * T + tid];
    __syncthreads();
  }
  if (grp != 0) return;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int m = m0 + tm * 4 + i;
    if (m >= M) continue;
    const float b = bias ? __ldg(bias + m) : 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int n = n0 + ig_col<BN>(tn, j);
      if (n >= N) continue;
      const int img = n / g.P, pix = n - img * g.P;
      float v = acc[i][j] + b;
      if (relu) v = fmaxf(v, 0.0f);
      out[((size_t)img * M + m) * g.P + pix] = v;
    }
  }
}

/* ---------------------------------------------------------------- backward filter */

#define IG_BR 16

/* A column n = (image, oy, ox) that walks forward without divisions. */
typedef struct ig_walker {
  int img, oy, ox;
} ig_walker;

__device__ __forceinline__ ig_walker ig_walk_start(const ig_gather &g, int n) {
  ig_walker w;
  w.img = n / g.P;
  const int pix = n - w.img * g.P;
  w.oy = pix / g.OW;
  w.ox = pix - w.oy * g.OW;
  return w;
}

/* Moves w forward by step columns (rows of OW columns, images of P). */
__device__ __forceinline__ void ig_walk(const ig_gather &g, ig_walker &w, int step) {
  w.ox += step;
  while (w.ox >= g.OW) {
    w.ox -= g.OW;
    if (++w.oy == g.OH) {
      w.oy = 0;
      w.img++;
    }
  }
}

/* out[m, k] (+)= sum over n in this block's slice of dY[image, m, pix] *
 * gather(k, n): blockIdx.z is the slice [z * chunk, (z + 1) * chunk) of the
 * N columns; its BM x BN tile goes to out + z * M * K (accumulate 0) or is
 * added to out (accumulate 1, one slice only).  As in ig_gemm_kernel, the
 * next step's values are read while this step's are multiplied. */
template <int BM, int BN>
__global__ void __launch_bounds__(BM * BN / 32)
    ig_wgrad_kernel(const float *__restrict__ dy, int M, const int4 *__restrict__ table, int K,
                    ig_gather g, int N, int chunk, float *__restrict__ out, int accumulate) {
  constexpr int T = BM * BN / 32;
  constexpr int B_STEP = T / BN;
  constexpr int B_PER = IG_BR / B_STEP;
  constexpr int A_PER = BM * IG_BR / T;
  constexpr int A_MSTEP = T / IG_BR;  /* channels apart of one thread's A values */
  __shared__ __align__(16) float As[IG_BR][BM + 4];  /* + 4: fewer bank conflicts on stores */
  __shared__ __align__(16) float Bs[IG_BR][BN];
  const int tid = threadIdx.x;
  const int k0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int n_begin = blockIdx.z * chunk, n_end = min(N, n_begin + chunk);
  /* B: this thread's column k and rows brow, brow + B_STEP, ... of each step */
  const int bcol = tid % BN, brow = tid / BN;
  const int kb = k0 + bcol;
  const bool kvalid = kb < K;
  const int4 e = kvalid ? __ldg(&table[kb]) : make_int4(0, 0, 0, 0);
  /* A: this thread's row r of each step and channels ma, ma + A_MSTEP, ... */
  const int ar = tid % IG_BR, ma = tid / IG_BR;
  ig_walker bw = ig_walk_start(g, min(n_begin + brow, N - 1));
  ig_walker aw = ig_walk_start(g, min(n_begin + ar, N - 1));
  const int tn = tid % (BN / 8), tm = tid / (BN / 8);
  float a_next[A_PER], b_next[B_PER];
  auto load = [&](int nc) {
    {
      const int n = nc + ar;
      const int base = aw.img * M * g.P + aw.oy * g.OW + aw.ox;
#pragma unroll
      for (int q = 0; q < A_PER; q++) {
        const int m = m0 + ma + q * A_MSTEP;
        a_next[q] = n < n_end && m < M ? __ldg(dy + base + (size_t)m * g.P) : 0.0f;
      }
      ig_walk(g, aw, IG_BR);
    }
#pragma unroll
    for (int q = 0; q < B_PER; q++) {
      const int n = nc + brow + q * B_STEP;
      float v = 0.0f;
      if (kvalid && n < n_end) {
        const int y0 = bw.oy * g.sy + g.y_off, x0 = bw.ox * g.sx + g.x_off;
        v = ig_read(g, bw.img * g.img_stride + y0 * g.SW + x0, y0, x0, e);
      }
      b_next[q] = v;
      ig_walk(g, bw, B_STEP);
    }
  };
  float acc[4][8];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
  if (n_begin < n_end) load(n_begin);
  for (int nc = n_begin; nc < n_end; nc += IG_BR) {
#pragma unroll
    for (int q = 0; q < A_PER; q++) As[ar][ma + q * A_MSTEP] = a_next[q];
#pragma unroll
    for (int q = 0; q < B_PER; q++) Bs[brow + q * B_STEP][bcol] = b_next[q];
    __syncthreads();
    if (nc + IG_BR < n_end) load(nc + IG_BR);
#pragma unroll
    for (int rr = 0; rr < IG_BR; rr++)
      ig_fma(acc, *(const float4 *)&As[rr][tm * 4], *(const float4 *)&Bs[rr][tn * 4],
             *(const float4 *)&Bs[rr][BN / 2 + tn * 4]);
    __syncthreads();
  }
  float *dst = accumulate ? out : out + (size_t)blockIdx.z * M * K;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int m = m0 + tm * 4 + i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int k = k0 + ig_col<BN>(tn, j);
      if (k >= K) continue;
      float *p = dst + (size_t)m * K + k;
      *p = accumulate ? *p + acc[i][j] : acc[i][j];
    }
  }
}

/* dw[i] += the sum of partial[z][i] over the splits z, in a fixed order: a
 * block takes 32 values of i, and its warp l sums the splits z = l, l +
 * IG_SUM_LANES, ... in that order (the reads of a warp: 32 neighbours);
 * the lanes' sums then add to dw[i] in lane order.  Blocks of 32 *
 * IG_SUM_LANES threads. */
#define IG_SUM_LANES 8
__global__ static void __launch_bounds__(32 * IG_SUM_LANES)
    ig_wgrad_sum_kernel(int MK, int splits, const float *__restrict__ partial,
                        float *__restrict__ dw) {
  __shared__ float lane_sum[IG_SUM_LANES][32];
  const int il = threadIdx.x % 32, lane = threadIdx.x / 32;
  const int i = blockIdx.x * 32 + il;
  float s = 0.0f;
  if (i < MK)
    for (int z = lane; z < splits; z += IG_SUM_LANES) s += partial[(size_t)z * MK + i];
  lane_sum[lane][il] = s;
  __syncthreads();
  if (lane == 0 && i < MK) {
    float t = dw[i];
    for (int l = 0; l < IG_SUM_LANES; l++) t += lane_sum[l][il];
    dw[i] = t;
  }
}

/* ---------------------------------------------------------------- mode */

static int g_mode = -1; /* -1: not read from the environment yet */

extern "C" ct_igemm_mode_t ct_igemm_mode(void) {
  if (g_mode < 0) {
    const char *v = ct_setting_text("CORTADO_OWN_CONV"); /* "1", "0" or "force" */
    g_mode = !strcmp(v, "0") ? CT_IGEMM_OFF : !strcmp(v, "force") ? CT_IGEMM_FORCE : CT_IGEMM_RACE;
  }
  return (ct_igemm_mode_t)g_mode;
}

extern "C" void ct_igemm_set_mode(ct_igemm_mode_t mode) { g_mode = (int)mode; }

/* ---------------------------------------------------------------- plans */

struct ct_igemm {
  int device;
  bool tf32;        /* the TF32 configurations may run (and be timed) */
  int sms;          /* the device's multiprocessors (backward filter's split) */
  ct_igemm_geom g;
  int4 *fwd_table;  /* c * kh * kw entries */
  int4 *bwd_table;  /* m * kh * kw entries; NULL unless stride 1 */
  ig_direct_plan direct[CT_IGEMM_WGRAD_DIRECT_CONFIGS]; /* the direct filter gradients' */
};

/* The strict FP32 tile configurations of each direction, one list each:
 * BM x BN and S groups for forward and backward data; BM x BN for backward
 * filter, which splits its sums among blocks instead.  Each list gives the
 * table below (names, splits) and the launchers (kernel templates).  The
 * TF32 and then the pipelined FP32 configurations (conv_igemm_impl.cuh)
 * follow them in the choices. */
#define IG_GEMM_CONFIGS(X) \
  X(32, 64, 1) X(32, 128, 1) X(64, 64, 1) X(64, 128, 1) X(32, 64, 4) X(32, 128, 2) X(64, 64, 2) \
  X(64, 128, 2)
#define IG_WGRAD_CONFIGS(X) X(32, 64) X(32, 128) X(64, 64) X(64, 128)

/* The families of configurations, each a contiguous run of its
 * direction's list (conv_igemm.h): the register-prefetch FP32 ones, the
 * TF32 ones, the pipelined FP32 ones, the Winograd ones and the direct
 * forward ones (forward and backward data), the direct filter-gradient ones
 * (backward filter). */
typedef enum { IG_FP32, IG_TF32, IG_PIPE, IG_WINO, IG_FDIRECT, IG_DIRECT } ig_family;

/* A choice's tile: {BM, BN, S, columns per warp (TF32), step of the
 * reduction, rows per thread (pipelined), family}.  A Winograd one's
 * BM x BN are its tiles x channels per block (in a rectangle of tiles), S
 * its input channels per step, wn x tm its tiles x channels per thread.  A
 * direct forward one's BM is its output rows per block, BN its output
 * channels per block, wn its filter width.  A direct filter-gradient one's
 * BM x BN are its output x input channels per block, S its lanes along a
 * row, wn its filter width, step its output channels per thread and tm its
 * rows per unit. */
typedef struct tile {
  int bm, bn, s, wn, step, tm;
  ig_family family;
} tile;

#define IG_FP32_GEMM(BM, BN, S) {BM, BN, S, 0, IG_BK, 0, IG_FP32},
#define IG_FP32_WGRAD(BM, BN) {BM, BN, 1, 0, IG_BR, 0, IG_FP32},
#define IG_TF32_TILE(BM, BN, WN, S, STAGES) {BM, BN, S, WN, IG_TF32_STEP, 0, IG_TF32},
#define IG_PIPE_TILE(BM, BN, TM, S, BK, STAGES) {BM, BN, S, 0, BK, TM, IG_PIPE},
#define IG_WINO_TILE(BY, BX, BK, TT, TK, CC) {BY * BX, BK, CC, TT, CC, TK, IG_WINO},
#define IG_FDIRECT_TILE(RB) {RB, 32, 1, 5, 1, 0, IG_FDIRECT},
#define IG_DIRECT_TILE(KW, OWL, TM, CB, MB, R) {MB, CB, OWL, KW, TM, R, IG_DIRECT},
static const tile k_gemm_tiles[] = {
    IG_GEMM_CONFIGS(IG_FP32_GEMM)
    IG_TF32_GEMM_CONFIGS(IG_TF32_TILE)
    IG_PIPE_GEMM_CONFIGS(IG_PIPE_TILE)
    IG_WINO_CONFIGS(IG_WINO_TILE)
    IG_FDIRECT_CONFIGS(IG_FDIRECT_TILE)};
static const tile k_wgrad_tiles[] = {
    IG_WGRAD_CONFIGS(IG_FP32_WGRAD)
    IG_TF32_WGRAD_CONFIGS(IG_TF32_TILE)
    IG_PIPE_WGRAD_CONFIGS(IG_PIPE_TILE)
    IG_DIRECT_WGRAD_CONFIGS(IG_DIRECT_TILE)};
#undef IG_FP32_GEMM
#undef IG_FP32_WGRAD
#undef IG_TF32_TILE
#undef IG_PIPE_TILE
#undef IG_WINO_TILE
#undef IG_FDIRECT_TILE
#undef IG_DIRECT_TILE
/* Each list holds as many configurations as its count says. */
#define IG_COUNT(...) +1
#define IG_CHECK_COUNT(LIST, COUNT) static_assert(0 LIST(IG_COUNT) == COUNT, #COUNT);
IG_CHECK_COUNT(IG_GEMM_CONFIGS, CT_IGEMM_GEMM_FP32_CONFIGS)
IG_CHECK_COUNT(IG_WGRAD_CONFIGS, CT_IGEMM_WGRAD_FP32_CONFIGS)
IG_CHECK_COUNT(IG_TF32_GEMM_CONFIGS, CT_IGEMM_GEMM_TF32_CONFIGS)
IG_CHECK_COUNT(IG_TF32_WGRAD_CONFIGS, CT_IGEMM_WGRAD_TF32_CONFIGS)
IG_CHECK_COUNT(IG_PIPE_GEMM_CONFIGS, CT_IGEMM_GEMM_PIPE_CONFIGS)
IG_CHECK_COUNT(IG_PIPE_WGRAD_CONFIGS, CT_IGEMM_WGRAD_PIPE_CONFIGS)
IG_CHECK_COUNT(IG_WINO_CONFIGS, CT_IGEMM_GEMM_WINO_CONFIGS)
IG_CHECK_COUNT(IG_FDIRECT_CONFIGS, CT_IGEMM_GEMM_FDIRECT_CONFIGS)
IG_CHECK_COUNT(IG_DIRECT_WGRAD_CONFIGS, CT_IGEMM_WGRAD_DIRECT_CONFIGS)
#undef IG_CHECK_COUNT
#undef IG_COUNT
static_assert(sizeof k_gemm_tiles / sizeof k_gemm_tiles[0] == CT_IGEMM_GEMM_CONFIGS,
              "CT_IGEMM_GEMM_CONFIGS");
static_assert(sizeof k_wgrad_tiles / sizeof k_wgrad_tiles[0] == CT_IGEMM_WGRAD_CONFIGS,
              "CT_IGEMM_WGRAD_CONFIGS");

static int configs_of(ct_igemm_dir dir) {
  return dir == CT_IGEMM_BWD_FILTER ? CT_IGEMM_WGRAD_CONFIGS : CT_IGEMM_GEMM_CONFIGS;
}

static const tile *tile_of(ct_igemm_dir dir, int choice) {
  CT_ASSERTF(choice >= 1 && choice <= configs_of(dir),
             "implicit GEMM configuration %d of direction %d", choice, (int)dir);
  return dir == CT_IGEMM_BWD_FILTER ? &k_wgrad_tiles[choice - 1] : &k_gemm_tiles[choice - 1];
}

extern "C" bool ct_igemm_choice_tf32(ct_igemm_dir dir, int choice) {
  return choice >= 1 && choice <= configs_of(dir) && tile_of(dir, choice)->family == IG_TF32;
}

/* The index of `choice` in its family's list (its family's launchers):
 * how many of the same family come before it. */
static int family_index(ct_igemm_dir dir, int choice) {
  const tile *t = tile_of(dir, choice);
  int i = 0;
  while (i < choice - 1 && t[-i - 1].family == t->family) i++;
  return i;
}

extern "C" const char *ct_igemm_choice_name(ct_igemm_dir dir, int choice, char *buf, size_t len) {
  if (choice < 1 || choice > configs_of(dir)) {
    snprintf(buf, len, "?");
    return buf;
  }
  const tile *t = tile_of(dir, choice);
  switch (t->family) {
    case IG_FP32:
      if (dir == CT_IGEMM_BWD_FILTER) snprintf(buf, len, "IGEMM_%dx%d", t->bm, t->bn);
      else snprintf(buf, len, "IGEMM_%dx%dx%d", t->bm, t->bn, t->s);
      break;
    case IG_TF32:
      if (t->wn == 32) snprintf(buf, len, "IGEMM_TF32_%dx%dx%d", t->bm, t->bn, t->s);
      else snprintf(buf, len, "IGEMM_TF32_%dx%dx%dw%d", t->bm, t->bn, t->s, t->wn);
      break;
    case IG_PIPE:
      snprintf(buf, len, "IGEMM_PIPE_%dx%dx%d%s", t->bm, t->bn, t->s, t->tm == 4 ? "t4" : "");
      break;
    case IG_WINO:
      snprintf(buf, len, "IGEMM_WINO_%dx%d_%dx%dc%d", t->bm, t->bn, t->wn, t->tm, t->s);
      break;
    case IG_FDIRECT: snprintf(buf, len, "IGEMM_FDIRECT%d_r%d", t->wn, t->bm); break;
    case IG_DIRECT:
      snprintf(buf, len, "IGEMM_DIRECT%d_%dx%d_%dx%dr%d", t->wn, t->s, t->step, t->bn, t->bm,
               t->tm);
      break;
  }
  return buf;
}

/* Every tensor, and the padded image, at most 2^30 values: positions and
 * offsets stay within int with room (and IG_FAR beyond them). */
static bool fits_half_int(size_t v) { return v <= (size_t)INT_MAX / 2; }

extern "C" const char *ct_igemm_unsupported(const ct_igemm_geom *g, ct_igemm_dir dir) {
  if (g->n < 1 || g->c < 1 || g->m < 1 || g->h < 1 || g->w < 1 || g->oh < 1 || g->ow < 1 ||
      g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 ||
      g->pw < 0)
    return "an empty or invalid geometry";
  if (!fits_half_int((size_t)g->n * g->c * g->h * g->w) ||
      !fits_half_int((size_t)g->n * g->m * g->oh * g->ow) ||
      !fits_half_int((size_t)g->m * g->c * g->kh * g->kw) ||
      !fits_half_int(((size_t)g->h + 2 * (size_t)g->ph + g->kh * (size_t)g->dh) *
                     ((size_t)g->w + 2 * (size_t)g->pw + g->kw * (size_t)g->dw)))
    return "more than 2^30 values";
  if (dir == CT_IGEMM_BWD_DATA && (g->sh != 1 || g->sw != 1))
    return "backward data needs stride 1";
  return NULL;
}

/* Forward: A = W (m, K) row-major; k = (ci, ky, kx). */
static void fill_fwd_table(const ct_igemm_geom *g, int4 *t) {
  const int KK = g->kh * g->kw;
  for (int ci = 0; ci < g->c; ci++)
    for (int ky = 0; ky < g->kh; ky++)
      for (int kx = 0; kx < g->kw; kx++) {
        const int k = ci * KK + ky * g->kw + kx;
        t[k] = make_int4(k, ci * g->h * g->w + ky * g->dh * g->w + kx * g->dw, ky * g->dh,
                         kx * g->dw);
      }
}

/* Backward data (stride 1): row ci of A is W[., ci, ., .]; k = (co, ky, kx)
 * reads dY at (iy + ph - ky * dh, ix + pw - kx * dw). */
static void fill_bwd_table(const ct_igemm_geom *g, int4 *t) {
  const int KK = g->kh * g->kw;
  for (int co = 0; co < g->m; co++)
    for (int ky = 0; ky < g->kh; ky++)
      for (int kx = 0; kx < g->kw; kx++) {
        const int k = co * KK + ky * g->kw + kx;
        t[k] = make_int4(co * g->c * KK + ky * g->kw + kx,
                         co * g->oh * g->ow - ky * g->dh * g->ow - kx * g->dw, -ky * g->dh,
                         -kx * g->dw);
      }
}

/* A table of K entries on ctx's device, padded to a multiple of
 * IG_TABLE_STEP with entries that no gather reads through (IG_FAR). */
static int4 *upload_table(ct_context *ctx, int K, void (*fill)(const ct_igemm_geom *, int4 *),
                          const ct_igemm_geom *g) {
  const size_t entries = ((size_t)K + IG_TABLE_STEP - 1) / IG_TABLE_STEP * IG_TABLE_STEP;
  int4 *host = (int4 *)ct_xcalloc(entries, sizeof(int4));
  fill(g, host);
  for (size_t k = 0; k < entries; k++) {
    if (k >= (size_t)K) host[k] = make_int4(0, 0, IG_FAR, IG_FAR);
    /* the real entries' row and column offsets stay far from IG_FAR */
    CT_ASSERT(k >= (size_t)K || (host[k].z > IG_FAR / 2 && host[k].w > IG_FAR / 2 &&
                                 host[k].z < -(IG_FAR / 2) && host[k].w < -(IG_FAR / 2)));
  }
  int4 *dev = (int4 *)ct_mem_alloc(ctx->device, entries * sizeof(int4));
  CT_CUDA_CHECK(cudaMemcpy(dev, host, entries * sizeof(int4), cudaMemcpyHostToDevice));
  free(host);
  return dev;
}

extern "C" ct_igemm *ct_igemm_new(ct_context *ctx, const ct_igemm_geom *g, bool tf32) {
  CT_ASSERT(!ct_igemm_unsupported(g, CT_IGEMM_FWD));
  ct_igemm *p = (ct_igemm *)ct_xcalloc(1, sizeof *p);
  p->device = ctx->device;
  p->tf32 = tf32;
  CT_CUDA_CHECK(cudaDeviceGetAttribute(&p->sms, cudaDevAttrMultiProcessorCount, ctx->device));
  p->g = *g;
  p->fwd_table = upload_table(ctx, g->c * g->kh * g->kw, fill_fwd_table, g);
  if (!ct_igemm_unsupported(g, CT_IGEMM_BWD_DATA))
    p->bwd_table = upload_table(ctx, g->m * g->kh * g->kw, fill_bwd_table, g);
  int cur;
  CT_CUDA_CHECK(cudaGetDevice(&cur));
  if (cur != ctx->device) CT_CUDA_CHECK(cudaSetDevice(ctx->device));
  if (tf32) ig_tf32_allow_smem();
  if (!ig_wino_unsupported(g, CT_IGEMM_FWD)) ig_wino_allow_smem();
  bool direct = false;
  for (int i = 0; i < CT_IGEMM_WGRAD_DIRECT_CONFIGS; i++) {
    ig_direct_prepare(i, g, p->sms, &p->direct[i]);
    direct = direct || !p->direct[i].why;
  }
  if (direct) ig_direct_allow_smem();
  if (cur != ctx->device) CT_CUDA_CHECK(cudaSetDevice(cur));
  return p;
}

extern "C" void ct_igemm_free(ct_igemm *p) {
  if (!p) return;
  ct_mem_free(p->device, p->fwd_table);
  if (p->bwd_table) ct_mem_free(p->device, p->bwd_table);
  free(p);
}

static ig_gather fwd_gather(const ct_igemm_geom *g, const float *x) {
  ig_gather v = {x, g->c * g->h * g->w, g->h, g->w, g->oh * g->ow, g->ow, g->oh,
                 g->sh, g->sw, -g->ph, -g->pw};
  return v;
}

template <int BM, int BN, int S>
static void launch_gemm(cudaStream_t st, const float *A, int a_stride, const int4 *table, int K,
                        const ig_gather &g, int N, int M, float *out, const float *bias,
                        bool relu) {
  dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
  ig_gemm_kernel<BM, BN, S><<<grid, BM * BN / 32 * S, 0, st>>>(A, a_stride, table, K, g, N, M,
                                                                out, bias, relu ? 1 : 0);
  CT_CUDA_LAUNCH_CHECK();
}

/* Runs `choice` of forward or backward data: an FP32 launcher, the
 * pipelined FP32 one, or the TF32 one (which p's math must allow); not a
 * Winograd one. */
static void gemm(const ct_igemm *p, int choice, cudaStream_t st, const float *A, int a_stride,
                 const int4 *table, int K, const ig_gather &g, int N, int M, float *out,
                 const float *bias, bool relu) {
#define IG_LAUNCHER(BM, BN, S) launch_gemm<BM, BN, S>,
  static const ig_gemm_launcher launchers[] = {IG_GEMM_CONFIGS(IG_LAUNCHER)};
#undef IG_LAUNCHER
  const ig_family f = tile_of(CT_IGEMM_FWD, choice)->family;
  CT_ASSERTF(f != IG_TF32 || p->tf32, "TF32 implicit GEMM configuration %d on a strict FP32 plan",
             choice);
  if (f == IG_TF32)
    ig_tf32_gemm(family_index(CT_IGEMM_FWD, choice), st, A, a_stride, table, K, g, N, M, out,
                 bias, relu);
  else if (f == IG_PIPE)
    ig_pipe_gemm(family_index(CT_IGEMM_FWD, choice), st, A, a_stride, table, K, g, N, M, out,
                 bias, relu);
  else
    launchers[choice - 1](st, A, a_stride, table, K, g, N, M, out, bias, relu);
}

extern "C" bool ct_igemm_choice_runs(const ct_igemm *p, ct_igemm_dir dir, int choice) {
  if (choice < 1 || choice > configs_of(dir) || ct_igemm_unsupported(&p->g, dir)) return false;
  switch (tile_of(dir, choice)->family) {
    case IG_TF32: return p->tf32;
    case IG_WINO: return !ig_wino_unsupported(&p->g, dir);
    case IG_FDIRECT: return !ig_fdirect_unsupported(&p->g, dir);
    case IG_DIRECT: return !p->direct[family_index(dir, choice)].why;
    default: return true;
  }
}

/* Checks a call of direction dir with `choice` and ws_bytes of workspace. */
static void check_call(const ct_igemm *p, ct_igemm_dir dir, int choice, size_t ws_bytes) {
  CT_ASSERTF(ct_igemm_choice_runs(p, dir, choice),
             "implicit GEMM configuration %d cannot run direction %d here", choice, (int)dir);
  CT_ASSERTF(ws_bytes >= ct_igemm_workspace(p, dir, choice),
             "implicit GEMM direction %d: %zu workspace bytes", (int)dir, ws_bytes);
}

extern "C" size_t ct_igemm_prepared_bytes(const ct_igemm *p, ct_igemm_dir dir, int choice) {
  CT_ASSERT(ct_igemm_choice_runs(p, dir, choice));
  return tile_of(dir, choice)->family == IG_WINO ? ig_wino_workspace(&p->g) : 0;
}

extern "C" void ct_igemm_prepare(ct_context *ctx, const ct_igemm *p, ct_igemm_dir dir, int choice,
                                 const float *w, float *prep) {
  CT_ASSERT(ct_igemm_prepared_bytes(p, dir, choice) > 0);
  ig_wino_filters(family_index(dir, choice), (cudaStream_t)ctx->stream, &p->g,
                  dir == CT_IGEMM_BWD_DATA, w, prep);
}

/* A Winograd choice of forward (data false) or backward data: the filter
 * transform into ws unless prep holds it, then the convolution. */
static void wino(ct_context *ctx, const ct_igemm *p, ct_igemm_dir dir, int choice, bool data,
                 const float *src, const float *w, const float *prep, const float *bias,
                 bool relu, float *ws, float *dst) {
  const int index = family_index(dir, choice);
  cudaStream_t st = (cudaStream_t)ctx->stream;
  if (!prep) ig_wino_filters(index, st, &p->g, data, w, ws);
  ig_wino_apply(index, st, &p->g, data, src, prep ? prep : ws, bias, relu, dst);
}

extern "C" void ct_igemm_forward(ct_context *ctx, const ct_igemm *p, int choice, const float *x,
                                 const float *w, const float *prep, const float *bias, bool relu,
                                 float *ws, size_t ws_bytes, float *y) {
  const ct_igemm_geom *g = &p->g;
  check_call(p, CT_IGEMM_FWD, choice, ws_bytes);
  const ig_family f = tile_of(CT_IGEMM_FWD, choice)->family;
  if (f == IG_FDIRECT) {
    ig_fdirect_forward(family_index(CT_IGEMM_FWD, choice), (cudaStream_t)ctx->stream, g, x, w,
                       bias, relu, y);
    return;
  }
  if (f == IG_WINO) {
    wino(ctx, p, CT_IGEMM_FWD, choice, false, x, w, prep, bias, relu, ws, y);
    return;
  }
  gemm(p, choice, (cudaStream_t)ctx->stream, w, g->c * g->kh * g->kw, p->fwd_table,
       g->c * g->kh * g->kw, fwd_gather(g, x), g->n * g->oh * g->ow, g->m, y, bias, relu);
}

extern "C" void ct_igemm_backward_data(ct_context *ctx, const ct_igemm *p, int choice,
                                       const float *dy, const float *w, const float *prep,
                                       float *ws, size_t ws_bytes, float *dx) {
  const ct_igemm_geom *g = &p->g;
  CT_ASSERT(p->bwd_table);
  check_call(p, CT_IGEMM_BWD_DATA, choice, ws_bytes);
  if (tile_of(CT_IGEMM_BWD_DATA, choice)->family == IG_WINO) {
    wino(ctx, p, CT_IGEMM_BWD_DATA, choice, true, dy, w, prep, NULL, false, ws, dx);
    return;
  }
  const ig_gather v = {dy, g->m * g->oh * g->ow, g->oh, g->ow, g->h * g->w, g->w, g->h, 1, 1,
                       g->ph, g->pw};
  gemm(p, choice, (cudaStream_t)ctx->stream, w, g->kh * g->kw, p->bwd_table, g->m * g->kh * g->kw,
       v, g->n * g->h * g->w, g->c, dx, NULL, false);
}

/* Backward filter's split of the N = n * oh * ow columns: about four
 * blocks per multiprocessor, slices of at least 256 columns, each a
 * multiple of the configuration's reduction step (a direct configuration
 * splits bands of rows: its plan's). */
static void wgrad_split(const ct_igemm *p, int choice, int *splits, int *chunk) {
  const ct_igemm_geom *g = &p->g;
  const int sms = p->sms;
  const tile *t = tile_of(CT_IGEMM_BWD_FILTER, choice);
  if (t->family == IG_DIRECT) {
    const ig_direct_plan *d = &p->direct[family_index(CT_IGEMM_BWD_FILTER, choice)];
    *splits = d->splits;
    *chunk = d->chunk;
    return;
  }
  const int BM = t->bm, BN = t->bn;
  const int K = g->c * g->kh * g->kw, N = g->n * g->oh * g->ow;
  const long tiles = (long)((K + BN - 1) / BN) * ((g->m + BM - 1) / BM);
  long s = (4L * (sms > 0 ? sms : 1) + tiles - 1) / tiles;
  const long most = N / 256 > 1 ? N / 256 : 1;
  if (s > most) s = most;
  if (s < 1) s = 1;
  long c = (N + s - 1) / s;
  c = (c + t->step - 1) / t->step * t->step;
  *chunk = (int)c;
  *splits = (int)((N + c - 1) / c);
}

extern "C" size_t ct_igemm_workspace(const ct_igemm *p, ct_igemm_dir dir, int choice) {
  if (dir != CT_IGEMM_BWD_FILTER)
    return tile_of(dir, choice)->family == IG_WINO ? ig_wino_workspace(&p->g) : 0;
  int splits, chunk;
  wgrad_split(p, choice, &splits, &chunk);
  const ct_igemm_geom *g = &p->g;
  return splits > 1 ? (size_t)splits * g->m * g->c * g->kh * g->kw * sizeof(float) : 0;
}

template <int BM, int BN>
static void launch_wgrad(cudaStream_t st, const float *dy, int M, const int4 *table, int K,
                         const ig_gather &g, int N, int chunk, int splits, float *out,
                         bool accumulate) {
  dim3 grid((unsigned)((K + BN - 1) / BN), (unsigned)((M + BM - 1) / BM), (unsigned)splits);
  ig_wgrad_kernel<BM, BN><<<grid, BM * BN / 32, 0, st>>>(dy, M, table, K, g, N, chunk, out,
                                                         accumulate ? 1 : 0);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_igemm_backward_filter(ct_context *ctx, const ct_igemm *p, int choice,
                                         const float *x, const float *dy, float *ws,
                                         size_t ws_bytes, float *dw) {
  const ct_igemm_geom *g = &p->g;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const int K = g->c * g->kh * g->kw, N = g->n * g->oh * g->ow;
  const tile *t = tile_of(CT_IGEMM_BWD_FILTER, choice);
  CT_ASSERTF(t->family != IG_TF32 || p->tf32,
             "TF32 implicit GEMM configuration %d on a strict FP32 plan", choice);
  CT_ASSERTF(ws_bytes >= ct_igemm_workspace(p, CT_IGEMM_BWD_FILTER, choice),
             "implicit GEMM filter gradient: %zu workspace bytes", ws_bytes);
  int splits, chunk;
  wgrad_split(p, choice, &splits, &chunk);
  const bool direct = splits == 1;
  float *out = direct ? dw : ws;
  const ig_gather v = fwd_gather(g, x);
#define IG_LAUNCHER(BM, BN) launch_wgrad<BM, BN>,
  static const ig_wgrad_launcher launchers[] = {IG_WGRAD_CONFIGS(IG_LAUNCHER)};
#undef IG_LAUNCHER
  if (t->family == IG_DIRECT)
    ig_direct_wgrad(family_index(CT_IGEMM_BWD_FILTER, choice), st, g,
                    &p->direct[family_index(CT_IGEMM_BWD_FILTER, choice)], x, dy, out, direct);
  else if (t->family == IG_TF32)
    ig_tf32_wgrad(family_index(CT_IGEMM_BWD_FILTER, choice), st, dy, g->m, p->fwd_table, K, v, N,
                  chunk, splits, out, direct);
  else if (t->family == IG_PIPE)
    ig_pipe_wgrad(family_index(CT_IGEMM_BWD_FILTER, choice), st, dy, g->m, p->fwd_table, K, v, N,
                  chunk, splits, out, direct);
  else
    launchers[choice - 1](st, dy, g->m, p->fwd_table, K, v, N, chunk, splits, out, direct);
  if (!direct) {
    const int MK = g->m * K;
    ig_wgrad_sum_kernel<<<(unsigned)((MK + 31) / 32), 32 * IG_SUM_LANES, 0, st>>>(MK, splits, ws,
                                                                                dw);
    CT_CUDA_LAUNCH_CHECK();
  }
}

/* ---------------------------------------------------------------- timing */

static void run_dir(ct_context *ctx, const ct_igemm *p, ct_igemm_dir dir, int choice, float *x,
                    float *w, const float *prep, float *y, float *ws, size_t ws_bytes) {
  switch (dir) {
    case CT_IGEMM_FWD:
      ct_igemm_forward(ctx, p, choice, x, w, prep, NULL, false, ws, ws_bytes, y);
      break;
    case CT_IGEMM_BWD_DATA:
      ct_igemm_backward_data(ctx, p, choice, y, w, prep, ws, ws_bytes, x);
      break;
    case CT_IGEMM_BWD_FILTER: ct_igemm_backward_filter(ctx, p, choice, x, y, ws, ws_bytes, w); break;
  }
}

/* A configuration with weight-only work is timed without it, done once
 * into ws before (its workspace is that work's output): in a net's pass it
 * runs beside the layers below (ct_net_prepare_async), off the path that
 * the race shortens. */
extern "C" void ct_igemm_time_each(ct_context *ctx, const ct_igemm *p, ct_igemm_dir dir,
                                   float *x, float *w, float *y, float *ws, size_t ws_bytes,
                                   float *ms) {
  for (int c = 1; c <= configs_of(dir); c++) {
    ms[c - 1] = -1.0f;
    if (!ct_igemm_choice_runs(p, dir, c) || ct_igemm_workspace(p, dir, c) > ws_bytes) continue;
    const float *prep = NULL;
    if (ct_igemm_prepared_bytes(p, dir, c) > 0) { /* = its workspace, which fits */
      ct_igemm_prepare(ctx, p, dir, c, w, ws);
      prep = ws;
    }
    ms[c - 1] = ct_gpu_time_calls((cudaStream_t)ctx->stream, 5,
                                  [&] { run_dir(ctx, p, dir, c, x, w, prep, y, ws, ws_bytes); });
  }
}

extern "C" bool ct_igemm_time(ct_context *ctx, const ct_igemm *p, ct_igemm_dir dir, float *x,
                              float *w, float *y, float *ws, size_t ws_bytes, int *choice,
                              float *ms) {
  float each[CT_IGEMM_GEMM_CONFIGS > CT_IGEMM_WGRAD_CONFIGS ? CT_IGEMM_GEMM_CONFIGS
                                                            : CT_IGEMM_WGRAD_CONFIGS];
  ct_igemm_time_each(ctx, p, dir, x, w, y, ws, ws_bytes, each);
  bool found = false;
  for (int c = 1; c <= configs_of(dir); c++) {
    if (each[c - 1] < 0.0f || (found && each[c - 1] >= *ms)) continue;
    *ms = each[c - 1];
    *choice = c;
    found = true;
  }
  return found;
}
