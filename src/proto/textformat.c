/* Text-format parser: tokens (text_lex.c) -> a protobuf-c message built by
 * walking the message's descriptors.
 *
 * Memory: every value is malloc'd in the layout protobuf-c expects and hung
 * on the message tree as soon as it exists, so on any error freeing the root
 * with protobuf_c_message_free_unpacked releases everything.  Repeated arrays
 * grow by doubling; their capacity is n rounded up to a power of two, so no
 * capacity needs storing. */
#include "proto/textformat.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strutil.h"
#include "proto/catalog.h"
#include "proto/srcpos.h"
#include "proto/text_internal.h"

typedef ct_tparser parser;

/* A value read from the text, in the member matching the field's type.  All
 * members start at offset 0, so the first ct_text_elt_size() bytes are the value as
 * protobuf-c stores it. */
typedef union value {
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f;
  double d;
  protobuf_c_boolean b;
  char *str;
  ProtobufCBinaryData bin;
} value;

/* Where a '{' or '<' block was opened, for "reached end of file" messages. */
typedef struct block_open {
  const char *field;
  int line, col;
  char close;
} block_open;


/* ------------------------------------------------------------ helpers */

static void *member_at(ProtobufCMessage *msg, unsigned offset) { return (char *)msg + offset; }

size_t ct_text_elt_size(ProtobufCType type) {
  switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM: return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
  }
  CT_ASSERTF(0, "unknown protobuf-c type %d", (int)type);
}

/* "uint32", "enum PoolMethod", "ConvolutionParameter", ... */
static void type_label(const ProtobufCFieldDescriptor *f, char *out, size_t size) {
  static const char *const names[] = {
      [PROTOBUF_C_TYPE_INT32] = "int32",       [PROTOBUF_C_TYPE_SINT32] = "sint32",
      [PROTOBUF_C_TYPE_SFIXED32] = "sfixed32", [PROTOBUF_C_TYPE_INT64] = "int64",
      [PROTOBUF_C_TYPE_SINT64] = "sint64",     [PROTOBUF_C_TYPE_SFIXED64] = "sfixed64",
      [PROTOBUF_C_TYPE_UINT32] = "uint32",     [PROTOBUF_C_TYPE_FIXED32] = "fixed32",
      [PROTOBUF_C_TYPE_UINT64] = "uint64",     [PROTOBUF_C_TYPE_FIXED64] = "fixed64",
      [PROTOBUF_C_TYPE_FLOAT] = "float",       [PROTOBUF_C_TYPE_DOUBLE] = "double",
      [PROTOBUF_C_TYPE_BOOL] = "bool",         [PROTOBUF_C_TYPE_STRING] = "string",
      [PROTOBUF_C_TYPE_BYTES] = "bytes"};
  if (f->type == PROTOBUF_C_TYPE_ENUM)
    snprintf(out, size, "enum %s", ((const ProtobufCEnumDescriptor *)f->descriptor)->short_name);
  else if (f->type == PROTOBUF_C_TYPE_MESSAGE)
    snprintf(out, size, "%s", ((const ProtobufCMessageDescriptor *)f->descriptor)->short_name);
  else
    snprintf(out, size, "%s", names[f->type]);
}

static void where(const parser *p, const ProtobufCMessageDescriptor *desc, char *out, size_t size) {
  ct_text_where(p->path, p->depth, desc, out, size);
}

/* "field 'num_output' (uint32) in ConvolutionParameter at layer[1].convolution_param" */
static void field_phrase(const parser *p, const ProtobufCMessageDescriptor *desc,
                         const ProtobufCFieldDescriptor *f, char *out, size_t size) {
  char type[128], in[512];
  type_label(f, type, sizeof type);
  where(p, desc, in, sizeof in);
  snprintf(out, size, "field '%s' (%s) in %s", f->name, type, in);
}

