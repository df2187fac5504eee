/* Learning-rate policies: parsing, checks and the rate formulas. */
#include "solvers/lr_policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strutil.h"

static const char *const g_names[] = {"fixed", "step", "exp", "inv", "multistep", "poly",
                                      "sigmoid"};
#define NPOLICIES (sizeof g_names / sizeof g_names[0])
#define KNOWN "fixed, step, exp, inv, multistep, poly, sigmoid"

const char *ct_lr_policy_name(ct_lr_policy p) {
  return (size_t)p < NPOLICIES ? g_names[p] : "?";
}

ct_status ct_lr_schedule_init(ct_lr_schedule *s, const Caffe__SolverParameter *p, ct_error *err) {
  memset(s, 0, sizeof *s);
  const char *name = p->lr_policy;
  if (!name || !*name)
    return ct_error_set(err, CT_ERR_INVALID, "lr_policy: not set (one of " KNOWN ")");
  size_t k = 0;
  while (k < NPOLICIES && strcmp(name, g_names[k]) != 0) k++;
  if (k == NPOLICIES) {
    const char *near = ct_suggest(name, g_names, NPOLICIES);
    if (near)
      return ct_error_set(err, CT_ERR_INVALID,
                          "lr_policy: unknown policy '%s' (known: " KNOWN "; did you mean '%s'?)",
                          name, near);
    return ct_error_set(err, CT_ERR_INVALID, "lr_policy: unknown policy '%s' (known: " KNOWN ")",
                        name);
  }
  s->policy = (ct_lr_policy)k;
  s->base_lr = p->base_lr;
  if (p->has_min_lr && p->min_lr < 0)
    return ct_error_set(err, CT_ERR_INVALID, "min_lr: must not be negative, got %g", (double)p->min_lr);
  s->min_lr = p->min_lr;
  if (p->rampup_interval < 0)
    return ct_error_set(err, CT_ERR_INVALID, "rampup_interval: must not be negative, got %d",
                        p->rampup_interval);
  s->rampup_interval = p->rampup_interval;
  s->rampup_lr = p->has_rampup_lr ? p->rampup_lr : 0.0f;
  s->gamma = p->gamma;
  s->power = p->power;
  s->stepsize = p->stepsize;
  s->max_iter = p->max_iter;

  bool needs_stepsize = s->policy == CT_LR_POLICY_STEP || s->policy == CT_LR_POLICY_SIGMOID;
  bool needs_gamma = s->policy != CT_LR_POLICY_FIXED && s->policy != CT_LR_POLICY_POLY;
  if (needs_stepsize && s->stepsize <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "stepsize: lr_policy '%s' needs stepsize > 0, got %d",
                        name, s->stepsize);
  if (needs_gamma && !(s->gamma >= 0.0f))
    return ct_error_set(err, CT_ERR_INVALID, "gamma: lr_policy '%s' needs gamma >= 0, got %g",
                        name, (double)s->gamma);
  if (s->policy == CT_LR_POLICY_POLY && s->max_iter <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "max_iter: lr_policy 'poly' needs max_iter > 0, got %d",
                        s->max_iter);
  if (s->policy == CT_LR_POLICY_POLY && s->base_lr < s->min_lr)
    return ct_error_set(err, CT_ERR_INVALID,
                        "min_lr: lr_policy 'poly' decays from base_lr to min_lr, but base_lr %g is below "
                        "min_lr %g",
                        (double)s->base_lr, (double)s->min_lr);
  if (s->policy == CT_LR_POLICY_MULTISTEP && p->n_stepvalue > 0) {
    s->nstepvalues = (int)p->n_stepvalue;
    s->stepvalues = malloc(p->n_stepvalue * sizeof *s->stepvalues);
    if (!s->stepvalues) return ct_error_set(err, CT_ERR_NOMEM, "out of memory");
    memcpy(s->stepvalues, p->stepvalue, p->n_stepvalue * sizeof *s->stepvalues);
  }
  return CT_OK;
}

void ct_lr_schedule_free(ct_lr_schedule *s) {
  free(s->stepvalues);
  s->stepvalues = NULL;
  s->nstepvalues = 0;
}

static float policy_rate(const ct_lr_schedule *s, int iter, int *current_step) {
  const double base = s->base_lr, gamma = s->gamma, power = s->power;
  switch (s->policy) {
    case CT_LR_POLICY_FIXED:
      return s->base_lr;
    case CT_LR_POLICY_STEP:
      *current_step = iter / s->stepsize;
      return (float)(base * pow(gamma, *current_step));
    case CT_LR_POLICY_EXP:
      return (float)(base * pow(gamma, iter));
    case CT_LR_POLICY_INV:
      return (float)(base * pow(1.0 + gamma * iter, -power));
    case CT_LR_POLICY_MULTISTEP:
      /* a restored current_step is checked (ct_solver_restore) */
      CT_ASSERTF(*current_step >= 0 && *current_step <= s->nstepvalues,
                 "multistep current_step %d outside [0, %d]", *current_step, s->nstepvalues);
      if (*current_step < s->nstepvalues && iter >= s->stepvalues[*current_step]) {
        (*current_step)++;
        LOG_INFO("MultiStep Status: Iteration %d, step = %d", iter, *current_step);
      }
      return (float)(base * pow(gamma, *current_step));
    case CT_LR_POLICY_POLY: {
      const double floor = s->min_lr;
      return (float)((base - floor) * pow(1.0 - (double)iter / s->max_iter, power) + floor);
    }
    case CT_LR_POLICY_SIGMOID:
      return (float)(base / (1.0 + exp(-gamma * ((double)iter - s->stepsize))));
  }
  CT_ASSERT(!"unknown lr policy");
  return 0.0f;
}

static float rampup_rate(const ct_lr_schedule *s, int iter) {
  const float alpha = (float)iter / (float)s->rampup_interval;
  return s->rampup_lr + (s->base_lr - s->rampup_lr) * alpha * alpha;
}

float ct_lr_rate(const ct_lr_schedule *s, int iter, int *current_step) {
  const float r = iter < s->rampup_interval ? rampup_rate(s, iter) : policy_rate(s, iter, current_step);
  return r < s->min_lr ? s->min_lr : r;
}
