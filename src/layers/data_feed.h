/* What the prefetching data layers (Data, ImageData, WindowData) share: a pipeline whose
 * batches are copied into the layer's tops, and the data position hooks.
 *
 * A layer fills in `source`, the sample shape and whether it has a label top,
 * then calls ct_feed_start in its setup; forward calls ct_feed_forward. */
#ifndef CT_LAYERS_DATA_FEED_H
#define CT_LAYERS_DATA_FEED_H

#include <stdbool.h>

#include "data/pipeline.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_feed {
  ct_pipeline_source source; /* set by the layer before ct_feed_start */
  int c, h, w;               /* one transformed sample */
  int batch_size;
  bool has_label;            /* the layer has a second top */
  ct_pipeline *pipe;
  bool staged;               /* a batch is out through ct_feed_next_batch */
} ct_feed;

/* The pipeline configuration for layer l: threads from the environment
 * default, seed from l->ctx->seed, sharded over l->ctx->rank / world in the
 * TRAIN phase only (in TEST every worker reads the whole set, as Caffe's
 * test nets do on one solver). */
ct_pipeline_config ct_feed_config(const ct_layer *l, int batch_size, int prefetch, bool shuffle,
                                  uint32_t rand_skip);
/* Starts the pipeline and shapes the tops: data (batch, c, h, w) and, when
 * has_label, label (batch).  Errors: those of ct_pipeline_create. */
ct_status ct_feed_start(ct_feed *f, const ct_pipeline_config *cfg, ct_tensor *const *top,
                        ct_error *err);
/* Shapes the tops again. */
void ct_feed_shape_tops(const ct_feed *f, ct_tensor *const *top);

/* The ct_layer_ops entries every prefetching data layer shares: they find
 * the feed at l->priv, whose first member it must be.
 *   reshape        shapes the tops again;
 *   forward        takes the next batch and copies it into the tops on l's
 *                  device (both devices);
 *   next_batch /   the batch hooks: a GPU net run as a program uploads the
 *   release_batch  batches itself on the copy stream, overlapped with the
 *                  previous iteration (src/net/net_feed.c); host[0] is the
 *                  data, host[1] the labels (with has_label), the token the
 *                  pipeline's batch;
 *   get_position / the data position.  A batch out through next_batch is
 *   set_position   the one staged for the next iteration, so the position
 *                  leaves it unread: a run resumed from a snapshot reads it
 *                  first.
 * Errors: those of ct_pipeline_next (the record that failed) and
 * ct_pipeline_set_position. */
ct_status ct_feed_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err);
ct_status ct_feed_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err);
ct_status ct_feed_next_batch(ct_layer *l, const float **host, void **token, ct_error *err);
void ct_feed_release_batch(ct_layer *l, void *token);
ct_status ct_feed_get_position(ct_layer *l, Caffe__CortadoDataPosition *pos);
ct_status ct_feed_set_position(ct_layer *l, const Caffe__CortadoDataPosition *pos, ct_error *err);
/* Stops the pipeline (the source's own state is the layer's to free). */
void ct_feed_stop(ct_feed *f);

#ifdef __cplusplus
}
#endif

#endif
