/* A pipeline behind a data layer's tops. */
#include "layers/data_feed.h"

#include <string.h>

#include "core/mem.h"

ct_pipeline_config ct_feed_config(const ct_layer *l, int batch_size, int prefetch, bool shuffle,
                                  uint32_t rand_skip) {
  ct_pipeline_config cfg = {0};
  cfg.batch_size = batch_size;
  cfg.prefetch = prefetch;
  cfg.threads = 0;
  cfg.host_compute = l->ctx->device == CT_DEVICE_CPU;
  cfg.seed = l->ctx->data_seed;
  cfg.shuffle = shuffle;
  cfg.rand_skip = rand_skip;
  bool shard = l->phase == CT_PHASE_TRAIN && l->ctx->world > 1;
  cfg.rank = shard ? l->ctx->rank : 0;
  cfg.world = shard ? l->ctx->world : 1;
  return cfg;
}

void ct_feed_shape_tops(const ct_feed *f, ct_tensor *const *top) {
  ct_tensor_reshape4(top[0], f->batch_size, f->c, f->h, f->w);
  if (f->has_label) {
    int n = f->batch_size;
    ct_tensor_reshape_or_die(top[1], 1, &n);
  }
}

ct_status ct_feed_start(ct_feed *f, const ct_pipeline_config *cfg, ct_tensor *const *top,
                        ct_error *err) {
  ct_pipeline_config c = *cfg;
  c.sample_count = (size_t)f->c * f->h * f->w;
  f->batch_size = cfg->batch_size;
  CT_TRY(ct_pipeline_create(&c, &f->source, &f->pipe, err));
  ct_feed_shape_tops(f, top);
  return CT_OK;
}

/* The layer's feed: the first member of its priv. */
static ct_feed *feed_of(const ct_layer *l) { return (ct_feed *)l->priv; }

ct_status ct_feed_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err) {
  ct_feed_shape_tops(feed_of(l), top);
  return CT_OK;
}

ct_status ct_feed_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err) {
  ct_feed *f = feed_of(l);
  ct_batch *b;
  CT_TRY(ct_pipeline_next(f->pipe, &b, err));
  size_t n = (size_t)f->batch_size * f->c * f->h * f->w;
  CT_ASSERT(top[0]->count == n);
  ct_mem_copy(top[0]->device, top[0]->data, CT_DEVICE_CPU, b->data, n * sizeof(float));
  if (f->has_label)
    ct_mem_copy(top[1]->device, top[1]->data, CT_DEVICE_CPU, b->label,
                (size_t)f->batch_size * sizeof(float));
  ct_pipeline_release(f->pipe, b);
  return CT_OK;
}

ct_status ct_feed_next_batch(ct_layer *l, const float **host, void **token, ct_error *err) {
  ct_feed *f = feed_of(l);
  ct_batch *b;
  CT_TRY(ct_pipeline_next(f->pipe, &b, err));
  host[0] = b->data;
  if (f->has_label) host[1] = b->label;
  *token = b;
  f->staged = true;
  return CT_OK;
}

void ct_feed_release_batch(ct_layer *l, void *token) {
  ct_feed *f = feed_of(l);
  CT_ASSERT(f->staged);
  ct_pipeline_release(f->pipe, token);
  f->staged = false;
}

ct_status ct_feed_get_position(ct_layer *l, Caffe__CortadoDataPosition *pos) {
  ct_feed *f = feed_of(l);
  ct_data_position p;
  ct_pipeline_get_position_behind(f->pipe, f->staged ? 1 : 0, &p);
  ct_data_position_to_proto(&p, l->name, pos);
  return CT_OK;
}

ct_status ct_feed_set_position(ct_layer *l, const Caffe__CortadoDataPosition *pos, ct_error *err) {
  ct_data_position p;
  ct_data_position_from_proto(pos, &p);
  return ct_pipeline_set_position(feed_of(l)->pipe, &p, err);
}

void ct_feed_stop(ct_feed *f) {
  ct_pipeline_free(f->pipe);
  f->pipe = NULL;
}
