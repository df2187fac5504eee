/* Steps over a net's layers (steps.c), for the runtime's programs.
 * Internal to src/runtime. */
#ifndef CT_RUNTIME_STEPS_H
#define CT_RUNTIME_STEPS_H

#include "net/net.h"
#include "runtime/program.h"

/* Appends the start of an iteration: zero the loss sum and the flat
 * parameter gradient, and arm the layers' prepared work
 * (ct_net_prepare_async). */
void ct_steps_begin(ct_program *p, ct_net *net);
/* Appends one forward pass: every layer, adding the weighted loss tops to
 * the loss sum; GPU data layers with batch hooks become feed steps (copies
 * from a staging buffer, net_feed.h). */
void ct_steps_forward(ct_program *p, ct_net *net);
/* The same over layers [first, end) (a pipeline stage's), and after each
 * layer's step after(user, p, i) may append steps of its own (NULL: none).
 * A recomputation (a micro-batch's forward again, for its backward) leaves
 * out the layers without bottoms (data layers: their tops were kept) and
 * runs the others with ct_layer.recomputing set. */
void ct_steps_forward_range(ct_program *p, ct_net *net, int first, int end, bool recompute,
                            void (*after)(void *user, ct_program *p, int layer), void *user);
/* Appends one backward pass: the layers that need it, in reverse.  After
 * the place of each layer i (whether it has a step or not), after(user, p,
 * i) may append steps of its own (NULL: none). */
void ct_steps_backward(ct_program *p, ct_net *net,
                       void (*after)(void *user, ct_program *p, int layer), void *user);
/* The same over layers [first, end), from end - 1 down to first. */
void ct_steps_backward_range(ct_program *p, ct_net *net, int first, int end,
                             void (*after)(void *user, ct_program *p, int layer), void *user);
/* Appends the staging of the next batch of every fed data layer (at the end
 * of the program, after the graphs are launched). */
void ct_steps_prefetch(ct_program *p, ct_net *net);

#endif
