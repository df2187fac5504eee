/* cortado upgrade_net_proto_text IN OUT: rewrite an old-format net prototxt. */
#include "cli/cli.h"
#include "cli/upgrade_text.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

static ct_status upgrade_net(ProtobufCMessage *msg, const char *source, ct_error *err) {
  return ct_net_upgrade((Caffe__NetParameter *)msg, NULL, source, err);
}

static int run_upgrade_net(const ct_cli_args *args) {
  return ct_cli_upgrade_text(args, &caffe__net_parameter__descriptor, upgrade_net);
}

const ct_cli_command ct_cli_cmd_upgrade_net_proto_text = {
    .name = "upgrade_net_proto_text",
    .summary = "Rewrite a net prototxt from an older Caffe in the current format.",
    .usage = "cortado upgrade_net_proto_text IN.prototxt OUT.prototxt",
    .description = "Converts V0/V1 layer definitions (`layers` with enum types), old "
                   "padding layers, data transformation fields and input declarations to "
                   "today's NetParameter, and writes the result to OUT.",
    .flags = NULL,
    .n_flags = 0,
    .min_args = 2,
    .max_args = 2,
    .run = run_upgrade_net,
};
