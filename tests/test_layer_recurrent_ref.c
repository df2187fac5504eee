/* LSTM and RNN on the CPU against the naive double-precision references
 * (recurrent_ref.h): small nets with fixed weights, outputs, parameter and
 * input gradients to 1e-5, with cont = 0 resets mid-sequence, a static
 * input, expose_hidden, and the state carried into the next forward pass;
 * and .caffemodel files in Caffe's blob layout loading into the right
 * blobs. */
#include "recurrent_cases.h"

#include "proto/io.h"

static void run_all(bool lstm) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
  const rc_config cases[] = {
      {lstm, 5, 3, 2, 0, 3, false},
      {lstm, 4, 3, 3, 2, 2, false},
      {lstm, 5, 3, 2, 0, 3, true},
      {lstm, 3, 2, 2, 3, 4, true},
      {lstm, 1, 1, 1, 0, 1, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) rc_run(&cases[i], &ctx, 100 * i + 7);
  ct_context_free(&ctx);
}

static void test_lstm_reference(void **state) { run_all(true); }
static void test_rnn_reference(void **state) { run_all(false); }

/* A blob of the given shape holding v. */
static Caffe__BlobProto *blob_of(int ndim, const int *shape, const double *v) {
  Caffe__BlobProto *b = calloc(1, sizeof *b);
  caffe__blob_proto__init(b);
  b->shape = calloc(1, sizeof *b->shape);
  caffe__blob_shape__init(b->shape);
  b->shape->n_dim = (size_t)ndim;
  b->shape->dim = calloc((size_t)ndim, sizeof(int64_t));
  size_t n = 1;
  for (int i = 0; i < ndim; i++) {
    b->shape->dim[i] = shape[i];
    n *= (size_t)shape[i];
  }
  b->n_data = n;
  b->data = calloc(n, sizeof(float));
  for (size_t i = 0; i < n; i++) b->data[i] = (float)v[i];
  return b;
}

/* Writes a .caffemodel holding one layer 'rec' of type `type` with the given
 * blobs (Caffe's order), as Caffe would store a trained recurrent layer. */
static void write_model(const char *path, const char *type, Caffe__BlobProto **blobs, int n) {
  Caffe__LayerParameter *l = calloc(1, sizeof *l);
  caffe__layer_parameter__init(l);
  l->name = strdup("rec");
  l->type = strdup(type);
  l->blobs = calloc((size_t)n, sizeof *l->blobs);
  memcpy(l->blobs, blobs, (size_t)n * sizeof *blobs);
  l->n_blobs = (size_t)n;
  Caffe__NetParameter net = CAFFE__NET_PARAMETER__INIT;
  net.name = "trained";
  net.layer = &l;
  net.n_layer = 1;
  ct_error err;
  if (ct_proto_write_binary(&net.base, path, &err) != CT_OK) fail_msg("write: %s", err.msg);
  protobuf_c_message_free_unpacked(&l->base, NULL);
}

/* Known arrays stored in Caffe's blob order load into the matching
 * parameters (W_x, b, W_static, W_h [, W_ho, b_o]) and give the reference's
 * outputs; a model with two blobs swapped is refused. */
static void check_layout(bool lstm) {
  const rc_config c = {lstm, 4, 2, 5, 2, 3, false};
  const int G = lstm ? 4 * c.H : c.H;
  const int shapes[6][2] = {{G, c.I}, {G, 0}, {G, c.S}, {G, c.H}, {c.H, c.H}, {c.H, 0}};
  const int nb = lstm ? 4 : 6;
  double *v[6];
  Caffe__BlobProto *blobs[6];
  for (int i = 0; i < nb; i++) {
    v[i] = rc_values((size_t)shapes[i][0] * (shapes[i][1] ? shapes[i][1] : 1), -0.7, 0.7,
                     500 + (uint64_t)i);
    blobs[i] = blob_of(shapes[i][1] ? 2 : 1, shapes[i], v[i]);
  }
  char path[512];
  snprintf(path, sizeof path, "%s/%s.caffemodel", tu_tmpdir(lstm ? "lstm_layout" : "rnn_layout"),
           lstm ? "lstm" : "rnn");
  write_model(path, lstm ? "LSTM" : "RNN", blobs, nb);

  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 9, NULL), CT_OK);
  rc_case rc;
  rc_build(&rc, &c, &ctx, 77);
  ct_error err;
  if (ct_net_copy_trained_file(rc.net, path, &err) != CT_OK) fail_msg("load: %s", err.msg);
  const ct_layer *l = rc.net->layers[rc.layer];
  assert_int_equal(l->nparams, nb);
  for (int i = 0; i < nb; i++) {
    char what[32];
    snprintf(what, sizeof what, "param %d", i);
    rc_expect(what, l->params[i], false, v[i]);
    memcpy(rc.w[i], v[i], rc.wn[i] * sizeof(double));
  }
  rec_ref r;
  rc_reference(&rc, &r, NULL, NULL);
  rc_pass(&rc);
  rc_check(&rc, &r);
  rr_free(&r);

  /* what Cortado saves is the same layout */
  Caffe__NetParameter *saved = ct_net_to_proto(rc.net, false);
  const Caffe__LayerParameter *sl = NULL;
  for (size_t i = 0; i < saved->n_layer; i++)
    if (strcmp(saved->layer[i]->name, "rec") == 0) sl = saved->layer[i];
  assert_non_null(sl);
  assert_int_equal(sl->n_blobs, nb);
  for (int i = 0; i < nb; i++) {
    int64_t dims[4];
    int nd = ct_blob_proto_shape(sl->blobs[i], dims, 4);
    assert_int_equal(nd, shapes[i][1] ? 2 : 1);
    assert_int_equal(dims[0], shapes[i][0]);
    if (shapes[i][1]) assert_int_equal(dims[1], shapes[i][1]);
  }
  ct_net_proto_free(saved);

  /* W_x and W_h swapped: the shapes say so */
  for (int i = 0; i < nb; i++) {
    const int j = i == 0 ? 3 : i == 3 ? 0 : i;
    blobs[i] = blob_of(shapes[j][1] ? 2 : 1, shapes[j], v[j]);
  }
  write_model(path, lstm ? "LSTM" : "RNN", blobs, nb);
  assert_int_equal(ct_net_copy_trained_file(rc.net, path, &err), CT_ERR_INVALID);
  assert_non_null(strstr(err.msg, "rec"));
  rc_free(&rc);
  ct_context_free(&ctx);
  for (int i = 0; i < nb; i++) free(v[i]);
}

static void test_lstm_caffemodel_layout(void **state) { check_layout(true); }
static void test_rnn_caffemodel_layout(void **state) { check_layout(false); }

int main(int argc, char **argv) {
  ct_log_set_level(CT_LOG_WARNING);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lstm_reference),
      cmocka_unit_test(test_rnn_reference),
      cmocka_unit_test(test_lstm_caffemodel_layout),
      cmocka_unit_test(test_rnn_caffemodel_layout),
  };
  tu_filter_tests(argc, argv);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