static ct_status fail_at(parser *p, const ct_ttoken *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ct_status fail_at(parser *p, const ct_ttoken *at, const char *fmt, ...) {
  char what[CT_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return ct_text_error_at(p->err, p->file, at->line, at->col, "%s", what);
}

static ct_status out_of_memory(parser *p) {
  return ct_error_set(p->err, CT_ERR_NOMEM, "%s: out of memory while parsing", p->file);
}

static ct_status advance(parser *p) { return ct_tlex_next(&p->lx, &p->tok, p->err); }

static bool at_symbol(const parser *p, char c) { return ct_ttoken_is(&p->tok, c); }

/* The token after the current one, or EOF when it does not lex. */
static ct_ttoken peek_next(const parser *p) {
  ct_tlex copy = p->lx;
  ct_ttoken t;
  if (ct_tlex_next(&copy, &t, NULL) != CT_OK) t.kind = CT_TTOKEN_EOF;
  return t;
}

static bool token_equals(const ct_ttoken *t, const char *s) {
  return t->len == strlen(s) && memcmp(t->text, s, t->len) == 0;
}

static bool token_equals_nocase(const ct_ttoken *t, const char *s) {
  if (t->len != strlen(s)) return false;
  for (size_t i = 0; i < t->len; i++) {
    char c = t->text[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != s[i]) return false;
  }
  return true;
}

static ct_status new_message(parser *p, const ProtobufCMessageDescriptor *desc,
                             ProtobufCMessage **out) {
  ProtobufCMessage *msg = malloc(desc->sizeof_message);
  if (!msg) return out_of_memory(p);
  protobuf_c_message_init(desc, msg);
  *out = msg;
  return CT_OK;
}

/* Makes room for one more element of repeated field f; *slot points at it.
 * The caller fills the slot, then increments the count. */
static ct_status repeated_slot(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                               void **slot) {
  size_t *n = member_at(msg, f->quantifier_offset);
  void **array = member_at(msg, f->offset);
  size_t size = ct_text_elt_size(f->type);
  if (*n == 0 || (*n & (*n - 1)) == 0) {
    size_t cap = *n ? *n * 2 : 1;
    if (cap > SIZE_MAX / size) return out_of_memory(p);
    void *grown = realloc(*array, cap * size);
    if (!grown) return out_of_memory(p);
    *array = grown;
  }
  *slot = (char *)*array + *n * size;
  return CT_OK;
}

/* ------------------------------------------------------------ scalar values */

static ct_status expected(parser *p, const ProtobufCMessageDescriptor *desc,
                          const ProtobufCFieldDescriptor *f, const char *what, const char *hint) {
  char field[768], got[64];
  field_phrase(p, desc, f, field, sizeof field);
  ct_ttoken_describe(&p->tok, got, sizeof got);
  return fail_at(p, &p->tok, "expected %s for %s, got %s%s", what, field, got, hint);
}

static ct_status out_of_range(parser *p, const ProtobufCMessageDescriptor *desc,
                              const ProtobufCFieldDescriptor *f, const ct_ttoken *at, bool neg,
                              const char *range) {
  char field[768];
  field_phrase(p, desc, f, field, sizeof field);
  int n = (int)(p->tok.len > 40 ? 40 : p->tok.len);
  return fail_at(p, at, "value %s%.*s is out of range for %s%s", neg ? "-" : "", n, p->tok.text,
                 field, range);
}

/* Value of an integer token (decimal, 0x hex or 0 octal); false on overflow. */
static bool token_to_u64(const ct_ttoken *t, uint64_t *out) {
  const char *s = t->text, *end = t->text + t->len;
  unsigned base = 10;
  if (t->len > 2 && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
  } else if (t->len > 1 && s[0] == '0') {
    base = 8;
    s++;
  }
  uint64_t v = 0;
  for (; s < end; s++) {
    char c = *s;
    unsigned d = (c >= '0' && c <= '9') ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
    if (v > (UINT64_MAX - d) / base) return false;
    v = v * base + d;
  }
  *out = v;
  return true;
}

/* Reads an optional '-': *neg tells whether there was one, *start is the
 * first token of the value (for messages), p->tok the one after the sign. */
static ct_status read_sign(parser *p, bool *neg, ct_ttoken *start) {
  *start = p->tok;
  *neg = false;
  if (at_symbol(p, '-')) {
    *neg = true;
    CT_TRY(advance(p));
  }
  return CT_OK;
}

/* An integer for field f, range-checked as `type` (the field's own type, or
 * int32 for an enum given by number). */
static ct_status parse_integer(parser *p, const ProtobufCMessageDescriptor *desc,
                               const ProtobufCFieldDescriptor *f, ProtobufCType type, value *v) {
  bool neg;
  ct_ttoken start;
  CT_TRY(read_sign(p, &neg, &start));
  if (p->tok.kind != CT_TTOKEN_INT) return expected(p, desc, f, "an integer", "");
  uint64_t mag;
  bool fits = token_to_u64(&p->tok, &mag);
  switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
      if (!fits || mag > (neg ? 2147483648u : 2147483647u))
        return out_of_range(p, desc, f, &start, neg, " (-2147483648 to 2147483647)");
      v->i32 = neg ? (int32_t)(0 - mag) : (int32_t)mag;
      break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      if (!fits || mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
        return out_of_range(p, desc, f, &start, neg,
                            " (-9223372036854775808 to 9223372036854775807)");
      v->i64 = neg ? (int64_t)(0 - mag) : (int64_t)mag;
      break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      if (!fits || mag > UINT32_MAX || (neg && mag != 0))
        return out_of_range(p, desc, f, &start, neg, " (0 to 4294967295)");
      v->u32 = (uint32_t)mag;
      break;
    default:
      if (!fits || (neg && mag != 0))
        return out_of_range(p, desc, f, &start, neg, " (0 to 18446744073709551615)");
      v->u64 = mag;
      break;
  }
  return advance(p);
}

/* The number in a decimal INT or FLOAT token.  Float fields too are read
 * as a double and then rounded to float, as protobuf's own parser (and so
 * Caffe) does, so both give the same bits. */
static ct_status decimal_value(parser *p, double *out) {
  char small[64], *buf = small;
  size_t len = p->tok.len;
  if (len > 0 && (p->tok.text[len - 1] == 'f' || p->tok.text[len - 1] == 'F')) len--;
  if (len >= sizeof small && !(buf = malloc(len + 1))) return out_of_memory(p);
  memcpy(buf, p->tok.text, len);
  buf[len] = '\0';
  *out = strtod(buf, NULL);
  if (buf != small) free(buf);
  return CT_OK;
}

static ct_status parse_real(parser *p, const ProtobufCMessageDescriptor *desc,
                            const ProtobufCFieldDescriptor *f, value *v) {
  bool neg, as_float = f->type == PROTOBUF_C_TYPE_FLOAT;
  ct_ttoken start;
  CT_TRY(read_sign(p, &neg, &start));
  double x = 0;
  const ct_ttoken *t = &p->tok;
  if (t->kind == CT_TTOKEN_IDENT && (token_equals_nocase(t, "inf") ||
                                     token_equals_nocase(t, "infinity"))) {
    x = INFINITY;
  } else if (t->kind == CT_TTOKEN_IDENT && token_equals_nocase(t, "nan")) {
    x = NAN;
  } else if (t->kind == CT_TTOKEN_INT && t->len > 1 && t->text[0] == '0') {
    uint64_t u; /* hex or octal */
    if (!token_to_u64(t, &u)) return out_of_range(p, desc, f, &start, neg, "");
    x = as_float ? (double)(float)u : (double)u;
  } else if (t->kind == CT_TTOKEN_INT || t->kind == CT_TTOKEN_FLOAT) {
    CT_TRY(decimal_value(p, &x));
    if (isinf(x) || (as_float && isinf((float)x)))
      return out_of_range(p, desc, f, &start, neg, "");
  } else {
    return expected(p, desc, f, "a number", "");
  }
  if (neg) x = -x;
  if (as_float)
    v->f = (float)x;
  else
    v->d = x;
  return advance(p);
}

static ct_status parse_bool(parser *p, const ProtobufCMessageDescriptor *desc,
                            const ProtobufCFieldDescriptor *f, value *v) {
  const ct_ttoken *t = &p->tok;
  if (t->kind == CT_TTOKEN_IDENT &&
      (token_equals(t, "true") || token_equals(t, "True") || token_equals(t, "t")))
    v->b = 1;
  else if (t->kind == CT_TTOKEN_IDENT &&
           (token_equals(t, "false") || token_equals(t, "False") || token_equals(t, "f")))
    v->b = 0;
  else if (t->kind == CT_TTOKEN_INT && (token_equals(t, "1") || token_equals(t, "0")))
    v->b = t->text[0] == '1';
  else
    return expected(p, desc, f, "true or false", "");
  return advance(p);
}

/* " (expected one of A, B, C)" for short enums, else "". */
static void enum_choices(const ProtobufCEnumDescriptor *ed, char *out, size_t size) {
  out[0] = '\0';
  if (ed->n_values == 0 || ed->n_values > 12) return;
  int n = snprintf(out, size, " (expected one of ");
  for (unsigned i = 0; i < ed->n_values && n >= 0 && (size_t)n < size; i++)
    n += snprintf(out + n, size - n, "%s%s", i ? ", " : "", ed->values[i].name);
  if (n >= 0 && (size_t)n < size) snprintf(out + n, size - n, ")");
}

static ct_status unknown_enum_name(parser *p, const ProtobufCMessageDescriptor *desc,
                                   const ProtobufCFieldDescriptor *f, const char *name) {
  const ProtobufCEnumDescriptor *ed = f->descriptor;
  const char *names[MAX_SUGGEST];
  size_t n = ed->n_values < MAX_SUGGEST ? ed->n_values : MAX_SUGGEST;
  for (size_t i = 0; i < n; i++) names[i] = ed->values[i].name;
  const char *guess = ct_suggest(name, names, n);
  char in[512], hint[512];
  where(p, desc, in, sizeof in);
  if (guess)
    snprintf(hint, sizeof hint, " (did you mean '%s'?)", guess);
  else
    enum_choices(ed, hint, sizeof hint);
  return fail_at(p, &p->tok, "unknown value '%s' for enum %s of field '%s' in %s%s", name,
                 ed->short_name, f->name, in, hint);
}

static ct_status parse_enum(parser *p, const ProtobufCMessageDescriptor *desc,
                            const ProtobufCFieldDescriptor *f, value *v) {
  const ProtobufCEnumDescriptor *ed = f->descriptor;
  if (p->tok.kind == CT_TTOKEN_IDENT) {
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%.*s", (int)p->tok.len, p->tok.text);
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(ed, name);
    if (!ev || p->tok.len >= sizeof name) return unknown_enum_name(p, desc, f, name);
    v->i32 = ev->value;
    return advance(p);
  }
  if (p->tok.kind == CT_TTOKEN_STRING)
    return expected(p, desc, f, "an enum value", " (enum values are written without quotes)");
  if (p->tok.kind != CT_TTOKEN_INT && !at_symbol(p, '-'))
    return expected(p, desc, f, "an enum value", "");
  ct_ttoken start = p->tok;
  CT_TRY(parse_integer(p, desc, f, PROTOBUF_C_TYPE_INT32, v));
  if (!protobuf_c_enum_descriptor_get_value(ed, v->i32)) {
    char in[512], choices[512];
    where(p, desc, in, sizeof in);
    enum_choices(ed, choices, sizeof choices);
    return fail_at(p, &start, "value %d is not a member of enum %s of field '%s' in %s%s", v->i32,
                   ed->short_name, f->name, in, choices);
  }
  return CT_OK;
}

/* One or more adjacent string literals, decoded and joined. */
static ct_status parse_string(parser *p, const ProtobufCMessageDescriptor *desc,
                              const ProtobufCFieldDescriptor *f, value *v) {
  if (p->tok.kind != CT_TTOKEN_STRING) {
    if (p->tok.kind == CT_TTOKEN_EOF || p->tok.kind == CT_TTOKEN_SYMBOL)
      return expected(p, desc, f, "a quoted string", "");
    char hint[96];
    snprintf(hint, sizeof hint, " (strings need quotes: \"%.*s\")",
             (int)(p->tok.len > 40 ? 40 : p->tok.len), p->tok.text);
    return expected(p, desc, f, "a quoted string", hint);
  }
  char *joined = NULL;
  size_t joined_len = 0;
  while (p->tok.kind == CT_TTOKEN_STRING) {
    char *part;
    size_t part_len;
    ct_status st = ct_ttoken_unescape(&p->tok, p->file, &part, &part_len, p->err);
    if (st == CT_OK && f->type == PROTOBUF_C_TYPE_STRING && memchr(part, '\0', part_len)) {
      char field[768];
      field_phrase(p, desc, f, field, sizeof field);
      free(part);
      st = fail_at(p, &p->tok, "a NUL byte cannot go in %s (only bytes fields can hold one)",
                   field);
    }
    if (st != CT_OK) {
      free(joined);
      return st;
    }
    char *grown = realloc(joined, joined_len + part_len + 1);
    if (!grown) {
      free(part);
      free(joined);
      return out_of_memory(p);
    }
    joined = grown;
    memcpy(joined + joined_len, part, part_len + 1);
    joined_len += part_len;
    free(part);
    st = advance(p);
    if (st != CT_OK) {
      free(joined);
      return st;
    }
  }
  if (f->type == PROTOBUF_C_TYPE_STRING) {
    v->str = joined;
  } else {
    v->bin.data = (uint8_t *)joined;
    v->bin.len = joined_len;
  }
  return CT_OK;
}

/* Frees a string or bytes value read by parse_string. */
static void free_value(const ProtobufCFieldDescriptor *f, value *v) {
  if (f->type == PROTOBUF_C_TYPE_STRING) free(v->str);
  if (f->type == PROTOBUF_C_TYPE_BYTES) free(v->bin.data);
}

/* Releases the string or bytes currently held by non-repeated field f, unless
 * it is the descriptor's static default. */
static void release_member(ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  void *m = member_at(msg, f->offset);
  if (f->type == PROTOBUF_C_TYPE_STRING) {
    char *s = *(char **)m;
    if (s && s != f->default_value && s != protobuf_c_empty_string) free(s);
  } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
    ProtobufCBinaryData *b = m;
    const ProtobufCBinaryData *def = f->default_value;
    if (b->data && (!def || b->data != def->data)) free(b->data);
  }
}

/* Stores v into field f of msg (appending when repeated); takes ownership of
 * string and bytes values. */
static ct_status store_value(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                             value *v) {
  size_t size = ct_text_elt_size(f->type);
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    void *slot;
    ct_status st = repeated_slot(p, msg, f, &slot);
    if (st != CT_OK) {
      free_value(f, v);
      return st;
    }
    memcpy(slot, v, size);
    (*(size_t *)member_at(msg, f->quantifier_offset))++;
    return CT_OK;
  }
  uint32_t *oneof_case = NULL;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) oneof_case = member_at(msg, f->quantifier_offset);
  if (!oneof_case || *oneof_case == f->id) release_member(msg, f);
  memcpy(member_at(msg, f->offset), v, size);
  if (oneof_case)
    *oneof_case = f->id;
  else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING)
    *(protobuf_c_boolean *)member_at(msg, f->quantifier_offset) = 1;
  return CT_OK;
}

