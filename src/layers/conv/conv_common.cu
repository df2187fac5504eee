/* The GPU backend of the convolution engine (conv_common.h): cuBLAS GEMMs,
 * im2col.cu, and small kernels for the layout permutes and the bias. */
#include "gpu/gpu.h"
#include "layers/channel_typed.h"
#include "layers/conv/conv_common.h"
#include "math/math.h"
#include "math/typed.cuh"

/* rows (C, B*S) from images (B, C, S): one thread per image value. */
__global__ static void to_rows_kernel(size_t n, int B, int C, size_t S, const float *images,
                                      float *rows) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    size_t s = i % S;
    size_t c = (i / S) % C;
    size_t b = i / S / C;
    rows[(c * B + b) * S + s] = images[i];
  }
}

__global__ static void from_rows_kernel(size_t n, int B, int C, size_t S, const float *rows,
                                        float *images) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    size_t s = i % S;
    size_t c = (i / S) % C;
    size_t b = i / S / C;
    images[i] = rows[(c * B + b) * S + s];
  }
}

__global__ static void add_bias_kernel(size_t n, int C, size_t S, const float *bias, float *x) {
  CT_CUDA_KERNEL_LOOP(i, n) x[i] += bias[(i / S) % C];
}

/* y = max(y + bias[c], 0) over a (B, C, S) array of n < 2^32 values. */
__global__ static void bias_relu_kernel(unsigned n, unsigned C, unsigned S, const float *bias,
                                        float *y) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = fmaxf(y[i] + bias[(i / S) % C], 0.0f);
}

extern "C" void ct_bias_add_gpu_typed(ct_context *ctx, ct_dtype type, const float *bias, int B,
                                      int C, size_t S, bool relu, void *y) {
  CT_ASSERTF(type != CT_F32, "a float32 bias through the 16-bit call");
  /* the per-channel pass of Scale and BatchNorm, with no scale: 16 bytes a
   * thread where the channels are innermost (a channels-last top is S = 1) */
  const ct_channel_geom g = {type, S == 1, (size_t)B, (size_t)C, S};
  ct_channel_affine_gpu(ctx, &g, y, NULL, bias, relu, NULL, y);
}

extern "C" void ct_bias_relu_gpu(ct_context *ctx, const float *bias, int B, int C, size_t S,
                                 float *y) {
  const size_t n = (size_t)B * C * S;
  if (!n) return;
  CT_ASSERTF(n <= 0xffffffffu, "bias + ReLU over %zu values", n);
  bias_relu_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      (unsigned)n, (unsigned)C, (unsigned)S, bias, y);
  CT_CUDA_LAUNCH_CHECK();
}

/* One block per channel: dbias[c] += sum over b, s of dx[b, c, s]. */
__global__ static void bias_grad_kernel(int B, int C, size_t S, const float *dx, float *dbias) {
  __shared__ float part[CT_CUDA_THREADS];
  const int c = blockIdx.x;
  const size_t n = (size_t)B * S;
  float sum = 0.0f;
  for (size_t j = threadIdx.x; j < n; j += blockDim.x) {
    size_t b = j / S, s = j % S;
    sum += dx[(b * C + c) * S + s];
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) dbias[c] += part[0];
}

/* ct_bias_grad_gpu's slices: about 4096 values per block, at most 1024
 * slices per channel. */
static unsigned bias_slices(int B, size_t S) {
  size_t per_channel = (size_t)B * S;
  size_t p = (per_channel + 4095) / 4096;
  return (unsigned)(p < 1 ? 1 : p > 1024 ? 1024 : p);
}

/* Block (p, c): the sum of slice p of channel c's B*S values into
 * partial[c * P + p].  32-bit indices (the caller asserts B*S fits). */
template <typename T>
__global__ static void bias_partial_kernel(unsigned BS, unsigned S, int C, unsigned chunk,
                                           const T *dx, float *partial) {
  __shared__ float warp_sums[CT_CUDA_THREADS / 32];
  const unsigned p = blockIdx.x, c = blockIdx.y;
  const unsigned j0 = p * chunk, j1 = min(j0 + chunk, BS);
  float sum = 0.0f;
  for (unsigned j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
    unsigned b = j / S, s = j - b * S;
    sum += ct_ld(dx[((size_t)b * C + c) * S + s]);
  }
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    sum = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
    if (threadIdx.x == 0) partial[(size_t)c * gridDim.x + p] = sum;
  }
}

/* One warp per channel: dbias[c] += the P partial sums, in a fixed order. */
__global__ static void bias_finish_kernel(int C, unsigned P, const float *partial, float *dbias) {
  const int c = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32);
  const unsigned lane = threadIdx.x & 31;
  if (c >= C) return;
  float sum = 0.0f;
  for (unsigned p = lane; p < P; p += 32) sum += partial[(size_t)c * P + p];
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if (lane == 0) dbias[c] += sum;
}

extern "C" size_t ct_bias_grad_scratch(int B, int C, size_t S) {
  return S == 1 ? ct_channel_sums_scratch((size_t)C) : (size_t)C * bias_slices(B, S);
}

