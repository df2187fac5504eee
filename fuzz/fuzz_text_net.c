/* libFuzzer harness: arbitrary bytes as a text caffe.NetParameter.
 *
 * The parser must never crash, leak or hang.  When it fails, the message
 * must start with "fuzz:LINE:COL: " (both at least 1) and no message may be
 * returned; when it succeeds, the message must survive print -> parse with
 * the same packed bytes, and printing must be a fixed point.  Parsed with
 * source positions (proto/srcpos.h), the same bytes give the same result
 * and, positions left out, the same packed bytes. */
#include <stdio.h>

#include "caffe.pb-c.h"
#include "fuzz_roundtrip.h"
#include "proto/srcpos.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ProtobufCMessage *m = NULL;
  ct_error err = {0};
  ct_status st =
      ct_text_parse(&caffe__net_parameter__descriptor, (const char *)data, size, "fuzz", &m, &err);
  ProtobufCMessage *located = NULL;
  ct_error err2 = {0};
  ct_status st2 = ct_text_parse_with(&caffe__net_parameter__descriptor, (const char *)data, size, "fuzz",
                                     CT_TEXT_POSITIONS, &located, &err2);
  if ((st == CT_OK) != (st2 == CT_OK) || (st != CT_OK && strcmp(err.msg, err2.msg) != 0))
    fuzz_fail("parsing with positions changed the result", err2.msg);
  if (located) {
    size_t n1, n2;
    uint8_t *b1 = fuzz_pack(m, &n1), *b2;
    n2 = ct_srcpos_pack_without(located, &b2);
    if (!b2 || n1 != n2 || memcmp(b1, b2, n1) != 0) fuzz_fail("positions left in the packed bytes", NULL);
    free(b1);
    free(b2);
    protobuf_c_message_free_unpacked(located, NULL);
  }
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
