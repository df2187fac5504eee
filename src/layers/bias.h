/* Broadcast arithmetic shared by the Bias and Scale layers, and their GPU
 * launchers (bias.cu, scale.cu).
 *
 * Both apply an operand b, whose shape is a run of consecutive axes of
 * bottom[0] starting at `axis`, to every matching slice of bottom[0]: viewed
 * as (outer, dim, inner) with dim = b's count, y[o, d, i] = x[o, d, i] op b[d].
 * A 0-axis (scalar) operand always uses axis 0, as in Caffe. */
#ifndef CT_LAYERS_BIAS_H
#define CT_LAYERS_BIAS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "core/status.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_broadcast_dims {
  int axis;     /* first axis of bottom[0] that the operand covers */
  size_t outer; /* product of bottom[0]'s axes before axis */
  size_t dim;   /* the operand's count */
  size_t inner; /* product of bottom[0]'s axes after the operand's */
} ct_broadcast_dims;

/* Shape of a learned operand for bottom: its axes [axis, axis + num_axes), or
 * through the last axis when num_axes is -1 (Caffe's Bias/Scale LayerSetUp).
 * `what` names the parameter message in errors ("bias_param", "scale_param").
 * Fails with CT_ERR_INVALID for an axis out of range, num_axes < -1, or axes
 * past the end of bottom. */
ct_status ct_broadcast_param_shape(const ct_tensor *bottom, int axis, int num_axes,
                                   const char *what, int *ndim, int shape[CT_MAX_AXES],
                                   ct_error *err);
/* Geometry of operand applied to bottom at axis.  `name` names the operand
 * in errors ("scale", "bias").  Fails with CT_ERR_INVALID when the operand's
 * shape does not match bottom's axes from axis on. */
ct_status ct_broadcast_dims_get(const ct_tensor *bottom, const ct_tensor *operand, int axis,
                                const char *name, ct_broadcast_dims *out, ct_error *err);

/* Host kernels.  y may alias x. */
void ct_bias_forward_cpu(const ct_broadcast_dims *g, const float *x, const float *b, float *y);
/* db(dim) = (accumulate ? db : 0) + sum over outer and inner of dy. */
void ct_bias_backward_operand_cpu(const ct_broadcast_dims *g, const float *dy, bool accumulate,
                                  float *db);

/* GPU launchers on ctx's stream, same contracts. */
void ct_bias_forward_gpu(ct_context *ctx, const ct_broadcast_dims *g, const float *x,
                         const float *b, float *y);
void ct_bias_backward_operand_gpu(ct_context *ctx, const ct_broadcast_dims *g, const float *dy,
                                  bool accumulate, float *db);

#ifdef __cplusplus
}
#endif

#endif
