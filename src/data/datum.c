/* Datum records: parse, check, view their pixels, and build them for tools. */
#include "data/datum.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *ct_datum_where(char *buf, size_t len, const void *key, size_t klen, const char *db_path) {
  const unsigned char *k = key;
  size_t o = (size_t)snprintf(buf, len, "record ");
  for (size_t i = 0; i < klen && o + 5 < len; i++)
    o += isprint(k[i]) ? (size_t)snprintf(buf + o, len - o, "%c", k[i])
                       : (size_t)snprintf(buf + o, len - o, "\\x%02x", k[i]);
  if (o < len) snprintf(buf + o, len - o, " of %s", db_path);
  return buf;
}

static const char *where_or(const char *where) { return where && where[0] ? where : "datum"; }

ct_status ct_datum_parse(const void *buf, size_t len, const char *where, Caffe__Datum **out,
                         ct_error *err) {
  *out = caffe__datum__unpack(NULL, len, buf);
  if (!*out)
    return ct_error_set(err, CT_ERR_PARSE, "%s: not a valid caffe.Datum (truncated or corrupt, %zu bytes)",
                        where_or(where), len);
  return CT_OK;
}

void ct_datum_free(Caffe__Datum *d) {
  if (d) caffe__datum__free_unpacked(d, NULL);
}

ct_status ct_datum_check(const Caffe__Datum *d, const char *where, ct_error *err) {
  where = where_or(where);
  if (d->encoded) {
    if (!d->has_data || d->data.len == 0)
      return ct_error_set(err, CT_ERR_INVALID, "%s: encoded but data is empty", where);
    return CT_OK;
  }
  if ((!d->has_data || d->data.len == 0) && d->n_float_data == 0)
    return ct_error_set(err, CT_ERR_INVALID, "%s: no pixels (data and float_data are both empty)",
                        where);
  if (d->channels <= 0 || d->height <= 0 || d->width <= 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: bad shape %dx%dx%d (channels, height and width must be positive)", where,
                        d->channels, d->height, d->width);
  unsigned long long want = (unsigned long long)d->channels * d->height * d->width;
  if (d->has_data && d->data.len > 0) {
    if (d->data.len != want)
      return ct_error_set(err, CT_ERR_INVALID, "%s: data has %zu bytes for shape %dx%dx%d = %llu",
                          where, d->data.len, d->channels, d->height, d->width, want);
  } else if (d->n_float_data != want) {
    return ct_error_set(err, CT_ERR_INVALID, "%s: float_data has %zu values for shape %dx%dx%d = %llu",
                        where, d->n_float_data, d->channels, d->height, d->width, want);
  }
  return CT_OK;
}

ct_status ct_datum_shape(const Caffe__Datum *d, ct_color_mode mode, int *c, int *h, int *w,
                         const char *where, ct_error *err) {
  CT_TRY(ct_datum_check(d, where, err));
  if (!d->encoded) {
    *c = d->channels;
    *h = d->height;
    *w = d->width;
    return CT_OK;
  }
  ct_status s = ct_image_probe(d->data.data, d->data.len, h, w, c, err);
  if (s != CT_OK) return ct_error_prefix(err, "%s", where_or(where));
  if (mode == CT_COLOR_FORCE_COLOR) *c = 3;
  if (mode == CT_COLOR_FORCE_GRAY) *c = 1;
  return CT_OK;
}

ct_status ct_datum_pixels(const Caffe__Datum *d, ct_color_mode mode, ct_image *scratch,
                          ct_pixels *out, const char *where, ct_error *err) {
  CT_TRY(ct_datum_check(d, where, err));
  if (!d->encoded) {
    if (d->has_data && d->data.len > 0)
      *out = ct_pixels_chw(CT_PIXEL_U8, d->data.data, d->channels, d->height, d->width);
    else
      *out = ct_pixels_chw(CT_PIXEL_F32, d->float_data, d->channels, d->height, d->width);
    return CT_OK;
  }
  ct_image_free(scratch);
  ct_status s = ct_image_decode(d->data.data, d->data.len, mode, scratch, err);
  if (s != CT_OK) return ct_error_prefix(err, "%s", where_or(where));
  *out = ct_pixels_hwc(CT_PIXEL_U8, scratch->data, scratch->c, scratch->h, scratch->w);
  return CT_OK;
}

