/* CPU-only builds: no gradient stream (ctx->grads is never set, so
 * core/context.c's wrappers never reach these but the link needs them). */
#ifndef CORTADO_HAVE_CUDA
#include "gpu/gpu_context.h"

ct_context *ct_gpu_grad_begin(ct_context *ctx) { return ctx; }
void ct_gpu_grad_step(ct_context *ctx) {}
void ct_gpu_grad_join(ct_context *ctx) {}
void ct_gpu_grad_workspace(ct_context *ctx, size_t bytes) {}
void *ct_gpu_grad_pending_stream(ct_context *ctx) { return NULL; }
#endif
