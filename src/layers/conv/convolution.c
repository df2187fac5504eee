/* Convolution: top = W * im2col(bottom) (+ bias), per group, for every
 * bottom/top pair (all bottoms share the weights and must have one shape).
 * The reference engine (chunked im2col + GEMM, shared with Deconvolution) is
 * in conv_common.c; the same code runs on the host and on a GPU through the
 * context's backend.  On the host, layers planned for oneDNN at reshape run
 * it instead (conv_dnnl.h). */
#include "layers/conv/conv_common.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/conv/conv_cudnn.h"
#include "layers/conv/conv_depthwise.h"
#endif

#include "layers/conv/conv_dnnl.h"

extern const ct_layer_ops ct_convolution_ops;

bool ct_conv_absorb_relu(ct_layer *conv, bool backward_ok, bool *backward_too) {
  *backward_too = false;
  if (conv->ops != &ct_convolution_ops || conv->ctx->device == CT_DEVICE_CPU) return false;
#ifdef CORTADO_HAVE_CUDA
  return ct_conv_cudnn_absorb_relu(conv, backward_ok, backward_too);
#else
  return false;
#endif
}

bool ct_conv_defer_bias(ct_layer *conv) {
  if (conv->ops != &ct_convolution_ops || conv->ctx->device == CT_DEVICE_CPU) return false;
#ifdef CORTADO_HAVE_CUDA
  return ct_conv_cudnn_defer_bias(conv);
#else
  return false;
#endif
}

static ct_status conv_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  return ct_conv_setup(l, bottom, false, err);
}

static ct_status conv_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  ct_conv *c = l->priv;
  const ct_conv_backend *be = ct_conv_backend_of(l->ctx);
  const float *w = l->params[0]->data;
  const size_t xdim = (size_t)c->x_channels * c->x_spatial;
  const size_t ydim = (size_t)c->y_channels * c->y_spatial;
  for (int i = 0; i < l->nbottom; i++) {
    for (int b0 = 0; b0 < c->num; b0 += c->chunk) {
      int B = c->num - b0 < c->chunk ? c->num - b0 : c->chunk;
      float *y = ct_f32(top[i]) + b0 * ydim;
      float *rows = ct_conv_rows_out(c, y, B);
      ct_conv_y_from_x(c, be, l->ctx, w, ct_f32(bottom[i]) + b0 * xdim, B, false, rows);
      if (c->bias_term)
        be->add_bias(l->ctx, l->params[1]->data, 1, c->y_channels, B * c->y_spatial, rows);
      ct_conv_rows_store(c, be, l->ctx, rows, B, y);
    }
  }
  return CT_OK;
}

/* Chunks in reverse, so that the first one reuses forward's last unfolding. */
static void conv_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                          ct_tensor *const *bottom) {
  ct_conv *c = l->priv;
  const ct_conv_backend *be = ct_conv_backend_of(l->ctx);
  const bool wgrad = l->param_propagate_down[0];
  const bool bgrad = c->bias_term && l->param_propagate_down[1];
  const size_t xdim = (size_t)c->x_channels * c->x_spatial;
  const size_t ydim = (size_t)c->y_channels * c->y_spatial;
  const int nchunks = (c->num + c->chunk - 1) / c->chunk;
  for (int i = l->nbottom - 1; i >= 0; i--) {
    if (!wgrad && !bgrad && !propagate_down[i]) continue;
    for (int k = nchunks - 1; k >= 0; k--) {
      int b0 = k * c->chunk;
      int B = c->num - b0 < c->chunk ? c->num - b0 : c->chunk;
      const float *rows = ct_conv_rows_in(c, be, l->ctx, ct_f32_diff(top[i]) + b0 * ydim, B);
      if (bgrad)
        be->bias_grad(l->ctx, rows, 1, c->y_channels, B * c->y_spatial, l->params[1]->diff);
      if (wgrad)
        ct_conv_weight_grad(c, be, l->ctx, rows, ct_f32(bottom[i]) + b0 * xdim, B,
                            l->params[0]->diff);
      if (propagate_down[i])
        ct_conv_x_from_y(c, be, l->ctx, l->params[0]->data, rows, B,
                         ct_f32_diff(bottom[i]) + b0 * xdim);
    }
  }
}

#ifdef CORTADO_HAVE_CUDA
/* The depthwise kernels or the cuDNN engine when reshape chose one
 * (c->dw, l->gpu_priv), else this engine. */
static ct_status conv_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  ct_conv *c = l->priv;
  if (c->dw) {
    const float *bias = c->bias_term ? l->params[1]->data : NULL;
    for (int i = 0; i < l->nbottom; i++)
      ct_conv_dw_forward(l->ctx, c->dw, c, l->dtype, l->layout == CT_NHWC, bottom[i]->data,
                         l->params[0]->data, bias, top[i]->data);
    return CT_OK;
  }
  if (l->gpu_priv) return ct_conv_cudnn_forward(l, bottom, top, err);
  return conv_forward(l, bottom, top, err);
}

