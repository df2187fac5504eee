#include "gpu/gpu.h"
#include "layers/batch_norm.h"
#include "layers/block_reduce.cuh"

#define BN_THREADS 512

/* One block per channel c; value j of the channel is at (n, c, i). */
__device__ static __forceinline__ size_t at(size_t j, int C, int c, size_t S) {
  return (j / S * (size_t)C + (size_t)c) * S + j % S;
}

__global__ static void bn_forward(int N, int C, size_t S, float eps, float f, bool use_global,
                                  const float *x, float *y, float *mean_out, float *std_out,
                                  float *mean_sum, float *var_sum, float *factor) {
  const int c = blockIdx.x;
  const size_t m = (size_t)N * S;
  float mean, std;
  if (use_global) {
    float k = factor[0] == 0.0f ? 0.0f : 1.0f / factor[0];
    mean = k * mean_sum[c];
    std = sqrtf(k * var_sum[c] + eps);
  } else {
    double sum = 0, sumsq = 0;
    for (size_t j = threadIdx.x; j < m; j += blockDim.x) sum += x[at(j, C, c, S)];
    sum = ct_block_sum(sum);
    double mu = m ? sum / (double)m : 0;
    for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
      double d = x[at(j, C, c, S)] - mu;
      sumsq += d * d;
    }
    sumsq = ct_block_sum(sumsq);
    float var = m ? (float)(sumsq / (double)m) : 0.0f;
    mean = (float)mu;
    std = sqrtf(var + eps);
    if (threadIdx.x == 0) {
      float correction = m > 1 ? (float)((double)m / (double)(m - 1)) : 1.0f;
      mean_sum[c] = mean + f * mean_sum[c];
      var_sum[c] = correction * var + f * var_sum[c];
      if (c == 0) factor[0] = factor[0] * f + 1.0f;
    }
  }
  if (threadIdx.x == 0) {
    mean_out[c] = mean;
    std_out[c] = std;
  }
  for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
    size_t i = at(j, C, c, S);
    y[i] = (x[i] - mean) / std;
  }
}

__global__ static void bn_backward(int N, int C, size_t S, bool use_global, const float *y,
                                   const float *std, const float *dy, float *dx) {
  const int c = blockIdx.x;
  const size_t m = (size_t)N * S;
  const float s = std[c];
  if (use_global) {
    for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
      size_t i = at(j, C, c, S);
      dx[i] = dy[i] / s;
    }
    return;
  }
  double sum_dy = 0, sum_dy_y = 0;
  for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
    size_t i = at(j, C, c, S);
    sum_dy += dy[i];
    sum_dy_y += (double)dy[i] * y[i];
  }
  sum_dy = ct_block_sum(sum_dy);
  sum_dy_y = ct_block_sum(sum_dy_y);
  const float a = (float)(sum_dy / (double)m), b = (float)(sum_dy_y / (double)m);
  for (size_t j = threadIdx.x; j < m; j += blockDim.x) {
    size_t i = at(j, C, c, S);
    dx[i] = (dy[i] - a - y[i] * b) / s;
  }
}

extern "C" void ct_batch_norm_forward_gpu(ct_context *ctx, int N, int C, size_t S, float eps,
                                          float f, bool use_global, const float *x, float *y,
                                          float *mean, float *std, float *mean_sum, float *var_sum,
                                          float *factor) {
  if (C <= 0) return;
  bn_forward<<<C, BN_THREADS, 0, (cudaStream_t)ctx->stream>>>(N, C, S, eps, f, use_global, x, y,
                                                              mean, std, mean_sum, var_sum, factor);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_batch_norm_backward_gpu(ct_context *ctx, int N, int C, size_t S, bool use_global,
                                           const float *y, const float *std, const float *dy,
                                           float *dx) {
  if (C <= 0 || (size_t)N * S == 0) return;
  bn_backward<<<C, BN_THREADS, 0, (cudaStream_t)ctx->stream>>>(N, C, S, use_global, y, std, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
