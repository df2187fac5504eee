/* Mixed-precision layer tests: a layer run in a 16-bit type against its
 * float32 twin (the same parameters, bottoms and top gradients), on the
 * host or a GPU.
 *
 *   tu_twin_check(&param, CT_DEVICE_CPU, CT_BF16, "2,3,8,8", 1, 1.0 / 64);
 *
 * builds the layer twice, runs forward and backward on both, and fails the
 * test when a top, a bottom gradient or a parameter gradient of the 16-bit
 * run differs from the float32 run's by more than rel_bound times the
 * largest magnitude of the float32 values (per array).  Parameters stay
 * float32 in both (the master copy); bottoms and top gradients are drawn in
 * float32 and rounded to the 16-bit type for both runs, so that only the
 * layer's own arithmetic differs. */
#ifndef CT_TESTS_MPTEST_H
#define CT_TESTS_MPTEST_H

#include "layers/layer.h"

/* A LayerParameter from text format (fails the test on a parse error); free
 * with protobuf_c_message_free_unpacked. */
Caffe__LayerParameter *tu_layer_from(const char *text);

/* The largest |a - b| over n values, relative to the largest |a|. */
double tu_rel_error(const float *a, const float *b, size_t n);

void tu_twin_check(const Caffe__LayerParameter *p, int device, ct_dtype type,
                   const char *bottom_shapes, int ntop, double rel_bound);
/* The same with the 16-bit layer, its bottoms and tops in memory order
 * layout (the float32 twin stays NCHW). */
void tu_twin_check_layout(const Caffe__LayerParameter *p, int device, ct_dtype type,
                          ct_layout layout, const char *bottom_shapes, int ntop, double rel_bound);

#endif
