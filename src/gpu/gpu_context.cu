#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/mem.h"
#include "gpu/gpu.h"
#include "gpu/gpu_context.h"

extern "C" ct_status ct_gpu_context_init(ct_context *ctx, ct_error *err) {
  CT_TRY(ct_gpu_set_device(ctx->device, err));
  cudaStream_t stream;
  /* A blocking stream: plain cudaMemcpy (uploads, downloads, snapshots) on the
   * legacy default stream then orders after the compute work on it. */
  cudaError_t ce = cudaStreamCreate(&stream);
  if (ce != cudaSuccess)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cannot create a stream: %s", ctx->device,
                        cudaGetErrorString(ce));
  ctx->stream = stream;
  cublasHandle_t blas;
  cublasStatus_t bs = cublasCreate(&blas);
  if (bs != CUBLAS_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cublasCreate failed (status %d)", ctx->device,
                        (int)bs);
  cublasSetStream(blas, stream);
  cublasSetMathMode(blas, ctx->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  ctx->cublas = blas;
  cudnnHandle_t dnn;
  cudnnStatus_t ds = cudnnCreate(&dnn);
  if (ds != CUDNN_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cudnnCreate failed: %s", ctx->device,
                        cudnnGetErrorString(ds));
  cudnnSetStream(dnn, stream);
  ctx->cudnn = dnn;
  return CT_OK;
}

extern "C" void ct_gpu_context_free(ct_context *ctx) {
  if (ctx->stream) cudaStreamSynchronize((cudaStream_t)ctx->stream);
  if (ctx->workspace) ct_gpu_free(ctx->device, ctx->workspace);
  if (ctx->cudnn) cudnnDestroy((cudnnHandle_t)ctx->cudnn);
  if (ctx->cublas) cublasDestroy((cublasHandle_t)ctx->cublas);
  if (ctx->stream) cudaStreamDestroy((cudaStream_t)ctx->stream);
  ctx->cudnn = ctx->cublas = ctx->stream = ctx->workspace = NULL;
}

extern "C" void ct_gpu_context_sync(ct_context *ctx) {
  CT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)ctx->stream));
}

extern "C" void ct_gpu_context_set_math(ct_context *ctx) {
  if (ctx->cublas)
    cublasSetMathMode((cublasHandle_t)ctx->cublas,
                      ctx->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
}
