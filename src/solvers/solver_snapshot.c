/* Snapshots and restores: Caffe's Solver::Snapshot, SGDSolver's
 * SnapshotSolverStateToBinaryProto and RestoreSolverStateFromBinaryProto,
 * plus Cortado's RNG state for exact resume. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/log.h"
#include "core/trace.h"
#include "core/mem.h"
#include "proto/io.h"
#include "solvers/solver_internal.h"

/* What the Cortado-only fields of a .solverstate mean; bumped when their
 * meaning changes. */
#define CT_SOLVER_EXTENSION_VERSION 1u

char *ct_solver_snapshot_filename(const ct_solver *s, const char *ext) {
  const char *prefix = s->param->snapshot_prefix ? s->param->snapshot_prefix : "";
  size_t n = strlen(prefix) + strlen(ext) + 32;
  char *f = ct_xcalloc(n, 1);
  snprintf(f, n, "%s_iter_%d%s", prefix, s->iter, ext);
  return f;
}

/* The history arrays on the host (a view when they already are there). */
static float *history_host(const ct_solver *s, bool *owned) {
  size_t n = (size_t)s->rule->nslots * s->net->flat_count;
  if (s->ctx->device == CT_DEVICE_CPU) {
    *owned = false;
    return s->history;
  }
  float *h = ct_xcalloc(n + 1, sizeof(float));
  ct_mem_copy(CT_DEVICE_CPU, h, s->ctx->device, s->history, n * sizeof(float));
  *owned = true;
  return h;
}

static ct_status write_state(ct_solver *s, const char *model, const char *path, ct_error *err) {
  const ct_net *net = s->net;
  const int nslots = s->rule->nslots, np = net->nparams;
  const size_t nblobs = (size_t)nslots * (size_t)np;
  bool owned;
  float *host = history_host(s, &owned);

  Caffe__SolverState st = CAFFE__SOLVER_STATE__INIT;
  st.has_iter = 1;
  st.iter = s->iter;
  st.learned_net = (char *)model;
  st.has_current_step = 1;
  st.current_step = s->current_step;
  Caffe__BlobProto *blobs = ct_xcalloc(nblobs + 1, sizeof *blobs);
  Caffe__BlobProto **blob_ptrs = ct_xcalloc(nblobs + 1, sizeof *blob_ptrs);
  Caffe__BlobShape *shapes = ct_xcalloc(nblobs + 1, sizeof *shapes);
  int64_t *dims = ct_xcalloc(nblobs * CT_MAX_AXES + 1, sizeof *dims);
  /* Caffe's order: every parameter's first slot, then every second slot */
  for (int k = 0; k < nslots; k++)
    for (int i = 0; i < np; i++) {
      size_t b = (size_t)k * (size_t)np + (size_t)i;
      const ct_net_param *p = &net->params[s->caffe_order[i]];
      const ct_tensor *t = p->tensor;
      caffe__blob_shape__init(&shapes[b]);
      shapes[b].n_dim = (size_t)t->ndim;
      shapes[b].dim = dims + b * CT_MAX_AXES;
      for (int a = 0; a < t->ndim; a++) shapes[b].dim[a] = t->shape[a];
      caffe__blob_proto__init(&blobs[b]);
      blobs[b].shape = &shapes[b];
      blobs[b].n_data = p->count;
      blobs[b].data = host + (size_t)k * net->flat_count + p->offset;
      blob_ptrs[b] = &blobs[b];
    }
  st.n_history = nblobs;
  st.history = blob_ptrs;
  uint8_t rng[CT_RNG_STATE_BYTES];
  ct_rng_save(&s->ctx->rng, rng);
  st.has_cortado_rng_state = 1;
  st.cortado_rng_state.len = sizeof rng;
  st.cortado_rng_state.data = rng;
  st.has_cortado_extension_version = 1;
  st.cortado_extension_version = CT_SOLVER_EXTENSION_VERSION;
  if (s->loss_scale.mode != CT_LOSS_SCALE_OFF) {
    st.has_cortado_loss_scale = st.has_cortado_loss_scale_good = 1;
    st.has_cortado_loss_scale_skipped = 1;
    st.cortado_loss_scale = s->loss_scale_now.scale;
    st.cortado_loss_scale_good = s->loss_scale_now.good;
    st.cortado_loss_scale_skipped = s->loss_scale_now.skipped;
  }
  /* Where each data layer of the train net is in its source, so that a
   * resumed run reads the records an uninterrupted one would. */
  Caffe__CortadoDataPosition *pos = ct_xcalloc((size_t)net->nlayers + 1, sizeof *pos);
  Caffe__CortadoDataPosition **pos_ptrs = ct_xcalloc((size_t)net->nlayers + 1, sizeof *pos_ptrs);
  ct_status status = CT_OK;
  for (int i = 0; i < net->nlayers && status == CT_OK; i++) {
    ct_layer *l = net->layers[i];
    if (!l->ops->get_position || l->released) continue;
    Caffe__CortadoDataPosition *p = &pos[st.n_cortado_data_position];
    caffe__cortado_data_position__init(p);
    status = l->ops->get_position(l, p);
    pos_ptrs[st.n_cortado_data_position++] = p;
  }
  st.cortado_data_position = pos_ptrs;

  /* a pipeline stage sends its history to stage 0, which writes every stage's */
  ct_stages *pl = ct_runtime_stages(s->rt);
  if (status == CT_OK)
    status = pl ? ct_stages_write_state(pl, &st, nslots, path, err) : ct_proto_write_binary(&st.base, path, err);
  for (size_t i = 0; i < st.n_cortado_data_position; i++) free(pos[i].layer);
  free(pos);
  free(pos_ptrs);
  free(dims);
  free(shapes);
  free(blob_ptrs);
  free(blobs);
  if (owned) free(host);
  return status;
}

