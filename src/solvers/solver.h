/* The solver: Caffe's Solver and SGDSolver family in one object.
 *
 * A solver owns a train net and its test nets (built from a SolverParameter
 * as Caffe's InitTrainNet / InitTestNets do), the update rule's history
 * arrays (flat, with the layout of the net's flat parameter buffers), the
 * iteration count and the learning-rate schedule.  ct_solver_step is
 * Caffe's Step, one loop for every device:
 *
 *   test when test_interval says so;
 *   callbacks' on_start; the rate from lr_policy;
 *   run the iteration (runtime/runtime.h): clear the gradient,
 *     iter_size x (forward, backward), [the gradient's average over the
 *     workers], callbacks' on_gradients, the update (solver_update.c:
 *     clip_gradients, 1/iter_size, weight decay, the rule's step with
 *     rate x lr_mult, w -= step), the loss read back;
 *   display every `display` iterations (loss, outputs, rate, clipping);
 *   ++iter; snapshot every `snapshot` iterations or when requested; stop
 *   when requested.
 *
 * On a GPU the runtime replays the iteration as CUDA graphs after two plain
 * runs, with a single host wait at its end, and the solver launches the next
 * iteration before that wait unless the host needs the net in between, so
 * the device runs iterations back to back; a stop or snapshot request then
 * acts after the iteration already launched.
 *
 * Log lines are Caffe's, so Caffe's log parsers and plots keep working:
 *   Iteration 100 (12.3 iter/s, 8.1s/100 iters), loss = 0.3
 *       Train net output #0: loss = 0.3 (* 1 = 0.3 loss)
 *   Iteration 100, lr = 0.01
 *   Iteration 500, Testing net (#0)
 *       Test net output #0: accuracy = 0.87
 *
 * Snapshots are <prefix>_iter_N.caffemodel and <prefix>_iter_N.solverstate,
 * both written atomically; a .solverstate holds Caffe's fields (iter,
 * learned_net, history, current_step) plus the context RNG state, so that a
 * resumed run on the CPU repeats an uninterrupted one bit for bit.
 *
 * Paths in the SolverParameter (net files, snapshot_prefix, weights) are used
 * as given, relative to the current directory, as Caffe does. */
#ifndef CT_SOLVERS_SOLVER_H
#define CT_SOLVERS_SOLVER_H

#include <signal.h>
#include <stdbool.h>

#include "caffe.pb-c.h"
#include "core/context.h"
#include "core/status.h"
#include "net/net.h"
#include "runtime/runtime.h"
#include "solvers/loss_scale.h"
#include "solvers/lr_policy.h"
#include "solvers/update.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Requests from outside the training loop (signal handlers), as bit flags. */
typedef enum ct_solver_action {
  CT_SOLVER_ACTION_NONE = 0,
  CT_SOLVER_ACTION_STOP = CT_RT_STOP,        /* finish the iteration, then return */
  CT_SOLVER_ACTION_SNAPSHOT = CT_RT_SNAPSHOT /* snapshot after the iteration */
} ct_solver_action;

/* Callbacks into every iteration (Caffe's Solver::Callback, pycaffe's
 * add_callback); either may be NULL.  Host code: on a GPU the device has
 * finished the iteration's gradients when on_gradients runs. */
typedef struct ct_solver_callback {
  /* Before the iteration is launched. */
  void (*on_start)(void *user);
  /* After the iteration's backward passes (and, under data parallelism, the
   * gradient's average over the workers), before the update: the flat
   * gradient holds the sum over iter_size passes.  A failure ends
   * ct_solver_step with that status. */
  ct_status (*on_gradients)(void *user, ct_error *err);
  void *user;
} ct_solver_callback;

/* What the root reports at each display iteration (see ct_solver_opts
 * on_display).  Everything describes the state after `iter` updates. */
