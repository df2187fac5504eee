/* layer_bench: per-layer host times of one training iteration of a net, as
 * robust numbers on a shared machine.  Where `cortado time` averages, this
 * repeats every layer's forward (and backward) REPS times and reports the
 * minimum and the median, then the same for whole iterations.
 *
 *   layer_bench MODEL C,H,W [REPS] [--caffe] [--cpu]
 *
 * The data layers become DummyData of C,H,W samples (as --dummy_data).  With
 * --caffe every Convolution and Deconvolution is pinned to engine CAFFE (the
 * im2col + GEMM reference) to compare the engines.  With --cpu the times are
 * the process's CPU time instead of wall time: with one thread
 * (OMP_NUM_THREADS=1) that is the work itself, whatever else runs on the
 * machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "core/log.h"
#include "net/net.h"
#include "net/net_load.h"

static clockid_t g_clock = CLOCK_MONOTONIC;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(g_clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* min and median of t[0..n) (sorts t). */
static void summarize(double *t, int n, double *min, double *med) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  *min = t[0];
  *med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int usage(void) {
  fprintf(stderr, "usage: layer_bench MODEL C,H,W [REPS] [--caffe] [--cpu]\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  int chw[3];
  if (sscanf(argv[2], "%d,%d,%d", &chw[0], &chw[1], &chw[2]) != 3) return usage();
  int reps = 20;
  bool pin_caffe = false;
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--caffe") == 0) pin_caffe = true;
    else if (strcmp(argv[i], "--cpu") == 0) g_clock = CLOCK_PROCESS_CPUTIME_ID;
    else if ((reps = atoi(argv[i])) < 1) return usage();
  }
  ct_log_set_level(CT_LOG_WARNING);
  ct_error err;
  Caffe__NetParameter *param;
  if (ct_net_param_read(argv[1], &param, &err) != CT_OK ||
      ct_net_param_replace_data_layers(param, chw, &err) != CT_OK) {
    fprintf(stderr, "layer_bench: %s\n", err.msg);
    return 1;
  }
  for (size_t i = 0; pin_caffe && i < param->n_layer; i++) {
    Caffe__ConvolutionParameter *cp = param->layer[i]->convolution_param;
    if (cp) {
      cp->has_engine = 1;
      cp->engine = CAFFE__CONVOLUTION_PARAMETER__ENGINE__CAFFE;
    }
  }
  ct_context ctx;
  ct_net *net;
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .source_name = argv[1], .quiet = true};
  if (ct_context_init(&ctx, CT_DEVICE_CPU, 1701, &err) != CT_OK ||
      ct_net_init(&net, param, &o, &ctx, &err) != CT_OK) {
    fprintf(stderr, "layer_bench: %s\n", err.msg);
    return 1;
  }
  protobuf_c_message_free_unpacked(&param->base, NULL);
  double loss;
  if (ct_net_forward(net, &loss, &err) != CT_OK) {
    fprintf(stderr, "layer_bench: %s\n", err.msg);
    return 1;
  }
  ct_net_backward(net);

  double *t = calloc((size_t)reps, sizeof *t);
  double sum_min = 0, sum_med = 0;
  printf("%-10s %-14s %9s %9s %9s %9s  (ms, %d reps)\n", "layer", "type", "fwd min", "fwd med",
         "bwd min", "bwd med", reps);
  for (int i = 0; i < net->nlayers; i++) {
    ct_layer *l = net->layers[i];
    double fmin, fmed, bmin = 0, bmed = 0;
    for (int r = 0; r < reps; r++) {
      double t0 = now_ms();
      if (ct_layer_forward(l, net->bottoms[i], net->tops[i], NULL, &err) != CT_OK) {
        fprintf(stderr, "layer_bench: %s\n", err.msg);
        return 1;
      }
      t[r] = now_ms() - t0;
    }
    summarize(t, reps, &fmin, &fmed);
    if (net->layer_need_backward[i]) {
      for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        ct_layer_backward(l, net->tops[i], net->bottom_need_backward[i], net->bottoms[i]);
        t[r] = now_ms() - t0;
      }
      summarize(t, reps, &bmin, &bmed);
    }
    sum_min += fmin + bmin;
    sum_med += fmed + bmed;
    printf("%-10s %-14s %9.3f %9.3f %9.3f %9.3f\n", l->name, l->ops->type, fmin, fmed, bmin, bmed);
  }
  printf("%-25s %9.3f %9.3f  (sum of the layers' min / median)\n", "layers", sum_min, sum_med);
  for (int r = 0; r < reps; r++) {
    double t0 = now_ms();
    if (ct_net_forward(net, &loss, &err) != CT_OK) {
      fprintf(stderr, "layer_bench: %s\n", err.msg);
      return 1;
    }
    ct_net_backward(net);
    t[r] = now_ms() - t0;
  }
  double imin, imed;
  summarize(t, reps, &imin, &imed);
  printf("%-25s %9.3f %9.3f  (whole forward + backward: min / median)\n", "iteration", imin, imed);
  free(t);
  ct_net_free(net);
  ct_context_free(&ctx);
  return 0;
}
