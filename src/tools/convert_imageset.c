#include "tools/convert_imageset.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "core/log.h"
#include "core/rng.h"
#include "data/datum.h"
#include "tools/tools_common.h"

/* Largest image file read (bigger ones are skipped like unreadable ones). */
#define MAX_IMAGE_FILE_BYTES ((size_t)1 << 30)

/* ---------------------------------------------------------------- the list */

void ct_imageset_entries_free(ct_imageset_entry *entries, size_t n) {
  if (!entries) return;
  for (size_t i = 0; i < n; i++) free(entries[i].name);
  free(entries);
}

/* Splits one line (without its newline) into name and label. */
static ct_status parse_line(const char *list_path, size_t lineno, char *line,
                            ct_imageset_entry *out, ct_error *err) {
  char *space = strrchr(line, ' ');
  if (!space || space == line || space[1] == '\0')
    return ct_error_set(err, CT_ERR_PARSE, "%s:%zu: expected 'FILE LABEL', got '%s'", list_path,
                        lineno, line);
  char *end;
  errno = 0;
  long label = strtol(space + 1, &end, 10);
  if (*end || errno == ERANGE || label < INT_MIN || label > INT_MAX)
    return ct_error_set(err, CT_ERR_PARSE, "%s:%zu: label '%s' is not an integer", list_path,
                        lineno, space + 1);
  *space = '\0';
  out->name = ct_xstrdup(line);
  out->label = (int)label;
  return CT_OK;
}

ct_status ct_imageset_read_list(const char *list_path, ct_imageset_entry **entries, size_t *n,
                                ct_error *err) {
  *entries = NULL;
  *n = 0;
  FILE *f = fopen(list_path, "r");
  if (!f) {
    int e = errno;
    return ct_error_set(err, e == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO, "%s: cannot open: %s",
                        list_path, strerror(e));
  }
  ct_imageset_entry *list = NULL;
  size_t count = 0, cap = 0, lineno = 0;
  char *line = NULL;
  size_t line_cap = 0;
  ssize_t len;
  ct_status st = CT_OK;
  while ((len = getline(&line, &line_cap, f)) >= 0) {
    lineno++;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    if (strspn(line, " \t") == (size_t)len) continue; /* blank */
    if (count == cap) {
      cap = cap ? 2 * cap : 1024;
      list = ct_xrealloc(list, cap * sizeof *list);
    }
    if ((st = parse_line(list_path, lineno, line, &list[count], err)) != CT_OK) break;
    count++;
  }
  if (st == CT_OK && ferror(f))
    st = ct_error_set(err, CT_ERR_IO, "%s: read failed: %s", list_path, strerror(errno));
  free(line);
  fclose(f);
  if (st != CT_OK) {
    ct_imageset_entries_free(list, count);
    return st;
  }
  *entries = list;
  *n = count;
  return CT_OK;
}

void ct_imageset_shuffle(ct_imageset_entry *entries, size_t n, uint64_t seed) {
  ct_rng rng;
  ct_rng_seed(&rng, seed);
  for (size_t i = n; i-- > 1;) {
    size_t j = (size_t)ct_rng_below(&rng, i + 1);
    ct_imageset_entry t = entries[i];
    entries[i] = entries[j];
    entries[j] = t;
  }
}

ct_status ct_imageset_parse_encode_type(const char *name, ct_image_format *out, ct_error *err) {
  *out = CT_IMAGE_UNKNOWN;
  if (!name || !*name) return CT_OK;
  if (strcasecmp(name, "jpg") == 0 || strcasecmp(name, "jpeg") == 0) {
    *out = CT_IMAGE_JPEG;
    return CT_OK;
  }
  if (strcasecmp(name, "png") == 0) {
    *out = CT_IMAGE_PNG;
    return CT_OK;
  }
  return ct_error_set(err, CT_ERR_INVALID, "unknown encode_type '%s' (expected jpg, jpeg or png)",
                      name);
}

/* ---------------------------------------------------------------- one image */

/* What a converted image became. */
typedef struct made_record {
  uint8_t *value; /* the serialized Datum (malloc'd) */
  size_t vlen;
  int c, h, w;    /* the pixels' shape after decoding and resizing */
} made_record;

/* The reason in a message "PATH: reason", or the whole message. */
static const char *reason_after_path(const char *msg, const char *path) {
  size_t n = strlen(path);
  return strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0 ? msg + n + 2 : msg;
}

/* Reads, decodes, resizes and encodes the image at path.  An image that
 * cannot be read or decoded is logged and reported through *skipped (the
 * status stays CT_OK); errors are for failures of the encoders. */
