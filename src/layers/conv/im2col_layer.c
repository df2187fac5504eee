/* Im2col: Caffe's Im2colLayer, the column matrix of a convolution as a
 * blob.  The bottom (num..., C, in...) with channel axis convolution_param
 * .axis becomes the top (num..., C * prod(kernel), out...): for each item,
 * row (c, k...) and output position o hold the input at
 * o * stride - pad + k * dilation (0 outside), as im2col.h lays it out.
 * convolution_param gives kernel, stride, pad and dilation (per axis or
 * _h/_w, N-d included) and force_nd_im2col; num_output, bias and group are
 * not used, as in Caffe.  Backward sums each column back into the
 * positions it came from (col2im). */
#include <stdlib.h>

#include "layers/conv/conv_common.h"
#include "layers/conv/im2col.h"
#include "layers/layer.h"

typedef struct im2col_priv {
  ct_conv_window w;
  ct_im2col_geom g;
  int num;          /* items: the product of the axes before the channel axis */
  size_t in_count;  /* values per item of the bottom and of the top */
  size_t out_count;
} im2col_priv;

static ct_status im2col_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  const Caffe__ConvolutionParameter *p =
      CT_PARAM_OR_DEFAULT(l, convolution_param, CAFFE__CONVOLUTION_PARAMETER__INIT);
  im2col_priv *s = ct_xcalloc(1, sizeof *s);
  l->priv = s;
  CT_TRY(ct_conv_window_parse(p, bottom[0], &s->w, err));
  if (s->w.nspatial < 1)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the bottom needs at least one spatial axis after the channel axis %d",
                        s->w.axis);
  return CT_OK;
}

static ct_status im2col_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  im2col_priv *s = l->priv;
  const ct_tensor *b = bottom[0];
  char buf[128];
  if (b->ndim != s->w.axis + 1 + s->w.nspatial)
    return ct_error_set(err, CT_ERR_INVALID, "the bottom must keep its %d axes (now %s)",
                        s->w.axis + 1 + s->w.nspatial, ct_tensor_shape_string(b, buf, sizeof buf));
  ct_im2col_geom *g = &s->g;
  *g = (ct_im2col_geom){.nspatial = s->w.nspatial, .force_nd = s->w.force_nd,
                        .channels = b->shape[s->w.axis]};
  int tshape[CT_MAX_AXES];
  for (int i = 0; i < s->w.axis; i++) tshape[i] = b->shape[i];
  for (int i = 0; i < g->nspatial; i++) {
    g->in[i] = b->shape[s->w.axis + 1 + i];
    CT_TRY(ct_conv_window_out(&s->w, i, g->in[i], false, &g->out[i], err));
    g->kernel[i] = s->w.kernel[i];
    g->stride[i] = s->w.stride[i];
    g->pad[i] = s->w.pad[i];
    g->dilation[i] = s->w.dilation[i];
    tshape[s->w.axis + 1 + i] = g->out[i];
  }
  const size_t rows = (size_t)g->channels * ct_im2col_kernel_count(g);
  if (rows > INT32_MAX)
    return ct_error_set(err, CT_ERR_INVALID, "the top would have %zu channels (C x kernel size)",
                        rows);
  tshape[s->w.axis] = (int)rows;
  s->num = (int)ct_tensor_count_range(b, 0, s->w.axis);
  s->in_count = (size_t)g->channels * ct_im2col_in_count(g);
  s->out_count = rows * ct_im2col_out_count(g);
  return ct_tensor_reshape(top[0], b->ndim, tshape, err);
}

static ct_status im2col_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  im2col_priv *s = l->priv;
  for (int n = 0; n < s->num; n++) {
    const float *im = bottom[0]->data + (size_t)n * s->in_count;
    float *col = top[0]->data + (size_t)n * s->out_count;
    if (l->ctx->device == CT_DEVICE_CPU) ct_im2col_cpu(&s->g, 1, im, col);
#ifdef CORTADO_HAVE_CUDA
    else ct_im2col_gpu(l->ctx, &s->g, 1, im, col);
#endif
  }
  return CT_OK;
}

static void im2col_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                            ct_tensor *const *bottom) {
  im2col_priv *s = l->priv;
  if (!propagate_down[0]) return;
  for (int n = 0; n < s->num; n++) {
    const float *col = top[0]->diff + (size_t)n * s->out_count;
    float *im = bottom[0]->diff + (size_t)n * s->in_count;
    if (l->ctx->device == CT_DEVICE_CPU) ct_col2im_cpu(&s->g, 1, col, im);
#ifdef CORTADO_HAVE_CUDA
    else ct_col2im_gpu(l->ctx, &s->g, 1, col, im);
#endif
  }
}

static void im2col_destroy(ct_layer *l) {
  free(l->priv);
  l->priv = NULL;
}

const ct_layer_ops ct_im2col_ops = {
    .type = "Im2col",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = im2col_setup,
    .reshape = im2col_reshape,
    .forward_cpu = im2col_forward,
    .backward_cpu = im2col_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = im2col_forward,
    .backward_gpu = im2col_backward,
#endif
    .destroy = im2col_destroy,
};
