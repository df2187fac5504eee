/* What train, test and time share: picking the device, reading and building
 * the net named by --model with --level/--stage/--dummy_data. */
#ifndef CT_CLI_RUN_COMMON_H
#define CT_CLI_RUN_COMMON_H

#include "cli/cli.h"
#include "core/context.h"
#include "net/net.h"

/* For a command that computes on the host's threads (early.c): without a
 * wait policy in the environment, sets OMP_WAIT_POLICY=PASSIVE and the
 * OpenMP and OpenBLAS thread counts from ct_cpu_count(), and executes the
 * command again with them (it returns only when that fails, with the
 * environment as it was). */
void ct_cli_setup_threads(char **argv);

/* From main(), before anything else: a failing exit (status != 0) flushes
 * stdio and ends the process without the shared libraries' destructors
 * (src/cli/early.c says why).  Registered in main so that it runs before
 * the loader's destructors, which were registered before main. */
void ct_cli_install_fast_failure_exit(void);

/* Logs how the host computes: threads, available CPUs, the OpenMP wait
 * policy and the subnormal mode, e.g. "CPU: 2 threads (2 CPUs available),
 * OMP_WAIT_POLICY=PASSIVE, subnormals flushed to zero". */
void ct_cli_log_cpu(void);

/* Whether the command line asks for the CPU: --cpu, or --gpu=none (an empty
 * list).  CT_ERR_INVALID for --cpu together with --gpu=IDS or --gpu=all. */
ct_status ct_cli_wants_cpu(const ct_cli_args *args, bool *cpu, ct_error *err);

/* Rewrites the message of a failed device check as "WHERE: CAUSE; HINT"
 * (WHERE: what asked for the GPU, e.g. "--gpu=0"; HINT: how to run on the
 * CPU instead); returns err->code. */
ct_status ct_cli_gpu_failed(ct_error *err, const char *where, const char *hint);

/* The device of --gpu (its first id; 'all' means device 0), or the CPU when
 * --gpu is not given, is 'none', or --cpu is.  Logs Caffe's "Use GPU with
 * device ID N" / "Use CPU." and ct_cli_log_cpu's line.  A missing device
 * fails with "--gpu=0: no CUDA device: ...; leave out --gpu (or give --cpu)
 * to run on the CPU". */
ct_status ct_cli_pick_device(const ct_cli_args *args, int *device, ct_error *err);

/* Sets up ctx on device with seed and applies --math (when the command has it). */
/* --precision and --math as a context's settings: *tf32 TF32 tensor cores
 * for float32 layers, *type the 16-bit type (CT_F32: none), *given whether
 * --precision was set (it overrides the nets' default_forward_type).
 * Errors (CT_ERR_INVALID): --math=fp32 with --precision=tf32. */
ct_status ct_cli_precision(const ct_cli_args *args, bool *tf32, ct_dtype *type, bool *given,
                           ct_error *err);
ct_status ct_cli_context_init(const ct_cli_args *args, ct_context *ctx, int device, uint64_t seed,
                              ct_error *err);

/* --stage=a,b into an array (malloc'd strings inside one block; free the
 * array with free()).  *n gets the count. */
char **ct_cli_stages(const ct_cli_args *args, int *n);

/* The C,H,W of --dummy_shape into chw with *pchw = chw, or *pchw = NULL when
 * the flag is not given.  CT_ERR_INVALID for anything but three positive
 * integers. */
ct_status ct_cli_dummy_shape(const ct_cli_args *args, int chw[3], int **pchw, ct_error *err);

/* Reads --model and applies --dummy_data/--dummy_shape when the command has
 * them; *out is freed with protobuf_c_message_free_unpacked. */
ct_status ct_cli_load_model_param(const ct_cli_args *args, Caffe__NetParameter **out, ct_error *err);

/* Reads --model, applies --dummy_data/--dummy_shape when those flags exist,
 * and builds the net in `phase` on ctx. */
ct_status ct_cli_build_model(const ct_cli_args *args, ct_phase phase, ct_context *ctx, ct_net **out,
                             ct_error *err);
/* The same holding only the layers of part (net.h; NULL: all). */
ct_status ct_cli_build_model_part(const ct_cli_args *args, ct_phase phase, ct_context *ctx,
                                  const ct_net_part *part, ct_net **out, ct_error *err);

/* --trace (and --trace_iters) of a command that has them: when --trace is
 * given, starts tracing (core/trace.h) this process, whose first rank is
 * `rank`.  CT_ERR_INVALID for a --trace_iters that is not FIRST:LAST with 0
 * <= FIRST <= LAST, for --trace_iters without --trace, and for a folder
 * that cannot be written. */
ct_status ct_cli_trace_start(const ct_cli_args *args, int rank, ct_error *err);
/* Writes the trace that ct_cli_trace_start began (rank 0's process; a
 * no-op elsewhere and without --trace) and stops tracing.  A failed write
 * is reported as the command's error: returns CT_EXIT_FAILURE then, else
 * rc. */
int ct_cli_trace_finish(const ct_cli_args *args, int rc);

#endif
