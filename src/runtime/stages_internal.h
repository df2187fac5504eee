/* What stages.c (the plan and the steps) and stages_host.c (snapshots,
 * agreement, timing) share.  Internal to src/runtime. */
#ifndef CT_RUNTIME_STAGES_INTERNAL_H
#define CT_RUNTIME_STAGES_INTERNAL_H

#include "runtime/stages.h"

/* A blob crossing a stage boundary: for an input, peer is the stage that
 * sends it; for an output, the stage it goes to. */
typedef struct {
  int blob;
  int peer;
  bool diff; /* its diff comes back */
} ct_stages_crossing;

/* A blob kept per micro-batch: a received input (layer -1, stashed after
 * its receive) or a data layer's top (stashed after that layer). */
typedef struct {
  int blob;
  int layer;
  size_t offset; /* bytes, in a ring slot of the stash */
} ct_stages_stashed;

/* A layer's backward state kept per micro-batch (kept activations:
 * ct_layer_ops.backward_state): region k of layer `layer`. */
typedef struct {
  int layer, k;
  size_t bytes;
  size_t offset; /* bytes, in a ring slot of the stash */
} ct_stages_region;

/* Fields of ct_stages_timing that the stages agree on, per stage. */
enum { CT_STAGES_NSTATS = 12 };

/* Blobs travel as their bytes (float32, bfloat16 or float16 values),
 * counted in 4-byte words as the communicator counts them; each keeps a
 * whole number of words in the buffers below. */
static inline size_t ct_stages_words(size_t bytes) { return (bytes + 3) / 4; }

struct ct_stages {
  ct_net *net;
  ct_comm *comm;
  int device;           /* the net's: CT_DEVICE_CPU or a GPU */
  int stage, nstages, micro;
  int *first;           /* (nstages + 1) stage s is layers [first[s], first[s + 1]) */
  int nin, nout;
  ct_stages_crossing *in, *out; /* (nin), (nout) in the order of (peer, blob) */
  ct_stages_schedule schedule;
  bool keep;            /* activations kept in the stash, not recomputed (ct_stages_opts) */
  int ring;             /* R: ring slots of the stash and the send buffers (micro-batch m: m % R) */
  int nstash;
  ct_stages_stashed *stash; /* (nstash) inputs first, then the data layers' tops; kept
                               activations: every blob value the stage's backward reads */
  int nregions;
  ct_stages_region *regions; /* (nregions) kept activations: the layers' backward state */
  size_t stash_bytes;   /* per slot */
  unsigned char *stash_data; /* (ring * stash_bytes) on the net's device, NULL: no stash */
  /* Sends return at once: micro-batch m's values of output k travel from
   * sendbuf + (m % R) * send_bytes + out_off[k], the diff of input k from
   * ... + in_off[k]; a slot's earlier send is completed before the slot is
   * written again, the rest at the iteration's end (send join).  On a GPU
   * a send first copies the blob out of the device, and a receive lands in
   * recvbuf and is copied in (each copy waits for the device's work). */
  size_t *out_off, *in_off; /* (nout), (nin) bytes */
  size_t send_bytes;        /* per slot */
  unsigned char *sendbuf;   /* (ring * send_bytes) host memory (pinned on a GPU) */
  unsigned char *recvbuf;   /* (recv_bytes) host memory for receives that cannot land in place */
  size_t recv_bytes;
  void **reqs;              /* (ring * (nout + nin)) pending sends, NULL: none */
  /* Receives posted ahead (the training program, where the communicator
   * has them): micro-batch m's values of input k land in rring + (m % R)
   * * rslot_bytes + rin_off[k], the diff of output k at ... + rout_off[k];
   * the receive of m + R is posted once m's is taken.  rreqs (R * (nin +
   * nout)): the posted requests, NULL: none (or a mark: done,
   * stages_steps.c); rreqs itself NULL: receives are not posted ahead. */
  size_t *rin_off, *rout_off;
  size_t rslot_bytes;
  unsigned char *rring;
  void **rreqs;
  double *loss_saved;       /* the loss sum while a recomputation adds to it (net's device) */
  int *output_stage;    /* (net->noutputs) the stage that computes each net output */
  size_t output_count;  /* values of all net outputs */
  unsigned char *output_host; /* the widest output's bytes: outputs pass through the host */
  int hist_before, hist_total; /* ct_stages_history_span (-1: not counted yet) */
  bool agreed;          /* the stages agreed on their crossings (the first iteration) */
  /* timing of this stage (seconds; see ct_stages_timing) */
  double t_mark;        /* when the running forward or backward began */
  double t_begin;       /* when the running iteration's first step began */
  int iterations;
  double wall, forward, backward, idle;
  double *stats;        /* (nstages * CT_STAGES_NSTATS) every stage's, as last agreed */
};