static void conv_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  ct_conv *c = l->priv;
  if (c->dw) {
    float *dw = l->param_propagate_down[0] ? l->params[0]->diff : NULL;
    float *dbias = c->bias_term && l->param_propagate_down[1] ? l->params[1]->diff : NULL;
    for (int i = l->nbottom - 1; i >= 0; i--) {
      if (dw || dbias)
        ct_conv_dw_backward_params(l->ctx, c->dw, c, l->dtype, l->layout == CT_NHWC,
                                   bottom[i]->data, top[i]->diff, dw, dbias);
      if (propagate_down[i])
        ct_conv_dw_backward_data(l->ctx, c->dw, c, l->dtype, l->layout == CT_NHWC, top[i]->diff,
                                 l->params[0]->data, bottom[i]->diff);
    }
    return;
  }
  if (l->gpu_priv) ct_conv_cudnn_backward(l, top, propagate_down, bottom);
  else conv_backward(l, top, propagate_down, bottom);
}

static bool conv_prepare_gpu(ct_layer *l, ct_context *side, bool bottom_grad) {
  return l->gpu_priv && ct_conv_cudnn_prepare(l, side, bottom_grad);
}

static void conv_destroy_gpu(ct_layer *l) {
  ct_conv *c = l->priv;
  ct_conv_cudnn_destroy(l);
  if (c) {
    ct_conv_dw_free(c->dw, l->ctx->device);
    c->dw = NULL;
  }
}
#endif

/* The host: oneDNN for the whole batch when planned, else the reference. */
static ct_status conv_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  ct_conv *c = l->priv;
  if (!c->fast) return conv_forward(l, bottom, top, err);
  const float *bias = c->bias_term ? l->params[1]->data : NULL;
  for (int i = 0; i < l->nbottom; i++) {
    ct_conv_dnnl_forget(c->fast, CT_CONV_DNNL_SLOT_X);
    ct_conv_dnnl_y_from_x(c->fast, l->params[0]->data, bias, bottom[i]->data, top[i]->data);
  }
  return CT_OK;
}

/* Backward weights reuses forward's reorder of the bottom (the last bottom
 * first), and backward data the weight gradient's reorder of the top diff. */
static void conv_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  ct_conv *c = l->priv;
  if (!c->fast) {
    conv_backward(l, top, propagate_down, bottom);
    return;
  }
  const bool wgrad = l->param_propagate_down[0];
  const bool bgrad = c->bias_term && l->param_propagate_down[1];
  for (int i = l->nbottom - 1; i >= 0; i--) {
    ct_conv_dnnl_forget(c->fast, CT_CONV_DNNL_SLOT_Y);
    if (wgrad || bgrad)
      ct_conv_dnnl_weight_grad(c->fast, bottom[i]->data, top[i]->diff,
                               wgrad ? l->params[0]->diff : NULL,
                               bgrad ? l->params[1]->diff : NULL);
    if (propagate_down[i])
      ct_conv_dnnl_x_from_y(c->fast, l->params[0]->data, top[i]->diff, bottom[i]->diff);
  }
}

/* Backward reads the bottoms (the weight gradient); the top only where a
 * fused ReLU's backward reads its gate there (16-bit GPU layers). */
static void conv_backward_reads(const ct_layer *l, bool *bottoms, bool *tops) {
  const ct_conv *c = l->priv;
  (void)bottoms;
  for (int i = 0; i < l->ntop; i++) tops[i] = c && c->relu_bwd_fused && i == 0;
}

const ct_layer_ops ct_convolution_ops = {
    .type = "Convolution",
    .min_bottoms = 1, .max_bottoms = -1, .min_tops = 1, .max_tops = -1,
    .flags = CT_LAYER_EQUAL_BOTTOM_TOP | CT_LAYER_GRAD_SIDE,
    .setup = conv_setup,
    .reshape = ct_conv_reshape,
    .forward_cpu = conv_forward_cpu,
    .backward_cpu = conv_backward_cpu,
    .restored = ct_conv_restored,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = conv_forward_gpu,
    .backward_gpu = conv_backward_gpu,
    .prepare_gpu = conv_prepare_gpu,
    .reshape_gpu = ct_conv_cudnn_reshape,
    .destroy_gpu = conv_destroy_gpu,
#endif
    .destroy = ct_conv_destroy,
    .workspace_bytes = ct_conv_workspace_bytes,
    .backward_reads = conv_backward_reads,
#ifdef CORTADO_HAVE_DNNL
    .dtypes_cpu = CT_DTYPE_BIT(CT_BF16),
    .layouts_cpu = CT_LAYOUT_BIT(CT_NHWC),
#endif
    .dtypes_gpu = CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16),
    .layouts_gpu = CT_LAYOUT_BIT(CT_NHWC),
};
