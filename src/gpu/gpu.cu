#include <cuda_runtime.h>
#include <execinfo.h>
#include <stdio.h>
#include <string.h>

#include <mutex>
#include <unordered_map>

#include "core/settings.h"
#include "gpu/gpu.h"

/* Host waits of this thread (see ct_gpu_host_waits). */
static thread_local unsigned long g_host_waits;

extern "C" unsigned long ct_gpu_host_waits(void) { return g_host_waits; }
extern "C" void ct_gpu_note_host_wait(void) { g_host_waits++; }

/* Bytes held per allocation and per device, for ct_gpu_memory_stats. */
#define CT_MAX_DEVICES 64
static std::mutex g_mem_lock;
static std::unordered_map<void *, std::pair<int, size_t>> *g_mem_sizes;
static size_t g_mem_current[CT_MAX_DEVICES], g_mem_peak[CT_MAX_DEVICES];

static void mem_note_alloc(int device, void *p, size_t bytes) {
  std::lock_guard<std::mutex> hold(g_mem_lock);
  if (!g_mem_sizes) g_mem_sizes = new std::unordered_map<void *, std::pair<int, size_t>>();
  (*g_mem_sizes)[p] = std::make_pair(device, bytes);
  if (device < 0 || device >= CT_MAX_DEVICES) return;
  g_mem_current[device] += bytes;
  if (g_mem_current[device] > g_mem_peak[device]) g_mem_peak[device] = g_mem_current[device];
}

static void mem_note_free(void *p) {
  std::lock_guard<std::mutex> hold(g_mem_lock);
  if (!g_mem_sizes) return;
  auto it = g_mem_sizes->find(p);
  if (it == g_mem_sizes->end()) return;
  int device = it->second.first;
  if (device >= 0 && device < CT_MAX_DEVICES) g_mem_current[device] -= it->second.second;
  g_mem_sizes->erase(it);
}

extern "C" void ct_gpu_memory_stats(int device, size_t *current, size_t *peak) {
  std::lock_guard<std::mutex> hold(g_mem_lock);
  bool ok = device >= 0 && device < CT_MAX_DEVICES;
  if (current) *current = ok ? g_mem_current[device] : 0;
  if (peak) *peak = ok ? g_mem_peak[device] : 0;
}

extern "C" void ct_gpu_memory_reset_peak(int device) {
  std::lock_guard<std::mutex> hold(g_mem_lock);
  if (device >= 0 && device < CT_MAX_DEVICES) g_mem_peak[device] = g_mem_current[device];
}

extern "C" void ct_gpu_device_mem(size_t *used, size_t *total) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    free_b = total_b = 0;
  }
  if (used) *used = total_b - free_b;
  if (total) *total = total_b;
}

extern "C" int ct_gpu_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no driver" error */
    return 0;
  }
  return n;
}

extern "C" ct_status ct_gpu_set_device(int device, ct_error *err) {
  int n = ct_gpu_device_count();
  if (device < 0 || device >= n)
    return ct_error_set(err, CT_ERR_INVALID, "GPU %d requested, but %d CUDA device%s visible", device,
                        n, n == 1 ? " is" : "s are");
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess)
    return ct_error_set(err, CT_ERR_DEVICE, "cudaSetDevice(%d): %s", device, cudaGetErrorString(e));
  return CT_OK;
}

/* CORTADO_GPU_ALLOC_TRACE: allocations of at least this many bytes are
 * logged with their call stack; 0: none. */
static size_t trace_threshold(void) {
  static std::once_flag once;
  static size_t bytes;
  std::call_once(once, [] {
    long mb;
    if (ct_setting_given_int("CORTADO_GPU_ALLOC_TRACE", &mb)) bytes = (size_t)(mb > 0 ? mb : 1) << 20;
  });
  return bytes;
}

static void trace_alloc(int device, size_t bytes) {
  const size_t at = trace_threshold();
  if (!at || bytes < at) return;
  size_t held = 0;
  {
    std::lock_guard<std::mutex> hold(g_mem_lock);
    if (device >= 0 && device < CT_MAX_DEVICES) held = g_mem_current[device];
  }
  fprintf(stderr, "GPU %d: allocated %.1f MB, %.1f MB held; from:\n", device, bytes / 1048576.0,
          held / 1048576.0);
  void *frames[16];
  const int n = backtrace(frames, 16);
  backtrace_symbols_fd(frames + 1, n - 1, 2);
}

extern "C" void *ct_gpu_malloc(int device, size_t bytes) {
  int cur;
  CT_CUDA_CHECK(cudaGetDevice(&cur));
  if (cur != device) CT_CUDA_CHECK(cudaSetDevice(device));
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
  if (e != cudaSuccess)
    ct_abort(__FILE__, __LINE__, "cudaMalloc of %zu bytes on GPU %d failed: %s", bytes, device,
             cudaGetErrorString(e));
  CT_CUDA_CHECK(cudaMemset(p, 0, bytes ? bytes : 256));
  CT_CUDA_CHECK(cudaDeviceSynchronize()); /* zeroed before any stream uses it */
  if (cur != device) CT_CUDA_CHECK(cudaSetDevice(cur));
  g_host_waits++;
  mem_note_alloc(device, p, bytes ? bytes : 256);
  trace_alloc(device, bytes);
  return p;
}

extern "C" void ct_gpu_free(int device, void *p) {
  if (!p) return;
  mem_note_free(p);
  g_host_waits++;
  CT_CUDA_CHECK(cudaFree(p));
}

/* The contexts' streams are non-blocking: they do not wait for the legacy
 * default stream that cudaMemcpy and cudaMemset use, nor it for them.  So
 * these synchronous helpers wait for the whole device before (the source is
 * final) and after (the destination is final, a pageable upload's DMA and a
 * memset included), as their contracts promise. */
extern "C" void ct_gpu_memcpy(int dst_device, void *dst, int src_device, const void *src,
                              size_t bytes) {
  g_host_waits++;
  CT_CUDA_CHECK(cudaDeviceSynchronize());
  if (dst_device >= 0 && src_device >= 0 && dst_device != src_device)
    CT_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes));
  else
    CT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  CT_CUDA_CHECK(cudaDeviceSynchronize());
}

extern "C" void ct_gpu_memset(int device, void *p, int value, size_t bytes) {
  g_host_waits++;
  CT_CUDA_CHECK(cudaDeviceSynchronize());
  CT_CUDA_CHECK(cudaMemset(p, value, bytes));
  CT_CUDA_CHECK(cudaDeviceSynchronize());
}

extern "C" void *ct_gpu_host_alloc(size_t bytes) {
  void *p = NULL;
  if (ct_gpu_device_count() > 0) {
    CT_CUDA_CHECK(cudaMallocHost(&p, bytes ? bytes : 64));
  } else {
    size_t n = (bytes + 63) & ~(size_t)63;
    p = aligned_alloc(64, n ? n : 64);
    if (!p) ct_abort(__FILE__, __LINE__, "out of host memory allocating %zu bytes", bytes);
  }
  memset(p, 0, bytes);
  return p;
}

extern "C" void ct_gpu_host_free(void *p) {
  if (!p) return;
  if (cudaFreeHost(p) != cudaSuccess) {
    cudaGetLastError();
    free(p);
  }
}

extern "C" void ct_gpu_synchronize(void) {
  g_host_waits++;
  CT_CUDA_CHECK(cudaDeviceSynchronize());
}
