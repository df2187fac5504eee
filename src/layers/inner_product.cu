/* InnerProduct's own kernel: the bias gradient of a (M, N) top diff.  The
 * products themselves are cuBLASLt's (math/gemm_lt.h). */
#include "gpu/gpu.h"
#include "layers/inner_product.h"

/* A block covers 32 columns with 8 groups of rows: thread (x, y) sums
 * column x of the block over rows y, y + 8, y + 16, ..., in that order, then
 * thread (x, 0) adds the 8 partial sums in group order.  A warp (fixed y)
 * reads 32 neighbouring values of one row. */
#define BIAS_COLS 32
#define BIAS_GROUPS 8

__global__ static void ip_bias_grad_kernel(int M, int N, const float *dy, float *dbias) {
  __shared__ float part[BIAS_GROUPS][BIAS_COLS];
  const int col = blockIdx.x * BIAS_COLS + threadIdx.x;
  const int grp = threadIdx.y;
  float sum = 0.0f;
  if (col < N) {
#pragma unroll 4
    for (int m = grp; m < M; m += BIAS_GROUPS) sum += dy[(size_t)m * N + col];
  }
  part[grp][threadIdx.x] = sum;
  __syncthreads();
  if (grp == 0 && col < N) {
    float total = part[0][threadIdx.x];
    for (int g = 1; g < BIAS_GROUPS; g++) total += part[g][threadIdx.x];
    dbias[col] += total;
  }
}

extern "C" void ct_ip_bias_grad_gpu(ct_context *ctx, const float *dy, int M, int N,
                                    float *dbias) {
  if (M <= 0 || N <= 0) return;
  CT_ASSERTF(M <= CT_IP_BIAS_GRAD_MAX_ROWS, "inner product bias gradient over %d rows", M);
  const unsigned blocks = (unsigned)((N + BIAS_COLS - 1) / BIAS_COLS);
  ip_bias_grad_kernel<<<blocks, dim3(BIAS_COLS, BIAS_GROUPS), 0, (cudaStream_t)ctx->stream>>>(
      M, N, dy, dbias);
  CT_CUDA_LAUNCH_CHECK();
}
