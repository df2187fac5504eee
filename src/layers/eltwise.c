/* Eltwise: element-wise PROD, SUM (with one coeff per bottom) or MAX of two
 * or more bottoms of one shape.
 *
 * MAX keeps, per element, the index of the winning bottom (as a float) for
 * backward; ties go to bottom 1 between the first two and to the earlier
 * bottom after that, as Caffe's CPU code does.  PROD's gradient is the
 * product of the other bottoms (stable_prod_grad, the default) or
 * top / bottom. */
#include <float.h>
#include <stdlib.h>

#include "layers/eltwise.h"
#include "layers/layer.h"
#include "math/math.h"

typedef struct {
  Caffe__EltwiseParameter__EltwiseOp op;
  float *coeff;      /* (nbottom) SUM weights, 1 by default */
  bool stable_prod_grad;
  ct_tensor *argmax; /* MAX only: like top, index of the winning bottom */
  bool relu;         /* SUM on a GPU: a ReLU in place on the top computed too (net fusion) */
  /* SUM on a GPU: the top views this bottom's values (its last), which the
   * sum overwrites (net fusion, ct_eltwise_sum_in_place); 0: a top of its own */
  int in_place_on;
} eltwise_priv;

static ct_status eltwise_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  const Caffe__EltwiseParameter *p =
      CT_PARAM_OR_DEFAULT(l, eltwise_param, CAFFE__ELTWISE_PARAMETER__INIT);
  if (p->n_coeff && (int)p->n_coeff != l->nbottom)
    return ct_error_set(err, CT_ERR_INVALID,
                        "eltwise_param: %zu coeff values for %d bottoms (give one per bottom)",
                        p->n_coeff, l->nbottom);
  if (p->n_coeff && p->operation == CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD)
    return ct_error_set(err, CT_ERR_INVALID, "eltwise_param: coeff is for operation SUM, not PROD");
  if (p->operation != CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD &&
      p->operation != CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM &&
      p->operation != CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__MAX)
    return ct_error_set(err, CT_ERR_INVALID, "eltwise_param: unknown operation %d", (int)p->operation);
  eltwise_priv *e = ct_xcalloc(1, sizeof *e);
  l->priv = e;
  e->op = p->operation;
  e->stable_prod_grad = p->stable_prod_grad;
  e->coeff = ct_xcalloc((size_t)l->nbottom, sizeof *e->coeff);
  for (int i = 0; i < l->nbottom; i++) e->coeff[i] = p->n_coeff ? p->coeff[i] : 1.0f;
  if (e->op == CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__MAX)
    e->argmax = ct_tensor_new(l->ctx->device, NULL);
  return CT_OK;
}

static ct_status eltwise_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  for (int i = 1; i < l->nbottom; i++) {
    if (ct_tensor_same_shape(bottom[i], bottom[0])) continue;
    char a[256], b[256];
    return ct_error_set(err, CT_ERR_INVALID, "bottom %d has shape %s but bottom 0 has %s", i,
                        ct_tensor_shape_string(bottom[i], a, sizeof a),
                        ct_tensor_shape_string(bottom[0], b, sizeof b));
  }
  eltwise_priv *e = l->priv;
  if (e->in_place_on > 0) ct_tensor_alias_data(top[0], bottom[e->in_place_on]);
  else ct_tensor_reshape_like(top[0], bottom[0]);
  if (e->argmax) ct_tensor_reshape_like(e->argmax, bottom[0]);
  return CT_OK;
}

/* y = a x, without reading y (which may hold anything). */
static void scale_cpu(size_t n, float a, const float *x, float *y) {
  for (size_t k = 0; k < n; k++) y[k] = a * x[k];
}

