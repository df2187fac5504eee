/* cortado.h: reading and writing images (the data layers' codecs: JPEG
 * through libjpeg-turbo, PNG through libpng), in RGB order for callers. */
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "core/fileio.h"
#include "data/image.h"

void cortado_free(void *p) { free(p); }

/* BGR <-> RGB in place. */
static void swap_red_blue(uint8_t *px, size_t pixels) {
  for (size_t i = 0; i < pixels; i++) {
    uint8_t t = px[3 * i];
    px[3 * i] = px[3 * i + 2];
    px[3 * i + 2] = t;
  }
}

cortado_status cortado_image_read(const char *path, bool color, int *h, int *w, int *c,
                                  unsigned char **pixels) {
  *pixels = NULL;
  ct_error err;
  ct_image img;
  if (ct_image_read_file(path, color ? CT_COLOR_FORCE_COLOR : CT_COLOR_FORCE_GRAY, &img, &err) != CT_OK)
    return api_fail(&err);
  const size_t bytes = (size_t)img.h * (size_t)img.w * (size_t)img.c;
  unsigned char *out = malloc(bytes ? bytes : 1);
  if (!out) {
    ct_image_free(&img);
    return cortado_set_error(CORTADO_ERR_NOMEM, "%s: out of memory for %zu bytes", path, bytes);
  }
  memcpy(out, img.data, bytes);
  if (img.c == 3) swap_red_blue(out, (size_t)img.h * (size_t)img.w);
  *h = img.h;
  *w = img.w;
  *c = img.c;
  *pixels = out;
  ct_image_free(&img);
  return CORTADO_OK;
}

cortado_status cortado_image_write_png(const char *path, const unsigned char *pixels, int h, int w, int c) {
  if ((c != 1 && c != 3) || h <= 0 || w <= 0)
    return cortado_set_error(CORTADO_ERR_INVALID, "%s: a PNG of %d x %d x %d: give 1 or 3 channels and a "
                                                  "positive size", path, h, w, c);
  ct_error err;
  ct_image img;
  ct_image_alloc(&img, h, w, c);
  memcpy(img.data, pixels, (size_t)h * (size_t)w * (size_t)c);
  if (c == 3) swap_red_blue(img.data, (size_t)h * (size_t)w);
  uint8_t *buf = NULL;
  size_t len = 0;
  ct_status st = ct_image_encode_png(&img, -1, &buf, &len, &err);
  ct_image_free(&img);
  if (st == CT_OK) st = ct_file_write_atomic(path, buf, len, &err);
  free(buf);
  return api_result(st, &err);
}
