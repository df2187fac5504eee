/* cortado device_query: describe CUDA devices. */
#include "cli/cli.h"
#include "core/log.h"
#include "gpu/device_query.h"

static const ct_flag_spec device_query_flags[] = {
    {"gpu", CT_FLAG_GPU_LIST, "all", "Devices to describe: ids separated by ',' or 'all'."},
};

static int run_device_query(const ct_cli_args *args) {
  const ct_gpu_list *requested = ct_cli_gpus(args, "gpu");
  if (!requested->all && requested->n == 0)
    return ct_cli_error(CT_EXIT_USAGE, "'cortado device_query' needs --gpu=IDS or --gpu=all");
  LOG_INFO("Querying GPUs %s", ct_cli_text(args, "gpu"));
  ct_gpu_list gpus;
  ct_error err;
  if (ct_cli_resolve_gpus(requested, &gpus, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  for (int i = 0; i < gpus.n; i++) {
    if (ct_gpu_print_device_info(gpus.ids[i], NULL, &err) != CT_OK)
      return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  }
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_device_query = {
    .name = "device_query",
    .summary = "Show the properties of CUDA devices.",
    .usage = "cortado device_query [--gpu=IDS|all]",
    .description = "Logs name, compute capability, memory sizes, limits and clock rates of "
                   "each device.",
    .flags = device_query_flags,
    .n_flags = sizeof device_query_flags / sizeof device_query_flags[0],
    .min_args = 0,
    .max_args = 0,
    .run = run_device_query,
};
