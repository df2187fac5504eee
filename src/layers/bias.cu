#include "gpu/gpu.h"
#include "layers/bias.h"
#include "layers/block_reduce.cuh"

__global__ static void bias_fwd(size_t n, size_t dim, size_t inner, const float *x, const float *b,
                                float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] + b[i / inner % dim];
}

/* Element-wise case (outer = inner = 1): one value per operand value. */
__global__ static void bias_operand_grad_eltwise(size_t n, const float *dy, bool accumulate,
                                                 float *db) {
  CT_CUDA_KERNEL_LOOP(d, n) db[d] = accumulate ? db[d] + dy[d] : dy[d];
}

/* One block per operand value d: the sum over outer and inner of dy. */
__global__ static void bias_operand_grad(size_t outer, size_t dim, size_t inner, const float *dy,
                                         bool accumulate, float *db) {
  const size_t d = blockIdx.x;
  double sum = 0;
  for (size_t j = threadIdx.x; j < outer * inner; j += blockDim.x)
    sum += dy[(j / inner * dim + d) * inner + j % inner];
  sum = ct_block_sum(sum);
  if (threadIdx.x == 0) db[d] = accumulate ? db[d] + (float)sum : (float)sum;
}

extern "C" void ct_bias_forward_gpu(ct_context *ctx, const ct_broadcast_dims *g, const float *x,
                                    const float *b, float *y) {
  size_t n = g->outer * g->dim * g->inner;
  if (!n) return;
  bias_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, g->dim,
                                                                                 g->inner, x, b, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_bias_backward_operand_gpu(ct_context *ctx, const ct_broadcast_dims *g,
                                             const float *dy, bool accumulate, float *db) {
  if (!g->dim) return;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (g->outer * g->inner == 1)
    bias_operand_grad_eltwise<<<ct_cuda_blocks(g->dim), CT_CUDA_THREADS, 0, stream>>>(
        g->dim, dy, accumulate, db);
  else
    bias_operand_grad<<<(unsigned)g->dim, CT_REDUCE_THREADS, 0, stream>>>(
        g->outer, g->dim, g->inner, dy, accumulate, db);
  CT_CUDA_LAUNCH_CHECK();
}
