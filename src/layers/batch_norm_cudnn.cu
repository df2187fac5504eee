/* BatchNorm on cuDNN: see batch_norm_cudnn.h. */
#include <stdint.h>
#include <stdlib.h>

#include "gpu/cudnn_util.h"
#include "layers/batch_norm_cudnn.h"
#include "layers/channel_typed.h"
#include "math/math.h"

typedef struct bn_cudnn {
  cudnnTensorDescriptor_t x;  /* (N, C, S, 1) for x, y, dy and dx, in the layer's type and order */
  cudnnTensorDescriptor_t bn; /* (1, C, 1, 1), float32 */
  int N, C;
  size_t S;
  float eps, f;
  bool use_global, in_place;
  /* 16-bit layers: the type and order; ex: cuDNN's persistent NHWC kernels
   * through the *Ex calls, with their workspace (after the copies in the
   * context's workspace) and reserve (the layer's own, kept from forward to
   * backward) */
  ct_dtype type;
  ct_layout layout;
  bool ex;
  size_t ex_ws_bytes, reserve_bytes;
  void *reserve;
  /* a ReLU in place on the top, computed by cuDNN (ex only:
   * CUDNN_BATCHNORM_OPS_BN_ACTIVATION); act its descriptor */
  bool relu;
  cudnnActivationDescriptor_t act;
  /* (8 C) on the device, in this order: */
  float *buf;
  float *ones, *zeros;            /* cuDNN's scale and bias */
  float *mean, *invstd;           /* of the last forward (batch, or global) */
  float *batch_mean, *batch_var;  /* cuDNN's "running" outputs with factor 1 */
  float *dscale, *dbias;          /* cuDNN's parameter gradients (unused) */
} bn_cudnn;

static const float k_one = 1.0f, k_zero = 0.0f;

extern "C" int ct_bn_cudnn_state(ct_layer *l, ct_layer_region *out, int cap) {
  bn_cudnn *s = (bn_cudnn *)l->gpu_priv;
  int n = 0;
  if (!s) return 0;
  if (s->buf && n < cap) out[n++] = ct_layer_region{s->buf, 8 * (size_t)s->C * sizeof(float)};
  if (s->reserve && s->reserve_bytes && n < cap) out[n++] = ct_layer_region{s->reserve, s->reserve_bytes};
  return n;
}

extern "C" void ct_bn_cudnn_destroy(ct_layer *l) {
  bn_cudnn *s = (bn_cudnn *)l->gpu_priv;
  if (!s) return;
  cudnnDestroyTensorDescriptor(s->x);
  cudnnDestroyTensorDescriptor(s->bn);
  if (s->act) cudnnDestroyActivationDescriptor(s->act);
  if (s->buf) ct_mem_free(l->ctx->device, s->buf);
  if (s->reserve) ct_mem_free(l->ctx->device, s->reserve);
  free(s);
  l->gpu_priv = NULL;
}

/* The persistent kernels' workspace and reserve sizes for s's tensors,
 * with the fused ReLU when relu; false where cuDNN has none. */
static bool ex_sizes(cudnnHandle_t h, bn_cudnn *s, bool relu, size_t *ws, size_t *reserve) {
  const cudnnBatchNormOps_t ops = relu ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN;
  if (relu && !s->act) {
    if (cudnnCreateActivationDescriptor(&s->act) != CUDNN_STATUS_SUCCESS) return false;
    if (cudnnSetActivationDescriptor(s->act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0) !=
        CUDNN_STATUS_SUCCESS)
      return false;
  }
  cudnnActivationDescriptor_t act = relu ? s->act : NULL;
  size_t fwd = 0, bwd = 0;
  if (cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
          h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, ops, s->x, NULL, s->x, s->bn, act, &fwd) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnGetBatchNormalizationBackwardExWorkspaceSize(h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, ops,
                                                        s->x, relu ? s->x : NULL, s->x, NULL, s->x,
                                                        s->bn, act, &bwd) != CUDNN_STATUS_SUCCESS ||
      cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT,
                                                           ops, act, s->x, reserve) !=
          CUDNN_STATUS_SUCCESS)
    return false;
  *ws = fwd > bwd ? fwd : bwd;
  return true;
}

