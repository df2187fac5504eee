/* MemoryData: tops data (batch_size, channels, height, width) and optionally
 * label (batch_size), copied from arrays given by ct_memory_data_set. */
#include "layers/memory_data_layer.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

typedef struct memory_priv {
  int batch, c, h, w;
  const float *data;   /* (n, c, h, w) borrowed */
  const float *labels; /* (n) borrowed */
  size_t n, pos;
} memory_priv;

extern const ct_layer_ops ct_memory_data_ops;

ct_status ct_memory_data_set(ct_layer *l, const float *data, const float *labels, size_t n,
                             ct_error *err) {
  if (l->ops != &ct_memory_data_ops)
    return ct_error_set(err, CT_ERR_INVALID, "layer %s (%s) is not a MemoryData layer", l->name,
                        l->ops->type);
  memory_priv *p = l->priv;
  if (n == 0 || n % (size_t)p->batch != 0)
    return ct_error_set(err, CT_ERR_INVALID, "n (%zu) must be a positive multiple of batch_size (%d)",
                        n, p->batch);
  if (!data) return ct_error_set(err, CT_ERR_INVALID, "data must not be NULL");
  if (!labels && l->ntop > 1) return ct_error_set(err, CT_ERR_INVALID, "labels must not be NULL");
  p->data = data;
  p->labels = labels;
  p->n = n;
  p->pos = 0;
  return CT_OK;
}

static void memory_destroy(ct_layer *l) {
  free(l->priv);
  l->priv = NULL;
}

static ct_status memory_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  const Caffe__MemoryDataParameter *mp = l->param->memory_data_param;
  if (!mp) return ct_error_set(err, CT_ERR_INVALID, "memory_data_param must be given");
  const char *missing = !mp->has_batch_size || !mp->batch_size ? "batch_size"
                        : !mp->has_channels || !mp->channels ? "channels"
                        : !mp->has_height || !mp->height     ? "height"
                        : !mp->has_width || !mp->width       ? "width"
                                                             : NULL;
  if (missing)
    return ct_error_set(err, CT_ERR_INVALID, "memory_data_param.%s must be positive", missing);
  memory_priv *p = ct_xcalloc(1, sizeof *p);
  p->batch = (int)mp->batch_size;
  p->c = (int)mp->channels;
  p->h = (int)mp->height;
  p->w = (int)mp->width;
  l->priv = p;
  return CT_OK;
}

static ct_status memory_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  memory_priv *p = l->priv;
  ct_tensor_reshape4(top[0], p->batch, p->c, p->h, p->w);
  if (l->ntop > 1) ct_tensor_reshape_or_die(top[1], 1, &p->batch);
  return CT_OK;
}

static ct_status memory_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  memory_priv *p = l->priv;
  if (!p->data)
    return ct_error_set(err, CT_ERR_INVALID,
                        "no data: give the layer its arrays before the first forward (set_input_arrays)");
  size_t sample = (size_t)p->c * p->h * p->w;
  ct_mem_copy(top[0]->device, top[0]->data, CT_DEVICE_CPU, p->data + p->pos * sample,
              (size_t)p->batch * sample * sizeof(float));
  if (l->ntop > 1)
    ct_mem_copy(top[1]->device, top[1]->data, CT_DEVICE_CPU, p->labels + p->pos,
                (size_t)p->batch * sizeof(float));
  p->pos = (p->pos + (size_t)p->batch) % p->n;
  return CT_OK;
}

const ct_layer_ops ct_memory_data_ops = {
    .type = "MemoryData",
    .min_bottoms = 0, .max_bottoms = 0, .min_tops = 1, .max_tops = 2,
    .flags = CT_LAYER_DATA | CT_LAYER_NO_BACKWARD,
    .setup = memory_setup,
    .reshape = memory_reshape,
    .forward_cpu = memory_forward,
    .forward_gpu = memory_forward,
    .destroy = memory_destroy,
};