/* A value is missing when the field is followed by something that can only
 * end a field or start the next one: `name:` then `}` or `type: "x"`. */
static bool value_missing(const parser *p) {
  const ct_ttoken *t = &p->tok;
  if (t->kind == CT_TTOKEN_EOF) return true;
  if (t->kind == CT_TTOKEN_SYMBOL) return strchr("}>;,]", t->text[0]) != NULL;
  if (t->kind != CT_TTOKEN_IDENT) return false;
  ct_ttoken next = peek_next(p);
  return ct_ttoken_is(&next, ':') || ct_ttoken_is(&next, '{') || ct_ttoken_is(&next, '<');
}

static ct_status parse_value(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                             const ct_ttoken *name) {
  const ProtobufCMessageDescriptor *desc = msg->descriptor;
  if (value_missing(p)) {
    char field[768];
    field_phrase(p, desc, f, field, sizeof field);
    return fail_at(p, name, "missing value for %s", field);
  }
  value v;
  memset(&v, 0, sizeof v);
  switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: CT_TRY(parse_real(p, desc, f, &v)); break;
    case PROTOBUF_C_TYPE_BOOL: CT_TRY(parse_bool(p, desc, f, &v)); break;
    case PROTOBUF_C_TYPE_ENUM: CT_TRY(parse_enum(p, desc, f, &v)); break;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES: CT_TRY(parse_string(p, desc, f, &v)); break;
    case PROTOBUF_C_TYPE_MESSAGE: CT_ASSERT(!"messages are not scalar values"); break;
    default: CT_TRY(parse_integer(p, desc, f, f->type, &v)); break;
  }
  return store_value(p, msg, f, &v);
}

