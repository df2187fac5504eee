/* Products with a long reduction and a small result (gemm_short.h).
 *
 * One warp per 4 x 4 block of C: its lanes take the reduction 4 values at
 * a time (16-byte reads side by side when K is a multiple of 4 and the
 * rows are aligned, else one value at a time), every 128th (or 32nd) k, into
 * 16 partial sums each, which a butterfly of shuffles then adds in a fixed
 * order.  Rows past M or N are read as the last row (in bounds) and not
 * written. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "math/gemm_short.h"

#define GS_WARPS 4 /* per block */

template <bool VEC>
__global__ void __launch_bounds__(32 * GS_WARPS)
    gemm_short_kernel(int M, int N, int K, const float *__restrict__ A,
                      const float *__restrict__ B, const float *__restrict__ bias,
                      float *__restrict__ C) {
  const int warp = blockIdx.x * GS_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nb = (N + 3) / 4;
  const int m0 = warp / nb * 4, n0 = warp % nb * 4;
  if (m0 >= M) return; /* the whole warp */
  const float *a[4], *b[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    a[i] = A + (size_t)min(m0 + i, M - 1) * K;
    b[i] = B + (size_t)min(n0 + i, N - 1) * K;
  }
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  if (VEC) {
#pragma unroll 2
    for (int k = 4 * lane; k < K; k += 128) {
      float4 av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        av[i] = __ldg((const float4 *)(a[i] + k));
        bv[i] = __ldg((const float4 *)(b[i] + k));
      }
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          acc[i][j] = fmaf(av[i].x, bv[j].x, acc[i][j]);
          acc[i][j] = fmaf(av[i].y, bv[j].y, acc[i][j]);
          acc[i][j] = fmaf(av[i].z, bv[j].z, acc[i][j]);
          acc[i][j] = fmaf(av[i].w, bv[j].w, acc[i][j]);
        }
    }
  } else {
#pragma unroll 4
    for (int k = lane; k < K; k += 32) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        av[i] = __ldg(a[i] + k);
        bv[i] = __ldg(b[i] + k);
      }
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  }
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int o = 16; o > 0; o /= 2) acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], o);
  if (lane != 0) return;
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
      if (m0 + i < M && n0 + j < N)
        C[(size_t)(m0 + i) * N + n0 + j] = acc[i][j] + (bias ? bias[n0 + j] : 0.0f);
}

extern "C" bool ct_gemm_short_fits(int M, int N, int K) {
  return M >= 1 && N >= 1 && K >= 512 && (long)M * N <= 8192;
}

extern "C" void ct_gemm_short_nt(ct_context *ctx, int M, int N, int K, const float *A,
                                 const float *B, const float *bias, float *C) {
  CT_ASSERT(ct_gemm_short_fits(M, N, K));
  const long warps = (long)((M + 3) / 4) * ((N + 3) / 4);
  const unsigned blocks = (unsigned)((warps + GS_WARPS - 1) / GS_WARPS);
  const bool vec = K % 4 == 0 && ((uintptr_t)A | (uintptr_t)B) % 16 == 0;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  if (vec) gemm_short_kernel<true><<<blocks, 32 * GS_WARPS, 0, st>>>(M, N, K, A, B, bias, C);
  else gemm_short_kernel<false><<<blocks, 32 * GS_WARPS, 0, st>>>(M, N, K, A, B, bias, C);
  CT_CUDA_LAUNCH_CHECK();
}
