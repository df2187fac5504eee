/* LRN on cuDNN: see lrn_cudnn.h. */
#include <stdint.h>
#include <stdlib.h>

#include "gpu/cudnn_util.h"
#include "layers/lrn_cudnn.h"

typedef struct lrn_cudnn {
  cudnnLRNDescriptor_t lrn;
  cudnnTensorDescriptor_t x; /* (N, C, H, W), for x, y, dy and dx */
} lrn_cudnn;

static const float k_one = 1.0f, k_zero = 0.0f;

extern "C" void ct_lrn_cudnn_destroy(ct_layer *l) {
  lrn_cudnn *s = (lrn_cudnn *)l->gpu_priv;
  if (!s) return;
  cudnnDestroyLRNDescriptor(s->lrn);
  cudnnDestroyTensorDescriptor(s->x);
  free(s);
  l->gpu_priv = NULL;
}

static const char *unsupported(const Caffe__LRNParameter *p, const ct_tensor *bottom,
                               const ct_tensor *top) {
  if (p->norm_region != CAFFE__LRNPARAMETER__NORM_REGION__ACROSS_CHANNELS)
    return "cuDNN normalises across channels only";
  if (p->local_size < CUDNN_LRN_MIN_N || p->local_size > CUDNN_LRN_MAX_N)
    return "cuDNN's window spans 1 to 16 channels";
  if (p->k < CUDNN_LRN_MIN_K) return "cuDNN needs k >= 1e-5";
  if (p->beta < CUDNN_LRN_MIN_BETA) return "cuDNN needs beta >= 0.01";
  if (bottom == top) return "cuDNN's LRN does not run in place";
  if (bottom->count == 0 || bottom->count > INT32_MAX)
    return "an empty bottom or one over 2^31 values";
  return NULL;
}

extern "C" ct_status ct_lrn_cudnn_reshape(ct_layer *l, const Caffe__LRNParameter *p,
                                          const ct_tensor *bottom, const ct_tensor *top,
                                          ct_error *err) {
  if (!ct_cudnn_wanted(l->name, (int)p->engine, unsupported(p, bottom, top))) {
    ct_lrn_cudnn_destroy(l);
    return CT_OK;
  }
  lrn_cudnn *s = (lrn_cudnn *)l->gpu_priv;
  if (!s) {
    s = (lrn_cudnn *)ct_xcalloc(1, sizeof *s);
    CT_CUDNN_CHECK(cudnnCreateLRNDescriptor(&s->lrn));
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->x));
    l->gpu_priv = s;
  }
  if (ct_cudnn_set_tensor(s->x, 4, bottom->shape) != CUDNN_STATUS_SUCCESS ||
      cudnnSetLRNDescriptor(s->lrn, p->local_size, p->alpha, p->beta, p->k) !=
          CUDNN_STATUS_SUCCESS) {
    ct_cudnn_wanted(l->name, (int)p->engine, "cuDNN refuses the shape or the parameters");
    ct_lrn_cudnn_destroy(l);
  }
  return CT_OK;
}

extern "C" void ct_lrn_cudnn_forward(ct_layer *l, const float *x, float *y) {
  const lrn_cudnn *s = (const lrn_cudnn *)l->gpu_priv;
  CT_CUDNN_CHECK(cudnnLRNCrossChannelForward((cudnnHandle_t)l->ctx->cudnn, s->lrn,
                                             CUDNN_LRN_CROSS_CHANNEL_DIM1, &k_one, s->x, x,
                                             &k_zero, s->x, y));
}

extern "C" void ct_lrn_cudnn_backward(ct_layer *l, const float *x, const float *y, const float *dy,
                                      float *dx) {
  const lrn_cudnn *s = (const lrn_cudnn *)l->gpu_priv;
  CT_CUDNN_CHECK(cudnnLRNCrossChannelBackward((cudnnHandle_t)l->ctx->cudnn, s->lrn,
                                              CUDNN_LRN_CROSS_CHANNEL_DIM1, &k_one, s->x, y, s->x,
                                              dy, s->x, x, &k_zero, s->x, dx));
}
