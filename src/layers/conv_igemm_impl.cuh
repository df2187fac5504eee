/* What the implicit-GEMM kernel files share (conv_igemm.cu, strict FP32;
 * conv_igemm_tf32.cu, TF32 tensor cores; conv_igemm_fp32p.cu, strict FP32
 * through a cp.async pipeline): the gather of the GEMM's columns, the
 * offset tables' padding, the cp.async primitives, and the configurations
 * and launchers of the pipelined kernels.  Internal to those files; see
 * conv_igemm.h. */
#ifndef CT_LAYERS_CONV_IGEMM_IMPL_CUH
#define CT_LAYERS_CONV_IGEMM_IMPL_CUH

#include <cuda_runtime.h>

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

/* scripts/igemm-emu.sh defines IG_HOST_EMULATION and gives its own host
 * versions of these three. */
#ifndef IG_HOST_EMULATION
/* dst (shared) = *src (global), 4 bytes, or 0 when !full (src not read). */
__device__ __forceinline__ void ig_cp4(float *dst, const float *src, bool full) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d),
               "l"(__cvta_generic_to_global(src)), "r"(full ? 4 : 0)
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

#endif
