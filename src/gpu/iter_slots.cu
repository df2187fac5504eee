/* Iteration slots (see iter_slots.h). */
#include <cuda_runtime.h>
#include <string.h>

#include "core/mem.h"
#include "gpu/gpu.h"
#include "gpu/iter_slots.h"

#define SLOT_MAX_BYTES 256

__global__ static void seq_advance(unsigned *seq) { ++*seq; }

/* One warp copies the words of one slot; `load` picks the direction. */
__global__ static void slot_copy(const unsigned *seq, unsigned *slots, unsigned *dev, unsigned words,
                                 bool load) {
  unsigned *slot = slots + (size_t)(*seq & 1u) * words;
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) {
    if (load) dev[i] = slot[i];
    else slot[i] = dev[i];
  }
}

extern "C" void ct_gpu_seq_advance_async(ct_context *ctx) {
  seq_advance<<<1, 1, 0, (cudaStream_t)ctx->stream>>>(ctx->seq_dev);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_gpu_seq_record_end(ct_context *ctx) {
  CT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)ctx->seq_end[ctx->seq & 1u], (cudaStream_t)ctx->stream));
}

extern "C" void *ct_gpu_seq_end_event(const ct_context *ctx, unsigned seq) {
  CT_ASSERT(seq == ctx->seq || seq + 1 == ctx->seq);
  return ctx->seq_end[seq & 1u];
}

extern "C" void ct_gpu_seq_wait(const ct_context *ctx, unsigned seq) {
  ct_gpu_note_host_wait();
  CT_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)ct_gpu_seq_end_event(ctx, seq)));
}

extern "C" void *ct_gpu_slots_new(size_t slot_bytes) {
  CT_ASSERT(slot_bytes > 0 && slot_bytes % 4 == 0 && slot_bytes <= SLOT_MAX_BYTES);
  void *p = NULL;
  cudaError_t e = cudaHostAlloc(&p, 2 * slot_bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess)
    ct_abort(__FILE__, __LINE__, "cudaHostAlloc of %zu bytes failed: %s", 2 * slot_bytes,
             cudaGetErrorString(e));
  memset(p, 0, 2 * slot_bytes);
  /* Unified addressing: the device uses the host's address (checked here,
   * once, not while a graph is being captured). */
  void *d = NULL;
  CT_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
  CT_ASSERT(d == p);
  return p;
}

extern "C" void ct_gpu_slots_free(void *slots) {
  if (slots) CT_CUDA_CHECK(cudaFreeHost(slots));
}

static void slot_copy_async(ct_context *ctx, void *stream, unsigned *slots, void *dev,
                            size_t slot_bytes, bool load) {
  CT_ASSERT(slot_bytes > 0 && slot_bytes % 4 == 0 && slot_bytes <= SLOT_MAX_BYTES);
  cudaStream_t s = (cudaStream_t)(stream ? stream : ctx->stream);
  slot_copy<<<1, 32, 0, s>>>(ctx->seq_dev, slots, (unsigned *)dev, (unsigned)(slot_bytes / 4), load);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_gpu_slots_load_async(ct_context *ctx, void *stream, void *dst_dev,
                                        const void *slots, size_t slot_bytes) {
  slot_copy_async(ctx, stream, (unsigned *)slots, dst_dev, slot_bytes, true);
}

extern "C" void ct_gpu_slots_store_async(ct_context *ctx, void *stream, void *slots,
                                         const void *src_dev, size_t slot_bytes) {
  slot_copy_async(ctx, stream, (unsigned *)slots, (void *)src_dev, slot_bytes, false);
}
