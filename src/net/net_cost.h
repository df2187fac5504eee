/* What each layer of a net costs for its current shapes: floating-point
 * operations and memory, for `cortado time`'s report.
 *
 * FLOPs count a multiply-add as 2 and an add, compare or exp as 1:
 *   Convolution     forward 2 N K Ho Wo (C/g) kh kw, + N K Ho Wo for the
 *                   bias; backward the same for the bottom gradient (when
 *                   it is computed), again for the weight gradient, and
 *                   N K Ho Wo for the bias gradient (any number of spatial
 *                   axes; Deconvolution with bottom and top swapped);
 *   InnerProduct    forward 2 M N K (+ M N bias); backward 2 M N K for the
 *                   bottom gradient when computed, 2 M N K for the weights,
 *                   M N for the bias;
 *   Pooling         kh kw per output forward; backward kh kw per output
 *                   (AVE) or 1 (MAX);
 *   element-wise    a few per top value, by type (the table in
 *                   net_cost.c: ReLU 1 and 1, Softmax 4 and 3, ...);
 * other types are not counted (counted = false), e.g. data layers. */
#ifndef CT_NET_NET_COST_H
#define CT_NET_NET_COST_H

#include <stdbool.h>
#include <stddef.h>

#include "net/net.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_layer_cost {
  bool counted;           /* the layer's type has a FLOP count */
  double forward_flops;
  double backward_flops;  /* 0 when the layer has no backward in this net */
  size_t top_bytes;       /* the layer's tops that are not in place on a bottom */
  size_t param_bytes;     /* its learnable parameters (their gradients as many again) */
  size_t workspace_bytes; /* its own scratch (ops->workspace_bytes) */
} ct_layer_cost;

/* The cost of layer i of net (set up) for its current shapes. */
void ct_net_layer_cost(const ct_net *net, int i, ct_layer_cost *cost);

#ifdef __cplusplus
}
#endif

#endif