extern "C" void ct_bias_grad_gpu_typed(ct_context *ctx, ct_dtype type, const void *dx, int B,
                                       int C, size_t S, float *scratch, float *dbias) {
  const size_t BS = (size_t)B * S;
  if (!C || !BS) return;
  if (S == 1) {
    /* rows of channels (a channels-last top, an InnerProduct's): the
     * per-channel sums of Scale and BatchNorm, which read whole rows 16 bytes
     * a thread; the slices below would read one value of each row (on an
     * H200, most of VGG-16's bfloat16 conv1_2 backward: 4.4 ms, its cuDNN
     * kernels 0.9) */
    const ct_channel_geom g = {type, true, (size_t)B, (size_t)C, 1};
    ct_channel_sums_gpu(ctx, &g, dx, NULL, NULL, scratch, true, NULL, dbias, NULL, NULL);
    return;
  }
  CT_ASSERTF(BS <= 0xffffffffu && S <= 0xffffffffu, "bias gradient: %zu values per channel", BS);
  const unsigned P = bias_slices(B, S);
  const unsigned chunk = (unsigned)((BS + P - 1) / P);
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const dim3 grid(P, (unsigned)C);
  switch (type) {
    case CT_BF16:
      bias_partial_kernel<<<grid, CT_CUDA_THREADS, 0, st>>>((unsigned)BS, (unsigned)S, C, chunk,
                                                            (const __nv_bfloat16 *)dx, scratch);
      break;
    case CT_F16:
      bias_partial_kernel<<<grid, CT_CUDA_THREADS, 0, st>>>((unsigned)BS, (unsigned)S, C, chunk,
                                                            (const __half *)dx, scratch);
      break;
    default:
      bias_partial_kernel<<<grid, CT_CUDA_THREADS, 0, st>>>((unsigned)BS, (unsigned)S, C, chunk,
                                                            (const float *)dx, scratch);
  }
  CT_CUDA_LAUNCH_CHECK();
  const unsigned warps_per_block = CT_CUDA_THREADS / 32;
  bias_finish_kernel<<<((unsigned)C + warps_per_block - 1) / warps_per_block, CT_CUDA_THREADS, 0,
                       st>>>(C, P, scratch, dbias);
  CT_CUDA_LAUNCH_CHECK();
}

static void gpu_to_rows(ct_context *ctx, const float *images, int B, int C, size_t S,
                        float *rows) {
  size_t n = (size_t)B * C * S;
  if (!n) return;
  to_rows_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, B, C, S, images, rows);
  CT_CUDA_LAUNCH_CHECK();
}

static void gpu_from_rows(ct_context *ctx, const float *rows, int B, int C, size_t S,
                          float *images) {
  size_t n = (size_t)B * C * S;
  if (!n) return;
  from_rows_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, B, C, S, rows, images);
  CT_CUDA_LAUNCH_CHECK();
}

static void gpu_add_bias(ct_context *ctx, const float *bias, int B, int C, size_t S, float *x) {
  size_t n = (size_t)B * C * S;
  if (!n) return;
  add_bias_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, C, S,
                                                                                       bias, x);
  CT_CUDA_LAUNCH_CHECK();
}

/* dbias (C) += the column sums of dx (B, C) row-major, for S == 1 (an
 * InnerProduct's bias): a block covers BIAS_COLS columns with BIAS_GROUPS
 * groups of rows; thread (x, y) sums column x over rows y, y + 8, ..., in
 * that order, then thread (x, 0) adds the groups' sums in group order.  A
 * warp (fixed y) reads 32 neighbouring values of one row. */
#define BIAS_COLS 32
#define BIAS_GROUPS 8
/* Past this many rows one block per channel (bias_grad_kernel) spreads
 * the rows better. */
#define BIAS_COLUMN_MAX_ROWS 1024

__global__ static void bias_column_grad_kernel(int B, int C, const float *dx, float *dbias) {
  __shared__ float part[BIAS_GROUPS][BIAS_COLS];
  const int col = blockIdx.x * BIAS_COLS + threadIdx.x;
  const int grp = threadIdx.y;
  float sum = 0.0f;
  if (col < C) {
#pragma unroll 4
    for (int b = grp; b < B; b += BIAS_GROUPS) sum += dx[(size_t)b * C + col];
  }
  part[grp][threadIdx.x] = sum;
  __syncthreads();
  if (grp == 0 && col < C) {
    float total = part[0][threadIdx.x];
    for (int g = 1; g < BIAS_GROUPS; g++) total += part[g][threadIdx.x];
    dbias[col] += total;
  }
}

static void gpu_bias_grad(ct_context *ctx, const float *dx, int B, int C, size_t S,
                          float *dbias) {
  if (!C || !B) return;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  if (S == 1 && B <= BIAS_COLUMN_MAX_ROWS)
    bias_column_grad_kernel<<<(unsigned)((C + BIAS_COLS - 1) / BIAS_COLS),
                              dim3(BIAS_COLS, BIAS_GROUPS), 0, st>>>(B, C, dx, dbias);
  else
    bias_grad_kernel<<<C, CT_CUDA_THREADS, 0, st>>>(B, C, S, dx, dbias);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" const ct_conv_backend ct_conv_backend_gpu = {
    ct_gpu_gemm, ct_im2col_gpu, ct_col2im_gpu, gpu_to_rows,
    gpu_from_rows, gpu_add_bias, gpu_bias_grad,
};

extern "C" void ct_bias_grad_gpu(ct_context *ctx, const float *dx, int B, int C, size_t S,
                                 float *scratch, float *dbias) {
  ct_bias_grad_gpu_typed(ctx, CT_F32, dx, B, C, S, scratch, dbias);
}
