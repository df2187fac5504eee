/* A layer under test: its context, the layer, bottoms and tops.
 *
 *   tu_layer_case c;
 *   tu_layer_case_init(&c, &param, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5; 2,3,4,5", 1);
 *   ... c.bottom[i], c.top[i], c.l ...
 *   tu_layer_case_free(&c);
 *
 * The shape spec lists the bottoms separated by ';', each a comma-separated
 * shape ("" for a 0-axis blob is written as "-").  Bottom values are uniform
 * in [-1, 1) from a fixed seed; overwrite them (tu_set_values) before forward
 * when the layer needs labels or positive inputs.  The layer is created and
 * set up (params filled from their fillers with the context's RNG). */
#ifndef CT_TESTS_LAYERTEST_H
#define CT_TESTS_LAYERTEST_H

#include <stdbool.h>
#include <stdint.h>

#include "gradcheck.h"
#include "layers/layer.h"

#define TU_MAX_BLOBS 8

typedef struct tu_layer_case {
  ct_context ctx;
  ct_layer *l;
  int nb, nt;
  ct_tensor *bottom[TU_MAX_BLOBS];
  ct_tensor *top[TU_MAX_BLOBS];
} tu_layer_case;

/* When set, cases made from now on compute in strict FP32 on a GPU (no
 * TF32). */
extern bool tu_layer_strict_fp32;
/* The memory order tu_layer_case_try_typed gives the layer and its bottoms
 * and tops (CT_NCHW unless a test sets it; values are uploaded and read in
 * the logical order whatever it is). */
extern ct_layout tu_layer_layout;

/* Fails the test (cmocka) when the layer cannot be created or set up. */
void tu_layer_case_init(tu_layer_case *c, const Caffe__LayerParameter *p, int device, ct_phase phase,
                        const char *bottom_shapes, int ntop);
/* The same, returning the status and message instead of failing (for tests of
 * bad parameters). */
ct_status tu_layer_case_try(tu_layer_case *c, const Caffe__LayerParameter *p, int device,
                            ct_phase phase, const char *bottom_shapes, int ntop, ct_error *err);
/* The same with the layer, its bottoms and tops in element type `type` (as
 * the net's dtype pass would run it; bottoms drawn in float32 and
 * rounded). */
ct_status tu_layer_case_try_typed(tu_layer_case *c, const Caffe__LayerParameter *p, int device,
                                  ct_phase phase, const char *bottom_shapes, int ntop,
                                  ct_dtype type, ct_error *err);
void tu_layer_case_free(tu_layer_case *c);
/* Forward; fails the test on error. */
void tu_forward(tu_layer_case *c);
/* Upload host values into a tensor's data. */
void tu_set_values(ct_tensor *t, const float *values);
/* Fill a tensor's data uniform in [lo, hi) from seed. */
void tu_fill(ct_tensor *t, float lo, float hi, uint64_t seed);
/* Download a tensor's data into a malloc'd host array (caller frees). */
float *tu_values(const ct_tensor *t);

/* Runs the gradient checker on the case and fails the test with its message. */
void tu_check_gradient(tu_layer_case *c, const ct_gradcheck_opts *o);

/* GPU against CPU: builds the same layer on the CPU and on GPU 0 with the same
 * bottoms, the same parameters and the same top diffs, runs forward and
 * backward on both and asserts that tops, bottom diffs and parameter diffs
 * agree to max relative error rel_tol (with an absolute floor of 1e-3 on the
 * denominators).  `prepare`, when not NULL, is called on each case after
 * setup to set special bottom values (labels, ...). Skips nothing: call
 * tu_require_gpu() first. */
void tu_compare_cpu_gpu(const Caffe__LayerParameter *p, ct_phase phase, const char *bottom_shapes,
                        int ntop, double rel_tol, void (*prepare)(tu_layer_case *c));

#endif
