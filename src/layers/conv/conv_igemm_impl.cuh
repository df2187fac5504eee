/* What the implicit-GEMM kernel files share (conv_igemm.cu, strict FP32;
 * conv_igemm_tf32.cu, TF32 tensor cores; conv_igemm_fp32p.cu, strict FP32
 * through a cp.async pipeline): the gather of the GEMM's columns, the
 * offset tables' padding, the cp.async primitives, and the configurations
 * and launchers of the pipelined kernels.  Internal to those files; see
 * conv_igemm.h. */
#ifndef CT_LAYERS_CONV_IGEMM_IMPL_CUH
#define CT_LAYERS_CONV_IGEMM_IMPL_CUH

#include <cuda_runtime.h>

#include "layers/conv/conv_igemm.h"

/* The implicit im2col view of a batch of source images (X forward, dY for
 * backward data): column n = (image, oy, ox) of the GEMM reads, for table
 * entry k = {a_off, src_off, dy, dx}, src[pos(n) + src_off] where
 * pos(n) = image * img_stride + y0 * SW + x0, y0 = oy * sy + y_off and
 * x0 = ox * sx + x_off, or 0 unless 0 <= y0 + dy < SH and 0 <= x0 + dx < SW. */
typedef struct ig_gather {
  const float *src;
  int img_stride, SH, SW;
  int P, OW, OH;  /* positions per image, their row width and rows (n's decomposition) */
  int sy, sx, y_off, x_off;
} ig_gather;

/* A configuration's launcher: forward and backward data (out = A x the
 * gathered columns, + bias, then ReLU), and backward filter's block sums
 * (see ig_tf32_gemm and ig_tf32_wgrad below). */
typedef void (*ig_gemm_launcher)(cudaStream_t, const float *, int, const int4 *, int,
                                 const ig_gather &, int, int, float *, const float *, bool);
typedef void (*ig_wgrad_launcher)(cudaStream_t, const float *, int, const int4 *, int,
                                  const ig_gather &, int, int, int, float *, bool);

/* table[index], which must exist (family names the list in the failure). */
template <typename F, size_t N>
static inline F ig_launcher_at(F const (&table)[N], int index, const char *family) {
  CT_ASSERTF(index >= 0 && (size_t)index < N, "%s configuration %d", family, index);
  return table[index];
}

/* pos, y0 and x0 of column n (which must be in range). */
__device__ __forceinline__ void ig_column(const ig_gather &g, int n, int *pos, int *y0, int *x0) {
  const int img = n / g.P, pix = n - img * g.P;
  const int oy = pix / g.OW, ox = pix - oy * g.OW;
  *y0 = oy * g.sy + g.y_off;
  *x0 = ox * g.sx + g.x_off;
  *pos = img * g.img_stride + *y0 * g.SW + *x0;
}

/* The offset tables hold a multiple of IG_TABLE_STEP entries: the entries
 * past the reduction length K have dy = dx = IG_FAR, which no row test
 * passes, so that the TF32 kernels read whole steps of the table and get
 * zeros there without testing k < K.  They also give a column past the GEMM's
 * end y0 = IG_FAR.  ct_igemm_unsupported keeps every side, pad and kernel
 * extent under 2^30, so y0 + dy stays negative (and within int) whenever
 * either is IG_FAR. */
#define IG_TABLE_STEP 128
#define IG_FAR (-(1 << 30))

/* ---------------------------------------------------------------- cp.async */

/* tests/emu/igemm-emu.sh and tests/emu/wino-emu.sh define IG_HOST_EMULATION
 * and give their own host versions of these. */
#ifndef IG_HOST_EMULATION
/* dst (shared) = *src (global), 4 bytes, or 0 when !full (src not read). */
__device__ __forceinline__ void ig_cp4(float *dst, const float *src, bool full) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d),
               "l"(__cvta_generic_to_global(src)), "r"(full ? 4 : 0)
               : "memory");
}

