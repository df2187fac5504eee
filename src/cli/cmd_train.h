/* What other commands may reuse of `cortado train`. */
#ifndef CT_CLI_CMD_TRAIN_H
#define CT_CLI_CMD_TRAIN_H

#include "caffe.pb-c.h"
#include "cli/flags.h"

/* Trains the solver sp (read, and possibly edited, by the caller; still
 * owned by it) the way `cortado train` does: under mpirun as one rank; as
 * one shard of a run when --num_shards > 1 or a store (--file_store_path,
 * --redis_host) is given; on several GPUs as threads; else on one device.
 * args must be parsed against train's flag table (ct_cli_cmd_train.flags),
 * so --solver is not read here and the shard flags (num_shards, shard_id,
 * run_id, file_store_path, redis_host, redis_port, redis_password,
 * rendezvous_timeout, gloo_iface, gloo_host) keep their names.  Applies
 * --level/--stage and --dummy_data to sp.  Returns a CT_EXIT_* status,
 * having reported its errors. */
int ct_cli_train_solver(const ct_cli_args *args, Caffe__SolverParameter *sp);

#endif
