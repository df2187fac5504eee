/* The C half of bench/py_overhead.sh: LeNet's deploy net (batch 64, trained
 * weights) forward through cortado.h, as net.forward() does it from
 * Python: the forward, then the output's values on the host.
 *
 *   py_forward_c DEPLOY WEIGHTS ITERS ROUNDS [GPU]
 *
 * After 20 warm-up passes, ROUNDS rounds of ITERS passes; prints one line
 * per round, "c <microseconds per forward>". */
#include <cortado.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: py_forward_c DEPLOY WEIGHTS ITERS ROUNDS [GPU]\n");
    return 2;
  }
  const int iters = atoi(argv[3]), rounds = atoi(argv[4]);
  const int device = argc > 5 ? atoi(argv[5]) : CORTADO_CPU;
  cortado_set_log_level(2);
  cortado_context *ctx;
  cortado_net *net;
  cortado_net_options o = CORTADO_NET_OPTIONS_INIT;
  o.weights = argv[2];
  if (cortado_context_create(device, 1, &ctx) != CORTADO_OK ||
      cortado_net_create(ctx, argv[1], &o, &net) != CORTADO_OK) {
    fprintf(stderr, "py_forward_c: %s\n", cortado_last_error());
    return 1;
  }
  cortado_context_free(ctx);
  cortado_blob *data = cortado_net_blob_by_name(net, "data");
  float *x = cortado_blob_host_data(data);
  for (size_t i = 0; i < cortado_blob_count(data); i++) x[i] = (float)(i % 97) / 97.0f;
  cortado_blob *out = cortado_net_blob(net, cortado_net_output(net, 0));
  volatile float sink = 0;
  for (int i = 0; i < 20; i++) {
    if (cortado_net_forward(net, NULL) != CORTADO_OK) {
      fprintf(stderr, "py_forward_c: %s\n", cortado_last_error());
      return 1;
    }
    sink += cortado_blob_host_data(out)[0];
  }
  for (int r = 0; r < rounds; r++) {
    double t0 = cortado_seconds();
    for (int i = 0; i < iters; i++) {
      cortado_net_forward(net, NULL);
      sink += cortado_blob_host_data(out)[0];
    }
    printf("c %.3f\n", (cortado_seconds() - t0) / iters * 1e6);
    fflush(stdout);
  }
  cortado_net_free(net);
  return sink == -1.0f;
}
