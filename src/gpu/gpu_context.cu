#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "gpu/gpu.h"
#include "gpu/gpu_context.h"
#include "runtime/streams.h"
extern "C" {
#include "core/log.h"
}

/* cuBLAS's workspace: NVIDIA recommends 32 MiB on Hopper and newer, 4 MiB
 * before.  Setting it explicitly keeps cuBLAS from allocating while a CUDA
 * graph is being captured. */
static size_t blas_workspace_bytes(int device) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();
    major = 0;
  }
  return (major >= 9 ? 32u : 4u) << 20;
}

/* The device words of one context, in one allocation. */
typedef struct {
  unsigned long long draws;
  unsigned check;
} ctx_words;

extern "C" ct_status ct_gpu_context_init(ct_context *ctx, ct_error *err) {
  CT_TRY(ct_gpu_set_device(ctx->device, err));
  cudaStream_t stream, copy;
  /* A blocking stream: plain cudaMemcpy (uploads, downloads, snapshots) on the
   * legacy default stream then orders after the compute work on it.  Its
   * priority is the compute role's (runtime/streams.h). */
  cudaError_t ce = cudaStreamCreateWithPriority(&stream, cudaStreamDefault,
                                                ct_stream_priority(CT_STREAM_COMPUTE));
  if (ce != cudaSuccess)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cannot create a stream: %s", ctx->device,
                        cudaGetErrorString(ce));
  ctx->stream = stream;
  ce = cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking);
  if (ce != cudaSuccess)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cannot create a copy stream: %s", ctx->device,
                        cudaGetErrorString(ce));
  ctx->copy_stream = copy;
  cublasHandle_t blas;
  cublasStatus_t bs = cublasCreate(&blas);
  if (bs != CUBLAS_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cublasCreate failed (status %d)", ctx->device,
                        (int)bs);
  cublasSetStream(blas, stream);
  cublasSetMathMode(blas, ctx->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH);
  ctx->cublas = blas;
  cublasLtHandle_t lt = NULL;
  bs = cublasLtCreate(&lt);
  if (bs != CUBLAS_STATUS_SUCCESS)
    LOG_WARNING("GPU %d: cublasLtCreate failed (%s): inner products keep cuBLAS", ctx->device,
                cublasGetStatusString(bs));
  ctx->cublaslt = bs == CUBLAS_STATUS_SUCCESS ? lt : NULL;
  size_t wbytes = blas_workspace_bytes(ctx->device);
  ctx->blas_workspace = ct_gpu_malloc(ctx->device, wbytes);
  bs = cublasSetWorkspace(blas, ctx->blas_workspace, wbytes);
  if (bs != CUBLAS_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cublasSetWorkspace failed (status %d)",
                        ctx->device, (int)bs);
  cudnnHandle_t dnn;
  cudnnStatus_t ds = cudnnCreate(&dnn);
  if (ds != CUDNN_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cudnnCreate failed: %s", ctx->device,
                        cudnnGetErrorString(ds));
  cudnnSetStream(dnn, stream);
  ctx->cudnn = dnn;
  ctx_words *w = (ctx_words *)ct_gpu_malloc(ctx->device, sizeof(ctx_words));
  ctx->draws_dev = (uint64_t *)&w->draws;
  ctx->check_word = &w->check;
  ctx->check_host = (unsigned *)ct_gpu_host_alloc(sizeof(unsigned));
  return ct_gpu_grad_create(ctx, err);
}

extern "C" void ct_gpu_context_free(ct_context *ctx) {
  if (ctx->stream) cudaStreamSynchronize((cudaStream_t)ctx->stream);
  ct_gpu_grad_free(ctx);
  if (ctx->workspace) ct_gpu_free(ctx->device, ctx->workspace);
  if (ctx->blas_workspace) ct_gpu_free(ctx->device, ctx->blas_workspace);
  if (ctx->draws_dev) ct_gpu_free(ctx->device, ctx->draws_dev); /* the words' allocation */
  if (ctx->check_host) ct_gpu_host_free(ctx->check_host);
  if (ctx->cudnn) cudnnDestroy((cudnnHandle_t)ctx->cudnn);
  if (ctx->cublas) cublasDestroy((cublasHandle_t)ctx->cublas);
  if (ctx->cublaslt) cublasLtDestroy((cublasLtHandle_t)ctx->cublaslt);
  if (ctx->copy_stream) cudaStreamDestroy((cudaStream_t)ctx->copy_stream);
  if (ctx->stream) cudaStreamDestroy((cudaStream_t)ctx->stream);
  ctx->cudnn = ctx->cublas = ctx->cublaslt = ctx->stream = ctx->copy_stream = ctx->workspace = NULL;
  ctx->blas_workspace = NULL;
  ctx->draws_dev = NULL;
  ctx->check_word = ctx->check_host = NULL;
}

