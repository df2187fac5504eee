/* The CUDA runtime as the rest of Cortado sees it: device discovery, memory,
 * and the checked-call macros for .cu files.  Everything declared here links
 * in a CPU-only build too; there the device functions report zero devices and
 * GPU memory requests are bugs (they abort). */
#ifndef CT_GPU_GPU_H
#define CT_GPU_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "core/device.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices visible to this process; 0 when there is no driver,
 * no device, or the build has no CUDA. */
int ct_gpu_device_count(void);

/* Makes `device` current for the calling thread. */
ct_status ct_gpu_set_device(int device, ct_error *err);

/* Device memory: core/device.h (ct_gpu_malloc, ct_gpu_free, ct_gpu_memcpy,
 * ct_gpu_memset, ct_gpu_host_alloc, ct_gpu_host_free). */
/* Waits for all work on the current device. */
void ct_gpu_synchronize(void);

/* Host waits made by the calling thread so far: every synchronous copy,
 * memset, allocation or free, stream or device wait, and reduction read back
 * to the host counts one.  The runtime (src/runtime/program.c) compares
 * the count around a step to learn that the step cannot be replayed.  .cu files that wait on their own call ct_gpu_note_host_wait. */
unsigned long ct_gpu_host_waits(void);
void ct_gpu_note_host_wait(void);

/* Device memory taken through ct_gpu_malloc on device, in bytes: what is
 * held now and the most held at once since the process started or since
 * the last ct_gpu_memory_reset_peak (which sets the peak to what is held
 * now).  What PyTorch's max_memory_allocated counts; memory cuBLAS or cuDNN
 * allocate themselves is not included.  Zeros without CUDA. */
void ct_gpu_memory_stats(int device, size_t *current, size_t *peak);
void ct_gpu_memory_reset_peak(int device);
/* The device's own view (all processes and libraries): bytes in use and in
 * total on the current device; zeros without CUDA. */
void ct_gpu_device_mem(size_t *used, size_t *total);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>
/* Checked CUDA call in .cu files: a failure here is a device fault, fatal
 * through ct_abort (whose hook stops the other workers). */
#define CT_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t ct_e_ = (call);                                                    \
    if (ct_e_ != cudaSuccess)                                                      \
      ct_abort(__FILE__, __LINE__, "CUDA error %s: %s (in %s)", cudaGetErrorName(ct_e_), \
               cudaGetErrorString(ct_e_), #call);                                  \
  } while (0)
#define CT_CUDA_LAUNCH_CHECK() CT_CUDA_CHECK(cudaGetLastError())
/* Checked CUDA call in a .cu function that returns ct_status with `ct_error
 * *err` in scope, where a failure is the caller's to report (a reducer's or
 * a parameter server's setup and launches): returns CT_ERR_DEVICE, "WHO on
 * GPU D: cudaErrorName: what it says (the call)". */
#define CT_CUDA_TRY(device, who, call)                                                       \
  do {                                                                                       \
    cudaError_t ct_e_ = (cudaError_t)(call);                                                 \
    if (ct_e_ != cudaSuccess)                                                                \
      return ct_error_set(err, CT_ERR_DEVICE, "%s on GPU %d: %s: %s (%s)", (who), (device),  \
                          cudaGetErrorName(ct_e_), cudaGetErrorString(ct_e_), #call);        \
  } while (0)
#define CT_CUDA_THREADS 256
static inline unsigned ct_cuda_blocks(size_t n) {
  size_t b = (n + CT_CUDA_THREADS - 1) / CT_CUDA_THREADS;
  if (b > 65535u * 32u) b = 65535u * 32u;
  return (unsigned)(b ? b : 1);
}
#define CT_CUDA_KERNEL_LOOP(i, n)                                                     \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);     \
       i += (size_t)blockDim.x * gridDim.x)
/* Milliseconds per call of call(), which enqueues work on stream: one
 * warm-up call, then the mean of `repeat` calls between two events.
 * Synchronises the stream (benchmarks at setup, not the training path). */
template <typename Call>
static inline float ct_gpu_time_calls(cudaStream_t stream, int repeat, Call call) {
  cudaEvent_t e0, e1;
  CT_CUDA_CHECK(cudaEventCreate(&e0));
  CT_CUDA_CHECK(cudaEventCreate(&e1));
  call();
  CT_CUDA_CHECK(cudaEventRecord(e0, stream));
  for (int i = 0; i < repeat; i++) call();
  CT_CUDA_CHECK(cudaEventRecord(e1, stream));
  CT_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0.0f;
  CT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms / (float)repeat;
}
#endif

#endif
