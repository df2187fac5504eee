/* cortado test: score trained weights on a network's TEST phase. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/run_common.h"
#include "core/log.h"

static const ct_flag_spec test_flags[] = {
    CT_CLI_FLAG_MODEL,
    {"weights", CT_FLAG_STRING, NULL, "The trained .caffemodel to score (required).",
     .meta = "FILE"},
    CT_CLI_FLAG_GPU_ONE,
    CT_CLI_FLAG_CPU,
    {"allow_missing_weights", CT_FLAG_BOOL, "false",
     "Score even when a layer with parameters gets no weights from --weights (it keeps the "
     "fillers' random values); without it that is an error."},
    CT_CLI_FLAG_ITERATIONS,
    CT_CLI_FLAG_LEVEL,
    CT_CLI_FLAG_STAGE,
    CT_CLI_FLAG_MATH,
    CT_CLI_FLAG_DUMMY_DATA,
    CT_CLI_FLAG_DUMMY_SHAPE,
};

/* Caffe's `test`: --iterations forward passes of the TEST net with the given
 * weights; each output's per-batch values and their means, with the loss
 * weight of loss outputs. */
static int test_run(const ct_cli_args *args) {
  ct_error err;
  if (!ct_cli_is_set(args, "weights"))
    return ct_cli_error(CT_EXIT_USAGE, "'cortado test' needs --weights=FILE (the .caffemodel to score)");
  int device;
  bool cpu;
  if (ct_cli_wants_cpu(args, &cpu, &err) != CT_OK) return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  if (ct_cli_pick_device(args, &device, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  ct_context ctx;
  if (ct_cli_context_init(args, &ctx, device, 1701, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  ct_net *net;
  if (ct_cli_build_model(args, CT_PHASE_TEST, &ctx, &net, &err) != CT_OK) {
    ct_context_free(&ctx);
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  }
  int rc = CT_EXIT_OK;
  /* random weights have no score worth reporting: a layer the file does not
   * fill is an error unless asked for */
  const char *weights = ct_cli_string(args, "weights");
  char what[CT_ERROR_MSG_MAX / 2];
  snprintf(what, sizeof what, "--weights %s", weights);
  ct_net_weights_begin(net);
  const bool allow = ct_cli_bool(args, "allow_missing_weights");
  if (ct_net_copy_trained_file(net, weights, &err) != CT_OK ||
      ct_net_weights_check(net, what, !allow, allow ? NULL : "--allow_missing_weights scores it anyway",
                           &err) != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    goto done;
  }
  int iters = ct_cli_int(args, "iterations");
  LOG_INFO("Running for %d iterations.", iters);
  /* one running sum per output value, in output order */
  size_t nscores = 0;
  for (int o = 0; o < net->noutputs; o++) nscores += net->blobs[net->output_ids[o]]->count;
  double *sum = calloc(nscores + 1, sizeof(double));
  float *host = NULL;
  size_t host_cap = 0;
  double loss_total = 0;
  for (int it = 0; it < iters; it++) {
    double loss;
    if (ct_net_forward(net, &loss, &err) != CT_OK) {
      rc = ct_cli_error(CT_EXIT_FAILURE, "iteration %d: %s", it, err.msg);
      break;
    }
    loss_total += loss;
    size_t k = 0;
    for (int o = 0; o < net->noutputs; o++) {
      ct_tensor *t = net->blobs[net->output_ids[o]];
      if (t->count > host_cap) host = realloc(host, (host_cap = t->count) * sizeof(float));
      ct_tensor_download(t, host);
      for (size_t j = 0; j < t->count; j++, k++) {
        sum[k] += host[j];
        LOG_INFO("Batch %d, %s = %g", it, t->name, (double)host[j]);
      }
    }
  }
  if (rc == CT_EXIT_OK) {
    LOG_INFO("Loss: %g", loss_total / iters);
    size_t k = 0;
    for (int o = 0; o < net->noutputs; o++) {
      int id = net->output_ids[o];
      ct_tensor *t = net->blobs[id];
      float weight = 0;
      for (int li = 0; li < net->nlayers; li++)
        for (int j = 0; j < net->layers[li]->ntop; j++)
          if (net->top_ids[li][j] == id) weight = net->layers[li]->loss_weight[j];
      for (size_t j = 0; j < t->count; j++, k++) {
        double mean = sum[k] / iters;
        if (weight != 0.0f)
          LOG_INFO("%s = %g (* %g = %g loss)", t->name, mean, (double)weight, weight * mean);
        else
          LOG_INFO("%s = %g", t->name, mean);
      }
    }
  }
  free(sum);
  free(host);
done:
  ct_net_free(net);
  ct_context_free(&ctx);
  return rc;
}

const ct_cli_command ct_cli_cmd_test = {
    .name = "test",
    .summary = "Score trained weights on a network's TEST phase.",
    .usage = "cortado test --model=FILE --weights=FILE [--iterations=N] [--gpu=ID] [flags]",
    .description = "Runs --iterations forward passes of the TEST phase net and logs each "
                   "output per batch and its mean over all batches.",
    .flags = test_flags,
    .n_flags = sizeof test_flags / sizeof test_flags[0],
    .min_args = 0,
    .max_args = 0,
    .host_threads = true,
    .run = test_run,
};
