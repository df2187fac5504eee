#include "proto/reflect.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

#define MEMBER(msg, off) ((void *)((char *)(msg) + (off)))

const ProtobufCFieldDescriptor *ct_pb_field(const ProtobufCMessageDescriptor *desc,
                                            const char *name) {
  const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(desc, name);
  CT_ASSERTF(f, "%s has no field %s", desc->name, name);
  return f;
}

ProtobufCMessage *ct_pb_new(const ProtobufCMessageDescriptor *desc) {
  ProtobufCMessage *m = ct_xcalloc(1, desc->sizeof_message);
  protobuf_c_message_init(desc, m);
  return m;
}

/* Bytes taken by one element of a field of type t in the C struct. */
static size_t element_size(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM: return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
  }
  CT_ASSERTF(0, "unknown protobuf-c type %d", (int)t);
  return 0;
}

static bool is_pointer_type(ProtobufCType t) {
  return t == PROTOBUF_C_TYPE_STRING || t == PROTOBUF_C_TYPE_MESSAGE;
}

bool ct_pb_present(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  if (f->label == PROTOBUF_C_LABEL_REPEATED)
    return *(const size_t *)MEMBER(msg, f->quantifier_offset) > 0;
  if (f->label == PROTOBUF_C_LABEL_REQUIRED) return true;
  if (is_pointer_type(f->type)) {
    const void *p = *(void *const *)MEMBER(msg, f->offset);
    return p != NULL && p != f->default_value;
  }
  return *(const protobuf_c_boolean *)MEMBER(msg, f->quantifier_offset) != 0;
}

/* Frees one element of type t stored at p (a string or message pointer, or
 * bytes); scalars need nothing. */
static void free_element(const ProtobufCFieldDescriptor *f, void *p) {
  if (f->type == PROTOBUF_C_TYPE_STRING) {
    char *s = *(char **)p;
    if (s && s != f->default_value) free(s);
  } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
    ProtobufCMessage *m = *(ProtobufCMessage **)p;
    if (m) protobuf_c_message_free_unpacked(m, NULL);
  } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
    ProtobufCBinaryData *b = p;
    const ProtobufCBinaryData *def = f->default_value;
    if (b->data && (!def || b->data != def->data)) free(b->data);
  }
}

/* Resets an optional field's storage to its default without freeing. */
static void reset_optional(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  void *slot = MEMBER(msg, f->offset);
  size_t size = element_size(f->type);
  if (is_pointer_type(f->type)) {
    *(const void **)slot = f->type == PROTOBUF_C_TYPE_STRING ? f->default_value : NULL;
  } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
    memset(slot, 0, size);
    if (f->default_value) memcpy(slot, f->default_value, size);
  } else if (f->default_value) {
    memcpy(slot, f->default_value, size);
  } else {
    memset(slot, 0, size);
  }
  if (!is_pointer_type(f->type) && f->label == PROTOBUF_C_LABEL_OPTIONAL)
    *(protobuf_c_boolean *)MEMBER(msg, f->quantifier_offset) = 0;
}

void ct_pb_clear(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    size_t *n = MEMBER(msg, f->quantifier_offset);
    char **arr = MEMBER(msg, f->offset);
    size_t size = element_size(f->type);
    for (size_t i = 0; i < *n; i++) free_element(f, *arr + i * size);
    free(*arr);
    *arr = NULL;
    *n = 0;
    return;
  }
  free_element(f, MEMBER(msg, f->offset));
  reset_optional(msg, f);
}

ProtobufCMessage *ct_pb_mutable_message(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  CT_ASSERT(f->type == PROTOBUF_C_TYPE_MESSAGE && f->label != PROTOBUF_C_LABEL_REPEATED);
  ProtobufCMessage **slot = MEMBER(msg, f->offset);
  if (!*slot) *slot = ct_pb_new(f->descriptor);
  return *slot;
}

/* Appends n elements (raw element storage) to repeated field f of msg. */
static void append_elements(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                            const void *elems, size_t n) {
  size_t *count = MEMBER(msg, f->quantifier_offset);
  char **arr = MEMBER(msg, f->offset);
  size_t size = element_size(f->type);
  *arr = ct_xrealloc(*arr, (*count + n) * size);
  memcpy(*arr + *count * size, elems, n * size);
  *count += n;
}

void ct_pb_move(ProtobufCMessage *dst, const ProtobufCFieldDescriptor *df, ProtobufCMessage *src,
                const ProtobufCFieldDescriptor *sf) {
  CT_ASSERTF(df->type == sf->type, "moving %s into %s: type %d vs %d", sf->name, df->name,
             (int)sf->type, (int)df->type);
  CT_ASSERT(df->type != PROTOBUF_C_TYPE_MESSAGE || df->descriptor == sf->descriptor);
  if (!ct_pb_present(src, sf)) return;
  size_t size = element_size(sf->type);
  if (sf->label == PROTOBUF_C_LABEL_REPEATED) {
    CT_ASSERT(df->label == PROTOBUF_C_LABEL_REPEATED);
    size_t *n = MEMBER(src, sf->quantifier_offset);
    char **arr = MEMBER(src, sf->offset);
    append_elements(dst, df, *arr, *n);
    free(*arr); /* the elements now belong to dst */
    *arr = NULL;
    *n = 0;
    return;
  }
  void *from = MEMBER(src, sf->offset);
  if (df->label == PROTOBUF_C_LABEL_REPEATED) {
    append_elements(dst, df, from, 1);
  } else {
    ct_pb_clear(dst, df);
    memcpy(MEMBER(dst, df->offset), from, size);
    if (!is_pointer_type(df->type) && df->label == PROTOBUF_C_LABEL_OPTIONAL)
      *(protobuf_c_boolean *)MEMBER(dst, df->quantifier_offset) = 1;
  }
  reset_optional(src, sf); /* ownership moved: reset without freeing */
}

void ct_pb_set_string(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f, const char *s) {
  CT_ASSERT(f->type == PROTOBUF_C_TYPE_STRING && f->label != PROTOBUF_C_LABEL_REPEATED);
  ct_pb_clear(msg, f);
  if (s) *(char **)MEMBER(msg, f->offset) = ct_xstrdup(s);
}

