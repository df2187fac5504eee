#include "gpu/gpu.h"
#include "layers/filter.h"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)

__global__ static void gather_kernel(size_t n, size_t dim, const int *keep, const float *x,
                                     float *y) {
  CT_CUDA_KERNEL_LOOP(k, n) y[k] = x[(size_t)keep[k / dim] * dim + k % dim];
}

__global__ static void scatter_kernel(size_t n, size_t dim, const int *keep, const float *dy,
                                      float *dx) {
  CT_CUDA_KERNEL_LOOP(k, n) dx[(size_t)keep[k / dim] * dim + k % dim] = dy[k];
}

extern "C" void ct_filter_forward_gpu(ct_context *ctx, int nkeep, size_t dim, const int *keep,
                                      const float *x, float *y) {
  size_t n = (size_t)nkeep * dim;
  if (!n) return;
  gather_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, dim, keep, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_filter_backward_gpu(ct_context *ctx, int nkeep, size_t dim, const int *keep,
                                       const float *dy, float *dx) {
  size_t n = (size_t)nkeep * dim;
  if (!n) return;
  scatter_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, dim, keep, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
