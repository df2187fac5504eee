/* net_memory: host memory of one training iteration of a net on the CPU,
 * from the allocation counter of core/mem.h, split into where it goes.
 *
 *   net_memory MODEL C,H,W BATCH
 *
 * The data layers become DummyData of BATCH samples of C,H,W (as
 * --dummy_data).  Prints the bytes held after the build and the peak over
 * one forward and backward, and the blobs' share: activation data arrays
 * owned by blobs (views such as in-place tops, Flatten and Split tops count
 * nothing), diffs owned by blobs, the diff pool, the flat parameter buffers;
 * the rest is the layers' scratch (saved inputs, normalised copies, column
 * buffers) and the context's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/log.h"
#include "core/mem.h"
#include "net/net.h"
#include "net/net_load.h"

static int usage(void) {
  fprintf(stderr, "usage: net_memory MODEL C,H,W BATCH\n");
  return 2;
}

static double mb(size_t bytes) { return bytes / 1048576.0; }

int main(int argc, char **argv) {
  int chw[3], batch;
  if (argc != 4 || sscanf(argv[2], "%d,%d,%d", &chw[0], &chw[1], &chw[2]) != 3 ||
      (batch = atoi(argv[3])) < 1)
    return usage();
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
  size_t base;
  ct_mem_host_stats(&base, NULL);
  if (ct_context_init(&ctx, CT_DEVICE_CPU, 1701, &err) != CT_OK ||
      ct_net_init(&net, param, &o, &ctx, &err) != CT_OK) {
    fprintf(stderr, "net_memory: %s\n", err.msg);
    return 1;
  }
  protobuf_c_message_free_unpacked(&param->base, NULL);
  size_t built;
  ct_mem_host_stats(&built, NULL);
  double loss;
  if (ct_net_forward(net, &loss, &err) != CT_OK) {
    fprintf(stderr, "net_memory: %s\n", err.msg);
    return 1;
  }
  ct_net_backward(net);
  size_t now, peak;
  ct_mem_host_stats(&now, &peak);
  size_t data = 0, diffs = 0;
  for (int b = 0; b < net->nblobs; b++) {
    const ct_tensor *t = net->blobs[b];
    if (t->owns_data) data += t->capacity * sizeof(float);
    if (t->owns_diff) diffs += t->diff_capacity * sizeof(float);
  }
  size_t pool = net->diff_plan ? net->diff_plan->pool_count * sizeof(float) : 0;
  size_t zero = net->diff_plan ? net->diff_plan->zero_count * sizeof(float) : 0;
  size_t flat = 2 * net->flat_count * sizeof(float);
  size_t held = now - base;
  printf("%s, batch %d of %d,%d,%d: %d layers, %d blobs\n", argv[1], batch, chw[0], chw[1], chw[2],
         net->nlayers, net->nblobs);
  printf("  held after build      %9.1f MB\n", mb(built - base));
  printf("  peak over fwd + bwd   %9.1f MB\n", mb(peak - base));
  printf("  held after fwd + bwd  %9.1f MB, of which:\n", mb(held));
  printf("    blob data (owned)   %9.1f MB\n", mb(data));
  printf("    blob diffs (owned)  %9.1f MB\n", mb(diffs));
  printf("    diff pool + zeros   %9.1f MB\n", mb(pool + zero));
  printf("    flat params + grads %9.1f MB\n", mb(flat));
  printf("    the rest (scratch)  %9.1f MB\n", mb(held - data - diffs - pool - zero - flat));
  ct_net_free(net);
  ct_context_free(&ctx);
  return 0;
}
