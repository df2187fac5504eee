/* Pipeline parallelism: a net's layers cut into P stages, one per rank of a
 * communicator, with M micro-batches per iteration (runtime/stages.c,
 * stages_host.c).
 *
 * Each rank builds only its stage's layers (ct_stages_part as the train
 * net's ct_net_opts.part): every layer is set up, so that shapes propagate
 * and the fillers draw what they draw in one process (the same initial
 * parameters), but the other stages' layers are then released and their
 * blobs keep shapes only.  A stage's memory is its layers' parameters,
 * gradients and solver history, its blobs, and the buffers below.  Stage
 * s is layers [first, last] of the built net (after Split insertion).  A
 * blob that a stage reads before it writes it is a *stage input*: the
 * stage that wrote it last sends it forward after each micro-batch's
 * forward, and the input's diff (when the blob needs backward) goes back
 * the same way after the micro-batch's backward.  Labels are inputs like
 * any other: the data layer feeds stage 0 and the loss stage receives them.
 *
 * The iteration (GPipe): the forwards of micro-batches 0 .. M-1, each
 * receiving its inputs, stashing them, running the stage's layers and
 * sending its outputs; then their backwards in the same order (the order
 * iter_size's passes add their gradients in, so the sums are bit for bit
 * those of one process with iter_size M).  1F1B: stage s runs P - s - 1
 * forwards ahead, then one forward and one backward in turn; the backwards
 * keep their order, and so the sums.  A layer keeps only one micro-batch's
 * state (its tops, a pooling's argmax, a softmax's probabilities), so the
 * backward of micro-batch m first restores m's stash and recomputes the
 * stage's forward from it (not the data layers': their tops are stashed)
 * unless the blobs hold m's activations already (the forward just before
 * was m's).  The stash and the send buffers are rings of R micro-batches:
 * M under GPipe, min(P - s, M) under 1F1B (at most that many are in flight
 * on stage s).  A recomputation runs with ct_layer.recomputing set: a
 * layer whose forward keeps state across batches (BatchNorm's running
 * statistics) leaves it as the micro-batch's first forward did, so the
 * statistics are updated once per micro-batch, as iter_size's passes
 * update them (its batch statistics are the micro-batch's, as a pass's
 * are); a layer that draws random numbers (Dropout) draws new ones in the
 * recomputation, which its backward then uses.  With kept activations
 * (ct_stages_opts.keep_activations) nothing is recomputed: after each
 * micro-batch's forward the stash takes every blob value the stage's
 * backward reads and the layers' backward state, and the backward of m
 * puts m's back first (Dropout's backward then uses its forward's mask).
 *
 * Sends, receives, stashes and restores are steps of the runtime's program
 * (CT_STEP_SEND, ...), placed by ct_stages_build.  A receive blocks; a
 * send copies into its micro-batch's ring slot and returns (the slot's
 * previous send, long received, is completed first), and a send join at
 * the iteration's end completes the rest (so no schedule deadlocks,
 * whatever the message size).  A blob travels as its bytes, in whatever
 * type the net keeps it (bfloat16 between 16-bit layers).  On a GPU the
 * same steps copy the blob out of the device into the (pinned) ring slot
 * before the send and into it after the receive, each copy waiting for
 * the device's work; the stash lives on the device.  Those steps run on
 * the host between the CUDA graphs of the layers around them.  Stages
 * that sit on GPUs of one process (peer copies) or talk through NCCL are
 * not written: a stage is a process, and the communicator is MPI's.
 *
 * Data x pipeline: with D replicas of the P stages (ranks r * P + s), the
 * stages of one replica talk over their own communicator and the
 * gradients of one stage's replicas are averaged by the runtime's reducer
 * over a communicator of that stage (runtime.h).
 * Internal to the runtime: the solver reaches it through runtime.h. */
#ifndef CT_RUNTIME_STAGES_H
#define CT_RUNTIME_STAGES_H

#include <stdbool.h>
#include <stddef.h>

#include "caffe.pb-c.h"
#include "core/status.h"
#include "net/net.h"
#include "parallel/comm.h"
#include "runtime/program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_stages ct_stages;

