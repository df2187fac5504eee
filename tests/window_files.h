/* Image files and window files for the WindowData tests
 * (test_layer_window_data.c, test_gpu_layer_data_io.c). */
#ifndef CT_TESTS_WINDOW_FILES_H
#define CT_TESTS_WINDOW_FILES_H

#include <stdio.h>

#include "data/image.h"
#include "testutil.h"

#define WF_IMG 16 /* the test images are WF_IMG x WF_IMG */

/* Pixel (y, x, c) of test image k. */
static inline uint8_t wf_px(int k, int y, int x, int c) {
  return (uint8_t)(k * 40 + y * 13 + x * 5 + c * 70);
}

/* Image k as PNG (lossless) or JPEG at path. */
static inline void wf_write_image(const char *path, int k, bool jpeg) {
  ct_image img;
  ct_image_alloc(&img, WF_IMG, WF_IMG, 3);
  for (int y = 0; y < WF_IMG; y++)
    for (int x = 0; x < WF_IMG; x++)
      for (int c = 0; c < 3; c++) img.data[(y * WF_IMG + x) * 3 + c] = wf_px(k, y, x, c);
  uint8_t *buf;
  size_t len;
  ct_error err;
  if (jpeg) assert_int_equal(ct_image_encode_jpeg(&img, 95, &buf, &len, &err), CT_OK);
  else assert_int_equal(ct_image_encode_png(&img, 1, &buf, &len, &err), CT_OK);
  tu_write_file(path, (const char *)buf, len);
  free(buf);
  ct_image_free(&img);
}

/* A test folder with images im0.png (image 0), im1.jpg (image 1) and the
 * window file `text` as windows.txt: *source (600 bytes) gets its path and
 * *root (620 bytes) the folder with a trailing '/', the root_folder of the
 * window file's paths. */
static inline void wf_make_dir(const char *name, const char *text, char *source, char *root) {
  const char *dir = tu_tmpdir(name);
  char path[600];
  snprintf(path, sizeof path, "%s/im0.png", dir);
  wf_write_image(path, 0, false);
  snprintf(path, sizeof path, "%s/im1.jpg", dir);
  wf_write_image(path, 1, true);
  snprintf(source, 600, "%s/windows.txt", dir);
  tu_write_file(source, text, strlen(text));
  snprintf(root, 620, "%s/", dir);
}

#endif
