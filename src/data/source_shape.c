/* The sample shape a data layer's source holds, for `--dummy_data`. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "data/datum.h"
#include "data/db.h"
#include "data/image.h"
#include "data/source_shape.h"

static ct_color_mode color_mode(const Caffe__LayerParameter *l) {
  const Caffe__TransformationParameter *t = l->transform_param;
  if (t && t->has_force_color && t->force_color) return CT_COLOR_FORCE_COLOR;
  if (t && t->has_force_gray && t->force_gray) return CT_COLOR_FORCE_GRAY;
  return CT_COLOR_NATIVE;
}

static ct_status db_shape(const Caffe__LayerParameter *l, int chw[3], ct_error *err) {
  const Caffe__DataParameter *p = l->data_param;
  if (!p || !p->source) return ct_error_set(err, CT_ERR_UNSUPPORTED, "the layer has no data_param.source");
  ct_db_backend backend = p->has_backend && p->backend == CAFFE__DATA_PARAMETER__DB__LEVELDB
                              ? CT_DB_LEVELDB : CT_DB_LMDB;
  ct_db *db;
  CT_TRY(ct_db_open(&db, p->source, backend, CT_DB_READ, err));
  ct_status st = CT_OK;
  ct_db_reader *r = NULL;
  if (ct_db_count(db) == 0) st = ct_error_set(err, CT_ERR_INVALID, "%s: the database is empty", p->source);
  if (st == CT_OK) st = ct_db_reader_open(db, &r, err);
  const void *val;
  size_t len;
  Caffe__Datum *d = NULL;
  if (st == CT_OK) st = ct_db_read_index(db, r, 0, &val, &len, err);
  if (st == CT_OK) st = ct_datum_parse(val, len, p->source, &d, err);
  if (st == CT_OK) st = ct_datum_shape(d, color_mode(l), &chw[0], &chw[1], &chw[2], p->source, err);
  if (d) ct_datum_free(d);
  if (r) ct_db_reader_close(r);
  ct_db_close(db);
  return st;
}

static ct_status image_list_shape(const Caffe__LayerParameter *l, int chw[3], ct_error *err) {
  const Caffe__ImageDataParameter *p = l->image_data_param;
  if (!p || !p->source) return ct_error_set(err, CT_ERR_UNSUPPORTED, "the layer has no image_data_param.source");
  FILE *f = fopen(p->source, "r");
  if (!f) return ct_error_set(err, CT_ERR_NOTFOUND, "%s: cannot open: %s", p->source, strerror(errno));
  char line[4096], path[4096 + 512];
  ct_status st = ct_error_set(err, CT_ERR_INVALID, "%s: the list is empty", p->source);
  if (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    char *sp = strrchr(line, ' ');
    if (sp) *sp = '\0';
    snprintf(path, sizeof path, "%s%s", p->root_folder ? p->root_folder : "", line);
    ct_image img;
    st = ct_image_read_file(path, p->is_color ? CT_COLOR_FORCE_COLOR : CT_COLOR_FORCE_GRAY, &img, err);
    if (st == CT_OK) {
      chw[0] = img.c;
      chw[1] = img.h;
      chw[2] = img.w;
      ct_image_free(&img);
    }
  }
  fclose(f);
  return st;
}

ct_status ct_data_source_sample_shape(const Caffe__LayerParameter *l, int chw[3], ct_error *err) {
  if (l->type && strcmp(l->type, "Data") == 0) return db_shape(l, chw, err);
  if (l->type && strcmp(l->type, "ImageData") == 0) return image_list_shape(l, chw, err);
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "Cortado does not read a %s layer's source ahead",
                      l->type ? l->type : "(typeless)");
}
