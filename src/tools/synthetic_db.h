/* Databases of made-up images for benchmarks and tests
 * (`cortado make_synthetic_db`).
 *
 * Each image is smooth noise (coarse grids of random values, one grid
 * point every 8 pixels, interpolated bilinearly: a brightness shared by the
 * channels and a colour of each) plus a vertical-stripe
 * pattern whose frequency depends on the label, plus a little per-pixel
 * noise, so that JPEG and PNG sizes are like those of photographs rather than
 * of white noise, and a network can learn the labels.  Everything is drawn
 * from one ct_rng seeded with the seed, so a seed always gives the same
 * database. */
#ifndef CT_TOOLS_SYNTHETIC_DB_H
#define CT_TOOLS_SYNTHETIC_DB_H

#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"
#include "data/db.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_synthetic_format {
  CT_SYNTHETIC_RAW = 0, /* raw uint8 Datums (CHW) */
  CT_SYNTHETIC_JPEG,    /* encoded JPEG Datums */
  CT_SYNTHETIC_PNG      /* encoded PNG Datums */
} ct_synthetic_format;

typedef struct ct_synthetic_options {
  ct_db_backend backend;
  size_t num;                  /* records */
  int channels, height, width; /* image shape; encoded formats take 1 or 3 channels */
  int labels;                  /* labels are drawn uniformly from 0 .. labels-1 */
  ct_synthetic_format format;
  int quality;                 /* JPEG quality, 1..100 */
  uint64_t seed;
} ct_synthetic_options;

/* "raw", "jpg"/"jpeg", "png" (case-insensitive).
 * Errors: CT_ERR_INVALID "unknown encode_type 'bmp' (expected jpg, png or raw)". */
ct_status ct_synthetic_parse_format(const char *name, ct_synthetic_format *out, ct_error *err);

/* Parses "C,H,W" (three positive integers).  `what` names the value in
 * messages.  Errors: CT_ERR_INVALID "bad shape '3,x,4' for --shape (expected
 * C,H,W with positive integers)". */
ct_status ct_parse_shape_chw(const char *text, const char *what, int *c, int *h, int *w,
                             ct_error *err);

/* Draws one image of c x h x w bytes in HWC order into hwc (for c = 1 or 3
 * this is the layout of a ct_image), for the given label, from rng. */
void ct_synthetic_image(ct_rng *rng, int label, int c, int h, int w, uint8_t *hwc);

/* Writes opt->num records with keys "%08d" into a new database at db_path,
 * logging "Processed N files." every 1000 records and at the end.  Record i
 * draws its label, then its image, from the one generator.
 * Errors (the database is removed again on failure):
 *   CT_ERR_INVALID for a non-positive shape or label count, a quality out of
 *   1..100, an image over 2^28 values, or an encoded format with a channel
 *   count other than 1 or 3 ("jpg images have 1 or 3 channels, not 4");
 *   the errors of ct_db_open, ct_db_put and ct_db_commit. */
ct_status ct_make_synthetic_db(const char *db_path, const ct_synthetic_options *opt,
                               ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
