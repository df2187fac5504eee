/* GPU half of ct_context: streams, library handles and the device words of
 * deferred checks and counter-based draws (src/gpu/gpu_context.cu;
 * src/gpu/gpu_none.c refuses or does nothing in a CPU-only build). */
#ifndef CT_GPU_GPU_CONTEXT_H
#define CT_GPU_GPU_CONTEXT_H

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

ct_status ct_gpu_context_init(ct_context *ctx, ct_error *err);
void ct_gpu_context_free(ct_context *ctx);
void ct_gpu_context_sync(ct_context *ctx);
/* Applies ctx->tf32 to the cuBLAS handles (the context's and its gradient
 * stream's). */
void ct_gpu_context_set_math(ct_context *ctx);
/* TF32 tensor-op math or the default on one cuBLAS handle; aborts when
 * cuBLAS refuses.  GPU builds only. */
void ct_gpu_blas_set_math(void *cublas, bool tf32);
/* Reads ctx->check_word (waits for the stream). */
unsigned ct_gpu_context_read_check(ct_context *ctx);
/* Zeroes ctx->check_word on the stream. */
void ct_gpu_context_clear_check(ct_context *ctx);
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
/* Waits on the host for event (counts as a host wait). */
void ct_gpu_event_sync(void *event);
/* Copies bytes (pinned host to device) on ctx's copy stream, without waiting. */
void ct_gpu_copy_upload_async(ct_context *ctx, void *dst, const void *src, size_t bytes);
/* The gradient stream (core/context.h; src/gpu/grad_stream.cu): made by
 * ct_gpu_context_init unless CORTADO_GRAD_STREAM=0, freed with the context;
 * set_math applies ctx->tf32 to its cuBLAS handle.  The rest need ctx->grads. */
ct_status ct_gpu_grad_create(ct_context *ctx, ct_error *err);
void ct_gpu_grad_free(ct_context *ctx);
void ct_gpu_grad_set_math(ct_context *ctx);
ct_context *ct_gpu_grad_begin(ct_context *ctx);
void ct_gpu_grad_step(ct_context *ctx);
void ct_gpu_grad_join(ct_context *ctx);
void ct_gpu_grad_workspace(ct_context *ctx, size_t bytes);
void *ct_gpu_grad_pending_stream(ct_context *ctx);
/* See ct_context_next_draw_gpu. */
void ct_gpu_context_next_draw(ct_context *ctx, uint64_t *seed_dev);
uint64_t ct_gpu_context_get_draws(ct_context *ctx);
void ct_gpu_context_set_draws(ct_context *ctx, uint64_t n);

#ifdef __cplusplus
}
#endif

#endif