/* Removes the snapshot files that writers killed in the middle of a write
 * left under this run's prefix ("<prefix>_iter_N.caffemodel.tmp.PID.K"). */
static void remove_dead_snapshot_temps(const ct_solver *s) {
  const char *prefix = s->param->snapshot_prefix ? s->param->snapshot_prefix : "";
  size_t n = strlen(prefix) + 8;
  char *p = ct_xcalloc(n, 1);
  snprintf(p, n, "%s_iter_", prefix);
  ct_file_remove_stale_temps(p);
  free(p);
}

static ct_status write_snapshot(ct_solver *s, ct_error *err);

/* Parameter servers: the files hold the servers' state (ps.h: at the root's
 * clock), fetched into the root's buffers for the writing; the root then
 * goes on with its own weights and history, as if nothing happened. */
static ct_status snapshot_from_servers(ct_solver *s, ct_error *err) {
  const size_t fc = s->net->flat_count, hist = (size_t)s->rule->nslots * fc;
  const int dev = s->ctx->device; /* a GPU worker's buffers are on its GPU */
  float *keep = ct_xcalloc(fc + hist + 1, sizeof *keep);
  ct_mem_copy(CT_DEVICE_CPU, keep, dev, s->net->flat_data, fc * sizeof *keep);
  ct_mem_copy(CT_DEVICE_CPU, keep + fc, dev, s->history, hist * sizeof *keep);
  ct_status st = ct_ps_fetch(ct_runtime_ps(s->rt), s->net->flat_data, s->history, s->rule->nslots, err);
  if (st == CT_OK) st = write_snapshot(s, err);
  ct_mem_copy(dev, s->net->flat_data, CT_DEVICE_CPU, keep, fc * sizeof *keep);
  ct_mem_copy(dev, s->history, CT_DEVICE_CPU, keep + fc, hist * sizeof *keep);
  free(keep);
  return st;
}

ct_status ct_solver_snapshot(ct_solver *s, ct_error *err) {
  if (s->opts.replica) return CT_OK;
  if (ct_runtime_ps(s->rt)) return snapshot_from_servers(s, err);
  return write_snapshot(s, err);
}

/* A pipeline stage's net in a .caffemodel: stage 0 writes every stage's
 * layers (runtime/stages.h), the others send theirs. */
static ct_status save_model(ct_solver *s, const char *path, ct_error *err) {
  ct_stages *pl = ct_runtime_stages(s->rt);
  if (!pl) return ct_net_save_caffemodel(s->net, path, s->param->snapshot_diff, err);
  Caffe__NetParameter *p = ct_net_to_proto(s->net, s->param->snapshot_diff);
  ct_status st = ct_stages_write_model(pl, p, path, err);
  ct_net_proto_free(p);
  return st;
}

