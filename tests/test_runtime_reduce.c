/* The runtime's reduce steps on the CPU, with a communicator that records
 * what it is asked: buckets cover the flat gradient in order, each launched
 * as soon as its range is final (the first one before the first layer's
 * backward has run), exactly once per iteration whatever iter_size, and a
 * failed launch is the iteration's error. */
#include <stdio.h>

#include "testutil.h"

#include "net/net.h"
#include "proto/textformat.h"
#include "runtime/runtime.h"

#define MAX_CALLS 64

typedef struct call_log {
  ct_net *net;
  int ncalls;
  size_t offset[MAX_CALLS], count[MAX_CALLS];
  bool tail_zero[MAX_CALLS]; /* ip1's gradient still all zero at the call */
  int fail_at;               /* the call that fails (-1: none) */
} call_log;

static call_log g_log;

/* Whether ip1's parameter gradients (the net's first layer: final last) are
 * all zero. */
static bool ip1_grads_zero(const ct_net *net) {
  int ip1 = ct_net_layer_index(net, "ip1");
  for (int q = 0; q < net->nparams; q++) {
    if (net->params[q].layer != ip1) continue;
    const float *g = net->flat_diff + net->params[q].offset;
    for (size_t i = 0; i < net->params[q].count; i++)
      if (g[i] != 0.0f) return false;
  }
  return true;
}

static ct_status rec_allreduce(ct_comm *c, float *buf, size_t count, ct_comm_op op, void *stream,
                               ct_error *err) {
  int k = g_log.ncalls++;
  assert_true(k < MAX_CALLS);
  assert_int_equal(op, CT_COMM_AVG);
  g_log.offset[k] = (size_t)(buf - g_log.net->flat_diff);
  g_log.count[k] = count;
  g_log.tail_zero[k] = ip1_grads_zero(g_log.net);
  if (k == g_log.fail_at) return ct_error_set(err, CT_ERR_COMM, "recorded failure at call %d", k);
  return CT_OK;
}
static ct_status rec_broadcast(ct_comm *c, float *buf, size_t count, int root, void *stream, ct_error *err) {
  return CT_OK;
}
static ct_status rec_f64(ct_comm *c, double *buf, size_t count, ct_error *err) { return CT_OK; }
static ct_status rec_barrier(ct_comm *c, ct_error *err) { return CT_OK; }
static ct_status rec_wait(ct_comm *c, void *stream, ct_error *err) { return CT_OK; }
static void rec_abort(ct_comm *c) {}
static void rec_destroy(ct_comm *c) {}

static const ct_comm_ops k_rec_ops = {"recording", rec_allreduce, rec_broadcast, rec_f64,
                                      rec_barrier, rec_wait,      rec_abort,     rec_destroy};

static const char *k_net =
    "layer { name: 'data' type: 'DummyData' top: 'x' top: 'label'\n"
    "  dummy_data_param { shape { dim: 4 dim: 8 } shape { dim: 4 }\n"
    "    data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }\n"
    "layer { name: 'ip1' type: 'InnerProduct' bottom: 'x' top: 'h'\n"
    "  inner_product_param { num_output: 16 weight_filler { type: 'gaussian' std: 0.3 } } }\n"
    "layer { name: 'relu' type: 'ReLU' bottom: 'h' top: 'h' }\n"
    "layer { name: 'ip2' type: 'InnerProduct' bottom: 'h' top: 'y'\n"
    "  inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.3 } } }\n"
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n";

typedef struct fixture {
  ct_context ctx;
  ct_net *net;
  ct_comm comm;
  size_t bucket_bytes;
  int iter_size;  /* of rt */
  ct_runtime *rt; /* made by iteration() for its iter_size */
} fixture;

static void setup_net(fixture *f, const char *text, size_t bucket_bytes) {
  ct_error err;
  assert_int_equal(ct_context_init(&f->ctx, CT_DEVICE_CPU, 5, &err), CT_OK);
  Caffe__NetParameter *np = NULL;
  assert_int_equal(ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "net",
                                 (ProtobufCMessage **)&np, &err),
                   CT_OK);
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .quiet = true};
  if (ct_net_init(&f->net, np, &o, &f->ctx, &err) != CT_OK) fail_msg("%s", err.msg);
  protobuf_c_message_free_unpacked(&np->base, NULL);
  memset(&f->comm, 0, sizeof f->comm);
  f->comm.ops = &k_rec_ops;
  f->comm.size = 2;
  memset(&g_log, 0, sizeof g_log);
  g_log.net = f->net;
  g_log.fail_at = -1;
  f->bucket_bytes = bucket_bytes;
  f->rt = NULL;
  f->iter_size = 0;
}

static void setup(fixture *f, size_t bucket_bytes) { setup_net(f, k_net, bucket_bytes); }

static void teardown(fixture *f) {
  ct_runtime_free(f->rt);
  ct_net_free(f->net);
  ct_context_free(&f->ctx);
}

/* One iteration of a runtime (forward, backward and the reduce steps; no
 * update) with iter_size passes. */
static ct_status iteration(fixture *f, int iter_size, ct_error *err) {
  if (f->iter_size != iter_size) {
    ct_runtime_free(f->rt);
    ct_rt_opts o = {.iter_size = iter_size};
    assert_int_equal(ct_runtime_new(&f->rt, f->net, &o, err), CT_OK);
    ct_reduce_opts dp = {.bucket_bytes = f->bucket_bytes};
    assert_int_equal(ct_runtime_set_reduce(f->rt, &f->comm, &dp, false, NULL, err), CT_OK);
    f->iter_size = iter_size;
  }
  unsigned seq;
  CT_TRY(ct_runtime_launch(f->rt, &seq, err));
  ct_rt_result res;
  return ct_runtime_finish(f->rt, seq, &res, err);
}

