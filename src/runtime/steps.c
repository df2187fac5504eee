/* A net's forward and backward as steps of a program (see steps.h). */
#include "runtime/steps.h"

#include "core/mem.h"
#include "net/net_feed.h"

static ct_status step_begin(void *user, int arg, ct_error *err) {
  ct_net *net = user;
  ct_net_clear_param_diffs(net);
  ct_net_zero_loss(net);
  ct_net_prepare_async(net);
  return CT_OK;
}

static ct_status step_forward(void *user, int i, ct_error *err) {
  return ct_net_forward_layer_async(user, i, err);
}

static ct_status step_backward(void *user, int i, ct_error *err) {
  ct_net_backward_layer(user, i);
  return CT_OK;
}

/* GPU data layers with batch hooks get a feed (net_feed.c), made on first
 * use (and again after a reshape dropped it). */
static bool fed(ct_net *net, int i) {
  const ct_layer *l = net->layers[i];
  if (net->ctx->device == CT_DEVICE_CPU || !l->ops->next_batch || !l->ops->release_batch)
    return false;
  if (!net->feeds) net->feeds = ct_xcalloc((size_t)net->nlayers + 1, sizeof *net->feeds);
  if (!net->feeds[i]) net->feeds[i] = ct_net_feed_new(net, i);
  return true;
}

static ct_status step_feed_copy(void *user, int i, ct_error *err) {
  ct_net *net = user;
  CT_ASSERT(fed(net, i));
  return ct_net_feed_copy(net->feeds[i], err);
}

static ct_status step_feed_prefetch(void *user, int i, ct_error *err) {
  ct_net *net = user;
  CT_ASSERT(fed(net, i));
  return ct_net_feed_prefetch(net->feeds[i], err);
}

void ct_steps_begin(ct_program *p, ct_net *net) {
  ct_program_add(p, (ct_program_step){.run = step_begin, .user = net, .capturable = true,
                                      .what = "begin", .kind = CT_STEP_BEGIN});
}

void ct_steps_forward_range(ct_program *p, ct_net *net, int first, int end, bool skip_sources,
                            void (*after)(void *user, ct_program *p, int layer), void *user) {
  for (int i = first; i < end; i++) {
    ct_layer *l = net->layers[i];
    if (skip_sources && l->nbottom == 0) continue;
    if (fed(net, i))
      ct_program_add(p, (ct_program_step){.run = step_feed_copy, .user = net, .arg = i,
                                          .what = l->name, .kind = CT_STEP_FEED, .type = l->ops->type});
    else
      ct_program_add(p, (ct_program_step){.run = step_forward, .user = net, .arg = i,
                                          .capturable = ct_layer_replayable(l), .what = l->name,
                                          .kind = CT_STEP_FORWARD, .type = l->ops->type});
    if (after) after(user, p, i);
  }
}

void ct_steps_forward(ct_program *p, ct_net *net) {
  ct_steps_forward_range(p, net, 0, net->nlayers, false, NULL, NULL);
}

void ct_steps_backward_range(ct_program *p, ct_net *net, int first, int end,
                             void (*after)(void *user, ct_program *p, int layer), void *user) {
  for (int i = end - 1; i >= first; i--) {
    ct_layer *l = net->layers[i];
    if (net->layer_need_backward[i])
      ct_program_add(p, (ct_program_step){.run = step_backward, .user = net, .arg = i,
                                          .capturable = ct_layer_replayable(l), .what = l->name,
                                          .kind = CT_STEP_BACKWARD, .type = l->ops->type});
    if (after) after(user, p, i);
  }
}

void ct_steps_backward(ct_program *p, ct_net *net,
                       void (*after)(void *user, ct_program *p, int layer), void *user) {
  ct_steps_backward_range(p, net, 0, net->nlayers, after, user);
}

void ct_steps_prefetch(ct_program *p, ct_net *net) {
  for (int i = 0; net->feeds && i < net->nlayers; i++)
    if (net->feeds[i])
      ct_program_add(p, (ct_program_step){.run = step_feed_prefetch, .user = net, .arg = i,
                                          .what = net->layers[i]->name, .kind = CT_STEP_PREFETCH});
}
