/* Pipeline parallelism: a net's layers cut into P stages, one per rank of a
 * communicator, with M micro-batches per iteration (runtime/stages.c).
 *
 * Every rank builds the whole net (same fillers, same seed: the same initial
 * parameters as one process) and runs only its stage's layers, layers
 * [first, last] of the built net (after Split insertion).  A blob that a
 * stage reads before it writes it is a *stage input*: the stage that wrote
 * it last sends it forward after each micro-batch's forward, and the input's
 * diff (when the blob needs backward) goes back the same way after the
 * micro-batch's backward.  Labels are inputs like any other: the data layer
 * feeds stage 0 and the loss stage receives them.
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
 * was m's).  Memory: M copies of the stage's inputs, one of everything
 * else.  A layer whose forward changes state (BatchNorm's running
 * statistics) would change it twice: such nets are refused with M > 1; a
 * layer that draws random numbers (Dropout) draws new ones in the
 * recomputation, which its backward then uses.
 *
 * Sends, receives, stashes and restores are steps of the runtime's program
 * (CT_STEP_SEND, ...), placed by ct_stages_build.  On the CPU a receive
 * blocks; a send copies into a buffer of its micro-batch and returns, and
 * a send join at the iteration's end completes them (so no schedule
 * deadlocks, whatever the message size).  A GPU stage boundary (peer
 * copies or NCCL send/receive on the communication stream) is the same
 * step with a device body, not written yet: ct_stages_create refuses GPU
 * nets.
 * Internal to the runtime: the solver reaches it through runtime.h. */
#ifndef CT_RUNTIME_STAGES_H
#define CT_RUNTIME_STAGES_H

#include <stdbool.h>
#include <stddef.h>

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

/* A pipeline for net (borrowed) over comm (borrowed), this process being
 * stage comm->rank: the net is cut after each layer named in after[0 ..
 * nafter) (nafter + 1 stages), with `microbatches` (>= 1) micro-batches per
 * iteration run in the order of `schedule`.  Errors (CT_ERR_INVALID, the message starting "--pipeline"):
 * an unknown layer name (the net's layers are listed), names out of the
 * net's order or repeated, a stage left without layers, a stage count
 * other than comm->size, a parameter shared by layers of two stages, a
 * blob whose diff two later stages would send back, BatchNorm with more
 * than one micro-batch; CT_ERR_UNSUPPORTED for a net on a GPU. */
ct_status ct_stages_create(ct_stages **out, ct_net *net, ct_comm *comm, const char *const *after,
                             int nafter, int microbatches, ct_stages_schedule schedule, ct_error *err);
void ct_stages_free(ct_stages *pl);

/* The cuts that the train net's pipeline_stage fields (caffe.proto) make:
 * *after gets the names of the layers after which the stage goes up
 * (borrowed from net; free the array), *n their count; none (NULL, 0) when
 * no layer sets the field.  Errors (CT_ERR_INVALID naming the layer): a
 * first stage other than 0, a stage that goes down or skips one. */
ct_status ct_stages_cuts_from_net(const ct_net *net, const char ***after, int *n, ct_error *err);

/* This process's stage and the stage count. */
int ct_stages_stage(const ct_stages *pl);
int ct_stages_count(const ct_stages *pl);

/* Appends the iteration's micro-batches (see the top) to p; pass_loss (may
 * be NULL) is appended after each micro-batch's forward. */
void ct_stages_build(ct_stages *pl, ct_program *p, const ct_program_step *pass_loss);

/* Appends one forward of one batch through the stages (no backward, no
 * stash): what a display's extra forward runs. */
void ct_stages_build_forward(ct_stages *pl, ct_program *p);

/* Stage 0 gets every stage's part of a flat array laid out as the net's
 * flat buffers (the parameters, a solver's history slot), each stage's
 * parameters from the stage that trains them; the others send theirs.
 * Every stage must call it.  Errors: the communicator's. */
ct_status ct_stages_gather(ct_stages *pl, float *flat, ct_error *err);

/* After an iteration, on every stage: *loss becomes the sum of the stages'
 * (the loss stage's), *actions the union of the stages' request bits, and
 * the net's output blobs the values of the stage that computes each (so
 * that stage 0 displays them).  Errors: the communicator's. */
ct_status ct_stages_agree(ct_stages *pl, double *loss, int *actions, ct_error *err);

/* One line on the plan, e.g. "stage 1 of 2: layers 5-9 ('ip2' to 'loss'),
 * 2 inputs, 0 outputs, 4 micro-batches (GPipe)". */
void ct_stages_describe(const ct_stages *pl, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
