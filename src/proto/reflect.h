/* Generic, descriptor-driven edits of protobuf-c messages.
 *
 * These work on message trees that own their memory the way
 * protobuf_c_message_unpack(desc, NULL, ...) builds them: every sub-message,
 * string and repeated array is a separate malloc block, and absent strings
 * with a default point at the descriptor's default value.  Such a tree is
 * freed with protobuf_c_message_free_unpacked(msg, NULL); everything these
 * helpers allocate or release keeps that true.  Do not use them on messages
 * built on the stack with the *_INIT macros. */
#ifndef CT_PROTO_REFLECT_H
#define CT_PROTO_REFLECT_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The field `name` of message type `desc`; a missing name is a bug (assert). */
const ProtobufCFieldDescriptor *ct_pb_field(const ProtobufCMessageDescriptor *desc,
                                            const char *name);

/* A fresh heap message of type desc with all defaults set. */
ProtobufCMessage *ct_pb_new(const ProtobufCMessageDescriptor *desc);

/* Whether field f of msg is set: has_ flag for optional scalars, a non-NULL
 * pointer that is not the default for strings and messages, a non-zero count
 * for repeated fields; required fields are always set. */
bool ct_pb_present(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f);

/* Returns sub-message field f of msg (type MESSAGE, not repeated), creating
 * it with defaults when absent. */
ProtobufCMessage *ct_pb_mutable_message(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f);

/* Releases whatever field f of msg holds and resets it to absent/default. */
void ct_pb_clear(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f);

/* Moves field `sf` of `src` into field `df` of `dst`, leaving sf absent.
 * Both must have the same ProtobufCType (and the same message type for
 * messages; enums are moved by value).  Cases:
 *   - optional into optional: dst's old value is released first;
 *   - optional scalar/string into repeated: appended as one more element;
 *   - repeated into repeated: src's elements are appended to dst's.
 * Moving an absent field does nothing. */
void ct_pb_move(ProtobufCMessage *dst, const ProtobufCFieldDescriptor *df, ProtobufCMessage *src,
                const ProtobufCFieldDescriptor *sf);

/* Sets string field f (optional) to a copy of s (NULL clears it). */
void ct_pb_set_string(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f, const char *s);


#ifdef __cplusplus
}
#endif

#endif
