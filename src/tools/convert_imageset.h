/* A list of image files with labels to a database of Caffe Datums, as
 * Caffe's tools/convert_imageset does (`cortado convert_imageset`).
 *
 * The list file has one image a line, "path/to/file.jpg LABEL": the label is
 * the integer after the last space, the file name everything before it (so
 * names may contain spaces).  Blank lines (or only spaces and tabs) are
 * skipped; a trailing '\r' is dropped.  Each file is read from ROOT + name
 * (a '/' is put between them when ROOT is a folder not ending in '/').
 *
 * Record i (after the optional shuffle) gets the key "%08d_<name>" with i the
 * line's position in the list, so a skipped image leaves a gap in the
 * numbering, as in Caffe.  Its value is:
 *   raw      (default) the image decoded to BGR (or gray with `gray`),
 *            resized when asked, stored CHW as Caffe's CVMatToDatum does;
 *   encoded  (`encoded`, or an `encode_type`) the file's bytes as they are
 *            when no resize is asked, the file is already in the wanted
 *            format and has the wanted channel count (1 with `gray`, else 3);
 *            otherwise the decoded (and resized) image compressed again
 *            (JPEG quality 95, OpenCV's default, or PNG).  Caffe means to
 *            make the same channel check but its test is always true, so it
 *            would store a colour file unchanged under --gray.
 * An image that cannot be read or decoded is skipped with a warning naming
 * the file (Caffe logs "Could not open or find file" and goes on). */
#ifndef CT_TOOLS_CONVERT_IMAGESET_H
#define CT_TOOLS_CONVERT_IMAGESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "data/db.h"
#include "data/image.h"

#ifdef __cplusplus
extern "C" {
#endif

/* JPEG quality used when an image has to be compressed again (OpenCV's
 * imencode default, which Caffe gets). */
#define CT_IMAGESET_JPEG_QUALITY 95

typedef struct ct_imageset_options {
  ct_db_backend backend;
  bool gray;          /* decode as 1-channel gray (else 3-channel BGR) */
  bool shuffle;       /* shuffle the lines first (ct_imageset_shuffle with seed) */
  uint64_t seed;      /* the shuffle's seed */
  int resize_width;   /* resize when both are > 0 */
  int resize_height;
  bool check_size;    /* fail when an image's C x H x W differs from the first's */
  bool encoded;       /* store compressed images */
  const char *encode_type; /* NULL or "": the file's own format; "jpg", "jpeg" or "png"
                              (implies encoded) */
} ct_imageset_options;

typedef struct ct_imageset_entry {
  char *name; /* the file name as the list gives it (owned) */
  int label;
} ct_imageset_entry;

typedef struct ct_imageset_result {
  size_t lines;   /* entries in the list */
  size_t written; /* records put in the database */
  size_t skipped; /* images that could not be read or decoded */
} ct_imageset_result;

/* Reads the list file into *entries (an array of *n, freed with
 * ct_imageset_entries_free).  Errors:
 *   CT_ERR_NOTFOUND "LIST: cannot open: No such file or directory"
 *   CT_ERR_PARSE    "LIST:3: expected 'FILE LABEL', got 'cat.jpg'"
 *   CT_ERR_PARSE    "LIST:3: label 'x7' is not an integer" */
ct_status ct_imageset_read_list(const char *list_path, ct_imageset_entry **entries, size_t *n,
                                ct_error *err);
void ct_imageset_entries_free(ct_imageset_entry *entries, size_t n);

/* Shuffles entries in place: a Fisher-Yates shuffle driven by ct_rng
 * (xoshiro256**) seeded with seed; for i = n-1 down to 1 it swaps entry i
 * with entry ct_rng_below(rng, i + 1).  Caffe shuffles with its own
 * generator, so the order differs from Caffe's for any seed. */
void ct_imageset_shuffle(ct_imageset_entry *entries, size_t n, uint64_t seed);

/* "jpg"/"jpeg" -> CT_IMAGE_JPEG, "png" -> CT_IMAGE_PNG (case-insensitive);
 * NULL or "" -> CT_IMAGE_UNKNOWN (the file's own format).
 * Errors: CT_ERR_INVALID "unknown encode_type 'bmp' (expected jpg, jpeg or png)". */
ct_status ct_imageset_parse_encode_type(const char *name, ct_image_format *out, ct_error *err);

/* Converts the listed images under root_folder into a new database at
 * db_path, logging "A total of N images.", then "Processed N files." every
 * 1000 records and at the end.  *result (may be NULL) gets the counts.
 *
 * Errors (the database is removed again on failure):
 *   those of ct_imageset_read_list and ct_imageset_parse_encode_type;
 *   CT_ERR_INVALID "PATH: image is 3x20x30 but the first image was 3x32x32
 *                   (--check_size)";
 *   the errors of ct_db_open, ct_db_put (e.g. a key longer than LMDB's 511
 *   bytes) and ct_db_commit. */
ct_status ct_convert_imageset(const char *root_folder, const char *list_path, const char *db_path,
                              const ct_imageset_options *opt, ct_imageset_result *result,
                              ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
