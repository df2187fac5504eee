/* Deconvolution (transposed convolution): top = col2im(W^T * bottom)
 * (+ bias), Caffe's convolution with reversed dimensions; the forward of
 * Deconvolution is the backward-data of Convolution and vice versa.  The
 * reference engine is in conv_common.c and runs on the host and on a GPU; on
 * the host, layers planned for oneDNN at reshape run it (conv_dnnl.h). */
#include "layers/conv/conv_common.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/conv/conv_cudnn.h"
#endif

#include "layers/conv/conv_dnnl.h"

static ct_status deconv_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  return ct_conv_setup(l, bottom, true, err);
}

static ct_status deconv_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  ct_conv *c = l->priv;
  const ct_conv_backend *be = ct_conv_backend_of(l->ctx);
  const size_t xdim = (size_t)c->x_channels * c->x_spatial;  /* a top image */
  const size_t ydim = (size_t)c->y_channels * c->y_spatial;  /* a bottom image */
  for (int i = 0; i < l->nbottom; i++) {
    for (int b0 = 0; b0 < c->num; b0 += c->chunk) {
      int B = c->num - b0 < c->chunk ? c->num - b0 : c->chunk;
      const float *rows = ct_conv_rows_in(c, be, l->ctx, ct_f32(bottom[i]) + b0 * ydim, B);
      float *x = ct_f32(top[i]) + b0 * xdim;
      ct_conv_x_from_y(c, be, l->ctx, l->params[0]->data, rows, B, x);
      if (c->bias_term)
        be->add_bias(l->ctx, l->params[1]->data, B, c->x_channels, c->x_spatial, x);
    }
  }
  return CT_OK;
}

/* The top diff of a chunk is unfolded once, for the weight gradient and then
 * for the bottom gradient. */
static void deconv_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
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
      const float *dx = ct_f32_diff(top[i]) + b0 * xdim;
      if (bgrad)
        be->bias_grad(l->ctx, dx, B, c->x_channels, c->x_spatial, l->params[1]->diff);
      if (wgrad) {
        const float *rows = ct_conv_rows_in(c, be, l->ctx, ct_f32(bottom[i]) + b0 * ydim, B);
        ct_conv_weight_grad(c, be, l->ctx, rows, dx, B, l->params[0]->diff);
      }
      if (propagate_down[i]) {
        float *dy = ct_f32_diff(bottom[i]) + b0 * ydim;
        float *rows = ct_conv_rows_out(c, dy, B);
        ct_conv_y_from_x(c, be, l->ctx, l->params[0]->data, dx, B, true, rows);
        ct_conv_rows_store(c, be, l->ctx, rows, B, dy);
      }
    }
  }
}

#ifdef CORTADO_HAVE_CUDA
/* The cuDNN engine when reshape chose it (l->gpu_priv), else this engine. */
static ct_status deconv_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  if (l->gpu_priv) return ct_conv_cudnn_forward(l, bottom, top, err);
  return deconv_forward(l, bottom, top, err);
}

static void deconv_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                ct_tensor *const *bottom) {
  if (l->gpu_priv) ct_conv_cudnn_backward(l, top, propagate_down, bottom);
  else deconv_backward(l, top, propagate_down, bottom);
}
#endif

/* The host with oneDNN: the top is X of the convolution view, the bottom Y. */
static ct_status deconv_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  ct_conv *c = l->priv;
  if (!c->fast) return deconv_forward(l, bottom, top, err);
  for (int i = 0; i < l->nbottom; i++) {
    ct_conv_dnnl_forget(c->fast, CT_CONV_DNNL_SLOT_Y);
    ct_conv_dnnl_x_from_y(c->fast, l->params[0]->data, bottom[i]->data, top[i]->data);
    if (c->bias_term)
      ct_conv_backend_cpu.add_bias(l->ctx, l->params[1]->data, c->num, c->x_channels,
                                   c->x_spatial, top[i]->data);
  }
  return CT_OK;
}

/* The weight gradient reuses forward's reorder of the bottom, and the bottom
 * gradient the weight gradient's reorder of the top diff. */
static void deconv_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                ct_tensor *const *bottom) {
  ct_conv *c = l->priv;
  if (!c->fast) {
    deconv_backward(l, top, propagate_down, bottom);
    return;
  }
  const bool wgrad = l->param_propagate_down[0];
  const bool bgrad = c->bias_term && l->param_propagate_down[1];
  for (int i = l->nbottom - 1; i >= 0; i--) {
    ct_conv_dnnl_forget(c->fast, CT_CONV_DNNL_SLOT_X);
    if (bgrad)
      ct_conv_backend_cpu.bias_grad(l->ctx, top[i]->diff, c->num, c->x_channels, c->x_spatial,
                                    l->params[1]->diff);
    if (wgrad)
      ct_conv_dnnl_weight_grad(c->fast, top[i]->diff, bottom[i]->data, l->params[0]->diff, NULL);
    if (propagate_down[i])
      ct_conv_dnnl_y_from_x(c->fast, l->params[0]->data, NULL, top[i]->diff, bottom[i]->diff);
  }
}

const ct_layer_ops ct_deconvolution_ops = {
    .type = "Deconvolution",
    .min_bottoms = 1, .max_bottoms = -1, .min_tops = 1, .max_tops = -1,
    .flags = CT_LAYER_EQUAL_BOTTOM_TOP | CT_LAYER_GRAD_SIDE,
    .setup = deconv_setup,
    .reshape = ct_conv_reshape,
    .forward_cpu = deconv_forward_cpu,
    .backward_cpu = deconv_backward_cpu,
    .restored = ct_conv_restored,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = deconv_forward_gpu,
    .backward_gpu = deconv_backward_gpu,
    .reshape_gpu = ct_conv_cudnn_reshape,
    .destroy_gpu = ct_conv_cudnn_destroy,
#endif
    .destroy = ct_conv_destroy,
    .workspace_bytes = ct_conv_workspace_bytes,
};