/* The same for 16 bytes (dst and src 16-byte aligned). */
__device__ __forceinline__ void ig_cp16(float *dst, const float *src, bool full) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d),
               "l"(__cvta_generic_to_global(src)), "r"(full ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void ig_cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits until at most N of this thread's committed groups are in flight. */
template <int N>
__device__ __forceinline__ void ig_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

/* ---------------------------------------------------------------- the pipelined kernels' parts */

/* The cp.async pipeline of the pipelined kernels (TF32 and FP32) over KT
 * reduction stages in STAGES shared buffers: load(kt, slot) issues stage
 * kt's copies into buffer slot (the stages come in order 0, 1, ...) and
 * step(slot) multiplies the landed stage in buffer slot.  Stage kt is in
 * commit group kt (empty groups keep the count); a buffer is refilled only
 * after every thread has passed the barrier that follows its last use.
 * Returns with every copy landed and the block synchronised: the shared
 * memory is free for the groups' sums. */
template <int STAGES, typename Load, typename Step>
__device__ __forceinline__ void ig_pipeline(int KT, Load &load, Step &step) {
#pragma unroll 1 /* one copy of the loads' code: the loop's */
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < KT) load(s, s);
    ig_cp_commit();
  }
  for (int kt = 0; kt < KT; kt++) {
    ig_cp_wait<STAGES - 2>();
    __syncthreads(); /* stage kt landed for all; stage kt - 1's buffer is free */
    const int next = kt + STAGES - 1;
    if (next < KT) load(next, next % STAGES);
    ig_cp_commit();
    step(kt % STAGES);
  }
  ig_cp_wait<0>();
  __syncthreads();
}

/* The gathered operand's columns first + j * TB (j < NCOLS) of a forward or
 * backward-data GEMM: pos, y0 and x0 as ig_column gives them, and y0 =
 * IG_FAR (no row test passes) past the GEMM's N columns. */
template <int NCOLS, int TB>
__device__ __forceinline__ void ig_columns(const ig_gather &g, int first, int N,
                                           int (&pos)[NCOLS], int (&y0)[NCOLS],
                                           int (&x0)[NCOLS]) {
#pragma unroll
  for (int j = 0; j < NCOLS; j++) {
    const int n = first + j * TB;
    pos[j] = 0;
    y0[j] = IG_FAR;
    x0[j] = 0;
    if (n < N) ig_column(g, n, &pos[j], &y0[j], &x0[j]);
  }
}

/* Copies of a stage of the gathered operand into Bs (rows SB apart): rows
 * brow + i * RSTEP (i < ROWS) of the stage starting at reduction step kb,
 * at the columns of ig_columns (bcol + j * TB in the tile); zeros where the
 * gather falls outside the source (the padded table makes every row of a
 * whole stage readable). */
template <int ROWS, int RSTEP, int NCOLS, int TB, int SB>
__device__ __forceinline__ void ig_gather_stage(float *Bs, const int4 *table, int kb, int brow,
                                                int bcol, const ig_gather &g,
                                                const int (&pos)[NCOLS], const int (&y0)[NCOLS],
                                                const int (&x0)[NCOLS]) {
#pragma unroll
  for (int i = 0; i < ROWS; i++) {
    const int kr = brow + i * RSTEP;
    const int4 e = __ldg(&table[kb + kr]);
#pragma unroll
    for (int j = 0; j < NCOLS; j++) {
      const bool ok =
          (unsigned)(y0[j] + e.z) < (unsigned)g.SH && (unsigned)(x0[j] + e.w) < (unsigned)g.SW;
      ig_cp4(Bs + kr * SB + bcol + j * TB, g.src + (ok ? pos[j] + e.y : 0), ok);
    }
  }
}

/* ---------------------------------------------------------------- TF32 configurations */

/* Tile configurations of the TF32 kernels, one list per kernel: a block
 * computes a BM x BN output tile with warps of 32 x WN outputs, in S groups
 * of warps that split each 32-deep reduction step among them (their sums
 * added in group order at the end), through a cp.async pipeline of STAGES
 * shared-memory buffers.  Forward and backward data share the first list;
 * backward filter (BM output channels x BN filter taps) the second. */
#define IG_TF32_GEMM_CONFIGS(X)                                                          \
  X(32, 64, 32, 1, 4) X(32, 64, 32, 2, 4) X(32, 64, 32, 4, 4) X(32, 128, 32, 1, 4)      \
  X(32, 128, 32, 2, 4) X(32, 128, 64, 2, 3) X(64, 64, 32, 1, 4) X(64, 64, 32, 2, 3)     \
  X(64, 128, 32, 1, 3) X(32, 32, 32, 4, 4)
#define IG_TF32_WGRAD_CONFIGS(X)                                                         \
  X(32, 64, 32, 1, 4) X(32, 64, 32, 2, 4) X(32, 64, 32, 4, 4) X(32, 128, 32, 1, 4)      \
  X(64, 64, 32, 1, 4) X(64, 128, 32, 1, 3)

