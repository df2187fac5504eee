/* libFuzzer harness: arbitrary bytes as a text caffe.NetParameter.
 *
 * The parser must never crash, leak or hang.  When it fails, the message
 * must start with "fuzz:LINE:COL: " (both at least 1) and no message may be
 * returned; when it succeeds, the message must survive print -> parse with
 * the same packed bytes, and printing must be a fixed point. */
#include <stdio.h>

#include "caffe.pb-c.h"
#include "fuzz_roundtrip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ProtobufCMessage *m = NULL;
  ct_error err = {0};
  ct_status st =
      ct_text_parse(&caffe__net_parameter__descriptor, (const char *)data, size, "fuzz", &m, &err);
  if (st != CT_OK) {
    if (m) fuzz_fail("a message came back with an error", err.msg);
    int line = 0, col = 0;
    char colon = 0;
    if (st == CT_ERR_PARSE && (sscanf(err.msg, "fuzz:%d:%d%c", &line, &col, &colon) != 3 ||
                               colon != ':' || line < 1 || col < 1))
      fuzz_fail("parse error without fuzz:LINE:COL:", err.msg);
    return 0;
  }
  fuzz_check_round_trip(m);
  protobuf_c_message_free_unpacked(m, NULL);
  return 0;
}
