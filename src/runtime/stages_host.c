/* Pipeline stages on the host (see stages.h): snapshots written by stage 0
 * from every stage's parts, the agreement after each iteration, and the
 * stages' timing and memory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/mem.h"
#include "gpu/gpu.h"
#include "math/typed.h"
#include "proto/io.h"
#include "runtime/stages_internal.h"

/* ------------------------------------------------------------------ snapshots */

/* A message travels as floats: its byte count (8 bytes), then its bytes. */
static ct_status send_message(ct_stages *pl, const ProtobufCMessage *m, int tag, ct_error *err) {
  const uint64_t len = protobuf_c_message_get_packed_size(m);
  const size_t n = 2 + (size_t)(len + 3) / 4;
  float *buf = ct_xcalloc(n, sizeof *buf);
  memcpy(buf, &len, sizeof len);
  protobuf_c_message_pack(m, (uint8_t *)(buf + 2));
  ct_status st = ct_comm_send(pl->comm, buf, n, 0, tag, NULL, err);
  free(buf);
  return st;
}

/* Stage 0: the next message with `tag` from any stage; *from gets the
 * stage.  Errors: the communicator's; CT_ERR_PARSE for a message that does
 * not unpack (a bug of the sender). */
static ct_status recv_message(ct_stages *pl, int tag, const ProtobufCMessageDescriptor *desc,
                              int *from, ProtobufCMessage **out, ct_error *err) {
  size_t n = 0;
  CT_TRY(ct_comm_probe(pl->comm, tag, from, &n, err));
  CT_ASSERT(n >= 2 && *from > 0 && *from < pl->nstages);
  float *buf = ct_xcalloc(n, sizeof *buf);
  ct_status st = ct_comm_recv(pl->comm, buf, n, *from, tag, NULL, err);
  uint64_t len = 0;
  memcpy(&len, buf, sizeof len);
  CT_ASSERT(len <= (n - 2) * sizeof(float));
  *out = NULL;
  if (st == CT_OK) *out = protobuf_c_message_unpack(desc, NULL, (size_t)len, (const uint8_t *)(buf + 2));
  if (st == CT_OK && !*out)
    st = ct_error_set(err, CT_ERR_PARSE, "--pipeline: stage %d's snapshot part does not unpack", *from);
  free(buf);
  return st;
}

ct_status ct_stages_write_model(ct_stages *pl, Caffe__NetParameter *model, const char *path,
                                ct_error *err) {
  if (pl->stage != 0) return send_message(pl, &model->base, ct_stages_model_tag(pl), err);
  CT_ASSERT((int)model->n_layer == pl->net->nlayers);
  for (int k = 1; k < pl->nstages; k++) {
    int s;
    ProtobufCMessage *m;
    CT_TRY(recv_message(pl, ct_stages_model_tag(pl), &caffe__net_parameter__descriptor, &s, &m, err));
    Caffe__NetParameter *part = (Caffe__NetParameter *)m;
    CT_ASSERT(part->n_layer == model->n_layer);
    /* stage s's layers take its blobs (ct_net_proto_free frees them one by one) */
    for (int i = pl->first[s]; i < pl->first[s + 1]; i++) {
      Caffe__LayerParameter *dst = model->layer[i], *src = part->layer[i];
      CT_ASSERT(dst->n_blobs == 0);
      free(dst->blobs);
      dst->blobs = src->blobs;
      dst->n_blobs = src->n_blobs;
      src->blobs = NULL;
      src->n_blobs = 0;
    }
    protobuf_c_message_free_unpacked(m, NULL);
  }
  return ct_proto_write_binary(&model->base, path, err);
}

ct_status ct_stages_write_state(ct_stages *pl, Caffe__SolverState *state, int nslots,
                                const char *path, ct_error *err) {
  int before, total;
  CT_TRY(ct_stages_history_span(pl, &before, &total, err));
  if (pl->stage != 0) return send_message(pl, &state->base, ct_stages_state_tag(pl), err);
  Caffe__SolverState **parts = ct_xcalloc((size_t)pl->nstages, sizeof *parts);
  parts[0] = state;
  ct_status st = CT_OK;
  for (int k = 1; k < pl->nstages && st == CT_OK; k++) {
    int s;
    ProtobufCMessage *m = NULL;
    st = recv_message(pl, ct_stages_state_tag(pl), &caffe__solver_state__descriptor, &s, &m, err);
    if (st == CT_OK) parts[s] = (Caffe__SolverState *)m;
  }
  Caffe__BlobProto **own = state->history;
  const size_t nown = state->n_history;
  Caffe__BlobProto **all = NULL;
  if (st == CT_OK) {
    /* slot by slot, the stages in order */
    all = ct_xcalloc((size_t)nslots * (size_t)pl->hist_total + 1, sizeof *all);
    size_t n = 0;
    for (int k = 0; k < nslots; k++)
      for (int s = 0; s < pl->nstages; s++) {
        const size_t per = parts[s]->n_history / (size_t)nslots;
        CT_ASSERT(per * (size_t)nslots == parts[s]->n_history);
        for (size_t i = 0; i < per; i++) all[n++] = parts[s]->history[(size_t)k * per + i];
      }
    CT_ASSERT(n == (size_t)nslots * (size_t)pl->hist_total);
    state->history = all;
    state->n_history = n;
    st = ct_proto_write_binary(&state->base, path, err);
  }
  state->history = own;
  state->n_history = nown;
  free(all);
  for (int s = 1; s < pl->nstages; s++)
    if (parts[s]) protobuf_c_message_free_unpacked(&parts[s]->base, NULL);
  free(parts);
  return st;
}