typedef struct ct_solver_display {
  int iter;              /* updates done: Caffe's "Iteration N" of the display */
  int start_iter;        /* the iteration this ct_solver_step / ct_solver_solve began at */
  float loss;            /* the smoothed loss, as logged */
  float lr;              /* the rate of the latest update (that of iteration iter - 1; 0 before any) */
  long long inputs_per_iter; /* inputs one iteration trains on, over all workers:
                                batch x iter_size x ctx->world */
  float loss_scale;      /* loss scaling's scale after the latest update (0: no loss scaling) */
  unsigned skipped;      /* updates loss scaling skipped since the start of training */
  const struct ct_solver *solver; /* its train net's outputs hold this display's values, its
                              test_scores those of the latest test (ntest_scores[i] == 0: none yet) */
} ct_solver_display;

/* Options beyond the SolverParameter. */
typedef struct ct_solver_opts {
  /* Keep training after a NaN or infinite loss (default: stop with
   * CT_ERR_NUMERIC naming the first layer whose output went non-finite). */
  bool continue_on_nonfinite;
  /* No per-layer INFO lines while building the nets. */
  bool quiet_nets;
  /* A data-parallel replica of the root solver: it never snapshots (not on
   * `snapshot`, not on request, not after training) and never displays.
   * The root is the worker with ctx->rank 0 that is not a replica.  (Its
   * other INFO lines are silenced by the driver: ct_log_set_thread_quiet.) */
  bool replica;
  /* GPU: run every iteration with plain launches, never replayed from a
   * recording (CORTADO_CUDA_GRAPHS=0 in the environment does the same). */
  bool no_replay;
  /* Every blob of the nets keeps its own diff (ct_net_opts.keep_blob_diffs:
   * for callers that read intermediate gradients, as pycaffe's do). */
  bool keep_blob_diffs;
  /* GPU: finish each iteration before launching the next
   * (CORTADO_LAUNCH_AHEAD=0 in the environment does the same).  By default
   * iteration n + 1 is launched before the host waits for n, except where
   * the host needs the net between them (a display, a test, a snapshot, a
   * pending request, the last iteration of a step). */
  bool no_launch_ahead;
  /* Called by the root only (never by a replica), on the CPU and GPU paths
   * alike: in ct_solver_step at each display iteration after its update
   * (and after the test of that iteration, when one ran), and by
   * ct_solver_solve at the final display, after the final test.  Data
   * parallel drivers copy the options to every worker, so the root's
   * observer is reached without a hook of their own.  A failure ends the
   * step (or solve) with that status.  NULL: nothing is called. */
  ct_status (*on_display)(void *user, const ct_solver_display *d, ct_error *err);
  void *display_user;
  /* A layer with parameters that gets no weights from the `weights` files
   * (the solver's, or ct_solver_copy_trained_files') is an error
   * (CT_ERR_INVALID naming it) instead of a warning: --strict_weights. */
  bool strict_weights;
  /* The train net's layers this process holds (net.h: a pipeline stage's,
   * runtime/stages.h ct_stages_part); fn NULL: all of them.  test_part the
   * same for the test nets (their stage's layers, cut by the same names). */
  ct_net_part train_part;
  ct_net_part test_part;
  /* Loss scaling (solvers/loss_scale.h).  Mode CT_LOSS_SCALE_AUTO (zero):
   * as the train net says with NVCaffe's global_grad_scale (static, or
   * dynamic from it with global_grad_scale_adaptive), else dynamic from
   * CT_LOSS_SCALE_INIT when a layer of the train net computes in float16,
   * else off.  init 0 and window 0 take the defaults. */
  ct_loss_scale_opts loss_scale;
} ct_solver_opts;

typedef struct ct_solver_update ct_solver_update;

