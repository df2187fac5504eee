#include "core/mem.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "core/device.h"

/* Bytes of host memory held through ct_mem_alloc, and their peak (the
 * allocator's usable sizes, so that a free can subtract what its alloc added). */
static size_t g_host_current, g_host_peak;

static void host_count(size_t add, size_t sub) {
  size_t cur = __atomic_add_fetch(&g_host_current, add, __ATOMIC_RELAXED);
  if (sub) cur = __atomic_sub_fetch(&g_host_current, sub, __ATOMIC_RELAXED);
  size_t peak = __atomic_load_n(&g_host_peak, __ATOMIC_RELAXED);
  while (cur > peak &&
         !__atomic_compare_exchange_n(&g_host_peak, &peak, cur, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

/* NULL when the allocator has no memory. */
static void *host_try_alloc(size_t bytes) {
  size_t n = (bytes + 63) & ~(size_t)63;
  if (n == 0) n = 64;
  if (n < bytes) return NULL;
  void *p = aligned_alloc(64, n);
  if (!p) return NULL;
  memset(p, 0, n);
  host_count(malloc_usable_size(p), 0);
  return p;
}

void ct_mem_out_of_host_memory(size_t bytes, char *buf, size_t cap) {
  size_t held = __atomic_load_n(&g_host_current, __ATOMIC_RELAXED);
  snprintf(buf, cap,
           "out of host memory allocating %zu bytes (%.1f MB; Cortado holds %.1f MB of tensors; a "
           "memory limit such as ulimit -v?)",
           bytes, (double)bytes / 1048576.0, (double)held / 1048576.0);
}

static void *host_alloc(size_t bytes) {
  void *p = host_try_alloc(bytes);
  if (!p) {
    char msg[256];
    ct_mem_out_of_host_memory(bytes, msg, sizeof msg);
    ct_fatal(__FILE__, __LINE__, "%s", msg);
  }
  return p;
}

void *ct_mem_try_alloc(int device, size_t bytes) {
  if (device == CT_DEVICE_CPU) return host_try_alloc(bytes);
  return ct_gpu_malloc(device, bytes);
}

void ct_mem_host_stats(size_t *current, size_t *peak) {
  if (current) *current = __atomic_load_n(&g_host_current, __ATOMIC_RELAXED);
  if (peak) *peak = __atomic_load_n(&g_host_peak, __ATOMIC_RELAXED);
}

void ct_mem_host_reset_peak(void) {
  __atomic_store_n(&g_host_peak, __atomic_load_n(&g_host_current, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

void *ct_mem_alloc(int device, size_t bytes) {
  if (device == CT_DEVICE_CPU) return host_alloc(bytes);
  return ct_gpu_malloc(device, bytes);
}

void ct_mem_free(int device, void *p) {
  if (!p) return;
  if (device == CT_DEVICE_CPU) {
    host_count(0, malloc_usable_size(p));
    free(p);
  } else {
    ct_gpu_free(device, p);
  }
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
