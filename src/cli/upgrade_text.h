/* The shared body of upgrade_net_proto_text and upgrade_solver_proto_text. */
#ifndef CT_CLI_UPGRADE_TEXT_H
#define CT_CLI_UPGRADE_TEXT_H

#include "caffe.pb-c.h"
#include "cli/flags.h"

/* The body of both upgrade commands: reads positional[0] as a text message
 * of type desc, calls upgrade on it in place (source: that file's name, for
 * its messages), writes it to positional[1].  Returns a CT_EXIT_* status,
 * having printed any error. */
int ct_cli_upgrade_text(const ct_cli_args *args, const ProtobufCMessageDescriptor *desc,
                        ct_status (*upgrade)(ProtobufCMessage *msg, const char *source, ct_error *err));

#endif
