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
/* One iteration (clear, passes, hook, update, read back); *loss gets the
 * mean loss of the passes.  Errors: a step's, or a failed deferred check. */
ct_status ct_solver_gpu_iteration(ct_solver *s, float *loss, ct_error *err);
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