/* The files of a snapshot at s->iter, from s's buffers (with a pipeline,
 * every stage calls it and stage 0 writes). */
static ct_status write_snapshot(ct_solver *s, ct_error *err) {
  const bool traced = ct_trace_on();
  const double t0 = traced ? ct_trace_now() : 0;
  if (ct_runtime_stage(s->rt) == 0) remove_dead_snapshot_temps(s);
  char *model = ct_solver_snapshot_filename(s, ".caffemodel");
  char *state = ct_solver_snapshot_filename(s, ".solverstate");
  LOG_INFO("Snapshotting to binary proto file %s", model);
  ct_status st = save_model(s, model, err);
  if (st == CT_OK) {
    LOG_INFO("Snapshotting solver state to binary proto file %s", state);
    st = write_state(s, model, state, err);
  }
  free(model);
  free(state);
  if (st == CT_OK) s->snapshot_iter_plus1 = s->iter + 1;
  if (traced) {
    const ct_trace_args a = {.index_name = "iter", .index = s->iter};
    ct_trace_complete(CT_TRACE_HOST, "snapshot", "snapshot", t0, ct_trace_now(), &a);
  }
  return st;
}

/* ------------------------------------------------------------------ restore */

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The weights file of a state: learned_net as stored, or when that does not
 * exist, the same file name in the state file's folder (a run moved as a
 * whole).  Caller frees. */
static char *locate_learned_net(const char *state_path, const char *learned) {
  if (access(learned, F_OK) == 0) return ct_xstrdup(learned);
  const char *base = strrchr(learned, '/');
  base = base ? base + 1 : learned;
  const char *slash = strrchr(state_path, '/');
  size_t dirlen = slash ? (size_t)(slash - state_path) + 1 : 0;
  size_t n = dirlen + strlen(base) + 1;
  char *alt = ct_xcalloc(n, 1);
  memcpy(alt, state_path, dirlen);
  strcpy(alt + dirlen, base);
  if (access(alt, F_OK) == 0) {
    LOG_INFO("%s: learned_net %s is missing; using %s next to the solver state", state_path,
             learned, alt);
    return alt;
  }
  free(alt);
  return ct_xstrdup(learned);
}

/* Checks the history blobs against this solver and net, and when `apply`
 * copies them into the history arrays. */
static ct_status restore_history(ct_solver *s, const Caffe__SolverState *st, const char *path,
                                 bool apply, ct_error *err) {
  const ct_net *net = s->net;
  const int nslots = s->rule->nslots, np = net->nparams;
  /* a pipeline stage's parameters are a run of each slot's (stages.h) */
  int before = 0, total = np;
  if (ct_runtime_stages(s->rt))
    CT_TRY(ct_stages_history_span(ct_runtime_stages(s->rt), &before, &total, err));
  const size_t want = (size_t)nslots * (size_t)total;
  if (st->n_history != want)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: %zu history blobs, but the %s solver of this net keeps %zu "
                        "(Incorrect length of history blobs.)",
                        path, st->n_history, s->rule->type, want);
  if (apply) LOG_INFO("SGDSolver: restoring history");
  for (size_t b = 0; b < (size_t)nslots * (size_t)np; b++) {
    const int slot = (int)(b / (size_t)np);
    const size_t i = b % (size_t)np;
    const size_t at = (size_t)slot * (size_t)total + (size_t)before + i;
    const Caffe__BlobProto *bp = st->history[at];
    const ct_net_param *p = &net->params[s->caffe_order[i]];
    const ct_tensor *t = p->tensor;
    int64_t dims[CT_MAX_AXES];
    for (int a = 0; a < t->ndim; a++) dims[a] = t->shape[a];
    if (!ct_blob_proto_shape_matches(bp, dims, t->ndim)) {
      char shape[256];
      return ct_error_set(err, CT_ERR_INVALID,
                          "%s: history blob %zu does not fit parameter %s of shape %s", path, at,
                          p->name, ct_tensor_shape_string(t, shape, sizeof shape));
    }
    float *dst = s->history + (size_t)slot * net->flat_count + p->offset;
    if (bp->n_data != p->count && bp->n_double_data != p->count)
      return ct_error_set(err, CT_ERR_INVALID,
                          "%s: history blob %zu has %zu values, parameter %s has %zu", path, at,
                          bp->n_data ? bp->n_data : bp->n_double_data, p->name, p->count);
    if (!apply) continue;
    if (bp->n_data == p->count) {
      ct_mem_copy(s->ctx->device, dst, CT_DEVICE_CPU, bp->data, p->count * sizeof(float));
    } else if (bp->n_double_data == p->count) {
      float *h = ct_xcalloc(p->count + 1, sizeof(float));
      for (size_t i = 0; i < p->count; i++) h[i] = (float)bp->double_data[i];
      ct_mem_copy(s->ctx->device, dst, CT_DEVICE_CPU, h, p->count * sizeof(float));
      free(h);
    }
  }
  return CT_OK;
}