/* ------------------------------------------------------------ messages */

static ct_status parse_block(parser *p, ProtobufCMessage *msg, const block_open *open,
                             bool check_required);

/* The message to fill for message field f: a new element of a repeated
 * field, or the field's existing message (merged into, *merged set) or a
 * new one. */
static ct_status message_slot(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                              ProtobufCMessage **sub, long *index, bool *merged) {
  *index = -1;
  *merged = false;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    void *slot;
    CT_TRY(repeated_slot(p, msg, f, &slot));
    CT_TRY(new_message(p, f->descriptor, sub));
    *(ProtobufCMessage **)slot = *sub;
    size_t *n = member_at(msg, f->quantifier_offset);
    *index = (long)(*n)++;
    return CT_OK;
  }
  ProtobufCMessage **m = member_at(msg, f->offset);
  uint32_t *oneof_case = NULL;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) oneof_case = member_at(msg, f->quantifier_offset);
  bool present = (!oneof_case || *oneof_case == f->id) && *m && *m != f->default_value;
  if (present) {
    *sub = *m;
    *merged = true;
    return CT_OK;
  }
  CT_TRY(new_message(p, f->descriptor, sub));
  *m = *sub;
  if (oneof_case) *oneof_case = f->id;
  return CT_OK;
}

static ct_status not_a_block(parser *p, ProtobufCMessage *msg,
                             const ProtobufCFieldDescriptor *f) {
  char in[512], got[64];
  where(p, msg->descriptor, in, sizeof in);
  ct_ttoken_describe(&p->tok, got, sizeof got);
  return fail_at(p, &p->tok, "field '%s' in %s is a message (%s): expected '{', got %s", f->name,
                 in, ((const ProtobufCMessageDescriptor *)f->descriptor)->short_name, got);
}

