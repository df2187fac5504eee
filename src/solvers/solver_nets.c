/* Building the solver's nets: Caffe's InitTrainNet and InitTestNets, with
 * their checks and messages, and the `weights` files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "net/net_load.h"
#include "solvers/solver_internal.h"

ct_net_opts ct_solver_net_opts(const Caffe__NetParameter *np, ct_phase phase,
                               const Caffe__NetState *over) {
  ct_net_opts o = {0};
  const Caffe__NetState *own = np->state;
  o.phase = phase;
  if (own && own->has_phase) o.phase = (ct_phase)own->phase;
  if (over && over->has_phase) o.phase = (ct_phase)over->phase;
  int own_level = own && own->has_level ? own->level : 0;
  if (over && over->has_level) o.level = over->level - own_level;
  if (over) {
    o.stages = (const char *const *)over->stage;
    o.nstages = (int)over->n_stage;
  }
  return o;
}

void ct_solver_train_state(const Caffe__SolverParameter *sp, const Caffe__NetParameter *np,
                           Caffe__NetState *state) {
  const ct_net_opts o = ct_solver_net_opts(np, CT_PHASE_TRAIN, sp->train_state);
  ct_net_state_make(np, &o, state);
}

static ct_net_opts merged_opts(const ct_solver *s, const Caffe__NetParameter *np, ct_phase phase,
                               const Caffe__NetState *over, const char *source) {
  ct_net_opts o = ct_solver_net_opts(np, phase, over);
  o.quiet = s->opts.quiet_nets;
  o.keep_blob_diffs = s->opts.keep_blob_diffs;
  o.source_name = source;
  return o;
}

static ct_status build_train_net(ct_solver *s, ct_error *err) {
  const Caffe__SolverParameter *p = s->param;
  const char *fields = "net, net_param, train_net, train_net_param";
  int n = (p->net != NULL) + (p->net_param != NULL) + (p->train_net != NULL) +
          (p->train_net_param != NULL);
  if (n < 1)
    return ct_error_set(err, CT_ERR_INVALID,
                        "SolverParameter must specify a train net using one of these fields: %s",
                        fields);
  if (n > 1)
    return ct_error_set(err, CT_ERR_INVALID,
                        "SolverParameter must not contain more than one of these fields "
                        "specifying a train_net: %s",
                        fields);
  const Caffe__NetParameter *np = NULL;
  Caffe__NetParameter *read = NULL;
  const char *source;
  if (p->train_net_param) {
    LOG_INFO("Creating training net specified in train_net_param.");
    np = p->train_net_param;
    source = "train_net_param";
  } else if (p->net_param) {
    LOG_INFO("Creating training net specified in net_param.");
    np = p->net_param;
    source = "net_param";
  } else {
    const char *path = p->train_net ? p->train_net : p->net;
    LOG_INFO("Creating training net from %s file: %s", p->train_net ? "train_net" : "net", path);
    CT_TRY(ct_net_param_read(path, &read, err));
    np = read;
    source = path;
  }
  ct_net_opts o = merged_opts(s, np, CT_PHASE_TRAIN, p->train_state, source);
  o.part = s->opts.train_part;
  ct_status st = ct_net_init(&s->net, np, &o, s->ctx, err);
  if (st == CT_OK) st = ct_solver_loss_scale_resolve(s, np, err);
  if (read) protobuf_c_message_free_unpacked(&read->base, NULL);
  return st;
}

/* Test net layers named like a train net layer take its weights, so their
 * learnable blobs must match in number and shape (Caffe CHECKs this). */
static ct_status check_shareable(const ct_net *test, int id, const ct_net *train, ct_error *err) {
  for (int i = 0; i < train->nlayers; i++) {
    const ct_layer *src = train->layers[i];
    int li = ct_net_layer_index(test, src->name);
    if (li < 0) continue;
    const ct_layer *dst = test->layers[li];
    if (dst->nparams != src->nparams)
      return ct_error_set(err, CT_ERR_INVALID,
                          "test net #%d: layer '%s' has %d learnable blobs, the train net's "
                          "layer of that name has %d, so it cannot share its weights",
                          id, src->name, dst->nparams, src->nparams);
    for (int j = 0; j < src->nparams; j++)
      if (!ct_tensor_same_shape(dst->params[j], src->params[j])) {
        char a[256], b[256];
        return ct_error_set(err, CT_ERR_INVALID,
                            "test net #%d: layer '%s' blob %d has shape %s, the train net's has "
                            "%s, so it cannot share its weights",
                            id, src->name, j, ct_tensor_shape_string(dst->params[j], a, sizeof a),
                            ct_tensor_shape_string(src->params[j], b, sizeof b));
      }
  }
  return CT_OK;
}

