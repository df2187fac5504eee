/* libFuzzer harness: arbitrary bytes as a binary caffe.NetParameter.
 *
 * Whatever protobuf-c unpacks must print as text that parses back to the
 * same packed bytes.  Two things binary can hold that text cannot are
 * normalized first: unknown fields (dropped, as the printer skips them) and
 * NaN payloads (text keeps only the sign).  A message with an enum number
 * that has no name is skipped: the text parser rejects such numbers. */
#include <math.h>
#include <stdbool.h>

#include "caffe.pb-c.h"
#include "fuzz_roundtrip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t elt_size(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    default: return 4;
  }
}

static bool normalize(ProtobufCMessage *m);

/* Normalizes one stored value; false when it cannot be written as text. */
static bool normalize_value(const ProtobufCFieldDescriptor *f, void *v) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT: {
      float *x = v;
      if (isnan(*x)) *x = signbit(*x) ? -NAN : NAN;
      return true;
    }
    case PROTOBUF_C_TYPE_DOUBLE: {
      double *x = v;
      if (isnan(*x)) *x = signbit(*x) ? -(double)NAN : (double)NAN;
      return true;
    }
    case PROTOBUF_C_TYPE_ENUM:
      return protobuf_c_enum_descriptor_get_value(f->descriptor, *(int32_t *)v) != NULL;
    case PROTOBUF_C_TYPE_MESSAGE: {
      ProtobufCMessage *sub = *(ProtobufCMessage **)v;
      return !sub || sub == f->default_value || normalize(sub);
    }
    default: return true;
  }
}

static bool normalize(ProtobufCMessage *m) {
  for (unsigned i = 0; i < m->n_unknown_fields; i++) free(m->unknown_fields[i].data);
  free(m->unknown_fields);
  m->unknown_fields = NULL;
  m->n_unknown_fields = 0;
  const ProtobufCMessageDescriptor *d = m->descriptor;
  char *base = (char *)m;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
        *(uint32_t *)(base + f->quantifier_offset) != f->id)
      continue;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
      if (!normalize_value(f, base + f->offset)) return false;
      continue;
    }
    size_t n = *(size_t *)(base + f->quantifier_offset);
    char *array = *(char **)(base + f->offset);
    for (size_t k = 0; k < n; k++)
      if (!normalize_value(f, array + k * elt_size(f->type))) return false;
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Caffe__NetParameter *net = caffe__net_parameter__unpack(NULL, size, data);
  if (!net) return 0;
  if (normalize(&net->base)) fuzz_check_round_trip(&net->base);
  caffe__net_parameter__free_unpacked(net, NULL);
  return 0;
}