ct_status ct_stages_gather_f64(ct_stages *pl, const double *values, int n, double **all,
                               int *total, ct_error *err) {
  *all = NULL;
  *total = 0;
  /* the counts, then the values at their places (a sum with zeros is exact) */
  double *counts = ct_xcalloc((size_t)pl->nstages, sizeof *counts);
  counts[pl->stage] = n;
  ct_status st = ct_comm_allreduce_host_f64(pl->comm, counts, (size_t)pl->nstages, err);
  int before = 0, sum = 0;
  for (int s = 0; st == CT_OK && s < pl->nstages; s++) {
    if (s < pl->stage) before += (int)counts[s];
    sum += (int)counts[s];
  }
  free(counts);
  CT_TRY(st);
  double *v = ct_xcalloc((size_t)sum + 1, sizeof *v);
  if (n > 0) memcpy(v + before, values, (size_t)n * sizeof *v);
  st = ct_comm_allreduce_host_f64(pl->comm, v, (size_t)sum, err);
  if (st != CT_OK) {
    free(v);
    return st;
  }
  *all = v;
  *total = sum;
  return CT_OK;
}

ct_status ct_stages_history_span(ct_stages *pl, int *before, int *total, ct_error *err) {
  if (pl->hist_total < 0) {
    /* the stages' parameter counts, summed over the communicator */
    double *v = ct_xcalloc((size_t)pl->nstages, sizeof *v);
    v[pl->stage] = pl->net->nparams;
    ct_status st = ct_comm_allreduce_host_f64(pl->comm, v, (size_t)pl->nstages, err);
    if (st == CT_OK) {
      pl->hist_before = pl->hist_total = 0;
      for (int s = 0; s < pl->nstages; s++) {
        if (s < pl->stage) pl->hist_before += (int)v[s];
        pl->hist_total += (int)v[s];
      }
    }
    free(v);
    CT_TRY(st);
  }
  *before = pl->hist_before;
  *total = pl->hist_total;
  return CT_OK;
}

/* ------------------------------------------------------------------ agreement */

/* Bytes of blob data and diffs the stage's net holds (owned arrays and the
 * diff pool; views count where their storage lives). */
static size_t blob_bytes_held(const ct_net *net) {
  size_t n = 0;
  for (int b = 0; b < net->nblobs; b++) {
    const ct_tensor *t = net->blobs[b];
    if (t->owns_data) n += ct_tensor_bytes(t, t->capacity);
    if (t->owns_diff) n += ct_tensor_bytes(t, t->diff_capacity);
  }
  if (net->blob_plan) n += (net->blob_plan->pool_count + net->blob_plan->zero_count) * sizeof(float);
  return n;
}

/* This stage's slot of the agreed statistics (ct_stages_timing's order). */
static void own_stats(const ct_stages *pl, double *v) {
  size_t held = 0, peak = 0;
  ct_mem_host_stats(&held, &peak);
  size_t values = 0;
  for (int q = 0; q < pl->net->nparams; q++) values += pl->net->params[q].count;
  size_t dev = 0, dev_peak = 0;
  if (pl->device != CT_DEVICE_CPU) ct_gpu_memory_stats(pl->device, &dev, &dev_peak);
  const double s[CT_STAGES_NSTATS] = {
      pl->iterations, pl->wall, pl->forward, pl->backward, pl->idle, (double)held, (double)peak,
      (double)values,
      (double)blob_bytes_held(pl->net),
      (double)((pl->stash_bytes + pl->send_bytes + pl->rslot_bytes) * (size_t)pl->ring +
               pl->recv_bytes),
      (double)dev, (double)dev_peak};
  memcpy(v, s, sizeof s);
}

