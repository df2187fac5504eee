/* The iteration clock and slots on a GPU (see slots.h). */
#include <cuda_runtime.h>
#include <string.h>

#include "core/mem.h"
#include "gpu/gpu.h"
#include "runtime/slots.h"

__global__ static void clock_advance(unsigned *count) { ++*count; }

/* One warp copies the words of one slot; `load` picks the direction. */
__global__ static void slot_copy(const unsigned *count, unsigned *slots, unsigned *dev,
                                 unsigned words, bool load) {
  unsigned *slot = slots + (size_t)(*count & 1u) * words;
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) {
    if (load) dev[i] = slot[i];
    else slot[i] = dev[i];
  }
}

__global__ static void store_loss(const unsigned *count, const double *loss, const unsigned *check,
                                  ct_loss_slot *slots) {
  ct_loss_slot *slot = slots + (*count & 1u);
  slot->loss = *loss;
  slot->check = *check;
}

extern "C" void ct_slots_gpu_store_loss(const ct_iter_clock *c, void *slots, const double *loss,
                                        const unsigned *check) {
  store_loss<<<1, 1, 0, (cudaStream_t)c->ctx->stream>>>(c->dev, loss, check, (ct_loss_slot *)slots);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_iter_clock_gpu_init(ct_iter_clock *c) {
  c->dev = (unsigned *)ct_gpu_malloc(c->ctx->device, sizeof(unsigned));
  for (int i = 0; i < 2; i++) {
    cudaEvent_t e;
    CT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    c->end[i] = e;
  }
}

extern "C" void ct_iter_clock_gpu_free(ct_iter_clock *c) {
  if (c->dev) {
    cudaStreamSynchronize((cudaStream_t)c->ctx->stream);
    ct_gpu_free(c->ctx->device, c->dev);
  }
  for (int i = 0; i < 2; i++)
    if (c->end[i]) cudaEventDestroy((cudaEvent_t)c->end[i]);
}

extern "C" void ct_iter_clock_gpu_advance(ct_iter_clock *c) {
  clock_advance<<<1, 1, 0, (cudaStream_t)c->ctx->stream>>>(c->dev);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_iter_clock_gpu_record_end(ct_iter_clock *c) {
  CT_CUDA_CHECK(cudaEventRecord((cudaEvent_t)c->end[c->launched & 1u], (cudaStream_t)c->ctx->stream));
}

extern "C" void ct_iter_clock_gpu_wait(void *event) {
  ct_gpu_note_host_wait();
  CT_CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event));
}

extern "C" void *ct_slots_gpu_new(size_t slot_bytes) {
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

extern "C" void ct_slots_gpu_free(void *slots) { CT_CUDA_CHECK(cudaFreeHost(slots)); }

extern "C" void ct_slots_gpu_copy(const ct_iter_clock *c, void *stream, void *slots, void *dev,
                                  size_t slot_bytes, int load) {
  cudaStream_t s = (cudaStream_t)(stream ? stream : c->ctx->stream);
  slot_copy<<<1, 32, 0, s>>>(c->dev, (unsigned *)slots, (unsigned *)dev,
                             (unsigned)(slot_bytes / 4), load != 0);
  CT_CUDA_LAUNCH_CHECK();
}
