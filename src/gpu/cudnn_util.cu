/* cuDNN helpers (cudnn_util.h): workspace limit and tensor descriptors.
 * The engine choice is in cudnn_engine.c (built without CUDA too); the
 * table of benchmarked convolution algorithms in layers/conv/conv_algos.cu. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/settings.h"
#include "gpu/cudnn_util.h"
extern "C" {
#include "core/log.h"
}

/* VGG-16's conv1_2 (64 channels at 224 x 224, batch 64) in TF32 needs 1.53
 * GiB for the filter gradient's ALGO_1; within 1 GiB it got ALGO_0, 17.6 ms
 * of backward against 4.4 (an H200, 2026-11-29). */
#define CT_CUDNN_DEFAULT_WORKSPACE ((size_t)2 << 30)

/* ---------------------------------------------------------------- workspace limit */

static pthread_mutex_t g_limit_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_limit_set;
static size_t g_limit;

static size_t limit_from_env(int device) {
  long mb;
  if (ct_setting_given_int("CORTADO_CUDNN_WORKSPACE_MB", &mb)) return (size_t)mb << 20;
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    cudaGetLastError();
    return CT_CUDNN_DEFAULT_WORKSPACE;
  }
  size_t quarter = free_bytes / 4;
  return quarter < CT_CUDNN_DEFAULT_WORKSPACE ? quarter : CT_CUDNN_DEFAULT_WORKSPACE;
}

extern "C" size_t ct_cudnn_workspace_limit(int device) {
  pthread_mutex_lock(&g_limit_lock);
  if (!g_limit_set) {
    g_limit = limit_from_env(device);
    g_limit_set = true;
  }
  size_t v = g_limit;
  pthread_mutex_unlock(&g_limit_lock);
  return v;
}

/* ---------------------------------------------------------------- descriptors */

cudnnDataType_t ct_cudnn_type(ct_dtype t) {
  switch (t) {
    case CT_BF16: return CUDNN_DATA_BFLOAT16;
    case CT_F16: return CUDNN_DATA_HALF;
    default: return CUDNN_DATA_FLOAT;
  }
}

cudnnStatus_t ct_cudnn_set_tensor(cudnnTensorDescriptor_t desc, int ndim, const int *dims) {
  return ct_cudnn_set_tensor_typed(desc, CT_F32, ndim, dims);
}

cudnnStatus_t ct_cudnn_set_tensor_typed(cudnnTensorDescriptor_t desc, ct_dtype type, int ndim,
                                        const int *dims) {
  int strides[5];
  CT_ASSERT(ndim >= 4 && ndim <= 5);
  long long s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    if (dims[i] <= 0 || s > INT32_MAX) return CUDNN_STATUS_BAD_PARAM;
    strides[i] = (int)s;
    s *= dims[i];
  }
  if (s > INT32_MAX) return CUDNN_STATUS_BAD_PARAM;
  return cudnnSetTensorNdDescriptor(desc, ct_cudnn_type(type), ndim, dims, strides);
}

cudnnStatus_t ct_cudnn_set_tensor_layout(cudnnTensorDescriptor_t desc, ct_dtype type,
                                         ct_layout layout, int ndim, const int *dims) {
  if (layout == CT_NCHW) return ct_cudnn_set_tensor_typed(desc, type, ndim, dims);
  CT_ASSERT(ndim >= 4 && ndim <= 5);
  long long s = 1;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] <= 0) return CUDNN_STATUS_BAD_PARAM;
    s *= dims[i];
  }
  if (s > INT32_MAX) return CUDNN_STATUS_BAD_PARAM;
  return cudnnSetTensorNdDescriptorEx(desc, CUDNN_TENSOR_NHWC, ct_cudnn_type(type), ndim, dims);
}

cudnnStatus_t ct_cudnn_set_flat(cudnnTensorDescriptor_t desc, size_t count) {
  if (count == 0 || count > INT32_MAX) return CUDNN_STATUS_BAD_PARAM;
  int dims[4] = {1, 1, 1, (int)count};
  return ct_cudnn_set_tensor(desc, 4, dims);
}
