/* GPU half of ct_context beyond core/device.h's interface: copies and
 * events between the context's streams, and the gradient stream's life
 * (src/gpu/gpu_context.cu, src/runtime/grad_stream.cu; src/gpu/gpu_none.c
 * refuses or does nothing in a CPU-only build). */
#ifndef CT_GPU_GPU_CONTEXT_H
#define CT_GPU_GPU_CONTEXT_H

#include "core/context.h"
#include "core/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* TF32 tensor-op math or the default on one cuBLAS handle; aborts when
 * cuBLAS refuses.  GPU builds only. */
void ct_gpu_blas_set_math(void *cublas, bool tf32);
/* Copies bytes between any two places (device, pinned host) on ctx's
 * stream without waiting; capturable when neither side is pageable. */
void ct_gpu_copy_async(ct_context *ctx, void *dst, const void *src, size_t bytes);
/* Events ordering the copy stream against the compute stream (cudaEvent_t,
 * timing off). */
void *ct_gpu_event_new(void);
void ct_gpu_event_free(void *event);
/* Records event on ctx's copy stream (copy) or compute stream. */
void ct_gpu_event_record(ct_context *ctx, void *event, bool copy);
/* Makes ctx's copy stream (copy) or compute stream wait for event. */
void ct_gpu_event_wait(ct_context *ctx, void *event, bool copy);
/* A stream of one's own (side, a cudaStream_t) waits for the work enqueued
 * so far on ctx's compute stream and, while parameter gradients are still
 * being computed on its gradient stream (ct_context_grad_pending_stream),
 * on that one too: what a consumer of the gradients beside the compute
 * stream (the data-parallel all-reduce, a parameter server's copies out)
 * orders itself after.  ev and ev_grads (cudaEvent_t, timing off) mark the
 * two points.  Capturable.  Returns the first CUDA error (a cudaError_t),
 * 0 for none. */
int ct_gpu_side_wait(ct_context *ctx, void *side, void *ev, void *ev_grads);
/* Waits on the host for event (counts as a host wait). */
void ct_gpu_event_sync(void *event);
/* Copies bytes (pinned host to device) on ctx's copy stream, without waiting. */
void ct_gpu_copy_upload_async(ct_context *ctx, void *dst, const void *src, size_t bytes);
/* The gradient stream (core/context.h; src/runtime/grad_stream.cu): made by
 * ct_gpu_context_init unless CORTADO_GRAD_STREAM=0, freed with the context;
 * set_math applies ctx->tf32 to its cuBLAS handle (core/device.h has the
 * rest, which need ctx->grads). */
ct_status ct_gpu_grad_create(ct_context *ctx, ct_error *err);
void ct_gpu_grad_free(ct_context *ctx);
void ct_gpu_grad_set_math(ct_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
