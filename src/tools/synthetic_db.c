#include "tools/synthetic_db.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "data/datum.h"
#include "data/image.h"
#include "tools/tools_common.h"

/* One coarse grid point every GRID_STEP pixels. */
#define GRID_STEP 8
#define STRIPE_AMPLITUDE 40.0f
#define PIXEL_NOISE 6.0f
#define MAX_VALUES ((size_t)1 << 28)

ct_status ct_synthetic_parse_format(const char *name, ct_synthetic_format *out, ct_error *err) {
  if (strcasecmp(name, "raw") == 0) *out = CT_SYNTHETIC_RAW;
  else if (strcasecmp(name, "jpg") == 0 || strcasecmp(name, "jpeg") == 0) *out = CT_SYNTHETIC_JPEG;
  else if (strcasecmp(name, "png") == 0) *out = CT_SYNTHETIC_PNG;
  else
    return ct_error_set(err, CT_ERR_INVALID,
                        "unknown encode_type '%s' (expected jpg, png or raw)", name);
  return CT_OK;
}

ct_status ct_parse_shape_chw(const char *text, const char *what, int *c, int *h, int *w,
                             ct_error *err) {
  int *dims[3] = {c, h, w};
  const char *p = text;
  for (int i = 0; i < 3; i++) {
    char *end;
    errno = 0;
    long v = (*p >= '0' && *p <= '9') ? strtol(p, &end, 10) : -1;
    bool sep_ok = v > 0 && (i < 2 ? *end == ',' : *end == '\0');
    if (!sep_ok || errno == ERANGE || v > INT_MAX)
      return ct_error_set(err, CT_ERR_INVALID,
                          "bad shape '%s' for %s (expected C,H,W with positive integers)", text,
                          what);
    *dims[i] = (int)v;
    p = end + 1;
  }
  return CT_OK;
}

/* The coarse grid's value at (y, x) for plane p, interpolated bilinearly;
 * grid is (gh, gw, planes). */
static float grid_at(const float *grid, int gw, int planes, int p, int y, int x) {
  float gy = (float)y / GRID_STEP, gx = (float)x / GRID_STEP;
  int y0 = (int)gy, x0 = (int)gx;
  float fy = gy - y0, fx = gx - x0;
  const float *g = grid + p;
  size_t r0 = (size_t)y0 * gw, r1 = r0 + gw, st = (size_t)planes;
  float top = g[(r0 + x0) * st] * (1 - fx) + g[(r0 + x0 + 1) * st] * fx;
  float bot = g[(r1 + x0) * st] * (1 - fx) + g[(r1 + x0 + 1) * st] * fx;
  return top * (1 - fy) + bot * fy;
}

void ct_synthetic_image(ct_rng *rng, int label, int c, int h, int w, uint8_t *hwc) {
  /* Plane 0 is a brightness shared by the channels, planes 1..c their own
   * colour, mixed LUMA_SHARE : 1 - LUMA_SHARE as in photographs, where
   * channels move together. */
  const float LUMA_SHARE = 0.7f;
  int gh = h / GRID_STEP + 2, gw = w / GRID_STEP + 2, planes = c + 1;
  float *grid = ct_xcalloc((size_t)gh * gw * planes, sizeof *grid);
  ct_rng_fill_uniform(rng, grid, (size_t)gh * gw * planes, 16.0f, 240.0f);
  float freq = (float)(label % 8 + 1);
  float phase = ct_rng_uniform(rng, 0.0f, 6.2831853f);
  for (int y = 0; y < h; y++) {
    for (int x = 0; x < w; x++) {
      float luma = grid_at(grid, gw, planes, 0, y, x);
      float stripe = STRIPE_AMPLITUDE * sinf(6.2831853f * freq * (float)x / (float)w + phase);
      for (int ch = 0; ch < c; ch++) {
        float v = LUMA_SHARE * luma + (1 - LUMA_SHARE) * grid_at(grid, gw, planes, ch + 1, y, x) +
                  stripe + ct_rng_uniform(rng, -PIXEL_NOISE, PIXEL_NOISE);
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        hwc[((size_t)y * w + x) * c + ch] = (uint8_t)lrintf(v);
      }
    }
  }
  free(grid);
}

