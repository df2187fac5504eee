/* 8-bit images: JPEG (libjpeg-turbo) and PNG (libpng) decode and encode,
 * OpenCV-style bilinear resize, and layout / colour conversions.
 *
 * A ct_image holds h x w pixels of c channels (1 gray, 3 colour) as uint8 in
 * HWC order (OpenCV's cv::Mat layout).  Colour images are in BGR order, as
 * OpenCV's imread/imdecode give them and as Caffe's models expect. */
#ifndef CT_DATA_IMAGE_H
#define CT_DATA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_image {
  int h, w, c;     /* c is 1 (gray) or 3 (BGR) */
  uint8_t *data;   /* (h, w, c), owned; free with ct_image_free */
} ct_image;

/* How decoding treats colour (OpenCV's imread flags). */
typedef enum ct_color_mode {
  CT_COLOR_NATIVE = 0, /* as stored: gray stays 1 channel, colour gives 3 (BGR) */
  CT_COLOR_FORCE_COLOR, /* always 3 channels (gray replicated) */
  CT_COLOR_FORCE_GRAY   /* always 1 channel (colour converted to luma) */
} ct_color_mode;

typedef enum ct_image_format { CT_IMAGE_UNKNOWN = 0, CT_IMAGE_JPEG, CT_IMAGE_PNG } ct_image_format;

/* The format from the first bytes (JPEG: FF D8 FF, PNG: the 8-byte signature). */
ct_image_format ct_image_sniff(const void *buf, size_t len);

/* Reads only the header: height, width and stored channels (1 or 3; alpha
 * not counted) of a JPEG or PNG in memory.  Errors: as ct_image_decode. */
ct_status ct_image_probe(const void *buf, size_t len, int *h, int *w, int *c, ct_error *err);

/* Decodes a JPEG or PNG held in memory into *out (allocated; the caller frees
 * it with ct_image_free).  Colour comes out BGR; alpha is dropped; 16-bit PNG
 * samples are reduced to 8 bits; palette PNGs are expanded.  Gray from a
 * colour image uses OpenCV's luma weights (0.299 R + 0.587 G + 0.114 B,
 * rounded as cvtColor does); JPEG gray comes from libjpeg's own Y channel, as
 * in OpenCV.  Errors (out->data is NULL):
 *   CT_ERR_PARSE "not a JPEG or PNG image (N bytes, starting 12 34 56 78)"
 *   CT_ERR_PARSE "corrupt JPEG: <libjpeg message>" / "corrupt PNG: <libpng message>"
 *   CT_ERR_INVALID "image too large (W x H)" beyond 65535 x 65535 or 2^31 bytes. */
ct_status ct_image_decode(const void *buf, size_t len, ct_color_mode mode, ct_image *out,
                          ct_error *err);
/* Reads and decodes the file at path; errors start with the path
 * ("PATH: cannot open: ...", "PATH: corrupt JPEG: ..."). */
ct_status ct_image_read_file(const char *path, ct_color_mode mode, ct_image *out, ct_error *err);

/* Encodes img as a baseline JPEG of the given quality (1..100; 4:2:0
 * subsampling for colour, as OpenCV's imencode default) or as a PNG
 * (compression level 0..9; -1 for zlib's default).  *buf is malloc'd, the
 * caller frees it.  Errors: CT_ERR_INVALID for a bad quality/level or a
 * channel count other than 1 or 3. */
ct_status ct_image_encode_jpeg(const ct_image *img, int quality, uint8_t **buf, size_t *len,
                               ct_error *err);
ct_status ct_image_encode_png(const ct_image *img, int level, uint8_t **buf, size_t *len,
                              ct_error *err);

/* A new zeroed image of the given size (never fails: sizes are validated by
 * the caller). */
void ct_image_alloc(ct_image *img, int h, int w, int c);
void ct_image_free(ct_image *img);

/* Resizes src to new_h x new_w into *dst (allocated here) with OpenCV's
 * INTER_LINEAR arithmetic for 8-bit images (pixel centres aligned, 11-bit
 * fixed-point weights, edge pixels replicated; an exact 2x downscale averages
 * 2x2 blocks, as OpenCV does), which is what Caffe's ReadImageToCVMat uses.
 * src and dst must differ. */
void ct_image_resize_bilinear(const ct_image *src, int new_h, int new_w, ct_image *dst);

/* Colour conversions into *dst (allocated): BGR -> gray with OpenCV's
 * fixed-point weights, gray -> BGR by replication.  A src already of the
 * wanted kind is copied. */
void ct_image_to_gray(const ct_image *src, ct_image *dst);
void ct_image_to_color(const ct_image *src, ct_image *dst);

/* Layout changes: HWC (h, w, c) <-> CHW (c, h, w), uint8 in and out. */
void ct_image_hwc_to_chw(const uint8_t *hwc, int h, int w, int c, uint8_t *chw);
void ct_image_chw_to_hwc(const uint8_t *chw, int h, int w, int c, uint8_t *hwc);

#ifdef __cplusplus
}
#endif

#endif
