/* Block-wide sum for the reduction kernels of the neuron layers (.cu only). */
#ifndef CT_LAYERS_BLOCK_REDUCE_CUH
#define CT_LAYERS_BLOCK_REDUCE_CUH

#include "gpu/gpu.h"

/* Sum of v over all threads of the block (blockDim.x a multiple of 32, at most
 * 1024); every thread receives it.  Every thread of the block must call it. */
static __device__ __forceinline__ double ct_block_sum(double v) {
  __shared__ double partial[32];
  __shared__ double total;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int nwarps = (blockDim.x + 31) >> 5;
    v = lane < nwarps ? partial[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

/* Blocks for a grid-stride loop over n, capped like ct_cuda_blocks. */
#define CT_REDUCE_THREADS 256

#endif
