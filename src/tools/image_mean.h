/* The mean image of a database, as Caffe's tools/compute_image_mean computes
 * it (`cortado compute_image_mean`), saved as a binary BlobProto 1xCxHxW that
 * a data layer's transform_param.mean_file reads.
 *
 * Every record is averaged: raw ones as their uint8 data, float ones as
 * their float_data, encoded ones decoded in their own colour (gray stays 1
 * channel, colour becomes BGR, as Caffe's DecodeDatumNative).  All must have
 * the shape of the first.  Sums are kept in double, rounded to float and
 * divided by the count in float.  Caffe sums in float, which gives the same
 * bits while the sums stay below 2^24 (up to 65793 uint8 images) and drifts
 * from the true mean after. */
#ifndef CT_TOOLS_IMAGE_MEAN_H
#define CT_TOOLS_IMAGE_MEAN_H

#include <stddef.h>

#include "core/status.h"
#include "data/db.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_image_mean {
  int channels, height, width;
  float *data;  /* (channels, height, width), malloc'd; free with ct_image_mean_free */
  size_t count; /* records averaged */
} ct_image_mean;

/* Averages every record of the database at db_path into *out, logging
 * "Processed N files." every 10000 records and at the end.
 * Errors (*out is left empty):
 *   the errors of ct_db_open and of reading with a cursor;
 *   CT_ERR_INVALID "DB: the database is empty";
 *   CT_ERR_PARSE / CT_ERR_INVALID for a record that is not a valid Datum
 *     ("record KEY of DB: not a valid caffe.Datum ...") or whose pixels cannot
 *     be decoded;
 *   CT_ERR_INVALID "record KEY of DB: shape 3x30x32 differs from the first
 *     record's 3x32x32". */
ct_status ct_compute_image_mean(const char *db_path, ct_db_backend backend, ct_image_mean *out,
                                ct_error *err);
void ct_image_mean_free(ct_image_mean *m);

/* The mean of channel c over its height x width values. */
double ct_image_mean_channel(const ct_image_mean *m, int c);

/* Writes m as a binary caffe.BlobProto with num 1, channels, height, width
 * and data (the legacy shape fields, as Caffe's tool writes), atomically.
 * Errors: those of ct_file_write_atomic ("PATH: write failed: ..."). */
ct_status ct_image_mean_write_binaryproto(const ct_image_mean *m, const char *path,
                                          ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
