/* HDF5Data: rows of the datasets named after the tops (usually `data` and
 * `label`) from a list of .h5 files, batch_size rows per forward, one file
 * in memory at a time (as Caffe).  Every dataset of a file has the same
 * number of rows (its first axis); top k has shape (batch_size, dims[1:]).
 *
 * Rows form the same stream as the prefetching layers (pipeline.h): pass e
 * visits the files in order (shuffle: a permutation drawn from (seed, e)) and
 * each file's rows in order (shuffle: a permutation drawn from (seed, file,
 * e)); worker `rank` of `world` takes stream positions g % world == rank in
 * the TRAIN phase.  The position can be saved and restored. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/log.h"
#include "core/mem.h"
#include "data/pipeline.h"
#include "layers/layer.h"

#define H5_MAX_TOPS 8

typedef struct h5_priv {
  char *list_path;
  char **files;        /* (nfiles) */
  size_t *rows;        /* (nfiles) rows per file */
  size_t nfiles, total;
  int ntops, batch;
  int ndims[H5_MAX_TOPS];
  hsize_t dims[H5_MAX_TOPS][CT_MAX_AXES]; /* of the first file; dims[k][0] unused */
  size_t row_size[H5_MAX_TOPS];           /* values per row of top k */
  bool shuffle;
  int rank, world;
  uint64_t seed, base_g, taken; /* rows taken by this worker since base_g */
  /* the file in memory */
  size_t loaded;       /* file index, or SIZE_MAX */
  float *values[H5_MAX_TOPS]; /* (rows, row_size) */
  /* the pass whose orders are cached */
  uint64_t order_epoch;
  bool have_order;
  uint32_t *file_order;       /* (nfiles) */
  uint64_t row_order_key;     /* (epoch, file) of row_order */
  bool have_row_order;
  uint32_t *row_order;        /* (rows of that file) */
  float *staging[H5_MAX_TOPS]; /* (batch, row_size) host, for GPU tops */
} h5_priv;

static void free_loaded(h5_priv *p) {
  for (int k = 0; k < p->ntops; k++) {
    free(p->values[k]);
    p->values[k] = NULL;
  }
  p->loaded = SIZE_MAX;
}

static void h5_destroy(ct_layer *l) {
  h5_priv *p = l->priv;
  if (!p) return;
  free_loaded(p);
  for (size_t i = 0; i < p->nfiles; i++) free(p->files[i]);
  for (int k = 0; k < H5_MAX_TOPS; k++) free(p->staging[k]);
  free(p->files);
  free(p->rows);
  free(p->file_order);
  free(p->row_order);
  free(p->list_path);
  free(p);
  l->priv = NULL;
}

/* Opens dataset `name` of an open file and reads its shape. */
static ct_status dataset_shape(hid_t file, const char *path, const char *name, int *ndims,
                               hsize_t *dims, ct_error *err) {
  hid_t ds;
  H5E_BEGIN_TRY { ds = H5Dopen2(file, name, H5P_DEFAULT); }
  H5E_END_TRY;
  if (ds < 0) return ct_error_set(err, CT_ERR_NOTFOUND, "%s: no dataset '%s'", path, name);
  hid_t space = H5Dget_space(ds);
  hid_t type = H5Dget_type(ds);
  H5T_class_t cls = H5Tget_class(type);
  int nd = H5Sget_simple_extent_ndims(space);
  ct_status s = CT_OK;
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    s = ct_error_set(err, CT_ERR_INVALID, "%s: dataset '%s' is not numeric (float or integer)", path,
                     name);
  else if (nd < 1 || nd > CT_MAX_AXES)
    s = ct_error_set(err, CT_ERR_INVALID, "%s: dataset '%s' has %d axes (1 to %d)", path, name, nd,
                     CT_MAX_AXES);
  else
    H5Sget_simple_extent_dims(space, dims, NULL);
  *ndims = nd;
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(ds);
  return s;
}

static ct_status open_file(const char *path, hid_t *file, ct_error *err) {
  H5E_BEGIN_TRY { *file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); }
  H5E_END_TRY;
  if (*file < 0) return ct_error_set(err, CT_ERR_IO, "%s: cannot open as HDF5", path);
  return CT_OK;
}

/* Reads every file's shapes: same row count across a file's datasets, and
 * the same row shape as the first file. */
