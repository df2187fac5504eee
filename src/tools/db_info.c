#include "tools/db_info.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "core/log.h"
#include "data/datum.h"
#include "data/image.h"

void ct_db_info_free(ct_db_info *info) {
  if (!info) return;
  free(info->label_counts);
  memset(info, 0, sizeof *info);
}

static void count_shape(ct_db_info *info, int c, int h, int w) {
  for (size_t i = 0; i < info->n_shapes; i++) {
    ct_db_info_shape *s = &info->shapes[i];
    if (s->c == c && s->h == h && s->w == w) {
      s->count++;
      return;
    }
  }
  if (info->n_shapes == CT_DB_INFO_MAX_SHAPES) {
    info->other_shapes++;
    return;
  }
  info->shapes[info->n_shapes++] = (ct_db_info_shape){c, h, w, 1};
}

/* Adds one label to the histogram, widening its range while it stays under
 * CT_DB_INFO_MAX_LABEL_SPAN. */
static void count_label(ct_db_info *info, int64_t label) {
  if (!info->label_counts) {
    info->label_lo = info->label_hi = label;
    info->label_counts = ct_xcalloc(1, sizeof *info->label_counts);
  }
  int64_t lo = label < info->label_lo ? label : info->label_lo;
  int64_t hi = label > info->label_hi ? label : info->label_hi;
  if (hi - lo + 1 > CT_DB_INFO_MAX_LABEL_SPAN) {
    info->labels_outside++;
    return;
  }
  if (lo != info->label_lo || hi != info->label_hi) {
    size_t n = (size_t)(hi - lo + 1);
    size_t *wider = ct_xcalloc(n, sizeof *wider);
    size_t old_n = (size_t)(info->label_hi - info->label_lo + 1);
    memcpy(wider + (info->label_lo - lo), info->label_counts, old_n * sizeof *wider);
    free(info->label_counts);
    info->label_counts = wider;
    info->label_lo = lo;
    info->label_hi = hi;
  }
  info->label_counts[label - info->label_lo]++;
}

static void note_invalid(ct_db_info *info, const ct_error *e) {
  if (info->n_invalid++ == 0) snprintf(info->first_error, sizeof info->first_error, "%s", e->msg);
}

/* Classifies one record's value. */
static void scan_record(ct_db_info *info, const ct_db *db, size_t i, const void *val,
                        size_t vlen) {
  size_t klen;
  const char *key = ct_db_key(db, i, &klen);
  char where[600];
  ct_datum_where(where, sizeof where, key, klen, ct_db_path(db));
  ct_error e;
  Caffe__Datum *d;
  if (ct_datum_parse(val, vlen, where, &d, &e) != CT_OK) {
    note_invalid(info, &e);
    return;
  }
  int c, h, w;
  if (ct_datum_shape(d, CT_COLOR_NATIVE, &c, &h, &w, where, &e) != CT_OK) {
    note_invalid(info, &e);
    ct_datum_free(d);
    return;
  }
  if (d->has_encoded && d->encoded) {
    ct_image_format f = ct_image_sniff(d->data.data, d->data.len);
    if (f == CT_IMAGE_JPEG) info->n_jpeg++;
    else info->n_png++;
  } else if (d->data.len) {
    info->n_raw++;
  } else {
    info->n_float++;
  }
  count_shape(info, c, h, w);
  count_label(info, d->has_label ? d->label : 0);
  ct_datum_free(d);
}

