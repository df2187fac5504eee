/* Text-format printer: walks a protobuf-c message by its descriptors and
 * writes Caffe-style prototxt.  Presence follows protobuf-c's packer, so a
 * field is printed exactly when protobuf_c_message_pack would write it. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text_internal.h"
#include "proto/textformat.h"

/* A growing output buffer; after a failed allocation it stays failed. */
typedef struct text_buf {
  char *data;
  size_t len, cap;
  bool failed;
} text_buf;

static void buf_append(text_buf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *grown = realloc(b->data, cap);
    if (!grown) {
      b->failed = true;
      return;
    }
    b->data = grown;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void buf_puts(text_buf *b, const char *s) { buf_append(b, s, strlen(s)); }

static void buf_indent(text_buf *b, int depth) {
  for (int i = 0; i < depth; i++) buf_append(b, "  ", 2);
}

/* Whether the parser reads text back as exactly v (for floats it rounds the
 * double it reads to float, as protobuf does). */
static bool reads_back(const char *text, double v, bool is_float) {
  double x = strtod(text, NULL);
  return is_float ? (float)x == (float)v : x == v;
}

/* v with the fewest significant digits that read back to exactly v (as a
 * float when is_float), at most max_digits.  Like protobuf's printer, an
 * integer shorter than fixed_digits prints in full ("100", not "1e+02"). */
static void format_real(double v, bool is_float, char *out, size_t size) {
  int max_digits = is_float ? 9 : 17, fixed_digits = is_float ? FLT_DIG : DBL_DIG;
  if (isnan(v)) {
    snprintf(out, size, signbit(v) ? "-nan" : "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(out, size, v < 0 ? "-inf" : "inf");
    return;
  }
  int prec = 1;
  for (; prec < max_digits; prec++) {
    snprintf(out, size, "%.*g", prec, v);
    if (reads_back(out, v, is_float)) break;
  }
  snprintf(out, size, "%.*g", prec, v);
  char sci[64];
  snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
  int exp10 = atoi(strchr(sci, 'e') + 1);
  if (exp10 >= prec && exp10 < fixed_digits) {
    char full[64];
    snprintf(full, sizeof full, "%.*g", exp10 + 1, v);
    if (reads_back(full, v, is_float)) snprintf(out, size, "%s", full);
  }
}

/* A double-quoted literal that the parser decodes back to the same bytes.
 * Valid UTF-8 stays readable when utf8 is set (string fields); every other
 * byte outside printable ASCII becomes a three-digit octal escape. */
static void print_quoted(text_buf *b, const unsigned char *s, size_t n, bool utf8) {
  buf_append(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = s[i];
    char esc[8];
    switch (c) {
      case '"': buf_append(b, "\\\"", 2); continue;
      case '\\': buf_append(b, "\\\\", 2); continue;
      case '\n': buf_append(b, "\\n", 2); continue;
      case '\r': buf_append(b, "\\r", 2); continue;
      case '\t': buf_append(b, "\\t", 2); continue;
      default: break;
    }
    if (c >= 0x20 && c < 0x7f) {
      buf_append(b, (const char *)&s[i], 1);
      continue;
    }
    size_t seq = (utf8 && c >= 0x80) ? ct_utf8_seq_len(s + i, n - i) : 0;
    if (seq) {
      buf_append(b, (const char *)&s[i], seq);
      i += seq - 1;
      continue;
    }
    snprintf(esc, sizeof esc, "\\%03o", c);
    buf_append(b, esc, 4);
  }
  buf_append(b, "\"", 1);
}

static void print_scalar(text_buf *b, const ProtobufCFieldDescriptor *f, const void *v) {
  char num[64];
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: snprintf(num, sizeof num, "%" PRId32, *(const int32_t *)v); break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: snprintf(num, sizeof num, "%" PRIu32, *(const uint32_t *)v); break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: snprintf(num, sizeof num, "%" PRId64, *(const int64_t *)v); break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: snprintf(num, sizeof num, "%" PRIu64, *(const uint64_t *)v); break;
    case PROTOBUF_C_TYPE_FLOAT: format_real(*(const float *)v, true, num, sizeof num); break;
    case PROTOBUF_C_TYPE_DOUBLE: format_real(*(const double *)v, false, num, sizeof num); break;
    case PROTOBUF_C_TYPE_BOOL:
      snprintf(num, sizeof num, "%s", *(const protobuf_c_boolean *)v ? "true" : "false");
      break;
    case PROTOBUF_C_TYPE_ENUM: {
      int32_t x = *(const int32_t *)v;
      const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, x);
      if (ev) {
        buf_puts(b, ev->name);
        return;
      }
      snprintf(num, sizeof num, "%" PRId32, x);
      break;
    }
    case PROTOBUF_C_TYPE_STRING: {
      const char *s = *(const char *const *)v;
      if (!s) s = "";
      print_quoted(b, (const unsigned char *)s, strlen(s), true);
      return;
    }
    case PROTOBUF_C_TYPE_BYTES: {
      const ProtobufCBinaryData *bin = v;
      print_quoted(b, bin->data, bin->data ? bin->len : 0, false);
      return;
    }
    case PROTOBUF_C_TYPE_MESSAGE: CT_ASSERT(!"messages are not scalars"); return;
  }
  buf_puts(b, num);
}

