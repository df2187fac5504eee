/* Testing during training: Caffe's Solver::TestAll and Test. */
#include <stdlib.h>

#include "core/log.h"
#include "core/trace.h"
#include "runtime/program.h"
#include "runtime/stages.h"
#include "solvers/solver_internal.h"

/* Handles requests that arrive while testing, as Caffe does between test
 * passes: snapshots at once, and marks a stop.  Returns CT_OK unless a
 * snapshot fails. */
static ct_status poll_requests(ct_solver *s, ct_error *err) {
  const int actions = ct_runtime_poll(s->rt);
  if (actions & CT_RT_SNAPSHOT) CT_TRY(ct_solver_snapshot(s, err));
  if (actions & CT_RT_STOP) s->requested_early_exit = true;
  return CT_OK;
}

/* Replaces this worker's sums (loss, then scores) by the means over
 * workers. */
static ct_status reduce_over_workers(ct_solver *s, float *loss, float *score, int nscores,
                                     ct_error *err) {
  double *v = ct_xcalloc((size_t)nscores + 1, sizeof(double));
  v[0] = *loss;
  for (int i = 0; i < nscores; i++) v[i + 1] = score[i];
  ct_status st = ct_runtime_average(s->rt, v, (size_t)nscores + 1, err);
  if (st == CT_OK) {
    *loss = (float)v[0];
    for (int i = 0; i < nscores; i++) score[i] = (float)v[i + 1];
  }
  free(v);
  return st;
}

static ct_status test_one(ct_solver *s, int id, ct_error *err) {
  LOG_INFO("Iteration %d, Testing net (#%d)", s->iter, id);
  ct_net *net = s->test_nets[id];
  ct_net_share_trained(net, s->net);
  const int iters = s->param->test_iter[id];
  /* one score per output value, in output order (Caffe's test_score) */
  int nscores = 0;
  for (int j = 0; j < net->noutputs && iters > 0; j++)
    nscores += (int)net->blobs[net->output_ids[j]]->count;
  float *score = ct_xcalloc((size_t)nscores + 1, sizeof(float));
  int *score_output = ct_xcalloc((size_t)nscores + 1, sizeof(int));
  float *host = NULL;
  size_t host_cap = 0;
  float loss = 0.0f;
  ct_status st = CT_OK;
  for (int i = 0; i < iters && st == CT_OK; i++) {
    st = poll_requests(s, err);
    if (st != CT_OK || s->requested_early_exit) break;
    double iter_loss = 0;
    if (s->test_stages) {
      /* one forward through the stages; then every stage holds the
       * outputs (and the loss) of the stage that computes each */
      ct_net_zero_loss(net);
      st = ct_program_run(s->test_progs[id], ct_net_signature(net), err);
      int none = 0;
      iter_loss = net->loss_host;
      if (st == CT_OK) st = ct_stages_agree(s->test_stages[id], &iter_loss, &none, err);
    } else {
      st = ct_net_forward(net, &iter_loss, err);
    }
    if (st != CT_OK) break;
    if (s->param->test_compute_loss) loss += (float)iter_loss;
    int idx = 0;
    for (int j = 0; j < net->noutputs; j++) {
      const ct_tensor *t = net->blobs[net->output_ids[j]];
      if (t->count > host_cap) {
        host_cap = t->count;
        host = ct_xrealloc(host, host_cap * sizeof(float));
      }
      ct_tensor_download(t, host);
      for (size_t k = 0; k < t->count && idx < nscores; k++, idx++) {
        score[idx] += host[k];
        score_output[idx] = j;
      }
    }
  }
  free(host);
  if (st == CT_OK && s->requested_early_exit) LOG_INFO("Test interrupted.");
  if (st == CT_OK && !s->requested_early_exit && ct_runtime_workers(s->rt) > 1)
    st = reduce_over_workers(s, &loss, score, nscores, err);
  if (st == CT_OK && !s->requested_early_exit) {
    if (s->param->test_compute_loss) {
      loss /= (float)iters;
      LOG_INFO("Test loss: %g", (double)loss);
    }
    for (int i = 0; i < nscores; i++) {
      int b = net->output_ids[score_output[i]];
      float w = ct_solver_blob_loss_weight(net, b);
      float mean = score[i] / (float)iters;
      score[i] = mean;
      if (w != 0.0f)
        LOG_INFO("    Test net output #%d: %s = %g (* %g = %g loss)", i, net->blobs[b]->name,
                 (double)mean, (double)w, (double)(w * mean));
      else
        LOG_INFO("    Test net output #%d: %s = %g", i, net->blobs[b]->name, (double)mean);
    }
    free(s->test_scores[id]);
    s->test_scores[id] = score;
    s->ntest_scores[id] = nscores;
    score = NULL;
  }
  free(score);
  free(score_output);
  return st;
}

ct_status ct_solver_test_all(ct_solver *s, ct_error *err) {
  for (int i = 0; i < s->ntest_nets && !s->requested_early_exit; i++) {
    const bool traced = ct_trace_on();
    const double t0 = traced ? ct_trace_now() : 0;
    CT_TRY(test_one(s, i, err));
    if (traced) {
      const ct_trace_args a = {.index_name = "net", .index = i};
      ct_trace_complete(CT_TRACE_COMPUTE, "test", "test", t0, ct_trace_now(), &a);
    }
  }
  return CT_OK;
}