/* `{ ... }` or `< ... >` for message field f; p->tok is on the opening symbol. */
static ct_status parse_submessage(parser *p, ProtobufCMessage *msg,
                                  const ProtobufCFieldDescriptor *f, const ct_ttoken *name) {
  if (!at_symbol(p, '{') && !at_symbol(p, '<')) return not_a_block(p, msg, f);
  if (p->depth >= CT_TEXT_MAX_DEPTH)
    return fail_at(p, &p->tok, "messages nested more than %d deep", CT_TEXT_MAX_DEPTH);
  block_open open = {f->name, name->line, name->col, at_symbol(p, '{') ? '}' : '>'};
  ProtobufCMessage *sub = NULL;
  long index;
  bool merged;
  CT_TRY(message_slot(p, msg, f, &sub, &index, &merged));
  p->path[p->depth++] = (path_step){f->name, index, sub};
  ct_status st = advance(p);
  /* A merged block may leave out required fields: its first block had them. */
  if (st == CT_OK) st = parse_block(p, sub, &open, !merged);
  p->depth--;
  return st;
}

static ct_status not_a_list(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f) {
  char field[768];
  field_phrase(p, msg->descriptor, f, field, sizeof field);
  return fail_at(p, &p->tok, "%s is not repeated, so it cannot take a list [...]", field);
}

