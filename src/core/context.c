#include "core/context.h"

#include <string.h>

#include "core/mem.h"
#include "gpu/gpu_context.h"

ct_status ct_context_init(ct_context *ctx, int device, uint64_t seed, ct_error *err) {
  memset(ctx, 0, sizeof *ctx);
  ctx->device = device;
  ctx->seed = seed;
  ctx->world = 1;
  ctx->tf32 = true;
  ct_rng_seed(&ctx->rng, seed);
  if (device == CT_DEVICE_CPU) return CT_OK;
  return ct_gpu_context_init(ctx, err);
}

void ct_context_free(ct_context *ctx) {
  if (ctx->device != CT_DEVICE_CPU) {
    ct_gpu_context_free(ctx);
  } else if (ctx->workspace) {
    ct_mem_free(CT_DEVICE_CPU, ctx->workspace);
  }
  ctx->workspace = NULL;
  ctx->workspace_bytes = 0;
}

void ct_context_set_tf32(ct_context *ctx, bool tf32) {
  ctx->tf32 = tf32;
  if (ctx->device != CT_DEVICE_CPU) ct_gpu_context_set_math(ctx);
}

void *ct_context_workspace(ct_context *ctx, size_t bytes) {
  if (bytes > ctx->workspace_bytes) {
    if (ctx->device != CT_DEVICE_CPU) ct_context_sync(ctx);
    ct_mem_free(ctx->device, ctx->workspace);
    ctx->workspace = ct_mem_alloc(ctx->device, bytes);
    ctx->workspace_bytes = bytes;
  }
  return ctx->workspace;
}

void ct_context_sync(ct_context *ctx) {
  if (ctx->device != CT_DEVICE_CPU) ct_gpu_context_sync(ctx);
}