ct_status ct_datum_to_float(const Caffe__Datum *d, ct_color_mode mode, float **out, int *c,
                            int *h, int *w, const char *where, ct_error *err) {
  *out = NULL;
  ct_image scratch = {0};
  ct_pixels px;
  ct_status s = ct_datum_pixels(d, mode, &scratch, &px, where, err);
  if (s != CT_OK) return s;
  float *v = ct_xcalloc((size_t)px.c * px.h * px.w, sizeof *v);
  for (int k = 0; k < px.c; k++)
    for (int y = 0; y < px.h; y++)
      for (int x = 0; x < px.w; x++) {
        ptrdiff_t i = k * px.cstride + y * px.ystride + x * px.xstride;
        v[((size_t)k * px.h + y) * px.w + x] = px.type == CT_PIXEL_U8
                                                   ? (float)((const uint8_t *)px.data)[i]
                                                   : ((const float *)px.data)[i];
      }
  ct_image_free(&scratch);
  *out = v;
  *c = px.c;
  *h = px.h;
  *w = px.w;
  return CT_OK;
}

/* ------------------------------------------------------------ encoding */
static void pack(const Caffe__Datum *d, uint8_t **buf, size_t *len) {
  *len = caffe__datum__get_packed_size(d);
  *buf = ct_xcalloc(*len + 1, 1);
  caffe__datum__pack(d, *buf);
}

static ct_status check_dims(int c, int h, int w, ct_error *err) {
  if (c <= 0 || h <= 0 || w <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "bad datum shape %dx%dx%d", c, h, w);
  return CT_OK;
}

ct_status ct_datum_encode_raw(const uint8_t *chw, int c, int h, int w, int label, uint8_t **buf,
                              size_t *len, ct_error *err) {
  *buf = NULL;
  *len = 0;
  CT_TRY(check_dims(c, h, w, err));
  Caffe__Datum d = CAFFE__DATUM__INIT;
  d.has_channels = d.has_height = d.has_width = d.has_label = d.has_data = 1;
  d.channels = c;
  d.height = h;
  d.width = w;
  d.label = label;
  d.data.data = (uint8_t *)chw;
  d.data.len = (size_t)c * h * w;
  pack(&d, buf, len);
  return CT_OK;
}

ct_status ct_datum_encode_image_raw(const ct_image *img, int label, uint8_t **buf, size_t *len,
                                    ct_error *err) {
  *buf = NULL;
  *len = 0;
  CT_TRY(check_dims(img->c, img->h, img->w, err));
  uint8_t *chw = ct_xcalloc((size_t)img->c * img->h * img->w, 1);
  ct_image_hwc_to_chw(img->data, img->h, img->w, img->c, chw);
  ct_status s = ct_datum_encode_raw(chw, img->c, img->h, img->w, label, buf, len, err);
  free(chw);
  return s;
}

ct_status ct_datum_encode_float(const float *chw, int c, int h, int w, int label, uint8_t **buf,
                                size_t *len, ct_error *err) {
  *buf = NULL;
  *len = 0;
  CT_TRY(check_dims(c, h, w, err));
  Caffe__Datum d = CAFFE__DATUM__INIT;
  d.has_channels = d.has_height = d.has_width = d.has_label = 1;
  d.channels = c;
  d.height = h;
  d.width = w;
  d.label = label;
  d.n_float_data = (size_t)c * h * w;
  d.float_data = (float *)chw;
  pack(&d, buf, len);
  return CT_OK;
}

ct_status ct_datum_encode_file_bytes(const void *file, size_t flen, int label, uint8_t **buf,
                                     size_t *len, ct_error *err) {
  *buf = NULL;
  *len = 0;
  if (ct_image_sniff(file, flen) == CT_IMAGE_UNKNOWN)
    return ct_error_set(err, CT_ERR_PARSE, "not a JPEG or PNG image (%zu bytes)", flen);
  Caffe__Datum d = CAFFE__DATUM__INIT;
  d.has_label = d.has_data = d.has_encoded = 1;
  d.label = label;
  d.encoded = 1;
  d.data.data = (uint8_t *)file;
  d.data.len = flen;
  pack(&d, buf, len);
  return CT_OK;
}

ct_status ct_datum_encode_image(const ct_image *img, ct_image_format format, int quality,
                                int label, uint8_t **buf, size_t *len, ct_error *err) {
  *buf = NULL;
  *len = 0;
  uint8_t *file;
  size_t flen;
  if (format == CT_IMAGE_JPEG)
    CT_TRY(ct_image_encode_jpeg(img, quality, &file, &flen, err));
  else if (format == CT_IMAGE_PNG)
    CT_TRY(ct_image_encode_png(img, -1, &file, &flen, err));
  else
    return ct_error_set(err, CT_ERR_INVALID, "unknown image format %d", (int)format);
  ct_status s = ct_datum_encode_file_bytes(file, flen, label, buf, len, err);
  free(file);
  return s;
}
