/* Element-wise work on typed arrays, GPU side: one grid-stride kernel per
 * operation, templated on the element types. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu/gpu.h"
#include "math/typed.h"
#include "math/typed.cuh"

template <typename From, typename To>
__global__ static void convert_k(size_t n, const From *x, To *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = ct_st<To>(ct_ld(x[i]));
}

template <typename From>
__global__ static void axpy_from_k(size_t n, float alpha, const From *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] += alpha * ct_ld(x[i]);
}

template <typename T>
__global__ static void add_k(size_t n, const T *a, const T *b, T *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = ct_st<T>(ct_ld(a[i]) + ct_ld(b[i]));
}

/* add_k over nv 16-byte vectors (ct_v16). */
template <typename T>
__global__ static void add_v16(size_t nv, const T *a, const T *b, T *y) {
  CT_CUDA_KERNEL_LOOP(i, nv) {
    const ct_v16<T> va = ct_v16<T>::load(a, i), vb = ct_v16<T>::load(b, i);
    ct_v16<T> o;
#pragma unroll
    for (unsigned j = 0; j < ct_v16<T>::V; j++) o.set(j, va[j] + vb[j]);
    o.store(y, i);
  }
}

template <typename T>
static void add_t(ct_context *ctx, size_t n, const T *a, const T *b, T *y) {
  cudaStream_t st = (cudaStream_t)ctx->stream;
  if (ct_v16_fits(n, sizeof(T), a, b, y, NULL)) {
    const size_t nv = n / ct_v16<T>::V;
    add_v16<<<ct_cuda_blocks(nv), CT_CUDA_THREADS, 0, st>>>(nv, a, b, y);
  } else {
    add_k<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(n, a, b, y);
  }
  CT_CUDA_LAUNCH_CHECK();
}

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)
#define LAUNCH(k, ...)                                                           \
  do {                                                                           \
    k<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, __VA_ARGS__);   \
    CT_CUDA_LAUNCH_CHECK();                                                      \
  } while (0)

template <typename From>
static void convert_from(ct_context *ctx, size_t n, const From *x, ct_dtype to, void *y) {
  switch (to) {
    case CT_F32: LAUNCH(convert_k, x, (float *)y); break;
    case CT_BF16: LAUNCH(convert_k, x, (__nv_bfloat16 *)y); break;
    case CT_F16: LAUNCH(convert_k, x, (__half *)y); break;
    default: CT_ASSERTF(false, "no element type %d", (int)to);
  }
}

extern "C" void ct_gpu_convert(ct_context *ctx, size_t n, ct_dtype from, const void *x, ct_dtype to,
                               void *y) {
  if (!n) return;
  if (from == to) {
    if (x != y)
      CT_CUDA_CHECK(cudaMemcpyAsync(y, x, n * ct_dtype_size(to), cudaMemcpyDeviceToDevice,
                                    STREAM(ctx)));
    return;
  }
  switch (from) {
    case CT_F32: convert_from(ctx, n, (const float *)x, to, y); break;
    case CT_BF16: convert_from(ctx, n, (const __nv_bfloat16 *)x, to, y); break;
    case CT_F16: convert_from(ctx, n, (const __half *)x, to, y); break;
    default: CT_ASSERTF(false, "no element type %d", (int)from);
  }
}

extern "C" void ct_gpu_axpy_from(ct_context *ctx, size_t n, float alpha, ct_dtype from,
                                 const void *x, float *y) {
  if (!n) return;
  switch (from) {
    case CT_F32: LAUNCH(axpy_from_k, alpha, (const float *)x, y); break;
    case CT_BF16: LAUNCH(axpy_from_k, alpha, (const __nv_bfloat16 *)x, y); break;
    case CT_F16: LAUNCH(axpy_from_k, alpha, (const __half *)x, y); break;
    default: CT_ASSERTF(false, "no element type %d", (int)from);
  }
}