static void test_buckets_cover_the_gradient_in_order_during_backward(void **state) {
  fixture f;
  setup(&f, 256); /* 64 floats */
  ct_error err;
  assert_int_equal(iteration(&f, 1, &err), CT_OK);
  const size_t n = f.net->flat_count;
  assert_int_equal(g_log.ncalls, (int)((n + 63) / 64));
  size_t next = 0;
  for (int k = 0; k < g_log.ncalls; k++) {
    assert_int_equal(g_log.offset[k], next);
    assert_true(g_log.count[k] <= 64 && g_log.count[k] > 0);
    next += g_log.count[k];
  }
  assert_int_equal(next, n);
  /* the first bucket (ip2's weights) left before ip1's backward ran */
  assert_true(g_log.tail_zero[0]);
  assert_false(g_log.tail_zero[g_log.ncalls - 1]);
  char line[256];
  ct_runtime_describe_reduce(f.rt, line, sizeof line);
  char want[256];
  snprintf(want, sizeof want,
           "%d buckets of up to 0.0 MB over %zu parameters (0.00 MB), each averaged during backward as "
           "soon as it is final",
           g_log.ncalls, n);
  assert_string_equal(line, want);
  teardown(&f);
}

static void test_iter_size_reduces_once(void **state) {
  fixture f;
  setup(&f, 256);
  ct_error err;
  const int nb = (int)((f.net->flat_count + 63) / 64);
  assert_int_equal(iteration(&f, 3, &err), CT_OK);
  assert_int_equal(g_log.ncalls, nb);
  assert_int_equal(iteration(&f, 2, &err), CT_OK);
  assert_int_equal(g_log.ncalls, 2 * nb);
  teardown(&f);
}

static void test_default_bucket_is_one_call(void **state) {
  fixture f;
  setup(&f, 0);
  ct_error err;
  assert_int_equal(iteration(&f, 1, &err), CT_OK);
  assert_int_equal(g_log.ncalls, 1);
  assert_int_equal(g_log.count[0], f.net->flat_count);
  teardown(&f);
}

/* Three 512x512 InnerProducts (just over 1 MiB of gradient each) and a
 * small one on top: with the default 25 MB buckets the whole gradient is
 * the last bucket, which is cut where ip3's and ip2's gradients become
 * final (ip4's, too small for a piece, goes with ip3's), so that ip1's, the
 * last of backward, leaves alone. */
static void test_last_bucket_cut_at_layers(void **state) {
  static const char wide[] =
      "layer { name: 'data' type: 'DummyData' top: 'x' top: 'label'\n"
      "  dummy_data_param { shape { dim: 4 dim: 512 } shape { dim: 4 }\n"
      "    data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }\n"
      "layer { name: 'ip1' type: 'InnerProduct' bottom: 'x' top: 'h1'\n"
      "  inner_product_param { num_output: 512 weight_filler { type: 'gaussian' std: 0.05 } } }\n"
      "layer { name: 'ip2' type: 'InnerProduct' bottom: 'h1' top: 'h2'\n"
      "  inner_product_param { num_output: 512 weight_filler { type: 'gaussian' std: 0.05 } } }\n"
      "layer { name: 'ip3' type: 'InnerProduct' bottom: 'h2' top: 'h3'\n"
      "  inner_product_param { num_output: 512 weight_filler { type: 'gaussian' std: 0.05 } } }\n"
      "layer { name: 'ip4' type: 'InnerProduct' bottom: 'h3' top: 'y'\n"
      "  inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.05 } } }\n"
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n";
  fixture f;
  setup_net(&f, wide, 0);
  ct_error err;
  assert_int_equal(iteration(&f, 1, &err), CT_OK);
  /* where ip3's and ip2's gradients are final (the flat layout pads each
   * parameter a little) */
  const size_t e3 = f.net->layer_ready_count[ct_net_layer_index(f.net, "ip3")];
  const size_t e2 = f.net->layer_ready_count[ct_net_layer_index(f.net, "ip2")];
  const size_t n = f.net->flat_count;
  assert_true(e3 >= 512 * 512 && e2 - e3 >= 512 * 512 && n - e2 >= 512 * 512);
  assert_int_equal(g_log.ncalls, 3);
  const size_t want_offset[3] = {0, e3, e2}, want_count[3] = {e3, e2 - e3, n - e2};
  for (int k = 0; k < 3; k++) {
    assert_int_equal(g_log.offset[k], want_offset[k]);
    assert_int_equal(g_log.count[k], want_count[k]);
  }
  /* the first two left before ip1's backward */
  assert_true(g_log.tail_zero[0] && g_log.tail_zero[1]);
  assert_false(g_log.tail_zero[2]);
  teardown(&f);
}

/* A failed launch stops the iteration with its error; the next iteration
 * starts afresh. */
static void test_launch_failure_is_the_iterations_error(void **state) {
  fixture f;
  setup(&f, 256);
  g_log.fail_at = 1;
  ct_error err;
  assert_int_equal(iteration(&f, 1, &err), CT_ERR_COMM);
  assert_string_equal(err.msg, "recorded failure at call 1");
  assert_int_equal(g_log.ncalls, 2);
  g_log.fail_at = -1;
  assert_int_equal(iteration(&f, 1, &err), CT_OK);
  teardown(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buckets_cover_the_gradient_in_order_during_backward),
      cmocka_unit_test(test_iter_size_reduces_once),
      cmocka_unit_test(test_default_bucket_is_one_call),
      cmocka_unit_test(test_last_bucket_cut_at_layers),
      cmocka_unit_test(test_launch_failure_is_the_iterations_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
