/* Text-format files: reading with checks for empty, binary and non-UTF-8
 * input; writing goes through core/fileio's atomic write. */
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "proto/text_internal.h"
#include "proto/textformat.h"

/* Prototxt files are small; anything past this is surely not one. */
#define MAX_TEXT_FILE_BYTES ((size_t)256 << 20)

/* Rejects binary data (NUL or control bytes anywhere) and text that is not
 * UTF-8 (pointing at the first bad byte). */
static ct_status check_is_text(const char *path, const char *data, size_t len, ct_error *err) {
  const unsigned char *s = (const unsigned char *)data;
  int line = 1, bad_line = 0, bad_col = 0;
  size_t line_start = 0, bad_at = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = s[i];
    if (c == '\n') {
      line++;
      line_start = i + 1;
    } else if (c == 0 || (c < 0x20 && !strchr("\t\r\v\f", c))) {
      return ct_error_set(err, CT_ERR_PARSE,
                          "%s:1:1: this looks like a binary file, not a text prototxt "
                          "(a .caffemodel? use the binary reader)",
                          path);
    } else if (c >= 0x80) {
      size_t seq = ct_utf8_seq_len(s + i, len - i);
      if (seq) {
        i += seq - 1;
      } else if (!bad_line) {
        bad_line = line;
        bad_col = (int)(i - line_start) + 1;
        bad_at = i;
      }
    }
  }
  if (bad_line)
    return ct_error_set(err, CT_ERR_PARSE, "%s:%d:%d: invalid UTF-8 byte 0x%02X (save the file as UTF-8)",
                        path, bad_line, bad_col, s[bad_at]);
  return CT_OK;
}

/* Rejects a file without a single token. */
static ct_status check_not_empty(const char *path, const char *data, size_t len, ct_error *err) {
  ct_tlex lx;
  ct_ttoken tok;
  ct_tlex_init(&lx, path, data, len);
  if (ct_tlex_next(&lx, &tok, NULL) != CT_OK || tok.kind != CT_TTOKEN_EOF) return CT_OK;
  if (lx.line_start == lx.end && lx.line == 1)
    return ct_error_set(err, CT_ERR_PARSE, "%s: file is empty", path);
  return ct_error_set(err, CT_ERR_PARSE, "%s: file is empty (only whitespace and comments)", path);
}

ct_status ct_text_parse_file(const ProtobufCMessageDescriptor *desc, const char *path,
                             ProtobufCMessage **out, ct_error *err) {
  return ct_text_parse_file_with(desc, path, 0, out, err);
}

ct_status ct_text_parse_file_with(const ProtobufCMessageDescriptor *desc, const char *path, unsigned flags,
                                  ProtobufCMessage **out, ct_error *err) {
  CT_ASSERT(desc && path && out);
  *out = NULL;
  char *data = NULL;
  size_t len = 0;
  CT_TRY(ct_file_read_all(path, &data, &len, MAX_TEXT_FILE_BYTES, err));
  ct_status st = check_is_text(path, data, len, err);
  if (st == CT_OK) st = check_not_empty(path, data, len, err);
  if (st == CT_OK) st = ct_text_parse_with(desc, data, len, path, flags, out, err);
  free(data);
  return st;
}

ct_status ct_text_write_file(const ProtobufCMessage *msg, const char *path, ct_error *err) {
  CT_ASSERT(msg && path);
  char *text = ct_text_print(msg);
  if (!text) return ct_error_set(err, CT_ERR_NOMEM, "%s: out of memory printing the message", path);
  ct_status st = ct_file_write_atomic(path, text, strlen(text), err);
  free(text);
  return st;
}
