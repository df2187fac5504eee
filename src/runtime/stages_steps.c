/* Pipeline stages (stages.h): the boundary's buffers and the steps that
 * cross it (receives, sends, receives posted ahead, the stash), on the CPU
 * and on a GPU, and the timing marks.  The plan and the program that
 * places these steps are in stages.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/mem.h"
#include "gpu/gpu.h"
#include "math/math.h"
#include "math/typed.h"
#include "runtime/stages_internal.h"

/* ct_stages.rreqs: a posted receive that has completed. */
static char received_mark;
#define RECEIVED ((void *)&received_mark)

/* Host memory for the send ring and the receive buffer: pinned on a GPU
 * (copies from and to the device go at full speed), zeroed (the words'
 * padding travels too). */
static unsigned char *host_buffer(const ct_stages *pl, size_t bytes) {
  if (pl->device != CT_DEVICE_CPU) return ct_mem_alloc_pinned(bytes);
  unsigned char *p = ct_mem_alloc(CT_DEVICE_CPU, bytes);
  memset(p, 0, bytes);
  return p;
}

static void free_host_buffer(const ct_stages *pl, unsigned char *p) {
  if (!p) return;
  if (pl->device != CT_DEVICE_CPU) ct_mem_free_pinned(p);
  else ct_mem_free(CT_DEVICE_CPU, p);
}

/* A receive lands in the blob itself on the CPU when the blob is whole
 * words; else in recvbuf first. */
static bool lands_in_place(const ct_stages *pl, size_t bytes) {
  return pl->device == CT_DEVICE_CPU && bytes % 4 == 0;
}

/* The send and receive buffers (see the struct) and the loss's keeper. */
void ct_stages_plan_buffers(ct_stages *pl) {
  pl->out_off = ct_xcalloc((size_t)pl->nout + 1, sizeof *pl->out_off);
  pl->in_off = ct_xcalloc((size_t)pl->nin + 1, sizeof *pl->in_off);
  for (int k = 0; k < pl->nout; k++) {
    const size_t bytes = ct_stages_blob_bytes(pl, pl->out[k].blob);
    pl->out_off[k] = pl->send_bytes;
    pl->send_bytes += 4 * ct_stages_words(bytes);
    if (pl->out[k].diff && !lands_in_place(pl, bytes) && bytes > pl->recv_bytes) pl->recv_bytes = bytes;
  }
  for (int k = 0; k < pl->nin; k++) {
    const size_t bytes = ct_stages_blob_bytes(pl, pl->in[k].blob);
    pl->in_off[k] = pl->send_bytes;
    if (pl->in[k].diff) pl->send_bytes += 4 * ct_stages_words(bytes);
    if (!lands_in_place(pl, bytes) && bytes > pl->recv_bytes) pl->recv_bytes = bytes;
  }
  pl->recv_bytes = 4 * ct_stages_words(pl->recv_bytes);
  pl->sendbuf = host_buffer(pl, pl->send_bytes * (size_t)pl->ring);
  if (pl->recv_bytes) pl->recvbuf = host_buffer(pl, pl->recv_bytes);
  pl->reqs = ct_xcalloc((size_t)pl->ring * (size_t)(pl->nout + pl->nin) + 1, sizeof *pl->reqs);
  pl->loss_saved = ct_mem_alloc(pl->device, sizeof *pl->loss_saved);
}

void ct_stages_free_buffers(ct_stages *pl) {
  free(pl->out_off);
  free(pl->in_off);
  free_host_buffer(pl, pl->sendbuf);
  free_host_buffer(pl, pl->recvbuf);
  if (pl->loss_saved) ct_mem_free(pl->device, pl->loss_saved);
  for (int i = 0; pl->reqs && i < pl->ring * (pl->nout + pl->nin); i++) free(pl->reqs[i]);
  free(pl->reqs);
  for (int i = 0; pl->rreqs && i < pl->ring * (pl->nin + pl->nout); i++)
    if (pl->rreqs[i] != RECEIVED) free(pl->rreqs[i]);
  free(pl->rreqs);
  free(pl->rin_off);
  free(pl->rout_off);
  free_host_buffer(pl, pl->rring);
}

/* ------------------------------------------------------------------ steps */

/* Time since t0 (ct_monotonic_s) that a step spent waiting: idle time
 * (the bubble) when it falls inside an iteration, from its first step
 * (t_begin) to its agreement. */
