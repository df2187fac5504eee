/* Caffe's DataTransformer for one image: crop, mirror, mean subtraction and
 * scale, with Caffe's order and arithmetic (data_transformer.cpp):
 *
 *   mirror = param.mirror && rand(2)            (first draw, TRAIN and TEST)
 *   crop:  TRAIN  h_off = rand(H - crop + 1), w_off = rand(W - crop + 1)
 *          TEST   h_off = (H - crop) / 2,     w_off = (W - crop) / 2
 *   out[c][h][w'] = (in[c][h_off + h][w_off + w] - mean) * scale
 *          with w' = crop_w - 1 - w when mirrored, and mean either
 *          mean_file[c][h_off + h][w_off + w] (the mean is as large as the
 *          uncropped input and is cropped at the same offset) or
 *          mean_value[c] (one value is used for every channel); all in float.
 *
 * NVCaffe's random resize (img_rand_resize_lower L / _upper U, with
 * crop_size) comes before all of it, in both phases: size = L + rand(U - L
 * + 1) (the first draw), and the image is resized (OpenCV's INTER_LINEAR)
 * so that its shorter side is size and the other keeps the aspect, each
 * side rounded and at least crop_size; then the rules above on the resized
 * image.  8-bit images only.
 *
 * Random draws come from the ct_rng given to each call, so the caller decides
 * where randomness comes from (the pipeline gives every record its own). */
#ifndef CT_DATA_TRANSFORM_H
#define CT_DATA_TRANSFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caffe.pb-c.h"
#include "core/rng.h"
#include "core/status.h"
#include "data/image.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A read-only view of one input image: c x h x w values of type u8 or f32,
 * element (ci, y, x) at index ci*cstride + y*ystride + x*xstride.
 * CHW arrays have strides (h*w, w, 1); HWC ones (1, w*c, c). */
typedef enum ct_pixel_type { CT_PIXEL_U8 = 0, CT_PIXEL_F32 = 1 } ct_pixel_type;
typedef struct ct_pixels {
  ct_pixel_type type;
  const void *data;
  int c, h, w;
  ptrdiff_t cstride, ystride, xstride;
} ct_pixels;

/* Views over CHW and HWC arrays. */
ct_pixels ct_pixels_chw(ct_pixel_type type, const void *data, int c, int h, int w);
ct_pixels ct_pixels_hwc(ct_pixel_type type, const void *data, int c, int h, int w);

typedef struct ct_transform ct_transform;

/* Makes a transformer from a TransformationParameter (NULL: Caffe's defaults,
 * i.e. the identity) for the given phase.  Loads mean_file (a binary
 * BlobProto, e.g. imagenet_mean.binaryproto, of shape 1xCxHxW or CxHxW).
 * Errors:
 *   CT_ERR_INVALID "cannot give both mean_file and mean_value"
 *   CT_ERR_INVALID "force_color and force_gray cannot both be set"
 *   the errors of ct_proto_read_binary for the mean file, and
 *   CT_ERR_INVALID "PATH: mean_file must hold one image (1xCxHxW), got 2x3x4x4"
 *   CT_ERR_INVALID "PATH: mean_file holds 47 values for shape 1x3x4x4 = 48"
 *   CT_ERR_INVALID for img_rand_resize_lower / _upper given alone, upper below
 *   lower, without crop_size or with mean_file (each message names the fields) */
ct_status ct_transform_create(const Caffe__TransformationParameter *param, ct_phase phase,
                              ct_transform **out, ct_error *err);
void ct_transform_free(ct_transform *t);

/* The parameter's colour mode for encoded images (force_color / force_gray). */
ct_color_mode ct_transform_color_mode(const ct_transform *t);
int ct_transform_crop_size(const ct_transform *t);
/* For layers that apply the mean themselves (WindowData): mean_file's
 * values (c, h, w), NULL without one; and the mean_value entries (*n of
 * them), NULL without any. */
const float *ct_transform_mean_file(const ct_transform *t, int *c, int *h, int *w);
const float *ct_transform_mean_values(const ct_transform *t, int *n);

/* The shape (c, oh, ow) of the output for an input of c x h x w, checked
 * against the transformer.  `where` (may be NULL) starts the messages, e.g.
 * "record 00000012 of /data/train_lmdb".  Errors (CT_ERR_INVALID):
 *   "WHERE: crop_size 224 is larger than the image 3x200x256"
 *   "WHERE: image 3x32x32 does not match mean_file PATH (3x28x28)"
 *   "WHERE: 2 mean_value(s) for a 3-channel image (give 1 or 3)" */
ct_status ct_transform_output_shape(const ct_transform *t, int c, int h, int w, int *oc, int *oh,
                                    int *ow, const char *where, ct_error *err);

/* Transforms one image into out (oc x oh x ow floats, CHW, as given by
 * ct_transform_output_shape), drawing mirror and crop from rng (in that
 * order, only for what is enabled: mirror first when param.mirror, then
 * h_off and w_off when cropping in TRAIN).  Errors: those of
 * ct_transform_output_shape. */
ct_status ct_transform_apply(const ct_transform *t, const ct_pixels *in, ct_rng *rng, float *out,
                             const char *where, ct_error *err);

/* The same with the random choices given explicitly (for tests and for
 * callers with their own randomness): mirror, and the crop offsets, which
 * must fit (0 <= h_off <= h - crop). */
ct_status ct_transform_apply_at(const ct_transform *t, const ct_pixels *in, bool mirror, int h_off,
                                int w_off, float *out, const char *where, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