/* The order of an iteration's micro-batches on a stage. */
typedef enum ct_stages_schedule {
  CT_STAGES_GPIPE = 0, /* every forward, then every backward */
  CT_STAGES_1F1B       /* P - s - 1 forwards ahead, then one forward and one backward in turn */
} ct_stages_schedule;

/* How a pipeline runs its micro-batches. */
typedef struct ct_stages_opts {
  ct_stages_schedule schedule;
  /* Keep each micro-batch's activations in the stash (the blob values the
   * stage's backward reads and its layers' backward state,
   * ct_layer_ops.backward_state) instead of recomputing the micro-batch's
   * forward before its backward: one forward less per micro-batch, R sets
   * of activations held instead of R copies of the stage's inputs
   * (--recompute=false).  Every layer of the stage must say what its
   * backward reads (ct_layer_keeps_microbatches). */
  bool keep_activations;
} ct_stages_opts;

/* Where a train net is cut, for ct_stages_part: after the layers named in
 * after[0 .. nafter) (NULL: where the layers' pipeline_stage fields say),
 * this process being rank `rank` of `ranks`: ranks / P replicas of the P
 * stages, rank r * P + s holding stage s of replica r. */
typedef struct ct_stages_cut {
  const char *const *after;
  int nafter;
  int rank, ranks;
  bool test; /* a test net's cut (for the messages) */
} ct_stages_cut;

/* A ct_net_part_fn (net.h; cut: a ct_stages_cut): the layers of this
 * process's stage of the built net.  Errors (CT_ERR_INVALID, the message
 * starting "--pipeline"): an unknown layer name (the net's layers are
 * listed), names out of the net's order or repeated, a stage left without
 * layers, a rank count that is not a multiple of the stages, a parameter shared by
 * layers of two stages; a pipeline_stage field that does not start at 0
 * or skips a stage (naming the layer). */
ct_status ct_stages_part(void *cut, const Caffe__NetParameter *built, int *first, int *end,
                         ct_error *err);

/* A pipeline for net (borrowed; built with ct_stages_part for the same
 * cut) over comm (borrowed: the ranks of one replica, this process being
 * stage comm->rank), with `microbatches` (>= 1) micro-batches per
 * iteration run as opts says (NULL: GPipe, recomputing); after, nafter as
 * in ct_stages_cut; it does not communicate.  Errors: ct_stages_part's;
 * CT_ERR_INVALID for a net built for other layers, a communicator of
 * another size than the stage count, a blob whose diff two later stages
 * would send back, a net input; CT_ERR_UNSUPPORTED for kept activations
 * with a layer that does not say what its backward reads (naming it).
 * The process's host memory peak (core/mem.h), and on a GPU the device's,
 * start again from here: ct_stages_timing's are those of training. */
ct_status ct_stages_create(ct_stages **out, ct_net *net, ct_comm *comm, const char *const *after,
                           int nafter, int microbatches, const ct_stages_opts *opts,
                           ct_error *err);
void ct_stages_free(ct_stages *pl);

/* The cuts that the pipeline_stage fields (caffe.proto) of the built net
 * np make: *after gets the names of the layers after which the stage goes
 * up (borrowed from np; free the array), *n their count; none (NULL, 0)
 * when no layer sets the field.  Errors (CT_ERR_INVALID naming the layer):
 * a first stage other than 0, a stage that goes down or skips one. */
ct_status ct_stages_cuts_from_param(const Caffe__NetParameter *np, const char ***after, int *n,
                                    ct_error *err);

/* This process's stage and the stage count. */
int ct_stages_stage(const ct_stages *pl);
int ct_stages_count(const ct_stages *pl);

/* Appends the iteration's micro-batches (see the top) to p; pass_loss (may
 * be NULL) is appended after each micro-batch's forward.  In the last
 * micro-batch's backward, last_begin (may be NULL) is appended before the
 * first layer's step and last_after(last_user, p, layer) after each
 * layer's place (NULL: nothing): where a reducer's buckets go. */
void ct_stages_build(ct_stages *pl, ct_program *p, const ct_program_step *pass_loss,
                     const ct_program_step *last_begin,
                     void (*last_after)(void *user, ct_program *p, int layer), void *last_user);

/* Appends one forward of one batch through the stages (no backward, no
 * stash): what a display's extra forward runs. */
void ct_stages_build_forward(ct_stages *pl, ct_program *p);

