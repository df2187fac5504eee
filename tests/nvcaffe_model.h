/* NVCaffe's ResNet-50 fp16 files of models/nvcaffe_resnet50_fp16 trained a
 * few iterations on dummy data of a reduced size: shared by
 * test_models_nvcaffe.c (CPU) and test_gpu_models_nvcaffe.c. */
#ifndef CT_TEST_NVCAFFE_MODEL_H
#define CT_TEST_NVCAFFE_MODEL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "net/net_load.h"
#include "solvers/solver.h"
#include "testutil.h"

#define NVM_DIR "models/nvcaffe_resnet50_fp16/"

/* The solver file with its net inline, the data layers DummyData of
 * C x side x side samples in batches of `batch`, no snapshots. */
static inline Caffe__SolverParameter *nvm_solver_param(int side, int batch) {
  ct_error err;
  Caffe__SolverParameter *sp = NULL;
  Caffe__NetParameter *np = NULL;
  if (ct_solver_param_read(tu_src(NVM_DIR "solver.prototxt"), &sp, &err) != CT_OK ||
      ct_net_param_read(tu_src(NVM_DIR "train_val.prototxt"), &np, &err) != CT_OK)
    fail_msg("%s", err.msg);
  const int chw[3] = {3, side, side};
  if (ct_net_param_replace_data_layers(np, chw, &err) != CT_OK) fail_msg("%s", err.msg);
  for (size_t i = 0; i < np->n_layer; i++) {
    Caffe__DummyDataParameter *d = np->layer[i]->dummy_data_param;
    for (size_t k = 0; d && k < d->n_shape; k++) d->shape[k]->dim[0] = batch;
  }
  free(sp->net);
  sp->net = NULL;
  sp->net_param = np;
  sp->snapshot = 0;
  sp->snapshot_after_train = 0;
  sp->has_display = 1;
  sp->display = 1;
  return sp;
}

/* The values of a (possibly device) tensor on the host (caller frees). */
static inline float *nvm_host(const ct_context *ctx, const ct_tensor *t) {
  float *h = malloc(t->count * sizeof(float) + 1);
  ct_mem_copy(CT_DEVICE_CPU, h, ctx->device, t->data, t->count * sizeof(float));
  return h;
}

/* Trains `iters` iterations on ctx; the loss stays finite and the weights,
 * BatchNorm's own scale and bias among them, move. */
static inline ct_solver *nvm_train(ct_context *ctx, int side, int batch, int iters) {
  Caffe__SolverParameter *sp = nvm_solver_param(side, batch);
  ct_solver_opts o = {.quiet_nets = true};
  ct_solver *s = NULL;
  ct_error err;
  if (ct_solver_init(&s, sp, &o, ctx, &err) != CT_OK) fail_msg("solver: %s", err.msg);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  const int bn = ct_net_layer_index(s->net, "conv1_bn"), conv = ct_net_layer_index(s->net, "conv1");
  assert_true(bn >= 0 && conv >= 0);
  assert_int_equal(s->net->layers[bn]->nparams, 5);
  float *gamma0 = nvm_host(ctx, s->net->layers[bn]->params[3]);
  float *w0 = nvm_host(ctx, s->net->layers[conv]->params[0]);
  if (ct_solver_step(s, iters, &err) != CT_OK) fail_msg("training: %s", err.msg);
  assert_true(isfinite(s->smoothed_loss) && s->smoothed_loss > 0);
  float *gamma1 = nvm_host(ctx, s->net->layers[bn]->params[3]);
  float *w1 = nvm_host(ctx, s->net->layers[conv]->params[0]);
  assert_true(memcmp(gamma0, gamma1, s->net->layers[bn]->params[3]->count * sizeof(float)) != 0);
  assert_true(memcmp(w0, w1, s->net->layers[conv]->params[0]->count * sizeof(float)) != 0);
  free(gamma0);
  free(gamma1);
  free(w0);
  free(w1);
  return s;
}

#endif
