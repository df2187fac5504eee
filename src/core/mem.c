#include "core/mem.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "gpu/gpu.h"

static void *host_alloc(size_t bytes) {
  size_t n = (bytes + 63) & ~(size_t)63;
  if (n == 0) n = 64;
  void *p = aligned_alloc(64, n);
  if (!p) ct_abort(__FILE__, __LINE__, "out of host memory allocating %zu bytes", bytes);
  memset(p, 0, n);
  return p;
}

void *ct_mem_alloc(int device, size_t bytes) {
  if (device == CT_DEVICE_CPU) return host_alloc(bytes);
  return ct_gpu_malloc(device, bytes);
}

void ct_mem_free(int device, void *p) {
  if (!p) return;
  if (device == CT_DEVICE_CPU) free(p);
  else ct_gpu_free(device, p);
}

void ct_mem_copy(int dst_device, void *dst, int src_device, const void *src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (dst_device == CT_DEVICE_CPU && src_device == CT_DEVICE_CPU) memmove(dst, src, bytes);
  else ct_gpu_memcpy(dst_device, dst, src_device, src, bytes);
}

void ct_mem_zero(int device, void *p, size_t bytes) {
  if (bytes == 0) return;
  if (device == CT_DEVICE_CPU) memset(p, 0, bytes);
  else ct_gpu_memset(device, p, 0, bytes);
}

void *ct_mem_alloc_pinned(size_t bytes) { return ct_gpu_host_alloc(bytes); }
void ct_mem_free_pinned(void *p) { ct_gpu_host_free(p); }
