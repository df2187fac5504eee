/* Source positions of text-parsed messages, for the errors found after
 * parsing: a net's unknown bottom or duplicate top, a solver's bad
 * lr_policy, ... say "FILE:LINE:COL: ..." as the parser's own errors do.
 *
 * The parser (proto/textformat.h, CT_TEXT_POSITIONS) stores each message's
 * positions inside the message, as one length-delimited unknown field of
 * the reserved number CT_SRCPOS_FIELD (the largest protobuf allows).  So
 * they go wherever the message goes (clones through the wire format, the
 * net's state filtering, --dummy_data's edits in place) and are freed with
 * it, and no API has to carry them.  The payload: the file name (its length
 * as a varint, then its bytes), the
 * message's own position (the token that opened it; 1:1 for the top
 * message), then one (field number, element index, line, column) per field
 * occurrence in the text, as varints.  Binary writes leave the field out
 * (proto/io.h), and the text printer never prints unknown fields. */
#ifndef CT_PROTO_SRCPOS_H
#define CT_PROTO_SRCPOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_SRCPOS_FIELD 536870911u

/* Positions being collected for one message (the parser's side). */
typedef struct ct_srcpos_builder {
  uint8_t *buf;
  size_t len, cap;
} ct_srcpos_builder;

/* Starts the record of a message read from `file` whose text starts at
 * line:col. */
void ct_srcpos_begin(ct_srcpos_builder *b, const char *file, int line, int col);
/* Adds the position of one occurrence of field number `field` (element
 * `index` of a repeated field, else 0). */
void ct_srcpos_add(ct_srcpos_builder *b, uint32_t field, size_t index, int line, int col);
/* Hangs the record on msg (appending the field entries to a record msg
 * already has: a message given in two blocks) and resets b.  false when
 * memory runs out (b is released either way). */
bool ct_srcpos_attach(ct_srcpos_builder *b, ProtobufCMessage *msg);
/* Releases b without attaching it. */
void ct_srcpos_discard(ct_srcpos_builder *b);

/* Writes "FILE:LINE:COL" of element `index` of field `field` of msg (field
 * NULL: of the message itself) into out.  false, with out empty, when msg
 * has no record (built in code, read from a binary file) or that
 * occurrence was not in the text. */
bool ct_srcpos_find(const ProtobufCMessage *msg, const char *field, size_t index, char *out, size_t size);

/* Puts "FILE:LINE:COL: " of field `field` (element `index`; field NULL or
 * not in the text: the message's own position) in front of err's message;
 * returns err->code.  Nothing is added when msg has no record or the
 * message already starts with a position. */
ct_status ct_srcpos_prefix(ct_error *err, const ProtobufCMessage *msg, const char *field, size_t index);

/* For an error about a field of msg, written "FIELD: ..." or
 * "FIELD[I]: ..." (the solver's checks): puts that occurrence's position in
 * front, as ct_srcpos_prefix does.  Other messages are left as they are. */
ct_status ct_srcpos_locate(ct_error *err, const ProtobufCMessage *msg);

/* Whether text starts with a position: "FILE:LINE:COL: ". */
bool ct_srcpos_starts_with(const char *text);

/* Gives dst (a message rebuilt in another type by an upgrade, e.g. a V1
 * layer as a LayerParameter) the positions of src: its own, and those of
 * src's fields under the fields of dst with the same names. */
void ct_srcpos_copy_by_name(ProtobufCMessage *dst, const ProtobufCMessage *src);

/* Packs msg as protobuf_c_message_pack does, without any position record
 * in it or its sub-messages (they are hidden while it packs: no other
 * thread may read msg meanwhile).  *out is malloc'd (free it); returns its
 * length, or 0 with *out NULL when memory runs out. */
size_t ct_srcpos_pack_without(const ProtobufCMessage *msg, uint8_t **out);

#ifdef __cplusplus
}
#endif

#endif
