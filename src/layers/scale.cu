#include "gpu/gpu.h"
#include "layers/block_reduce.cuh"
#include "layers/scale.h"

__global__ static void scale_fwd(size_t n, size_t dim, size_t inner, const float *x, const float *s,
                                 float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] * s[i / inner % dim];
}

/* Element-wise case (outer = inner = 1): one product per operand value. */
__global__ static void scale_operand_grad_eltwise(size_t n, const float *dy, const float *x,
                                                  bool accumulate, float *ds) {
  CT_CUDA_KERNEL_LOOP(d, n) ds[d] = accumulate ? ds[d] + dy[d] * x[d] : dy[d] * x[d];
}

/* One block per operand value d: the sum over outer and inner of dy * x. */
__global__ static void scale_operand_grad(size_t outer, size_t dim, size_t inner, const float *dy,
                                          const float *x, bool accumulate, float *ds) {
  const size_t d = blockIdx.x;
  double sum = 0;
  for (size_t j = threadIdx.x; j < outer * inner; j += blockDim.x) {
    size_t i = (j / inner * dim + d) * inner + j % inner;
    sum += (double)dy[i] * x[i];
  }
  sum = ct_block_sum(sum);
  if (threadIdx.x == 0) ds[d] = accumulate ? ds[d] + (float)sum : (float)sum;
}

extern "C" void ct_scale_forward_gpu(ct_context *ctx, const ct_broadcast_dims *g, const float *x,
                                     const float *s, float *y) {
  size_t n = g->outer * g->dim * g->inner;
  if (!n) return;
  scale_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, g->dim, g->inner, x, s, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_scale_backward_operand_gpu(ct_context *ctx, const ct_broadcast_dims *g,
                                              const float *dy, const float *x, bool accumulate,
                                              float *ds) {
  if (!g->dim) return;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (g->outer * g->inner == 1)
    scale_operand_grad_eltwise<<<ct_cuda_blocks(g->dim), CT_CUDA_THREADS, 0, stream>>>(
        g->dim, dy, x, accumulate, ds);
  else
    scale_operand_grad<<<(unsigned)g->dim, CT_REDUCE_THREADS, 0, stream>>>(
        g->outer, g->dim, g->inner, dy, x, accumulate, ds);
  CT_CUDA_LAUNCH_CHECK();
}
