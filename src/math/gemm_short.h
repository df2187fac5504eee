/* Products with a long reduction and a small result, as one kernel (GPU
 * builds only), for what cuBLASLt's plans leave to cuBLAS (gemm_lt.h): its
 * split-K took three kernels for cifar10_quick's ip1 (100 x 64 outputs, K
 * 1024: a GEMM, the split's sum and the bias, 10 us on an H100).
 *
 *     C(M,N) = A(M,K) * B(N,K)^T  [+ bias(N) on every row of C]
 *
 * row-major, A and B with K contiguous (InnerProduct's forward: the
 * bottom times the weights stored (N, K) as Caffe's).  Strict FP32 FMAs in a
 * fixed order (each lane's strided partial sums, then a fixed butterfly):
 * the same bits on every run, whatever the math mode. */
#ifndef CT_MATH_GEMM_SHORT_H
#define CT_MATH_GEMM_SHORT_H

#include <stdbool.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the shape is one this path takes: K at least 512 and at most
 * 8192 outputs (beyond, its rereads of A and B from L2 grow). */
bool ct_gemm_short_fits(int M, int N, int K);
/* Enqueues C = A B^T (+ bias when not NULL) on ctx's stream, overwriting
 * C; the shape must fit (CT_ASSERT). */
void ct_gemm_short_nt(ct_context *ctx, int M, int N, int K, const float *A, const float *B,
                      const float *bias, float *C);

#ifdef __cplusplus
}
#endif

#endif
