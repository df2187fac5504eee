/* ReLU, Sigmoid and TanH on cuDNN: see activation_cudnn.h. */
#include <stdint.h>
#include <stdlib.h>

#include "gpu/cudnn_util.h"
#include "layers/activation_cudnn.h"

typedef struct act_cudnn {
  cudnnActivationDescriptor_t act;
  cudnnTensorDescriptor_t x; /* (1, 1, 1, count) for x, y, dy and dx */
} act_cudnn;

static const float k_one = 1.0f, k_zero = 0.0f;

extern "C" void ct_act_cudnn_destroy(ct_layer *l) {
  act_cudnn *s = (act_cudnn *)l->gpu_priv;
  if (!s) return;
  cudnnDestroyActivationDescriptor(s->act);
  cudnnDestroyTensorDescriptor(s->x);
  free(s);
  l->gpu_priv = NULL;
}

extern "C" ct_status ct_act_cudnn_reshape(ct_layer *l, ct_act_cudnn_mode mode, int engine,
                                          const char *unsupported, const ct_tensor *bottom,
                                          const ct_tensor *top, ct_error *err) {
  const char *why = unsupported;
  if (!why && (bottom->count == 0 || bottom->count > INT32_MAX))
    why = "an empty bottom or one over 2^31 values";
  if (!ct_cudnn_wanted(l->name, engine, why)) {
    ct_act_cudnn_destroy(l);
    return CT_OK;
  }
  act_cudnn *s = (act_cudnn *)l->gpu_priv;
  if (!s) {
    s = (act_cudnn *)ct_xcalloc(1, sizeof *s);
    CT_CUDNN_CHECK(cudnnCreateActivationDescriptor(&s->act));
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->x));
    l->gpu_priv = s;
  }
  const cudnnActivationMode_t m = mode == CT_ACT_CUDNN_RELU      ? CUDNN_ACTIVATION_RELU
                                  : mode == CT_ACT_CUDNN_SIGMOID ? CUDNN_ACTIVATION_SIGMOID
                                                                 : CUDNN_ACTIVATION_TANH;
  /* NaN in, NaN out, as the CAFFE engine's x > 0 ? x : 0 * x. */
  if (cudnnSetActivationDescriptor(s->act, m, CUDNN_PROPAGATE_NAN, 0.0) != CUDNN_STATUS_SUCCESS ||
      ct_cudnn_set_flat(s->x, bottom->count) != CUDNN_STATUS_SUCCESS) {
    ct_cudnn_wanted(l->name, engine, "cuDNN refuses the shape");
    ct_act_cudnn_destroy(l);
  }
  return CT_OK;
}

extern "C" void ct_act_cudnn_forward(ct_layer *l, const float *x, float *y) {
  const act_cudnn *s = (const act_cudnn *)l->gpu_priv;
  CT_CUDNN_CHECK(cudnnActivationForward((cudnnHandle_t)l->ctx->cudnn, s->act, &k_one, s->x, x,
                                        &k_zero, s->x, y));
}

extern "C" void ct_act_cudnn_backward(ct_layer *l, const float *x, const float *y, const float *dy,
                                      float *dx) {
  const act_cudnn *s = (const act_cudnn *)l->gpu_priv;
  CT_CUDNN_CHECK(cudnnActivationBackward((cudnnHandle_t)l->ctx->cudnn, s->act, &k_one, s->x, y,
                                         s->x, dy, s->x, x, &k_zero, s->x, dx));
}