extern "C" bool ct_bn_cudnn_can_relu(ct_layer *l) {
  bn_cudnn *s = (bn_cudnn *)l->gpu_priv;
  size_t ws = 0, reserve = 0;
  return s && s->ex && ex_sizes((cudnnHandle_t)l->ctx->cudnn, s, true, &ws, &reserve);
}

extern "C" ct_status ct_bn_cudnn_reshape(ct_layer *l, int N, int C, size_t S, float eps, float f,
                                         bool use_global, bool in_place, bool discard_dx,
                                         bool relu, ct_error *err) {
  const char *why = NULL;
  const size_t m = (size_t)N * S;
  if (N <= 0 || C <= 0 || S == 0) why = "an empty bottom";
  else if (m * C > INT32_MAX || S > INT32_MAX) why = "a bottom of more than 2^31 values";
  else if (!use_global && m == 1) why = "one value per channel (no unbiased variance)";
  if (!ct_cudnn_wanted(l->name, CT_ENGINE_DEFAULT, why)) {
    ct_bn_cudnn_destroy(l);
    return CT_OK;
  }
  bn_cudnn *s = (bn_cudnn *)l->gpu_priv;
  if (!s || s->C != C) {
    ct_bn_cudnn_destroy(l);
    s = (bn_cudnn *)ct_xcalloc(1, sizeof *s);
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->x));
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->bn));
    s->C = C;
    s->buf = (float *)ct_mem_alloc(l->ctx->device, 8 * (size_t)C * sizeof(float));
    float **parts[8] = {&s->ones,       &s->zeros,     &s->mean,   &s->invstd,
                        &s->batch_mean, &s->batch_var, &s->dscale, &s->dbias};
    for (int i = 0; i < 8; i++) *parts[i] = s->buf + (size_t)i * C;
    ct_gpu_set(l->ctx, (size_t)C, 1.0f, s->ones);
    l->gpu_priv = s;
  }
  s->N = N;
  s->S = S;
  s->eps = eps;
  s->f = f;
  s->use_global = use_global;
  s->in_place = in_place;
  s->type = l->dtype;
  s->layout = l->layout;
  s->ex = false;
  s->ex_ws_bytes = 0;
  const int dims[4] = {N, C, (int)S, 1};
  if (ct_cudnn_set_tensor_layout(s->x, s->type, s->layout, 4, dims) != CUDNN_STATUS_SUCCESS ||
      cudnnDeriveBNTensorDescriptor(s->bn, s->x, CUDNN_BATCHNORM_SPATIAL) != CUDNN_STATUS_SUCCESS) {
    ct_bn_cudnn_destroy(l);
    return CT_OK;
  }
  s->relu = false;
  if (s->type != CT_F32 && s->layout == CT_NHWC && !use_global) {
    /* cuDNN's persistent kernels where it has them for these tensors */
    size_t ws = 0, reserve = 0;
    s->ex = ex_sizes((cudnnHandle_t)l->ctx->cudnn, s, relu, &ws, &reserve);
    if (relu && !s->ex)
      return ct_error_set(err, CT_ERR_UNSUPPORTED,
                          "cuDNN cannot fuse the ReLU for the new shape; build the net without "
                          "fusion");
    s->relu = relu;
    if (s->ex) {
      s->ex_ws_bytes = ws;
      if (reserve > s->reserve_bytes) {
        if (s->reserve) ct_mem_free(l->ctx->device, s->reserve);
        s->reserve = ct_mem_alloc(l->ctx->device, reserve);
        s->reserve_bytes = reserve;
      }
    }
  }
  /* in place: the copy of dy; a discarded dx after it; then cuDNN's own */
  size_t copies = (in_place ? 1 : 0) + (discard_dx ? 1 : 0);
  const size_t copy_bytes = copies * (size_t)N * C * S * ct_dtype_size(s->type);
  if (!use_global && (copies || s->ex_ws_bytes))
    ct_context_workspace(l->ctx, ((copy_bytes + 255) & ~(size_t)255) + s->ex_ws_bytes);
  return CT_OK;
}

/* ---------------------------------------------------------------- kernels */

#define BN_THREADS 256

