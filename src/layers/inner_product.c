/* InnerProduct (fully connected): the bottom flattened from `axis` on is a
 * matrix X (M, K); top (M, N) = X W^T + bias with W stored (N, K) as Caffe,
 * or X W with W stored (K, N) when transpose is set.  All arrays are
 * row-major.  One GEMM each way, the same code on the host and on a GPU:
 * through the context's backend on the host (and as a GPU's fallback), and
 * on a GPU through cuBLASLt plans made at reshape for the current batch and
 * math (math/gemm_lt.h), whose forward adds the bias in the GEMM's epilogue
 * and which never split K into a second reduction kernel; a forward with a
 * long reduction and a small top (which cuBLASLt's plans leave to cuBLAS's
 * split K, three kernels) runs as one (math/gemm_short.h).
 *
 * The bias gradient stays a kernel of its own: cuBLASLt's bias-gradient
 * epilogues (BGRADB for the weight gradient dW (N,K) = dY^T X, BGRADA for
 * the transposed layout) overwrite their output, while Caffe's parameter
 * gradients accumulate (shared weights, iter_size), and overwriting into
 * scratch would need an add kernel: no kernel saved. */
#include <stdlib.h>

#include "layers/conv/conv_common.h"
#include "layers/filler.h"
#include "math/matmul_dnnl.h"
#include "math/typed.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/inner_product.h"
#include "math/gemm_lt.h"
#include "math/gemm_short.h"
#endif

typedef struct ip_state {
  int axis;
  int M, K, N;
  bool bias_term, transpose;
  /* host, 16-bit layers: oneDNN matmul plans for the batch plan_M (one per
   * product), and the weights converted to the layer's type by forward */
  int plan_M;
  struct ct_matmul_dnnl *mm[3];
  void *w16;
} ip_state;

/* The layer's three products, each a row-major ct_gpu_gemm-style call. */
enum { IP_FORWARD, IP_WEIGHT_GRAD, IP_DATA_GRAD, IP_NGEMM };

#ifdef CORTADO_HAVE_CUDA
/* l->gpu_priv: the cuBLASLt plans for the batch M and the math they were
 * made for (NULL plans: cuBLASLt offered nothing, the backend runs it). */
typedef struct ip_gpu {
  bool planned;
  int M;
  /* 16-bit layers: the weights converted to the layer's type by forward,
   * and the bias gradient's scratch (ct_bias_grad_scratch floats) */
  void *w16;
  float *bias_scratch;
  size_t bias_scratch_count;
  bool ctx_tf32;              /* ctx->tf32 when planned: runs check it is unchanged */
  ct_gemm_lt *plan[IP_NGEMM];
} ip_gpu;
#endif

static ct_status ip_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                          ct_error *err) {
  const Caffe__InnerProductParameter *p =
      CT_PARAM_OR_DEFAULT(l, inner_product_param, CAFFE__INNER_PRODUCT_PARAMETER__INIT);
  ip_state *s = ct_xcalloc(1, sizeof *s);
  l->priv = s;
  if (!p->has_num_output)
    return ct_error_set(err, CT_ERR_INVALID, "inner_product_param.num_output must be given");
  CT_TRY(ct_layer_check_count("inner_product_param.num_output", p->num_output, 1, err));
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

static ct_status ip_plan_host(ct_layer *l, ct_error *err);

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
  CT_TRY(ct_tensor_reshape(top[0], s->axis + 1, shape, err));
  return l->ctx->device == CT_DEVICE_CPU && l->dtype != CT_F32 ? ip_plan_host(l, err) : CT_OK;
}

static void ip_free_host_plans(ip_state *s) {
  for (int i = 0; i < IP_NGEMM; i++) {
    ct_matmul_dnnl_free(s->mm[i]);
    s->mm[i] = NULL;
  }
  s->plan_M = 0;
}

static void ip_destroy(ct_layer *l) {
  ip_state *s = l->priv;
  if (s) {
    ip_free_host_plans(s);
    free(s->w16);
  }
  free(l->priv);
  l->priv = NULL;
}

/* The GEMM arguments of product `which` (row-major, as ct_gpu_gemm):
 *   IP_FORWARD      Y (M,N) = X (M,K) W^T, W (N,K); or X W, W (K,N) when transposed
 *   IP_WEIGHT_GRAD  dW (N,K) += dY^T X; or dW (K,N) += X^T dY when transposed
 *   IP_DATA_GRAD    dX (M,K) = dY W, W (N,K); or dY W^T, W (K,N) when transposed */
