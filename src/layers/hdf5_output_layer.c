/* HDF5Output: Caffe's HDF5OutputLayer, which writes its two bottoms to an
 * HDF5 file as the datasets "data" and "label" (float), one row per item.
 *
 * As in Caffe, the file hdf5_output_param.file_name is created (truncated)
 * when the layer is set up and closed when it is freed, and each dataset
 * takes its bottom's legacy 4-D shape (num, channels, height, width; a
 * bottom of more axes keeps its own shape).  One forward pass gives Caffe's
 * file exactly.  Caffe fails on the second pass (the datasets exist);
 * here each pass appends its rows, so `cortado test` over many iterations
 * collects every batch: the datasets are chunked with an unlimited first
 * axis, and the file is flushed after each pass so that it can be read
 * while the run goes on.  Later passes must keep the row shape.
 *
 * In a data-parallel run every worker writes its own file: worker r > 0
 * inserts "_rank<r>" before the extension.  No backward (as Caffe); on a
 * GPU the forward reads the bottoms back to the host, so it is never
 * captured into a CUDA graph. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "layers/layer.h"

static const char *const k_names[2] = {"data", "label"};

typedef struct h5out_priv {
  char *path;
  hid_t file;
  hid_t ds[2];        /* the datasets once the first pass made them, else -1 */
  int ndims[2];
  hsize_t dims[2][CT_MAX_AXES]; /* current extent; dims[k][0] grows */
  float *host;        /* staging for a GPU bottom */
  size_t host_count;
} h5out_priv;

static void h5out_destroy(ct_layer *l) {
  h5out_priv *p = l->priv;
  if (!p) return;
  for (int k = 0; k < 2; k++)
    if (p->ds[k] >= 0) H5Dclose(p->ds[k]);
  if (p->file >= 0 && H5Fclose(p->file) < 0) LOG_ERROR("%s: closing the HDF5 file failed", p->path);
  free(p->host);
  free(p->path);
  free(p);
  l->priv = NULL;
}

/* file_name, with "_rank<r>" before the extension on worker r > 0. */
static char *output_path(const char *name, const ct_context *ctx) {
  if (ctx->world <= 1 || ctx->rank == 0) return ct_xstrdup(name);
  const char *slash = strrchr(name, '/'), *dot = strrchr(name, '.');
  size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - name) : strlen(name);
  size_t n = strlen(name) + 32;
  char *out = ct_xcalloc(n, 1);
  snprintf(out, n, "%.*s_rank%d%s", (int)stem, name, ctx->rank, name + stem);
  return out;
}

static ct_status h5out_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__HDF5OutputParameter *hp = l->param->hdf5_output_param;
  h5out_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->file = p->ds[0] = p->ds[1] = -1;
  if (!hp || !hp->file_name || !hp->file_name[0])
    return ct_error_set(err, CT_ERR_INVALID, "hdf5_output_param.file_name must be given");
  p->path = output_path(hp->file_name, l->ctx);
  H5E_BEGIN_TRY { p->file = H5Fcreate(p->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }
  H5E_END_TRY;
  if (p->file < 0)
    return ct_error_set(err, CT_ERR_IO, "%s: cannot create the HDF5 file (hdf5_output_param.file_name)",
                        p->path);
  return CT_OK;
}

/* The shape Caffe writes for a bottom: its legacy num x channels x height x
 * width (1 for missing axes) up to 4 axes, else its own. */
static int stored_shape(const ct_tensor *t, hsize_t *dims) {
  const int nd = t->ndim > 4 ? t->ndim : 4;
  for (int i = 0; i < nd; i++) dims[i] = (hsize_t)ct_tensor_legacy_dim(t, i);
  return nd;
}

static ct_status h5out_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  h5out_priv *p = l->priv;
  char b0[128], b1[128];
  const int n0 = ct_tensor_legacy_dim(bottom[0], 0), n1 = ct_tensor_legacy_dim(bottom[1], 0);
  if (n0 != n1)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the data (%s) and the label (%s) must have the same number of rows",
                        ct_tensor_shape_string(bottom[0], b0, sizeof b0),
                        ct_tensor_shape_string(bottom[1], b1, sizeof b1));
  for (int k = 0; k < 2; k++) {
    if (p->ds[k] < 0) continue;
    hsize_t dims[CT_MAX_AXES];
    const int nd = stored_shape(bottom[k], dims);
    bool same = nd == p->ndims[k];
    for (int i = 1; same && i < nd; i++) same = dims[i] == p->dims[k][i];
    if (!same)
      return ct_error_set(err, CT_ERR_INVALID,
                          "bottom %d (%s) no longer has the row shape of the dataset '%s' in %s",
                          k, ct_tensor_shape_string(bottom[k], b0, sizeof b0), k_names[k], p->path);
  }
  if (l->ctx->device != CT_DEVICE_CPU) {
    size_t need = bottom[0]->count > bottom[1]->count ? bottom[0]->count : bottom[1]->count;
    if (need > p->host_count) {
      free(p->host);
      p->host = ct_xcalloc(need, sizeof *p->host);
      p->host_count = need;
    }
  }
  return CT_OK;
}