static ct_status scan_files(h5_priv *p, const ct_layer *l, ct_error *err) {
  for (size_t f = 0; f < p->nfiles; f++) {
    hid_t file;
    CT_TRY(open_file(p->files[f], &file, err));
    ct_status s = CT_OK;
    for (int k = 0; k < p->ntops && s == CT_OK; k++) {
      const char *name = l->param->top[k];
      int nd = 0;
      hsize_t dims[CT_MAX_AXES] = {0};
      s = dataset_shape(file, p->files[f], name, &nd, dims, err);
      if (s != CT_OK) break;
      if (k == 0) p->rows[f] = (size_t)dims[0];
      if ((size_t)dims[0] != p->rows[f])
        s = ct_error_set(err, CT_ERR_INVALID, "%s: dataset '%s' has %llu rows, '%s' has %zu",
                         p->files[f], name, (unsigned long long)dims[0], l->param->top[0], p->rows[f]);
      else if (f == 0) {
        p->ndims[k] = nd;
        memcpy(p->dims[k], dims, sizeof dims);
      } else if (nd != p->ndims[k] || memcmp(dims + 1, p->dims[k] + 1, (nd - 1) * sizeof *dims))
        s = ct_error_set(err, CT_ERR_INVALID,
                         "%s: dataset '%s' rows differ in shape from those of %s", p->files[f], name,
                         p->files[0]);
    }
    H5Fclose(file);
    CT_TRY(s);
    if (p->rows[f] == 0)
      return ct_error_set(err, CT_ERR_INVALID, "%s: the datasets have no rows", p->files[f]);
    p->total += p->rows[f];
  }
  return CT_OK;
}

static ct_status load_file(h5_priv *p, const ct_layer *l, size_t f, ct_error *err) {
  free_loaded(p);
  hid_t file;
  CT_TRY(open_file(p->files[f], &file, err));
  ct_status s = CT_OK;
  for (int k = 0; k < p->ntops && s == CT_OK; k++) {
    p->values[k] = ct_xcalloc(p->rows[f] * p->row_size[k] + 1, sizeof(float));
    hid_t ds;
    H5E_BEGIN_TRY { ds = H5Dopen2(file, l->param->top[k], H5P_DEFAULT); }
    H5E_END_TRY;
    herr_t rc = -1;
    if (ds >= 0) {
      H5E_BEGIN_TRY { rc = H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, p->values[k]); }
      H5E_END_TRY;
      H5Dclose(ds);
    }
    if (rc < 0)
      s = ct_error_set(err, CT_ERR_IO, "%s: reading dataset '%s' failed", p->files[f],
                       l->param->top[k]);
  }
  H5Fclose(file);
  if (s != CT_OK) {
    free_loaded(p);
    return s;
  }
  p->loaded = f;
  return CT_OK;
}

/* File and row of stream position g. */
static void locate(h5_priv *p, uint64_t g, size_t *file, size_t *row) {
  uint64_t epoch = g / p->total;
  size_t j = (size_t)(g % p->total);
  if (!p->have_order || p->order_epoch != epoch) {
    ct_pipeline_permutation(p->seed, epoch, p->shuffle, p->nfiles, p->file_order);
    p->order_epoch = epoch;
    p->have_order = true;
  }
  size_t i = 0;
  while (j >= p->rows[p->file_order[i]]) j -= p->rows[p->file_order[i++]];
  size_t f = p->file_order[i];
  uint64_t key = epoch * p->nfiles + f;
  if (!p->have_row_order || p->row_order_key != key) {
    p->row_order = ct_xrealloc(p->row_order, p->rows[f] * sizeof *p->row_order);
    ct_pipeline_permutation(p->seed ^ (0x9E3779B97F4A7C15ull * (f + 1)), epoch, p->shuffle, p->rows[f],
                            p->row_order);
    p->row_order_key = key;
    p->have_row_order = true;
  }
  *file = f;
  *row = p->row_order[j];
}