typedef struct ct_solver {
  Caffe__SolverParameter *param; /* owned copy (upgraded) */
  ct_context *ctx;               /* borrowed; the nets compute on it */
  ct_net *net;                   /* the train net */
  int ntest_nets;
  ct_net **test_nets;            /* (ntest_nets), sharing the train net's weights */
  const ct_update_rule *rule;
  ct_lr_schedule lr;
  /* History: rule->nslots arrays of net->flat_count values on ctx->device;
   * slot k starts at history + k * net->flat_count (SGD: momentum; Adam: m, v;
   * AdaDelta: squared gradients, squared steps). */
  float *history;
  int *caffe_order;              /* (net->nparams) indices into net->params in
                                    Caffe's learnable_params order (layer, index) */

  int iter;                      /* updates done so far */
  int snapshot_iter_plus1;       /* 1 + the iteration of this solver's latest snapshot (0: none),
                                    so that a stop after a requested snapshot writes no second one */
  int current_step;              /* Caffe's current_step_ (step / multistep) */
  float rate;                    /* the learning rate of the last update */
  float smoothed_loss;           /* mean of the last average_loss iteration losses */
  float *losses;                 /* (average_loss) window behind smoothed_loss */
  int nlosses;
  float **test_scores;           /* (ntest_nets) the mean outputs of each net's */
  int *ntest_scores;             /* last test: ntest_scores[i] values, Caffe's order */
  bool requested_early_exit;     /* the last step stopped on a STOP request */

  ct_solver_opts opts;
  ct_solver_callback *callbacks; /* (ncallbacks) in the order added */
  int ncallbacks;
  double timer_start;            /* display timing (monotonic seconds) */
  int iterations_last;
  ct_runtime *rt;                /* the iteration's program (runtime/runtime.h) */
  ct_solver_update *update;      /* the update step the program runs (solver_update.c) */
  long launched_ahead;           /* GPU: iterations launched before the one before them was
                                    finished (see ct_solver_opts.no_launch_ahead) */
  ct_loss_scale_opts loss_scale; /* as resolved from opts.loss_scale and the net (mode OFF: none) */
  ct_loss_scale_state loss_scale_now; /* after the latest finished update (host copy) */
  /* Pipeline stages: each test net's stages and its forward through them
   * (NULL without a pipeline; ct_solver_set_pipeline) */
  struct ct_stages **test_stages;
  struct ct_program **test_progs;
} ct_solver;

/* Builds a solver from param (copied; not kept) on ctx (borrowed, must
 * outlive the solver), as Caffe's Solver::Init:
 *   - checks average_loss >= 1, iter_size >= 1, the solver type and its
 *     fields, lr_policy and its fields, snapshot_format (HDF5 is
 *     CT_ERR_UNSUPPORTED), and when snapshot > 0 that snapshot_prefix is set
 *     and writable (a probe file is created and removed);
 *   - seeds ctx's RNG with random_seed + ctx->rank when random_seed >= 0,
 *     else from the clock (before the nets are built, so fillers use it);
 *   - builds the train net from exactly one of net, net_param, train_net,
 *     train_net_param (NetState: phase TRAIN, then the net's own state, then
 *     train_state), and the test nets from test_net_param, test_net and then
 *     net/net_param for the remaining test_iter entries (phase TEST, the
 *     net's state, then test_state[i]); net files are read as text and
 *     upgraded; the test nets share the train net's weights;
 *   - loads each `weights` entry (comma-separated .caffemodel lists) into
 *     every net.
 * Errors carry Caffe's wording, e.g. CT_ERR_INVALID "test_iter must be
 * specified for each test network." or "SolverParameter must specify a train
 * net using one of these fields: net, net_param, train_net,
 * train_net_param"; an error about one field ("lr_policy: ...") starts with
 * that field's FILE:LINE:COL when param was read with positions
 * (proto/srcpos.h); net build errors are passed on.  On success *out owns
 * the nets; free with ct_solver_free.  opts may be NULL. */
ct_status ct_solver_init(ct_solver **out, const Caffe__SolverParameter *param,
                         const ct_solver_opts *opts, ct_context *ctx, ct_error *err);
void ct_solver_free(ct_solver *s);

/* Adds a callback (copied), called after those added before it (Caffe's
 * add_callback). */
