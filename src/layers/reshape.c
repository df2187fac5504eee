/* Reshape: gives the bottom's values a new shape without copying them (the
 * top is a view of the bottom's data and diff, as in Caffe).
 *
 * reshape_param.shape replaces the bottom axes [axis, axis + num_axes)
 * (default: all of them); in it, 0 copies the bottom's dim at that place and
 * a single -1 is inferred from the count.  E.g. bottom 2 x 3 x 4 with shape
 * (0, -1) gives 2 x 12; with axis 1, num_axes 1 and shape (3, 1) gives
 * 2 x 3 x 1 x 4. */
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/shape_util.h"

typedef struct {
  int ndim;              /* axes in reshape_param.shape */
  int dims[CT_MAX_AXES]; /* (ndim) as given: > 0, 0 (copy) or -1 (infer) */
  int inferred;          /* index of the -1 in dims, or -1 */
} reshape_priv;

static ct_status reshape_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  const Caffe__ReshapeParameter *p =
      CT_PARAM_OR_DEFAULT(l, reshape_param, CAFFE__RESHAPE_PARAMETER__INIT);
  if (top[0] == bottom[0])
    return ct_error_set(err, CT_ERR_INVALID, "does not work in place (top and bottom are one blob)");
  const Caffe__BlobShape *s = p->shape;
  size_t n = s ? s->n_dim : 0;
  char text[512];
  if (n > CT_MAX_AXES)
    return ct_error_set(err, CT_ERR_INVALID, "shape dims %s have %zu axes (at most %d)",
                        ct_dims64_string(s->dim, n, text, sizeof text), n, CT_MAX_AXES);
  reshape_priv *r = ct_xcalloc(1, sizeof *r);
  l->priv = r;
  r->ndim = (int)n;
  r->inferred = -1;
  for (size_t i = 0; i < n; i++) {
    int64_t d = s->dim[i];
    if (d < -1 || d > INT32_MAX)
      return ct_error_set(err, CT_ERR_INVALID,
                          "shape dims %s: dim %zu is %lld (give a size, 0 to copy or -1 to infer)",
                          ct_dims64_string(s->dim, n, text, sizeof text), i, (long long)d);
    if (d == -1) {
      if (r->inferred >= 0)
        return ct_error_set(err, CT_ERR_INVALID, "shape dims %s has more than one -1",
                            ct_dims64_string(s->dim, n, text, sizeof text));
      r->inferred = (int)i;
    }
    r->dims[i] = (int)d;
  }
  if (p->num_axes < -1)
    return ct_error_set(err, CT_ERR_INVALID, "num_axes %d: give 0 or more, or -1 for all axes",
                        p->num_axes);
  return CT_OK;
}

static ct_status reshape_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  const Caffe__ReshapeParameter *p =
      CT_PARAM_OR_DEFAULT(l, reshape_param, CAFFE__RESHAPE_PARAMETER__INIT);
  const reshape_priv *r = l->priv;
  ct_tensor *b = bottom[0];
  char text[512];
  /* axis may be b->ndim (append) and counts from the end as -1 == ndim. */
  int start = p->axis >= 0 ? p->axis : b->ndim + p->axis + 1;
  if (start < 0 || start > b->ndim)
    return ct_error_set(err, CT_ERR_INVALID, "axis %d out of range for a %d-axis bottom", p->axis,
                        b->ndim);
  int end = p->num_axes == -1 ? b->ndim : start + p->num_axes;
  if (end > b->ndim)
    return ct_error_set(err, CT_ERR_INVALID,
                        "axis %d + num_axes %d = %d is past the end of a %d-axis bottom", p->axis,
                        p->num_axes, end, b->ndim);
  int ndim = start + r->ndim + (b->ndim - end);
  if (ndim > CT_MAX_AXES)
    return ct_error_set(err, CT_ERR_INVALID, "the top would have %d axes (at most %d)", ndim,
                        CT_MAX_AXES);
  int shape[CT_MAX_AXES], k = 0;
  for (int i = 0; i < start; i++) shape[k++] = b->shape[i];
  for (int i = 0; i < r->ndim; i++) {
    int d = r->dims[i];
    if (d == 0) {
      if (start + i >= b->ndim)
        return ct_error_set(err, CT_ERR_INVALID,
                            "shape dim %d is 0 (copy) but the bottom has no axis %d to copy", i,
                            start + i);
      d = b->shape[start + i];
    }
    shape[k++] = d;
  }
  for (int i = end; i < b->ndim; i++) shape[k++] = b->shape[i];
  size_t known = 1;
  for (int i = 0; i < ndim; i++)
    if (r->inferred < 0 || i != start + r->inferred) known *= (size_t)shape[i];
  if (r->inferred >= 0) {
    if (known == 0 || b->count % known != 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "bottom count %zu is not divisible by the product %zu of the other dims "
                          "(%s with -1 to infer)",
                          b->count, known, ct_dims_string(shape, ndim, text, sizeof text));
    shape[start + r->inferred] = (int)(b->count / known);
    known = b->count;
  }
  if (known != b->count)
    return ct_error_set(err, CT_ERR_INVALID, "top shape %s has %zu values but the bottom has %zu",
                        ct_dims_string(shape, ndim, text, sizeof text), known, b->count);
  ct_layer_share_top(top[0], b, ndim, shape);
  return CT_OK;
}

static ct_status reshape_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  return CT_OK;
}

static void reshape_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {}

static void reshape_destroy(ct_layer *l) { free(l->priv); }

/* Device-neutral: the top is a view. */
const ct_layer_ops ct_reshape_ops = {
    .type = "Reshape",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = reshape_setup,
    .reshape = reshape_reshape,
    .forward_cpu = reshape_forward,
    .backward_cpu = reshape_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = reshape_forward,
    .backward_gpu = reshape_backward,
#endif
    .destroy = reshape_destroy,
};