static ct_status build_test_nets(ct_solver *s, ct_error *err) {
  const Caffe__SolverParameter *p = s->param;
  bool has_net_param = p->net_param != NULL, has_net_file = p->net != NULL;
  if (has_net_param && has_net_file)
    return ct_error_set(err, CT_ERR_INVALID, "Both net_param and net_file may not be specified.");
  int num_params = (int)p->n_test_net_param, num_files = (int)p->n_test_net;
  int num_nets = num_params + num_files;
  int num_iters = (int)p->n_test_iter;
  if (has_net_param || has_net_file ? num_iters < num_nets : num_iters != num_nets)
    return ct_error_set(err, CT_ERR_INVALID, "test_iter must be specified for each test network.");
  /* a generic net (net / net_param) serves every test_iter left over */
  int total = num_iters;
  if (p->n_test_state && (int)p->n_test_state != total)
    return ct_error_set(err, CT_ERR_INVALID,
                        "test_state must be unspecified or specified once per test net.");
  if (total > 0 && p->test_interval <= 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "test_interval must be > 0 when there are test nets (got %d)",
                        p->test_interval);
  s->test_nets = ct_xcalloc((size_t)total + 1, sizeof *s->test_nets);
  for (int i = 0; i < total; i++) {
    const Caffe__NetParameter *np = NULL;
    Caffe__NetParameter *read = NULL;
    char source[4200];
    const char *path = NULL;
    if (i < num_params) {
      np = p->test_net_param[i];
      snprintf(source, sizeof source, "test_net_param");
    } else if (i < num_nets) {
      path = p->test_net[i - num_params];
      snprintf(source, sizeof source, "test_net file: %s", path);
    } else if (has_net_param) {
      np = p->net_param;
      snprintf(source, sizeof source, "net_param");
    } else {
      path = p->net;
      snprintf(source, sizeof source, "net file: %s", path);
    }
    if (path) {
      CT_TRY(ct_net_param_read(path, &read, err));
      np = read;
    }
    LOG_INFO("Creating test net (#%d) specified by %s", i, source);
    ct_net_opts o = merged_opts(s, np, CT_PHASE_TEST, p->n_test_state ? p->test_state[i] : NULL,
                                path ? path : source);
    o.part = s->opts.test_part;
    ct_status st = ct_net_init(&s->test_nets[i], np, &o, s->ctx, err);
    if (read) protobuf_c_message_free_unpacked(&read->base, NULL);
    if (st != CT_OK) return st;
    s->ntest_nets = i + 1;
    CT_TRY(check_shareable(s->test_nets[i], i, s->net, err));
    ct_net_share_trained(s->test_nets[i], s->net);
  }
  return CT_OK;
}

/* Copies every file of the comma-separated list into the train net and
 * every test net, logging "<verb> <file>" for each; then a layer with
 * parameters that none of them filled is a warning, or with
 * opts.strict_weights an error (`source` names the list in messages). */
static ct_status copy_trained_list(ct_solver *s, const char *list, const char *verb,
                                   const char *source, ct_error *err) {
  char *copy = ct_xstrdup(list), *save = NULL;
  ct_status st = CT_OK;
  ct_net_weights_begin(s->net);
  for (int i = 0; i < s->ntest_nets; i++) ct_net_weights_begin(s->test_nets[i]);
  for (char *f = strtok_r(copy, ",", &save); f && st == CT_OK; f = strtok_r(NULL, ",", &save)) {
    LOG_INFO("%s %s", verb, f);
    st = ct_net_copy_trained_file(s->net, f, err);
    for (int i = 0; i < s->ntest_nets && st == CT_OK; i++)
      st = ct_net_copy_trained_file(s->test_nets[i], f, err);
  }
  free(copy);
  /* one warning per run: the root's */
  const bool strict = s->opts.strict_weights, speak = strict || ct_solver_is_root(s);
  char what[CT_ERROR_MSG_MAX / 2];
  snprintf(what, sizeof what, "%s %s", source, list);
  const char *hint = strict ? NULL : "--strict_weights makes this an error";
  if (st == CT_OK && speak) st = ct_net_weights_check(s->net, what, strict, hint, err);
  for (int i = 0; i < s->ntest_nets && st == CT_OK && speak; i++) {
    char test_what[CT_ERROR_MSG_MAX / 2 + 32];
    snprintf(test_what, sizeof test_what, "%s (test net #%d)", what, i);
    st = ct_net_weights_check(s->test_nets[i], test_what, strict, hint, err);
  }
  return st;
}

/* Caffe's LoadNetWeights for every `weights` entry: each is a
 * comma-separated list of .caffemodel files, copied into every net. */
static ct_status load_weights(ct_solver *s, ct_error *err) {
  for (size_t w = 0; w < s->param->n_weights; w++)
    CT_TRY(copy_trained_list(s, s->param->weights[w], "Loading weights from", "the solver's weights", err));
  return CT_OK;
}

ct_status ct_solver_build_nets(ct_solver *s, ct_error *err) {
  CT_TRY(build_train_net(s, err));
  CT_TRY(build_test_nets(s, err));
  return load_weights(s, err);
}

float ct_solver_blob_loss_weight(const ct_net *net, int b) {
  float w = 0.0f;
  for (int i = 0; i < net->nlayers; i++)
    for (int j = 0; j < net->layers[i]->ntop; j++)
      if (net->top_ids[i][j] == b) w = net->layers[i]->loss_weight[j];
  return w;
}

ct_status ct_solver_copy_trained_files(ct_solver *s, const char *list, ct_error *err) {
  return copy_trained_list(s, list, "Finetuning from", "--weights", err);
}
