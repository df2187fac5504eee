/* NetState filtering and Split insertion on messages (no layers run). */
#include "testutil.h"
#include "proto/catalog.h"

#include "net/net.h"

static char *dup(const char *s) { return strdup(s); }

/* A layer with the given name, type, bottoms and tops ("a,b" lists). */
static Caffe__LayerParameter *mk_layer(const char *name, const char *type, const char *bottoms,
                                       const char *tops) {
  Caffe__LayerParameter *l = calloc(1, sizeof *l);
  caffe__layer_parameter__init(l);
  l->name = dup(name);
  l->type = dup(type);
  const char *lists[2] = {bottoms, tops};
  for (int w = 0; w < 2; w++) {
    char **arr = calloc(8, sizeof(char *));
    size_t n = 0;
    if (lists[w] && *lists[w]) {
      char *copy = dup(lists[w]), *save = NULL;
      for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) arr[n++] = dup(tok);
      free(copy);
    }
    if (w == 0) {
      l->bottom = arr;
      l->n_bottom = n;
    } else {
      l->top = arr;
      l->n_top = n;
    }
  }
  return l;
}

static Caffe__NetParameter *mk_net(Caffe__LayerParameter **layers, size_t n) {
  Caffe__NetParameter *net = calloc(1, sizeof *net);
  caffe__net_parameter__init(net);
  net->name = dup("t");
  net->layer = calloc(n, sizeof *layers);
  memcpy(net->layer, layers, n * sizeof *layers);
  net->n_layer = n;
  return net;
}

static Caffe__NetStateRule *rule_phase(Caffe__Phase ph) {
  Caffe__NetStateRule *r = calloc(1, sizeof *r);
  caffe__net_state_rule__init(r);
  r->has_phase = 1;
  r->phase = ph;
  return r;
}

