/* What the core asks of a GPU: the small device interface that ct_context
 * (context.c) and the memory helpers (mem.c) are written against.  It is
 * implemented by src/gpu (gpu.cu, gpu_context.cu) and the runtime's
 * gradient stream (src/runtime/grad_stream.cu); in a build without CUDA by
 * their *_none.c files, which report no device and treat a GPU request as a
 * bug.  The core calls these only for contexts and memory on a GPU. */
#ifndef CT_CORE_DEVICE_H
#define CT_CORE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- memory */
/* Device memory (zeroed); fatal on exhaustion. */
void *ct_gpu_malloc(int device, size_t bytes);
void ct_gpu_free(int device, void *p);
/* Copies between any two places (CT_DEVICE_CPU for host memory); waits. */
void ct_gpu_memcpy(int dst_device, void *dst, int src_device, const void *src, size_t bytes);
void ct_gpu_memset(int device, void *p, int value, size_t bytes);
/* Pinned host memory; plain aligned host memory without CUDA. */
void *ct_gpu_host_alloc(size_t bytes);
void ct_gpu_host_free(void *p);

/* ---------------------------------------------------------------- contexts */
/* The GPU half of ct_context_init: streams, library handles, the device
 * words of deferred checks and counter-based draws, the gradient stream.
 * Errors name the device. */
ct_status ct_gpu_context_init(ct_context *ctx, ct_error *err);
void ct_gpu_context_free(ct_context *ctx);
/* Waits for ctx's stream (counts as a host wait). */
void ct_gpu_context_sync(ct_context *ctx);
/* Whether ctx's stream has finished its work (does not wait). */
bool ct_gpu_context_idle(ct_context *ctx);
/* Applies ctx->tf32 to the context's cuBLAS handles. */
void ct_gpu_context_set_math(ct_context *ctx);
/* Reads ctx->check_word (waits for the stream). */
unsigned ct_gpu_context_read_check(ct_context *ctx);
/* Zeroes ctx->check_word on the stream. */
void ct_gpu_context_clear_check(ct_context *ctx);
/* See ct_context_next_draw_gpu, ct_context_draws, ct_context_set_draws. */
void ct_gpu_context_next_draw(ct_context *ctx, uint64_t *seed_dev);
uint64_t ct_gpu_context_get_draws(ct_context *ctx);
void ct_gpu_context_set_draws(ct_context *ctx, uint64_t n);

/* ---------------------------------------------------------------- gradient stream
 * (core/context.h's ct_context_grad_*; only called when ctx->grads is set) */
ct_context *ct_gpu_grad_begin(ct_context *ctx);
void ct_gpu_grad_step(ct_context *ctx);
void ct_gpu_grad_join(ct_context *ctx);
void ct_gpu_grad_workspace(ct_context *ctx, size_t bytes);
void *ct_gpu_grad_pending_stream(ct_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
