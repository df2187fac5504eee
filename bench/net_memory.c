/* net_memory: memory of one training iteration of a net, from Cortado's
 * allocation counters (core/mem.h on the CPU, gpu/gpu.h on a GPU), split
 * into where it goes.
 *
 *   net_memory MODEL C,H,W BATCH [--gpu=N] [--precision=fp32|bf16|fp16]
 *
 * The data layers become DummyData of BATCH samples of C,H,W (as
 * --dummy_data).  Prints the bytes held after the build and the peak over
 * one forward and backward, and the blobs' share: activation data arrays
 * owned by blobs (views such as in-place tops, Flatten and Split tops count
 * nothing), diffs owned by blobs, the blob pool (values and diffs placed by
 * lifetime), the flat parameter buffers;
 * the rest is the layers' scratch (saved inputs, normalised copies, column
 * buffers, 16-bit weight copies) and the context's.  Then the layers that
 * hold the most: their new tops (owned or in the pool), their state (what their setup took besides,
 * ct_layer.state_bytes) and what their first forward and backward left
 * allocated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/log.h"
#include "core/mem.h"
#include "gpu/gpu.h"
#include "net/net.h"
#include "net/net_load.h"

static int usage(void) {
  fprintf(stderr, "usage: net_memory MODEL C,H,W BATCH [--gpu=N] [--precision=fp32|bf16|fp16]\n");
  return 2;
}

static int g_device = CT_DEVICE_CPU;

static size_t held(size_t *peak) {
  size_t cur = 0;
  if (g_device == CT_DEVICE_CPU)
    ct_mem_host_stats(&cur, peak);
  else
    ct_gpu_memory_stats(g_device, &cur, peak);
  return cur;
}

typedef struct {
  int layer;
  size_t tops, state, fwd, bwd;
  size_t transient; /* the most held above the layer's start during its passes, freed after */
} layer_mem;

static size_t g_peak; /* the most held over all passes (the per-pass peaks are reset) */

/* Keeps the peak so far in g_peak, then starts it again from what is held. */
static void reset_peak(void) {
  size_t peak;
  held(&peak);
  if (peak > g_peak) g_peak = peak;
  if (g_device == CT_DEVICE_CPU) ct_mem_host_reset_peak();
  else ct_gpu_memory_reset_peak(g_device);
}

/* After a pass of a layer that began with `before` held: what it left, and
 * the most it held above that on the way. */
static void pass_took(size_t before, size_t *left, size_t *transient) {
  size_t peak;
  const size_t after = held(&peak);
  if (peak > g_peak) g_peak = peak;
  *left = after > before ? after - before : 0;
  const size_t over = peak > after ? peak - after : 0;
  if (over > *transient) *transient = over;
}

static int by_total(const void *a, const void *b) {
  const layer_mem *x = a, *y = b;
  size_t tx = x->tops + x->state + x->fwd + x->bwd + x->transient;
  size_t ty = y->tops + y->state + y->fwd + y->bwd + y->transient;
  return tx < ty ? 1 : tx > ty ? -1 : x->layer - y->layer;
}

static double mb(size_t bytes) { return bytes / 1048576.0; }