static ct_status make_record(const char *path, int label, const ct_imageset_options *opt,
                             bool encoding, ct_image_format want_format, made_record *out,
                             bool *skipped, ct_error *err) {
  *skipped = false;
  memset(out, 0, sizeof *out);
  char *bytes;
  size_t len;
  ct_error e;
  if (ct_file_read_all(path, &bytes, &len, MAX_IMAGE_FILE_BYTES, &e) != CT_OK) {
    LOG_WARNING("Could not open or find file %s (%s); skipped", path,
                reason_after_path(e.msg, path));
    *skipped = true;
    return CT_OK;
  }
  ct_image img = {0}, resized = {0};
  if (ct_image_decode(bytes, len, opt->gray ? CT_COLOR_FORCE_GRAY : CT_COLOR_FORCE_COLOR, &img,
                      &e) != CT_OK) {
    LOG_WARNING("Could not decode file %s (%s); skipped", path, e.msg);
    free(bytes);
    *skipped = true;
    return CT_OK;
  }
  bool resize_asked = opt->resize_height > 0 || opt->resize_width > 0;
  ct_image *pix = &img;
  if (opt->resize_height > 0 && opt->resize_width > 0 &&
      (img.h != opt->resize_height || img.w != opt->resize_width)) {
    ct_image_resize_bilinear(&img, opt->resize_height, opt->resize_width, &resized);
    pix = &resized;
  }
  ct_status st;
  if (!encoding) {
    st = ct_datum_encode_image_raw(pix, label, &out->value, &out->vlen, err);
  } else {
    ct_image_format file_format = ct_image_sniff(bytes, len);
    ct_image_format format = want_format != CT_IMAGE_UNKNOWN ? want_format : file_format;
    int fh, fw, fc = 0;
    bool as_is = !resize_asked && file_format == format &&
                 ct_image_probe(bytes, len, &fh, &fw, &fc, NULL) == CT_OK &&
                 fc == (opt->gray ? 1 : 3);
    if (as_is)
      st = ct_datum_encode_file_bytes(bytes, len, label, &out->value, &out->vlen, err);
    else
      st = ct_datum_encode_image(pix, format, CT_IMAGESET_JPEG_QUALITY, label, &out->value,
                                 &out->vlen, err);
  }
  if (st != CT_OK) ct_error_prefix(err, "%s", path);
  out->c = pix->c;
  out->h = pix->h;
  out->w = pix->w;
  ct_image_free(&resized);
  ct_image_free(&img);
  free(bytes);
  return st;
}

/* ---------------------------------------------------------------- the tool */

/* ROOT + name, with a '/' between them when ROOT is a folder without one. */
static char *image_path(const char *root, bool add_slash, const char *name) {
  size_t n = strlen(root) + strlen(name) + 2;
  char *p = ct_xcalloc(n, 1);
  snprintf(p, n, "%s%s%s", root, add_slash ? "/" : "", name);
  return p;
}

static bool needs_slash(const char *root) {
  size_t n = strlen(root);
  struct stat st;
  return n > 0 && root[n - 1] != '/' && stat(root, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Converts every entry into db; the entries are in their final order. */
static ct_status convert_entries(const char *root, const ct_imageset_entry *entries, size_t n,
                                 const ct_imageset_options *opt, bool encoding,
                                 ct_image_format format, ct_db *db, ct_imageset_result *res,
                                 ct_error *err) {
  bool slash = needs_slash(root);
  bool have_first = false;
  int first_c = 0, first_h = 0, first_w = 0;
  ct_status st = CT_OK;
  for (size_t i = 0; i < n && st == CT_OK; i++) {
    char *path = image_path(root, slash, entries[i].name);
    made_record rec;
    bool skipped;
    st = make_record(path, entries[i].label, opt, encoding, format, &rec, &skipped, err);
    if (st == CT_OK && skipped) res->skipped++;
    if (st == CT_OK && !skipped && opt->check_size) {
      if (!have_first) {
        have_first = true;
        first_c = rec.c, first_h = rec.h, first_w = rec.w;
      } else if (rec.c != first_c || rec.h != first_h || rec.w != first_w) {
        st = ct_error_set(err, CT_ERR_INVALID,
                          "%s: image is %dx%dx%d but the first image was %dx%dx%d (--check_size)",
                          path, rec.c, rec.h, rec.w, first_c, first_h, first_w);
      }
    }
    if (st == CT_OK && !skipped) {
      size_t klen = strlen(entries[i].name) + 32;
      char *key = ct_xcalloc(klen, 1);
      int kn = snprintf(key, klen, "%08zu_%s", i, entries[i].name);
      st = ct_tools_put_owned(db, key, (size_t)kn, &rec.value, rec.vlen, err);
      free(key);
      if (st == CT_OK && ++res->written % CT_TOOLS_PROGRESS_EVERY == 0)
        LOG_INFO("Processed %zu files.", res->written);
    }
    free(rec.value);
    free(path);
  }
  if (st != CT_OK) return st;
  CT_TRY(ct_db_commit(db, err));
  if (res->written % CT_TOOLS_PROGRESS_EVERY != 0) LOG_INFO("Processed %zu files.", res->written);
  if (res->skipped)
    LOG_WARNING("%zu of %zu images could not be read and were skipped", res->skipped, n);
  return CT_OK;
}

ct_status ct_convert_imageset(const char *root_folder, const char *list_path, const char *db_path,
                              const ct_imageset_options *opt, ct_imageset_result *result,
                              ct_error *err) {
  ct_imageset_result res = {0};
  if (result) *result = res;
  ct_image_format format;
  CT_TRY(ct_imageset_parse_encode_type(opt->encode_type, &format, err));
  bool has_type = opt->encode_type && *opt->encode_type;
  if (has_type && !opt->encoded) LOG_INFO("encode_type specified, assuming encoded=true.");
  bool encoding = opt->encoded || has_type;
  if ((opt->resize_width > 0) != (opt->resize_height > 0))
    LOG_WARNING("only one of resize_width and resize_height is set: images are not resized");

  ct_imageset_entry *entries;
  size_t n;
  CT_TRY(ct_imageset_read_list(list_path, &entries, &n, err));
  res.lines = n;
  if (opt->shuffle) {
    LOG_INFO("Shuffling data");
    ct_imageset_shuffle(entries, n, opt->seed);
  }
  LOG_INFO("A total of %zu images.", n);

  ct_tools_out_db out;
  ct_status st = ct_tools_db_create(&out, db_path, opt->backend, err);
  if (st == CT_OK) {
    st = convert_entries(root_folder, entries, n, opt, encoding, format, out.db, &res, err);
    st = ct_tools_db_finish(&out, st, err);
  }
  ct_imageset_entries_free(entries, n);
  if (result) *result = res;
  return st;
}
