/* cortado upgrade_solver_proto_text IN OUT: rewrite an old-format solver. */
#include "cli/cli.h"
#include "cli/upgrade_text.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

static ct_status upgrade_solver(ProtobufCMessage *msg, const char *source, ct_error *err) {
  return ct_solver_upgrade((Caffe__SolverParameter *)msg, NULL, source, err);
}

static int run_upgrade_solver(const ct_cli_args *args) {
  return ct_cli_upgrade_text(args, &caffe__solver_parameter__descriptor, upgrade_solver);
}

const ct_cli_command ct_cli_cmd_upgrade_solver_proto_text = {
    .name = "upgrade_solver_proto_text",
    .summary = "Rewrite a solver prototxt from an older Caffe in the current format.",
    .usage = "cortado upgrade_solver_proto_text IN.prototxt OUT.prototxt",
    .description = "Replaces the old solver_type enum with the `type` string "
                   "(e.g. solver_type: NESTEROV becomes type: \"Nesterov\"), upgrades the "
                   "nets written inline (net_param, train_net_param, test_net_param) as "
                   "upgrade_net_proto_text does, and writes the result to OUT.",
    .flags = NULL,
    .n_flags = 0,
    .min_args = 2,
    .max_args = 2,
    .run = run_upgrade_solver,
};
