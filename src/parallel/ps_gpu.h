/* A GPU worker's pushes to its parameter servers, overlapped with its
 * backward pass (ps_client.c): each shard's gradient is copied out of the
 * device into pinned host memory on a copy stream of its own, after the
 * compute stream's work so far and the gradient stream's (the layers that
 * finalise the shard), while the host goes on enqueueing the rest of the
 * backward pass; the message leaves once its copy is done.  Internal to
 * src/parallel. */
#ifndef CT_PARALLEL_PS_GPU_H
#define CT_PARALLEL_PS_GPU_H

#include <stddef.h>

#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_ps_gpu ct_ps_gpu;

/* Staging for n shards on ctx's GPU: shard k's buffer holds words[k]
 * floats of pinned host memory.  Errors: CT_ERR_DEVICE naming the CUDA
 * error; CT_ERR_UNSUPPORTED in a build without CUDA. */
ct_status ct_ps_gpu_new(ct_ps_gpu **out, ct_context *ctx, int n, const size_t *words, ct_error *err);
void ct_ps_gpu_free(ct_ps_gpu *g);
/* Shard k's pinned buffer. */
float *ct_ps_gpu_buffer(ct_ps_gpu *g, int k);
/* Enqueues the copy of count floats at src (device memory) into shard k's
 * buffer from float `at`, after the work enqueued so far on the compute
 * and gradient streams; returns at once.  Errors: CT_ERR_DEVICE. */
ct_status ct_ps_gpu_copy_out(ct_ps_gpu *g, int k, size_t at, const float *src, size_t count, ct_error *err);
/* Waits for shard k's last copy.  Errors: CT_ERR_DEVICE. */
ct_status ct_ps_gpu_wait(ct_ps_gpu *g, int k, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
