/* The net's device-side loss sum and its read back (see net_internal.h). */
#include "gpu/gpu.h"
#include "net/net_internal.h"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)

extern "C" void ct_net_loss_zero_gpu(ct_context *ctx, double *sum) {
  CT_CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(double), STREAM(ctx)));
}

/* One block: each thread sums a strided slice, then a tree in shared memory;
 * a loss top is a handful of values, so one block is plenty. */
__global__ static void loss_add(size_t n, const float *data, const float *diff, double *sum) {
  __shared__ double s[CT_CUDA_THREADS];
  double acc = 0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) acc += (double)data[i] * (double)diff[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *sum += s[0];
}

extern "C" void ct_net_loss_add_gpu(ct_context *ctx, size_t n, const float *data,
                                    const float *diff, double *sum) {
  if (!n) return;
  loss_add<<<1, CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, data, diff, sum);
  CT_CUDA_LAUNCH_CHECK();
}
