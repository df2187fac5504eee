/* Fillers: the initial values of learnable parameters, as Caffe's
 * FillerParameter describes them (constant, uniform, gaussian with sparse,
 * positive_unitball, xavier, msra, bilinear).  Always run on the host, so that
 * a net starts from the same numbers on every device. */
#ifndef CT_LAYERS_FILLER_H
#define CT_LAYERS_FILLER_H

#include "caffe.pb-c.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/tensor.h"

/* Fills host tensor t as fp says (NULL means Caffe's default: constant 0).
 * Fails with CT_ERR_INVALID for an unknown filler type (with a suggestion) or
 * a shape the filler cannot fill (e.g. bilinear needs 4 axes, height == width). */
ct_status ct_filler_fill(const Caffe__FillerParameter *fp, ct_tensor *t, ct_rng *rng, ct_error *err);

#endif