void ct_solver_add_callback(ct_solver *s, const ct_solver_callback *cb);
/* Data parallelism: the train net's gradients are averaged over comm's
 * workers in every iteration (runtime/reduce.h), test results too, and stop
 * and snapshot requests are agreed on by all workers; rank 0 reads its
 * wishes from *requests (the process's signal word; NULL: its own,
 * ct_solver_request) and logs the reduction's timing when log_timing.
 * Then the parameters are broadcast from rank 0.  Call after weights were
 * loaded or the state restored.  Errors: the reducer's and the broadcast's. */
ct_status ct_solver_set_reduce(ct_solver *s, ct_comm *comm, const ct_reduce_opts *opts,
                               bool log_timing, int *requests, ct_error *err);
/* Parameter servers (parallel/ps.h): this worker trains with the servers
 * of ps (borrowed; it must outlive the solver's training) instead of an
 * all-reduce: the runtime pushes and pulls (ct_runtime_set_ps), rank 0
 * gives the servers its weights and history (after --weights or a restore,
 * so call after those) and every worker starts from the servers' weights.
 * Only the root tests (on the weights it pulled) and snapshots (the
 * servers' state).  requests: as ct_solver_set_reduce's; the root acts on
 * every worker's and server's (ct_runtime_set_ps).  Errors: ct_runtime_set_ps's, the communicator's. */
ct_status ct_solver_set_ps(ct_solver *s, ct_ps_client *ps, int *requests, ct_error *err);
/* Pipeline parallelism (runtime/stages.h): this process trains stage
 * comm->rank of the train net cut after the layers named in after[0 ..
 * nafter) (NULL: where its layers' pipeline_stage fields say), the
 * iteration's iter_size passes being its micro-batches, run as opts says
 * (GPipe or 1F1B, recomputed or kept: runtime/stages.h).  The train net
 * must hold that stage's layers only (opts.train_part: ct_stages_part of
 * the same cuts); each stage updates its own parameters, and a snapshot's
 * files are written by stage 0 from every stage's parameters and history.
 * Call before restoring a state (every stage reads the same files; the
 * history is placed by stage); weights may be loaded before or after.
 * Errors: ct_runtime_set_pipeline's; CT_ERR_UNSUPPORTED with loss scaling
 * (the stages do not agree on skipping an update). */
ct_status ct_solver_set_pipeline(ct_solver *s, ct_comm *comm, const char *const *after, int nafter,
                                 const ct_stages_opts *opts, ct_error *err);
/* The test nets (built with opts.test_part of the same cuts) then run as
 * pipelines too: a test iteration is one forward through the stages, and
 * every stage logs the scores of the stage that computes each output, the
 * numbers one process prints. */

/* Runs `iters` iterations (fewer when a STOP request arrives; then
 * s->requested_early_exit is true and the status is CT_OK).  Errors: a
 * forward failure (bad data, passed on), a failed on_gradients hook, a
 * snapshot that cannot be written (CT_ERR_IO), and, unless
 * continue_on_nonfinite, CT_ERR_NUMERIC for a NaN or infinite loss:
 * "iteration 17: the loss is nan; the first non-finite output is from
 * layer 'ip1' (InnerProduct)" (the update of that iteration is not applied). */
ct_status ct_solver_step(ct_solver *s, int iters, ct_error *err);

/* Caffe's Solve: restores resume_file when not NULL, steps to max_iter,
 * snapshots at the end (snapshot_after_train, unless the last iteration
 * just did), then when not stopped early logs the final train loss
 * ("Iteration N, loss = X", on display iterations) and tests (on test
 * iterations).  Errors: those of ct_solver_restore and ct_solver_step. */
ct_status ct_solver_solve(ct_solver *s, const char *resume_file, ct_error *err);

/* Runs every test net for its test_iter forward passes and logs the mean
 * outputs (Caffe's TestAll); results are also in s->test_scores. */
ct_status ct_solver_test_all(ct_solver *s, ct_error *err);

/* Writes <prefix>_iter_<iter>.caffemodel (with diffs when snapshot_diff)
 * and then <prefix>_iter_<iter>.solverstate, each atomically; a replica
 * (opts.replica) writes nothing.  Errors: CT_ERR_IO naming the file. */
