/* CPU-only builds: no device, and asking for device memory is a bug. */
#ifndef CORTADO_HAVE_CUDA
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"

int ct_gpu_device_count(void) { return 0; }

ct_status ct_gpu_set_device(int device, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU %d requested, but this build has no CUDA", device);
}

void *ct_gpu_malloc(int device, size_t bytes) {
  ct_abort(__FILE__, __LINE__, "GPU memory requested on device %d in a CPU-only build", device);
}
void ct_gpu_free(int device, void *p) {
  ct_abort(__FILE__, __LINE__, "GPU free on device %d in a CPU-only build", device);
}
void ct_gpu_memcpy(int dst_device, void *dst, int src_device, const void *src, size_t bytes) {
  ct_abort(__FILE__, __LINE__, "GPU copy in a CPU-only build");
}
void ct_gpu_memset(int device, void *p, int value, size_t bytes) {
  ct_abort(__FILE__, __LINE__, "GPU memset in a CPU-only build");
}
void *ct_gpu_host_alloc(size_t bytes) {
  size_t n = (bytes + 63) & ~(size_t)63;
  void *p = aligned_alloc(64, n ? n : 64);
  if (!p) ct_abort(__FILE__, __LINE__, "out of host memory allocating %zu bytes", bytes);
  memset(p, 0, n ? n : 64);
  return p;
}
void ct_gpu_host_free(void *p) { free(p); }
void ct_gpu_synchronize(void) {}
unsigned long ct_gpu_host_waits(void) { return 0; }
void ct_gpu_note_host_wait(void) {}
void ct_gpu_memory_stats(int device, size_t *current, size_t *peak) {
  if (current) *current = 0;
  if (peak) *peak = 0;
}
void ct_gpu_memory_reset_peak(int device) {}
void ct_gpu_device_mem(size_t *used, size_t *total) {
  if (used) *used = 0;
  if (total) *total = 0;
}
#endif

#ifndef CORTADO_HAVE_CUDA
#include "gpu/gpu_context.h"

ct_status ct_gpu_context_init(ct_context *ctx, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU %d requested, but this build has no CUDA",
                      ctx->device);
}
void ct_gpu_context_free(ct_context *ctx) {}
void ct_gpu_context_sync(ct_context *ctx) {}
bool ct_gpu_context_idle(ct_context *ctx) { return true; }
void ct_gpu_context_set_math(ct_context *ctx) {}
unsigned ct_gpu_context_read_check(ct_context *ctx) { return 0; }
void ct_gpu_context_clear_check(ct_context *ctx) {}
void ct_gpu_context_next_draw(ct_context *ctx, uint64_t *seed_dev) {
  ct_abort(__FILE__, __LINE__, "GPU draw in a CPU-only build");
}
uint64_t ct_gpu_context_get_draws(ct_context *ctx) { return 0; }
void ct_gpu_copy_async(ct_context *ctx, void *dst, const void *src, size_t bytes) {
  ct_abort(__FILE__, __LINE__, "GPU copy in a CPU-only build");
}
void *ct_gpu_event_new(void) {
  ct_abort(__FILE__, __LINE__, "GPU event in a CPU-only build");
}
void ct_gpu_event_free(void *event) {}
void ct_gpu_event_record(ct_context *ctx, void *event, bool copy) {
  ct_abort(__FILE__, __LINE__, "GPU event in a CPU-only build");
}
void ct_gpu_event_wait(ct_context *ctx, void *event, bool copy) {
  ct_abort(__FILE__, __LINE__, "GPU event in a CPU-only build");
}
void ct_gpu_event_sync(void *event) {}
void ct_gpu_copy_upload_async(ct_context *ctx, void *dst, const void *src, size_t bytes) {
  ct_abort(__FILE__, __LINE__, "GPU copy in a CPU-only build");
}
void ct_gpu_context_set_draws(ct_context *ctx, uint64_t n) {}
#endif
