/* Building a net takes time linear in its size: every name lookup of the
 * builder (bottoms, tops, layers, shared parameters, Split insertion, the
 * outputs) and of weight copies goes through the hash map of core/strmap.h,
 * whose key comparisons are counted.  No timing: the comparisons of a net
 * twice as long must be about twice as many, and a handful per layer.  The
 * map itself is tested here too (growth, removal keeping chains intact).
 * bench/RESULTS.md has the seconds for 20,000 and 200,000 layers. */
#include <stdio.h>

#include "core/log.h"
#include "core/strmap.h"
#include "net/net.h"
#include "proto/textformat.h"
#include "testutil.h"

static void test_strmap(void **state) {
  (void)state;
  enum { N = 20000 };
  char (*keys)[16] = calloc(N, sizeof *keys);
  ct_strmap m = CT_STRMAP_INIT;
  assert_int_equal(ct_strmap_get(&m, "absent"), -1);
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "k%d", i);
    ct_strmap_put(&m, keys[i], i);
  }
  assert_int_equal(m.count, N);
  unsigned long long c0 = ct_strmap_compares();
  for (int i = 0; i < N; i++) assert_int_equal(ct_strmap_get(&m, keys[i]), i);
  /* a comparison or so per hit (equal 64-bit hashes are rare) */
  assert_true(ct_strmap_compares() - c0 < (unsigned long long)N + N / 100);
  char probe[16];
  snprintf(probe, sizeof probe, "k%d", 123); /* another pointer, equal text */
  assert_int_equal(ct_strmap_get(&m, probe), 123);
  ct_strmap_put(&m, keys[7], 70);
  assert_int_equal(ct_strmap_get(&m, "k7"), 70);
  assert_int_equal(m.count, N);
  /* removing every other key leaves the rest reachable (backward shift) */
  for (int i = 0; i < N; i += 2) assert_true(ct_strmap_remove(&m, keys[i]));
  assert_false(ct_strmap_remove(&m, keys[0]));
  assert_int_equal(m.count, N / 2);
  for (int i = 0; i < N; i++) assert_int_equal(ct_strmap_get(&m, keys[i]), i % 2 ? (i == 7 ? 70 : i) : -1);
  ct_strmap_clear(&m);
  assert_int_equal(ct_strmap_get(&m, "k1"), -1);
  ct_strmap_free(&m);
  free(keys);
}

/* A chain of n layers with a fan-out every 10 layers (Split insertion), a
 * shared parameter pair every 100, and a loss. */
static char *chain_text(int n) {
  size_t cap = (size_t)n * 200 + 1024, o = 0;
  char *t = malloc(cap);
  o += (size_t)snprintf(t + o, cap - o,
                        "name: 'chain'\n"
                        "layer { name: 'in' type: 'Input' top: 'b0' top: 'y'\n"
                        "  input_param { shape { dim: 1 dim: 2 } shape { dim: 1 dim: 2 } } }\n");
  for (int i = 1; i <= n; i++) {
    if (i % 10 == 0)
      o += (size_t)snprintf(t + o, cap - o,
                            "layer { name: 'l%d' type: 'Eltwise' bottom: 'b%d' bottom: 'b%d' top: 'b%d' }\n", i,
                            i - 1, i - 2, i);
    else if (i % 100 == 1)
      o += (size_t)snprintf(t + o, cap - o,
                            "layer { name: 'l%d' type: 'InnerProduct' bottom: 'b%d' top: 'b%d'\n"
                            "  param { name: 'w%d' } param { name: 'bias%d' }\n"
                            "  inner_product_param { num_output: 2 } }\n"
                            "layer { name: 'l%d_twin' type: 'InnerProduct' bottom: 'b%d' top: 'b%d_twin'\n"
                            "  param { name: 'w%d' } param { name: 'bias%d' }\n"
                            "  inner_product_param { num_output: 2 } }\n",
                            i, i - 1, i, i, i, i, i, i, i, i);
    else
      o += (size_t)snprintf(t + o, cap - o, "layer { name: 'l%d' type: 'ReLU' bottom: 'b%d' top: 'b%d' }\n", i,
                            i - 1, i);
  }
  snprintf(t + o, cap - o, "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'b%d' bottom: 'y' top: 'loss' }\n",
           n);
  return t;
}

/* The map comparisons of building the chain of n layers, then of copying
 * its own weights back into it by name. */
static void build_counts(int n, unsigned long long *build, unsigned long long *copy) {
  char *text = chain_text(n);
  ProtobufCMessage *m = NULL;
  ct_error err;
  if (ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "chain", &m, &err) != CT_OK)
    fail_msg("%s", err.msg);
  free(text);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_net *net = NULL;
  ct_net_opts o = {.quiet = true};
  unsigned long long c0 = ct_strmap_compares();
  if (ct_net_init(&net, (Caffe__NetParameter *)m, &o, &ctx, &err) != CT_OK) fail_msg("%s", err.msg);
  *build = ct_strmap_compares() - c0;
  assert_true(net->nlayers > n);
  Caffe__NetParameter *saved = ct_net_to_proto(net, false);
  c0 = ct_strmap_compares();
  assert_int_equal(ct_net_copy_trained(net, saved, &err), CT_OK);
  *copy = ct_strmap_compares() - c0;
  ct_net_proto_free(saved);
  ct_net_free(net);
  protobuf_c_message_free_unpacked(m, NULL);
  ct_context_free(&ctx);
}

static void test_build_is_linear(void **state) {
  (void)state;
  unsigned long long b1, c1, b2, c2;
  build_counts(2000, &b1, &c1);
  build_counts(4000, &b2, &c2);
  printf("name comparisons: build %llu / %llu, weight copy %llu / %llu (2000 / 4000 layers)\n", b1, b2, c1, c2);
  /* a few per layer (each bottom, top, name and Split), and twice as many
   * for twice the layers; a linear scan would make ~n^2/2 (2,000,000+) */
  assert_true(b1 > 2000 && b1 < 20 * 2000);
  assert_true(b2 < 2 * b1 + b1 / 10);
  assert_true(c1 >= 2000 && c1 < 4 * 2000);
  assert_true(c2 < 2 * c1 + c1 / 10);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  ct_log_set_level(CT_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strmap),
      cmocka_unit_test(test_build_is_linear),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