/* Snapshots.  Every stage calls each; stage 0 writes the whole file, the
 * others send it their part and write nothing:
 *   ct_stages_write_model: model is ct_net_to_proto of the stage's net
 *     (its layers carry blobs); stage 0 writes it to path with every
 *     stage's layers' blobs moved in (model is changed; free it as before);
 *   ct_stages_write_state: state's history holds the stage's parameters'
 *     nslots arrays in Caffe's order; stage 0 writes it to path with every
 *     stage's history (slot by slot, the stages in order: Caffe's order
 *     over the whole net, as sharing never crosses a cut); state is as it
 *     was on return.
 * Errors: the communicator's; stage 0's write (CT_ERR_IO naming path). */
ct_status ct_stages_write_model(ct_stages *pl, Caffe__NetParameter *model, const char *path,
                                ct_error *err);
ct_status ct_stages_write_state(ct_stages *pl, Caffe__SolverState *state, int nslots,
                                const char *path, ct_error *err);
/* Where this stage's parameters are in a whole net's solver history: in
 * Caffe's order, they follow *before others, of *total in all.  The first
 * call counts them with the other stages (every stage must make it, as a
 * restore or a snapshot does).  Errors: the communicator's. */
ct_status ct_stages_history_span(ct_stages *pl, int *before, int *total, ct_error *err);

/* Every stage's n values (a count of each stage's own), in stage order:
 * *all (caller frees) gets the stages' arrays one after the other, *total
 * their length, on every stage, each value as its stage gave it (so that
 * a sum over *all adds the same numbers in the same order as one process
 * over the whole net).  Errors: the communicator's. */
ct_status ct_stages_gather_f64(ct_stages *pl, const double *values, int n, double **all,
                               int *total, ct_error *err);

/* After an iteration, on every stage: *loss becomes the sum of the stages'
 * (the loss stage's), *actions the union of the stages' request bits, and
 * the net's output blobs the values of the stage that computes each (so
 * that stage 0 displays them); the stages' timings (below) travel along.
 * Errors: the communicator's. */
ct_status ct_stages_agree(ct_stages *pl, double *loss, int *actions, ct_error *err);

/* What a stage measured over the iterations since the pipeline was made
 * (every stage's, as of the last ct_stages_agree), in seconds. */
typedef struct ct_stages_timing {
  int iterations;
  double wall;      /* from each iteration's first step to the end of its agreement */
  double forward;   /* the stage's forwards */
  double backward;  /* its backwards, with the forwards recomputed for them */
  double idle;      /* blocked in receives and in the agreement: the bubble */
  size_t held_bytes; /* the process's host memory now (ct_mem_host_stats) */
  size_t peak_bytes; /* and its peak since the pipeline was made (the build's is left out) */
  size_t param_values; /* learnable values the stage holds (net->params' counts) */
  size_t blob_bytes;   /* blob data and diffs with storage on the stage */
  size_t buffer_bytes; /* the stash, send and receive rings (and a GPU's receive buffer) */
  size_t device_bytes; /* a GPU stage: the device memory Cortado holds now (0 on the CPU) */
  size_t device_peak;  /* and its peak since the pipeline was made */
} ct_stages_timing;
/* Stage s's (0 <= s < the stage count). */
void ct_stages_timing_of(const ct_stages *pl, int s, ct_stages_timing *t);
/* This stage's times count again from zero, and the process's host
 * memory peak from what it holds now (after warm-up iterations); every
 * stage calls it between the same iterations. */
void ct_stages_reset_timing(ct_stages *pl);

/* One line on the plan, e.g. "stage 1 of 2: layers 5-9 ('ip2' to 'loss'),
 * 2 inputs, 0 outputs, 4 micro-batches (GPipe)". */
void ct_stages_describe(const ct_stages *pl, char *buf, size_t size);
/* One line on stage s's timing and memory, e.g. "stage 1: forward 3.100
 * ms, backward 6.000 ms, idle 2.200 ms of 11.300 ms per iteration (bubble
 * 19.5%); 51 parameters, 4200 bytes of blobs, 1024 bytes of stash, send and
 * receive buffers; host memory 1201344 bytes, peak 1289420 bytes" (and on a GPU
 * "; GPU memory ... bytes, peak ... bytes"). */
void ct_stages_describe_timing(const ct_stages *pl, int s, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
