/* Helpers shared by the solver's source files; not part of the public API. */
#ifndef CT_SOLVERS_SOLVER_INTERNAL_H
#define CT_SOLVERS_SOLVER_INTERNAL_H

#include "solvers/solver.h"

/* solver_nets.c: Caffe's InitTrainNet and InitTestNets, then `weights`. */
ct_status ct_solver_build_nets(ct_solver *s, ct_error *err);

/* solver_nets.c: the loss weight Caffe reports for blob b of net
 * (blob_loss_weights_: the weight given by the last layer writing it). */
float ct_solver_blob_loss_weight(const ct_net *net, int b);

/* solver_update.c: the update step of the iteration's program, on every
 * device (see there). */
ct_status ct_solver_update_init(ct_solver *s, ct_error *err);
void ct_solver_update_free(ct_solver *s);
/* The host part of iteration iter's update: its rate (advancing a step
 * schedule), Adam's correction, momentum and weight decay, put into the
 * slot of iteration seq, which the update step reads, and returned.  iter
 * is s->iter, or s->iter + 1 for an iteration launched ahead. */
ct_update_step ct_solver_update_prepare(ct_solver *s, int iter, unsigned seq);
/* NVCaffe's LARC, momentum_policy and weight_decay_policy fields: an
 * unknown larc_policy is CT_ERR_INVALID ("larc_policy: unknown policy 'scal'
 * (known: scale, clip; did you mean 'scale'?)"); with log, a warning for
 * each one that NVCaffe ignores for this solver type (LARC and the momentum
 * schedule are SGD's only). */
ct_status ct_solver_check_nvcaffe(const ct_solver *s, bool log, ct_error *err);
/* The update step (a ct_program_fn; user is the solver), guarded: it
 * changes nothing after a failed deferred check or, unless
 * continue_on_nonfinite, a non-finite loss, and then nothing until the next
 * ct_solver_update_reset_halt. */
ct_status ct_solver_update_step(void *solver, int arg, ct_error *err);
/* The same update without the guards, enqueued now (ct_solver_apply_update). */
void ct_solver_update_plain(ct_solver *s);
/* Pipeline stages (CPU ranks; NULL: none): from now on clip_gradients
 * takes the norm of every stage's gradient (ct_stages_gather_f64), the sum
 * one process over the whole net makes, so that the stages clip alike. */
void ct_solver_update_set_stages(ct_solver *s, ct_stages *stages);
/* The clipping iteration seq did (scale 1 when none), once it is finished. */
ct_update_clip ct_solver_update_clip(const ct_solver *s, unsigned seq);
/* Clears the halt left by an update skipped for a non-finite loss.  Waits. */
void ct_solver_update_reset_halt(ct_solver *s);
/* Loss scaling: s->loss_scale from s->opts.loss_scale, the train net's
 * NetParameter np (global_grad_scale, global_grad_scale_adaptive) and its
 * layers' types (see ct_solver_opts.loss_scale), logged.  Before
 * ct_solver_update_init.  Errors: CT_ERR_INVALID for a scale that is not
 * positive and finite, naming where it came from. */
ct_status ct_solver_loss_scale_resolve(ct_solver *s, const Caffe__NetParameter *np, ct_error *err);
/* The state iteration seq left (once it is finished), copied into
 * s->loss_scale_now; false (and nothing copied) without loss scaling. */
bool ct_solver_loss_scale_read(ct_solver *s, unsigned seq);
/* Sets the device's state (a resumed run's).  Waits. */
void ct_solver_loss_scale_set(ct_solver *s, const ct_loss_scale_state *state);

/* solver_snapshot.c: whether this worker writes snapshots and runs tests
 * (Caffe's root solver). */
static inline bool ct_solver_is_root(const ct_solver *s) {
  return s->ctx->rank == 0 && !s->opts.replica;
}

/* Whether this worker runs the test nets: the root, and every worker of a
 * data-parallel run (the results are averaged over workers). */
static inline bool ct_solver_runs_tests(const ct_solver *s) {
  return ct_solver_is_root(s) || ct_runtime_workers(s->rt) > 1;
}

#endif
