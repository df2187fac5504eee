#include "gpu/gpu.h"
#include "layers/batch_norm.h"
#include "layers/block_reduce.cuh"

#define BN_THREADS 512

/* One block per channel c; value j of the channel is at (n, c, i). */
__device__ static __forceinline__ size_t at(size_t j, int C, int c, size_t S) {
  return (j / S * (size_t)C + (size_t)c) * S + j % S;
}

__global__ static void bn_forward(int N, int C, size_t S, float eps, float f, bool use_global,
                                  bool update, const float *x, float *y, float *mean_out, float *std_out,
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
    if (threadIdx.x == 0 && update) {
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
                                          float f, bool use_global, bool update, const float *x,
                                          float *y, float *mean, float *std, float *mean_sum,
                                          float *var_sum, float *factor) {
  if (C <= 0) return;
  bn_forward<<<C, BN_THREADS, 0, (cudaStream_t)ctx->stream>>>(N, C, S, eps, f, use_global, update, x,
                                                              y, mean, std, mean_sum, var_sum, factor);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_batch_norm_backward_gpu(ct_context *ctx, int N, int C, size_t S, bool use_global,
                                           const float *y, const float *std, const float *dy,
                                           float *dx) {
  if (C <= 0 || (size_t)N * S == 0) return;
  bn_backward<<<C, BN_THREADS, 0, (cudaStream_t)ctx->stream>>>(N, C, S, use_global, y, std, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}

/* Frozen statistics (use_global_stats) fused with a Scale: per channel the
 * global mean and 1/std, and the affine form y = a x + b of
 * gamma (x - mean) / std + beta. */
__global__ static void frozen_affine(int C, float eps, const float *mean_sum, const float *var_sum,
                                     const float *factor, const float *gamma, const float *beta,
                                     float *mean, float *invstd, float *a, float *b) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float k = factor[0] == 0.0f ? 0.0f : 1.0f / factor[0];
  mean[c] = k * mean_sum[c];
  invstd[c] = 1.0f / sqrtf(k * var_sum[c] + eps);
  a[c] = gamma[c] * invstd[c];
  b[c] = beta[c] - mean[c] * a[c];
}

/* dgamma += sum(dy x_hat) = (sum(dy x) - mean sum(dy)) / std, dbeta += sum(dy). */
__global__ static void frozen_param_grad(int C, const float *mean, const float *invstd,
                                         const float *dot, const float *sum, float *dgamma,
                                         float *dbeta) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  if (dgamma) dgamma[c] += invstd[c] * (dot[c] - mean[c] * sum[c]);
  if (dbeta) dbeta[c] += sum[c];
}

extern "C" void ct_batch_norm_frozen_affine_gpu(ct_context *ctx, int C, float eps,
                                                const float *mean_sum, const float *var_sum,
                                                const float *factor, const float *gamma,
                                                const float *beta, float *mean, float *invstd,
                                                float *a, float *b) {
  if (C <= 0) return;
  frozen_affine<<<(C + 255) / 256, 256, 0, (cudaStream_t)ctx->stream>>>(
      C, eps, mean_sum, var_sum, factor, gamma, beta, mean, invstd, a, b);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_batch_norm_frozen_param_grad_gpu(ct_context *ctx, int C, const float *mean,
                                                    const float *invstd, const float *dot,
                                                    const float *sum, float *dgamma,
                                                    float *dbeta) {
  if (C <= 0 || (!dgamma && !dbeta)) return;
  frozen_param_grad<<<(C + 255) / 256, 256, 0, (cudaStream_t)ctx->stream>>>(C, mean, invstd, dot,
                                                                            sum, dgamma, dbeta);
  CT_CUDA_LAUNCH_CHECK();
}