/* The first non-finite value of n floats or doubles (one of them NULL), or
 * n when all are finite. */
static size_t first_non_finite(const float *f, const double *d, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(f ? (double)f[i] : d[i])) return i;
  return n;
}

/* The RNG state: 48 bytes (ct_rng_save), a generator state that is not all
 * zero (the generator would return zeros for ever) and a finite spare. */
static ct_status check_rng_state(const Caffe__SolverState *st, const char *path, ct_error *err) {
  if (!st->has_cortado_rng_state) return CT_OK;
  const ProtobufCBinaryData *r = &st->cortado_rng_state;
  if (r->len != CT_RNG_STATE_BYTES)
    return ct_error_set(err, CT_ERR_INVALID, "%s: cortado_rng_state has %zu bytes, expected %d",
                        path, r->len, CT_RNG_STATE_BYTES);
  bool zero = true;
  for (int i = 0; i < 32; i++) zero = zero && r->data[i] == 0;
  ct_rng probe;
  ct_rng_load(&probe, r->data);
  if (zero || (probe.has_spare && !isfinite(probe.spare)))
    return ct_error_set(err, CT_ERR_INVALID, "%s: cortado_rng_state is not a state Cortado writes (%s)",
                        path, zero ? "an all-zero generator" : "a non-finite spare value");
  return CT_OK;
}

/* Checks the scalars of a state against this solver: iter in [0, max_iter]
 * (a state past max_iter, or a negative one, is not from a run of this
 * solver and would overflow the counters or the rate formulas; a solver
 * without max_iter, stepped by its caller, takes any iter >= 0), current_step
 * in [0, the stepvalue count] for multistep and not negative for any policy,
 * every history value finite. */
static ct_status check_state_values(const ct_solver *s, const Caffe__SolverState *st,
                                    const char *path, ct_error *err) {
  const int max_iter = s->param->max_iter;
  if (st->iter < 0)
    return ct_error_set(err, CT_ERR_INVALID, "%s: iter is %d; an iteration count cannot be negative",
                        path, st->iter);
  if (s->param->has_max_iter && st->iter > max_iter)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: iter is %d, past this solver's max_iter %d (a state of another run, or "
                        "raise max_iter to continue it)",
                        path, st->iter, max_iter);
  if (st->current_step < 0)
    return ct_error_set(err, CT_ERR_INVALID, "%s: current_step is %d; it counts learning-rate steps "
                        "taken and cannot be negative",
                        path, st->current_step);
  if (s->lr.policy == CT_LR_POLICY_MULTISTEP && st->current_step > s->lr.nstepvalues)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: current_step is %d, but lr_policy 'multistep' of this solver has %d "
                        "stepvalue%s (current_step counts those passed: 0 to %d)",
                        path, st->current_step, s->lr.nstepvalues, s->lr.nstepvalues == 1 ? "" : "s",
                        s->lr.nstepvalues);
  for (size_t b = 0; b < st->n_history; b++) {
    const Caffe__BlobProto *bp = st->history[b];
    size_t n = bp->n_data ? bp->n_data : bp->n_double_data;
    size_t i = first_non_finite(bp->n_data ? bp->data : NULL, bp->n_data ? NULL : bp->double_data, n);
    if (i < n)
      return ct_error_set(err, CT_ERR_INVALID, "%s: history blob %zu holds a non-finite value (%g at "
                          "index %zu)",
                          path, b, bp->n_data ? (double)bp->data[i] : bp->double_data[i], i);
  }
  if (st->has_cortado_loss_scale &&
      !(isfinite(st->cortado_loss_scale) && st->cortado_loss_scale > 0.0f))
    return ct_error_set(err, CT_ERR_INVALID, "%s: cortado_loss_scale is %g; a loss scale is positive "
                        "and finite",
                        path, (double)st->cortado_loss_scale);
  return check_rng_state(st, path, err);
}

