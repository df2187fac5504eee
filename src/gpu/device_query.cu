#include <cuda_runtime.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu/device_query.h"
extern "C" {
#include "core/log.h"
}

/* Returns CT_ERR_DEVICE from the enclosing function when a CUDA call fails. */
#define DQ_CHECK(call)                                                                    \
  do {                                                                                    \
    cudaError_t dq_e_ = (call);                                                           \
    if (dq_e_ != cudaSuccess) {                                                           \
      cudaGetLastError();                                                                 \
      return ct_error_set(err, CT_ERR_DEVICE, "%s:%d: %s failed: %s", __FILE__, __LINE__, \
                          #call, cudaGetErrorString(dq_e_));                              \
    }                                                                                     \
  } while (0)

/* Why the runtime sees no device, from the error of cudaGetDeviceCount (or
 * cudaSuccess with a count of 0).  A machine without a driver reports
 * cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA
 * runtime version": the driver version (0 without one) tells the two apart. */
static ct_status no_device(cudaError_t e, ct_error *err) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  if (e == cudaSuccess || e == cudaErrorNoDevice) {
    if (visible)
      return ct_error_set(err, CT_ERR_NOTFOUND, "no CUDA device: CUDA_VISIBLE_DEVICES=%s hides every GPU",
                          visible);
    return ct_error_set(err, CT_ERR_NOTFOUND, "no CUDA device: the NVIDIA driver sees no GPU");
  }
  if (driver == 0)
    return ct_error_set(err, CT_ERR_NOTFOUND,
                        "no CUDA device: no NVIDIA driver is installed on this machine");
  if (e == cudaErrorInsufficientDriver)
    return ct_error_set(err, CT_ERR_NOTFOUND,
                        "no usable CUDA device: the NVIDIA driver supports CUDA %d.%d, older than "
                        "this build's CUDA runtime %d.%d (update the driver)",
                        driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
  return ct_error_set(err, CT_ERR_NOTFOUND, "no usable CUDA device: %s", cudaGetErrorString(e));
}

extern "C" ct_status ct_gpu_check_device(int device, ct_error *err) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) return no_device(e, err);
  if (device < 0 || device >= count)
    return ct_error_set(err, CT_ERR_INVALID, "no CUDA device %d (%d visible: 0 to %d)", device,
                        count, count - 1);
  return CT_OK;
}

/* One "Label: value" line, padded so that the values line up. */
static void emit(FILE *out, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void emit(FILE *out, const char *label, const char *fmt, ...) {
  char value[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(value, sizeof value, fmt, ap);
  va_end(ap);
  char label_colon[64];
  snprintf(label_colon, sizeof label_colon, "%s:", label);
  if (out)
    fprintf(out, "%-36s %s\n", label_colon, value);
  else
    ct_log_write(CT_LOG_INFO, __FILE__, __LINE__, "%-36s %s", label_colon, value);
}

static const char *yes_no(int v) { return v ? "Yes" : "No"; }

static const char *compute_mode_name(int mode) {
  switch (mode) {
    case cudaComputeModeDefault: return "Default (shared)";
    case cudaComputeModeProhibited: return "Prohibited";
    case cudaComputeModeExclusiveProcess: return "Exclusive process";
    default: return "Unknown";
  }
}

extern "C" ct_status ct_gpu_print_device_info(int device, FILE *out, ct_error *err) {
  CT_TRY(ct_gpu_check_device(device, err));
  cudaDeviceProp p;
  DQ_CHECK(cudaGetDeviceProperties(&p, device));
  /* Fields CUDA 13 took out of cudaDeviceProp are read as attributes. */
  int clock_khz = 0, mem_clock_khz = 0, timeout = 0, overlap = 0, compute_mode = 0;
  DQ_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  DQ_CHECK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device));
  DQ_CHECK(cudaDeviceGetAttribute(&timeout, cudaDevAttrKernelExecTimeout, device));
  DQ_CHECK(cudaDeviceGetAttribute(&overlap, cudaDevAttrGpuOverlap, device));
  DQ_CHECK(cudaDeviceGetAttribute(&compute_mode, cudaDevAttrComputeMode, device));
  const double mib = 1024.0 * 1024.0;

  emit(out, "Device id", "%d", device);
  emit(out, "Name", "%s", p.name);
  emit(out, "Compute capability", "%d.%d", p.major, p.minor);
  emit(out, "Total global memory", "%zu bytes (%.0f MiB)", p.totalGlobalMem,
       p.totalGlobalMem / mib);
  emit(out, "Total constant memory", "%zu bytes", p.totalConstMem);
  emit(out, "Shared memory per block", "%zu bytes", p.sharedMemPerBlock);
  emit(out, "Shared memory per block (opt-in)", "%zu bytes", p.sharedMemPerBlockOptin);
  emit(out, "Shared memory per multiprocessor", "%zu bytes", p.sharedMemPerMultiprocessor);
  emit(out, "Registers per block", "%d", p.regsPerBlock);
  emit(out, "Registers per multiprocessor", "%d", p.regsPerMultiprocessor);
  emit(out, "Warp size", "%d", p.warpSize);
  emit(out, "Maximum memory pitch", "%zu bytes", p.memPitch);
  emit(out, "Maximum threads per block", "%d", p.maxThreadsPerBlock);
  emit(out, "Maximum threads per multiprocessor", "%d", p.maxThreadsPerMultiProcessor);
  emit(out, "Maximum block dimensions", "%d, %d, %d", p.maxThreadsDim[0], p.maxThreadsDim[1],
       p.maxThreadsDim[2]);
  emit(out, "Maximum grid dimensions", "%d, %d, %d", p.maxGridSize[0], p.maxGridSize[1],
       p.maxGridSize[2]);
  emit(out, "Clock rate", "%d kHz", clock_khz);
  emit(out, "Memory clock rate", "%d kHz", mem_clock_khz);
  emit(out, "Memory bus width", "%d bits", p.memoryBusWidth);
  emit(out, "L2 cache size", "%d bytes", p.l2CacheSize);
  emit(out, "Texture alignment", "%zu bytes", p.textureAlignment);
  emit(out, "Concurrent copy and execution", "%s", yes_no(overlap));
  emit(out, "Asynchronous copy engines", "%d", p.asyncEngineCount);
  emit(out, "Concurrent kernels", "%s", yes_no(p.concurrentKernels));
  emit(out, "Number of multiprocessors", "%d", p.multiProcessorCount);
  emit(out, "Kernel execution timeout", "%s", yes_no(timeout));
  emit(out, "Integrated", "%s", yes_no(p.integrated));
  emit(out, "Unified addressing", "%s", yes_no(p.unifiedAddressing));
  emit(out, "Managed memory", "%s", yes_no(p.managedMemory));
  emit(out, "ECC enabled", "%s", yes_no(p.ECCEnabled));
  emit(out, "PCI domain:bus:device", "%04x:%02x:%02x", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  emit(out, "Compute mode", "%s", compute_mode_name(compute_mode));
  return CT_OK;
}
