#include <cuda_runtime.h>
#include <string.h>

#include "gpu/gpu.h"

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

/* Accounting of our own device allocations (what PyTorch's
 * max_memory_allocated counts): a table of live pointers and their sizes. */
#include <mutex>
#include <unordered_map>

namespace {
std::mutex g_acct_mu;
std::unordered_map<void *, size_t> g_live;
size_t g_current[64], g_peak[64];
}  // namespace

static void account_alloc(int device, void *p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_acct_mu);
  g_live[p] = bytes;
  if (device < 0 || device >= 64) return;
  g_current[device] += bytes;
  if (g_current[device] > g_peak[device]) g_peak[device] = g_current[device];
}

static void account_free(int device, void *p) {
  std::lock_guard<std::mutex> lock(g_acct_mu);
  auto it = g_live.find(p);
  if (it == g_live.end()) return;
  if (device >= 0 && device < 64) g_current[device] -= it->second;
  g_live.erase(it);
}

extern "C" void ct_gpu_memory_stats(int device, size_t *current, size_t *peak) {
  std::lock_guard<std::mutex> lock(g_acct_mu);
  *current = device >= 0 && device < 64 ? g_current[device] : 0;
  *peak = device >= 0 && device < 64 ? g_peak[device] : 0;
}

extern "C" void ct_gpu_memory_reset_peak(int device) {
  std::lock_guard<std::mutex> lock(g_acct_mu);
  if (device >= 0 && device < 64) g_peak[device] = g_current[device];
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
  account_alloc(device, p, bytes ? bytes : 256);
  return p;
}

extern "C" void ct_gpu_free(int device, void *p) {
  if (!p) return;
  account_free(device, p);
  CT_CUDA_CHECK(cudaFree(p));
}

/* The contexts' streams are non-blocking: they do not wait for the legacy
 * default stream that cudaMemcpy and cudaMemset use, nor it for them.  So
 * these synchronous helpers wait for the whole device before (the source is
 * final) and after (the destination is final, a pageable upload's DMA and a
 * memset included), as their contracts promise. */
extern "C" void ct_gpu_memcpy(int dst_device, void *dst, int src_device, const void *src,
                              size_t bytes) {
  CT_CUDA_CHECK(cudaDeviceSynchronize());
  if (dst_device >= 0 && src_device >= 0 && dst_device != src_device)
    CT_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes));
  else
    CT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  CT_CUDA_CHECK(cudaDeviceSynchronize());
}

extern "C" void ct_gpu_memset(int device, void *p, int value, size_t bytes) {
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

extern "C" void ct_gpu_synchronize(void) { CT_CUDA_CHECK(cudaDeviceSynchronize()); }
