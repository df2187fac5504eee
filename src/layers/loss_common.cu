#include "gpu/gpu.h"
#include "layers/loss_common.h"

/* Block sums, in double, of value, of flags equal to 1 and of flags equal
 * to -1; partial holds 3 doubles per block.  A fixed grid and a tree
 * reduction keep the result the same from run to run. */
__global__ static void loss_reduce(size_t n, const float *value, const float *flag,
                                   double *partial) {
  __shared__ double s_value[CT_CUDA_THREADS], s_valid[CT_CUDA_THREADS], s_bad[CT_CUDA_THREADS];
  double v = 0, ok = 0, bad = 0;
  CT_CUDA_KERNEL_LOOP(i, n) {
    if (value) v += value[i];
    if (flag) {
      ok += flag[i] == 1.0f;
      bad += flag[i] == -1.0f;
    }
  }
  s_value[threadIdx.x] = v;
  s_valid[threadIdx.x] = ok;
  s_bad[threadIdx.x] = bad;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      s_value[threadIdx.x] += s_value[threadIdx.x + w];
      s_valid[threadIdx.x] += s_valid[threadIdx.x + w];
      s_bad[threadIdx.x] += s_bad[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[3 * blockIdx.x + 0] = s_value[0];
    partial[3 * blockIdx.x + 1] = s_valid[0];
    partial[3 * blockIdx.x + 2] = s_bad[0];
  }
}

extern "C" void ct_loss_reduce_gpu(ct_context *ctx, size_t n, const float *value,
                                   const float *flag, float *partials, double *value_sum,
                                   long *valid, long *bad) {
  *value_sum = 0;
  *valid = *bad = 0;
  if (!n) return;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  unsigned blocks = ct_cuda_blocks(n);
  if (blocks > CT_LOSS_REDUCE_BLOCKS) blocks = CT_LOSS_REDUCE_BLOCKS;
  double *partial = (double *)partials;
  loss_reduce<<<blocks, CT_CUDA_THREADS, 0, stream>>>(n, value, flag, partial);
  CT_CUDA_LAUNCH_CHECK();
  double host[3 * CT_LOSS_REDUCE_BLOCKS];
  CT_CUDA_CHECK(cudaMemcpyAsync(host, partial, 3 * blocks * sizeof(double), cudaMemcpyDeviceToHost,
                                stream));
  ct_gpu_note_host_wait();
  CT_CUDA_CHECK(cudaStreamSynchronize(stream));
  double s = 0, ok = 0, b = 0;
  for (unsigned i = 0; i < blocks; i++) {
    s += host[3 * i];
    ok += host[3 * i + 1];
    b += host[3 * i + 2];
  }
  *value_sum = s;
  *valid = (long)ok;
  *bad = (long)b;
}

__global__ static void loss_scale(size_t n, const float *x, const float *loss_weight, float scale,
                                  float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] * (loss_weight[0] * scale);
}

extern "C" void ct_loss_scale_gpu(ct_context *ctx, size_t n, const float *x,
                                  const float *loss_weight, float scale, float *y) {
  if (!n) return;
  loss_scale<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, x, loss_weight, scale, y);
  CT_CUDA_LAUNCH_CHECK();
}

/* The whole loss in one launch: block sums as loss_reduce, then the last
 * block to finish adds the partials in block order (deterministic), divides,
 * writes the top and the inverse divisor, and raises the check on a bad
 * label.  The block counter is left at zero for the next launch. */
__global__ static void loss_finish(size_t n, const float *value, const float *flag, bool square,
                                   double *partial, unsigned *counter, int norm, size_t outer,
                                   size_t inner, double scale, float *top, float *inv_norm,
                                   unsigned *check_word, unsigned check_id) {
  __shared__ double s_value[CT_CUDA_THREADS], s_valid[CT_CUDA_THREADS], s_bad[CT_CUDA_THREADS];
  __shared__ bool s_last;
  double v = 0, ok = 0, bad = 0;
  CT_CUDA_KERNEL_LOOP(i, n) {
    float x = value[i];
    v += square ? (double)x * x : (double)x;
    if (flag) {
      ok += flag[i] == 1.0f;
      bad += flag[i] == -1.0f;
    } else {
      ok += 1.0;
    }
  }
  s_value[threadIdx.x] = v;
  s_valid[threadIdx.x] = ok;
  s_bad[threadIdx.x] = bad;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      s_value[threadIdx.x] += s_value[threadIdx.x + w];
      s_valid[threadIdx.x] += s_valid[threadIdx.x + w];
      s_bad[threadIdx.x] += s_bad[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[3 * blockIdx.x + 0] = s_value[0];
    partial[3 * blockIdx.x + 1] = s_valid[0];
    partial[3 * blockIdx.x + 2] = s_bad[0];
    __threadfence();
    s_last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!s_last || threadIdx.x != 0) return;
  __threadfence();
  const volatile double *p = partial;
  double sum = 0, valid = 0, nbad = 0;
  for (unsigned b = 0; b < gridDim.x; b++) {
    sum += p[3 * b];
    valid += p[3 * b + 1];
    nbad += p[3 * b + 2];
  }
  double normalizer = ct_loss_normalizer_value(norm, outer, inner, (long)valid);
  top[0] = (float)(sum / normalizer * scale);
  inv_norm[0] = (float)(1.0 / normalizer);
  if (nbad > 0 && check_id) atomicCAS(check_word, 0u, check_id);
  *counter = 0;
}

extern "C" void ct_loss_finish_gpu(ct_context *ctx, ct_loss_scratch *s, size_t n,
                                   const float *value, const float *flag, const ct_loss_finish *f,
                                   float *top) {
  ct_loss_scratch_record(s, n, f);
  unsigned blocks = ct_cuda_blocks(n ? n : 1);
  if (blocks > CT_LOSS_REDUCE_BLOCKS) blocks = CT_LOSS_REDUCE_BLOCKS;
  double *partial = (double *)s->partials->data;
  unsigned *counter = (unsigned *)(ct_f32(s->partials) + CT_LOSS_PARTIALS);
  loss_finish<<<blocks, CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, value, flag, f->square, partial, counter, (int)f->norm, f->outer, f->inner, f->scale, top,
      ct_f32(s->inv_norm), ctx->check_word, s->check_id);
  CT_CUDA_LAUNCH_CHECK();
}