static void add_idle(ct_stages *pl, double t0) {
  if (pl->t_begin > 0) pl->idle += ct_monotonic_s() - t0;
}

/* A receive; the time it blocks is idle time. */
static ct_status timed_recv(ct_stages *pl, float *buf, size_t count, int peer, int tag,
                            ct_error *err) {
  const double t0 = ct_monotonic_s();
  ct_status st = ct_comm_recv(pl->comm, buf, count, peer, tag, NULL, err);
  add_idle(pl, t0);
  return st;
}

/* Tests the n requests of reqs (NULL and `done` skipped), each one that has
 * completed becoming `done`. */
static ct_status test_requests(ct_stages *pl, void **reqs, int n, void *done, ct_error *err) {
  for (int i = 0; i < n; i++) {
    if (!reqs[i] || reqs[i] == done) continue;
    bool finished = false;
    ct_status st = ct_comm_send_test(pl->comm, reqs[i], &finished, err);
    if (finished) reqs[i] = done;
    CT_TRY(st);
  }
  return CT_OK;
}

/* The sends in flight move along (an MPI message larger than its eager
 * limit moves only while the sender is inside MPI), and so do the receives
 * posted ahead (a receiver pulls it only inside MPI too); the sends done
 * are completed. */
static ct_status progress_sends(ct_stages *pl, ct_error *err) {
  CT_TRY(test_requests(pl, pl->reqs, pl->ring * (pl->nout + pl->nin), NULL, err));
  return pl->rreqs ? test_requests(pl, pl->rreqs, pl->ring * (pl->nin + pl->nout), RECEIVED, err) : CT_OK;
}

/* Waits for the device's work (nothing on the CPU), moving the sends in
 * flight along meanwhile: a stage that waits for its GPU still feeds its
 * neighbours. */
static ct_status wait_device(ct_stages *pl, ct_error *err) {
  if (pl->device == CT_DEVICE_CPU) return CT_OK;
  while (!ct_context_idle(pl->net->ctx)) CT_TRY(progress_sends(pl, err));
  ct_gpu_note_host_wait();
  return CT_OK;
}

/* Receives a blob's values or diff (bytes at dst, on the net's device). */
static ct_status recv_into(ct_stages *pl, void *dst, size_t bytes, int peer, int tag, ct_error *err) {
  if (lands_in_place(pl, bytes)) return timed_recv(pl, dst, bytes / 4, peer, tag, err);
  CT_ASSERT(bytes <= pl->recv_bytes);
  CT_TRY(timed_recv(pl, (float *)pl->recvbuf, ct_stages_words(bytes), peer, tag, err));
  CT_TRY(wait_device(pl, err));
  ct_mem_copy(pl->device, dst, CT_DEVICE_CPU, pl->recvbuf, bytes);
  return CT_OK;
}

ct_status ct_stages_step_recv(void *user, int k, ct_error *err) {
  ct_stages *pl = user;
  const int blob = pl->in[k].blob;
  return recv_into(pl, pl->net->blobs[blob]->data, ct_stages_blob_bytes(pl, blob), pl->in[k].peer,
                   ct_stages_data_tag(pl, blob), err);
}

ct_status ct_stages_step_recv_diff(void *user, int k, ct_error *err) {
  ct_stages *pl = user;
  const int blob = pl->out[k].blob;
  return recv_into(pl, pl->net->blobs[blob]->diff, ct_stages_blob_bytes(pl, blob), pl->out[k].peer,
                   ct_stages_diff_tag(pl, blob), err);
}

/* ------------------------------------------------------- receives posted ahead */

/* The receive ring's layout (see the struct); made when the training
 * program is built. */
void ct_stages_plan_posted(ct_stages *pl) {
  pl->rin_off = ct_xcalloc((size_t)pl->nin + 1, sizeof *pl->rin_off);
  pl->rout_off = ct_xcalloc((size_t)pl->nout + 1, sizeof *pl->rout_off);
  for (int k = 0; k < pl->nin; k++) {
    pl->rin_off[k] = pl->rslot_bytes;
    pl->rslot_bytes += 4 * ct_stages_words(ct_stages_blob_bytes(pl, pl->in[k].blob));
  }
  for (int k = 0; k < pl->nout; k++) {
    pl->rout_off[k] = pl->rslot_bytes;
    if (pl->out[k].diff) pl->rslot_bytes += 4 * ct_stages_words(ct_stages_blob_bytes(pl, pl->out[k].blob));
  }
  if (pl->rslot_bytes) pl->rring = host_buffer(pl, pl->rslot_bytes * (size_t)pl->ring);
  pl->rreqs = ct_xcalloc((size_t)pl->ring * (size_t)(pl->nin + pl->nout) + 1, sizeof *pl->rreqs);
}

