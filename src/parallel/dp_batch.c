/* Batch sizes in data-parallel runs: --global_batch divides the train net's
 * batch among the workers (NVCaffe's strong scaling); the solver's net
 * files are read into memory first so that they can be edited. */
#include <stdlib.h>
#include <string.h>

#include "net/net_load.h"
#include "parallel/dp.h"

static ct_status read_into(char **path, Caffe__NetParameter **dst, ct_error *err) {
  Caffe__NetParameter *np = NULL;
  CT_TRY(ct_net_param_read(*path, &np, err));
  if (*dst) protobuf_c_message_free_unpacked(&(*dst)->base, NULL);
  *dst = np;
  free(*path);
  *path = NULL;
  return CT_OK;
}

ct_status ct_dp_inline_nets(Caffe__SolverParameter *sp, ct_error *err) {
  if (sp->net) CT_TRY(read_into(&sp->net, &sp->net_param, err));
  if (sp->train_net) CT_TRY(read_into(&sp->train_net, &sp->train_net_param, err));
  if (sp->n_test_net > 0) {
    /* Caffe's order of test nets: test_net_param, then test_net */
    size_t n = sp->n_test_net_param + sp->n_test_net;
    sp->test_net_param = ct_xrealloc(sp->test_net_param, (n + 1) * sizeof *sp->test_net_param);
    for (size_t i = 0; i < sp->n_test_net; i++) {
      Caffe__NetParameter *np = NULL;
      CT_TRY(read_into(&sp->test_net[i], &np, err));
      sp->test_net_param[sp->n_test_net_param++] = np;
    }
    free(sp->test_net);
    sp->test_net = NULL;
    sp->n_test_net = 0;
  }
  return CT_OK;
}

static ct_status divide(const Caffe__LayerParameter *l, const char *what, int64_t *value, int world,
                        ct_error *err) {
  if (*value <= 0 || *value % world != 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--global_batch: layer '%s' (%s) has %s %lld, which %d workers do not divide",
                        l->name ? l->name : "", l->type ? l->type : "", what, (long long)*value, world);
  *value /= world;
  return CT_OK;
}

static ct_status divide_u32(const Caffe__LayerParameter *l, uint32_t *value, int world, ct_error *err) {
  int64_t v = *value;
  CT_TRY(divide(l, "batch_size", &v, world, err));
  *value = (uint32_t)v;
  return CT_OK;
}

/* Divides the batch of layer l; *found is set when l has one. */
static ct_status divide_layer(Caffe__LayerParameter *l, int world, bool *found, ct_error *err) {
  const char *t = l->type ? l->type : "";
  uint32_t *batch = NULL;
  if (strcmp(t, "Data") == 0 && l->data_param) batch = &l->data_param->batch_size;
  else if (strcmp(t, "ImageData") == 0 && l->image_data_param) batch = &l->image_data_param->batch_size;
  else if (strcmp(t, "HDF5Data") == 0 && l->hdf5_data_param) batch = &l->hdf5_data_param->batch_size;
  else if (strcmp(t, "MemoryData") == 0 && l->memory_data_param) batch = &l->memory_data_param->batch_size;
  else if (strcmp(t, "WindowData") == 0 && l->window_data_param) batch = &l->window_data_param->batch_size;
  if (batch) {
    *found = true;
    return divide_u32(l, batch, world, err);
  }
  Caffe__BlobShape **shapes = NULL;
  size_t nshapes = 0;
  if (strcmp(t, "DummyData") == 0 && l->dummy_data_param) {
    Caffe__DummyDataParameter *d = l->dummy_data_param;
    for (size_t i = 0; i < d->n_num; i++) {
      int64_t v = d->num[i];
      CT_TRY(divide(l, "num", &v, world, err));
      d->num[i] = (uint32_t)v;
      *found = true;
    }
    shapes = d->shape;
    nshapes = d->n_shape;
  } else if (strcmp(t, "Input") == 0 && l->input_param) {
    shapes = l->input_param->shape;
    nshapes = l->input_param->n_shape;
  }
  for (size_t i = 0; i < nshapes; i++) {
    if (shapes[i]->n_dim == 0) continue;
    CT_TRY(divide(l, "a first dimension of", &shapes[i]->dim[0], world, err));
    *found = true;
  }
  return CT_OK;
}

/* Divides the batch of every layer of np (sp's train net) that the train
 * net has: the net builder's include/exclude rule on sp's train state. */
static ct_status divide_train_net(const Caffe__SolverParameter *sp, Caffe__NetParameter *np,
                                  int world, bool *found, ct_error *err) {
  Caffe__NetState state;
  ct_solver_train_state(sp, np, &state);
  ct_status st = CT_OK;
  for (size_t i = 0; i < np->n_layer && st == CT_OK; i++)
    if (ct_net_state_includes(&state, np->layer[i]))
      st = divide_layer(np->layer[i], world, found, err);
  ct_net_state_clear(&state);
  return st;
}

ct_status ct_dp_divide_batch(Caffe__SolverParameter *sp, int world, ct_error *err) {
  CT_ASSERT(world >= 1);
  CT_TRY(ct_dp_inline_nets(sp, err));
  bool found = false;
  Caffe__NetParameter *np = sp->train_net_param ? sp->train_net_param : sp->net_param;
  if (np) CT_TRY(divide_train_net(sp, np, world, &found, err));
  if (!found)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--global_batch: the train net has no data layer with a batch size to divide");
  return CT_OK;
}