static ct_status list_needs_comma(parser *p, ProtobufCMessage *msg,
                                  const ProtobufCFieldDescriptor *f) {
  char in[512], got[64];
  where(p, msg->descriptor, in, sizeof in);
  ct_ttoken_describe(&p->tok, got, sizeof got);
  return fail_at(p, &p->tok, "expected ',' or ']' in the list of field '%s' in %s, got %s",
                 f->name, in, got);
}

/* `[a, b, c]` after `field:`; p->tok is on '['. */
static ct_status parse_list(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                            const ct_ttoken *name) {
  if (f->label != PROTOBUF_C_LABEL_REPEATED) return not_a_list(p, msg, f);
  CT_TRY(advance(p));
  if (at_symbol(p, ']')) return advance(p);
  for (;;) {
    if (f->type == PROTOBUF_C_TYPE_MESSAGE)
      CT_TRY(parse_submessage(p, msg, f, name));
    else
      CT_TRY(parse_value(p, msg, f, name));
    if (at_symbol(p, ']')) return advance(p);
    if (!at_symbol(p, ',')) return list_needs_comma(p, msg, f);
    CT_TRY(advance(p));
  }
}

/* Two members of one oneof: protobuf rejects the second. */
static ct_status check_oneof(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f,
                             const ct_ttoken *name) {
  if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) return CT_OK;
  uint32_t set = *(uint32_t *)member_at(msg, f->quantifier_offset);
  if (set == 0 || set == f->id) return CT_OK;
  const ProtobufCFieldDescriptor *other =
      protobuf_c_message_descriptor_get_field(msg->descriptor, set);
  char in[512];
  where(p, msg->descriptor, in, sizeof in);
  return fail_at(p, name, "field '%s' in %s is given along with field '%s', another member of "
                 "the same oneof", f->name, in, other ? other->name : "?");
}

