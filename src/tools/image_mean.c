#include "tools/image_mean.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "core/fileio.h"
#include "core/log.h"
#include "data/datum.h"
#include "data/image.h"
#include "data/transform.h"
#include "tools/tools_common.h"

void ct_image_mean_free(ct_image_mean *m) {
  if (!m) return;
  free(m->data);
  memset(m, 0, sizeof *m);
}

/* Adds the pixels of one view into sum (c x h x w, CHW). */
static void accumulate(const ct_pixels *px, double *sum) {
  size_t i = 0;
  for (int c = 0; c < px->c; c++)
    for (int y = 0; y < px->h; y++)
      for (int x = 0; x < px->w; x++, i++) {
        ptrdiff_t at = c * px->cstride + y * px->ystride + x * px->xstride;
        sum[i] += px->type == CT_PIXEL_U8 ? (double)((const uint8_t *)px->data)[at]
                                          : (double)((const float *)px->data)[at];
      }
}

/* Parses one record and adds it to the running sum, which is allocated on
 * the first record (setting the shape in *m). */
static ct_status add_record(const ct_db *db, const void *key, size_t klen, const void *val,
                            size_t vlen, ct_image_mean *m, double **sum, ct_image *scratch,
                            ct_error *err) {
  char where[600];
  ct_datum_where(where, sizeof where, key, klen, ct_db_path(db));
  Caffe__Datum *d;
  CT_TRY(ct_datum_parse(val, vlen, where, &d, err));
  ct_pixels px;
  ct_status st = ct_datum_pixels(d, CT_COLOR_NATIVE, scratch, &px, where, err);
  if (st == CT_OK) {
    if (!*sum) {
      if (d->has_encoded && d->encoded) LOG_INFO("Decoding Datum");
      m->channels = px.c, m->height = px.h, m->width = px.w;
      *sum = ct_xcalloc((size_t)px.c * px.h * px.w, sizeof **sum);
    } else if (px.c != m->channels || px.h != m->height || px.w != m->width) {
      st = ct_error_set(err, CT_ERR_INVALID,
                        "%s: shape %dx%dx%d differs from the first record's %dx%dx%d", where,
                        px.c, px.h, px.w, m->channels, m->height, m->width);
    }
  }
  if (st == CT_OK) accumulate(&px, *sum);
  ct_datum_free(d);
  return st;
}

ct_status ct_compute_image_mean(const char *db_path, ct_db_backend backend, ct_image_mean *out,
                                ct_error *err) {
  memset(out, 0, sizeof *out);
  ct_db *db;
  CT_TRY(ct_db_open(&db, db_path, backend, CT_DB_READ, err));
  ct_db_cursor *cur = NULL;
  ct_status st = ct_db_cursor_open(db, &cur, err);
  ct_image_mean m = {0};
  double *sum = NULL;
  ct_image scratch = {0};
  if (st == CT_OK) LOG_INFO("Starting iteration");
  for (st = st == CT_OK ? ct_db_cursor_first(cur, err) : st;
       st == CT_OK && ct_db_cursor_valid(cur); st = ct_db_cursor_next(cur, err)) {
    size_t klen, vlen;
    const void *key = ct_db_cursor_key(cur, &klen);
    const void *val = ct_db_cursor_value(cur, &vlen);
    if ((st = add_record(db, key, klen, val, vlen, &m, &sum, &scratch, err)) != CT_OK) break;
    if (++m.count % CT_TOOLS_PROGRESS_EVERY_BULK == 0) LOG_INFO("Processed %zu files.", m.count);
  }
  if (st == CT_OK && m.count == 0)
    st = ct_error_set(err, CT_ERR_INVALID, "%s: the database is empty", db_path);
  if (st == CT_OK) {
    if (m.count % CT_TOOLS_PROGRESS_EVERY_BULK != 0) LOG_INFO("Processed %zu files.", m.count);
    size_t n = (size_t)m.channels * m.height * m.width;
    m.data = ct_xcalloc(n, sizeof *m.data);
    /* Divided in float, as Caffe does, so that exact sums give Caffe's bits. */
    for (size_t i = 0; i < n; i++) m.data[i] = (float)sum[i] / (float)m.count;
    *out = m;
  }
  free(sum);
  ct_image_free(&scratch);
  ct_db_cursor_close(cur);
  ct_db_close(db);
  return st;
}

double ct_image_mean_channel(const ct_image_mean *m, int c) {
  size_t dim = (size_t)m->height * m->width;
  double s = 0;
  for (size_t i = 0; i < dim; i++) s += m->data[(size_t)c * dim + i];
  return s / (double)dim;
}

ct_status ct_image_mean_write_binaryproto(const ct_image_mean *m, const char *path,
                                          ct_error *err) {
  Caffe__BlobProto blob = CAFFE__BLOB_PROTO__INIT;
  blob.has_num = blob.has_channels = blob.has_height = blob.has_width = 1;
  blob.num = 1;
  blob.channels = m->channels;
  blob.height = m->height;
  blob.width = m->width;
  blob.n_data = (size_t)m->channels * m->height * m->width;
  blob.data = m->data;
  size_t len = caffe__blob_proto__get_packed_size(&blob);
  uint8_t *buf = ct_xcalloc(len ? len : 1, 1);
  caffe__blob_proto__pack(&blob, buf);
  ct_status st = ct_file_write_atomic(path, buf, len, err);
  free(buf);
  return st;
}