/* The reduction step (rows of a pipeline stage) of every TF32 kernel. */
#define IG_TF32_STEP 32

/* out[image, m, pix] = sum_k A[m * a_stride + table[k].x] * gather(k, n)
 * (+ bias[m], then ReLU) with TF32 configuration `index` (0-based in
 * IG_TF32_GEMM_CONFIGS), as the FP32 kernel of conv_igemm.cu. */
void ig_tf32_gemm(int index, cudaStream_t st, const float *A, int a_stride, const int4 *table,
                  int K, const ig_gather &g, int N, int M, float *out, const float *bias,
                  bool relu);

/* Backward filter's block sums with TF32 configuration `index` (0-based in
 * IG_TF32_WGRAD_CONFIGS): `splits` slices of `chunk` columns, each into
 * out + z * M * K, or added to out when accumulate (one slice). */
void ig_tf32_wgrad(int index, cudaStream_t st, const float *dy, int M, const int4 *table, int K,
                   const ig_gather &g, int N, int chunk, int splits, float *out, bool accumulate);

/* Lets every TF32 kernel use the shared memory its pipeline needs (more
 * than the default 48 KiB) on the current device. */
void ig_tf32_allow_smem(void);

/* ---------------------------------------------------------------- pipelined FP32 configurations */

/* Tile configurations of the pipelined strict-FP32 kernels
 * (conv_igemm_fp32p.cu): a block computes a BM x BN output tile, each
 * thread TM x 8 of it (TM 4 or 8), in S groups of threads that split each
 * BK-deep reduction step among them (their sums added in group order at the
 * end), through a cp.async pipeline of STAGES shared-memory buffers.
 * Forward and backward data share the first list; backward filter (BM
 * output channels x BN filter taps) the second.  X(BM, BN, TM, S, BK,
 * STAGES). */
#define IG_PIPE_GEMM_CONFIGS(X)                                                          \
  X(32, 128, 8, 1, 16, 4) X(32, 128, 8, 2, 16, 4) X(32, 64, 8, 4, 16, 4)               \
  X(64, 64, 8, 2, 16, 4) X(64, 64, 8, 4, 16, 4) X(64, 32, 8, 4, 16, 4)                 \
  X(32, 32, 4, 4, 32, 4) X(32, 32, 4, 8, 32, 3)
#define IG_PIPE_WGRAD_CONFIGS(X)                                                         \
  X(32, 32, 4, 4, 32, 4) X(32, 32, 4, 8, 32, 3) X(32, 64, 8, 4, 16, 4)                 \
  X(32, 128, 8, 2, 16, 4) X(64, 32, 8, 4, 16, 4) X(64, 64, 8, 4, 16, 4)

/* out[image, m, pix] = sum_k A[m * a_stride + table[k].x] * gather(k, n)
 * (+ bias[m], then ReLU) with pipelined configuration `index` (0-based in
 * IG_PIPE_GEMM_CONFIGS), as the FP32 kernel of conv_igemm.cu. */
void ig_pipe_gemm(int index, cudaStream_t st, const float *A, int a_stride, const int4 *table,
                  int K, const ig_gather &g, int N, int M, float *out, const float *bias,
                  bool relu);

/* Backward filter's block sums with pipelined configuration `index`
 * (0-based in IG_PIPE_WGRAD_CONFIGS), as ig_tf32_wgrad. */
void ig_pipe_wgrad(int index, cudaStream_t st, const float *dy, int M, const int4 *table, int K,
                   const ig_gather &g, int N, int chunk, int splits, float *out, bool accumulate);

/* ---------------------------------------------------------------- Winograd configurations */

/* Configurations of the strict-FP32 Winograd F(2x2, 5x5) kernel
 * (conv_winograd.cu), forward and backward data only: a block computes a
 * BY x BX rectangle of 2x2 output tiles of one image x BK output channels,
 * each thread TT tiles x TK channels of one of the 36 transformed points,
 * taking the input channels CC at a time.  X(BY, BX, BK, TT, TK, CC). */
#define IG_WINO_CONFIGS(X)                                                               \
  X(4, 4, 32, 8, 8, 8) X(4, 4, 32, 4, 8, 4) X(4, 8, 16, 8, 8, 4) X(2, 4, 32, 4, 8, 8)      \
  X(4, 4, 64, 8, 8, 4)

/* Why the Winograd kernel cannot run direction dir of g, or NULL: it needs
 * 5x5 filters, stride and dilation 1, pads up to 4, and runs forward and
 * backward data only. */
