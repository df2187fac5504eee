/* Feeding a GPU net's data layers from pinned host batches, overlapped with
 * compute (layers with the next_batch / release_batch hooks of
 * ct_layer_ops); see net_feed.c for the timeline.  GPU only. */
#ifndef CT_NET_NET_FEED_H
#define CT_NET_NET_FEED_H

#include "net/net.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_net_feed ct_net_feed;

/* A feed for layer `layer` of a GPU net (its tops already shaped). */
ct_net_feed *ct_net_feed_new(ct_net *net, int layer);
/* Releases a batch still held and frees the feed. */
void ct_net_feed_free(ct_net_feed *f);
/* The layer's forward: the staged batch into the tops (staging one first
 * when none is).  Errors: the layer's next_batch's, prefixed with the layer. */
ct_status ct_net_feed_copy(ct_net_feed *f, ct_error *err);
/* Stages the next batch, overlapped with the work already enqueued. */
ct_status ct_net_feed_prefetch(ct_net_feed *f, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