extern "C" void ct_gpu_add_typed(ct_context *ctx, ct_dtype t, size_t n, const void *a,
                                 const void *b, void *y) {
  if (!n) return;
  switch (t) {
    case CT_F32: add_t(ctx, n, (const float *)a, (const float *)b, (float *)y); break;
    case CT_BF16:
      add_t(ctx, n, (const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, (__nv_bfloat16 *)y);
      break;
    case CT_F16: add_t(ctx, n, (const __half *)a, (const __half *)b, (__half *)y); break;
    default: CT_ASSERTF(false, "no element type %d", (int)t);
  }
}

/* One 32 x 32 tile of one matrix per block (32 x 8 threads), through
 * shared memory so that reads and writes both run along rows. */
#define TILE 32
template <typename From, typename To>
__global__ static void transpose_k(size_t n, unsigned rows, unsigned cols, const From *x, To *y,
                                   bool accumulate) {
  __shared__ float tile[TILE][TILE + 1];
  const unsigned r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;
  const size_t m = (size_t)rows * cols;
  for (size_t b = blockIdx.z; b < n; b += gridDim.z) {
    const From *xb = x + b * m;
    To *yb = y + b * m;
    for (unsigned i = threadIdx.y; i < TILE; i += blockDim.y) {
      const unsigned r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = ct_ld(xb[(size_t)r * cols + c]);
    }
    __syncthreads();
    for (unsigned i = threadIdx.y; i < TILE; i += blockDim.y) {
      const unsigned c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) {
        const size_t o = (size_t)c * rows + r;
        const float v = tile[threadIdx.x][i];
        yb[o] = ct_st<To>(accumulate ? ct_ld(yb[o]) + v : v);
      }
    }
    __syncthreads();
  }
}

template <typename From, typename To>
static void transpose_typed(ct_context *ctx, size_t n, size_t rows, size_t cols, const From *x,
                            To *y, bool accumulate) {
  CT_ASSERTF(rows <= 0xffffffffu && cols <= 0xffffffffu && (rows + TILE - 1) / TILE <= 65535,
             "transpose of %zu x %zu", rows, cols);
  const dim3 grid((unsigned)((cols + TILE - 1) / TILE), (unsigned)((rows + TILE - 1) / TILE),
                  (unsigned)(n < 65535 ? n : 65535));
  transpose_k<<<grid, dim3(TILE, 8), 0, STREAM(ctx)>>>(n, (unsigned)rows, (unsigned)cols, x, y,
                                                       accumulate);
  CT_CUDA_LAUNCH_CHECK();
}

template <typename From>
static void transpose_from(ct_context *ctx, size_t n, size_t rows, size_t cols, const From *x,
                           ct_dtype to, void *y, bool accumulate) {
  switch (to) {
    case CT_F32: transpose_typed(ctx, n, rows, cols, x, (float *)y, accumulate); break;
    case CT_BF16: transpose_typed(ctx, n, rows, cols, x, (__nv_bfloat16 *)y, accumulate); break;
    case CT_F16: transpose_typed(ctx, n, rows, cols, x, (__half *)y, accumulate); break;
    default: CT_ASSERTF(false, "no element type %d", (int)to);
  }
}

extern "C" void ct_gpu_transpose_convert(ct_context *ctx, size_t n, size_t rows, size_t cols,
                                         ct_dtype from, const void *x, ct_dtype to, void *y,
                                         bool accumulate) {
  if (!n || !rows || !cols) return;
  switch (from) {
    case CT_F32: transpose_from(ctx, n, rows, cols, (const float *)x, to, y, accumulate); break;
    case CT_BF16:
      transpose_from(ctx, n, rows, cols, (const __nv_bfloat16 *)x, to, y, accumulate);
      break;
    case CT_F16: transpose_from(ctx, n, rows, cols, (const __half *)x, to, y, accumulate); break;
    default: CT_ASSERTF(false, "no element type %d", (int)from);
  }
}

static cudaDataType_t cuda_type(ct_dtype t) {
  switch (t) {
    case CT_BF16: return CUDA_R_16BF;
    case CT_F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

extern "C" void ct_gpu_gemm_typed(ct_context *ctx, bool trans_a, bool trans_b, int M, int N, int K,
                                  float alpha, ct_dtype ab_type, const void *A, const void *B,
                                  float beta, ct_dtype c_type, void *C) {
  if (M == 0 || N == 0) return;
  /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
  const int lda = trans_a ? M : K, ldb = trans_b ? K : N;
  const cudaDataType_t t = cuda_type(ab_type);
  cublasStatus_t st = cublasGemmEx(
      (cublasHandle_t)ctx->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, t, ldb, A, t, lda, &beta, C,
      cuda_type(c_type), N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  CT_ASSERTF(st == CUBLAS_STATUS_SUCCESS, "cuBLAS GemmEx (%s x %s -> %s, %d x %d x %d): %s",
             ct_dtype_name(ab_type), ct_dtype_name(ab_type), ct_dtype_name(c_type), M, N, K,
             cublasGetStatusString(st));
}
