/* Layer type names of the two legacy Caffe net formats.
 *
 *   V0: `layers { layer { type: "conv" } }`       lower-case strings
 *   V1: `layers { type: CONVOLUTION }`            V1LayerParameter.LayerType
 *   V2: `layer { type: "Convolution" }`           the current strings
 *
 * The tables follow BVLC Caffe's upgrade rules exactly. */
#ifndef CT_PROTO_LEGACY_TYPES_H
#define CT_PROTO_LEGACY_TYPES_H

#include <stdbool.h>

#include "caffe.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The V2 type string for a V1 layer type ("Convolution" for CONVOLUTION,
 * "" for NONE), or NULL when the value is not a V1 layer type Caffe knows. */
const char *ct_v1_layer_type_name(Caffe__V1LayerParameter__LayerType v1_type);

/* The V1 layer type for a V0 type string ("conv" -> CONVOLUTION).  Returns
 * false when Caffe does not know the string (note "padding" is not a layer:
 * V0 padding layers are folded into the layer that follows them). */
bool ct_v0_layer_type_to_v1(const char *v0_type, Caffe__V1LayerParameter__LayerType *v1_type);

#ifdef __cplusplus
}
#endif

#endif
