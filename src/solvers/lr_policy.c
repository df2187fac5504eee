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

/* Index of name in names[0 .. n), or an error naming the field, the known
 * names and the nearest one. */
static ct_status policy_index(const char *field, const char *name, const char *const *names,
                              size_t n, const char *known, size_t *out, ct_error *err) {
  for (*out = 0; *out < n; ++*out)
    if (strcmp(name, names[*out]) == 0) return CT_OK;
  const char *near = ct_suggest(name, names, n);
  if (near)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: unknown policy '%s' (known: %s; did you mean '%s'?)", field, name,
                        known, near);
  return ct_error_set(err, CT_ERR_INVALID, "%s: unknown policy '%s' (known: %s)", field, name,
                      known);
}

static const char *const g_momentum_names[] = {"fixed", "poly", "opt"};
static const char *const g_decay_names[] = {"fixed", "poly"};

/* NVCaffe's momentum_policy and weight_decay_policy with their fields. */
static ct_status schedules_init(ct_lr_schedule *s, const Caffe__SolverParameter *p, ct_error *err) {
  size_t k;
  CT_TRY(policy_index("momentum_policy", p->momentum_policy ? p->momentum_policy : "fixed",
                      g_momentum_names, 3, "fixed, poly, opt", &k, err));
  s->momentum_policy = (ct_momentum_policy)k;
  CT_TRY(policy_index("weight_decay_policy",
                      p->weight_decay_policy ? p->weight_decay_policy : "fixed", g_decay_names, 2,
                      "fixed, poly", &k, err));
  s->decay_policy = (ct_decay_policy)k;
  s->momentum = p->momentum;
  s->max_momentum = p->max_momentum;
  s->has_max_momentum = p->has_max_momentum;
  s->momentum_power = p->momentum_power;
  s->weight_decay = p->weight_decay;
  s->decay_power = p->weight_decay_power;
  if (s->momentum_policy == CT_MOMENTUM_POLICY_POLY && p->max_iter <= 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "max_iter: momentum_policy 'poly' needs max_iter > 0, got %d", p->max_iter);
  if (s->decay_policy == CT_DECAY_POLICY_POLY && p->max_iter <= 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "max_iter: weight_decay_policy 'poly' needs max_iter > 0, got %d",
                        p->max_iter);
  return CT_OK;
}

ct_status ct_lr_schedule_init(ct_lr_schedule *s, const Caffe__SolverParameter *p, ct_error *err) {
  memset(s, 0, sizeof *s);
  CT_TRY(schedules_init(s, p, err));
  const char *name = p->lr_policy;
  if (!name || !*name)
    return ct_error_set(err, CT_ERR_INVALID, "lr_policy: not set (one of " KNOWN ")");
  size_t k;
  CT_TRY(policy_index("lr_policy", name, g_names, NPOLICIES, KNOWN, &k, err));
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

/* NVCaffe computes these in float; so do we. */
float ct_momentum_rate(const ct_lr_schedule *s, int iter, float rate) {
  switch (s->momentum_policy) {
    case CT_MOMENTUM_POLICY_FIXED:
      return s->momentum;
    case CT_MOMENTUM_POLICY_POLY: {
      const float progress = (float)iter / (float)s->max_iter;
      return s->momentum + (s->max_momentum - s->momentum) * powf(progress, s->momentum_power);
    }
    case CT_MOMENTUM_POLICY_OPT: {
      const float root = 1.0f - 0.5f * sqrtf(rate);
      const float m = root * root;
      return s->has_max_momentum && s->max_momentum < m ? s->max_momentum : m;
    }
  }
  CT_ASSERT(!"unknown momentum policy");
  return 0.0f;
}

float ct_weight_decay_rate(const ct_lr_schedule *s, int iter) {
  if (s->decay_policy == CT_DECAY_POLICY_FIXED) return s->weight_decay;
  return s->weight_decay * powf((float)iter / (float)s->max_iter, s->decay_power);
}