static ct_status eltwise_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  eltwise_priv *e = l->priv;
  size_t n = top[0]->count;
  float *y = top[0]->data;
  switch (e->op) {
    case CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD:
      ct_cpu_mul(n, bottom[0]->data, bottom[1]->data, y);
      for (int i = 2; i < l->nbottom; i++) ct_cpu_mul(n, y, bottom[i]->data, y);
      break;
    case CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM:
      scale_cpu(n, e->coeff[0], bottom[0]->data, y);
      for (int i = 1; i < l->nbottom; i++) ct_cpu_axpy(n, e->coeff[i], bottom[i]->data, y);
      break;
    default: {
      float *arg = e->argmax->data;
      const float *a = bottom[0]->data, *b = bottom[1]->data;
      for (size_t k = 0; k < n; k++) {
        bool first = a[k] > b[k];
        y[k] = first ? a[k] : b[k];
        arg[k] = first ? 0.0f : 1.0f;
      }
      for (int i = 2; i < l->nbottom; i++) {
        const float *x = bottom[i]->data;
        for (size_t k = 0; k < n; k++)
          if (x[k] > y[k]) {
            y[k] = x[k];
            arg[k] = (float)i;
          }
      }
    }
  }
  return CT_OK;
}

/* dx_i = dy * prod_{j != i} x_j (stable) or dy * y / x_i. */
static void prod_grad_cpu(const eltwise_priv *e, ct_layer *l, int i, ct_tensor *const *top,
                          ct_tensor *const *bottom) {
  size_t n = top[0]->count;
  float *dx = bottom[i]->diff;
  if (e->stable_prod_grad) {
    bool started = false;
    for (int j = 0; j < l->nbottom; j++) {
      if (j == i) continue;
      if (!started) ct_cpu_copy(n, bottom[j]->data, dx);
      else ct_cpu_mul(n, dx, bottom[j]->data, dx);
      started = true;
    }
  } else {
    ct_cpu_div(n, top[0]->data, bottom[i]->data, dx);
  }
  ct_cpu_mul(n, dx, top[0]->diff, dx);
}

static void eltwise_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  eltwise_priv *e = l->priv;
  size_t n = top[0]->count;
  const float *dy = top[0]->diff;
  for (int i = 0; i < l->nbottom; i++) {
    if (!propagate_down[i]) continue;
    float *dx = bottom[i]->diff;
    switch (e->op) {
      case CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD: prod_grad_cpu(e, l, i, top, bottom); break;
      case CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM: scale_cpu(n, e->coeff[i], dy, dx); break;
      default: {
        const float *arg = e->argmax->data;
        for (size_t k = 0; k < n; k++) dx[k] = arg[k] == (float)i ? dy[k] : 0.0f;
      }
    }
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_status eltwise_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  eltwise_priv *e = l->priv;
  ct_context *ctx = l->ctx;
  const ct_dtype t = l->dtype;
  size_t n = top[0]->count;
  void *y = top[0]->data;
  switch (e->op) {
    case CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD:
      ct_eltwise_mul_gpu(ctx, t, n, bottom[0]->data, bottom[1]->data, y, false);
      for (int i = 2; i < l->nbottom; i++) ct_eltwise_mul_gpu(ctx, t, n, y, bottom[i]->data, y, false);
      break;
    case CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM:
      /* the first two in one pass (ResNet's shortcuts), then one per bottom;
       * a fused ReLU in the last */
      ct_eltwise_axpby_gpu(ctx, t, n, e->coeff[0], bottom[0]->data, e->coeff[1], bottom[1]->data,
                           e->relu && l->nbottom == 2, y);
      for (int i = 2; i < l->nbottom; i++)
        ct_eltwise_axpby_gpu(ctx, t, n, e->coeff[i], bottom[i]->data, 1.0f, y,
                             e->relu && i == l->nbottom - 1, y);
      break;
    default:
      ct_eltwise_max_first_gpu(ctx, t, n, bottom[0]->data, bottom[1]->data, y, e->argmax->data);
      for (int i = 2; i < l->nbottom; i++)
        ct_eltwise_max_next_gpu(ctx, t, n, bottom[i]->data, i, y, e->argmax->data);
  }
  return CT_OK;
}

