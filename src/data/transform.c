/* Caffe's DataTransformer (crop, mirror, mean, scale) over a strided view of
 * one image.  See transform.h for the exact rules. */
#include "data/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"
#include "proto/io.h"

struct ct_transform {
  ct_phase phase;
  float scale;
  bool mirror;
  int crop;
  ct_color_mode color;
  char *mean_path;
  float *mean; /* (mean_c, mean_h, mean_w) or NULL */
  int mean_c, mean_h, mean_w;
  float *mean_values; /* (n_mean_values) or NULL */
  int n_mean_values;
  int resize_lo, resize_hi; /* img_rand_resize_lower / _upper (0: no resize) */
};

ct_pixels ct_pixels_chw(ct_pixel_type type, const void *data, int c, int h, int w) {
  ct_pixels p = {type, data, c, h, w, (ptrdiff_t)h * w, w, 1};
  return p;
}

ct_pixels ct_pixels_hwc(ct_pixel_type type, const void *data, int c, int h, int w) {
  ct_pixels p = {type, data, c, h, w, 1, (ptrdiff_t)w * c, c};
  return p;
}

static ct_status load_mean(ct_transform *t, const char *path, ct_error *err) {
  ProtobufCMessage *msg;
  CT_TRY(ct_proto_read_binary(&caffe__blob_proto__descriptor, path, &msg, err));
  const Caffe__BlobProto *b = (const Caffe__BlobProto *)msg;
  int64_t dims[8];
  int nd = ct_blob_proto_shape(b, dims, 8);
  char shape[128] = "";
  size_t o = 0;
  int64_t count = 1;
  for (int i = 0; i < nd && i < 8; i++) {
    o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", i ? "x" : "", (long long)dims[i]);
    count *= dims[i];
  }
  ct_status s = CT_OK;
  bool ok_shape = (nd == 4 && dims[0] == 1) || nd == 3;
  for (int i = 0; ok_shape && i < nd; i++) ok_shape = dims[i] > 0 && dims[i] <= 1 << 20;
  size_t have = b->n_data ? b->n_data : b->n_double_data;
  if (!ok_shape) {
    s = ct_error_set(err, CT_ERR_INVALID, "%s: mean_file must hold one image (1xCxHxW), got %s",
                     path, nd ? shape : "a scalar");
  } else if ((int64_t)have != count) {
    s = ct_error_set(err, CT_ERR_INVALID, "%s: mean_file holds %zu values for shape %s = %lld",
                     path, have, shape, (long long)count);
  } else {
    t->mean_c = (int)dims[nd - 3];
    t->mean_h = (int)dims[nd - 2];
    t->mean_w = (int)dims[nd - 1];
    t->mean = ct_xcalloc((size_t)count, sizeof *t->mean);
    for (int64_t i = 0; i < count; i++)
      t->mean[i] = b->n_data ? b->data[i] : (float)b->double_data[i];
    t->mean_path = ct_xstrdup(path);
  }
  protobuf_c_message_free_unpacked(msg, NULL);
  return s;
}

