/* The table of update rules and the checks Caffe's solver constructors make. */
#include <stdio.h>
#include <string.h>

#include "core/strutil.h"
#include "solvers/update.h"

static ct_status check_no_momentum(const Caffe__SolverParameter *p, const char *type,
                                   ct_error *err) {
  if (p->has_momentum && p->momentum != 0.0f)
    return ct_error_set(err, CT_ERR_INVALID,
                        "momentum: must be 0 for solver type %s (got %g); %s keeps no momentum",
                        type, (double)p->momentum, type);
  return CT_OK;
}

static ct_status check_adagrad(const Caffe__SolverParameter *p, ct_error *err) {
  return check_no_momentum(p, "AdaGrad", err);
}

static ct_status check_rmsprop(const Caffe__SolverParameter *p, ct_error *err) {
  CT_TRY(check_no_momentum(p, "RMSProp", err));
  if (!(p->rms_decay >= 0.0f && p->rms_decay < 1.0f))
    return ct_error_set(err, CT_ERR_INVALID, "rms_decay: must lie in [0, 1), got %g",
                        (double)p->rms_decay);
  return CT_OK;
}

static const ct_update_rule g_rules[] = {
    {"SGD", 1, ct_update_sgd_cpu, CT_UPDATE_SGD, NULL},
    {"Nesterov", 1, ct_update_nesterov_cpu, CT_UPDATE_NESTEROV, NULL},
    {"AdaGrad", 1, ct_update_adagrad_cpu, CT_UPDATE_ADAGRAD, check_adagrad},
    {"RMSProp", 1, ct_update_rmsprop_cpu, CT_UPDATE_RMSPROP, check_rmsprop},
    {"AdaDelta", 2, ct_update_adadelta_cpu, CT_UPDATE_ADADELTA, NULL},
    {"Adam", 2, ct_update_adam_cpu, CT_UPDATE_ADAM, NULL},
};
#define NRULES (sizeof g_rules / sizeof g_rules[0])

ct_status ct_update_rule_lookup(const char *type, const ct_update_rule **out, ct_error *err) {
  *out = NULL;
  const char *names[NRULES];
  for (size_t i = 0; i < NRULES; i++) {
    names[i] = g_rules[i].type;
    if (type && strcmp(type, g_rules[i].type) == 0) {
      *out = &g_rules[i];
      return CT_OK;
    }
  }
  char known[256] = "";
  for (size_t i = 0; i < NRULES; i++) {
    strncat(known, names[i], sizeof known - strlen(known) - 1);
    if (i + 1 < NRULES) strncat(known, ", ", sizeof known - strlen(known) - 1);
  }
  const char *near = ct_suggest(type ? type : "", names, NRULES);
  if (near)
    return ct_error_set(err, CT_ERR_NOTFOUND,
                        "unknown solver type '%s' (known types: %s; did you mean '%s'?)",
                        type ? type : "", known, near);
  return ct_error_set(err, CT_ERR_NOTFOUND, "unknown solver type '%s' (known types: %s)",
                      type ? type : "", known);
}

const char *ct_update_legacy_type_name(int solver_type) {
  switch (solver_type) {
    case CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__SGD: return "SGD";
    case CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__NESTEROV: return "Nesterov";
    case CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__ADAGRAD: return "AdaGrad";
    case CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__RMSPROP: return "RMSProp";
    case CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__ADADELTA: return "AdaDelta";
    case CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__ADAM: return "Adam";
    default: return NULL;
  }
}
