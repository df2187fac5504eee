/* What train, test and time share: picking the device, reading and building
 * the net named by --model with --level/--stage/--dummy_data. */
#ifndef CT_CLI_RUN_COMMON_H
#define CT_CLI_RUN_COMMON_H

#include "cli/cli.h"
#include "core/context.h"
#include "net/net.h"

/* The device of --gpu (its first id; 'all' means device 0), or the CPU when
 * --gpu is not given.  Logs Caffe's "Use GPU with device ID N" / "Use CPU." */
ct_status ct_cli_pick_device(const ct_cli_args *args, int *device, ct_error *err);

/* Sets up ctx on device with seed and applies --math (when the command has it). */
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

#endif