static void test_filter_by_phase_and_stage(void **state) {
  Caffe__LayerParameter *l[4] = {
      mk_layer("train_data", "Input", "", "data"), mk_layer("test_data", "Input", "", "data"),
      mk_layer("ip", "InnerProduct", "data", "ip"), mk_layer("staged", "ReLU", "ip", "ip")};
  l[0]->include = calloc(1, sizeof(void *));
  l[0]->include[0] = rule_phase(CAFFE__PHASE__TRAIN);
  l[0]->n_include = 1;
  l[1]->include = calloc(1, sizeof(void *));
  l[1]->include[0] = rule_phase(CAFFE__PHASE__TEST);
  l[1]->n_include = 1;
  Caffe__NetStateRule *st = calloc(1, sizeof *st);
  caffe__net_state_rule__init(st);
  st->stage = calloc(1, sizeof(char *));
  st->stage[0] = dup("deploy");
  st->n_stage = 1;
  l[3]->include = calloc(1, sizeof(void *));
  l[3]->include[0] = st;
  l[3]->n_include = 1;
  Caffe__NetParameter *net = mk_net(l, 4);

  Caffe__NetState s = CAFFE__NET_STATE__INIT;
  s.has_phase = 1;
  s.phase = CAFFE__PHASE__TEST;
  Caffe__NetParameter *out;
  ct_error err;
  assert_int_equal(ct_net_filter(net, &s, &out, &err), CT_OK);
  assert_int_equal(out->n_layer, 2);
  assert_string_equal(out->layer[0]->name, "test_data");
  assert_string_equal(out->layer[1]->name, "ip");
  protobuf_c_message_free_unpacked(&out->base, NULL);

  char *stages[] = {"deploy"};
  s.phase = CAFFE__PHASE__TRAIN;
  s.stage = stages;
  s.n_stage = 1;
  assert_int_equal(ct_net_filter(net, &s, &out, &err), CT_OK);
  assert_int_equal(out->n_layer, 3);
  assert_string_equal(out->layer[0]->name, "train_data");
  assert_string_equal(out->layer[2]->name, "staged");
  protobuf_c_message_free_unpacked(&out->base, NULL);

  /* include and exclude together is an error */
  l[2]->exclude = calloc(1, sizeof(void *));
  l[2]->exclude[0] = rule_phase(CAFFE__PHASE__TEST);
  l[2]->n_exclude = 1;
  l[2]->include = calloc(1, sizeof(void *));
  l[2]->include[0] = rule_phase(CAFFE__PHASE__TRAIN);
  l[2]->n_include = 1;
  assert_int_equal(ct_net_filter(net, &s, &out, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'ip': specify either include rules or exclude rules, not both");
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_splits_caffe_names(void **state) {
  /* data feeds two layers; ip's output is a loss and also read by acc */
  Caffe__LayerParameter *l[4] = {
      mk_layer("data", "Input", "", "data,label"), mk_layer("ip", "InnerProduct", "data", "ip"),
      mk_layer("loss", "SoftmaxWithLoss", "ip,label", "loss"),
      mk_layer("acc", "Accuracy", "ip,label", "acc")};
  Caffe__NetParameter *net = mk_net(l, 4);
  ct_error err;
  assert_int_equal(ct_net_insert_splits(net, &err), CT_OK);
  /* data, label_data_1_split, ip, ip_ip_0_split, loss, acc */
  assert_int_equal(net->n_layer, 6);
  assert_string_equal(net->layer[1]->name, "label_data_1_split");
  assert_string_equal(net->layer[1]->type, "Split");
  assert_int_equal(net->layer[1]->n_top, 2);
  assert_string_equal(net->layer[1]->top[0], "label_data_1_split_0");
  assert_string_equal(net->layer[3]->name, "ip_ip_0_split");
  assert_string_equal(net->layer[4]->bottom[0], "ip_ip_0_split_0");
  assert_string_equal(net->layer[4]->bottom[1], "label_data_1_split_0");
  assert_string_equal(net->layer[5]->bottom[0], "ip_ip_0_split_1");
  assert_string_equal(net->layer[5]->bottom[1], "label_data_1_split_1");
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_splits_unknown_bottom(void **state) {
  Caffe__LayerParameter *l[2] = {mk_layer("data", "Input", "", "data"),
                                 mk_layer("ip", "InnerProduct", "dta", "ip")};
  Caffe__NetParameter *net = mk_net(l, 2);
  ct_error err;
  assert_int_equal(ct_net_insert_splits(net, &err), CT_ERR_NOTFOUND);
  assert_string_equal(err.msg, "layer 'ip': unknown bottom blob 'dta' (bottom index 0)");
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_splits_loss_weight_moves(void **state) {
  Caffe__LayerParameter *l[3] = {mk_layer("data", "Input", "", "data"),
                                 mk_layer("ip", "InnerProduct", "data", "ip"),
                                 mk_layer("relu", "ReLU", "ip", "out")};
  l[1]->loss_weight = calloc(1, sizeof(float));
  l[1]->loss_weight[0] = 0.5f;
  l[1]->n_loss_weight = 1;
  Caffe__NetParameter *net = mk_net(l, 3);
  ct_error err;
  assert_int_equal(ct_net_insert_splits(net, &err), CT_OK);
  assert_int_equal(net->n_layer, 4);
  assert_int_equal(net->layer[1]->n_loss_weight, 0);
  assert_int_equal(net->layer[2]->n_loss_weight, 2);
  assert_float_equal(net->layer[2]->loss_weight[0], 0.5f, 0);
  assert_float_equal(net->layer[2]->loss_weight[1], 0.0f, 0);
  assert_string_equal(net->layer[3]->bottom[0], "ip_ip_0_split_1");
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* Every BVLC Caffe layer type is registered or reported as one Cortado
 * lacks (the list shrinks as types are registered); forks' types and typos
 * get their own messages. */
static void test_layer_type_messages(void **state) {
  size_t n;
  const char *const *caffe = ct_caffe_layer_types(&n);
  const char *missing[128];
  size_t n_missing = ct_layer_missing_caffe_types(missing, 128);
  assert_true(n >= 60);
  size_t counted = 0;
  for (size_t i = 0; i < n; i++) {
    const ct_layer_ops *ops;
    ct_error err;
    if (ct_layer_find(caffe[i])) {
      assert_int_equal(ct_layer_lookup(caffe[i], &ops, &err), CT_OK);
      continue;
    }
    assert_int_equal(ct_layer_lookup(caffe[i], &ops, &err), CT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "is a Caffe layer type that Cortado does not implement yet"));
    assert_true(counted < n_missing);
    assert_string_equal(missing[counted++], caffe[i]);
  }
  assert_int_equal(counted, n_missing);
  const ct_layer_ops *ops;
  ct_error err;
  assert_int_equal(ct_layer_lookup("PriorBox", &ops, &err), CT_ERR_UNSUPPORTED);
  assert_string_equal(err.msg, "type 'PriorBox' is a layer type of SSD's Caffe fork (weiliu89/caffe, branch ssd), "
                               "not of BVLC Caffe; Cortado does not implement it");
  assert_int_equal(ct_layer_lookup("Poolng", &ops, &err), CT_ERR_NOTFOUND);
  assert_string_equal(err.msg, "unknown layer type 'Poolng' (did you mean 'Pooling'?)");
  assert_int_equal(ct_layer_lookup("Frobnicator", &ops, &err), CT_ERR_NOTFOUND);
  assert_non_null(strstr(err.msg, "unknown layer type 'Frobnicator'; known types: "));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_layer_type_messages),
                                     cmocka_unit_test(test_filter_by_phase_and_stage),
                                     cmocka_unit_test(test_splits_caffe_names),
                                     cmocka_unit_test(test_splits_unknown_bottom),
                                     cmocka_unit_test(test_splits_loss_weight_moves)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
