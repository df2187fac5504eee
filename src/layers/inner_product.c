/* InnerProduct (fully connected): the bottom flattened from `axis` on is a
 * matrix X (M, K); top (M, N) = X W^T + bias with W stored (N, K) as Caffe,
 * or X W with W stored (K, N) when transpose is set.  One GEMM each way; the
 * same code runs on the host and on a GPU through the context's backend. */
#include <stdlib.h>

#include "layers/conv_common.h"
#include "layers/filler.h"

typedef struct ip_state {
  int axis;
  int M, K, N;
  bool bias_term, transpose;
} ip_state;

static ct_status ip_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                          ct_error *err) {
  const Caffe__InnerProductParameter *p =
      CT_PARAM_OR_DEFAULT(l, inner_product_param, CAFFE__INNER_PRODUCT_PARAMETER__INIT);
  ip_state *s = ct_xcalloc(1, sizeof *s);
  l->priv = s;
  if (!p->has_num_output || p->num_output == 0 || p->num_output > (uint32_t)1 << 30)
    return ct_error_set(err, CT_ERR_INVALID,
                        "inner_product_param.num_output must be given and positive");
  if (ct_tensor_canonical_axis(bottom[0], p->axis, &s->axis, err) != CT_OK)
    return ct_error_prefix(err, "inner_product_param");
  size_t K = ct_tensor_count_range(bottom[0], s->axis, bottom[0]->ndim);
  if (K == 0 || K > (size_t)1 << 30)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the bottom has %zu values per item from axis %d (must be 1 to 2^30)", K,
                        s->axis);
  s->K = (int)K;
  s->N = (int)p->num_output;
  if ((size_t)s->K * (size_t)s->N > INT32_MAX)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the weights (%d x %d) would have more than 2^31 values", s->N, s->K);
  s->bias_term = p->bias_term;
  s->transpose = p->transpose;
  int wshape[2] = {s->transpose ? s->K : s->N, s->transpose ? s->N : s->K};
  ct_tensor *w = ct_layer_add_param(l, 2, wshape);
  CT_TRY(ct_filler_fill(p->weight_filler, w, &l->ctx->rng, err));
  if (s->bias_term) {
    ct_tensor *b = ct_layer_add_param(l, 1, &s->N);
    CT_TRY(ct_filler_fill(p->bias_filler, b, &l->ctx->rng, err));
  }
  return CT_OK;
}

static ct_status ip_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  ip_state *s = l->priv;
  char buf[128];
  if (s->axis >= bottom[0]->ndim ||
      ct_tensor_count_range(bottom[0], s->axis, bottom[0]->ndim) != (size_t)s->K)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the bottom (%s) no longer has %d values per item from axis %d",
                        ct_tensor_shape_string(bottom[0], buf, sizeof buf), s->K, s->axis);
  size_t M = ct_tensor_count_range(bottom[0], 0, s->axis);
  if (M > (size_t)1 << 30)
    return ct_error_set(err, CT_ERR_INVALID, "the bottom has too many items (%zu)", M);
  s->M = (int)M;
  int shape[CT_MAX_AXES];
  for (int i = 0; i < s->axis; i++) shape[i] = bottom[0]->shape[i];
  shape[s->axis] = s->N;
  return ct_tensor_reshape(top[0], s->axis + 1, shape, err);
}

static void ip_destroy(ct_layer *l) {
  free(l->priv);
  l->priv = NULL;
}

static ct_status ip_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  ip_state *s = l->priv;
  const ct_conv_backend *be = ct_conv_backend_of(l->ctx);
  be->gemm(l->ctx, false, !s->transpose, s->M, s->N, s->K, 1.0f, bottom[0]->data,
           l->params[0]->data, 0.0f, top[0]->data);
  if (s->bias_term) be->add_bias(l->ctx, l->params[1]->data, s->M, s->N, 1, top[0]->data);
  return CT_OK;
}

static void ip_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                        ct_tensor *const *bottom) {
  ip_state *s = l->priv;
  const ct_conv_backend *be = ct_conv_backend_of(l->ctx);
  const float *dy = top[0]->diff, *x = bottom[0]->data;
  const bool wgrad = l->param_propagate_down[0], bgrad = s->bias_term && l->param_propagate_down[1];
  /* the parameter gradients on the gradient stream when the net says so */
  ct_context *pctx = l->grad_side && (wgrad || bgrad) ? ct_context_grad_begin(l->ctx) : l->ctx;
  if (wgrad) {
    if (s->transpose)  /* dW (K, N) += X^T dY */
      be->gemm(pctx, true, false, s->K, s->N, s->M, 1.0f, x, dy, 1.0f, l->params[0]->diff);
    else  /* dW (N, K) += dY^T X */
      be->gemm(pctx, true, false, s->N, s->K, s->M, 1.0f, dy, x, 1.0f, l->params[0]->diff);
  }
  if (bgrad) be->bias_grad(pctx, dy, s->M, s->N, 1, l->params[1]->diff);
  if (propagate_down[0])  /* dX (M, K) = dY W (or dY W^T when transposed) */
    be->gemm(l->ctx, false, s->transpose, s->M, s->K, s->N, 1.0f, dy, l->params[0]->data, 0.0f,
             bottom[0]->diff);
}

const ct_layer_ops ct_inner_product_ops = {
    .type = "InnerProduct",
    .flags = CT_LAYER_GRAD_SIDE,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = ip_setup,
    .reshape = ip_reshape,
    .forward_cpu = ip_forward,
    .backward_cpu = ip_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = ip_forward,
    .backward_gpu = ip_backward,
#endif
    .destroy = ip_destroy,
};
