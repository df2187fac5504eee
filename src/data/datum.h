/* Caffe's Datum records: parsing, checks, pixels, and encoding for tools.
 *
 * A Datum holds one image with an integer label, in one of three forms:
 *   raw      `data` is channels*height*width uint8 in CHW order (BGR planes
 *            for colour, as Caffe's tools store them);
 *   float    `float_data` is channels*height*width floats (CHW), `data` empty;
 *   encoded  `encoded` is true and `data` holds a whole JPEG or PNG file;
 *            channels/height/width are usually unset and come from the
 *            image.  Decoding gives BGR, as OpenCV does in Caffe.
 *
 * Messages about a record start with a `where` string that names it, made by
 * ct_datum_where: "record 00000012 of /data/mnist_train_lmdb". */
#ifndef CT_DATA_DATUM_H
#define CT_DATA_DATUM_H

#include <stddef.h>
#include <stdint.h>

#include "caffe.pb-c.h"
#include "core/status.h"
#include "data/image.h"
#include "data/transform.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes "record KEY of DB" into buf (non-printable key bytes as \xNN) and
 * returns buf. */
char *ct_datum_where(char *buf, size_t len, const void *key, size_t klen, const char *db_path);

/* Parses a serialized Datum.  *out is freed with ct_datum_free.
 * Errors: CT_ERR_PARSE "WHERE: not a valid caffe.Datum (truncated or corrupt, N bytes)". */
ct_status ct_datum_parse(const void *buf, size_t len, const char *where, Caffe__Datum **out,
                         ct_error *err);
void ct_datum_free(Caffe__Datum *d);

/* Checks a parsed Datum's own consistency (not its decoded pixels).
 * Errors (CT_ERR_INVALID):
 *   "WHERE: data has 780 bytes for shape 1x28x28 = 784"
 *   "WHERE: float_data has 780 values for shape 1x28x28 = 784"
 *   "WHERE: bad shape 0x28x28 (channels, height and width must be positive)"
 *   "WHERE: no pixels (data and float_data are both empty)"
 *   "WHERE: encoded but data is empty" */
ct_status ct_datum_check(const Caffe__Datum *d, const char *where, ct_error *err);

/* The shape the Datum's pixels have under colour mode `mode` (which only
 * affects encoded datums: Caffe ignores force_color/force_gray for raw ones).
 * Encoded images are probed (header only).  Errors: those of ct_datum_check
 * and ct_image_probe (prefixed with WHERE). */
ct_status ct_datum_shape(const Caffe__Datum *d, ct_color_mode mode, int *c, int *h, int *w,
                         const char *where, ct_error *err);

/* A view of the Datum's pixels (checked with ct_datum_check first): raw and
 * float datums are viewed in place (CHW, U8 or F32); encoded ones are decoded
 * into *scratch (reallocated as needed; the caller frees it with
 * ct_image_free) and viewed as HWC U8.  The view is valid while d and
 * *scratch are.  Errors: those of ct_datum_check and ct_image_decode
 * ("WHERE: corrupt JPEG: ..."). */
ct_status ct_datum_pixels(const Caffe__Datum *d, ct_color_mode mode, ct_image *scratch,
                          ct_pixels *out, const char *where, ct_error *err);

/* Decodes the Datum's pixels to c x h x w floats (CHW) in a malloc'd array
 * (*out, freed by the caller), with the shape in c/h/w.  For tools (e.g.
 * compute_image_mean).  Errors: those of ct_datum_pixels. */
ct_status ct_datum_to_float(const Caffe__Datum *d, ct_color_mode mode, float **out, int *c,
                            int *h, int *w, const char *where, ct_error *err);

/* ------------------------------------------------------------ encoding */
/* Each makes a serialized Datum in a malloc'd buffer (*buf of *len bytes; the caller
 * frees it).  Errors: CT_ERR_INVALID for non-positive sizes; those of the
 * image encoders. */

/* A raw datum of c x h x w uint8 pixels given in CHW order. */
ct_status ct_datum_encode_raw(const uint8_t *chw, int c, int h, int w, int label, uint8_t **buf,
                              size_t *len, ct_error *err);
/* A raw datum from an image (HWC, BGR), stored CHW as Caffe's CVMatToDatum does. */
ct_status ct_datum_encode_image_raw(const ct_image *img, int label, uint8_t **buf, size_t *len,
                                    ct_error *err);
/* A float datum of c x h x w values (CHW). */
ct_status ct_datum_encode_float(const float *chw, int c, int h, int w, int label, uint8_t **buf,
                                size_t *len, ct_error *err);
/* An encoded datum holding `file` (the bytes of a JPEG or PNG file, kept as
 * they are, as convert_imageset --encoded does when no resize is needed).
 * Errors: CT_ERR_PARSE when the bytes are neither JPEG nor PNG. */
ct_status ct_datum_encode_file_bytes(const void *file, size_t flen, int label, uint8_t **buf,
                                     size_t *len, ct_error *err);
/* An encoded datum of img compressed as JPEG (quality 1..100) or PNG
 * (quality ignored), as convert_imageset --encode_type does after a resize. */
ct_status ct_datum_encode_image(const ct_image *img, ct_image_format format, int quality,
                                int label, uint8_t **buf, size_t *len, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
