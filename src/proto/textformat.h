/* Protobuf text format ("prototxt") for any protobuf-c message.
 *
 * One parser and one printer serve every message type: they walk protobuf-c's
 * reflection structs (ProtobufCMessageDescriptor, ProtobufCFieldDescriptor,
 * ProtobufCEnumDescriptor), so caffe.NetParameter, caffe.SolverParameter and
 * any other schema work without generated glue.
 *
 * Accepted syntax (what protobuf's own text parser accepts, as Caffe users
 * write it):
 *   - `field: value` for scalars; `field { ... }`, `field: { ... }` and
 *     `field < ... >` for messages;
 *   - repeated fields as repeated lines or as a list `field: [a, b, c]`
 *     (a list of messages too: `field: [{...}, {...}]`);
 *   - enums by name or by number; bools as true/false/True/False/t/f/1/0;
 *   - integers in decimal, hex (0x1F) or octal (017), range-checked per type;
 *   - floats as 1e-4, .5, 5., 1f, inf, -inf, infinity, nan;
 *   - strings in single or double quotes with C escapes (\n \t \\ \" \' \xHH
 *     \ooo ...), adjacent literals concatenated ("a" "b" is "ab");
 *   - `#` comments to end of line, an optional `,` or `;` after each field.
 * A non-repeated scalar given twice keeps the last value; a non-repeated
 * message given twice is merged, as protobuf does.  Two different members of
 * one oneof is an error.  An enum given by number must name one of its
 * values.  Float fields are read as a double and then rounded, as protobuf
 * does, so Cortado and Caffe read the same bits.  Required fields must be set
 * in a message's first block.  Extensions and Any (`[type.name]`) are not
 * supported.
 *
 * An unknown field does not stop the parse: its value is skipped and the
 * parse goes on, so that the error names every unknown field of the text
 * (the first in full, "and N more", each logged with CT_TEXT_LOG_UNKNOWN).
 * A field that another Caffe defines (SSD's norm_param, NVIDIA's
 * scale_bias, ...) is said to be one (proto/catalog.h) instead of being
 * taken for a typo.  A non-repeated field given a list without brackets
 * (`device_id: 0,1`) is refused as such.
 *
 * Errors are one line:
 *
 *   FILE:LINE:COL: PROBLEM in TYPE[ at PATH][ (did you mean 'NAME'?)]
 *
 * LINE and COL are 1-based and point at the offending token (COL counts
 * bytes).  TYPE is the short name of the message being filled.  PATH is the
 * dotted field path from the top-level message, with 0-based indices for
 * repeated fields, e.g. `layer[1].convolution_param`; it is left out at the
 * top level; inside a layer (a repeated element with a name and a type) the
 * layer is named: "ConvolutionParameter of layer 'conv1' (Convolution) at
 * layer[1].convolution_param".  Examples:
 *
 *   lenet.prototxt:12:5: unknown field 'kernal_size' in ConvolutionParameter
 *       at layer[1].convolution_param (did you mean 'kernel_size'?)
 *   lenet.prototxt:9:17: expected an integer for field 'num_output' (uint32)
 *       in ConvolutionParameter at layer[1].convolution_param, got "abc"
 *
 * Numbers are read and written in the C locale (Cortado never calls
 * setlocale). */
#ifndef CT_PROTO_TEXTFORMAT_H
#define CT_PROTO_TEXTFORMAT_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Messages nested deeper than this are rejected (protects the stack). */
#define CT_TEXT_MAX_DEPTH 100

/* Parses `len` bytes of text format as a message of type `desc`.
 * `filename` only labels error messages (NULL reads as "<text>"); the text
 * need not be NUL-terminated.  Empty text gives an empty message.
 * On success *out is a new message that the caller frees with
 * protobuf_c_message_free_unpacked(*out, NULL).  On failure *out is NULL,
 * nothing is leaked, and err holds "FILE:LINE:COL: ..." (CT_ERR_PARSE) or an
 * out-of-memory message (CT_ERR_NOMEM). */
ct_status ct_text_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                        const char *filename, ProtobufCMessage **out, ct_error *err);

/* Options of ct_text_parse_with and ct_text_parse_file_with (OR'ed). */
enum {
  /* Hang the source position of every message and field on the message
   * tree (proto/srcpos.h), for errors found after parsing. */
  CT_TEXT_POSITIONS = 1u << 0,
  /* Several unknown fields: log each one (ERROR), not only the first in
   * the error. */
  CT_TEXT_LOG_UNKNOWN = 1u << 1,
};

/* ct_text_parse with options (flags: CT_TEXT_*). */
ct_status ct_text_parse_with(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                             const char *filename, unsigned flags, ProtobufCMessage **out, ct_error *err);

/* Reads the file at `path` and parses it as ct_text_parse does, with `path`
 * in the messages.  Beyond ct_text_parse it rejects, with CT_ERR_PARSE:
 *   - a file with no fields: "PATH: file is empty", or
 *     "PATH: file is empty (only whitespace and comments)";
 *   - a binary file (NUL bytes or control characters):
 *     "PATH:1:1: this looks like a binary file, not a text prototxt
 *      (a .caffemodel? use the binary reader)";
 *   - text that is not UTF-8: "PATH:LINE:COL: invalid UTF-8 byte 0xE9 (save
 *     the file as UTF-8)".
 * A UTF-8 byte-order mark at the start is skipped.  Reading errors come
 * from ct_file_read_all: CT_ERR_NOTFOUND "PATH: cannot open: No such file or
 * directory", CT_ERR_IO, or CT_ERR_INVALID for a file over 256 MiB. */
ct_status ct_text_parse_file(const ProtobufCMessageDescriptor *desc, const char *path,
                             ProtobufCMessage **out, ct_error *err);
/* ct_text_parse_file with options (flags: CT_TEXT_*). */
ct_status ct_text_parse_file_with(const ProtobufCMessageDescriptor *desc, const char *path, unsigned flags,
                                  ProtobufCMessage **out, ct_error *err);

/* Prints `msg` in Caffe's usual style: two-space indent, `name: "conv1"`,
 * `layer {` ... `}`, enums by name, floats in the shortest form that reads
 * back to the identical value (`inf`, `-inf`, `nan`, `-nan` for the special
 * values), strings escaped so they read back byte for byte.  Fields come in
 * field-number order, repeated fields one value per line, and only fields
 * that are set: has_* true, strings and messages not NULL and not the
 * descriptor default, repeated fields with n_* > 0.  Unknown fields kept by
 * a binary unpack are not printed.
 * Returns a malloc'd NUL-terminated string the caller frees, or NULL when
 * memory runs out.  ct_text_parse of the result gives a message that packs
 * to the same bytes as msg (NaN payloads aside). */
char *ct_text_print(const ProtobufCMessage *msg);

/* Prints msg as ct_text_print does and writes it to `path` with
 * ct_file_write_atomic (a temporary file in the same folder, fsync, rename),
 * so a reader sees the old file or the new one, never half of one.
 * Errors: CT_ERR_IO with "PATH: STEP failed: REASON" (STEP is create, write,
 * fsync, close or rename), CT_ERR_NOMEM. */
ct_status ct_text_write_file(const ProtobufCMessage *msg, const char *path, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