/* Where micro-batch m's input k (or, diff, output k's diff) arrives: its
 * request slot, buffer, bytes, peer and tag. */
typedef struct {
  void **req;
  unsigned char *buf;
  size_t bytes;
  int peer, tag, blob;
} arrival;

static arrival arrival_of(const ct_stages *pl, int m, int k, bool diff) {
  const int slot = m % pl->ring;
  const ct_stages_crossing *c = diff ? &pl->out[k] : &pl->in[k];
  arrival a = {.req = &pl->rreqs[slot * (pl->nin + pl->nout) + (diff ? pl->nin + k : k)],
               .buf = pl->rring + (size_t)slot * pl->rslot_bytes + (diff ? pl->rout_off[k] : pl->rin_off[k]),
               .bytes = ct_stages_blob_bytes(pl, c->blob),
               .peer = c->peer,
               .tag = diff ? ct_stages_diff_tag(pl, c->blob) : ct_stages_data_tag(pl, c->blob),
               .blob = c->blob};
  return a;
}

static ct_status post(ct_stages *pl, int m, int k, bool diff, ct_error *err) {
  const arrival a = arrival_of(pl, m, k, diff);
  CT_ASSERT(!*a.req);
  return ct_comm_irecv(pl->comm, (float *)a.buf, ct_stages_words(a.bytes), a.peer, a.tag, a.req, err);
}

/* The iteration's first receives: micro-batches 0 .. R - 1. */
ct_status ct_stages_step_post(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  for (int m = 0; m < pl->ring && m < pl->micro; m++) {
    for (int k = 0; k < pl->nin; k++) CT_TRY(post(pl, m, k, false, err));
    for (int k = 0; k < pl->nout; k++)
      if (pl->out[k].diff) CT_TRY(post(pl, m, k, true, err));
  }
  return CT_OK;
}

/* Takes micro-batch m's posted receive into the blob (its values, or its
 * diff), then posts the receive of m + R when the iteration has one. */
static ct_status take(ct_stages *pl, int m, int k, bool diff, ct_error *err) {
  const arrival a = arrival_of(pl, m, k, diff);
  CT_ASSERT(*a.req);
  void *req = *a.req;
  *a.req = NULL;
  if (req != RECEIVED) {
    const double t0 = ct_monotonic_s();
    ct_status st = ct_comm_send_wait(pl->comm, req, err);
    add_idle(pl, t0);
    CT_TRY(st);
  }
  CT_TRY(wait_device(pl, err));
  const ct_tensor *t = pl->net->blobs[a.blob];
  ct_mem_copy(pl->device, diff ? t->diff : t->data, CT_DEVICE_CPU, a.buf, a.bytes);
  return m + pl->ring < pl->micro ? post(pl, m + pl->ring, k, diff, err) : CT_OK;
}

/* arg: micro-batch * nin + input k */
ct_status ct_stages_step_take(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  return take(pl, arg / pl->nin, arg % pl->nin, false, err);
}

/* arg: micro-batch * nout + output k */
ct_status ct_stages_step_take_diff(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  return take(pl, arg / pl->nout, arg % pl->nout, true, err);
}

/* Completes the send in flight from ring slot request *req, if any. */
static ct_status complete(ct_stages *pl, void **req, ct_error *err) {
  if (!*req) return CT_OK;
  const double t0 = ct_monotonic_s();
  ct_status st = ct_comm_send_wait(pl->comm, *req, err);
  add_idle(pl, t0);
  *req = NULL;
  return st;
}

/* Sends the bytes at src (on the net's device) to peer from ring slot
 * `slot` at offset off, the slot's request being *req. */
static ct_status ring_send(ct_stages *pl, const void *src, size_t bytes, int slot, size_t off,
                           int peer, int tag, void **req, ct_error *err) {
  CT_TRY(complete(pl, req, err));
  unsigned char *buf = pl->sendbuf + (size_t)slot * pl->send_bytes + off;
  CT_TRY(wait_device(pl, err));
  ct_mem_copy(CT_DEVICE_CPU, buf, pl->device, src, bytes);
  return ct_comm_isend(pl->comm, (const float *)buf, ct_stages_words(bytes), peer, tag, req, err);
}

