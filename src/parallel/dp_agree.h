/* What the workers of a data-parallel run must agree on, checked when they
 * meet: shards whose nets differ ran mismatched collectives (Gloo ended the
 * process from its network thread, status 134), and shards whose solvers
 * differ trained on silently with averaged gradients of different updates.
 *
 * The agreement is a text, one line per item, the same on every worker of a
 * run that may train together:
 *
 *   flag --bucket_mb: 25
 *   solver base_lr: 0.01
 *   solver lr_policy: "step"
 *   train_net: 4 layers
 *   train_net layer 1: 'ip' (InnerProduct) 3f2a9c0d1b7e4a55
 *
 * The solver is its fields as text (without the net fields, compared as
 * nets, and without snapshot_prefix and device_id, which only concern one
 * machine); each net (net files read in) is its layers' names, types and a
 * 64-bit digest of each, with data source paths and mean files left out
 * (each machine may keep its own copy of the data). */
#ifndef CT_PARALLEL_DP_AGREE_H
#define CT_PARALLEL_DP_AGREE_H

#include <stdbool.h>
#include <stddef.h>

#include "parallel/comm.h"
#include "parallel/dp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The agreement text of job (malloc'd; caller frees).  Errors: reading a net
 * file the solver names. */
ct_status ct_dp_agreement(const ct_dp_job *job, char **out, ct_error *err);

/* Compares the agreement `theirs` of worker `them` ("shard 1", "rank 3")
 * with `mine` of `me`.  Returns CT_OK when they are equal, else
 * CT_ERR_INVALID with a message naming what differs, up to 3 items, e.g.
 *   "shard 0 and shard 1 do not train alike: solver base_lr is 0.01 on
 *    shard 0 but 0.02 on shard 1; train_net layer 2 is 'ip2'
 *    (InnerProduct) on shard 0 but absent on shard 1", or for a layer of the
 *   same name and type "net layer 1 'ip' (InnerProduct) has other parameters
 *    on shard 1 than on shard 0" */
ct_status ct_dp_agreement_compare(const char *mine, const char *me, const char *theirs,
                                  const char *them, ct_error *err);

/* Under MPI (mpirun; MPI is initialised here), before ct_dp_train_mpi:
 * every rank compares its agreement with rank 0's; when any differs, every
 * rank returns the same CT_ERR_INVALID message, the lowest differing
 * rank's, with *alike true: the ranks can end together without MPI_Abort
 * (whose killing can swallow their messages).  Other failures (*alike
 * false: this rank alone, e.g. a net file it cannot read) need the job
 * ended.  CT_ERR_UNSUPPORTED without MPI. */
ct_status ct_dp_agree_mpi(const ct_dp_job *job, bool *alike, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