ct_status ct_transform_create(const Caffe__TransformationParameter *param, ct_phase phase,
                              ct_transform **out, ct_error *err) {
  static const Caffe__TransformationParameter k_default = CAFFE__TRANSFORMATION_PARAMETER__INIT;
  const Caffe__TransformationParameter *p = param ? param : &k_default;
  *out = NULL;
  bool has_mean_file = p->mean_file && p->mean_file[0];
  if (has_mean_file && p->n_mean_value)
    return ct_error_set(err, CT_ERR_INVALID, "cannot give both mean_file and mean_value");
  if (p->force_color && p->force_gray)
    return ct_error_set(err, CT_ERR_INVALID, "force_color and force_gray cannot both be set");
  const unsigned lo = p->img_rand_resize_lower, hi = p->img_rand_resize_upper;
  if ((lo == 0) != (hi == 0))
    return ct_error_set(err, CT_ERR_INVALID,
                        "img_rand_resize_lower %u and img_rand_resize_upper %u: give both or neither",
                        lo, hi);
  if (lo > 0 && hi < lo)
    return ct_error_set(err, CT_ERR_INVALID,
                        "img_rand_resize_upper %u is below img_rand_resize_lower %u", hi, lo);
  if (lo > 0 && hi > 65535)
    return ct_error_set(err, CT_ERR_INVALID, "img_rand_resize_upper %u is larger than 65535", hi);
  if (lo > 0 && p->crop_size == 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "img_rand_resize_lower/upper need crop_size: the resized images differ in "
                        "size, and a batch needs one");
  if (lo > 0 && has_mean_file)
    return ct_error_set(err, CT_ERR_INVALID,
                        "img_rand_resize_lower/upper with mean_file: the mean image has one size, "
                        "the resized images many (give mean_value)");
  ct_transform *t = ct_xcalloc(1, sizeof *t);
  t->phase = phase;
  t->scale = p->scale;
  t->mirror = p->mirror;
  t->crop = (int)p->crop_size;
  t->resize_lo = (int)lo;
  t->resize_hi = (int)hi;
  t->color = p->force_color ? CT_COLOR_FORCE_COLOR : p->force_gray ? CT_COLOR_FORCE_GRAY : CT_COLOR_NATIVE;
  if (has_mean_file) {
    ct_status s = load_mean(t, p->mean_file, err);
    if (s != CT_OK) {
      ct_transform_free(t);
      return s;
    }
  }
  if (p->n_mean_value) {
    t->n_mean_values = (int)p->n_mean_value;
    t->mean_values = ct_xcalloc(p->n_mean_value, sizeof *t->mean_values);
    memcpy(t->mean_values, p->mean_value, p->n_mean_value * sizeof *t->mean_values);
  }
  *out = t;
  return CT_OK;
}

void ct_transform_free(ct_transform *t) {
  if (!t) return;
  free(t->mean);
  free(t->mean_path);
  free(t->mean_values);
  free(t);
}

ct_color_mode ct_transform_color_mode(const ct_transform *t) { return t->color; }
int ct_transform_crop_size(const ct_transform *t) { return t->crop; }

const float *ct_transform_mean_file(const ct_transform *t, int *c, int *h, int *w) {
  *c = t->mean_c;
  *h = t->mean_h;
  *w = t->mean_w;
  return t->mean;
}

const float *ct_transform_mean_values(const ct_transform *t, int *n) {
  *n = t->n_mean_values;
  return t->mean_values;
}

static const char *where_or(const char *where) { return where && where[0] ? where : "image"; }

ct_status ct_transform_output_shape(const ct_transform *t, int c, int h, int w, int *oc, int *oh,
                                    int *ow, const char *where, ct_error *err) {
  /* (a randomly resized image is at least crop_size on each side) */
  if (t->crop > 0 && !t->resize_lo && (t->crop > h || t->crop > w))
    return ct_error_set(err, CT_ERR_INVALID, "%s: crop_size %d is larger than the image %dx%dx%d",
                        where_or(where), t->crop, c, h, w);
  if (t->mean && (c != t->mean_c || h != t->mean_h || w != t->mean_w))
    return ct_error_set(err, CT_ERR_INVALID, "%s: image %dx%dx%d does not match mean_file %s (%dx%dx%d)",
                        where_or(where), c, h, w, t->mean_path, t->mean_c, t->mean_h, t->mean_w);
  if (t->n_mean_values > 1 && t->n_mean_values != c)
    return ct_error_set(err, CT_ERR_INVALID, "%s: %d mean_value(s) for a %d-channel image (give 1 or %d)",
                        where_or(where), t->n_mean_values, c, c);
  *oc = c;
  *oh = t->crop > 0 ? t->crop : h;
  *ow = t->crop > 0 ? t->crop : w;
  return CT_OK;
}

/* NVCaffe's random resize of in into *img (allocated): the shorter side
 * becomes size, the other side keeps the aspect, rounded, each at least the
 * crop (OpenCV's INTER_LINEAR, ct_image_resize_bilinear). */