/* Creates dataset k (chunked, unlimited rows) for rows of shape dims[1..nd). */
static ct_status create_dataset(h5out_priv *p, int k, int nd, const hsize_t *dims, ct_error *err) {
  hsize_t zero[CT_MAX_AXES], maxd[CT_MAX_AXES], chunk[CT_MAX_AXES];
  size_t row = 1;
  for (int i = 0; i < nd; i++) {
    zero[i] = i == 0 ? 0 : dims[i];
    maxd[i] = i == 0 ? H5S_UNLIMITED : dims[i];
    chunk[i] = dims[i] ? dims[i] : 1;
    if (i > 0) row *= chunk[i];
  }
  /* about 1 MiB per chunk, at least one row */
  hsize_t rows = (hsize_t)((1u << 18) / (row ? row : 1));
  chunk[0] = rows < 1 ? 1 : rows > chunk[0] ? chunk[0] : rows;
  hid_t space = H5Screate_simple(nd, zero, maxd);
  hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
  hid_t ds = -1;
  if (space >= 0 && plist >= 0 && H5Pset_chunk(plist, nd, chunk) >= 0) {
    H5E_BEGIN_TRY {
      ds = H5Dcreate2(p->file, k_names[k], H5T_NATIVE_FLOAT, space, H5P_DEFAULT, plist, H5P_DEFAULT);
    }
    H5E_END_TRY;
  }
  if (plist >= 0) H5Pclose(plist);
  if (space >= 0) H5Sclose(space);
  if (ds < 0)
    return ct_error_set(err, CT_ERR_IO, "%s: cannot create the dataset '%s'", p->path, k_names[k]);
  p->ds[k] = ds;
  p->ndims[k] = nd;
  memcpy(p->dims[k], zero, sizeof zero);
  return CT_OK;
}

/* Appends the rows of values (shape dims) to dataset k. */
static ct_status append_rows(h5out_priv *p, int k, const hsize_t *dims, const float *values,
                             ct_error *err) {
  const int nd = p->ndims[k];
  hsize_t start[CT_MAX_AXES] = {0}, grown[CT_MAX_AXES];
  memcpy(grown, p->dims[k], sizeof grown);
  start[0] = p->dims[k][0];
  grown[0] += dims[0];
  herr_t rc = -1;
  H5E_BEGIN_TRY {
    if (H5Dset_extent(p->ds[k], grown) >= 0) {
      hid_t fspace = H5Dget_space(p->ds[k]);
      hid_t mspace = H5Screate_simple(nd, dims, NULL);
      if (fspace >= 0 && mspace >= 0 &&
          H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, dims, NULL) >= 0)
        rc = H5Dwrite(p->ds[k], H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, values);
      if (mspace >= 0) H5Sclose(mspace);
      if (fspace >= 0) H5Sclose(fspace);
    }
  }
  H5E_END_TRY;
  if (rc < 0)
    return ct_error_set(err, CT_ERR_IO, "%s: writing %llu rows to the dataset '%s' failed", p->path,
                        (unsigned long long)dims[0], k_names[k]);
  p->dims[k][0] = grown[0];
  return CT_OK;
}

static ct_status h5out_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  h5out_priv *p = l->priv;
  for (int k = 0; k < 2; k++) {
    hsize_t dims[CT_MAX_AXES];
    const int nd = stored_shape(bottom[k], dims);
    if (p->ds[k] < 0) CT_TRY(create_dataset(p, k, nd, dims, err));
    const float *values = bottom[k]->data;
    if (l->ctx->device != CT_DEVICE_CPU) {
      ct_tensor_download(bottom[k], p->host);
      values = p->host;
    }
    CT_TRY(append_rows(p, k, dims, values, err));
  }
  if (H5Fflush(p->file, H5F_SCOPE_LOCAL) < 0)
    return ct_error_set(err, CT_ERR_IO, "%s: flushing the HDF5 file failed", p->path);
  LOG_INFO("layer %s: saved %llu rows to %s (%llu in all)", l->name,
           (unsigned long long)ct_tensor_legacy_dim(bottom[0], 0), p->path,
           (unsigned long long)p->dims[0][0]);
  return CT_OK;
}

const ct_layer_ops ct_hdf5_output_ops = {
    .type = "HDF5Output",
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 0, .max_tops = 0,
    .flags = CT_LAYER_NO_BACKWARD | CT_LAYER_HOST_WORK,
    .setup = h5out_setup,
    .reshape = h5out_reshape,
    .forward_cpu = h5out_forward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = h5out_forward,
#endif
    .destroy = h5out_destroy,
};