/* A blob's values (or its diff) in bytes, in the type the net keeps it. */
static inline size_t ct_stages_blob_bytes(const ct_stages *pl, int blob) {
  const ct_tensor *t = pl->net->blobs[blob];
  return ct_tensor_bytes(t, t->count);
}

/* stages_steps.c: the send and receive buffers, made once the plan has
 * the crossings and the ring (ct_stages_create), and freed; the receive
 * ring of the receives posted ahead (ct_stages_build, where the
 * communicator has them). */
void ct_stages_plan_buffers(ct_stages *pl);
void ct_stages_plan_posted(ct_stages *pl);
void ct_stages_free_buffers(ct_stages *pl);

/* stages_steps.c: the program's steps (ct_program_fn; user: the stages).
 * Their arg: recv, recv_diff: input (output) k; take, take_diff: micro-batch
 * x nin (nout) + k; send, send_diff: micro-batch x nout (nin) + k; stash:
 * micro-batch x nstash + the stashed blob; restore, keep: the micro-batch;
 * keep_loss: 0 keeps the loss sum, 1 puts it back; mark_end: 1 for a
 * backward. */
ct_status ct_stages_step_recv(void *user, int k, ct_error *err);
ct_status ct_stages_step_recv_diff(void *user, int k, ct_error *err);
ct_status ct_stages_step_post(void *user, int arg, ct_error *err);
ct_status ct_stages_step_take(void *user, int arg, ct_error *err);
ct_status ct_stages_step_take_diff(void *user, int arg, ct_error *err);
ct_status ct_stages_step_send(void *user, int arg, ct_error *err);
ct_status ct_stages_step_send_diff(void *user, int arg, ct_error *err);
ct_status ct_stages_step_send_join(void *user, int arg, ct_error *err);
ct_status ct_stages_step_stash(void *user, int arg, ct_error *err);
ct_status ct_stages_step_restore(void *user, int m, ct_error *err);
ct_status ct_stages_step_keep(void *user, int m, ct_error *err);
ct_status ct_stages_step_keep_loss(void *user, int back, ct_error *err);
ct_status ct_stages_step_iteration_begin(void *user, int arg, ct_error *err);
ct_status ct_stages_step_mark(void *user, int arg, ct_error *err);
ct_status ct_stages_step_mark_end(void *user, int backward, ct_error *err);

/* Message tags on the stages' communicator: a blob's values travel with
 * its index, its diff with nblobs more; then the snapshot's parts. */
static inline int ct_stages_data_tag(const ct_stages *pl, int blob) { return blob; }
static inline int ct_stages_diff_tag(const ct_stages *pl, int blob) { return pl->net->nblobs + blob; }
static inline int ct_stages_model_tag(const ct_stages *pl) { return 2 * pl->net->nblobs; }
static inline int ct_stages_state_tag(const ct_stages *pl) { return 2 * pl->net->nblobs + 1; }
#define CT_STAGES_TAGS(nblobs) (2 * (nblobs) + 2)

#endif
