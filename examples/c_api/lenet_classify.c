/* A program written against cortado.h alone: classify a digit with a
 * trained LeNet (the deploy net of Caffe's MNIST example and its weights).
 *
 *   cc lenet_classify.c $(pkg-config --cflags --libs cortado) -o lenet_classify
 *   ./lenet_classify lenet.prototxt lenet_iter_10000.caffemodel
 *
 * It draws the digit it classifies: a one (a vertical stroke) in the first
 * image of the batch, scaled as Caffe's MNIST example scales its inputs
 * (x / 256).  Prints the version, the winning class and its probability,
 * and a solver-free check of the blob API (a parameter's shape).  Exits 1
 * with Cortado's message on any failure. */
#include <cortado.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
  fprintf(stderr, "lenet_classify: %s: %s\n", what, cortado_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: lenet_classify DEPLOY.prototxt WEIGHTS.caffemodel\n");
    return 2;
  }
  printf("cortado %s (API %d)\n", cortado_version(), cortado_api_version());
  if (cortado_api_version() != CORTADO_API_VERSION) {
    fprintf(stderr, "lenet_classify: built for API %d, linked with API %d\n", CORTADO_API_VERSION,
            cortado_api_version());
    return 1;
  }
  cortado_set_log_level(2);
  cortado_context *ctx;
  if (cortado_context_create(CORTADO_CPU, 1, &ctx) != CORTADO_OK) return fail("context");
  cortado_net_options opts = CORTADO_NET_OPTIONS_INIT;
  opts.phase = CORTADO_TEST;
  opts.weights = argv[2];
  cortado_net *net;
  if (cortado_net_create(ctx, argv[1], &opts, &net) != CORTADO_OK) return fail(argv[1]);
  cortado_context_free(ctx); /* the net keeps its context */

  cortado_blob *data = cortado_net_blob_by_name(net, "data");
  if (!data || cortado_blob_num_axes(data) != 4) {
    fprintf(stderr, "lenet_classify: the net has no 4-axis blob 'data'\n");
    return 1;
  }
  const int *shape = cortado_blob_shape(data);
  const int h = shape[2], w = shape[3];
  float *x = cortado_blob_host_data(data);
  memset(x, 0, cortado_blob_count(data) * sizeof *x);
  for (int r = 4; r < h - 4; r++)
    for (int c = w / 2 - 2; c <= w / 2 + 1; c++) x[r * w + c] = 255.0f / 256.0f;

  if (cortado_net_forward(net, NULL) != CORTADO_OK) return fail("forward");
  const int out = cortado_net_output(net, 0);
  cortado_blob *prob = cortado_net_blob(net, out);
  const int classes = cortado_blob_shape(prob)[1];
  const float *p = cortado_blob_host_data(prob);
  int best = 0;
  for (int k = 1; k < classes; k++)
    if (p[k] > p[best]) best = k;
  printf("output '%s': class %d, probability %.3f\n", cortado_net_blob_name(net, out), best, p[best]);

  const int conv1 = cortado_net_layer_index(net, "conv1");
  if (conv1 < 0 || cortado_net_layer_num_params(net, conv1) != 2) {
    fprintf(stderr, "lenet_classify: no layer 'conv1' with weights and bias\n");
    return 1;
  }
  const int *ws = cortado_blob_shape(cortado_net_layer_param(net, conv1, 0));
  printf("conv1 weights %dx%dx%dx%d\n", ws[0], ws[1], ws[2], ws[3]);
  cortado_net_free(net);
  return 0;
}
