#include "cli/upgrade_text.h"
#include "proto/io.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

#include "cli/cli.h"
#include "core/log.h"

int ct_cli_upgrade_text(const ct_cli_args *args, const ProtobufCMessageDescriptor *desc,
                        ct_status (*upgrade)(ProtobufCMessage *msg, const char *source, ct_error *err)) {
  const char *in = args->positional[0], *out = args->positional[1];
  ProtobufCMessage *msg = NULL;
  ct_error err;
  int rc = CT_EXIT_FAILURE;
  if (ct_text_parse_file(desc, in, &msg, &err) != CT_OK) {
    ct_cli_error(rc, "%s", err.msg);
  } else if (upgrade(msg, in, &err) != CT_OK) {
    ct_cli_error(rc, "%s", err.msg);
  } else if (ct_text_write_file(msg, out, &err) != CT_OK) {
    ct_cli_error(rc, "%s", err.msg);
  } else {
    LOG_INFO("Wrote upgraded %s to %s", desc->short_name, out);
    rc = CT_EXIT_OK;
  }
  if (msg) protobuf_c_message_free_unpacked(msg, NULL);
  return rc;
}