/* Loss scaling goes on from the saved scale and counters (checked by
 * check_state_values). */
static void restore_loss_scale(ct_solver *s, const Caffe__SolverState *st, const char *path) {
  if (!st->has_cortado_loss_scale) return;
  if (s->loss_scale.mode == CT_LOSS_SCALE_OFF) {
    LOG_INFO("%s: saved with loss scaling (scale %g); this run has none", path,
             (double)st->cortado_loss_scale);
    return;
  }
  const ct_loss_scale_state ls = {.scale = s->loss_scale.mode == CT_LOSS_SCALE_DYNAMIC
                                               ? st->cortado_loss_scale
                                               : s->loss_scale.init,
                                  .good = st->cortado_loss_scale_good,
                                  .skipped = st->cortado_loss_scale_skipped};
  ct_solver_loss_scale_set(s, &ls);
}

static ct_status restore_state(ct_solver *s, const Caffe__SolverState *st, const char *path,
                               ct_error *err) {
  /* everything is checked before anything changes, except that the weights
   * file is only read while copying it */
  CT_TRY(restore_history(s, st, path, false, err));
  CT_TRY(check_state_values(s, st, path, err));
  if (st->learned_net) {
    /* the weights of this run's own snapshot: every layer must be there */
    char *model = locate_learned_net(path, st->learned_net);
    ct_net_weights_begin(s->net);
    ct_status rc = ct_net_copy_trained_file(s->net, model, err);
    if (rc == CT_OK) rc = ct_net_weights_check(s->net, model, true, NULL, err);
    free(model);
    if (rc != CT_OK) return ct_error_prefix(err, "%s: learned_net", path);
  }
  CT_TRY(restore_history(s, st, path, true, err));
  s->iter = st->iter;
  s->current_step = st->current_step;
  /* Dropout masks continue where the interrupted run's would have. */
  ct_context_set_draws(s->ctx, (uint64_t)s->iter * (uint64_t)s->param->iter_size *
                                   (uint64_t)ct_net_draws_per_pass(s->net));
  if (st->has_cortado_extension_version &&
      st->cortado_extension_version > CT_SOLVER_EXTENSION_VERSION)
    LOG_WARNING("%s: written by a newer Cortado (extension version %u > %u); fields this "
                "version does not know are ignored",
                path, st->cortado_extension_version, CT_SOLVER_EXTENSION_VERSION);
  for (size_t i = 0; i < st->n_cortado_data_position; i++) {
    const Caffe__CortadoDataPosition *pos = st->cortado_data_position[i];
    int li = pos->layer ? ct_net_layer_index(s->net, pos->layer) : -1;
    ct_layer *l = li >= 0 ? s->net->layers[li] : NULL;
    if (l && l->released) continue; /* another pipeline stage reads its data */
    if (!l || !l->ops->set_position) {
      LOG_WARNING("%s: no data layer '%s' in the train net to continue from its saved position",
                  path, pos->layer ? pos->layer : "");
      continue;
    }
    if (l->ops->set_position(l, pos, err) != CT_OK) return ct_error_prefix(err, "%s", path);
  }
  restore_loss_scale(s, st, path);
  if (st->has_cortado_rng_state)
    ct_rng_load(&s->ctx->rng, st->cortado_rng_state.data);
  else
    LOG_INFO("%s: no RNG state (not written by Cortado); random numbers continue from the "
             "current seed",
             path);
  return CT_OK;
}

ct_status ct_solver_restore(ct_solver *s, const char *path, ct_error *err) {
  if (has_suffix(path, ".h5"))
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "%s: HDF5 solver states are not supported; use a .solverstate written "
                        "with snapshot_format BINARYPROTO",
                        path);
  ProtobufCMessage *m;
  CT_TRY(ct_proto_read_binary(&caffe__solver_state__descriptor, path, &m, err));
  ct_status st = restore_state(s, (const Caffe__SolverState *)m, path, err);
  protobuf_c_message_free_unpacked(m, NULL);
  return st;
}
