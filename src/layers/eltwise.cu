#include "gpu/gpu.h"
#include "layers/eltwise.h"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)

__global__ static void scale_kernel(size_t n, float a, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(k, n) y[k] = a * x[k];
}

__global__ static void max_first_kernel(size_t n, const float *a, const float *b, float *y,
                                        float *argmax) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    bool first = a[k] > b[k];
    y[k] = first ? a[k] : b[k];
    argmax[k] = first ? 0.0f : 1.0f;
  }
}

__global__ static void max_next_kernel(size_t n, const float *x, float i, float *y, float *argmax) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    if (x[k] > y[k]) {
      y[k] = x[k];
      argmax[k] = i;
    }
  }
}

__global__ static void max_backward_kernel(size_t n, float i, const float *argmax, const float *dy,
                                           float *dx) {
  CT_CUDA_KERNEL_LOOP(k, n) dx[k] = argmax[k] == i ? dy[k] : 0.0f;
}

extern "C" void ct_eltwise_scale_gpu(ct_context *ctx, size_t n, float a, const float *x, float *y) {
  if (!n) return;
  scale_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, a, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_eltwise_max_first_gpu(ct_context *ctx, size_t n, const float *a, const float *b,
                                         float *y, float *argmax) {
  if (!n) return;
  max_first_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, a, b, y, argmax);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_eltwise_max_next_gpu(ct_context *ctx, size_t n, const float *x, int i, float *y,
                                        float *argmax) {
  if (!n) return;
  max_next_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, x, (float)i, y, argmax);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_eltwise_max_backward_gpu(ct_context *ctx, size_t n, int i, const float *argmax,
                                            const float *dy, float *dx) {
  if (!n) return;
  max_backward_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, (float)i, argmax,
                                                                              dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