/* Caffe's sums from the batch statistics (var unbiased). */
__global__ static void bn_fold(int C, float f, const float *batch_mean, const float *batch_var,
                               float *mean_sum, float *var_sum, float *factor) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  mean_sum[c] = batch_mean[c] + f * mean_sum[c];
  var_sum[c] = batch_var[c] + f * var_sum[c];
  if (c == 0) factor[0] = factor[0] * f + 1.0f;
}

/* The global statistics: the sums over the factor (0 when it is 0); shift
 * (may be NULL): -mean / std, the affine form's offset. */
__global__ static void bn_global(int C, float eps, const float *mean_sum, const float *var_sum,
                                 const float *factor, float *mean, float *invstd, float *shift) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float k = factor[0] == 0.0f ? 0.0f : 1.0f / factor[0];
  mean[c] = k * mean_sum[c];
  invstd[c] = 1.0f / sqrtf(k * var_sum[c] + eps);
  if (shift) shift[c] = -mean[c] * invstd[c];
}

/* y = (x - mean) * invstd per channel; y may be x. */
__global__ static void bn_apply(size_t n, int C, size_t S, const float *x, const float *mean,
                                const float *invstd, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    int c = (int)((i / S) % C);
    y[i] = (x[i] - mean[c]) * invstd[c];
  }
}

/* dx = dy * invstd per channel; dx may be dy. */
__global__ static void bn_scale(size_t n, int C, size_t S, const float *dy, const float *invstd,
                                float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = dy[i] * invstd[(i / S) % C];
}

static unsigned channel_blocks(int C) { return (unsigned)((C + BN_THREADS - 1) / BN_THREADS); }

/* ---------------------------------------------------------------- forward / backward */

static ct_channel_geom channel_geom(const bn_cudnn *s) {
  return (ct_channel_geom){s->type, s->layout == CT_NHWC, (size_t)s->N, (size_t)s->C, s->S};
}

/* cuDNN's part of the context's workspace for the *Ex calls. */
static void *ex_workspace(const ct_layer *l, const bn_cudnn *s, size_t copies) {
  const size_t n = (size_t)s->N * s->C * s->S;
  const size_t at = (copies * n * ct_dtype_size(s->type) + 255) & ~(size_t)255;
  CT_ASSERT(l->ctx->workspace_bytes >= at + s->ex_ws_bytes);
  return (char *)l->ctx->workspace + at;
}