ct_status ct_solver_snapshot(ct_solver *s, ct_error *err);

/* Restores a .solverstate written by Cortado or BVLC Caffe: iter,
 * current_step, the weights of learned_net (as stored, relative to the
 * current directory; when that file is missing, the same file name next to
 * the .solverstate), the history arrays and, when present, the RNG state.
 * Errors: the reader's (CT_ERR_NOTFOUND / CT_ERR_IO / CT_ERR_PARSE naming the
 * file); CT_ERR_UNSUPPORTED for an HDF5 state (.h5); CT_ERR_INVALID for a
 * history count or shape that does not fit this solver and net, e.g.
 * "s.solverstate: 4 history blobs, but the Adam solver of this net keeps 8
 * (Incorrect length of history blobs.)", and for values no run of this
 * solver writes: a negative iter or one past max_iter (when the solver sets
 * max_iter), a negative current_step or, for multistep, one past the
 * stepvalue count ("s.solverstate: current_step is 9, but lr_policy
 * 'multistep' of this solver has 2 stepvalues (...)"), a non-finite history
 * value, an impossible RNG state, a data position past any epoch.  All of
 * these are checked before anything changes. */
ct_status ct_solver_restore(ct_solver *s, const char *path, ct_error *err);
/* Caffe's --weights: copies the layers of each comma-separated .caffemodel
 * (or HDF5) file in `list`, in order, into the train net and every test net
 * (ct_net_copy_trained_file), logging "Finetuning from F".  A layer with
 * parameters that none of the files filled is a warning (the root logs it),
 * or with opts.strict_weights CT_ERR_INVALID (ct_net_weights_check). */
ct_status ct_solver_copy_trained_files(ct_solver *s, const char *list, ct_error *err);

/* Asks the running loop to stop and/or snapshot (bit flags of
 * ct_solver_action).  Async-signal-safe: it only sets bits that the loop
 * reads once per iteration (and once per test pass). */
void ct_solver_request(ct_solver *s, int actions);

/* Applies one update from the gradients in the net's flat diff buffer
 * (Caffe's ApplyUpdate; does not advance iter).  For drivers that run
 * forward/backward themselves. */
void ct_solver_apply_update(ct_solver *s);

/* A parameter server's update (parallel/ps.h): the solver's update step,
 * as in an iteration (its rule, rate from lr_policy as iteration iter,
 * lr_mult, weight decay, momentum, 1/iter_size, clipping over these
 * parameters), of parameters [first, end) of the train net only, from the
 * gradient in its flat diff.  Waits for the device.  (void *: it is the
 * server's ct_ps_update.apply.) */
void ct_solver_update_params(void *solver, int iter, int first, int end);

/* How the last iterations ran (all zero before the first iteration): steps
 * in CUDA graphs and steps run plainly. */
void ct_solver_program_stats(const ct_solver *s, ct_program_stats *st);

/* Net options giving Caffe's NetState merge for a solver's net: `phase`
 * first, then the net's own state, then `over` (the solver's train_state or
 * a test_state; may be NULL), where set fields replace and stages add.
 * (ct_net_init adds the net's own level and stages to the options', so only
 * the difference is in them.) */
ct_net_opts ct_solver_net_opts(const Caffe__NetParameter *np, ct_phase phase,
                               const Caffe__NetState *over);
/* The NetState of the train net np of sp (phase TRAIN, np's state, then
 * sp's train_state, which holds the command line's --level and --stage);
 * release with ct_net_state_clear.  With ct_net_state_includes it tells
 * which layers the train net has without building it. */
void ct_solver_train_state(const Caffe__SolverParameter *sp, const Caffe__NetParameter *np,
                           Caffe__NetState *state);

/* The file name of the snapshot at the current iteration with the given
 * extension (".caffemodel", ".solverstate"); caller frees. */
char *ct_solver_snapshot_filename(const ct_solver *s, const char *ext);

#ifdef __cplusplus
}
#endif

#endif
