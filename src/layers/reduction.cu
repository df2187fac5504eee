#include "gpu/gpu.h"
#include "layers/reduction.h"

#define R_ASUM CT_REDUCE_ASUM
#define R_SUMSQ CT_REDUCE_SUMSQ

__device__ static float term(ct_reduce_term op, float v) {
  return op == R_ASUM ? fabsf(v) : (op == R_SUMSQ ? v * v : v);
}

/* One block per output row; a fixed tree order, so results repeat exactly. */
__global__ static void reduction_forward_kernel(ct_reduce_term op, size_t dim, float coeff, const float *x,
                                                float *y) {
  __shared__ float part[CT_CUDA_THREADS];
  const float *row = x + (size_t)blockIdx.x * dim;
  float s = 0.0f;
  for (size_t k = threadIdx.x; k < dim; k += blockDim.x) s += term(op, row[k]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = part[0] * coeff;
}

__global__ static void reduction_backward_kernel(ct_reduce_term op, size_t n, size_t dim, float coeff,
                                                 const float *x, const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    float g = dy[k / dim] * coeff, v = x[k];
    if (op == R_ASUM) g = v > 0 ? g : (v < 0 ? -g : 0.0f);
    else if (op == R_SUMSQ) g *= 2.0f * v;
    dx[k] = g;
  }
}

extern "C" void ct_reduction_forward_gpu(ct_context *ctx, ct_reduce_term op, size_t num, size_t dim,
                                         float coeff, const float *x, float *y) {
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  for (size_t done = 0; done < num; done += 65535) { /* grid.x limit of one launch */
    size_t rows = num - done < 65535 ? num - done : 65535;
    reduction_forward_kernel<<<(unsigned)rows, CT_CUDA_THREADS, 0, stream>>>(op, dim, coeff,
                                                                             x + done * dim, y + done);
    CT_CUDA_LAUNCH_CHECK();
  }
}

extern "C" void ct_reduction_backward_gpu(ct_context *ctx, ct_reduce_term op, size_t num, size_t dim,
                                          float coeff, const float *x, const float *dy, float *dx) {
  size_t n = num * dim;
  if (!n) return;
  reduction_backward_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      op, n, dim, coeff, x, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
