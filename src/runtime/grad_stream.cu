/* The parameter-gradient stream of a GPU context (core/context.h): a second
 * stream with its own cuBLAS and cuDNN handles and workspaces, ordered
 * against the compute stream by events only. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/settings.h"
#include "gpu/gpu.h"
#include "gpu/gpu_context.h"
#include "runtime/streams.h"
#include "runtime/trace_gpu.h"

typedef struct grad_stream {
  cudaStream_t stream;
  cublasHandle_t blas;
  void *blas_workspace;
  cudnnHandle_t dnn;
  void *workspace;          /* cuDNN's, sized by ct_gpu_grad_workspace */
  size_t workspace_bytes;
  cudaEvent_t fork;         /* compute -> gradient stream */
  cudaEvent_t join;         /* gradient stream -> compute, everything */
  cudaEvent_t done[2];      /* the ends of the last two layers' work: end k in done[k & 1] */
  int ends;                 /* layer ends marked since the last join */
  bool pending;             /* work enqueued since the last join */
  ct_context view;          /* what ct_gpu_grad_begin returns */
} grad_stream;

static grad_stream *state(ct_context *ctx) { return (grad_stream *)ctx->grads; }
static cudaStream_t compute(const ct_context *ctx) { return (cudaStream_t)ctx->stream; }

/* On unless CORTADO_GRAD_STREAM=0. */
static bool wanted(void) {
  return ct_setting_bool("CORTADO_GRAD_STREAM");
}

/* cuBLAS's workspace on the gradient stream: its GEMMs are weight gradients,
 * whose inner dimension is the batch, too short for split-K reductions. */
#define GRAD_BLAS_WORKSPACE_BYTES (4u << 20)

extern "C" ct_status ct_gpu_grad_create(ct_context *ctx, ct_error *err) {
  if (!wanted()) return CT_OK;
  grad_stream *g = (grad_stream *)ct_xcalloc(1, sizeof *g);
  ctx->grads = g;
  /* blocking, like the compute stream: the legacy stream's plain copies
   * order after it too */
  cudaError_t ce = cudaStreamCreateWithPriority(&g->stream, cudaStreamDefault,
                                                ct_stream_priority(CT_STREAM_GRADIENTS));
  for (int i = 0; ce == cudaSuccess && i < 4; i++) {
    cudaEvent_t *ev = i == 0 ? &g->fork : i == 1 ? &g->join : &g->done[i - 2];
    ce = cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
  }
  if (ce != cudaSuccess)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cannot create the gradient stream: %s",
                        ctx->device, cudaGetErrorString(ce));
  if (cublasCreate(&g->blas) != CUBLAS_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cublasCreate failed (gradient stream)",
                        ctx->device);
  cublasSetStream(g->blas, g->stream);
  g->blas_workspace = ct_gpu_malloc(ctx->device, GRAD_BLAS_WORKSPACE_BYTES);
  if (cublasSetWorkspace(g->blas, g->blas_workspace, GRAD_BLAS_WORKSPACE_BYTES) != CUBLAS_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cublasSetWorkspace failed (gradient stream)",
                        ctx->device);
  ct_gpu_grad_set_math(ctx);
  if (cudnnCreate(&g->dnn) != CUDNN_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cudnnCreate failed (gradient stream)",
                        ctx->device);
  cudnnSetStream(g->dnn, g->stream);
  return CT_OK;
}

extern "C" void ct_gpu_grad_free(ct_context *ctx) {
  grad_stream *g = state(ctx);
  if (!g) return;
  if (g->stream) cudaStreamSynchronize(g->stream);
  if (g->workspace) ct_gpu_free(ctx->device, g->workspace);
  if (g->blas_workspace) ct_gpu_free(ctx->device, g->blas_workspace);
  if (g->dnn) cudnnDestroy(g->dnn);
  if (g->blas) cublasDestroy(g->blas);
  cudaEvent_t evs[4] = {g->fork, g->join, g->done[0], g->done[1]};
  for (int i = 0; i < 4; i++)
    if (evs[i]) cudaEventDestroy(evs[i]);
  if (g->stream) cudaStreamDestroy(g->stream);
  free(g);
  ctx->grads = NULL;
}

extern "C" void ct_gpu_grad_set_math(ct_context *ctx) {
  grad_stream *g = state(ctx);
  if (g && g->blas) ct_gpu_blas_set_math(g->blas, ctx->tf32);
}

extern "C" ct_context *ct_gpu_grad_begin(ct_context *ctx) {
  grad_stream *g = state(ctx);
  CT_CUDA_CHECK(cudaEventRecord(g->fork, compute(ctx)));
  CT_CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->fork, 0));
  ct_trace_gpu_side(ctx, CT_TRACE_GPU_ON_GRADIENTS, false, g->stream);
  g->pending = true;
  g->view = *ctx;
  g->view.grads = NULL; /* work enqueued with the view stays on the gradient stream */
  g->view.stream = g->stream;
  g->view.cublas = g->blas;
  g->view.blas_workspace = g->blas_workspace;
  g->view.cudnn = g->dnn;
  g->view.workspace = g->workspace;
  g->view.workspace_bytes = g->workspace_bytes;
  return &g->view;
}

extern "C" void ct_gpu_grad_step(ct_context *ctx) {
  grad_stream *g = state(ctx);
  if (!g->pending) return;
  ct_trace_gpu_side(ctx, CT_TRACE_GPU_ON_GRADIENTS, true, g->stream);
  CT_CUDA_CHECK(cudaEventRecord(g->done[g->ends & 1], g->stream));
  if (g->ends > 0) CT_CUDA_CHECK(cudaStreamWaitEvent(compute(ctx), g->done[(g->ends - 1) & 1], 0));
  g->ends++;
}

extern "C" void ct_gpu_grad_join(ct_context *ctx) {
  grad_stream *g = state(ctx);
  if (!g->pending) return;
  CT_CUDA_CHECK(cudaEventRecord(g->join, g->stream));
  CT_CUDA_CHECK(cudaStreamWaitEvent(compute(ctx), g->join, 0));
  g->pending = false;
  g->ends = 0;
}

extern "C" void ct_gpu_grad_workspace(ct_context *ctx, size_t bytes) {
  grad_stream *g = state(ctx);
  if (bytes <= g->workspace_bytes) return;
  CT_ASSERTF(!ct_context_capturing(ctx),
             "the gradient workspace grew to %zu bytes while a CUDA graph was being captured",
             bytes);
  CT_CUDA_CHECK(cudaStreamSynchronize(g->stream));
  if (g->workspace) ct_gpu_free(ctx->device, g->workspace);
  g->workspace = ct_gpu_malloc(ctx->device, bytes);
  g->workspace_bytes = bytes;
}

extern "C" void *ct_gpu_grad_pending_stream(ct_context *ctx) {
  grad_stream *g = state(ctx);
  return g->pending ? g->stream : NULL;
}