/* arg: micro-batch * nout + output k */
ct_status ct_stages_step_send(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  const int m = arg / pl->nout, k = arg % pl->nout, slot = m % pl->ring, blob = pl->out[k].blob;
  return ring_send(pl, pl->net->blobs[blob]->data, ct_stages_blob_bytes(pl, blob), slot, pl->out_off[k],
                   pl->out[k].peer, ct_stages_data_tag(pl, blob), &pl->reqs[slot * pl->nout + k], err);
}

/* arg: micro-batch * nin + input k */
ct_status ct_stages_step_send_diff(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  const int m = arg / pl->nin, k = arg % pl->nin, slot = m % pl->ring, blob = pl->in[k].blob;
  void **req = &pl->reqs[pl->ring * pl->nout + slot * pl->nin + k];
  return ring_send(pl, pl->net->blobs[blob]->diff, ct_stages_blob_bytes(pl, blob), slot, pl->in_off[k],
                   pl->in[k].peer, ct_stages_diff_tag(pl, blob), req, err);
}

/* The iteration's sends complete (their slots are written again next time). */
ct_status ct_stages_step_send_join(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  ct_status st = CT_OK;
  for (int i = 0; i < pl->ring * (pl->nout + pl->nin); i++) {
    if (st == CT_OK) {
      st = complete(pl, &pl->reqs[i], err);
    } else {
      free(pl->reqs[i]);
      pl->reqs[i] = NULL;
    }
  }
  return st;
}

/* A stashed blob's place in ring slot `slot`. */
static unsigned char *stash_at(const ct_stages *pl, int slot, const ct_stages_stashed *s) {
  CT_ASSERT(s->offset + ct_stages_blob_bytes(pl, s->blob) <= pl->stash_bytes);
  return pl->stash_data + (size_t)slot * pl->stash_bytes + s->offset;
}

/* arg: micro-batch * nstash + the stashed blob */
ct_status ct_stages_step_stash(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  const ct_stages_stashed *s = &pl->stash[arg % pl->nstash];
  const ct_tensor *t = pl->net->blobs[s->blob];
  ct_dev_convert(pl->net->ctx, t->count, t->dtype, t->data, t->dtype,
                 stash_at(pl, (arg / pl->nstash) % pl->ring, s));
  return CT_OK;
}

/* Kept activations: the layers' backward-state regions as planned
 * (stages_internal.h, grouped by layer: each layer is asked once) copied
 * into ring slot `slot` (out) or back from it. */
static void copy_regions(const ct_stages *pl, int slot, bool out) {
  ct_layer_region all[CT_LAYER_MAX_STATE];
  int layer = -1, n = 0;
  for (int k = 0; k < pl->nregions; k++) {
    const ct_stages_region *r = &pl->regions[k];
    if (r->layer != layer) {
      layer = r->layer;
      n = ct_layer_backward_state(pl->net->layers[layer], all, CT_LAYER_MAX_STATE);
    }
    /* the plan's regions: a stage's layers do not reshape while it trains */
    CT_ASSERT(r->k < n && all[r->k].bytes == r->bytes && r->offset + r->bytes <= pl->stash_bytes);
    unsigned char *at = pl->stash_data + (size_t)slot * pl->stash_bytes + r->offset;
    if (out) ct_dev_copy_bytes(pl->net->ctx, r->bytes, all[r->k].data, at);
    else ct_dev_copy_bytes(pl->net->ctx, r->bytes, at, all[r->k].data);
  }
}

/* Kept activations, after micro-batch m's forward: the blob values the
 * stage's backward reads and the layers' backward state into m's slot. */
ct_status ct_stages_step_keep(void *user, int m, ct_error *err) {
  ct_stages *pl = user;
  for (int k = 0; k < pl->nstash; k++) CT_TRY(ct_stages_step_stash(user, m * pl->nstash + k, err));
  copy_regions(pl, m % pl->ring, true);
  return CT_OK;
}

/* arg: the micro-batch: its stashed blobs back (and with kept
 * activations its layers' backward state, the layers told) */
