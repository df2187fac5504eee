/* Iteration slots: the few pinned host values that one training iteration's
 * device work reads (its learning rate, a stop wish) or writes (its loss,
 * clip norm and agreed requests), kept twice so that the host can launch
 * iteration n + 1 while iteration n still runs and read n's values after it
 * (solvers/solver_gpu.c).  src/gpu/iter_slots.cu; gpu_none.c in CPU-only
 * builds, where nothing here may be called.
 *
 * ctx->seq numbers the iterations the host launched (1, 2, ...).  The device
 * keeps its own count (ctx->seq_dev), advanced by ct_gpu_seq_advance_async
 * at the start of each iteration: a node of the iteration's CUDA graph.
 * Device work reads and writes the slot of the device's count, the host the
 * slot of the iteration it fills or reads, (seq & 1).  Work outside the
 * iterations (a test net's pass, a plain forward) uses the slot of the last
 * launched iteration, which is finished by then; the counts agree whenever
 * the stream is idle. */
#ifndef CT_GPU_ITER_SLOTS_H
#define CT_GPU_ITER_SLOTS_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues ++*ctx->seq_dev on the compute stream (capturable).  The solver's
 * program runs it first, once per iteration; the host adds 1 to ctx->seq
 * itself when it launches the program. */
void ct_gpu_seq_advance_async(ct_context *ctx);
/* Records on the compute stream the end of iteration ctx->seq: after all the
 * work the host has enqueued so far.  Called right after the launch. */
void ct_gpu_seq_record_end(ct_context *ctx);
/* The event of iteration seq's end (a cudaEvent_t): valid for the last two
 * launched iterations. */
void *ct_gpu_seq_end_event(const ct_context *ctx, unsigned seq);
/* Waits on the host for iteration seq's end (one of the last two launched). */
void ct_gpu_seq_wait(const ct_context *ctx, unsigned seq);

/* Two slots of slot_bytes (a multiple of 4, at most 256) in pinned host
 * memory that the device reads and writes in place, zeroed.  Fatal on
 * exhaustion. */
void *ct_gpu_slots_new(size_t slot_bytes);
void ct_gpu_slots_free(void *slots);
/* The host's view of the slot of iteration seq. */
static inline void *ct_gpu_slot(void *slots, size_t slot_bytes, unsigned seq) {
  return (char *)slots + (size_t)(seq & 1u) * slot_bytes;
}
/* On stream (NULL: ctx's compute stream), capturable: copies the slot of the
 * device's iteration into dst_dev (load) or src_dev into that slot (store). */
void ct_gpu_slots_load_async(ct_context *ctx, void *stream, void *dst_dev, const void *slots,
                             size_t slot_bytes);
void ct_gpu_slots_store_async(ct_context *ctx, void *stream, void *slots, const void *src_dev,
                              size_t slot_bytes);

#ifdef __cplusplus
}
#endif

#endif
