/* Helpers shared by the loss-layer tests (test_layer_loss_*.c and
 * test_gpu_layer_loss.c): integer labels, naive double-precision softmax,
 * and a LayerParameter with room for the typed parameters these layers use. */
#ifndef CT_TESTS_LOSSTEST_H
#define CT_TESTS_LOSSTEST_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "layertest.h"
#include "testutil.h"

/* A LayerParameter plus the typed parameters it may point at. */
typedef struct {
  Caffe__LayerParameter p;
  Caffe__LossParameter loss;
  Caffe__SoftmaxParameter softmax;
  Caffe__AccuracyParameter accuracy;
  Caffe__ArgMaxParameter argmax;
  Caffe__ContrastiveLossParameter contrastive;
  Caffe__HingeLossParameter hinge;
  Caffe__InfogainLossParameter infogain;
  float loss_weight[2];
} lt_param;

/* Initialises every part; the typed parameters are not attached until the
 * test points p.<x>_param at them. */
static inline void lt_param_init(lt_param *lp, const char *name, const char *type) {
  Caffe__LayerParameter init = CAFFE__LAYER_PARAMETER__INIT;
  lp->p = init;
  lp->p.name = (char *)name;
  lp->p.type = (char *)type;
  caffe__loss_parameter__init(&lp->loss);
  caffe__softmax_parameter__init(&lp->softmax);
  caffe__accuracy_parameter__init(&lp->accuracy);
  caffe__arg_max_parameter__init(&lp->argmax);
  caffe__contrastive_loss_parameter__init(&lp->contrastive);
  caffe__hinge_loss_parameter__init(&lp->hinge);
  caffe__infogain_loss_parameter__init(&lp->infogain);
}

/* SoftmaxWithLoss (GPU tests) with softmax axis `axis` (INT32_MIN: unset),
 * the ignore label 1 when `ignore`, normalisation `norm` (-1: unset), and
 * loss weights (2.5 on the loss, 0 on the probabilities; ntop of them)
 * when `weighted`. */
static inline void lt_softmax_loss_param(lt_param *lp, int axis, bool ignore, int norm,
                                         bool weighted, int ntop) {
  lt_param_init(lp, "loss", "SoftmaxWithLoss");
  lp->p.loss_param = &lp->loss;
  lp->loss.has_ignore_label = ignore;
  lp->loss.ignore_label = 1;
  if (norm >= 0) {
    lp->loss.has_normalization = 1;
    lp->loss.normalization = norm;
  }
  if (axis != INT32_MIN) {
    lp->softmax.has_axis = 1;
    lp->softmax.axis = axis;
    lp->p.softmax_param = &lp->softmax;
  }
  if (weighted) {
    lp->loss_weight[0] = 2.5f;
    lp->loss_weight[1] = 0.0f;
    lp->p.n_loss_weight = (size_t)ntop;
    lp->p.loss_weight = lp->loss_weight;
  }
}

/* Deterministic integer labels in [0, nclass) into t's data; returns the
 * host copy (caller frees). */
static inline float *lt_set_labels(ct_tensor *t, int nclass, uint64_t seed) {
  float *v = malloc(t->count * sizeof(float) + 1);
  tu_fill_uniform(v, t->count, 0.0f, (float)nclass, seed);
  for (size_t i = 0; i < t->count; i++) {
    v[i] = floorf(v[i]);
    if (v[i] >= (float)nclass) v[i] = (float)(nclass - 1);
  }
  tu_set_values(t, v);
  return v;
}

/* p(outer, C, inner) = softmax of x over C, in double. */
static inline void lt_softmax_ref(const float *x, size_t outer, int C, size_t inner, double *p) {
  for (size_t i = 0; i < outer; i++)
    for (size_t k = 0; k < inner; k++) {
      double m = -INFINITY, s = 0;
      for (int c = 0; c < C; c++) m = fmax(m, x[(i * C + c) * inner + k]);
      for (int c = 0; c < C; c++) s += exp(x[(i * C + c) * inner + k] - m);
      for (int c = 0; c < C; c++) p[(i * C + c) * inner + k] = exp(x[(i * C + c) * inner + k] - m) / s;
    }
}

/* Fails unless |got - want| <= tol * max(1, |want|). */
static inline void lt_assert_close(double got, double want, double tol, const char *what) {
  double scale = fabs(want) > 1.0 ? fabs(want) : 1.0;
  if (!(fabs(got - want) <= tol * scale)) fail_msg("%s: got %.9g, want %.9g", what, got, want);
}

/* The scalar top 0 of a case. */
static inline double lt_top0(const tu_layer_case *c) {
  float *v = tu_values(c->top[0]);
  double r = v[0];
  free(v);
  return r;
}

#endif
