/* A net's forward and backward as steps of a program (net_exec.h). */
#include <stdint.h>

#include "net/net.h"
#include "core/mem.h"
#include "net/net_exec.h"
#include "net/net_feed.h"
#include "net/net_program.h"

static ct_status step_begin(void *user, int arg, ct_error *err) {
  ct_net *net = user;
  if (arg) ct_net_clear_param_diffs(net);
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

static ct_status step_readback(void *user, int arg, ct_error *err) {
  ct_net_readback_async(user);
  return CT_OK;
}

void ct_net_program_begin(ct_net *net, ct_exec *ex, bool clear_param_diffs) {
  ct_exec_add(ex, (ct_exec_step){step_begin, net, clear_param_diffs, true, "begin"});
}

void ct_net_program_forward(ct_net *net, ct_exec *ex) {
  for (int i = 0; i < net->nlayers; i++) {
    ct_layer *l = net->layers[i];
    if (fed(net, i))
      ct_exec_add(ex, (ct_exec_step){step_feed_copy, net, i, false, l->name});
    else
      ct_exec_add(ex, (ct_exec_step){step_forward, net, i, ct_layer_capturable(l), l->name});
  }
}

void ct_net_program_backward(ct_net *net, ct_exec *ex) {
  for (int i = net->nlayers - 1; i >= 0; i--) {
    ct_layer *l = net->layers[i];
    if (!net->layer_need_backward[i] && !net->grad_hook) continue;
    bool cap = ct_layer_capturable(l) && !net->grad_hook;
    ct_exec_add(ex, (ct_exec_step){step_backward, net, i, cap, l->name});
  }
}

void ct_net_program_pass(ct_net *net, ct_exec *ex, bool backward) {
  ct_net_program_forward(net, ex);
  if (backward) ct_net_program_backward(net, ex);
}

void ct_net_program_end(ct_net *net, ct_exec *ex) {
  ct_exec_add(ex, (ct_exec_step){step_readback, net, 0, true, "readback"});
  for (int i = 0; net->feeds && i < net->nlayers; i++)
    if (net->feeds[i])
      ct_exec_add(ex, (ct_exec_step){step_feed_prefetch, net, i, false, net->layers[i]->name});
}

/* A multiply-xorshift step over the words that locate the net's storage
 * (a few operations per word: this runs every iteration). */
static uint64_t mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

uint64_t ct_net_signature(const ct_net *net) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = mix(h, net->layout_version);
  h = mix(h, (uintptr_t)net->flat_data);
  h = mix(h, (uintptr_t)net->flat_diff);
  h = mix(h, (uintptr_t)net->diff_pool);
  for (int b = 0; b < net->nblobs; b++) {
    const ct_tensor *t = net->blobs[b];
    h = mix(h, (uintptr_t)t->data);
    h = mix(h, (uintptr_t)t->diff);
    h = mix(h, t->count);
  }
  return h;
}
