/* Shared by the harnesses: the text round trip every message must survive.
 *
 * ct_text_print(msg), parsed back with ct_text_parse, must give a message
 * that packs to the same bytes as msg, and printing that message must give
 * the same text again.  Any difference aborts, which libFuzzer reports as a
 * crash with the input saved. */
#ifndef CT_FUZZ_ROUNDTRIP_H
#define CT_FUZZ_ROUNDTRIP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/textformat.h"

static void fuzz_fail(const char *what, const char *detail) {
  fprintf(stderr, "round trip failed: %s\n%s\n", what, detail ? detail : "");
  abort();
}

static uint8_t *fuzz_pack(const ProtobufCMessage *m, size_t *len) {
  *len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(*len ? *len : 1);
  if (!buf) abort();
  if (protobuf_c_message_pack(m, buf) != *len) fuzz_fail("pack size", NULL);
  return buf;
}

static void fuzz_check_round_trip(const ProtobufCMessage *m) {
  char *text = ct_text_print(m);
  if (!text) fuzz_fail("ct_text_print returned NULL", NULL);
  ProtobufCMessage *again = NULL;
  ct_error err;
  if (ct_text_parse(m->descriptor, text, strlen(text), "printed", &again, &err) != CT_OK)
    fuzz_fail(err.msg, text);
  size_t n1, n2;
  uint8_t *b1 = fuzz_pack(m, &n1), *b2 = fuzz_pack(again, &n2);
  if (n1 != n2 || memcmp(b1, b2, n1) != 0) fuzz_fail("packed bytes differ", text);
  char *text2 = ct_text_print(again);
  if (!text2 || strcmp(text, text2) != 0) fuzz_fail("print-parse-print changed the text", text);
  free(b1);
  free(b2);
  free(text);
  free(text2);
  protobuf_c_message_free_unpacked(again, NULL);
}

#endif
