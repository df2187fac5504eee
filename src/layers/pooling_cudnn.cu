/* Pooling on cuDNN: see pooling_cudnn.h. */
#include <stdint.h>
#include <stdlib.h>

#include "gpu/cudnn_util.h"
#include "layers/pooling_cudnn.h"

enum { POOL_MAX = 0, POOL_AVE = 1 };

typedef struct pool_cudnn {
  cudnnPoolingDescriptor_t pool;
  cudnnTensorDescriptor_t x, y; /* (N, C, H, W) and (N, C, PH, PW) */
} pool_cudnn;

static const float k_one = 1.0f, k_zero = 0.0f;

extern "C" void ct_pool_cudnn_destroy(ct_layer *l) {
  pool_cudnn *s = (pool_cudnn *)l->gpu_priv;
  if (!s) return;
  cudnnDestroyPoolingDescriptor(s->pool);
  cudnnDestroyTensorDescriptor(s->x);
  cudnnDestroyTensorDescriptor(s->y);
  free(s);
  l->gpu_priv = NULL;
}

/* Why cuDNN cannot pool exactly as Caffe does, or NULL. */
static const char *unsupported(const ct_layer *l, const ct_pool_geom *g) {
  if (l->ntop > 1) return "cuDNN gives no argmax for a second top";
  if (g->method != POOL_MAX && g->method != POOL_AVE) return "cuDNN has no STOCHASTIC pooling";
  if ((g->H + 2 * g->ph - g->kh) / g->sh + 1 != g->PH ||
      (g->W + 2 * g->pw - g->kw) / g->sw + 1 != g->PW)
    return "Caffe's output size (rounded up) is larger than cuDNN's (rounded down)";
  if ((int64_t)g->N * g->C * g->H * g->W > INT32_MAX) return "a bottom of more than 2^31 values";
  return NULL;
}

static bool set_descriptors(pool_cudnn *s, const ct_pool_geom *g) {
  const int xdims[4] = {g->N, g->C, g->H, g->W}, ydims[4] = {g->N, g->C, g->PH, g->PW};
  const cudnnPoolingMode_t mode =
      g->method == POOL_MAX ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
  int n, c, h, w;
  return ct_cudnn_set_tensor(s->x, 4, xdims) == CUDNN_STATUS_SUCCESS &&
         ct_cudnn_set_tensor(s->y, 4, ydims) == CUDNN_STATUS_SUCCESS &&
         cudnnSetPooling2dDescriptor(s->pool, mode, CUDNN_NOT_PROPAGATE_NAN, g->kh, g->kw, g->ph,
                                     g->pw, g->sh, g->sw) == CUDNN_STATUS_SUCCESS &&
         cudnnGetPooling2dForwardOutputDim(s->pool, s->x, &n, &c, &h, &w) ==
             CUDNN_STATUS_SUCCESS &&
         h == g->PH && w == g->PW;
}

extern "C" ct_status ct_pool_cudnn_reshape(ct_layer *l, const ct_pool_geom *g, int engine,
                                           ct_error *err) {
  if (!ct_cudnn_wanted(l->name, engine, unsupported(l, g))) {
    ct_pool_cudnn_destroy(l);
    return CT_OK;
  }
  pool_cudnn *s = (pool_cudnn *)l->gpu_priv;
  if (!s) {
    s = (pool_cudnn *)ct_xcalloc(1, sizeof *s);
    CT_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&s->pool));
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->x));
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->y));
    l->gpu_priv = s;
  }
  if (!set_descriptors(s, g)) {
    ct_cudnn_wanted(l->name, engine, "cuDNN refuses the window, pad or stride");
    ct_pool_cudnn_destroy(l);
  }
  return CT_OK;
}

extern "C" void ct_pool_cudnn_forward(ct_layer *l, const float *x, float *y) {
  const pool_cudnn *s = (const pool_cudnn *)l->gpu_priv;
  CT_CUDNN_CHECK(cudnnPoolingForward((cudnnHandle_t)l->ctx->cudnn, s->pool, &k_one, s->x, x,
                                     &k_zero, s->y, y));
}

extern "C" void ct_pool_cudnn_backward(ct_layer *l, const float *x, const float *y,
                                       const float *dy, float *dx) {
  const pool_cudnn *s = (const pool_cudnn *)l->gpu_priv;
  CT_CUDNN_CHECK(cudnnPoolingBackward((cudnnHandle_t)l->ctx->cudnn, s->pool, &k_one, s->y, y, s->y,
                                      dy, s->x, x, &k_zero, s->x, dx));
}
