/* The fused GPU update: one kernel per solver step over the whole flat
 * parameter buffer (see ct_update_fused_gpu in update.h), and the
 * clip_gradients reduction that feeds it without a host wait. */
#include "gpu/gpu.h"
#include "solvers/update_internal.h"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)

/* Sum of squares of g in double: per-block partials, then the last block to
 * finish adds them in block order (a fixed order: the same result on every
 * run) and leaves the clip scale and norm in *clip. */
__global__ static void clip_reduce(size_t n, const float *g, float clip_to, double *partials,
                                   unsigned *counter, ct_update_clip *clip) {
  __shared__ double s_sum[CT_CUDA_THREADS];
  __shared__ bool s_last;
  double acc = 0;
  CT_CUDA_KERNEL_LOOP(i, n) acc += (double)g[i] * (double)g[i];
  s_sum[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s_sum[threadIdx.x] += s_sum[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = s_sum[0];
    __threadfence();
    s_last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!s_last || threadIdx.x != 0) return;
  __threadfence();
  double total = 0;
  for (unsigned b = 0; b < gridDim.x; b++) total += ((volatile double *)partials)[b];
  float l2 = (float)sqrt(total);
  clip->l2 = l2;
  clip->scale = l2 <= clip_to ? 1.0f : clip_to / l2;
  *counter = 0;
}

/* The segment of flat index i: the last s with start[s] <= i, searched in
 * [lo, nseg). */
__device__ static int find_segment(const size_t *start, int lo, int nseg, size_t i) {
  int hi = nseg - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (__ldg(start + mid) <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

template <int KIND>
__device__ static float rule_value(float g, float *h0, float *h1, const ct_update_hparams *hp) {
  switch (KIND) {
    case CT_UPDATE_SGD: return ct_update_sgd_value(g, h0, h1, hp);
    case CT_UPDATE_NESTEROV: return ct_update_nesterov_value(g, h0, h1, hp);
    case CT_UPDATE_ADAGRAD: return ct_update_adagrad_value(g, h0, h1, hp);
    case CT_UPDATE_RMSPROP: return ct_update_rmsprop_value(g, h0, h1, hp);
    case CT_UPDATE_ADADELTA: return ct_update_adadelta_value(g, h0, h1, hp);
    default: return ct_update_adam_value(g, h0, h1, hp);
  }
}

template <int KIND>
__global__ static void fused_update(ct_update_fused u, float *w, float *g, float *h0, float *h1,
                                    const ct_update_step *step, const ct_update_clip *clip) {
  if (u.check_word && *u.check_word != 0) return;
  if (u.halt && *(volatile unsigned *)u.halt != 0) return;
  if (u.loss && !isfinite(*u.loss)) {
    if (u.halt && blockIdx.x == 0 && threadIdx.x == 0) *u.halt = 1;
    return;
  }
  if (u.skip && *u.skip != 0) return;
  const float rate = step->rate, correction = step->correction;
  ct_update_hparams hp;
  hp.grad_scale = clip ? clip->scale : 1.0f;
  if (u.iter_size > 1) hp.grad_scale *= 1.0f / (float)u.iter_size;
  hp.l1 = u.l1;
  hp.momentum = u.momentum;
  hp.momentum2 = u.momentum2;
  hp.rms_decay = u.rms_decay;
  hp.delta = u.delta;
  int s = 0;
  CT_CUDA_KERNEL_LOOP(i, u.count) {
    s = find_segment(u.seg_start, s, u.nseg, i);
    hp.lr = rate * __ldg(u.seg_lr_mult + s) * correction;
    hp.decay = u.weight_decay * __ldg(u.seg_decay_mult + s);
    float h1_value = h1 ? h1[i] : 0.0f;
    float h0_value = h0[i];
    float gi = ct_update_regularized_grad(w[i], g[i], &hp);
    float value = rule_value<KIND>(gi, &h0_value, &h1_value, &hp);
    h0[i] = h0_value;
    if (h1) h1[i] = h1_value;
    g[i] = value;
    w[i] -= value;
  }
}

extern "C" void ct_update_fused_gpu(ct_context *ctx, const ct_update_fused *u, float *w, float *g,
                                    float *h0, float *h1, const ct_update_step *step,
                                    ct_update_clip *clip, double *partials, unsigned *counter) {
  if (u->count == 0 || u->nseg == 0) return;
  cudaStream_t stream = STREAM(ctx);
  const ct_update_clip *use_clip = NULL;
  if (u->clip >= 0) {
    unsigned blocks = ct_cuda_blocks(u->count);
    if (blocks > CT_UPDATE_CLIP_BLOCKS) blocks = CT_UPDATE_CLIP_BLOCKS;
    clip_reduce<<<blocks, CT_CUDA_THREADS, 0, stream>>>(u->count, g, u->clip, partials, counter,
                                                        clip);
    CT_CUDA_LAUNCH_CHECK();
    use_clip = clip;
  }
  unsigned blocks = ct_cuda_blocks(u->count);
  switch (u->kind) {
#define CASE(K)                                                                         \
  case K:                                                                               \
    fused_update<K><<<blocks, CT_CUDA_THREADS, 0, stream>>>(*u, w, g, h0, h1, step, use_clip); \
    break;
    CASE(CT_UPDATE_SGD)
    CASE(CT_UPDATE_NESTEROV)
    CASE(CT_UPDATE_ADAGRAD)
    CASE(CT_UPDATE_RMSPROP)
    CASE(CT_UPDATE_ADADELTA)
    CASE(CT_UPDATE_ADAM)
#undef CASE
  }
  CT_CUDA_LAUNCH_CHECK();
}