static void eltwise_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  eltwise_priv *e = l->priv;
  ct_context *ctx = l->ctx;
  const ct_dtype t = l->dtype;
  size_t n = top[0]->count;
  const void *dy = top[0]->diff;
  if (e->op == CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM && l->nbottom == 2 && propagate_down[0] &&
      propagate_down[1] && bottom[0]->diff != bottom[1]->diff) {
    /* both in one pass over dy (ResNet's shortcuts) */
    ct_eltwise_sum2_grad_gpu(ctx, t, n, e->coeff[0], e->coeff[1], dy, e->relu ? top[0]->data : NULL,
                             bottom[0]->diff, bottom[1]->diff);
    return;
  }
  for (int i = 0; i < l->nbottom; i++) {
    if (!propagate_down[i]) continue;
    void *dx = bottom[i]->diff;
    switch (e->op) {
      case CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD:
        if (e->stable_prod_grad) {
          bool started = false;
          for (int j = 0; j < l->nbottom; j++) {
            if (j == i) continue;
            if (!started)
              ct_eltwise_axpby_gpu(ctx, t, n, 1.0f, bottom[j]->data, 0.0f, NULL, false, dx);
            else ct_eltwise_mul_gpu(ctx, t, n, dx, bottom[j]->data, dx, false);
            started = true;
          }
        } else {
          ct_eltwise_mul_gpu(ctx, t, n, top[0]->data, bottom[i]->data, dx, true);
        }
        ct_eltwise_mul_gpu(ctx, t, n, dx, dy, dx, false);
        break;
      case CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM:
        if (e->relu) ct_eltwise_relu_grad_gpu(ctx, t, n, e->coeff[i], dy, top[0]->data, dx);
        else ct_eltwise_axpby_gpu(ctx, t, n, e->coeff[i], dy, 0.0f, NULL, false, dx);
        break;
      default: ct_eltwise_max_backward_gpu(ctx, t, n, i, e->argmax->data, dy, dx);
    }
  }
}
#endif

bool ct_eltwise_sum_in_place(ct_layer *l) {
  eltwise_priv *e = l->priv;
  if (l->ctx->device == CT_DEVICE_CPU || e->op != CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM ||
      l->ntop != 1)
    return false;
  e->in_place_on = l->nbottom - 1;
  return true;
}

bool ct_eltwise_absorb_relu(ct_layer *l) {
  eltwise_priv *e = l->priv;
  if (l->ctx->device == CT_DEVICE_CPU || e->op != CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM ||
      e->relu || l->ntop != 1)
    return false;
  e->relu = true;
  return true;
}

static void eltwise_destroy(ct_layer *l) {
  eltwise_priv *e = l->priv;
  if (!e) return;
  free(e->coeff);
  ct_tensor_free(e->argmax);
  free(e);
}

/* PROD reads every value; SUM none (its top on a GPU where it computes a
 * ReLU after it); MAX its own argmax. */
static void eltwise_backward_reads(const ct_layer *l, bool *bottoms, bool *tops) {
  const eltwise_priv *e = l->priv;
  if (!e || e->op == CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD) return;
  ct_layer_reads_no_values(l, bottoms, tops);
  tops[0] = e->op == CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__SUM && e->relu;
}

/* MAX's argmax of the last forward; SUM and PROD read only blobs. */
static int eltwise_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  eltwise_priv *e = l->priv;
  (void)cap;
  if (e->op != CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__MAX || !e->argmax || !e->argmax->count) return 0;
  out[0] = (ct_layer_region){e->argmax->data, ct_tensor_bytes(e->argmax, e->argmax->count)};
  return 1;
}

const ct_layer_ops ct_eltwise_ops = {
    .type = "Eltwise",
    .min_bottoms = 2, .max_bottoms = -1, .min_tops = 1, .max_tops = 1,
    .setup = eltwise_setup,
    .reshape = eltwise_reshape,
    .backward_reads = eltwise_backward_reads,
    .backward_state = eltwise_backward_state,
    .forward_cpu = eltwise_forward_cpu,
    .backward_cpu = eltwise_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = eltwise_forward_gpu,
    .backward_gpu = eltwise_backward_gpu,
#endif
    .destroy = eltwise_destroy,
    .dtypes_gpu = CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16),
    .layouts_cpu = CT_LAYOUTS_ANY, /* element-wise */
    .layouts_gpu = CT_LAYOUTS_ANY,
};
