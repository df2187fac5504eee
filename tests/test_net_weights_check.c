/* A weights file cut at a layer boundary (it still parses: a NetParameter
 * is its layers one after another) leaves the layers after the cut with
 * their random initial weights.  Copying it is a warning by default, an
 * error with strict_weights, and always an error for the weights of a
 * .solverstate being resumed (the run's own snapshot has every layer). */
#include "proto/io.h"
#include "test_solver_fixture.h"

static int setup(void **state) {
  (void)state;
  tsf_require_layers();
  ct_log_set_level(CT_LOG_ERROR);
  return 0;
}

static const char *k_net =
    "name: 'two'\n"
    "layer { name: 'data' type: 'DummyData' top: 'x' top: 'y'\n"
    "  dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 }\n"
    "    data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }\n"
    "layer { name: 'ip1' type: 'InnerProduct' bottom: 'x' top: 'h'\n"
    "  inner_product_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.5 } } }\n"
    "layer { name: 'ip2' type: 'InnerProduct' bottom: 'h' top: 'p'\n"
    "  inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.5 } } }\n"
    "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'p' bottom: 'y' top: 'loss' }\n";

static ct_solver *make_solver(ct_context *ctx, const char *prefix, bool strict) {
  char rest[4600];
  snprintf(rest, sizeof rest,
           "type: 'SGD' base_lr: 0.01 lr_policy: 'fixed' max_iter: 10 random_seed: 5 snapshot_prefix: '%s'",
           prefix);
  assert_int_equal(ct_context_init(ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  const ct_solver_opts o = {.quiet_nets = true, .strict_weights = strict};
  return tsf_solver_with(k_net, rest, &o, ctx);
}

/* Into dir: the prefix "dir/run" and the snapshot of a solver trained for 2
 * iterations under it; *a and *ctx keep that solver. */
static void trained_snapshot(const char *dir, char *prefix, size_t cap, ct_solver **a, ct_context *ctx) {
  snprintf(prefix, cap, "%s/run", dir);
  *a = make_solver(ctx, prefix, false);
  ct_error err;
  assert_int_equal(ct_solver_step(*a, 2, &err), CT_OK);
  assert_int_equal(ct_solver_snapshot(*a, &err), CT_OK);
}

/* Writes the first `keep` layers of the model at `from` to `to`, and checks
 * that they are a prefix of its bytes: the file cut at a layer boundary. */
static void cut_after(const char *from, const char *to, size_t keep) {
  size_t len;
  char *whole = tu_read_file(from, &len);
  assert_non_null(whole);
  ProtobufCMessage *m;
  ct_error err;
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor, from, &m, &err), CT_OK);
  Caffe__NetParameter *np = (Caffe__NetParameter *)m;
  assert_true(np->n_layer > keep);
  const size_t all = np->n_layer;
  np->n_layer = keep;
  assert_int_equal(ct_proto_write_binary(&np->base, to, &err), CT_OK);
  np->n_layer = all;
  protobuf_c_message_free_unpacked(m, NULL);
  size_t cut_len;
  char *cut = tu_read_file(to, &cut_len);
  assert_true(cut_len < len);
  assert_memory_equal(cut, whole, cut_len);
  free(cut);
  free(whole);
}

static void test_cut_at_layer_boundary(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("weights_cut");
  char prefix[4200], model[4300], cut[4300];
  ct_context c1, c2, c3;
  ct_solver *a;
  trained_snapshot(dir, prefix, sizeof prefix, &a, &c1);
  snprintf(model, sizeof model, "%s_iter_2.caffemodel", prefix);
  snprintf(cut, sizeof cut, "%s/cut.caffemodel", dir);
  ct_error err;
  cut_after(model, cut, 2); /* data, ip1 */

  /* default: copied, with a warning; ip2 keeps its own initial weights */
  ct_solver *b = make_solver(&c2, prefix, false);
  float ip2_before[8];
  memcpy(ip2_before, tsf_param(b->net, "ip2", 0)->data, sizeof ip2_before);
  assert_int_equal(ct_solver_copy_trained_files(b, cut, &err), CT_OK);
  assert_memory_equal(tsf_param(b->net, "ip1", 0)->data, tsf_param(a->net, "ip1", 0)->data, 12 * sizeof(float));
  assert_memory_equal(tsf_param(b->net, "ip2", 0)->data, ip2_before, sizeof ip2_before);

  /* strict: an error naming the layer */
  ct_solver *s = make_solver(&c3, prefix, true);
  assert_int_equal(ct_solver_copy_trained_files(s, cut, &err), CT_ERR_INVALID);
  char want[9000];
  snprintf(want, sizeof want,
           "--weights %s: layer 'ip2' (InnerProduct, 2 blobs) got no weights; its parameters stay as "
           "the fillers made them (the file has no layer of that name: cut short?)",
           cut);
  assert_string_equal(err.msg, want);
  /* the whole file: no error */
  assert_int_equal(ct_solver_copy_trained_files(s, model, &err), CT_OK);
  /* a list: a layer filled by any of its files counts */
  char list[9000];
  snprintf(list, sizeof list, "%s,%s", cut, model);
  assert_int_equal(ct_solver_copy_trained_files(s, list, &err), CT_OK);
  ct_solver_free(s);
  ct_context_free(&c3);
  ct_solver_free(b);
  ct_context_free(&c2);
  ct_solver_free(a);
  ct_context_free(&c1);
}

/* A .solverstate whose learned_net lost its last layers does not resume. */
static void test_resume_needs_every_layer(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("weights_resume_cut");
  char prefix[4200], model[4300], solverstate[4300];
  ct_context c1, c2;
  ct_solver *a;
  trained_snapshot(dir, prefix, sizeof prefix, &a, &c1);
  snprintf(model, sizeof model, "%s_iter_2.caffemodel", prefix);
  snprintf(solverstate, sizeof solverstate, "%s_iter_2.solverstate", prefix);
  ct_error err;
  char whole[4400];
  snprintf(whole, sizeof whole, "%s/whole.caffemodel", dir);
  assert_int_equal(rename(model, whole), 0);
  cut_after(whole, model, 3); /* data, ip1, ip2: the loss has no blobs */
  ct_solver *b = make_solver(&c2, prefix, false);
  assert_int_equal(ct_solver_restore(b, solverstate, &err), CT_OK);
  cut_after(whole, model, 2);
  assert_int_equal(ct_solver_restore(b, solverstate, &err), CT_ERR_INVALID);
  char want[9000];
  snprintf(want, sizeof want,
           "%s: learned_net: %s: layer 'ip2' (InnerProduct, 2 blobs) got no weights; its parameters "
           "stay as the fillers made them (the file has no layer of that name: cut short?)",
           solverstate, model);
  assert_string_equal(err.msg, want);
  ct_solver_free(b);
  ct_context_free(&c2);
  ct_solver_free(a);
  ct_context_free(&c1);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cut_at_layer_boundary),
      cmocka_unit_test(test_resume_needs_every_layer),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
