/* Finite-difference gradient checking of a layer, with Caffe's semantics:
 * central differences with step h, a kink band where the function is not
 * differentiable, and a relative threshold:
 *     |analytic - numeric| <= threshold * max(|analytic|, |numeric|, 1).
 *
 * The scalar checked is L = sum over tops t, elements i of w_t,i * top_t,i with
 * fixed random weights w (drawn from seed), so one backward pass gives the
 * whole vector-Jacobian product, and each input value is perturbed in turn.
 * For a loss layer, its loss weight multiplies as usual (top diff = weight).
 * The layer's RNG is restored before every forward, so random layers
 * (Dropout) see the same mask each time.  Works on any device (values are
 * moved through the host). */
#ifndef CT_TESTS_GRADCHECK_H
#define CT_TESTS_GRADCHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/layer.h"

typedef struct ct_gradcheck_opts {
  float step;        /* h; Caffe's tests mostly use 1e-2 */
  float threshold;   /* Caffe's tests mostly use 1e-3 */
  float kink;        /* skip inputs within kink_range of kink */
  float kink_range;  /* < 0: no kink band */
  uint64_t seed;
  int check_bottom;  /* -1: every bottom; else only that one */
  bool check_params; /* also check the learnable parameters */
  bool skip_bottom[8]; /* bottoms never checked (e.g. labels) */
} ct_gradcheck_opts;

/* Defaults: step 1e-2, threshold 1e-3, no kink, seed 1701, all bottoms and params. */
ct_gradcheck_opts ct_gradcheck_defaults(void);

/* Checks layer l (already set up with these bottoms and tops).  Returns true
 * when every checked gradient is within bounds; otherwise false with the
 * first failure described in msg (input, index, analytic, numeric).
 * *nchecked receives how many values were compared. */
bool ct_gradcheck(ct_layer *l, ct_tensor **bottom, ct_tensor **top, const ct_gradcheck_opts *o,
                  char *msg, size_t msg_len, long *nchecked);

#endif
