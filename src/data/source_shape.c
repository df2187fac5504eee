/* The sample shape a data layer's source holds, for `--dummy_data`. */
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

static bool db_shape(const Caffe__LayerParameter *l, int chw[3]) {
  const Caffe__DataParameter *p = l->data_param;
  if (!p || !p->source) return false;
  ct_db_backend backend = p->has_backend && p->backend == CAFFE__DATA_PARAMETER__DB__LEVELDB
                              ? CT_DB_LEVELDB : CT_DB_LMDB;
  ct_error err;
  ct_db *db;
  if (ct_db_open(&db, p->source, backend, CT_DB_READ, &err) != CT_OK) return false;
  bool ok = false;
  ct_db_reader *r;
  if (ct_db_count(db) > 0 && ct_db_reader_open(db, &r, &err) == CT_OK) {
    const void *val;
    size_t len;
    Caffe__Datum *d;
    if (ct_db_read_index(db, r, 0, &val, &len, &err) == CT_OK &&
        ct_datum_parse(val, len, p->source, &d, &err) == CT_OK) {
      ok = ct_datum_shape(d, color_mode(l), &chw[0], &chw[1], &chw[2], p->source, &err) == CT_OK;
      ct_datum_free(d);
    }
    ct_db_reader_close(r);
  }
  ct_db_close(db);
  return ok;
}

static bool image_list_shape(const Caffe__LayerParameter *l, int chw[3]) {
  const Caffe__ImageDataParameter *p = l->image_data_param;
  if (!p || !p->source) return false;
  FILE *f = fopen(p->source, "r");
  if (!f) return false;
  char line[4096], path[4096 + 512];
  bool ok = false;
  if (fgets(line, sizeof line, f)) {
    char *sp = strrchr(line, ' ');
    if (sp) *sp = '\0';
    snprintf(path, sizeof path, "%s%s", p->root_folder ? p->root_folder : "", line);
    ct_image img;
    ct_error err;
    if (ct_image_read_file(path, p->is_color ? CT_COLOR_FORCE_COLOR : CT_COLOR_FORCE_GRAY, &img, &err) ==
        CT_OK) {
      chw[0] = img.c;
      chw[1] = img.h;
      chw[2] = img.w;
      ct_image_free(&img);
      ok = true;
    }
  }
  fclose(f);
  return ok;
}

bool ct_data_source_sample_shape(const Caffe__LayerParameter *l, int chw[3]) {
  if (!l->type) return false;
  if (strcmp(l->type, "Data") == 0) return db_shape(l, chw);
  if (strcmp(l->type, "ImageData") == 0) return image_list_shape(l, chw);
  return false;
}