int main(int argc, char **argv) {
  int chw[3], batch;
  ct_dtype precision = CT_F32;
  if (argc < 4 || sscanf(argv[2], "%d,%d,%d", &chw[0], &chw[1], &chw[2]) != 3 ||
      (batch = atoi(argv[3])) < 1)
    return usage();
  for (int a = 4; a < argc; a++) {
    if (strncmp(argv[a], "--gpu=", 6) == 0)
      g_device = atoi(argv[a] + 6);
    else if (strcmp(argv[a], "--precision=bf16") == 0)
      precision = CT_BF16;
    else if (strcmp(argv[a], "--precision=fp16") == 0)
      precision = CT_F16;
    else if (strcmp(argv[a], "--precision=fp32") != 0)
      return usage();
  }
  ct_log_set_level(CT_LOG_WARNING);
  ct_error err;
  Caffe__NetParameter *param;
  if (ct_net_param_read(argv[1], &param, &err) != CT_OK ||
      ct_net_param_replace_data_layers(param, chw, &err) != CT_OK) {
    fprintf(stderr, "net_memory: %s\n", err.msg);
    return 1;
  }
  for (size_t i = 0; i < param->n_layer; i++) {
    Caffe__DummyDataParameter *d = param->layer[i]->dummy_data_param;
    for (size_t k = 0; d && k < d->n_shape; k++)
      if (d->shape[k]->n_dim > 0) d->shape[k]->dim[0] = batch;
  }
  ct_context ctx;
  ct_net *net;
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .source_name = argv[1], .quiet = true};
  if (ct_context_init(&ctx, g_device, 1701, &err) != CT_OK ||
      ct_context_set_precision(&ctx, precision, precision != CT_F32, &err) != CT_OK) {
    fprintf(stderr, "net_memory: %s\n", err.msg);
    return 1;
  }
  const size_t base = held(NULL);
  if (ct_net_init(&net, param, &o, &ctx, &err) != CT_OK) {
    fprintf(stderr, "net_memory: %s\n", err.msg);
    return 1;
  }
  protobuf_c_message_free_unpacked(&param->base, NULL);
  const size_t built = held(NULL);
  /* one layer at a time, so that what each first pass allocates shows */
  layer_mem *lm = ct_xcalloc((size_t)net->nlayers, sizeof *lm);
  ct_net_zero_loss(net);
  ct_net_prepare_async(net);
  for (int i = 0; i < net->nlayers; i++) {
    const ct_layer *l = net->layers[i];
    lm[i].layer = i;
    lm[i].state = l->state_bytes;
    for (int j = 0; j < l->ntop; j++) {
      const ct_tensor *t = net->tops[i][j];
      bool in_place = false;
      for (int k = 0; k < l->nbottom; k++) in_place = in_place || net->bottoms[i][k] == t;
      /* its own values, whether it owns them or has a place in the pool */
      const int id = net->top_ids[i][j];
      if (!in_place && net->value_owner[id] == id) lm[i].tops += ct_tensor_bytes(t, t->count);
    }
    const size_t before = held(NULL);
    reset_peak();
    if (ct_net_forward_layer_async(net, i, &err) != CT_OK) {
      fprintf(stderr, "net_memory: %s\n", err.msg);
      return 1;
    }
    ct_context_sync(&ctx);
    pass_took(before, &lm[i].fwd, &lm[i].transient);
  }
  double loss;
  if (ct_net_loss_finish(net, &loss, &err) != CT_OK) {
    fprintf(stderr, "net_memory: %s\n", err.msg);
    return 1;
  }
  for (int i = net->nlayers - 1; i >= 0; i--) {
    const size_t before = held(NULL);
    reset_peak();
    ct_net_backward_layer(net, i);
    ct_context_sync(&ctx);
    pass_took(before, &lm[i].bwd, &lm[i].transient);
  }
  ct_context_grad_join(&ctx);
  ct_context_sync(&ctx);
  size_t peak;
  const size_t now = held(&peak);
  if (g_peak > peak) peak = g_peak;
  const ct_net_memory m = ct_net_memory_split(net);
  const size_t data = m.blob_data, diffs = m.blob_diffs, pool = m.pool, flat = m.flat;
  size_t held = now - base;
  printf("%s, batch %d of %d,%d,%d: %d layers, %d blobs, %s, %s\n", argv[1], batch, chw[0], chw[1],
         chw[2], net->nlayers, net->nblobs, g_device == CT_DEVICE_CPU ? "CPU" : "GPU",
         ct_dtype_name(precision));
  printf("  held after build      %9.1f MB\n", mb(built - base));
  printf("  peak over fwd + bwd   %9.1f MB\n", mb(peak - base));
  printf("  held after fwd + bwd  %9.1f MB, of which:\n", mb(held));
  printf("    blob data (owned)   %9.1f MB\n", mb(data));
  printf("    blob diffs (owned)  %9.1f MB\n", mb(diffs));
  printf("    blob pool + zeros   %9.1f MB\n", mb(pool));
  printf("    flat params + grads %9.1f MB\n", mb(flat));
  printf("    the rest (scratch)  %9.1f MB\n", mb(held - data - diffs - pool - flat));
  qsort(lm, (size_t)net->nlayers, sizeof *lm, by_total);
  printf("  layers holding the most (MB): new tops, state from setup, left by the first forward, "
         "by the first backward, held for a while in either\n");
  for (int k = 0; k < net->nlayers && k < 25; k++) {
    const ct_layer *l = net->layers[lm[k].layer];
    printf("    %-24s %-14s %8.1f %8.1f %8.1f %8.1f %8.1f\n", l->name, l->ops->type, mb(lm[k].tops),
           mb(lm[k].state), mb(lm[k].fwd), mb(lm[k].bwd), mb(lm[k].transient));
  }
  size_t sums[5] = {0};
  for (int i = 0; i < net->nlayers; i++) {
    sums[0] += lm[i].tops;
    sums[1] += lm[i].state;
    sums[2] += lm[i].fwd;
    sums[3] += lm[i].bwd;
    if (lm[i].transient > sums[4]) sums[4] = lm[i].transient;
  }
  printf("    %-39s %8.1f %8.1f %8.1f %8.1f %8.1f (most)\n", "all layers", mb(sums[0]), mb(sums[1]),
         mb(sums[2]), mb(sums[3]), mb(sums[4]));
  free(lm);
  ct_net_free(net);
  ct_context_free(&ctx);
  return 0;
}