static ct_status random_resize(const ct_transform *t, const ct_pixels *in, int size, ct_image *img,
                               const char *where, ct_error *err) {
  if (in->type != CT_PIXEL_U8)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "%s: img_rand_resize_lower/upper resize 8-bit images only, not float "
                        "records (Datum float_data)",
                        where_or(where));
  if (in->h <= 0 || in->w <= 0 || (in->c != 1 && in->c != 3))
    return ct_error_set(err, CT_ERR_INVALID, "%s: cannot resize an image of %dx%dx%d",
                        where_or(where), in->c, in->h, in->w);
  ct_image src;
  ct_image_alloc(&src, in->h, in->w, in->c);
  const uint8_t *p = in->data;
  for (int y = 0; y < in->h; y++)
    for (int x = 0; x < in->w; x++)
      for (int ci = 0; ci < in->c; ci++)
        src.data[((size_t)y * in->w + x) * in->c + ci] =
            p[ci * in->cstride + (ptrdiff_t)y * in->ystride + (ptrdiff_t)x * in->xstride];
  const float scale = (float)size / (float)(in->h < in->w ? in->h : in->w);
  const float fh = scale * (float)in->h, fw = scale * (float)in->w;
  /* the limits of a decoded image (data/image.h) */
  if (fh > 65535.0f || fw > 65535.0f || (double)fh * fw * in->c > 2147483647.0) {
    ct_image_free(&src);
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: img_rand_resize to %d makes the %dx%d image %.0fx%.0f, beyond 65535 "
                        "pixels a side or 2^31 bytes",
                        where_or(where), size, in->h, in->w, (double)fh, (double)fw);
  }
  int nh = (int)lroundf(fh), nw = (int)lroundf(fw);
  nh = nh < t->crop ? t->crop : nh;
  nw = nw < t->crop ? t->crop : nw;
  ct_image_resize_bilinear(&src, nh, nw, img);
  ct_image_free(&src);
  return CT_OK;
}

ct_status ct_transform_apply(const ct_transform *t, const ct_pixels *in, ct_rng *rng, float *out,
                             const char *where, ct_error *err) {
  if (t->resize_lo > 0) {
    const int size = t->resize_lo + (int)ct_rng_below(rng, (uint64_t)(t->resize_hi - t->resize_lo + 1));
    ct_image img = {0};
    CT_TRY(random_resize(t, in, size, &img, where, err));
    const ct_pixels px = ct_pixels_hwc(CT_PIXEL_U8, img.data, img.c, img.h, img.w);
    const ct_transform plain = {.phase = t->phase, .scale = t->scale, .mirror = t->mirror,
                                .crop = t->crop, .color = t->color,
                                .mean_values = t->mean_values, .n_mean_values = t->n_mean_values};
    const ct_status st = ct_transform_apply(&plain, &px, rng, out, where, err);
    ct_image_free(&img);
    return st;
  }
  int oc, oh, ow;
  CT_TRY(ct_transform_output_shape(t, in->c, in->h, in->w, &oc, &oh, &ow, where, err));
  bool mirror = t->mirror && ct_rng_below(rng, 2) != 0;
  int h_off = 0, w_off = 0;
  if (t->crop > 0) {
    if (t->phase == CT_PHASE_TRAIN) {
      h_off = (int)ct_rng_below(rng, (uint64_t)(in->h - t->crop + 1));
      w_off = (int)ct_rng_below(rng, (uint64_t)(in->w - t->crop + 1));
    } else {
      h_off = (in->h - t->crop) / 2;
      w_off = (in->w - t->crop) / 2;
    }
  }
  return ct_transform_apply_at(t, in, mirror, h_off, w_off, out, where, err);
}

/* One output row of channel ci: out[x'] for x in [0, ow), reading input
 * row `src` (already offset to (ci, h_off + y, w_off)) with stride xs. */
#define CT_TRANSFORM_ROW(T)                                                            \
  do {                                                                                \
    const T *s = (const T *)src;                                                      \
    if (mean_row) {                                                                   \
      for (int x = 0; x < ow; x++) dst[x * dx] = ((float)s[x * xs] - mean_row[x]) * scale; \
    } else if (has_mv) {                                                              \
      for (int x = 0; x < ow; x++) dst[x * dx] = ((float)s[x * xs] - mv) * scale;     \
    } else {                                                                          \
      for (int x = 0; x < ow; x++) dst[x * dx] = (float)s[x * xs] * scale;            \
    }                                                                                 \
  } while (0)

