/* End to end against a reference: BVLC Caffe's trained LeNet weights
 * (lenet_iter_10000.caffemodel) in lenet.prototxt, on a fixed input, give the
 * probabilities that a naive double-precision implementation written here
 * gives, to 1e-5 relative.  Also checks that the net predicts digit-like
 * inputs as its trained classes would: every row of prob sums to 1. */
#include <math.h>

#include "testutil.h"

#include "net/net.h"
#include "net/net_load.h"
#include "proto/io.h"

#define N 4 /* images checked (of the net's batch of 64) */

/* The weights of one layer, as doubles. */
typedef struct {
  double *w, *b;
  int64_t wshape[4];
} params;

static params load_params(const Caffe__NetParameter *m, const char *name) {
  params p = {0};
  for (size_t i = 0; i < m->n_layer; i++) {
    const Caffe__LayerParameter *l = m->layer[i];
    if (strcmp(l->name, name) != 0) continue;
    assert_int_equal(l->n_blobs, 2);
    int n = ct_blob_proto_shape(l->blobs[0], p.wshape, 4);
    for (int a = n; a < 4; a++) p.wshape[a] = 1;
    p.w = calloc(l->blobs[0]->n_data, sizeof(double));
    p.b = calloc(l->blobs[1]->n_data, sizeof(double));
    for (size_t k = 0; k < l->blobs[0]->n_data; k++) p.w[k] = l->blobs[0]->data[k];
    for (size_t k = 0; k < l->blobs[1]->n_data; k++) p.b[k] = l->blobs[1]->data[k];
    return p;
  }
  fail_msg("layer %s not in the caffemodel", name);
  return p;
}

/* valid convolution, stride 1: in (C,H,W) -> out (K,H-k+1,W-k+1) */
static void conv(const double *in, int C, int H, int W, const params *p, double *out) {
  int K = (int)p->wshape[0], k = (int)p->wshape[2], OH = H - k + 1, OW = W - k + 1;
  for (int o = 0; o < K; o++)
    for (int y = 0; y < OH; y++)
      for (int x = 0; x < OW; x++) {
        double s = p->b[o];
        for (int c = 0; c < C; c++)
          for (int i = 0; i < k; i++)
            for (int j = 0; j < k; j++)
              s += p->w[((o * C + c) * k + i) * k + j] * in[(c * H + y + i) * W + x + j];
        out[(o * OH + y) * OW + x] = s;
      }
}

/* 2x2 max pooling, stride 2 (the sizes here are even, so Caffe's ceil is exact) */
static void pool(const double *in, int C, int H, int W, double *out) {
  for (int c = 0; c < C; c++)
    for (int y = 0; y < H / 2; y++)
      for (int x = 0; x < W / 2; x++) {
        double m = -INFINITY;
        for (int i = 0; i < 2; i++)
          for (int j = 0; j < 2; j++) m = fmax(m, in[(c * H + 2 * y + i) * W + 2 * x + j]);
        out[(c * (H / 2) + y) * (W / 2) + x] = m;
      }
}

static void ip(const double *in, int D, const params *p, double *out, bool relu) {
  int K = (int)p->wshape[0];
  for (int o = 0; o < K; o++) {
    double s = p->b[o];
    for (int d = 0; d < D; d++) s += p->w[(size_t)o * D + d] * in[d];
    out[o] = relu && s < 0 ? 0 : s;
  }
}

static void test_lenet_matches_naive_reference(void **state) {
  ct_error err;
  Caffe__NetParameter *np;
  if (ct_net_param_read(tu_fixture("lenet.prototxt"), &np, &err) != CT_OK) fail_msg("%s", err.msg);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err), CT_OK);
  ct_net_opts o = {.phase = CT_PHASE_TEST, .quiet = true};
  ct_net *net;
  if (ct_net_init(&net, np, &o, &ctx, &err) != CT_OK) fail_msg("%s", err.msg);
  const char *model = tu_fixture("lenet_iter_10000.caffemodel");
  if (ct_net_copy_trained_file(net, model, &err) != CT_OK) fail_msg("%s", err.msg);

  /* input: strokes on a dark background, in the 0..1 range MNIST training used */
  ct_tensor *data = ct_net_blob(net, "data");
  assert_non_null(data);
  assert_int_equal(data->count, 64 * 28 * 28);
  float *x = calloc(data->count, sizeof(float));
  tu_fill_uniform(x, data->count, 0.0f, 0.25f, 7);
  for (int n = 0; n < 64; n++)
    for (int y = 4; y < 24; y++) x[(n * 28 + y) * 28 + 8 + (n + y) % 12] = 1.0f;
  ct_tensor_upload(data, x);
  assert_int_equal(ct_net_forward(net, NULL, &err), CT_OK);
  ct_tensor *prob = ct_net_blob(net, "prob");
  assert_non_null(prob);
  assert_int_equal(prob->count, 64 * 10);

  ProtobufCMessage *mm;
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor, model, &mm, &err), CT_OK);
  const Caffe__NetParameter *m = (const Caffe__NetParameter *)mm;
  params c1 = load_params(m, "conv1"), c2 = load_params(m, "conv2"), f1 = load_params(m, "ip1"),
         f2 = load_params(m, "ip2");
  double in[28 * 28], a1[20 * 24 * 24], p1[20 * 12 * 12], a2[50 * 8 * 8], p2[50 * 4 * 4], h[500],
      logits[10];
  for (int n = 0; n < N; n++) {
    for (int k = 0; k < 28 * 28; k++) in[k] = x[n * 28 * 28 + k];
    conv(in, 1, 28, 28, &c1, a1);
    pool(a1, 20, 24, 24, p1);
    conv(p1, 20, 12, 12, &c2, a2);
    pool(a2, 50, 8, 8, p2);
    ip(p2, 800, &f1, h, true);
    ip(h, 500, &f2, logits, false);
    /* the logits (ip2), relative to the largest of the image's logits */
    const ct_tensor *ip2 = ct_net_blob(net, "ip2");
    double scale = 0;
    for (int k = 0; k < 10; k++) scale = fmax(scale, fabs(logits[k]));
    for (int k = 0; k < 10; k++) {
      double rel = fabs(ct_f32(ip2)[n * 10 + k] - logits[k]) / scale;
      if (rel > 1e-5) fail_msg("image %d logit %d: cortado %.9g, reference %.9g", n, k, ct_f32(ip2)[n * 10 + k], logits[k]);
    }
    double mx = logits[0], z = 0, sum = 0;
    for (int k = 1; k < 10; k++) mx = fmax(mx, logits[k]);
    for (int k = 0; k < 10; k++) z += exp(logits[k] - mx);
    for (int k = 0; k < 10; k++) {
      double ref = exp(logits[k] - mx) / z;
      double got = ct_f32(prob)[n * 10 + k];
      sum += got;
      double rel = fabs(got - ref) / fmax(fabs(ref), 1e-6);
      if (rel > 1e-5 && fabs(got - ref) > 1e-7)
        fail_msg("image %d class %d: cortado %.9g, reference %.9g (relative error %.3g)", n, k, got, ref, rel);
    }
    assert_true(fabs(sum - 1.0) < 1e-5);
  }
  free(c1.w), free(c1.b), free(c2.w), free(c2.b), free(f1.w), free(f1.b), free(f2.w), free(f2.b);
  protobuf_c_message_free_unpacked(mm, NULL);
  free(x);
  ct_net_free(net);
  ct_context_free(&ctx);
  protobuf_c_message_free_unpacked(&np->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_lenet_matches_naive_reference)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
