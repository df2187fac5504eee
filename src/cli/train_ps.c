/* `cortado train --dp_mode=...`: the parameter server's flags (see
 * parallel/ps.h and docs/distributed.md). */
#include <string.h>

#include "cli/train.h"
#include "parallel/comm_mpi.h"

void ct_cli_ps_opts(const ct_cli_args *args, ct_ps_opts *o) {
  memset(o, 0, sizeof *o);
  ct_error ignored;
  if (ct_dp_mode_parse(ct_cli_string(args, "dp_mode"), &o->mode, &ignored) != CT_OK)
    o->mode = CT_DP_ALLREDUCE; /* the flag's choices were checked when it was parsed */
  o->staleness = ct_cli_int(args, "staleness");
  o->num_servers = ct_cli_int(args, "num_servers");
  o->block_lr = (float)ct_cli_double(args, "bmuf_block_lr");
  o->block_momentum =
      ct_cli_is_set(args, "bmuf_block_momentum") ? (float)ct_cli_double(args, "bmuf_block_momentum") : -1.0f;
  o->nesterov = ct_cli_bool(args, "bmuf_nesterov");
  o->sync_period = ct_cli_int(args, "bmuf_sync_period");
}

int ct_cli_check_ps_flags(const ct_cli_args *args, bool pipeline) {
  ct_ps_opts o;
  ct_cli_ps_opts(args, &o);
  const char *mode = ct_dp_mode_name(o.mode);
  if (o.mode == CT_DP_ALLREDUCE && ct_cli_is_set(args, "num_servers"))
    return ct_cli_error(CT_EXIT_USAGE, "--num_servers goes with parameter servers (--dp_mode=ssp, async or bmuf)");
  if (o.mode != CT_DP_SSP && ct_cli_is_set(args, "staleness"))
    return ct_cli_error(CT_EXIT_USAGE, "--staleness goes with --dp_mode=ssp (the mode is %s)", mode);
  static const char *const bmuf[] = {"bmuf_block_lr", "bmuf_block_momentum", "bmuf_nesterov",
                                     "bmuf_sync_period"};
  for (size_t i = 0; i < sizeof bmuf / sizeof *bmuf; i++)
    if (o.mode != CT_DP_BMUF && ct_cli_is_set(args, bmuf[i]))
      return ct_cli_error(CT_EXIT_USAGE, "--%s goes with --dp_mode=bmuf (the mode is %s)", bmuf[i], mode);
  if (o.mode == CT_DP_BMUF && ct_cli_is_set(args, "bmuf_block_momentum") &&
      !(o.block_momentum >= 0.0f && o.block_momentum < 1.0f))
    return ct_cli_error(CT_EXIT_USAGE, "--bmuf_block_momentum must lie in [0, 1), got %g",
                        (double)o.block_momentum);
  if (o.mode == CT_DP_ALLREDUCE) return CT_EXIT_OK;
  if (ct_cli_is_set(args, "trace"))
    return ct_cli_error(CT_EXIT_USAGE, "--trace does not go with --dp_mode=%s yet (the servers are not traced)",
                        mode);
  if (pipeline)
    return ct_cli_error(CT_EXIT_USAGE, "--dp_mode=%s does not go with pipeline stages (--pipeline)", mode);
  /* Gloo shards: the last --num_servers shards serve */
  if (!ct_mpi_launched() && !ct_cli_shards_requested(args))
    return ct_cli_error(CT_EXIT_USAGE,
                        "--dp_mode=%s needs mpirun or shards: start W workers and %d parameter "
                        "server%s as mpirun -np W+%d, or as --num_shards=W+%d (CPU ranks)",
                        mode, o.num_servers, o.num_servers == 1 ? "" : "s", o.num_servers,
                        o.num_servers);
  return CT_EXIT_OK;
}
