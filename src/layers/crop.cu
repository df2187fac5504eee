#include "gpu/gpu.h"
#include "layers/crop.h"

/* Index in the bottom of top element k (the geometry is passed by value). */
__device__ static size_t bottom_index(const ct_crop_geometry &g, size_t k) {
  long long at = 0;
  for (int a = g.ndim - 1; a >= 0; a--) {
    long long i = (long long)(k % (size_t)g.top_shape[a]);
    k /= (size_t)g.top_shape[a];
    at += (i + g.offset[a]) * g.bottom_stride[a];
  }
  return (size_t)at;
}

__global__ static void crop_forward_kernel(ct_crop_geometry g, size_t n, const float *bottom,
                                           float *top) {
  CT_CUDA_KERNEL_LOOP(k, n) top[k] = bottom[bottom_index(g, k)];
}

__global__ static void crop_backward_kernel(ct_crop_geometry g, size_t n, const float *dtop,
                                            float *dbottom) {
  CT_CUDA_KERNEL_LOOP(k, n) dbottom[bottom_index(g, k)] = dtop[k];
}

extern "C" void ct_crop_forward_gpu(ct_context *ctx, const ct_crop_geometry *g, size_t count,
                                    const float *bottom, float *top) {
  if (!count) return;
  crop_forward_kernel<<<ct_cuda_blocks(count), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      *g, count, bottom, top);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_crop_backward_gpu(ct_context *ctx, const ct_crop_geometry *g, size_t count,
                                     const float *dtop, float *dbottom) {
  if (!count) return;
  crop_backward_kernel<<<ct_cuda_blocks(count), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      *g, count, dtop, dbottom);
  CT_CUDA_LAUNCH_CHECK();
}
