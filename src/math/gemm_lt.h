/* Matrix products planned once per shape with cuBLASLt (GPU builds only).
 *
 * The convention is ct_gpu_gemm's (math.h): row-major arrays, as in Caffe,
 *     C(M,N) = alpha * op(A)(M,K) * op(B)(K,N) + beta * C  [+ bias(N) on every row of C]
 * where A is stored (M,K), or (K,M) when trans_a, and B is stored (K,N), or
 * (N,K) when trans_b.
 *
 * What a plan adds over cublasSgemm: the algorithm is chosen once, at plan
 * time (reshape), from cuBLASLt's heuristics, among those that need no
 * workspace and so never split K into a second reduction kernel; and the
 * bias can be added in the GEMM's epilogue (one kernel instead of two).
 * Running a plan enqueues one kernel and nothing else: no allocation, no
 * wait, capturable into a CUDA graph.  The results do not depend on timing
 * (no race between algorithms), so two runs give the same bits. */
#ifndef CT_MATH_GEMM_LT_H
#define CT_MATH_GEMM_LT_H

#include <stdbool.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_gemm_lt ct_gemm_lt;

/* True when TF32 tensor-core math is allowed for ctx: ctx->tf32, unless
 * NVIDIA_TF32_OVERRIDE=0 is in the environment (NVIDIA's switch that turns
 * TF32 off in every CUDA math library, which this honours explicitly). */
bool ct_gemm_lt_tf32(const ct_context *ctx);

/* Plans the product above on the current device with handle, a
 * cublasLtHandle_t (a context's cublaslt; borrowed: it must outlive the
 * plan; NULL gives NULL).  tf32 picks TF32 tensor-core
 * compute (CUBLAS_COMPUTE_32F_FAST_TF32), else full FP32
 * (CUBLAS_COMPUTE_32F).  bias: the plan adds bias(N) to every row of C.
 * The algorithm assumes A, B, C and the bias start on 16-byte boundaries
 * (ct_gemm_lt_run checks).  Returns NULL when a dimension is below 2 or the
 * product is a long reduction (K >= 512) over a small output (M * N below
 * 32768), which cuBLAS's split-K runs faster (both left to cuBLAS), or,
 * after logging why at INFO level, when cuBLASLt offers no
 * algorithm for it: the caller keeps another path. */
ct_gemm_lt *ct_gemm_lt_plan(void *handle, bool trans_a, bool trans_b, int M, int N, int K,
                            bool bias, bool tf32);
/* Enqueues the planned product on ctx's stream (ctx may be a gradient
 * stream's view): alpha and beta are read now (host values); bias must be
 * non-NULL exactly when the plan has one; C may be read (beta != 0) and is
 * written in place.  Returns false, enqueueing nothing, when a pointer is
 * not 16-byte aligned or cuBLASLt refuses the call (logged once, and the
 * plan is then retired: later runs return false at once); the caller then
 * runs its other path. */
bool ct_gemm_lt_run(ct_gemm_lt *g, ct_context *ctx, float alpha, const float *A, const float *B,
                    const float *bias, float beta, float *C);
/* True when g is a plan (not NULL) that cuBLASLt has not refused. */
bool ct_gemm_lt_ready(const ct_gemm_lt *g);
void ct_gemm_lt_free(ct_gemm_lt *g);

#ifdef __cplusplus
}
#endif

#endif