/* A scalar field name not followed by ':'.  (Error paths live in their own
 * functions so that their buffers stay off the recursive parsing frames.) */
static ct_status missing_colon(parser *p, const ProtobufCMessageDescriptor *desc,
                               const ProtobufCFieldDescriptor *f) {
  char phrase[768], got[64];
  field_phrase(p, desc, f, phrase, sizeof phrase);
  ct_ttoken_describe(&p->tok, got, sizeof got);
  if (at_symbol(p, '{') || at_symbol(p, '<'))
    return fail_at(p, &p->tok, "%s is not a message, so it cannot take '%c'; write '%s: value'",
                   phrase, p->tok.text[0], f->name);
  return fail_at(p, &p->tok, "expected ':' after %s, got %s", phrase, got);
}

/* A non-repeated scalar given a list without brackets (`device_id: 0,1`):
 * the ',' was read as the separator after the first value, and a value
 * follows. */
static ct_status one_value_only(parser *p, const ProtobufCMessageDescriptor *desc,
                                const ProtobufCFieldDescriptor *f) {
  if (!at_symbol(p, ',')) return CT_OK;
  ct_ttoken next = peek_next(p);
  if (next.kind != CT_TTOKEN_INT && next.kind != CT_TTOKEN_FLOAT && next.kind != CT_TTOKEN_STRING &&
      !ct_ttoken_is(&next, '-'))
    return CT_OK;
  char field[768], note[512] = "";
  field_phrase(p, desc, f, field, sizeof field);
  const char *advice = ct_caffe_list_note(desc->short_name, f->name);
  if (advice) snprintf(note, sizeof note, ": %s", advice);
  return fail_at(p, &next, "%s takes one value, not a list%s", field, note);
}

/* One `name: value`, `name { ... }` or `name: [ ... ]`; p->tok is on name.
 * *field is set to the field once it is known (NULL for an unknown field,
 * which is recorded and skipped).  Its position goes into pos (when
 * recording). */
static ct_status parse_field(parser *p, ProtobufCMessage *msg, const ProtobufCFieldDescriptor **field,
                             ct_srcpos_builder *pos) {
  const ProtobufCMessageDescriptor *desc = msg->descriptor;
  ct_ttoken name = p->tok;
  char word[NAME_MAX_LEN];
  snprintf(word, sizeof word, "%.*s", (int)name.len, name.text);
  const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(desc, word);
  if (!f || name.len >= sizeof word) return ct_text_unknown_field(p, desc, &name);
  *field = f;
  CT_TRY(check_oneof(p, msg, f, &name));
  CT_TRY(advance(p));
  bool colon = at_symbol(p, ':');
  if (f->type != PROTOBUF_C_TYPE_MESSAGE && !colon) return missing_colon(p, desc, f);
  if (colon) CT_TRY(advance(p));
  const bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
  const size_t before = repeated ? *(size_t *)member_at(msg, f->quantifier_offset) : 0;
  if (at_symbol(p, '['))
    CT_TRY(parse_list(p, msg, f, &name));
  else if (f->type == PROTOBUF_C_TYPE_MESSAGE)
    CT_TRY(parse_submessage(p, msg, f, &name));
  else
    CT_TRY(parse_value(p, msg, f, &name));
  if (!repeated && f->type != PROTOBUF_C_TYPE_MESSAGE) CT_TRY(one_value_only(p, desc, f));
  const size_t after = repeated ? *(size_t *)member_at(msg, f->quantifier_offset) : 1;
  for (size_t i = before; pos && i < after; i++) ct_srcpos_add(pos, f->id, i, name.line, name.col);
  if (at_symbol(p, ';') || at_symbol(p, ',')) CT_TRY(advance(p));
  return CT_OK;
}

static ct_status check_required(parser *p, ProtobufCMessage *msg, const unsigned char *seen) {
  const ProtobufCMessageDescriptor *desc = msg->descriptor;
  for (unsigned i = 0; seen && i < desc->n_fields; i++) {
    if (desc->fields[i].label != PROTOBUF_C_LABEL_REQUIRED || seen[i]) continue;
    char field[768];
    field_phrase(p, desc, &desc->fields[i], field, sizeof field);
    return fail_at(p, &p->tok, "missing required %s", field);
  }
  return CT_OK;
}

