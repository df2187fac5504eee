#include "gpu/gpu.h"
#include "layers/block_reduce.cuh"
#include "layers/prelu.h"

__device__ static __forceinline__ int slope_index(size_t i, int channels, int dim, bool shared) {
  return shared ? 0 : (int)(i / (size_t)dim % (size_t)channels);
}

__global__ static void prelu_fwd(size_t n, int channels, int dim, bool shared, const float *slope,
                                 const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float v = x[i];
    y[i] = v > 0 ? v : slope[slope_index(i, channels, dim, shared)] * v;
  }
}

__global__ static void prelu_bwd(size_t n, int channels, int dim, bool shared, const float *slope,
                                 const float *x, const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    dx[i] = x[i] > 0 ? dy[i] : slope[slope_index(i, channels, dim, shared)] * dy[i];
  }
}

/* One block per slope: block c sums channel c's planes (every value when
 * shared). */
__global__ static void prelu_slope_grad(size_t n, int channels, int dim, bool shared,
                                        const float *x, const float *dy, float *dslope) {
  const int c = blockIdx.x;
  const size_t per_channel = shared ? n : n / (size_t)channels;
  double sum = 0;
  for (size_t j = threadIdx.x; j < per_channel; j += blockDim.x) {
    size_t i =
        shared ? j
               : (j / (size_t)dim * (size_t)channels + (size_t)c) * (size_t)dim + j % (size_t)dim;
    if (x[i] <= 0) sum += (double)dy[i] * x[i];
  }
  sum = ct_block_sum(sum);
  if (threadIdx.x == 0) dslope[c] += (float)sum;
}

extern "C" void ct_prelu_forward_gpu(ct_context *ctx, size_t n, int channels, int dim, bool shared,
                                     const float *slope, const float *x, float *y) {
  if (!n) return;
  prelu_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, channels, dim, shared, slope, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_prelu_backward_slope_gpu(ct_context *ctx, size_t n, int channels, int dim,
                                            bool shared, const float *x, const float *dy,
                                            float *dslope) {
  if (!n) return;
  prelu_slope_grad<<<shared ? 1 : channels, CT_REDUCE_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, channels, dim, shared, x, dy, dslope);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_prelu_backward_gpu(ct_context *ctx, size_t n, int channels, int dim, bool shared,
                                      const float *slope, const float *x, const float *dy,
                                      float *dx) {
  if (!n) return;
  prelu_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, channels, dim, shared, slope, x, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