ct_status ct_stages_step_restore(void *user, int m, ct_error *err) {
  ct_stages *pl = user;
  for (int k = 0; k < pl->nstash; k++) {
    const ct_tensor *t = pl->net->blobs[pl->stash[k].blob];
    ct_dev_convert(pl->net->ctx, t->count, t->dtype, stash_at(pl, m % pl->ring, &pl->stash[k]),
                   t->dtype, t->data);
  }
  if (!pl->keep) return CT_OK;
  copy_regions(pl, m % pl->ring, false);
  for (int i = pl->first[pl->stage]; i < pl->first[pl->stage + 1]; i++) {
    ct_layer *l = pl->net->layers[i];
    if (l->ops->restored) l->ops->restored(l);
  }
  return CT_OK;
}

/* The loss sum (net.h: loss_host on the CPU, loss_dev on a GPU). */
static double *loss_sum(const ct_stages *pl) {
  return pl->device == CT_DEVICE_CPU ? &pl->net->loss_host : pl->net->loss_dev;
}

/* A recomputed forward adds its loss again: the sum is kept before it
 * (arg 0) and put back after it (arg 1), on the device. */
ct_status ct_stages_step_keep_loss(void *user, int back, ct_error *err) {
  ct_stages *pl = user;
  const size_t words = sizeof(double) / sizeof(float);
  if (back) ct_dev_copy(pl->net->ctx, words, (const float *)pl->loss_saved, (float *)loss_sum(pl));
  else ct_dev_copy(pl->net->ctx, words, (const float *)loss_sum(pl), (float *)pl->loss_saved);
  return CT_OK;
}

/* The stages agree on what crosses them: each blob's bytes as the stage
 * that sends it counts them and as the one that receives it does (they
 * differ when the processes were given nets that differ, and a receive
 * posted ahead would take what the other side does not send).  Collective
 * over the stages: the first training iteration's first step makes it, as
 * every stage runs it (not ct_stages_create, which may plan one stage
 * alone).  Errors: CT_ERR_INVALID naming the blob and both
 * counts; the communicator's. */
static ct_status agree_crossings(ct_stages *pl, ct_error *err) {
  const int nb = pl->net->nblobs;
  double count = nb;
  CT_TRY(ct_comm_allreduce_host_f64(pl->comm, &count, 1, err));
  if (count != (double)nb * pl->nstages)
    return ct_error_set(err, CT_ERR_INVALID,
                        "pipeline stage %d: its net has %d blobs and the stages' have %g in all: the "
                        "processes were given nets that differ",
                        pl->stage, nb, count);
  double *v = ct_xcalloc(2 * (size_t)nb + 1, sizeof *v); /* [blob]: as sent, [nb + blob]: as received */
  for (int k = 0; k < pl->nout; k++) v[pl->out[k].blob] += (double)ct_stages_blob_bytes(pl, pl->out[k].blob);
  for (int k = 0; k < pl->nin; k++) v[nb + pl->in[k].blob] += (double)ct_stages_blob_bytes(pl, pl->in[k].blob);
  ct_status st = ct_comm_allreduce_host_f64(pl->comm, v, 2 * (size_t)nb, err);
  for (int k = 0; st == CT_OK && k < pl->nin + pl->nout; k++) {
    const int blob = k < pl->nin ? pl->in[k].blob : pl->out[k - pl->nin].blob;
    if (v[blob] != v[nb + blob])
      st = ct_error_set(err, CT_ERR_INVALID,
                        "pipeline stage %d: blob '%s' leaves its stage as %g bytes and arrives "
                        "expected as %g: the processes were given nets that differ",
                        pl->stage, pl->net->blobs[blob]->name, v[blob], v[nb + blob]);
  }
  free(v);
  return st;
}

/* Timing marks: the iteration's start, and the start and end of each
 * forward (arg 0) or backward (arg 1). */
ct_status ct_stages_step_iteration_begin(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  if (!pl->agreed) {
    CT_TRY(agree_crossings(pl, err));
    pl->agreed = true;
  }
  pl->t_begin = ct_monotonic_s();
  return CT_OK;
}

/* On a GPU the marks wait for the device's work, so that the times are
 * the device's (the boundary's copies wait for it anyway). */
ct_status ct_stages_step_mark(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  CT_TRY(wait_device(pl, err));
  pl->t_mark = ct_monotonic_s();
  return CT_OK;
}

ct_status ct_stages_step_mark_end(void *user, int backward, ct_error *err) {
  ct_stages *pl = user;
  CT_TRY(wait_device(pl, err));
  if (pl->t_begin > 0) *(backward ? &pl->backward : &pl->forward) += ct_monotonic_s() - pl->t_mark;
  return CT_OK;
}
