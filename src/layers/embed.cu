#include <limits.h>

#include "gpu/gpu.h"
#include "layers/embed.h"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)

__device__ static bool in_range(float v, int K) { return v > -1.0f && v < (float)K; }

__global__ static void set_int_kernel(int *p, int v) { *p = v; }

__global__ static void check_kernel(size_t M, int K, const float *index, int *first_bad) {
  CT_CUDA_KERNEL_LOOP(m, M) {
    if (!in_range(index[m], K)) atomicMin(first_bad, (int)m);
  }
}

__global__ static void forward_kernel(size_t n, int N, const float *index, const float *w,
                                      const float *bias, float *y) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    size_t m = k / N, c = k % N;
    float v = w[(size_t)(int)index[m] * N + c];
    y[k] = bias ? v + bias[c] : v;
  }
}

__global__ static void backward_weight_kernel(size_t n, int N, const float *index, const float *dy,
                                              float *dw) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    size_t m = k / N, c = k % N;
    atomicAdd(dw + (size_t)(int)index[m] * N + c, dy[k]);
  }
}

__global__ static void backward_bias_kernel(size_t M, int N, const float *dy, float *db) {
  CT_CUDA_KERNEL_LOOP(c, (size_t)N) {
    float s = 0.0f;
    for (size_t m = 0; m < M; m++) s += dy[m * N + c];
    db[c] += s;
  }
}

extern "C" long long ct_embed_check_gpu(ct_context *ctx, size_t M, int K, const float *index,
                                        int *scratch) {
  if (!M) return -1;
  set_int_kernel<<<1, 1, 0, STREAM(ctx)>>>(scratch, INT_MAX);
  CT_CUDA_LAUNCH_CHECK();
  check_kernel<<<ct_cuda_blocks(M), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(M, K, index, scratch);
  CT_CUDA_LAUNCH_CHECK();
  int first = INT_MAX;
  CT_CUDA_CHECK(cudaMemcpyAsync(&first, scratch, sizeof first, cudaMemcpyDeviceToHost, STREAM(ctx)));
  CT_CUDA_CHECK(cudaStreamSynchronize(STREAM(ctx)));
  return first == INT_MAX ? -1 : (long long)first;
}

extern "C" void ct_embed_forward_gpu(ct_context *ctx, size_t M, int N, const float *index,
                                     const float *w, const float *bias, float *y) {
  size_t n = M * (size_t)N;
  if (!n) return;
  forward_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, N, index, w, bias, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_embed_backward_weight_gpu(ct_context *ctx, size_t M, int N, const float *index,
                                             const float *dy, float *dw) {
  size_t n = M * (size_t)N;
  if (!n) return;
  backward_weight_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, N, index, dy,
                                                                                 dw);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_embed_backward_bias_gpu(ct_context *ctx, size_t M, int N, const float *dy,
                                           float *db) {
  if (!N) return;
  backward_bias_kernel<<<ct_cuda_blocks((size_t)N), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(M, N, dy, db);
  CT_CUDA_LAUNCH_CHECK();
}
