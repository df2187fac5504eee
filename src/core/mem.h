/* Memory on a device: the host (CT_DEVICE_CPU) or a CUDA GPU (its ordinal).
 *
 * Host memory is 64-byte aligned (AVX-512 loads); GPU memory comes from
 * cudaMalloc.  Allocation failure is fatal (sizes come from validated
 * shapes).  In a CPU-only build, asking for GPU memory is a bug. */
#ifndef CT_CORE_MEM_H
#define CT_CORE_MEM_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CT_DEVICE_CPU (-1)

/* Returns zeroed memory of `bytes` on `device`; never NULL (bytes 0 gives a
 * valid, unique pointer). Free with ct_mem_free on the same device.  Host
 * memory that cannot be had ends the process through ct_fatal with the
 * size (status 1, not an abort). */
void *ct_mem_alloc(int device, size_t bytes);
/* The same, but host memory that cannot be had is NULL (for callers that
 * return CT_ERR_NOMEM; GPU memory behaves as ct_mem_alloc's). */
void *ct_mem_try_alloc(int device, size_t bytes);
/* "out of host memory allocating N bytes (... MB; Cortado holds ... MB of
 * tensors; ...)" into buf, for the messages of failed host allocations. */
void ct_mem_out_of_host_memory(size_t bytes, char *buf, size_t cap);
void ct_mem_free(int device, void *p);
/* Copies bytes between any two devices (host<->GPU, GPU<->GPU, host<->host).
 * Synchronous with respect to the host. */
void ct_mem_copy(int dst_device, void *dst, int src_device, const void *src, size_t bytes);
void ct_mem_zero(int device, void *p, size_t bytes);
/* Host memory (CT_DEVICE_CPU) held through ct_mem_alloc now and at its
 * peak since start or the last ct_mem_host_reset_peak, in bytes (the host
 * twin of ct_gpu_memory_stats; pinned memory is not counted). */
void ct_mem_host_stats(size_t *current, size_t *peak);
/* The peak starts again from what is held now. */
void ct_mem_host_reset_peak(void);
/* Pinned host memory for asynchronous copies (plain aligned memory in a
 * CPU-only build). */
void *ct_mem_alloc_pinned(size_t bytes);
void ct_mem_free_pinned(void *p);

#ifdef __cplusplus
}
#endif

#endif
