/* A GPU worker's overlapped pushes (ps_gpu.h). */
#include "parallel/ps_gpu.h"

#include <cuda_runtime.h>
#include <stdlib.h>

#include "core/mem.h"
#include "gpu/gpu.h"
#include "gpu/gpu_context.h"

struct ct_ps_gpu {
  ct_context *ctx;
  int n;
  cudaStream_t copy;     /* the copies out, beside the compute stream */
  cudaEvent_t *ready;    /* (n) the compute stream's point a copy waits for */
  cudaEvent_t *ready_grads; /* (n) the same on the gradient stream */
  cudaEvent_t *done;     /* (n) a shard's copy ended */
  float **buf;           /* (n) pinned */
};

/* A failed CUDA call of the copies out returns CT_ERR_DEVICE (gpu/gpu.h). */
#define PSG_TRY(call) CT_CUDA_TRY(g->ctx->device, "parameter-server copies", call)

extern "C" ct_status ct_ps_gpu_new(ct_ps_gpu **out, ct_context *ctx, int n, const size_t *words,
                                   ct_error *err) {
  *out = NULL;
  ct_ps_gpu *g = (ct_ps_gpu *)ct_xcalloc(1, sizeof *g);
  g->ctx = ctx;
  g->n = n;
  g->ready = (cudaEvent_t *)ct_xcalloc((size_t)n, sizeof(cudaEvent_t));
  g->ready_grads = (cudaEvent_t *)ct_xcalloc((size_t)n, sizeof(cudaEvent_t));
  g->done = (cudaEvent_t *)ct_xcalloc((size_t)n, sizeof(cudaEvent_t));
  g->buf = (float **)ct_xcalloc((size_t)n, sizeof(float *));
  ct_status st = CT_OK;
  cudaError_t e = cudaStreamCreateWithFlags(&g->copy, cudaStreamNonBlocking);
  for (int k = 0; k < n && e == cudaSuccess; k++) {
    e = cudaEventCreateWithFlags(&g->ready[k], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&g->ready_grads[k], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&g->done[k], cudaEventDisableTiming);
    if (e == cudaSuccess) g->buf[k] = (float *)ct_mem_alloc_pinned(words[k] * sizeof(float));
  }
  if (e != cudaSuccess) {
    st = ct_error_set(err, CT_ERR_DEVICE, "GPU %d: the pushes' copy stream: %s", ctx->device,
                      cudaGetErrorString(e));
    ct_ps_gpu_free(g);
    return st;
  }
  *out = g;
  return CT_OK;
}

extern "C" void ct_ps_gpu_free(ct_ps_gpu *g) {
  if (!g) return;
  if (g->copy) cudaStreamSynchronize(g->copy);
  for (int k = 0; k < g->n; k++) {
    if (g->ready[k]) cudaEventDestroy(g->ready[k]);
    if (g->ready_grads[k]) cudaEventDestroy(g->ready_grads[k]);
    if (g->done[k]) cudaEventDestroy(g->done[k]);
    ct_mem_free_pinned(g->buf[k]);
  }
  if (g->copy) cudaStreamDestroy(g->copy);
  free(g->ready);
  free(g->ready_grads);
  free(g->done);
  free(g->buf);
  free(g);
}

extern "C" float *ct_ps_gpu_buffer(ct_ps_gpu *g, int k) { return g->buf[k]; }

extern "C" ct_status ct_ps_gpu_copy_out(ct_ps_gpu *g, int k, size_t at, const float *src, size_t count,
                                        ct_error *err) {
  CT_ASSERT(k >= 0 && k < g->n);
  PSG_TRY(ct_gpu_side_wait(g->ctx, g->copy, g->ready[k], g->ready_grads[k]));
  PSG_TRY(cudaMemcpyAsync(g->buf[k] + at, src, count * sizeof(float), cudaMemcpyDeviceToHost, g->copy));
  PSG_TRY(cudaEventRecord(g->done[k], g->copy));
  return CT_OK;
}

extern "C" ct_status ct_ps_gpu_wait(ct_ps_gpu *g, int k, ct_error *err) {
  CT_ASSERT(k >= 0 && k < g->n);
  ct_gpu_note_host_wait();
  PSG_TRY(cudaEventSynchronize(g->done[k]));
  return CT_OK;
}
