/* GPU half of ct_context: stream and library handles (src/gpu/gpu_context.cu;
 * src/gpu/gpu_none.c refuses in a CPU-only build). */
#ifndef CT_GPU_GPU_CONTEXT_H
#define CT_GPU_GPU_CONTEXT_H

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

ct_status ct_gpu_context_init(ct_context *ctx, ct_error *err);
void ct_gpu_context_free(ct_context *ctx);
void ct_gpu_context_sync(ct_context *ctx);
/* Applies ctx->tf32 to the cuBLAS handle (cuDNN layers read ctx->tf32). */
void ct_gpu_context_set_math(ct_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
