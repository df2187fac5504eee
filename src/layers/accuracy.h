/* GPU launchers of Accuracy (accuracy.cu), on ctx's stream.  Scores are
 * (outer, C, inner) around the class axis; labels (outer, inner). */
#ifndef CT_LAYERS_ACCURACY_H
#define CT_LAYERS_ACCURACY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per position: hit = 1 when at most top_k classes score >= the label's
 * (the label included), else 0; flag 1 valid, 0 ignored, -1 a label outside
 * [0, C). */
void ct_accuracy_forward_gpu(ct_context *ctx, size_t outer, int C, size_t inner, const float *x,
                             const float *label, unsigned top_k, bool has_ignore, int ignore_label,
                             float *hit, float *flag);
/* per_class(C) = hits / valid positions of each class (0 for none), from the
 * per-position hit and flag above. */
void ct_accuracy_per_class_gpu(ct_context *ctx, size_t positions, int C, const float *label,
                               const float *hit, const float *flag, float *per_class);

#ifdef __cplusplus
}
#endif

#endif
