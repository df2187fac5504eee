/* Traces of ranks in several processes (core/trace.h): their clocks
 * aligned with rank 0's and their events sent to rank 0, through the run's
 * communicator. */
#ifndef CT_PARALLEL_TRACE_RANKS_H
#define CT_PARALLEL_TRACE_RANKS_H

#include "core/status.h"
#include "parallel/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective (every rank of c calls it, after ct_trace_start): aligns this
 * process's trace clock with rank 0's.  Each of several rounds reads the
 * clock right after a barrier and compares it with rank 0's reading; the
 * median difference is the offset (good to the barrier's exit skew: a few
 * microseconds on one host, tens over a network).  Errors: the
 * communicator's. */
ct_status ct_trace_ranks_align(ct_comm *c, ct_error *err);

/* Collective: every rank's events go to rank 0 (ct_trace_add_json), whose
 * ct_trace_write writes them all; the others write nothing.  The window
 * closes for good.  Errors: the communicator's. */
ct_status ct_trace_ranks_gather(ct_comm *c, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