extern "C" void ct_gpu_context_sync(ct_context *ctx) {
  ct_gpu_note_host_wait();
  CT_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)ctx->stream));
}

extern "C" bool ct_gpu_context_idle(ct_context *ctx) {
  const cudaError_t e = cudaStreamQuery((cudaStream_t)ctx->stream);
  if (e == cudaErrorNotReady) return false;
  CT_CUDA_CHECK(e);
  return true;
}

extern "C" void ct_gpu_blas_set_math(void *cublas, bool tf32) {
  cublasStatus_t s = cublasSetMathMode((cublasHandle_t)cublas,
                                       tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS)
    ct_abort(__FILE__, __LINE__, "cublasSetMathMode failed (status %d)", (int)s);
}

extern "C" void ct_gpu_context_set_math(ct_context *ctx) {
  ct_gpu_blas_set_math(ctx->cublas, ctx->tf32);
  ct_gpu_grad_set_math(ctx);
}

extern "C" unsigned ct_gpu_context_read_check(ct_context *ctx) {
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  CT_CUDA_CHECK(cudaMemcpyAsync(ctx->check_host, ctx->check_word, sizeof(unsigned),
                                cudaMemcpyDeviceToHost, stream));
  ct_gpu_context_sync(ctx);
  return *ctx->check_host;
}

extern "C" void ct_gpu_context_clear_check(ct_context *ctx) {
  CT_CUDA_CHECK(cudaMemsetAsync(ctx->check_word, 0, sizeof(unsigned), (cudaStream_t)ctx->stream));
}

extern "C" void ct_gpu_copy_async(ct_context *ctx, void *dst, const void *src, size_t bytes) {
  if (bytes)
    CT_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)ctx->stream));
}

extern "C" void *ct_gpu_event_new(void) {
  cudaEvent_t e;
  CT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

extern "C" void ct_gpu_event_free(void *event) {
  if (event) CT_CUDA_CHECK(cudaEventDestroy((cudaEvent_t)event));
}

extern "C" void ct_gpu_event_record(ct_context *ctx, void *event, bool copy) {
  cudaStream_t s = (cudaStream_t)(copy ? ctx->copy_stream : ctx->stream);
  CT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)event, s));
}

extern "C" void ct_gpu_event_wait(ct_context *ctx, void *event, bool copy) {
  cudaStream_t s = (cudaStream_t)(copy ? ctx->copy_stream : ctx->stream);
  CT_CUDA_CHECK(cudaStreamWaitEvent(s, (cudaEvent_t)event, 0));
}

extern "C" int ct_gpu_side_wait(ct_context *ctx, void *side, void *ev, void *ev_grads) {
  cudaStream_t s = (cudaStream_t)side, grads = (cudaStream_t)ct_context_grad_pending_stream(ctx);
  cudaError_t e = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)ctx->stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(s, (cudaEvent_t)ev, 0);
  if (e == cudaSuccess && grads) e = cudaEventRecord((cudaEvent_t)ev_grads, grads);
  if (e == cudaSuccess && grads) e = cudaStreamWaitEvent(s, (cudaEvent_t)ev_grads, 0);
  return (int)e;
}

extern "C" void ct_gpu_event_sync(void *event) {
  ct_gpu_note_host_wait();
  CT_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event));
}

extern "C" void ct_gpu_copy_upload_async(ct_context *ctx, void *dst, const void *src, size_t bytes) {
  if (bytes)
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                  (cudaStream_t)ctx->copy_stream));
}

__global__ static void next_draw_kernel(uint64_t seed, unsigned long long *draws, uint64_t *out) {
  unsigned long long n = ++*draws;
  *out = ct_draw_seed(seed, (uint64_t)n);
}

extern "C" void ct_gpu_context_next_draw(ct_context *ctx, uint64_t *seed_dev) {
  next_draw_kernel<<<1, 1, 0, (cudaStream_t)ctx->stream>>>(
      ctx->seed, (unsigned long long *)ctx->draws_dev, seed_dev);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" uint64_t ct_gpu_context_get_draws(ct_context *ctx) {
  uint64_t n = 0;
  ct_gpu_memcpy(CT_DEVICE_CPU, &n, ctx->device, ctx->draws_dev, sizeof n);
  return n;
}

extern "C" void ct_gpu_context_set_draws(ct_context *ctx, uint64_t n) {
  ct_gpu_memcpy(ctx->device, ctx->draws_dev, CT_DEVICE_CPU, &n, sizeof n);
}
