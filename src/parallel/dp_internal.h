/* Helpers shared by the data-parallel drivers' source files; not a public
 * API. */
#ifndef CT_PARALLEL_DP_INTERNAL_H
#define CT_PARALLEL_DP_INTERNAL_H

#include <stdbool.h>

#include "core/status.h"
#include "parallel/comm.h"

/* Every rank runs the cuDNN convolution algorithms that rank root's process
 * chose.  Root calls this with send=true after building its nets; every
 * other rank with send=false before building its own: it blocks until root's
 * table arrives and adds it to this process's table, so its nets find their
 * shapes there instead of benchmarking.  Replicas then run the same kernels
 * at the same pace (an iteration goes at the slowest one's), and a run's
 * choices no longer differ by rank.  Host all-reduces over comm, under its
 * watchdog.  Shapes root never benchmarked, or GPUs of another kind, are
 * still benchmarked locally.  Nothing in a build without CUDA. */
ct_status ct_dp_share_conv_algos(ct_comm *comm, bool send, ct_error *err);

#endif
