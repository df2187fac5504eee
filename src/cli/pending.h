/* The library calls behind model_info and the upgrade commands.
 *
 * They live on branches not merged yet (src/proto/io.h, src/proto/upgrade.h,
 * src/proto/textformat.h).  When all three headers are present this file
 * includes them and sets CT_CLI_HAVE_PROTO_TOOLS to 1; until then it is 0 and
 * the handlers report "not implemented yet".  The calls the handlers make:
 *
 *   ct_status ct_model_info_print(const char *path, FILE *out, ct_error *err);
 *   ct_status ct_net_upgrade(Caffe__NetParameter *net, ct_error *err);
 *   ct_status ct_solver_upgrade(Caffe__SolverParameter *solver, ct_error *err);
 *   ct_status ct_text_parse_file(const ProtobufCMessageDescriptor *desc,
 *                                const char *path, ProtobufCMessage **msg, ct_error *err);
 *   ct_status ct_text_write_file(const ProtobufCMessage *msg, const char *path,
 *                                ct_error *err);
 *
 * Delete this file once they are on main and include the real headers. */
#ifndef CT_CLI_PENDING_H
#define CT_CLI_PENDING_H

#if __has_include("proto/io.h") && __has_include("proto/upgrade.h") && \
    __has_include("proto/textformat.h")
#include "caffe.pb-c.h"
#include "proto/io.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"
#define CT_CLI_HAVE_PROTO_TOOLS 1

#include "cli/flags.h"

/* The body of both upgrade commands: reads positional[0] as a text message
 * of type desc, calls upgrade on it in place, writes it to positional[1].
 * Returns a CT_EXIT_* status, having printed any error. */
int ct_cli_upgrade_text(const ct_cli_args *args, const ProtobufCMessageDescriptor *desc,
                        ct_status (*upgrade)(ProtobufCMessage *msg, ct_error *err));
#else
#define CT_CLI_HAVE_PROTO_TOOLS 0
#endif

#endif
