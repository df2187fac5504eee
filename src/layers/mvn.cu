#include "gpu/gpu.h"
#include "layers/block_reduce.cuh"
#include "layers/mvn.h"

/* One block per group. */
__global__ static void mvn_fwd(size_t dim, bool normalize_variance, float eps, const float *x,
                               float *y, float *std_out) {
  x += blockIdx.x * dim;
  y += blockIdx.x * dim;
  double sum = 0;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) sum += x[i];
  const float mean = (float)(ct_block_sum(sum) / (double)dim);
  float div = 1.0f;
  if (normalize_variance) {
    double sumsq = 0;
    for (size_t i = threadIdx.x; i < dim; i += blockDim.x) {
      float d = x[i] - mean;
      sumsq += (double)d * d;
    }
    div = sqrtf((float)(ct_block_sum(sumsq) / (double)dim)) + eps;
    if (threadIdx.x == 0) std_out[blockIdx.x] = div;
  }
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x)
    y[i] = normalize_variance ? (x[i] - mean) / div : x[i] - mean;
}

__global__ static void mvn_bwd(size_t dim, bool normalize_variance, const float *y,
                               const float *std, const float *dy, float *dx) {
  y += blockIdx.x * dim;
  dy += blockIdx.x * dim;
  dx += blockIdx.x * dim;
  double sum_dy = 0, sum_dy_y = 0;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) {
    sum_dy += dy[i];
    if (normalize_variance) sum_dy_y += (double)dy[i] * y[i];
  }
  const float a = (float)(ct_block_sum(sum_dy) / (double)dim);
  if (!normalize_variance) {
    for (size_t i = threadIdx.x; i < dim; i += blockDim.x) dx[i] = dy[i] - a;
    return;
  }
  const float b = (float)(ct_block_sum(sum_dy_y) / (double)dim);
  const float s = std[blockIdx.x];
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) dx[i] = (dy[i] - a - y[i] * b) / s;
}

extern "C" void ct_mvn_forward_gpu(ct_context *ctx, size_t groups, size_t dim,
                                   bool normalize_variance, float eps, const float *x, float *y,
                                   float *std) {
  if (!groups || !dim) return;
  mvn_fwd<<<(unsigned)groups, CT_REDUCE_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      dim, normalize_variance, eps, x, y, std);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_mvn_backward_gpu(ct_context *ctx, size_t groups, size_t dim,
                                    bool normalize_variance, const float *y, const float *std,
                                    const float *dy, float *dx) {
  if (!groups || !dim) return;
  mvn_bwd<<<(unsigned)groups, CT_REDUCE_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      dim, normalize_variance, y, std, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
