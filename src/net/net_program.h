/* A net's passes as steps of a program (net_exec.h), for runtimes that
 * replay whole iterations as CUDA graphs: the solver's GPU iteration and
 * `cortado time`. */
#ifndef CT_NET_NET_PROGRAM_H
#define CT_NET_NET_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "net/net.h"
#include "net/net_exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Appends the start of an iteration: zero the loss sum and, when
 * clear_param_diffs, the flat parameter gradient. */
void ct_net_program_begin(ct_net *net, ct_exec *ex, bool clear_param_diffs);
/* Appends one forward pass: every layer, adding the weighted loss tops to
 * the loss sum (data layers with batch hooks as copies from a staging
 * buffer, see net_feed.h). */
void ct_net_program_forward(ct_net *net, ct_exec *ex);
/* Appends one backward pass: the layers that need it, in reverse, with the
 * grad hook (with a grad hook set these steps run plainly, as the hook is
 * host code). */
void ct_net_program_backward(ct_net *net, ct_exec *ex);
/* The forward pass and, when backward, the backward pass. */
void ct_net_program_pass(ct_net *net, ct_exec *ex, bool backward);
/* Appends the read back of the loss sum and the check word (finish it with
 * ct_net_readback_finish after the run). */
void ct_net_program_end(ct_net *net, ct_exec *ex);
/* A hash of where the net's storage lives (blob data and diffs, the flat
 * buffers, the diff pool) and of its layout version: it changes when a
 * replayed graph would touch stale memory. */
uint64_t ct_net_signature(const ct_net *net);

#ifdef __cplusplus
}
#endif

#endif