typedef struct ip_gemm_args {
  bool trans_a, trans_b;
  int M, N, K;
} ip_gemm_args;

static ip_gemm_args ip_gemm_shape(const ip_state *s, int which) {
  switch (which) {
    case IP_FORWARD: return (ip_gemm_args){false, !s->transpose, s->M, s->N, s->K};
    case IP_WEIGHT_GRAD:
      return s->transpose ? (ip_gemm_args){true, false, s->K, s->N, s->M}
                          : (ip_gemm_args){true, false, s->N, s->K, s->M};
    default: return (ip_gemm_args){false, s->transpose, s->M, s->K, s->N};
  }
}

/* Host, 16-bit: the three products as oneDNN matmuls in the layer's type
 * (the weight gradient accumulated into the float32 master's diff), made
 * for the batch of this reshape. */
static ct_status ip_plan_host(ct_layer *l, ct_error *err) {
  ip_state *s = l->priv;
  if (s->plan_M == s->M && s->mm[0]) return CT_OK;
  ip_free_host_plans(s);
  if (!s->w16) s->w16 = ct_xcalloc((size_t)s->N * s->K, ct_dtype_size(l->dtype));
  const ct_dtype t = l->dtype;
  for (int i = 0; i < IP_NGEMM; i++) {
    const ip_gemm_args g = ip_gemm_shape(s, i);
    char why[160];
    s->mm[i] = ct_matmul_dnnl_plan(g.trans_a, g.trans_b, g.M, g.N, g.K, t, t,
                                   i == IP_WEIGHT_GRAD ? CT_F32 : t, i == IP_FORWARD && s->bias_term,
                                   i == IP_WEIGHT_GRAD, why, sizeof why);
    if (!s->mm[i]) {
      ip_free_host_plans(s);
      return ct_error_set(err, CT_ERR_UNSUPPORTED, "no %s matrix product on the host: %s",
                          ct_dtype_name(t), *why ? why : "built without oneDNN");
    }
  }
  s->plan_M = s->M;
  return CT_OK;
}

static ct_status ip_forward_host16(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top) {
  ip_state *s = l->priv;
  ct_cpu_convert((size_t)s->N * s->K, CT_F32, l->params[0]->data, l->dtype, s->w16);
  ct_matmul_dnnl_run(s->mm[IP_FORWARD], bottom[0]->data, s->w16,
                     s->bias_term ? l->params[1]->data : NULL, top[0]->data);
  return CT_OK;
}

/* Backward reads the weights forward converted (they do not change between
 * the two). */
static void ip_backward_host16(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  ip_state *s = l->priv;
  const void *dy = top[0]->diff, *x = bottom[0]->data;
  if (l->param_propagate_down[0]) {
    if (s->transpose) ct_matmul_dnnl_run(s->mm[IP_WEIGHT_GRAD], x, dy, NULL, l->params[0]->diff);
    else ct_matmul_dnnl_run(s->mm[IP_WEIGHT_GRAD], dy, x, NULL, l->params[0]->diff);
  }
  if (s->bias_term && l->param_propagate_down[1]) {
    /* column sums, row after row (one loop: a call per row opened an
     * OpenMP region each, 64 a batch of LeNet) */
    float *restrict db = l->params[1]->diff;
    const uint16_t *restrict d16 = dy;
    CT_ASSERT(l->dtype == CT_BF16);
    for (size_t m = 0; m < (size_t)s->M; m++)
      for (size_t n = 0; n < (size_t)s->N; n++) db[n] += ct_bf16_to_f32(d16[m * s->N + n]);
  }
  if (propagate_down[0])
    ct_matmul_dnnl_run(s->mm[IP_DATA_GRAD], dy, s->w16, NULL, bottom[0]->diff);
}

#ifdef CORTADO_HAVE_CUDA
/* Whether gp's plans were made for the layer's batch and its context's math. */
static bool plans_fit(const ip_gpu *gp, const ct_layer *l) {
  const ip_state *s = l->priv;
  return gp && gp->planned && gp->M == s->M && gp->ctx_tf32 == l->ctx->tf32;
}
#endif

/* C = A B (+ beta C) (+ bias on every row) for product `which`, on ctx's
 * device (ctx: the layer's, or its gradient stream's view): on a GPU, a
 * forward with a long reduction and a small top in one kernel
 * (math/gemm_short.h), else the cuBLASLt plan when there is one for this
 * math, else the backend's GEMM and bias. */