static ct_status check_options(const ct_synthetic_options *o, ct_error *err) {
  if (o->channels <= 0 || o->height <= 0 || o->width <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "bad image shape %dx%dx%d (must be positive)",
                        o->channels, o->height, o->width);
  if ((size_t)o->channels * o->height * o->width > MAX_VALUES)
    return ct_error_set(err, CT_ERR_INVALID, "image shape %dx%dx%d is too large (over 2^28 values)",
                        o->channels, o->height, o->width);
  if (o->labels <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "bad label count %d (must be positive)", o->labels);
  if (o->format == CT_SYNTHETIC_JPEG && (o->quality < 1 || o->quality > 100))
    return ct_error_set(err, CT_ERR_INVALID, "bad JPEG quality %d (expected 1..100)", o->quality);
  if (o->format != CT_SYNTHETIC_RAW && o->channels != 1 && o->channels != 3)
    return ct_error_set(err, CT_ERR_INVALID, "%s images have 1 or 3 channels, not %d",
                        o->format == CT_SYNTHETIC_JPEG ? "jpg" : "png", o->channels);
  return CT_OK;
}

/* Serializes one image as the format asks. */
static ct_status encode(const ct_synthetic_options *o, ct_image *img, uint8_t *chw, int label,
                        uint8_t **value, size_t *vlen, ct_error *err) {
  if (o->format == CT_SYNTHETIC_RAW) {
    ct_image_hwc_to_chw(img->data, o->height, o->width, o->channels, chw);
    return ct_datum_encode_raw(chw, o->channels, o->height, o->width, label, value, vlen, err);
  }
  return ct_datum_encode_image(img, o->format == CT_SYNTHETIC_JPEG ? CT_IMAGE_JPEG : CT_IMAGE_PNG,
                               o->quality, label, value, vlen, err);
}

ct_status ct_make_synthetic_db(const char *db_path, const ct_synthetic_options *opt,
                               ct_error *err) {
  CT_TRY(check_options(opt, err));
  ct_tools_out_db out;
  CT_TRY(ct_tools_db_create(&out, db_path, opt->backend, err));
  ct_db *db = out.db;
  ct_rng rng;
  ct_rng_seed(&rng, opt->seed);
  /* A ct_image for the encoders even when the channel count is not 1 or 3:
   * raw records only use its bytes. */
  ct_image img = {opt->height, opt->width, opt->channels, NULL};
  size_t n_values = (size_t)opt->channels * opt->height * opt->width;
  img.data = ct_xcalloc(n_values, 1);
  uint8_t *chw = ct_xcalloc(n_values, 1);
  size_t total_bytes = 0;
  ct_status st = CT_OK;
  for (size_t i = 0; i < opt->num && st == CT_OK; i++) {
    int label = (int)ct_rng_below(&rng, (uint64_t)opt->labels);
    ct_synthetic_image(&rng, label, opt->channels, opt->height, opt->width, img.data);
    uint8_t *value;
    size_t vlen;
    if ((st = encode(opt, &img, chw, label, &value, &vlen, err)) != CT_OK) break;
    total_bytes += vlen;
    char key[32];
    int klen = snprintf(key, sizeof key, "%08zu", i);
    st = ct_tools_put_owned(db, key, (size_t)klen, &value, vlen, err);
    if (st == CT_OK && (i + 1) % CT_TOOLS_PROGRESS_EVERY == 0) LOG_INFO("Processed %zu files.", i + 1);
  }
  st = ct_tools_db_finish(&out, st, err);
  if (st == CT_OK) {
    if (opt->num % CT_TOOLS_PROGRESS_EVERY != 0) LOG_INFO("Processed %zu files.", opt->num);
    if (opt->num)
      LOG_INFO("Mean record size: %.1f bytes", (double)total_bytes / (double)opt->num);
  }
  free(chw);
  free(img.data);
  return st;
}
