/* A net's forward and backward as steps of a program (see steps.h). */
#include "runtime/steps.h"

#include "core/mem.h"
#include "math/math.h"
#include "net/net_feed.h"
#include "solvers/loss_scale.h"

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

/* A forward run again for a backward: the layer keeps its state across
 * batches as it is (layer.h); on a GPU the flag is read as the work is
 * enqueued, so a captured graph replays the same. */
static ct_status step_recompute(void *user, int i, ct_error *err) {
  ct_net *net = user;
  ct_layer *l = net->layers[i];
  l->recomputing = true;
  const ct_status st = ct_net_forward_layer_async(net, i, err);
  l->recomputing = false;
  return st;
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

void ct_steps_forward_range(ct_program *p, ct_net *net, int first, int end, bool recompute,
                            void (*after)(void *user, ct_program *p, int layer), void *user) {
  for (int i = first; i < end; i++) {
    ct_layer *l = net->layers[i];
    if (recompute && l->nbottom == 0) continue;
    if (fed(net, i))
      ct_program_add(p, (ct_program_step){.run = step_feed_copy, .user = net, .arg = i,
                                          .what = l->name, .kind = CT_STEP_FEED, .type = l->ops->type});
    else
      ct_program_add(p, (ct_program_step){.run = recompute ? step_recompute : step_forward,
                                          .user = net, .arg = i,
                                          .capturable = ct_layer_replayable(l), .what = l->name,
                                          .kind = CT_STEP_FORWARD, .type = l->ops->type,
                                          .idle = l->absorbed || l->forward_absorbed});
    if (after) after(user, p, i);
  }
}

void ct_steps_forward(ct_program *p, ct_net *net) {
  ct_steps_forward_range(p, net, 0, net->nlayers, false, NULL, NULL);
}

/* Loss scaling: layer i's loss tops' diffs = loss weight x the scale
 * (arg i + 1) before its backward, the plain weight again after it (arg
 * -(i + 1)). */
static ct_status step_seed(void *user, int arg, ct_error *err) {
  ct_net *net = user;
  const int i = (arg > 0 ? arg : -arg) - 1;
  const ct_layer *l = net->layers[i];
  for (int j = 0; j < l->ntop; j++) {
    if (l->loss_weight[j] == 0.0f) continue;
    ct_tensor *t = net->tops[i][j];
    if (arg > 0) ct_loss_scale_seed(net->ctx, net->loss_scale, t->count, l->loss_weight[j], t->diff);
    else ct_dev_set(net->ctx, t->count, l->loss_weight[j], t->diff);
  }
  return CT_OK;
}

static bool has_loss_weight(const ct_layer *l) {
  for (int j = 0; j < l->ntop; j++)
    if (l->loss_weight[j] != 0.0f) return true;
  return false;
}

void ct_steps_backward_range(ct_program *p, ct_net *net, int first, int end,
                             void (*after)(void *user, ct_program *p, int layer), void *user) {
  for (int i = end - 1; i >= first; i--) {
    ct_layer *l = net->layers[i];
    const bool seed = net->loss_scale && net->layer_need_backward[i] && has_loss_weight(l);
    const ct_program_step s = {.run = step_seed, .user = net, .arg = i + 1, .capturable = true,
                               .what = "loss scale seed", .kind = CT_STEP_SEED};
    if (seed) ct_program_add(p, s);
    if (net->layer_need_backward[i])
      ct_program_add(p, (ct_program_step){.run = step_backward, .user = net, .arg = i,
                                          .capturable = ct_layer_replayable(l), .what = l->name,
                                          .kind = CT_STEP_BACKWARD, .type = l->ops->type,
                                          .idle = l->absorbed || l->backward_absorbed});
    if (seed) {
      ct_program_step unseed = s;
      unseed.arg = -(i + 1);
      unseed.what = "loss scale unseed";
      ct_program_add(p, unseed);
    }
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