static void ip_gemm(ct_layer *l, ct_context *ctx, int which, const float *A, const float *B,
                    const float *bias, float beta, float *C) {
  const ip_state *s = l->priv;
  const ip_gemm_args g = ip_gemm_shape(s, which);
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU && which == IP_FORWARD && beta == 0.0f && !g.trans_a &&
      g.trans_b && ct_gemm_short_fits(g.M, g.N, g.K)) {
    ct_gemm_short_nt(ctx, g.M, g.N, g.K, A, B, bias, C);
    return;
  }
  const ip_gpu *gp = l->gpu_priv;
  if (plans_fit(gp, l) && ct_gemm_lt_run(gp->plan[which], ctx, 1.0f, A, B, bias, beta, C))
    return;
#endif
  const ct_conv_backend *be = ct_conv_backend_of(ctx);
  be->gemm(ctx, g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, A, B, beta, C);
  if (bias) be->add_bias(ctx, bias, g.M, g.N, 1, C);
}

#ifdef CORTADO_HAVE_CUDA
/* GPU, 16-bit: cuBLAS GemmEx in the layer's type on tensor cores, the
 * weight gradient accumulated straight into the float32 master's diff. */
static ct_status ip_forward_gpu16(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top) {
  ip_state *s = l->priv;
  ip_gpu *gp = l->gpu_priv;
  ct_gpu_convert(l->ctx, (size_t)s->N * s->K, CT_F32, l->params[0]->data, l->dtype, gp->w16);
  const ip_gemm_args g = ip_gemm_shape(s, IP_FORWARD);
  ct_gpu_gemm_typed(l->ctx, g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, l->dtype, bottom[0]->data,
                    gp->w16, 0.0f, l->dtype, top[0]->data);
  if (s->bias_term)
    ct_bias_add_gpu_typed(l->ctx, l->dtype, l->params[1]->data, s->M, s->N, 1, false, top[0]->data);
  return CT_OK;
}

static void ip_backward_gpu16(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  ip_state *s = l->priv;
  ip_gpu *gp = l->gpu_priv;
  const void *dy = top[0]->diff, *x = bottom[0]->data;
  const bool wgrad = l->param_propagate_down[0], bgrad = s->bias_term && l->param_propagate_down[1];
  ct_context *pctx = l->grad_side && (wgrad || bgrad) ? ct_context_grad_begin(l->ctx) : l->ctx;
  if (wgrad) {
    const ip_gemm_args g = ip_gemm_shape(s, IP_WEIGHT_GRAD);
    ct_gpu_gemm_typed(pctx, g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, l->dtype,
                      s->transpose ? x : dy, s->transpose ? dy : x, 1.0f, CT_F32,
                      l->params[0]->diff);
  }
  if (bgrad)
    ct_bias_grad_gpu_typed(pctx, l->dtype, dy, s->M, s->N, 1, gp->bias_scratch, l->params[1]->diff);
  if (propagate_down[0]) {
    const ip_gemm_args g = ip_gemm_shape(s, IP_DATA_GRAD);
    ct_gpu_gemm_typed(l->ctx, g.trans_a, g.trans_b, g.M, g.N, g.K, 1.0f, l->dtype, dy, gp->w16,
                      0.0f, l->dtype, bottom[0]->diff);
  }
}
#endif

static ct_status ip_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  ip_state *s = l->priv;
  if (l->ctx->device == CT_DEVICE_CPU && l->dtype != CT_F32) return ip_forward_host16(l, bottom, top);
#ifdef CORTADO_HAVE_CUDA
  if (l->dtype != CT_F32) return ip_forward_gpu16(l, bottom, top);
#endif
  ip_gemm(l, l->ctx, IP_FORWARD, bottom[0]->data, l->params[0]->data,
          s->bias_term ? l->params[1]->data : NULL, 0.0f, top[0]->data);
  return CT_OK;
}

static void ip_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                        ct_tensor *const *bottom) {
  ip_state *s = l->priv;
  if (l->ctx->device == CT_DEVICE_CPU && l->dtype != CT_F32) {
    ip_backward_host16(l, top, propagate_down, bottom);
    return;
  }
#ifdef CORTADO_HAVE_CUDA
  if (l->dtype != CT_F32) {
    ip_backward_gpu16(l, top, propagate_down, bottom);
    return;
  }
#endif
  const float *dy = top[0]->diff, *x = bottom[0]->data;
  const bool wgrad = l->param_propagate_down[0], bgrad = s->bias_term && l->param_propagate_down[1];
  /* the parameter gradients on the gradient stream when the net says so */
  ct_context *pctx = l->grad_side && (wgrad || bgrad) ? ct_context_grad_begin(l->ctx) : l->ctx;
  if (wgrad) {  /* beta 1: parameter gradients accumulate */
    if (s->transpose)
      ip_gemm(l, pctx, IP_WEIGHT_GRAD, x, dy, NULL, 1.0f, l->params[0]->diff);
    else
      ip_gemm(l, pctx, IP_WEIGHT_GRAD, dy, x, NULL, 1.0f, l->params[0]->diff);
  }
  /* dbias (N) += the column sums of dY (M, N) */
  if (bgrad) ct_conv_backend_of(pctx)->bias_grad(pctx, dy, s->M, s->N, 1, l->params[1]->diff);
  if (propagate_down[0])
    ip_gemm(l, l->ctx, IP_DATA_GRAD, dy, l->params[0]->data, NULL, 0.0f, bottom[0]->diff);
}

