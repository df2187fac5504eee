/* Feeding a GPU net's data layer from pinned host batches (net_feed.c): an
 * Input layer given the next_batch / release_batch hooks serves numbered
 * batches; each iteration of the program must see its own batch in the
 * tops, at most one batch may be out at a time, and everything but the copy
 * and the prefetch runs as CUDA graphs.  Skipped (77) without a GPU. */
#include "runtime/runtime.h"
#include "runtime_nets.h"

static const char k_net[] =
    "name: 'fed'\n"
    "layer { name: 'in' type: 'Input' top: 'x' top: 'y'\n"
    "  input_param { shape { dim: 4 dim: 16 } shape { dim: 4 dim: 1 } } }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'p'\n"
    "  inner_product_param { num_output: 1 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
    "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'p' bottom: 'y' top: 'loss' }\n";

/* The hooks' state: batches 0, 1, 2, ... with value 1000 * batch + i. */
static struct {
  float *x, *y;       /* pinned */
  int next;           /* the batch next_batch hands out next */
  int out;            /* batches out */
  int max_out;
} g_src;

static ct_status next_batch(ct_layer *l, const float **host, void **token, ct_error *err) {
  g_src.out++;
  if (g_src.out > g_src.max_out) g_src.max_out = g_src.out;
  for (int i = 0; i < 64; i++) g_src.x[i] = (float)(1000 * g_src.next + i);
  for (int i = 0; i < 4; i++) g_src.y[i] = (float)g_src.next;
  host[0] = g_src.x;
  host[1] = g_src.y;
  *token = (void *)(uintptr_t)(g_src.next + 1);
  g_src.next++;
  return CT_OK;
}

static void release_batch(ct_layer *l, void *token) {
  assert_true((uintptr_t)token == (uintptr_t)g_src.next); /* the one handed out last */
  g_src.out--;
}

static void test_feed(void **state) {
  if (!ct_layer_find("EuclideanLoss")) skip();
  ct_context ctx;
  ct_error err;
  assert_int_equal(ct_context_init(&ctx, 0, 1, &err), CT_OK);
  ct_net *net = rn_net(k_net, &ctx, false);
  static ct_layer_ops fed_ops;
  fed_ops = *net->layers[0]->ops;
  fed_ops.next_batch = next_batch;
  fed_ops.release_batch = release_batch;
  net->layers[0]->ops = &fed_ops;
  g_src.x = ct_mem_alloc_pinned(64 * sizeof(float));
  g_src.y = ct_mem_alloc_pinned(4 * sizeof(float));
  ct_runtime *rt;
  assert_int_equal(ct_runtime_new(&rt, net, NULL, NULL), CT_OK);
  float x[64], y[4];
  for (int it = 0; it < 8; it++) {
    double loss;
    assert_int_equal(rt_iteration(rt, &loss, &err), CT_OK);
    ct_tensor_download(ct_net_blob(net, "x"), x);
    ct_tensor_download(ct_net_blob(net, "y"), y);
    for (int i = 0; i < 64; i++)
      if (x[i] != (float)(1000 * it + i)) fail_msg("iteration %d: x[%d] = %g", it, i, x[i]);
    for (int i = 0; i < 4; i++) assert_true(y[i] == (float)it);
    assert_int_equal(g_src.next, it + 2); /* batch it + 1 is staged */
  }
  assert_int_equal(g_src.max_out, 1);
  ct_program_stats st;
  ct_runtime_stats(rt, &st);
  if (ct_program_graphs_allowed()) {
    assert_true(st.replaying);
    assert_int_equal(st.plain_steps, 2); /* the copy and the prefetch */
  }
  ct_runtime_free(rt);
  ct_net_free(net); /* releases the staged batch */
  assert_int_equal(g_src.out, 0);
  ct_mem_free_pinned(g_src.x);
  ct_mem_free_pinned(g_src.y);
  ct_context_free(&ctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_feed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