ct_status ct_db_info_scan(const char *db_path, ct_db_backend backend, size_t max_records,
                          ct_db_info *info, ct_error *err) {
  memset(info, 0, sizeof *info);
  ct_db *db;
  CT_TRY(ct_db_open(&db, db_path, backend, CT_DB_READ, err));
  info->records = ct_db_count(db);
  size_t n = max_records && max_records < info->records ? max_records : info->records;
  for (size_t i = 0; i < CT_DB_INFO_KEY_EXAMPLES && i < info->records; i++)
    ct_db_key_string(db, i, info->first_keys[i], sizeof info->first_keys[i]);
  if (info->records)
    ct_db_key_string(db, info->records - 1, info->last_key, sizeof info->last_key);
  ct_db_reader *r = NULL;
  ct_status st = ct_db_reader_open(db, &r, err);
  bool have_reader = st == CT_OK;
  for (size_t i = 0; i < n && st == CT_OK; i++) {
    const void *val;
    size_t vlen;
    if ((st = ct_db_read_index(db, r, i, &val, &vlen, err)) != CT_OK) break;
    scan_record(info, db, i, val, vlen);
    info->scanned++;
  }
  if (have_reader) ct_db_reader_close(r);
  ct_db_close(db);
  if (st != CT_OK) ct_db_info_free(info);
  return st;
}

static void print_keys(const ct_db_info *info, FILE *out) {
  fprintf(out, "keys:");
  size_t shown = info->records < CT_DB_INFO_KEY_EXAMPLES ? info->records : CT_DB_INFO_KEY_EXAMPLES;
  for (size_t i = 0; i < shown; i++) fprintf(out, "%s %s", i ? "," : "", info->first_keys[i]);
  if (info->records > CT_DB_INFO_KEY_EXAMPLES + 1) fprintf(out, ", ...");
  if (info->records > CT_DB_INFO_KEY_EXAMPLES) fprintf(out, ", %s", info->last_key);
  fputc('\n', out);
}

static void print_labels(const ct_db_info *info, size_t max_lines, FILE *out) {
  if (!info->label_counts) return;
  size_t span = (size_t)(info->label_hi - info->label_lo + 1), distinct = 0;
  for (size_t i = 0; i < span; i++) distinct += info->label_counts[i] != 0;
  fprintf(out, "labels: %zu distinct, %" PRId64 "..%" PRId64 "\n", distinct, info->label_lo,
          info->label_hi);
  size_t lines = 0;
  for (size_t i = 0; i < span; i++) {
    if (!info->label_counts[i]) continue;
    if (max_lines && lines == max_lines) {
      fprintf(out, "  ... (%zu more labels)\n", distinct - lines);
      break;
    }
    fprintf(out, "  %" PRId64 ": %zu\n", info->label_lo + (int64_t)i, info->label_counts[i]);
    lines++;
  }
  if (info->labels_outside)
    fprintf(out, "  %zu records with labels outside this range\n", info->labels_outside);
}

ct_status ct_db_info_print(const char *db_path, ct_db_backend backend, size_t max_records,
                           size_t max_label_lines, FILE *out, ct_error *err) {
  ct_db_info info;
  CT_TRY(ct_db_info_scan(db_path, backend, max_records, &info, err));
  fprintf(out, "db: %s (%s)\n", db_path, ct_db_backend_name(backend));
  fprintf(out, "records: %zu\n", info.records);
  if (info.records) print_keys(&info, out);
  fprintf(out, "scanned: %zu\n", info.scanned);
  fprintf(out, "storage:");
  const char *names[] = {"raw", "float", "jpeg", "png", "invalid"};
  size_t counts[] = {info.n_raw, info.n_float, info.n_jpeg, info.n_png, info.n_invalid};
  for (int i = 0; i < 5; i++)
    if (counts[i]) fprintf(out, " %s %zu", names[i], counts[i]);
  fputc('\n', out);
  if (info.n_invalid) fprintf(out, "first invalid record: %s\n", info.first_error);
  for (size_t i = 0; i < info.n_shapes; i++)
    fprintf(out, "shape (CxHxW): %dx%dx%d %zu\n", info.shapes[i].c, info.shapes[i].h,
            info.shapes[i].w, info.shapes[i].count);
  if (info.other_shapes) fprintf(out, "shape (CxHxW): others %zu\n", info.other_shapes);
  print_labels(&info, max_label_lines, out);
  ct_db_info_free(&info);
  return CT_OK;
}