static ct_status read_list(h5_priv *p, const char *list, ct_error *err) {
  char *text;
  size_t len;
  CT_TRY(ct_file_read_all(list, &text, &len, (size_t)1 << 30, err));
  size_t cap = 0;
  for (char *tok = strtok(text, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
    if (p->nfiles == cap) {
      cap = cap ? 2 * cap : 16;
      p->files = ct_xrealloc(p->files, cap * sizeof *p->files);
    }
    p->files[p->nfiles++] = ct_xstrdup(tok);
  }
  free(text);
  if (p->nfiles == 0) return ct_error_set(err, CT_ERR_INVALID, "%s: lists no HDF5 files", list);
  p->rows = ct_xcalloc(p->nfiles, sizeof *p->rows);
  p->file_order = ct_xcalloc(p->nfiles, sizeof *p->file_order);
  return CT_OK;
}

static void shape_tops(const h5_priv *p, ct_tensor *const *top) {
  for (int k = 0; k < p->ntops; k++) {
    int shape[CT_MAX_AXES];
    shape[0] = p->batch;
    for (int d = 1; d < p->ndims[k]; d++) shape[d] = (int)p->dims[k][d];
    ct_tensor_reshape_or_die(top[k], p->ndims[k], shape);
  }
}

static ct_status h5_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                          ct_error *err) {
  const Caffe__HDF5DataParameter *hp = l->param->hdf5_data_param;
  if (!hp || !hp->source || !hp->source[0])
    return ct_error_set(err, CT_ERR_INVALID, "hdf5_data_param.source must be given");
  if (!hp->has_batch_size || hp->batch_size == 0)
    return ct_error_set(err, CT_ERR_INVALID, "hdf5_data_param.batch_size must be positive");
  if (l->ntop > H5_MAX_TOPS)
    return ct_error_set(err, CT_ERR_INVALID, "at most %d tops", H5_MAX_TOPS);
  h5_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->loaded = SIZE_MAX;
  p->ntops = l->ntop;
  p->batch = (int)hp->batch_size;
  p->shuffle = hp->shuffle;
  p->seed = l->ctx->data_seed;
  bool shard = l->phase == CT_PHASE_TRAIN && l->ctx->world > 1;
  p->rank = shard ? l->ctx->rank : 0;
  p->world = shard ? l->ctx->world : 1;
  p->list_path = ct_xstrdup(hp->source);
  CT_TRY(read_list(p, hp->source, err));
  ct_status s = scan_files(p, l, err);
  if (s != CT_OK) return ct_error_prefix(err, "%s", hp->source);
  for (int k = 0; k < p->ntops; k++) {
    p->row_size[k] = 1;
    for (int d = 1; d < p->ndims[k]; d++) p->row_size[k] *= (size_t)p->dims[k][d];
    p->staging[k] = ct_xcalloc((size_t)p->batch * p->row_size[k] + 1, sizeof(float));
  }
  shape_tops(p, top);
  LOG_INFO("layer %s: %zu HDF5 files, %zu rows", l->name, p->nfiles, p->total);
  return CT_OK;
}

static ct_status h5_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  shape_tops(l->priv, top);
  return CT_OK;
}

static ct_status h5_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  h5_priv *p = l->priv;
  for (int i = 0; i < p->batch; i++) {
    uint64_t g = p->base_g + (p->taken + i) * p->world + p->rank;
    size_t f, row;
    locate(p, g, &f, &row);
    if (f != p->loaded) {
      ct_status s = load_file(p, l, f, err);
      if (s != CT_OK) return ct_error_prefix(err, "%s", p->list_path);
    }
    for (int k = 0; k < p->ntops; k++)
      memcpy(p->staging[k] + (size_t)i * p->row_size[k], p->values[k] + row * p->row_size[k],
             p->row_size[k] * sizeof(float));
  }
  p->taken += (uint64_t)p->batch;
  for (int k = 0; k < p->ntops; k++)
    ct_mem_copy(top[k]->device, top[k]->data, CT_DEVICE_CPU, p->staging[k],
                (size_t)p->batch * p->row_size[k] * sizeof(float));
  return CT_OK;
}

static ct_status h5_get_position(ct_layer *l, Caffe__CortadoDataPosition *pos) {
  h5_priv *p = l->priv;
  uint64_t g = p->base_g + p->taken * p->world;
  ct_data_position dp = {g / p->total, g % p->total, p->seed};
  ct_data_position_to_proto(&dp, l->name, pos);
  return CT_OK;
}

static ct_status h5_set_position(ct_layer *l, const Caffe__CortadoDataPosition *pos,
                                 ct_error *err) {
  h5_priv *p = l->priv;
  ct_data_position dp;
  ct_data_position_from_proto(pos, &dp);
  if (dp.cursor >= p->total)
    return ct_error_set(err, CT_ERR_INVALID,
                        "data position cursor %llu is past the %zu rows of an epoch",
                        (unsigned long long)dp.cursor, p->total);
  if (dp.epoch > (UINT64_MAX - dp.cursor) / p->total)
    return ct_error_set(err, CT_ERR_INVALID,
                        "data position epoch %llu is beyond any run (%zu rows an epoch)",
                        (unsigned long long)dp.epoch, p->total);
  p->seed = dp.seed;
  p->base_g = dp.epoch * p->total + dp.cursor;
  p->taken = 0;
  p->have_order = p->have_row_order = false;
  return CT_OK;
}

const ct_layer_ops ct_hdf5_data_ops = {
    .type = "HDF5Data",
    .min_bottoms = 0, .max_bottoms = 0, .min_tops = 1, .max_tops = H5_MAX_TOPS,
    .flags = CT_LAYER_DATA | CT_LAYER_NO_BACKWARD,
    .setup = h5_setup,
    .reshape = h5_reshape,
    .forward_cpu = h5_forward,
    .forward_gpu = h5_forward,
    .destroy = h5_destroy,
    .get_position = h5_get_position,
    .set_position = h5_set_position,
};
