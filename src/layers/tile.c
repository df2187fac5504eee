/* Tile: repeats the bottom tile_param.tiles times along tile_param.axis
 * (default 1): bottom (N, C, H, W) with axis 1 and tiles 3 gives
 * (N, 3C, H, W) whose channel blocks are copies of the bottom's.  Backward
 * sums the copies' diffs. */
#include <stdint.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/shape_util.h"
#include "layers/tile.h"
#include "math/math.h"

typedef struct {
  int axis;
  int tiles;
} tile_priv;

static ct_status tile_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  const Caffe__TileParameter *p = CT_PARAM_OR_DEFAULT(l, tile_param, CAFFE__TILE_PARAMETER__INIT);
  if (!p->has_tiles) return ct_error_set(err, CT_ERR_INVALID, "tile_param.tiles must be given");
  if (p->tiles <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "tile_param.tiles must be positive, got %d", p->tiles);
  tile_priv *t = ct_xcalloc(1, sizeof *t);
  t->tiles = p->tiles;
  l->priv = t;
  return CT_OK;
}

static ct_status tile_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  const Caffe__TileParameter *p = CT_PARAM_OR_DEFAULT(l, tile_param, CAFFE__TILE_PARAMETER__INIT);
  tile_priv *t = l->priv;
  const ct_tensor *b = bottom[0];
  CT_TRY(ct_layer_axis(b, p->axis, "axis", &t->axis, err));
  int shape[CT_MAX_AXES];
  for (int k = 0; k < b->ndim; k++) shape[k] = b->shape[k];
  long long tiled = (long long)b->shape[t->axis] * t->tiles;
  if (tiled > INT32_MAX)
    return ct_error_set(err, CT_ERR_INVALID, "axis %d of size %d tiled %d times is too large",
                        t->axis, b->shape[t->axis], t->tiles);
  shape[t->axis] = (int)tiled;
  return ct_tensor_reshape(top[0], b->ndim, shape, err);
}

/* outer: blocks before the axis; inner: values in one block (axis and after). */
static void tile_dims(const ct_layer *l, const ct_tensor *b, size_t *outer, size_t *inner) {
  const tile_priv *t = l->priv;
  *outer = ct_tensor_count_range(b, 0, t->axis);
  *inner = ct_tensor_count_range(b, t->axis, b->ndim);
}

/* Each tile is one strided block copy, so this serves both devices. */
static ct_status tile_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  const tile_priv *t = l->priv;
  size_t outer, inner;
  tile_dims(l, bottom[0], &outer, &inner);
  for (int k = 0; k < t->tiles; k++)
    ct_copy_rows(l->ctx, outer, inner, ct_f32(bottom[0]), inner, ct_f32(top[0]) + (size_t)k * inner,
                 (size_t)t->tiles * inner);
  return CT_OK;
}

static void tile_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  const tile_priv *t = l->priv;
  size_t outer, inner;
  tile_dims(l, bottom[0], &outer, &inner);
  const float *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < outer; i++) {
    ct_cpu_copy(inner, dy, dx);
    dy += inner;
    for (int k = 1; k < t->tiles; k++, dy += inner) ct_cpu_axpy(inner, 1.0f, dy, dx);
    dx += inner;
  }
}

#ifdef CORTADO_HAVE_CUDA
static void tile_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  size_t outer, inner;
  tile_dims(l, bottom[0], &outer, &inner);
  ct_tile_backward_gpu(l->ctx, outer, inner, ((tile_priv *)l->priv)->tiles, top[0]->diff,
                       bottom[0]->diff);
}
#endif

static void tile_destroy(ct_layer *l) { free(l->priv); }

const ct_layer_ops ct_tile_ops = {
    .type = "Tile",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = tile_setup,
    .reshape = tile_reshape,
    .forward_cpu = tile_forward,
    .backward_cpu = tile_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = tile_forward,
    .backward_gpu = tile_backward_gpu,
#endif
    .destroy = tile_destroy,
};
