/* Softmax on cuDNN: see softmax_cudnn.h. */
#include <stdint.h>
#include <stdlib.h>

#include "gpu/cudnn_util.h"
#include "layers/softmax_cudnn.h"

typedef struct softmax_cudnn {
  cudnnTensorDescriptor_t x; /* (outer, channels, inner, 1) for x, y, dy and dx */
} softmax_cudnn;

static const float k_one = 1.0f, k_zero = 0.0f;

extern "C" void ct_softmax_cudnn_destroy(ct_layer *l) {
  softmax_cudnn *s = (softmax_cudnn *)l->gpu_priv;
  if (!s) return;
  cudnnDestroyTensorDescriptor(s->x);
  free(s);
  l->gpu_priv = NULL;
}

extern "C" ct_status ct_softmax_cudnn_reshape(ct_layer *l, int engine, size_t outer, int channels,
                                              size_t inner, bool in_place, ct_error *err) {
  const char *why = NULL;
  if (in_place) why = "cuDNN's softmax does not promise to run in place";
  else if (outer == 0 || channels <= 0 || inner == 0) why = "an empty bottom";
  else if (outer * channels * inner > INT32_MAX) why = "a bottom of more than 2^31 values";
  if (!ct_cudnn_wanted(l->name, engine, why)) {
    ct_softmax_cudnn_destroy(l);
    return CT_OK;
  }
  softmax_cudnn *s = (softmax_cudnn *)l->gpu_priv;
  if (!s) {
    s = (softmax_cudnn *)ct_xcalloc(1, sizeof *s);
    CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->x));
    l->gpu_priv = s;
  }
  const int dims[4] = {(int)outer, channels, (int)inner, 1};
  if (ct_cudnn_set_tensor(s->x, 4, dims) != CUDNN_STATUS_SUCCESS) {
    ct_cudnn_wanted(l->name, engine, "cuDNN refuses the shape");
    ct_softmax_cudnn_destroy(l);
  }
  return CT_OK;
}

extern "C" void ct_softmax_cudnn_forward(ct_layer *l, const float *x, float *y) {
  const softmax_cudnn *s = (const softmax_cudnn *)l->gpu_priv;
  CT_CUDNN_CHECK(cudnnSoftmaxForward((cudnnHandle_t)l->ctx->cudnn, CUDNN_SOFTMAX_ACCURATE,
                                     CUDNN_SOFTMAX_MODE_CHANNEL, &k_one, s->x, x, &k_zero, s->x,
                                     y));
}

extern "C" void ct_softmax_cudnn_backward(ct_layer *l, const float *y, const float *dy, float *dx) {
  const softmax_cudnn *s = (const softmax_cudnn *)l->gpu_priv;
  CT_CUDNN_CHECK(cudnnSoftmaxBackward((cudnnHandle_t)l->ctx->cudnn, CUDNN_SOFTMAX_ACCURATE,
                                      CUDNN_SOFTMAX_MODE_CHANNEL, &k_one, s->x, y, s->x, dy,
                                      &k_zero, s->x, dx));
}
