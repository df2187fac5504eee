/* ReLU: y = max(x, 0) + negative_slope * min(x, 0).  In-place safe. */
#include "layers/layer.h"
#include "layers/relu.h"
#include "math/typed.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/activation_cudnn.h"
#endif

static ct_status relu_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  return CT_OK;
}

static ct_status relu_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  if (top[0] != bottom[0]) ct_tensor_reshape_like(top[0], bottom[0]);
  return CT_OK;
}

static float negative_slope(const ct_layer *l) {
  return l->param->relu_param ? l->param->relu_param->negative_slope : 0.0f;
}

/* 16-bit values: computed in float32, rounded once (exact for slope 0).
 * bfloat16 has loops of its own, which the compiler vectorises (the
 * per-element type switch kept it from that: 0.9 ms for cifar10_quick's
 * relu1 on 2 cores). */
static void relu_forward_typed(ct_dtype t, size_t n, float slope, const void *x, void *y) {
  if (t == CT_BF16) {
    const uint16_t *xs = x;
    uint16_t *ys = y;
#pragma omp parallel for simd if (n >= 65536) schedule(static)
    for (size_t i = 0; i < n; i++) {
      const float v = ct_bf16_to_f32(xs[i]);
      ys[i] = ct_f32_to_bf16(v > 0 ? v : slope * v);
    }
    return;
  }
#pragma omp parallel for if (n >= 65536) schedule(static)
  for (size_t i = 0; i < n; i++) {
    float v = ct_typed_load(t, x, i);
    ct_typed_store(t, y, i, v > 0 ? v : slope * v);
  }
}

static void relu_backward_typed(ct_dtype t, size_t n, float slope, const void *x, const void *dy,
                                void *dx) {
  if (t == CT_BF16) {
    const uint16_t *xs = x, *dys = dy;
    uint16_t *dxs = dx;
#pragma omp parallel for simd if (n >= 65536) schedule(static)
    for (size_t i = 0; i < n; i++)
      dxs[i] = ct_f32_to_bf16(ct_bf16_to_f32(dys[i]) * (ct_bf16_to_f32(xs[i]) > 0 ? 1.0f : slope));
    return;
  }
#pragma omp parallel for if (n >= 65536) schedule(static)
  for (size_t i = 0; i < n; i++)
    ct_typed_store(t, dx, i, ct_typed_load(t, dy, i) * (ct_typed_load(t, x, i) > 0 ? 1.0f : slope));
}

static ct_status relu_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  if (l->dtype != CT_F32) {
    relu_forward_typed(l->dtype, bottom[0]->count, negative_slope(l), bottom[0]->data, top[0]->data);
    return CT_OK;
  }
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  const float slope = negative_slope(l);
  const size_t n = bottom[0]->count;
  /* x and y are one array in place: each element is read before it is written */
#pragma omp parallel for simd if (n >= 65536) schedule(static)
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : slope * x[i];
  return CT_OK;
}

/* In place, bottom data already holds y; sign(y) == sign(x) for slope > 0, and
 * for slope 0 the gradient at y == 0 is 0 either way (Caffe's convention). */
static void relu_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  if (l->dtype != CT_F32) {
    relu_backward_typed(l->dtype, bottom[0]->count, negative_slope(l), bottom[0]->data,
                        top[0]->diff, bottom[0]->diff);
    return;
  }
  const float *x = bottom[0]->data, *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  const float slope = negative_slope(l);
  const size_t n = bottom[0]->count;
#pragma omp parallel for simd if (n >= 65536) schedule(static)
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (x[i] > 0 ? 1.0f : slope);
}

#ifdef CORTADO_HAVE_CUDA
/* cuDNN runs the layer unless the engine field or the settings say
 * otherwise (l->gpu_priv set). */
static ct_status relu_reshape_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  const Caffe__ReLUParameter *p = CT_PARAM_OR_DEFAULT(l, relu_param, CAFFE__RE_LUPARAMETER__INIT);
  if (l->dtype != CT_F32) return CT_OK; /* Cortado's kernels (relu.cu) */
  const char *why = p->negative_slope != 0.0f ? "cuDNN has no leaky ReLU" : NULL;
  return ct_act_cudnn_reshape(l, CT_ACT_CUDNN_RELU, (int)p->engine, why, bottom[0], top[0], err);
}

static ct_status relu_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  if (l->dtype != CT_F32) {
    ct_relu_forward_gpu_typed(l->ctx, l->dtype, bottom[0]->count, negative_slope(l),
                              bottom[0]->data, top[0]->data);
    return CT_OK;
  }
  if (l->gpu_priv) {
    ct_act_cudnn_forward(l, bottom[0]->data, top[0]->data);
    return CT_OK;
  }
  ct_relu_forward_gpu(l->ctx, bottom[0]->count, negative_slope(l), bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void relu_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  if (l->dtype != CT_F32) {
    ct_relu_backward_gpu_typed(l->ctx, l->dtype, bottom[0]->count, negative_slope(l),
                               bottom[0]->data, top[0]->diff, bottom[0]->diff);
    return;
  }
  if (l->gpu_priv) {
    ct_act_cudnn_backward(l, bottom[0]->data, top[0]->data, top[0]->diff, bottom[0]->diff);
    return;
  }
  ct_relu_backward_gpu(l->ctx, bottom[0]->count, negative_slope(l), bottom[0]->data, top[0]->diff,
                       bottom[0]->diff);
}
#endif

const ct_layer_ops ct_relu_ops = {
    .type = "ReLU",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = relu_setup,
    .reshape = relu_reshape,
    .forward_cpu = relu_forward_cpu,
    .backward_cpu = relu_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = relu_forward_gpu,
    .backward_gpu = relu_backward_gpu,
    .reshape_gpu = relu_reshape_gpu,
    .destroy_gpu = ct_act_cudnn_destroy,
#endif
    .dtypes_cpu = CT_DTYPE_BIT(CT_BF16),
    .dtypes_gpu = CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16),
    .layouts_cpu = CT_LAYOUTS_ANY, /* element-wise */
    .layouts_gpu = CT_LAYOUTS_ANY,
};