ct_status ct_stages_agree(ct_stages *pl, double *loss, int *actions, ct_error *err) {
  const ct_net *net = pl->net;
  const double t0 = ct_monotonic_s();
  if (pl->t_begin > 0) { /* an iteration (not a display's forward) ends */
    pl->iterations++;
    pl->wall += t0 - pl->t_begin;
  }
  const int nbits = 8 * (int)sizeof(int);
  const size_t nstats = (size_t)pl->nstages * CT_STAGES_NSTATS;
  const size_t n = 1 + (size_t)nbits + nstats + pl->output_count;
  double *v = ct_xcalloc(n, sizeof *v);
  v[0] = *loss;
  for (int b = 0; b < nbits; b++) v[1 + b] = (*actions >> b) & 1;
  own_stats(pl, v + 1 + nbits + (size_t)pl->stage * CT_STAGES_NSTATS);
  /* the outputs' values pass through host memory (a GPU's blobs are on it) */
  size_t at = 1 + (size_t)nbits + nstats;
  unsigned char *host = pl->output_host;
  for (int k = 0; k < net->noutputs; k++) {
    const ct_tensor *t = net->blobs[net->output_ids[k]];
    const bool mine = pl->output_stage[k] == pl->stage;
    if (mine) ct_mem_copy(CT_DEVICE_CPU, host, pl->device, t->data, ct_tensor_bytes(t, t->count));
    for (size_t i = 0; i < t->count; i++) v[at + i] = mine ? (double)ct_typed_load(t->dtype, host, i) : 0.0;
    at += t->count;
  }
  ct_status st = ct_comm_allreduce_host_f64(pl->comm, v, n, err);
  if (st == CT_OK) {
    *loss = v[0];
    *actions = 0;
    for (int b = 0; b < nbits; b++)
      if (v[1 + b] > 0) *actions |= 1 << b;
    memcpy(pl->stats, v + 1 + nbits, nstats * sizeof *v);
    at = 1 + (size_t)nbits + nstats;
    for (int k = 0; k < net->noutputs; k++) {
      const ct_tensor *t = net->blobs[net->output_ids[k]];
      for (size_t i = 0; i < t->count; i++) ct_typed_store(t->dtype, host, i, (float)v[at + i]);
      ct_mem_copy(pl->device, t->data, CT_DEVICE_CPU, host, ct_tensor_bytes(t, t->count));
      at += t->count;
    }
  }
  free(v);
  /* waiting here for the slowest stage is idle time too (it shows in the
   * next agreement) */
  const double t1 = ct_monotonic_s();
  if (pl->t_begin > 0) {
    pl->idle += t1 - t0;
    pl->wall += t1 - t0;
  }
  pl->t_begin = 0;
  return st;
}

/* ------------------------------------------------------------------ reports */

void ct_stages_timing_of(const ct_stages *pl, int s, ct_stages_timing *t) {
  CT_ASSERT(s >= 0 && s < pl->nstages);
  const double *v = pl->stats + (size_t)s * CT_STAGES_NSTATS;
  *t = (ct_stages_timing){.iterations = (int)v[0], .wall = v[1], .forward = v[2], .backward = v[3],
                          .idle = v[4], .held_bytes = (size_t)v[5], .peak_bytes = (size_t)v[6],
                          .param_values = (size_t)v[7], .blob_bytes = (size_t)v[8],
                          .buffer_bytes = (size_t)v[9], .device_bytes = (size_t)v[10],
                          .device_peak = (size_t)v[11]};
}

void ct_stages_reset_timing(ct_stages *pl) {
  pl->iterations = 0;
  pl->wall = pl->forward = pl->backward = pl->idle = 0;
  ct_mem_host_reset_peak();
  if (pl->device != CT_DEVICE_CPU) ct_gpu_memory_reset_peak(pl->device);
}

void ct_stages_describe(const ct_stages *pl, char *buf, size_t size) {
  const Caffe__NetParameter *np = pl->net->param;
  const int lo = pl->first[pl->stage], hi = pl->first[pl->stage + 1];
  snprintf(buf, size, "stage %d of %d: layers %d-%d ('%s' to '%s'), %d input%s, %d output%s, %d "
           "micro-batch%s (%s)%s",
           pl->stage, pl->nstages, lo, hi - 1, np->layer[lo]->name ? np->layer[lo]->name : "",
           np->layer[hi - 1]->name ? np->layer[hi - 1]->name : "", pl->nin, pl->nin == 1 ? "" : "s",
           pl->nout, pl->nout == 1 ? "" : "s", pl->micro, pl->micro == 1 ? "" : "es",
           pl->schedule == CT_STAGES_1F1B ? "1F1B" : "GPipe",
           !pl->stash_data ? "" : pl->keep ? ", activations kept" : ", forwards recomputed");
}

void ct_stages_describe_timing(const ct_stages *pl, int s, char *buf, size_t size) {
  ct_stages_timing t;
  ct_stages_timing_of(pl, s, &t);
  const double per = t.iterations > 0 ? 1e3 / t.iterations : 0;
  const int n = snprintf(buf, size,
           "stage %d: forward %.3f ms, backward %.3f ms, idle %.3f ms of %.3f ms per iteration "
           "(bubble %.1f%%); %zu parameters, %zu bytes of blobs, %zu bytes of stash, send and receive "
           "buffers; host memory %zu bytes, peak %zu bytes",
           s, t.forward * per, t.backward * per, t.idle * per, t.wall * per,
           t.wall > 0 ? 100.0 * t.idle / t.wall : 0.0, t.param_values, t.blob_bytes,
           t.buffer_bytes, t.held_bytes, t.peak_bytes);
  if (t.device_peak > 0 && n > 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, "; GPU memory %zu bytes, peak %zu bytes", t.device_bytes,
             t.device_peak);
}
