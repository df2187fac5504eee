/* cuBLASLt plans of row-major products (gemm_lt.h).
 *
 * Layout.  cuBLASLt is column-major: a row-major (R, S) array with leading
 * dimension S is the column-major (S, R) array with the same leading
 * dimension.  So the row-major C(M,N) = op(A) op(B) is, in cuBLASLt's terms,
 *     D (N x M, ld N) = op_lt(B) (N x K) * op_lt(A) (K x M)
 * with our B as cuBLASLt's first operand and our A as its second:
 *   - our B stored (K,N) row-major is column-major (N x K, ld N): used as is
 *     (OP_N); stored (N,K) when trans_b it is column-major (K x N, ld K),
 *     transposed (OP_T).  Either way op_lt gives (N x K) = op(B)^T.
 *   - our A stored (M,K) row-major is column-major (K x M, ld K): OP_N;
 *     stored (K,M) when trans_a it is (M x K, ld M): OP_T.  op_lt gives
 *     (K x M) = op(A)^T.
 *   - C (M,N) row-major is D, column-major (N x M, ld N).
 * This is the same mapping ct_gpu_gemm hands cublasSgemm (math_gpu.cu).
 * The BIAS epilogue adds a vector with one value per row of D, i.e. per
 * column n of our C: C[m][n] += bias[n], broadcast over the M rows. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "math/gemm_lt.h"
extern "C" {
#include "core/log.h"
}

/* The alignment the chosen algorithms may assume of every pointer. */
#define LT_ALIGN_BYTES 16u
/* Heuristic results looked at. */
#define LT_CANDIDATES 8

struct ct_gemm_lt {
  cublasLtHandle_t handle; /* borrowed */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t lt_a, lt_b, d; /* cuBLASLt's A (our B), B (our A), C = D */
  cublasLtMatmulAlgo_t algo;
  bool bias;
  bool retired; /* cuBLASLt refused a run: every later run returns false */
};

extern "C" bool ct_gemm_lt_tf32(const ct_context *ctx) {
  const char *env = getenv("NVIDIA_TF32_OVERRIDE");
  return ctx->tf32 && !(env && strcmp(env, "0") == 0);
}

extern "C" void ct_gemm_lt_free(ct_gemm_lt *g) {
  if (!g) return;
  if (g->op) cublasLtMatmulDescDestroy(g->op);
  if (g->lt_a) cublasLtMatrixLayoutDestroy(g->lt_a);
  if (g->lt_b) cublasLtMatrixLayoutDestroy(g->lt_b);
  if (g->d) cublasLtMatrixLayoutDestroy(g->d);
  free(g);
}

/* A column-major rows x cols FP32 layout with leading dimension rows. */
static cublasStatus_t layout(cublasLtMatrixLayout_t *out, int rows, int cols) {
  return cublasLtMatrixLayoutCreate(out, CUDA_R_32F, (uint64_t)rows, (uint64_t)cols, (int64_t)rows);
}

#define LT_TRY(call)                                          \
  do {                                                        \
    st = (call);                                              \
    if (st != CUBLAS_STATUS_SUCCESS) {                        \
      what = #call;                                           \
      goto fail;                                              \
    }                                                         \
  } while (0)