const char *ig_wino_unsupported(const ct_igemm_geom *g, ct_igemm_dir dir);

/* Its workspace bytes (the transformed filters), either direction. */
size_t ig_wino_workspace(const ct_igemm_geom *g);

/* Winograd configuration `index` (0-based in IG_WINO_CONFIGS) of g,
 * forward (data false) or backward data (data true), in two halves: the
 * filter transform of w into u (ig_wino_workspace(g) bytes, in the
 * configuration's layout), which depends on the weights only; then the
 * convolution from u, overwriting dst.  Forward: src = x, dst = y, + bias
 * when not NULL, then ReLU when relu.  Backward data: src = dy, dst = dx,
 * bias NULL and relu false. */
void ig_wino_filters(int index, cudaStream_t st, const ct_igemm_geom *g, bool data,
                     const float *w, float *u);
void ig_wino_apply(int index, cudaStream_t st, const ct_igemm_geom *g, bool data,
                   const float *src, const float *u, const float *bias, bool relu, float *dst);

/* Lets the Winograd kernels use the shared memory they need (more than the
 * default 48 KiB) on the current device. */
void ig_wino_allow_smem(void);

/* ---------------------------------------------------------------- direct forward configurations */

/* Configurations of the strict-FP32 direct forward of 5x5 stride-1
 * convolutions with at most IG_FDIRECT_MAX_CHANNELS input channels and rows
 * of at most 32 outputs (conv_fwd_direct.cu): a block computes RB output
 * rows of one image x 32 output channels.  X(RB). */
#define IG_FDIRECT_CONFIGS(X) X(2) X(4) X(8)
#define IG_FDIRECT_MAX_CHANNELS 4

/* Why the direct forward cannot run direction dir of g, or NULL. */
const char *ig_fdirect_unsupported(const ct_igemm_geom *g, ct_igemm_dir dir);

/* y = conv(x, w) (+ bias when not NULL, then max(., 0) when relu) of g
 * with direct-forward configuration `index` (0-based in
 * IG_FDIRECT_CONFIGS), overwriting y; no workspace. */
void ig_fdirect_forward(int index, cudaStream_t st, const ct_igemm_geom *g, const float *x,
                        const float *w, const float *bias, bool relu, float *y);

/* ---------------------------------------------------------------- direct filter-gradient configurations */

/* Configurations of the strict-FP32 direct filter gradient
 * (conv_wgrad_direct.cu) of KW x KW, stride-1 convolutions: OWL lanes
 * along an output row (at least its width), TM output channels per thread,
 * MB output channels x CB input channels per block, bands of R output rows.
 * X(KW, OWL, TM, CB, MB, R).  Rows up to 16 wide: on an H100 (session 12)
 * 32-lane configurations won cifar10_quick's conv1 alone (0.040 ms against
 * 0.043 for the pipelined implicit GEMM) but took 98 us instead of 43 in
 * the iteration, beside conv2's filter gradient; one output channel per
 * thread lost everywhere. */
#define IG_DIRECT_WGRAD_CONFIGS(X) \
  X(5, 16, 2, 4, 16, 16) X(5, 16, 2, 2, 16, 16) X(5, 8, 2, 4, 16, 8) X(5, 8, 2, 8, 16, 8)

/* A direct configuration's plan for one geometry: why it cannot run (NULL
 * when it can: KW x KW filters, stride and dilation 1, rows that fit its
 * lanes and shared memory), its shared memory, and its slices of
 * the units (bands of rows) among `splits` blocks along z, `chunk` units
 * each (both 0 where it cannot run, so no workspace). */
typedef struct ig_direct_plan {
  const char *why;
  size_t smem_bytes;
  int splits, chunk;
} ig_direct_plan;

/* Configuration `index`'s (0-based in IG_DIRECT_WGRAD_CONFIGS) plan for g
 * on a device of `sms` multiprocessors. */
void ig_direct_prepare(int index, const ct_igemm_geom *g, int sms, ig_direct_plan *plan);

/* Its block sums by `plan` (which must run): each slice into out + z * M *
 * C * KW * KW, or added to out when accumulate (one slice). */
void ig_direct_wgrad(int index, cudaStream_t st, const ct_igemm_geom *g,
                     const ig_direct_plan *plan, const float *x, const float *dy, float *out,
                     bool accumulate);

/* Lets the direct filter-gradient kernels use up to 227 KiB of shared
 * memory on the current device. */
void ig_direct_allow_smem(void);

#endif