/* Something other than a field name, '}' or '>' where a field should start. */
static ct_status not_a_field_name(parser *p, const ProtobufCMessageDescriptor *desc) {
  char in[512], got[64];
  where(p, desc, in, sizeof in);
  ct_ttoken_describe(&p->tok, got, sizeof got);
  if (at_symbol(p, '['))
    return fail_at(p, &p->tok, "extension and Any fields ('[...]') are not supported in %s", in);
  return fail_at(p, &p->tok, "expected a field name in %s, got %s", in, got);
}

/* Fields up to the closing symbol (or the end of the text at the top). */
static ct_status parse_fields(parser *p, ProtobufCMessage *msg, const block_open *open,
                              unsigned char *seen, ct_srcpos_builder *pos) {
  const ProtobufCMessageDescriptor *desc = msg->descriptor;
  char close = open ? open->close : 0;
  for (;;) {
    const ct_ttoken *t = &p->tok;
    if (t->kind == CT_TTOKEN_IDENT) {
      const ProtobufCFieldDescriptor *f = NULL;
      CT_TRY(parse_field(p, msg, &f, pos));
      if (seen && f) seen[f - desc->fields] = 1;
      continue;
    }
    if (t->kind == CT_TTOKEN_EOF) {
      if (!close) return check_required(p, msg, seen);
      return fail_at(p, t, "reached end of file inside '%s' opened at %d:%d (missing '%c')",
                     open->field, open->line, open->col, close);
    }
    if (close && ct_ttoken_is(t, close)) {
      CT_TRY(check_required(p, msg, seen));
      return advance(p);
    }
    if (ct_ttoken_is(t, '}') || ct_ttoken_is(t, '>')) {
      if (!close) return fail_at(p, t, "unexpected '%c' with no open message to close", *t->text);
      return fail_at(p, t, "expected '%c' to close '%s' opened at %d:%d, got '%c'", close,
                     open->field, open->line, open->col, *t->text);
    }
    return not_a_field_name(p, desc);
  }
}

static bool has_required(const ProtobufCMessageDescriptor *desc) {
  for (unsigned i = 0; i < desc->n_fields; i++)
    if (desc->fields[i].label == PROTOBUF_C_LABEL_REQUIRED) return true;
  return false;
}

/* The fields of msg (a block opened at `open`, or the whole text), and
 * with CT_TEXT_POSITIONS their positions hung on msg (proto/srcpos.h).
 * Required fields are checked unless the block adds to a message given
 * before (check false). */
static ct_status parse_block(parser *p, ProtobufCMessage *msg, const block_open *open,
                             bool check) {
  unsigned char *seen = NULL;
  if (check && has_required(msg->descriptor) && !(seen = calloc(msg->descriptor->n_fields, 1)))
    return out_of_memory(p);
  ct_srcpos_builder pos = {0};
  const bool record = (p->flags & CT_TEXT_POSITIONS) != 0;
  if (record) ct_srcpos_begin(&pos, p->file, open ? open->line : 1, open ? open->col : 1);
  ct_status st = parse_fields(p, msg, open, seen, record ? &pos : NULL);
  free(seen);
  if (st == CT_OK && record && !ct_srcpos_attach(&pos, msg)) st = out_of_memory(p);
  ct_srcpos_discard(&pos);
  return st;
}

ct_status ct_text_parse_with(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                             const char *filename, unsigned flags, ProtobufCMessage **out, ct_error *err) {
  CT_ASSERT(desc && out && (text || len == 0));
  *out = NULL;
  parser p;
  memset(&p, 0, sizeof p);
  p.file = filename ? filename : "<text>";
  p.flags = flags;
  p.err = err;
  ct_tlex_init(&p.lx, p.file, text ? text : "", len);
  ProtobufCMessage *msg = NULL;
  CT_TRY(new_message(&p, desc, &msg));
  ct_status st = advance(&p);
  if (st == CT_OK) st = parse_block(&p, msg, NULL, true);
  if (st == CT_OK && p.n_unknown > 0) st = ct_text_report_unknown(&p);
  ct_text_free_unknown(&p);
  if (st != CT_OK) {
    protobuf_c_message_free_unpacked(msg, NULL);
    return st;
  }
  *out = msg;
  return CT_OK;
}

ct_status ct_text_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                        const char *filename, ProtobufCMessage **out, ct_error *err) {
  return ct_text_parse_with(desc, text, len, filename, 0, out, err);
}