extern "C" ct_gemm_lt *ct_gemm_lt_plan(void *handle, bool trans_a, bool trans_b, int M, int N,
                                       int K, bool bias, bool tf32) {
  /* A dimension of 1 is a matrix-vector product, where cuBLASLt's epilogues
   * have had bugs (PyTorch keeps such shapes off cuBLASLt): cuBLAS runs it. */
  if (!handle || M < 2 || N < 2 || K < 2) return NULL;
  /* A long reduction over a small output wants split K, which a
   * workspace-free plan cannot do: cifar10_quick's ip1 forward (100x64x1024)
   * took 31 us in one cuBLASLt kernel of 8 blocks on an H100, against 10 us
   * for cuBLAS's split-K GEMM, its reduction and the bias kernel. */
  if (K >= 512 && (size_t)M * N < 32768) {
    LOG_INFO("a %dx%dx%d product wants split K: cuBLAS runs it", M, N, K);
    return NULL;
  }
  ct_gemm_lt *g = (ct_gemm_lt *)ct_xcalloc(1, sizeof *g);
  g->handle = (cublasLtHandle_t)handle;
  g->bias = bias;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  const char *what = "";
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t res[LT_CANDIDATES];
  int found = 0, pick = -1;
  const int32_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A is our B */
  const int32_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's B is our A */
  const uint32_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  const uint64_t no_workspace = 0;
  const uint32_t align = LT_ALIGN_BYTES;
  /* The heuristics read the bias pointer's value for its alignment only (it
   * is not dereferenced): an address that is 16-byte aligned and no more
   * makes them assume what ct_gemm_lt_run checks.  Runs set the real one. */
  const void *bias_probe = (const void *)(uintptr_t)LT_ALIGN_BYTES;
  LT_TRY(cublasLtMatmulDescCreate(&g->op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                  CUDA_R_32F));
  LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                        sizeof epilogue));
  if (bias)
    LT_TRY(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_probe,
                                          sizeof bias_probe));
  /* our B: stored (N,K) row-major = column-major K x N when trans_b, else
   * (K,N) row-major = column-major N x K */
  LT_TRY(trans_b ? layout(&g->lt_a, K, N) : layout(&g->lt_a, N, K));
  /* our A: stored (K,M) row-major = column-major M x K when trans_a, else
   * (M,K) row-major = column-major K x M */
  LT_TRY(trans_a ? layout(&g->lt_b, M, K) : layout(&g->lt_b, K, M));
  /* C (M,N) row-major = column-major N x M */
  LT_TRY(layout(&g->d, N, M));
  LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &no_workspace, sizeof no_workspace));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                              &align, sizeof align));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                              &align, sizeof align));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                              &align, sizeof align));
  LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                              &align, sizeof align));
  st = cublasLtMatmulAlgoGetHeuristic(g->handle, g->op, g->lt_a, g->lt_b, g->d, g->d, pref,
                                      LT_CANDIDATES, res, &found);
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) {
    what = "cublasLtMatmulAlgoGetHeuristic";
    goto fail;
  }
  /* Best first; with no workspace allowed none should split K, but take
   * one that does only when nothing else is offered. */
  for (int i = 0; i < found; i++) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize != 0) continue;
    int32_t splits = 1;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                             sizeof splits, &written) != CUBLAS_STATUS_SUCCESS)
      splits = 1;
    if (splits <= 1) {
      pick = i;
      break;
    }
    if (pick < 0) pick = i;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (pick < 0) {
    LOG_INFO("cuBLASLt has no workspace-free algorithm for a %dx%dx%d product%s (%s): cuBLAS "
             "runs it", M, N, K, bias ? " with bias" : "", tf32 ? "TF32" : "FP32");
    ct_gemm_lt_free(g);
    return NULL;
  }
  g->algo = res[pick].algo;
  return g;
fail:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  LOG_INFO("cuBLASLt cannot plan a %dx%dx%d product (%s: %s): cuBLAS runs it", M, N, K, what,
           cublasGetStatusString(st));
  ct_gemm_lt_free(g);
  return NULL;
}

static bool aligned(const void *p) { return ((uintptr_t)p % LT_ALIGN_BYTES) == 0; }

extern "C" bool ct_gemm_lt_run(ct_gemm_lt *g, ct_context *ctx, float alpha, const float *A,
                               const float *B, const float *bias, float beta, float *C) {
  if (!g || g->retired) return false;
  CT_ASSERTF((bias != NULL) == g->bias, "a cuBLASLt plan %s a bias but the run %s one",
             g->bias ? "has" : "has no", bias ? "gives" : "gives no");
  if (!aligned(A) || !aligned(B) || !aligned(C) || (bias && !aligned(bias))) return false;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  if (bias)
    st = cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                        sizeof bias);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmul(g->handle, g->op, &alpha, B, g->lt_a, A, g->lt_b, &beta, C, g->d, C, g->d,
                        &g->algo, NULL, 0, (cudaStream_t)ctx->stream);
  if (st == CUBLAS_STATUS_SUCCESS) {
    CT_CUDA_LAUNCH_CHECK();
    return true;
  }
  LOG_WARNING("cublasLtMatmul refused a planned product (%s): cuBLAS runs it from now on",
              cublasGetStatusString(st));
  g->retired = true;
  return false;
}

extern "C" bool ct_gemm_lt_ready(const ct_gemm_lt *g) { return g && !g->retired; }
