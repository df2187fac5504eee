/* cortado.h: blobs, and their host copies on a GPU (see api_internal.h). */
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "core/mem.h"

void api_blob_init(cortado_blob *b, ct_tensor *t, cortado_net *net) {
  memset(b, 0, sizeof *b);
  b->t = t;
  b->net = net;
}

void api_blob_release(cortado_blob *b) {
  for (int k = 0; k < 2; k++) {
    if (b->copy[k].host) ct_mem_free_pinned(b->copy[k].host);
    b->copy[k].host = NULL;
    b->copy[k].capacity = 0;
  }
}

static bool on_host(const cortado_blob *b) { return b->t->device == CT_DEVICE_CPU; }

/* The tensor's array k (0 data, 1 diff), made when the diff is missing. */
static float *device_array(cortado_blob *b, int k) {
  if (k == 0) return b->t->data;
  if (!b->t->diff) {
    ct_tensor_need_diff(b->t);
    if (b->t->diff && b->t->owns_diff) ct_tensor_zero_diff(b->t);
  }
  return b->t->diff;
}

/* The host copy of array k, as large as the tensor; stale when it grew. */
static api_host_copy *sized_copy(cortado_blob *b, int k) {
  api_host_copy *c = &b->copy[k];
  size_t n = b->t->count;
  if (c->capacity < n || !c->host) {
    if (c->host) ct_mem_free_pinned(c->host);
    c->capacity = n > 0 ? n : 1;
    c->host = ct_mem_alloc_pinned(c->capacity * sizeof(float));
    c->state = API_SYNC_DEVICE;
  }
  return c;
}

/* Whether the tensor's values are other than float32 in the logical order:
 * its host copy is then converted (core/tensor.h's upload and download). */
static bool converted(const cortado_blob *b) {
  return b->t->dtype != CT_F32 || b->t->layout != CT_NCHW;
}

static float *host_array(cortado_blob *b, int k) {
  float *dev = device_array(b, k);
  if (!dev || (on_host(b) && !converted(b))) return dev;
  api_host_copy *c = sized_copy(b, k);
  if (c->state == API_SYNC_DEVICE && b->t->count > 0) {
    if (!converted(b)) ct_mem_copy(CT_DEVICE_CPU, c->host, b->t->device, dev, b->t->count * sizeof(float));
    else if (k == 0) ct_tensor_download(b->t, c->host);
    else ct_tensor_download_diff(b->t, c->host);
  }
  c->state = API_SYNC_HOST; /* the caller may write: the device's turn comes at the next flush */
  return c->host;
}

static void flush_array(cortado_blob *b, int k) {
  api_host_copy *c = &b->copy[k];
  if (c->state != API_SYNC_HOST) return;
  float *dev = device_array(b, k);
  size_t n = b->t->count <= c->capacity ? b->t->count : c->capacity;
  if (n > 0 && converted(b) && n == b->t->count) {
    if (k == 0) ct_tensor_upload(b->t, c->host);
    else ct_tensor_upload_diff(b->t, c->host);
  } else if (n > 0) {
    ct_mem_copy(b->t->device, dev, CT_DEVICE_CPU, c->host, n * sizeof(float));
  }
  c->state = API_SYNC_BOTH;
}

static float *dev_array_synced(cortado_blob *b, int k) {
  float *dev = device_array(b, k);
  if (!dev || (on_host(b) && !converted(b))) return dev;
  flush_array(b, k);
  if (b->copy[k].host) b->copy[k].state = API_SYNC_DEVICE; /* the caller may write the device's */
  return dev;
}

void api_blob_flush(cortado_blob *b) {
  if (on_host(b) && !converted(b)) return;
  flush_array(b, 0);
  flush_array(b, 1);
}

void api_blob_touched(cortado_blob *b) {
  if (on_host(b) && !converted(b)) return;
  for (int k = 0; k < 2; k++)
    if (b->copy[k].host) b->copy[k].state = API_SYNC_DEVICE;
}

const char *cortado_blob_name(const cortado_blob *b) { return b->t->name ? b->t->name : ""; }
int cortado_blob_num_axes(const cortado_blob *b) { return b->t->ndim; }
const int *cortado_blob_shape(const cortado_blob *b) { return b->t->shape; }
size_t cortado_blob_count(const cortado_blob *b) { return b->t->count; }
int cortado_blob_device(const cortado_blob *b) { return b->t->device; }

float *cortado_blob_host_data(cortado_blob *b) { return host_array(b, 0); }
float *cortado_blob_host_diff(cortado_blob *b) { return host_array(b, 1); }
float *cortado_blob_device_data(cortado_blob *b) { return dev_array_synced(b, 0); }
float *cortado_blob_device_diff(cortado_blob *b) { return dev_array_synced(b, 1); }

cortado_status cortado_blob_reshape(cortado_blob *b, int num_axes, const int *shape) {
  ct_error err;
  ct_tensor *t = b->t;
  if (num_axes < 0 || num_axes > CT_MAX_AXES)
    return cortado_set_error(CORTADO_ERR_INVALID, "blob '%s': %d axes (at most %d)", cortado_blob_name(b),
                             num_axes, CT_MAX_AXES);
  size_t count = 1;
  for (int i = 0; i < num_axes; i++) {
    if (shape[i] < 0)
      return cortado_set_error(CORTADO_ERR_INVALID, "blob '%s': axis %d is %d (negative)",
                               cortado_blob_name(b), i, shape[i]);
    count *= (size_t)shape[i];
  }
  /* A parameter is a view into its net's flat buffers (and a diff may be
   * a view too): it can take any shape of no more values. */
  if ((!t->owns_data && t->data && count > t->capacity) ||
      (t->diff && !t->owns_diff && count > t->capacity))
    return cortado_set_error(CORTADO_ERR_UNSUPPORTED,
                             "blob '%s' views memory it does not own (a learnable parameter): it "
                             "cannot grow from %zu to %zu values",
                             cortado_blob_name(b), t->count, count);
  if (ct_tensor_reshape(t, num_axes, shape, &err) != CT_OK) return api_fail(&err);
  for (int k = 0; k < 2; k++)
    if (b->copy[k].host) b->copy[k].state = API_SYNC_DEVICE;
  if (b->net) b->net->shapes_dirty = true;
  return CORTADO_OK;
}
