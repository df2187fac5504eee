#include "gpu/gpu.h"
#include "layers/batch_reindex.h"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)

__global__ static void gather_kernel(size_t count, size_t inner, const float *index, const float *x,
                                     float *y) {
  CT_CUDA_KERNEL_LOOP(k, count) y[k] = x[(size_t)(int)index[k / inner] * inner + k % inner];
}

/* Each bottom value sums the top rows that came from it, in row order, so
 * the result does not depend on thread timing. */
__global__ static void scatter_sum_kernel(size_t count, size_t n, size_t inner, const float *index,
                                          const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(k, count) {
    int b = (int)(k / inner);
    size_t c = k % inner;
    float s = 0.0f;
    for (size_t j = 0; j < n; j++)
      if ((int)index[j] == b) s += dy[j * inner + c];
    dx[k] = s;
  }
}

extern "C" void ct_batch_reindex_forward_gpu(ct_context *ctx, size_t n, size_t inner,
                                             const float *index, const float *x, float *y) {
  size_t count = n * inner;
  if (!count) return;
  gather_kernel<<<ct_cuda_blocks(count), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(count, inner, index, x,
                                                                            y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_batch_reindex_backward_gpu(ct_context *ctx, int batch, size_t n, size_t inner,
                                              const float *index, const float *dy, float *dx) {
  size_t count = (size_t)batch * inner;
  if (!count) return;
  scatter_sum_kernel<<<ct_cuda_blocks(count), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(count, n, inner,
                                                                                index, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
