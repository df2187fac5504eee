/* `cortado train --gpu=0,1,...` as one process per GPU (see train.h): the
 * launching process makes the NCCL id and starts its own executable again,
 * once per GPU, with the same arguments, the worker's rank
 * (CT_LAUNCH_WORKER_ENV, parallel/launch.h) and the id in hex
 * (CORTADO_DP_NCCL_ID).  Each child trains as worker RANK
 * (ct_dp_train_process); rank 0 logs and writes snapshots and the CSV log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train.h"
#include "core/log.h"
#include "core/settings.h"
#include "core/status.h"
#include "parallel/dp.h"
#include "parallel/launch.h"

#define ID_ENV "CORTADO_DP_NCCL_ID"

static char **g_argv;

void ct_cli_set_argv(char **argv) { g_argv = argv; }

bool ct_cli_dp_worker(int *rank, int *count, ct_nccl_id *id) {
  const char *hex = ct_setting_text(ID_ENV);
  if (!hex || strlen(hex) != 2 * sizeof id->bytes) return false;
  for (size_t i = 0; i < sizeof id->bytes; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
    id->bytes[i] = (unsigned char)v;
  }
  return ct_launched_worker(rank, count);
}

int ct_cli_train_processes(const int *gpus, int n) {
  CT_ASSERT(g_argv != NULL && n >= 1);
  ct_error err;
  ct_nccl_id id;
  if (ct_nccl_unique_id(&id, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  char var[sizeof ID_ENV + 2 * sizeof id.bytes + 1];
  int len = snprintf(var, sizeof var, ID_ENV "=");
  for (size_t i = 0; i < sizeof id.bytes; i++) len += snprintf(var + len, sizeof var - (size_t)len, "%02x", id.bytes[i]);
  const char *extra[2] = {var, NULL};
  ct_launch_failure f;
  if (ct_launch_workers("/proc/self/exe", g_argv, n, extra, ct_dp_stop_grace_s(), &f)) return CT_EXIT_OK;
  return ct_cli_error(CT_EXIT_FAILURE, "worker %d (GPU %d) %s%s", f.rank, gpus[f.rank], f.why,
                      n > 1 ? "; the other workers were stopped" : "");
}
