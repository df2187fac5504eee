/* The GPU backend of the convolution engine (conv_common.h): cuBLAS GEMMs,
 * im2col.cu, and small kernels for the layout permutes and the bias. */
#include "gpu/gpu.h"
#include "layers/conv_common.h"
#include "math/math.h"

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

static void gpu_bias_grad(ct_context *ctx, const float *dx, int B, int C, size_t S,
                          float *dbias) {
  if (!C) return;
  bias_grad_kernel<<<C, CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(B, C, S, dx, dbias);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" const ct_conv_backend ct_conv_backend_gpu = {
    ct_gpu_gemm, ct_im2col_gpu, ct_col2im_gpu, gpu_to_rows,
    gpu_from_rows, gpu_add_bias, gpu_bias_grad,
};
