/* Learning-rate policies (Caffe's SGDSolver::GetLearningRate):
 *
 *   fixed      base_lr
 *   step       base_lr * gamma ^ floor(iter / stepsize)
 *   exp        base_lr * gamma ^ iter
 *   inv        base_lr * (1 + gamma * iter) ^ (-power)
 *   multistep  base_lr * gamma ^ current_step, where current_step counts the
 *              stepvalue entries passed (advancing by at most one per call)
 *   poly       base_lr * (1 - iter / max_iter) ^ power
 *   sigmoid    base_lr / (1 + exp(-gamma * (iter - stepsize)))
 *
 * and beside them NVCaffe's momentum and weight-decay schedules
 * (SGDSolver::GetMomentum and GetWeightDecay of NVCaffe 0.17):
 *
 *   momentum_policy fixed   momentum
 *                   poly    momentum + (max_momentum - momentum) * (iter / max_iter) ^ momentum_power
 *                   opt     (1 - sqrt(rate) / 2) ^ 2 with rate this iteration's learning rate,
 *                           at most max_momentum when the solver file sets it
 *   weight_decay_policy fixed  weight_decay
 *                       poly   weight_decay * (iter / max_iter) ^ weight_decay_power
 */
#ifndef CT_SOLVERS_LR_POLICY_H
#define CT_SOLVERS_LR_POLICY_H

#include <stdbool.h>

#include "caffe.pb-c.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_lr_policy {
  CT_LR_POLICY_FIXED = 0,
  CT_LR_POLICY_STEP,
  CT_LR_POLICY_EXP,
  CT_LR_POLICY_INV,
  CT_LR_POLICY_MULTISTEP,
  CT_LR_POLICY_POLY,
  CT_LR_POLICY_SIGMOID
} ct_lr_policy;

/* NVCaffe's momentum_policy values. */
typedef enum ct_momentum_policy {
  CT_MOMENTUM_POLICY_FIXED = 0,
  CT_MOMENTUM_POLICY_POLY,
  CT_MOMENTUM_POLICY_OPT
} ct_momentum_policy;

/* NVCaffe's weight_decay_policy values. */
typedef enum ct_decay_policy { CT_DECAY_POLICY_FIXED = 0, CT_DECAY_POLICY_POLY } ct_decay_policy;

typedef struct ct_lr_schedule {
  ct_lr_policy policy;
  float base_lr, gamma, power;
  int stepsize, max_iter;
  int nstepvalues;
  int *stepvalues; /* (nstepvalues) owned */
  float min_lr;    /* NVCaffe's min_lr: the rate never goes below it (0: no floor) */
  int rampup_interval; /* NVCaffe's ramp-up: iterations before the policy applies (0: none) */
  float rampup_lr;     /* the rate the ramp-up starts from */
  ct_momentum_policy momentum_policy;
  float momentum, max_momentum, momentum_power;
  bool has_max_momentum;   /* opt: max_momentum caps it only when the file sets it */
  ct_decay_policy decay_policy;
  float weight_decay, decay_power;
} ct_lr_schedule;

/* Reads lr_policy and the fields it uses from p, with Caffe's checks:
 * step and sigmoid need stepsize > 0; step, exp, inv, multistep and sigmoid
 * need gamma >= 0; poly needs max_iter > 0.  Errors (CT_ERR_INVALID):
 *   "lr_policy: unknown policy 'stpe' (known: fixed, step, exp, inv,
 *    multistep, poly, sigmoid; did you mean 'step'?)"
 *   "lr_policy: not set (one of fixed, step, ...)"
 *   "stepsize: lr_policy 'step' needs stepsize > 0, got 0"
 * and momentum_policy, weight_decay_policy and their fields (NVCaffe's
 * names; poly needs max_iter > 0):
 *   "momentum_policy: unknown policy 'pol' (known: fixed, poly, opt; did you mean 'poly'?)"
 *   "max_iter: weight_decay_policy 'poly' needs max_iter > 0, got 0"
 * Free with ct_lr_schedule_free. */
ct_status ct_lr_schedule_init(ct_lr_schedule *s, const Caffe__SolverParameter *p, ct_error *err);
void ct_lr_schedule_free(ct_lr_schedule *s);

/* NVCaffe's fields (0.17, the version with min_lr):
 *   rampup     for iter < rampup_interval the policy is not consulted:
 *              rampup_lr + (base_lr - rampup_lr) * (iter / rampup_interval)^2
 *   poly       with min_lr it decays to min_lr instead of 0:
 *              (base_lr - min_lr) * (1 - iter / max_iter) ^ power + min_lr
 *              (base_lr below min_lr is an error then)
 *   min_lr     every rate, the ramp-up's too, is at least min_lr.
 * The rate at iteration iter (at least min_lr).  *current_step is Caffe's current_step_: step
 * sets it to iter / stepsize; multistep advances it by one when iter has
 * reached the next stepvalue (and logs "MultiStep Status: Iteration N,
 * step = K"); other policies leave it alone. */
float ct_lr_rate(const ct_lr_schedule *s, int iter, int *current_step);

/* NVCaffe's momentum at iteration iter, whose learning rate is `rate`
 * (ct_lr_rate's; the opt policy follows it). */
float ct_momentum_rate(const ct_lr_schedule *s, int iter, float rate);
/* NVCaffe's global weight decay at iteration iter (times each parameter's
 * decay_mult in the update). */
float ct_weight_decay_rate(const ct_lr_schedule *s, int iter);

/* The policy's name as written in a solver file. */
const char *ct_lr_policy_name(ct_lr_policy p);

#ifdef __cplusplus
}
#endif

#endif
