/* Deconvolution (transposed convolution): top = col2im(W^T * bottom)
 * (+ bias), Caffe's convolution with reversed dimensions; the forward of
 * Deconvolution is the backward-data of Convolution and vice versa.  The
 * engine is in conv_common.c and runs on the host and on a GPU. */
#include "layers/conv_common.h"

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
      const float *rows = ct_conv_rows_in(c, be, l->ctx, bottom[i]->data + b0 * ydim, B);
      float *x = top[i]->data + b0 * xdim;
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
      const float *dx = top[i]->diff + b0 * xdim;
      if (bgrad)
        be->bias_grad(l->ctx, dx, B, c->x_channels, c->x_spatial, l->params[1]->diff);
      if (wgrad) {
        const float *rows = ct_conv_rows_in(c, be, l->ctx, bottom[i]->data + b0 * ydim, B);
        ct_conv_weight_grad(c, be, l->ctx, rows, dx, B, l->params[0]->diff);
      }
      if (propagate_down[i]) {
        float *dy = bottom[i]->diff + b0 * ydim;
        float *rows = ct_conv_rows_out(c, dy, B);
        ct_conv_y_from_x(c, be, l->ctx, l->params[0]->data, dx, B, true, rows);
        ct_conv_rows_store(c, be, l->ctx, rows, B, dy);
      }
    }
  }
}

const ct_layer_ops ct_deconvolution_ops = {
    .type = "Deconvolution",
    .min_bottoms = 1, .max_bottoms = -1, .min_tops = 1, .max_tops = -1,
    .flags = CT_LAYER_EQUAL_BOTTOM_TOP,
    .setup = deconv_setup,
    .reshape = ct_conv_reshape,
    .forward_cpu = deconv_forward,
    .backward_cpu = deconv_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = deconv_forward,
    .backward_gpu = deconv_backward,
#endif
    .destroy = ct_conv_destroy,
};
