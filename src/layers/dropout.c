/* Dropout: in TRAIN each value is zeroed with probability dropout_ratio and
 * the survivors are scaled by 1 / (1 - ratio) (Caffe's convention, so TEST is
 * the identity).  The mask comes from one counter-based draw of the context
 * per forward (see dropout.h); in place is free. */
#include <stdlib.h>
#include <string.h>

#include "layers/dropout.h"
#include "layers/layer.h"
#include "layers/neuron.h"
#include "math/math.h"

typedef struct {
  uint32_t threshold; /* ratio * 2^32: bits below it drop the element */
  float scale;        /* 1 / (1 - ratio) */
  uint64_t seed;      /* CPU: of the last TRAIN forward, for backward */
  uint64_t *seed_dev; /* GPU: the same in device memory (1) */
} dropout_state;

static ct_status dropout_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  const Caffe__DropoutParameter *p =
      CT_PARAM_OR_DEFAULT(l, dropout_param, CAFFE__DROPOUT_PARAMETER__INIT);
  double ratio = p->dropout_ratio;
  if (!(ratio >= 0.0 && ratio < 1.0))
    return ct_error_set(err, CT_ERR_INVALID,
                        "dropout_param.dropout_ratio must be in [0, 1), got %g", ratio);
  dropout_state *s = ct_xcalloc(1, sizeof *s);
  double t = ratio * 4294967296.0;
  s->threshold = t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
  s->scale = (float)(1.0 / (1.0 - ratio));
  l->priv = s;
  if (l->ctx->device != CT_DEVICE_CPU) s->seed_dev = ct_mem_alloc(l->ctx->device, sizeof(uint64_t));
  return CT_OK;
}

static void apply_mask_cpu(const dropout_state *s, size_t n, const float *x, float *y) {
  for (size_t i = 0; i < n; i++)
    y[i] = ct_dropout_bits(s->seed, i) >= s->threshold ? x[i] * s->scale : 0.0f;
}

static ct_status dropout_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  dropout_state *s = l->priv;
  size_t n = bottom[0]->count;
  if (l->phase == CT_PHASE_TRAIN) {
    s->seed = ct_context_next_draw(l->ctx);
    apply_mask_cpu(s, n, bottom[0]->data, top[0]->data);
  } else if (top[0] != bottom[0]) {
    memcpy(top[0]->data, bottom[0]->data, n * sizeof(float));
  }
  return CT_OK;
}

static void dropout_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  dropout_state *s = l->priv;
  size_t n = bottom[0]->count;
  if (l->phase == CT_PHASE_TRAIN) apply_mask_cpu(s, n, top[0]->diff, bottom[0]->diff);
  else if (top[0] != bottom[0]) memcpy(bottom[0]->diff, top[0]->diff, n * sizeof(float));
}

static void dropout_destroy(ct_layer *l) {
  dropout_state *s = l->priv;
  if (!s) return;
  if (s->seed_dev) ct_mem_free(l->ctx->device, s->seed_dev);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status dropout_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  dropout_state *s = l->priv;
  size_t n = bottom[0]->count;
  if (l->phase == CT_PHASE_TRAIN) {
    ct_context_next_draw_gpu(l->ctx, s->seed_dev);
    ct_dropout_apply_gpu(l->ctx, n, s->seed_dev, s->threshold, s->scale, bottom[0]->data,
                         top[0]->data);
  } else if (top[0] != bottom[0]) {
    ct_gpu_copy(l->ctx, n, bottom[0]->data, top[0]->data);
  }
  return CT_OK;
}

static void dropout_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  dropout_state *s = l->priv;
  size_t n = bottom[0]->count;
  if (l->phase == CT_PHASE_TRAIN)
    ct_dropout_apply_gpu(l->ctx, n, s->seed_dev, s->threshold, s->scale, top[0]->diff,
                         bottom[0]->diff);
  else if (top[0] != bottom[0])
    ct_gpu_copy(l->ctx, n, top[0]->diff, bottom[0]->diff);
}
#endif

/* The seed of the last TRAIN forward's mask, which backward draws again. */
static int dropout_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  dropout_state *s = l->priv;
  (void)cap;
  out[0] = s->seed_dev ? (ct_layer_region){s->seed_dev, sizeof *s->seed_dev}
                       : (ct_layer_region){&s->seed, sizeof s->seed};
  return 1;
}

const ct_layer_ops ct_dropout_ops = {
    .type = "Dropout",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_DRAWS,
    .setup = dropout_setup,
    .backward_reads = ct_layer_reads_no_values,
    .backward_state = dropout_backward_state,
    .reshape = ct_neuron_reshape,
    .forward_cpu = dropout_forward_cpu,
    .backward_cpu = dropout_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = dropout_forward_gpu,
    .backward_gpu = dropout_backward_gpu,
#endif
    .destroy = dropout_destroy,
};
