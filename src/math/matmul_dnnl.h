/* Host matrix products in 16-bit types through oneDNN's matmul primitive
 * (AMX or AVX512_BF16 kernels): C (M,N) = op(A) (M,K) op(B) (K,N), or
 * C += that, row-major as ct_cpu_gemm, with A, B and C each of its own
 * element type (C of float32 to accumulate a layer's parameter gradient
 * into its master's diff).  A plan is made once per shape (at a layer's
 * reshape) and run many times.  Compiled only with oneDNN (CMake drops
 * *_dnnl.c otherwise); without it ct_matmul_dnnl_plan returns NULL. */
#ifndef CT_MATH_MATMUL_DNNL_H
#define CT_MATH_MATMUL_DNNL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_matmul_dnnl ct_matmul_dnnl;

/* A plan for C = op(A) op(B) (accumulate: C += ...), with a bias (N
 * float32 values added to every row) when bias; NULL when oneDNN has no
 * implementation (why gets the reason). */
#ifdef CORTADO_HAVE_DNNL
ct_matmul_dnnl *ct_matmul_dnnl_plan(bool trans_a, bool trans_b, int M, int N, int K, ct_dtype a,
                                    ct_dtype b, ct_dtype c, bool bias, bool accumulate, char *why,
                                    size_t why_len);
/* Runs it: A, B, C of the plan's types and shapes, bias NULL when planned
 * without. */
void ct_matmul_dnnl_run(ct_matmul_dnnl *p, const void *A, const void *B, const float *bias,
                        void *C);
void ct_matmul_dnnl_free(ct_matmul_dnnl *p);
#else
static inline ct_matmul_dnnl *ct_matmul_dnnl_plan(bool trans_a, bool trans_b, int M, int N, int K,
                                                  ct_dtype a, ct_dtype b, ct_dtype c, bool bias,
                                                  bool accumulate, char *why, size_t why_len) {
  if (why_len) why[0] = '\0';
  return NULL;
}
static inline void ct_matmul_dnnl_run(ct_matmul_dnnl *p, const void *A, const void *B,
                                      const float *bias, void *C) {}
static inline void ct_matmul_dnnl_free(ct_matmul_dnnl *p) {}
#endif

#ifdef __cplusplus
}
#endif

#endif
