/* libFuzzer harness: arbitrary bytes as a Datum record of a DB, through the
 * path a Data layer takes (parse, check, shape, pixels with each colour
 * mode, which decodes encoded JPEG/PNG), and as a bare image file through the
 * image decoder (the ImageData path).  Nothing may crash, leak or read out of
 * bounds; a decoded image must have the shape its header promised. */
#include <stdint.h>
#include <stdlib.h>

#include "data/datum.h"
#include "data/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Images larger than this are skipped (a header may promise gigabytes). */
#define MAX_PIXELS (16u << 20)

static void decode_image(const uint8_t *data, size_t size) {
  int h, w, c;
  ct_error err;
  if (ct_image_probe(data, size, &h, &w, &c, &err) != CT_OK) return;
  if ((size_t)h * (size_t)w * 3 > MAX_PIXELS) return;
  static const ct_color_mode modes[] = {CT_COLOR_NATIVE, CT_COLOR_FORCE_COLOR, CT_COLOR_FORCE_GRAY};
  for (size_t m = 0; m < 3; m++) {
    ct_image img = {0};
    if (ct_image_decode(data, size, modes[m], &img, &err) == CT_OK) {
      if (img.h != h || img.w != w) abort();
      ct_image_free(&img);
    }
  }
}

static void datum_path(const uint8_t *data, size_t size) {
  Caffe__Datum *d;
  ct_error err;
  if (ct_datum_parse(data, size, "fuzz", &d, &err) != CT_OK) return;
  if (ct_datum_check(d, "fuzz", &err) == CT_OK) {
    static const ct_color_mode modes[] = {CT_COLOR_NATIVE, CT_COLOR_FORCE_COLOR, CT_COLOR_FORCE_GRAY};
    for (size_t m = 0; m < 3; m++) {
      int c, h, w;
      if (ct_datum_shape(d, modes[m], &c, &h, &w, "fuzz", &err) != CT_OK) continue;
      if ((size_t)c * (size_t)h * (size_t)w > MAX_PIXELS) continue;
      ct_image scratch = {0};
      ct_pixels px;
      if (ct_datum_pixels(d, modes[m], &scratch, &px, "fuzz", &err) == CT_OK) {
        float *f = NULL;
        int c2, h2, w2;
        if (ct_datum_to_float(d, modes[m], &f, &c2, &h2, &w2, "fuzz", &err) == CT_OK) {
          if (c2 != c || h2 != h || w2 != w) abort();
          free(f);
        }
      }
      ct_image_free(&scratch);
    }
  }
  ct_datum_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  /* The first byte picks the path, so one corpus serves both. */
  if (data[0] & 1) decode_image(data + 1, size - 1);
  else datum_path(data + 1, size - 1);
  return 0;
}
