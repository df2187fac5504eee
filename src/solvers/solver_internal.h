/* Helpers shared by the solver's source files; not part of the public API. */
#ifndef CT_SOLVERS_SOLVER_INTERNAL_H
#define CT_SOLVERS_SOLVER_INTERNAL_H

#include "solvers/solver.h"

/* solver_nets.c: Caffe's InitTrainNet and InitTestNets, then `weights`. */
ct_status ct_solver_build_nets(ct_solver *s, ct_error *err);

/* solver_nets.c: the loss weight Caffe reports for blob b of net
 * (blob_loss_weights_: the weight given by the last layer writing it). */
float ct_solver_blob_loss_weight(const ct_net *net, int b);

/* solver_gpu.c: the GPU side of the solver (see there). */
ct_status ct_solver_gpu_init(ct_solver *s, ct_error *err);
void ct_solver_gpu_free(ct_solver *s);
/* Launches iteration iter (clear, passes, hook, update with iter's rate,
 * read back into its slots) without waiting for it: ctx->seq grows by one,
 * *seq gets it.  The iteration before (iter - 1) may still be running.
 * Errors: a step's (nothing is left in flight then). */
ct_status ct_solver_gpu_launch(ct_solver *s, int iter, unsigned *seq, ct_error *err);
/* Finishes launched iteration seq (the older one when two are in flight):
 * the on_iteration_end hook or a wait for its end, then *loss gets the mean
 * loss of its passes and a clip line is logged.  Errors: the hook's, or a
 * failed deferred check (nothing is left in flight then). */
ct_status ct_solver_gpu_finish(ct_solver *s, unsigned seq, float *loss, ct_error *err);
/* Whether the iteration program is in its steady state (ct_exec_steady):
 * built for the current hooks and iter_size, replaying or plain. */
bool ct_solver_gpu_steady(const ct_solver *s);
/* Clears the update's halt word (set when an update was skipped for a
 * non-finite loss; it skips every later one).  Waits. */
void ct_solver_gpu_reset_halt(ct_solver *s);
/* ct_solver_apply_update on a GPU (waits at the end). */
void ct_solver_gpu_apply_update(ct_solver *s);

/* solver_snapshot.c: whether this worker writes snapshots and runs tests
 * (Caffe's root solver). */
static inline bool ct_solver_is_root(const ct_solver *s) {
  return s->ctx->rank == 0 && !s->opts.replica;
}

/* Whether this worker runs the test nets: the root, and every worker when
 * the test results are reduced over workers. */
static inline bool ct_solver_runs_tests(const ct_solver *s) {
  return ct_solver_is_root(s) || s->hooks.reduce_test != NULL;
}

#endif
