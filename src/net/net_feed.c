/* Feeding a GPU net's data layers from pinned host batches, overlapped with
 * compute (for layers with the next_batch / release_batch hooks).
 *
 * One device staging buffer per feed, as large as the layer's tops, and two
 * events.  In iteration i:
 *
 *   copy step (plain, at the layer's place in the forward):
 *     the compute stream waits for `staged` (batch i is in staging), copies
 *     staging into the tops (device to device) and records `consumed`;
 *   prefetch step (plain, at the end of the program, after the graphs of
 *     iteration i are launched):
 *     waits for `staged` on the host (long done) and releases batch i, takes
 *     batch i+1 from the layer, makes the copy stream wait for `consumed`,
 *     uploads batch i+1 into staging on the copy stream and records `staged`.
 *
 * So the upload of batch i+1 runs while iteration i computes, at most one
 * batch is out of the layer's hands at a time, and the device holds two
 * batches (the tops and the staging buffer).  The steps are plain launches:
 * the graphs of a program start after the copy.  The first copy step primes
 * the staging buffer with a batch of its own. */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_context.h"
#include "net/net_feed.h"

struct ct_net_feed {
  ct_net *net;
  int layer;
  int ntop;
  size_t *offset;     /* (ntop + 1) start of each top in staging, then the total */
  float *staging;     /* (offset[ntop]) device */
  void *staged;       /* event: the upload into staging is done */
  void *consumed;     /* event: the copy out of staging is done */
  void *token;        /* the batch in staging, not yet released */
  bool have_batch;    /* staging holds a batch not yet copied into the tops */
};

ct_net_feed *ct_net_feed_new(ct_net *net, int layer) {
  ct_layer *l = net->layers[layer];
  CT_ASSERT(l->ops->next_batch && l->ops->release_batch && net->ctx->device != CT_DEVICE_CPU);
  ct_net_feed *f = ct_xcalloc(1, sizeof *f);
  f->net = net;
  f->layer = layer;
  f->ntop = l->ntop;
  f->offset = ct_xcalloc((size_t)l->ntop + 1, sizeof *f->offset);
  for (int t = 0; t < l->ntop; t++)
    f->offset[t + 1] = f->offset[t] + (net->tops[layer][t]->count + 63) / 64 * 64;
  f->staging = ct_mem_alloc(net->ctx->device, f->offset[l->ntop] * sizeof(float));
  f->staged = ct_gpu_event_new();
  f->consumed = ct_gpu_event_new();
  return f;
}

void ct_net_feed_free(ct_net_feed *f) {
  if (!f) return;
  ct_context *ctx = f->net->ctx;
  if (f->token) {
    ct_gpu_event_sync(f->staged);
    ct_layer *l = f->net->layers[f->layer];
    l->ops->release_batch(l, f->token);
  }
  ct_gpu_event_free(f->staged);
  ct_gpu_event_free(f->consumed);
  ct_mem_free(ctx->device, f->staging);
  free(f->offset);
  free(f);
}

/* Takes the next batch and starts its upload into staging (after the last
 * copy out of staging). */
static ct_status stage_next(ct_net_feed *f, ct_error *err) {
  ct_layer *l = f->net->layers[f->layer];
  ct_context *ctx = f->net->ctx;
  if (f->token) {
    ct_gpu_event_sync(f->staged);
    l->ops->release_batch(l, f->token);
    f->token = NULL;
  }
  const float *host[CT_MAX_AXES] = {0};
  CT_ASSERT(f->ntop <= CT_MAX_AXES);
  ct_status st = l->ops->next_batch(l, host, &f->token, err);
  if (st != CT_OK) {
    f->token = NULL;
    return ct_error_prefix(err, "layer '%s' (%s)", l->name, l->ops->type);
  }
  ct_gpu_event_wait(ctx, f->consumed, true);
  for (int t = 0; t < f->ntop; t++)
    ct_gpu_copy_upload_async(ctx, f->staging + f->offset[t], host[t],
                             f->net->tops[f->layer][t]->count * sizeof(float));
  ct_gpu_event_record(ctx, f->staged, true);
  f->have_batch = true;
  return CT_OK;
}

ct_status ct_net_feed_copy(ct_net_feed *f, ct_error *err) {
  if (!f->have_batch) CT_TRY(stage_next(f, err));
  ct_context *ctx = f->net->ctx;
  ct_gpu_event_wait(ctx, f->staged, false);
  for (int t = 0; t < f->ntop; t++) {
    ct_tensor *top = f->net->tops[f->layer][t];
    ct_gpu_copy_async(ctx, top->data, f->staging + f->offset[t], top->count * sizeof(float));
  }
  ct_gpu_event_record(ctx, f->consumed, false);
  f->have_batch = false;
  return CT_OK;
}

ct_status ct_net_feed_prefetch(ct_net_feed *f, ct_error *err) {
  if (f->have_batch) return CT_OK;
  return stage_next(f, err);
}