static bool is_zero(const void *v, size_t size) {
  const unsigned char *c = v;
  for (size_t i = 0; i < size; i++)
    if (c[i]) return false;
  return true;
}

/* How many values of field f msg holds: the repeated count, or 0/1 by the
 * same presence rules protobuf-c's packer uses. */
static size_t value_count(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  const char *base = (const char *)msg;
  const void *m = base + f->offset;
  bool pointer = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE;
  const void *ptr = pointer ? *(const void *const *)m : NULL;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) return *(const size_t *)(base + f->quantifier_offset);
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) return 0;
    return !pointer || (ptr && ptr != f->default_value);
  }
  switch (f->label) {
    case PROTOBUF_C_LABEL_REQUIRED: return 1;
    case PROTOBUF_C_LABEL_OPTIONAL:
      if (pointer) return ptr && ptr != f->default_value;
      return *(const protobuf_c_boolean *)(base + f->quantifier_offset) != 0;
    default: /* proto3 without a label: set when not zero or empty */
      if (f->type == PROTOBUF_C_TYPE_STRING) return ptr && *(const char *)ptr;
      if (f->type == PROTOBUF_C_TYPE_MESSAGE) return ptr != NULL;
      if (f->type == PROTOBUF_C_TYPE_BYTES) return ((const ProtobufCBinaryData *)m)->len > 0;
      return !is_zero(m, ct_text_elt_size(f->type));
  }
}

static void print_message(text_buf *b, const ProtobufCMessage *msg, int depth);

static void print_value(text_buf *b, const ProtobufCFieldDescriptor *f, const void *v, int depth) {
  buf_indent(b, depth);
  buf_puts(b, f->name);
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
    const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)v;
    buf_puts(b, " {\n");
    if (sub) print_message(b, sub, depth + 1);
    buf_indent(b, depth);
    buf_puts(b, "}\n");
    return;
  }
  buf_puts(b, ": ");
  print_scalar(b, f, v);
  buf_puts(b, "\n");
}

/* protobuf-c lists a message's fields sorted by number, so walking the array
 * prints them in field-number order. */
static void print_message(text_buf *b, const ProtobufCMessage *msg, int depth) {
  const ProtobufCMessageDescriptor *desc = msg->descriptor;
  for (unsigned i = 0; i < desc->n_fields && !b->failed; i++) {
    const ProtobufCFieldDescriptor *f = &desc->fields[i];
    size_t n = value_count(msg, f);
    const char *m = (const char *)msg + f->offset;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
      if (n) print_value(b, f, m, depth);
      continue;
    }
    const char *array = *(const char *const *)m;
    size_t size = ct_text_elt_size(f->type);
    for (size_t k = 0; k < n && array; k++) print_value(b, f, array + k * size, depth);
  }
}

char *ct_text_print(const ProtobufCMessage *msg) {
  CT_ASSERT(msg && msg->descriptor);
  text_buf b = {0};
  buf_append(&b, "", 0);
  print_message(&b, msg, 0);
  if (b.failed) {
    free(b.data);
    return NULL;
  }
  return b.data;
}