#ifdef CORTADO_HAVE_CUDA
static void ip_free_plans(ip_gpu *gp) {
  for (int i = 0; i < IP_NGEMM; i++) {
    ct_gemm_lt_free(gp->plan[i]);
    gp->plan[i] = NULL;
  }
  gp->planned = false;
}

/* Plans the three products for the batch of this reshape and the
 * context's math, unless the plans already fit.  Never fails: a product
 * cuBLASLt has no plan for keeps the backend's GEMM. */
static ct_status ip_reshape_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  ip_state *s = l->priv;
  ip_gpu *gp = l->gpu_priv;
  if (!gp) {
    gp = ct_xcalloc(1, sizeof *gp);
    l->gpu_priv = gp;
  }
  if (l->dtype != CT_F32) {
    if (!gp->w16) gp->w16 = ct_mem_alloc(l->ctx->device, (size_t)s->N * s->K * ct_dtype_size(l->dtype));
    const size_t need = s->bias_term ? ct_bias_grad_scratch(s->M, s->N, 1) : 0;
    if (need > gp->bias_scratch_count) {
      if (gp->bias_scratch) ct_mem_free(l->ctx->device, gp->bias_scratch);
      gp->bias_scratch = ct_mem_alloc(l->ctx->device, need * sizeof(float));
      gp->bias_scratch_count = need;
    }
    return CT_OK; /* no cuBLASLt plans: GemmEx */
  }
  if (plans_fit(gp, l)) return CT_OK;
  ip_free_plans(gp);
  const bool tf32 = ct_gemm_lt_tf32(l->ctx);
  for (int i = 0; i < IP_NGEMM; i++) {
    const ip_gemm_args g = ip_gemm_shape(s, i);
    const bool bias = i == IP_FORWARD && s->bias_term;
    gp->plan[i] =
        ct_gemm_lt_plan(l->ctx->cublaslt, g.trans_a, g.trans_b, g.M, g.N, g.K, bias, tf32);
  }
  gp->M = s->M;
  gp->ctx_tf32 = l->ctx->tf32;
  gp->planned = true;
  return CT_OK;
}

int ct_ip_gpu_lt_products(const ct_layer *l) {
  const ip_gpu *gp = l->gpu_priv;
  int n = 0;
  for (int i = 0; gp && gp->planned && i < IP_NGEMM; i++) n += ct_gemm_lt_ready(gp->plan[i]);
  return n;
}

static void ip_destroy_gpu(ct_layer *l) {
  ip_gpu *gp = l->gpu_priv;
  if (!gp) return;
  ip_free_plans(gp);
  if (gp->w16) ct_mem_free(l->ctx->device, gp->w16);
  if (gp->bias_scratch) ct_mem_free(l->ctx->device, gp->bias_scratch);
  free(gp);
  l->gpu_priv = NULL;
}
#endif

/* Backward reads the bottom (the weight gradient), never the top. */
static void ip_backward_reads(const ct_layer *l, bool *bottoms, bool *tops) {
  (void)l;
  (void)bottoms;
  tops[0] = false;
}

const ct_layer_ops ct_inner_product_ops = {
    .type = "InnerProduct",
    .flags = CT_LAYER_GRAD_SIDE | CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = ip_setup,
    .reshape = ip_reshape,
    .backward_reads = ip_backward_reads,
    .forward_cpu = ip_forward,
    .backward_cpu = ip_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = ip_forward,
    .backward_gpu = ip_backward,
    .reshape_gpu = ip_reshape_gpu,
    .destroy_gpu = ip_destroy_gpu,
#endif
    .destroy = ip_destroy,
#ifdef CORTADO_HAVE_DNNL
    .dtypes_cpu = CT_DTYPE_BIT(CT_BF16),
#endif
    .dtypes_gpu = CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16),
};