extern "C" void ct_bn_cudnn_forward(ct_layer *l, const void *x, void *y, void *xsave,
                                    const float *gamma, const float *beta) {
  bn_cudnn *s = (bn_cudnn *)l->gpu_priv;
  cudaStream_t stream = (cudaStream_t)l->ctx->stream;
  const size_t n = (size_t)s->N * s->C * s->S;
  float *mean_sum = ct_f32(l->params[0]), *var_sum = ct_f32(l->params[1]);
  float *factor = ct_f32(l->params[2]);
  if (s->use_global) {
    CT_ASSERT(!gamma && !beta);
    const bool typed = s->type != CT_F32;
    bn_global<<<channel_blocks(s->C), BN_THREADS, 0, stream>>>(
        s->C, s->eps, mean_sum, var_sum, factor, s->mean, s->invstd, typed ? s->batch_mean : NULL);
    CT_CUDA_LAUNCH_CHECK();
    if (typed) {
      /* y = x / std - mean / std */
      const ct_channel_geom g = channel_geom(s);
      ct_channel_affine_gpu(l->ctx, &g, x, s->invstd, s->batch_mean, false, NULL, y);
      return;
    }
    bn_apply<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, stream>>>(n, s->C, s->S, (const float *)x,
                                                                s->mean, s->invstd, (float *)y);
    CT_CUDA_LAUNCH_CHECK();
    return;
  }
  CT_ASSERT(s->in_place == (x == y));
  if (s->in_place) {
    CT_CUDA_CHECK(cudaMemcpyAsync(xsave, x, n * ct_dtype_size(s->type), cudaMemcpyDeviceToDevice,
                                  stream));
    x = xsave;
  }
  if (s->ex)
    CT_CUDNN_CHECK(cudnnBatchNormalizationForwardTrainingEx(
        (cudnnHandle_t)l->ctx->cudnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT,
        s->relu ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN, &k_one, &k_zero,
        s->x, x, NULL, NULL, s->x, y, s->bn, gamma ? gamma : s->ones, beta ? beta : s->zeros, 1.0,
        s->batch_mean, s->batch_var, s->eps, s->mean, s->invstd, s->relu ? s->act : NULL,
        ex_workspace(l, s, 0), s->ex_ws_bytes, s->reserve, s->reserve_bytes));
  else
    CT_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        (cudnnHandle_t)l->ctx->cudnn, CUDNN_BATCHNORM_SPATIAL, &k_one, &k_zero, s->x, x, s->x, y,
        s->bn, gamma ? gamma : s->ones, beta ? beta : s->zeros, 1.0, s->batch_mean, s->batch_var,
        s->eps, s->mean, s->invstd));
  if (l->recomputing) return; /* the running statistics stay (layer.h) */
  bn_fold<<<channel_blocks(s->C), BN_THREADS, 0, stream>>>(s->C, s->f, s->batch_mean, s->batch_var,
                                                           mean_sum, var_sum, factor);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_bn_cudnn_backward(ct_layer *l, const void *x, const void *xsave,
                                     const void *y, const void *dy, void *dx, const float *gamma,
                                     const float *beta, float *dgamma, float *dbeta) {
  bn_cudnn *s = (bn_cudnn *)l->gpu_priv;
  cudaStream_t stream = (cudaStream_t)l->ctx->stream;
  const size_t n = (size_t)s->N * s->C * s->S;
  if (s->use_global) {
    CT_ASSERT(dx && !gamma);
    if (s->type != CT_F32) {
      const ct_channel_geom g = channel_geom(s);
      ct_channel_affine_gpu(l->ctx, &g, dy, s->invstd, NULL, false, NULL, dx);
      return;
    }
    bn_scale<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, stream>>>(n, s->C, s->S, (const float *)dy,
                                                                s->invstd, (float *)dx);
    CT_CUDA_LAUNCH_CHECK();
    return;
  }
  char *ws = (char *)l->ctx->workspace;
  const size_t bytes = n * ct_dtype_size(s->type);
  size_t copies = (s->in_place ? 1 : 0) + (dx ? 0 : 1);
  CT_ASSERT(l->ctx->workspace_bytes >= copies * bytes);
  if (s->in_place) {
    CT_CUDA_CHECK(cudaMemcpyAsync(ws, dy, bytes, cudaMemcpyDeviceToDevice, stream));
    dy = ws;
    x = xsave;
  }
  if (!dx) dx = ws + (s->in_place ? bytes : 0);
  /* Both parameter gradients wanted: cuDNN accumulates into them; else into
   * its own arrays, then the one wanted is added. */
  const bool both = dgamma && dbeta;
  if (s->ex)
    CT_CUDNN_CHECK(cudnnBatchNormalizationBackwardEx(
        (cudnnHandle_t)l->ctx->cudnn, CUDNN_BATCHNORM_SPATIAL_PERSISTENT,
        s->relu ? CUDNN_BATCHNORM_OPS_BN_ACTIVATION : CUDNN_BATCHNORM_OPS_BN, &k_one, &k_zero,
        &k_one, both ? &k_one : &k_zero, s->x, x, s->relu ? s->x : NULL, s->relu ? y : NULL, s->x,
        dy, NULL, NULL, s->x, dx, s->bn, gamma ? gamma : s->ones, beta ? beta : s->zeros,
        both ? dgamma : s->dscale, both ? dbeta : s->dbias, s->eps, s->mean, s->invstd,
        s->relu ? s->act : NULL, ex_workspace(l, s, copies), s->ex_ws_bytes, s->reserve,
        s->reserve_bytes));
  else
    CT_CUDNN_CHECK(cudnnBatchNormalizationBackward(
        (cudnnHandle_t)l->ctx->cudnn, CUDNN_BATCHNORM_SPATIAL, &k_one, &k_zero, &k_one,
        both ? &k_one : &k_zero, s->x, x, s->x, dy, s->x, dx, s->bn, gamma ? gamma : s->ones,
        both ? dgamma : s->dscale, both ? dbeta : s->dbias, s->eps, s->mean, s->invstd));
  if (!both && dgamma) ct_gpu_axpy(l->ctx, (size_t)s->C, 1.0f, s->dscale, dgamma);
  if (!both && dbeta) ct_gpu_axpy(l->ctx, (size_t)s->C, 1.0f, s->dbias, dbeta);
}
