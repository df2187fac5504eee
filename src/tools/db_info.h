/* A summary of a database of Caffe Datums (`cortado db_info`): how many
 * records, example keys, how the records are stored (raw, float, encoded
 * JPEG/PNG), their shapes and a histogram of their labels. */
#ifndef CT_TOOLS_DB_INFO_H
#define CT_TOOLS_DB_INFO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "data/db.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keys shown from the start of the database (and the last one). */
#define CT_DB_INFO_KEY_EXAMPLES 3
/* Distinct shapes kept; records of further shapes are counted together. */
#define CT_DB_INFO_MAX_SHAPES 8
/* Widest label range the histogram covers (labels further out are counted
 * together in labels_outside). */
#define CT_DB_INFO_MAX_LABEL_SPAN (1 << 20)

typedef struct ct_db_info_shape {
  int c, h, w;
  size_t count;
} ct_db_info_shape;

typedef struct ct_db_info {
  size_t records;   /* in the database */
  size_t scanned;   /* records read: all, or the first max_records */
  /* Printable keys (ct_db_key_string) of the first records (up to
   * CT_DB_INFO_KEY_EXAMPLES) and of the last one. */
  char first_keys[CT_DB_INFO_KEY_EXAMPLES][128];
  char last_key[128];
  size_t n_raw;     /* uint8 data */
  size_t n_float;   /* float_data */
  size_t n_jpeg;    /* encoded JPEG */
  size_t n_png;     /* encoded PNG */
  size_t n_invalid; /* not a Datum, or inconsistent, or undecodable */
  char first_error[CT_ERROR_MSG_MAX]; /* the message of the first invalid record */
  ct_db_info_shape shapes[CT_DB_INFO_MAX_SHAPES]; /* in order of first appearance */
  size_t n_shapes;
  size_t other_shapes; /* records of shapes beyond the first CT_DB_INFO_MAX_SHAPES */
  /* Label histogram: label_counts[l - label_lo] for label_lo <= l <= label_hi
   * (valid when the scan saw a label: label_counts != NULL). */
  int64_t label_lo, label_hi;
  size_t *label_counts;
  size_t labels_outside;
} ct_db_info;

/* Reads the database at db_path (the first max_records records, or all when
 * max_records is 0) into *info (free with ct_db_info_free).  Records that do
 * not parse or whose image header cannot be read are counted as invalid, not
 * errors.  Errors: those of ct_db_open, ct_db_reader_open and
 * ct_db_read_index. */
ct_status ct_db_info_scan(const char *db_path, ct_db_backend backend, size_t max_records,
                          ct_db_info *info, ct_error *err);
void ct_db_info_free(ct_db_info *info);

/* Scans and prints the summary to out:
 *
 *   db: /data/mnist_train_lmdb (lmdb)
 *   records: 60000
 *   keys: 00000000, 00000001, 00000002, ..., 00059999
 *   scanned: 60000
 *   storage: raw 60000
 *   shape (CxHxW): 1x28x28 60000
 *   labels: 10 distinct, 0..9
 *     0: 5923
 *     ...
 *
 * "storage" lists the non-zero counts of raw, float, jpeg, png and invalid
 * (the first invalid record's message follows on its own line).  At most
 * max_label_lines histogram lines are printed (0: all).
 * Errors: those of ct_db_info_scan. */
ct_status ct_db_info_print(const char *db_path, ct_db_backend backend, size_t max_records,
                           size_t max_label_lines, FILE *out, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