/* One row of 3 interleaved u8 channels into three float rows. */
static inline void row_hwc3_u8(const uint8_t *restrict s, float *restrict d0, float *restrict d1,
                               float *restrict d2, int ow, const float m[3], float scale) {
  for (int x = 0; x < ow; x++) {
    d0[x] = ((float)s[3 * x] - m[0]) * scale;
    d1[x] = ((float)s[3 * x + 1] - m[1]) * scale;
    d2[x] = ((float)s[3 * x + 2] - m[2]) * scale;
  }
}

static inline void reverse_into(float *restrict d, const float *restrict s, int n) {
  for (int x = 0; x < n; x++) d[x] = s[n - 1 - x];
}

/* The common case of decoded images: 3 interleaved u8 channels (HWC, BGR),
 * no mean file.  One pass over each input row writes the three output
 * planes (a mirrored row through a reversed copy), in loops the compiler
 * vectorises.  The arithmetic is the generic path's, ((float)v - mean) *
 * scale, so the values are the same bits. */
#define CT_HWC3_MAX_W 2048
static void apply_hwc3_u8(const ct_transform *t, const ct_pixels *in, bool mirror, int h_off,
                          int w_off, int oh, int ow, float *out) {
  const float scale = t->scale;
  float m[3] = {0.f, 0.f, 0.f};
  for (int ci = 0; ci < 3 && t->n_mean_values > 0; ci++)
    m[ci] = t->mean_values[t->n_mean_values == 1 ? 0 : ci];
  const size_t plane = (size_t)oh * ow;
  float tmp[3 * CT_HWC3_MAX_W];
  CT_ASSERT(!mirror || ow <= CT_HWC3_MAX_W);
  for (int y = 0; y < oh; y++) {
    const uint8_t *s = (const uint8_t *)in->data + (ptrdiff_t)(h_off + y) * in->ystride + (ptrdiff_t)w_off * 3;
    float *d0 = out + (size_t)y * ow, *d1 = d0 + plane, *d2 = d1 + plane;
    if (!mirror) {
      row_hwc3_u8(s, d0, d1, d2, ow, m, scale);
    } else {
      row_hwc3_u8(s, tmp, tmp + ow, tmp + 2 * ow, ow, m, scale);
      reverse_into(d0, tmp, ow);
      reverse_into(d1, tmp + ow, ow);
      reverse_into(d2, tmp + 2 * ow, ow);
    }
  }
}

ct_status ct_transform_apply_at(const ct_transform *t, const ct_pixels *in, bool mirror, int h_off,
                                int w_off, float *out, const char *where, ct_error *err) {
  int oc, oh, ow;
  CT_TRY(ct_transform_output_shape(t, in->c, in->h, in->w, &oc, &oh, &ow, where, err));
  CT_ASSERT(h_off >= 0 && w_off >= 0 && h_off + oh <= in->h && w_off + ow <= in->w);
  if (in->type == CT_PIXEL_U8 && in->c == 3 && oc == 3 && in->cstride == 1 && in->xstride == 3 &&
      !t->mean && ow <= CT_HWC3_MAX_W) {
    apply_hwc3_u8(t, in, mirror, h_off, w_off, oh, ow, out);
    return CT_OK;
  }
  const float scale = t->scale;
  const size_t esize = in->type == CT_PIXEL_U8 ? 1 : sizeof(float);
  const ptrdiff_t xs = in->xstride;
  const bool has_mv = t->n_mean_values > 0;
  for (int ci = 0; ci < oc; ci++) {
    const float mv = has_mv ? t->mean_values[t->n_mean_values == 1 ? 0 : ci] : 0.f;
    for (int y = 0; y < oh; y++) {
      const char *src = (const char *)in->data +
                        (size_t)(ci * in->cstride + (ptrdiff_t)(h_off + y) * in->ystride +
                                 (ptrdiff_t)w_off * xs) * esize;
      const float *mean_row =
          t->mean ? t->mean + ((size_t)ci * t->mean_h + h_off + y) * t->mean_w + w_off : NULL;
      float *dst = out + ((size_t)ci * oh + y) * ow;
      ptrdiff_t dx = 1;
      if (mirror) {
        dst += ow - 1;
        dx = -1;
      }
      if (in->type == CT_PIXEL_U8)
        CT_TRANSFORM_ROW(uint8_t);
      else
        CT_TRANSFORM_ROW(float);
    }
  }
  return CT_OK;
}
