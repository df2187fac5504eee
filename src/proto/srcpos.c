#include "proto/srcpos.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ varints */

/* Makes room for `more` bytes; false (and the record dropped: positions are
 * a convenience) when memory runs out. */
static bool reserve(ct_srcpos_builder *b, size_t more) {
  if (b->len + more > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->len + more) cap *= 2;
    uint8_t *grown = realloc(b->buf, cap);
    if (!grown) {
      free(b->buf);
      b->buf = NULL;
      b->len = b->cap = 0;
      return false;
    }
    b->buf = grown;
    b->cap = cap;
  }
  return true;
}

static void put_varint(ct_srcpos_builder *b, uint64_t v) {
  if (!reserve(b, 10)) return;
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    b->buf[b->len++] = byte | (v ? 0x80 : 0);
  } while (v);
}

/* Reads a varint at *p (before end); false at a malformed record. */
static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; *p < end && shift < 64; shift += 7) {
    uint8_t byte = *(*p)++;
    *v |= (uint64_t)(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

/* ------------------------------------------------------------ building */

void ct_srcpos_begin(ct_srcpos_builder *b, const char *file, int line, int col) {
  b->len = 0;
  size_t n = strlen(file);
  put_varint(b, n);
  if (!reserve(b, n)) return;
  memcpy(b->buf + b->len, file, n);
  b->len += n;
  put_varint(b, (uint64_t)line);
  put_varint(b, (uint64_t)col);
}

void ct_srcpos_add(ct_srcpos_builder *b, uint32_t field, size_t index, int line, int col) {
  if (!b->buf) return; /* dropped for want of memory */
  put_varint(b, field);
  put_varint(b, index);
  put_varint(b, (uint64_t)line);
  put_varint(b, (uint64_t)col);
}

void ct_srcpos_discard(ct_srcpos_builder *b) {
  free(b->buf);
  memset(b, 0, sizeof *b);
}

static ProtobufCMessageUnknownField *record_of(const ProtobufCMessage *msg) {
  for (size_t i = msg->n_unknown_fields; i-- > 0;)
    if (msg->unknown_fields[i].tag == CT_SRCPOS_FIELD &&
        msg->unknown_fields[i].wire_type == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED)
      return &msg->unknown_fields[i];
  return NULL;
}

/* The header of a record: file, line, col; *p is left on the first entry. */
typedef struct header {
  char file[1024];
  uint64_t line, col;
} header;

static bool read_header(const uint8_t **p, const uint8_t *end, header *h) {
  uint64_t n;
  if (!get_varint(p, end, &n) || n > (uint64_t)(end - *p)) return false;
  size_t k = n < sizeof h->file ? (size_t)n : sizeof h->file - 1;
  memcpy(h->file, *p, k);
  h->file[k] = '\0';
  *p += n;
  return get_varint(p, end, &h->line) && get_varint(p, end, &h->col);
}

/* The payload of a record (its data start with the length, as the wire
 * format has it) into [*p, *end). */
static bool payload(const ProtobufCMessageUnknownField *r, const uint8_t **p, const uint8_t **end) {
  const uint8_t *q = r->data, *stop = r->data + r->len;
  uint64_t n;
  if (!get_varint(&q, stop, &n) || n != (uint64_t)(stop - q)) return false;
  *p = q;
  *end = stop;
  return true;
}

/* Sets r's data to the length-prefixed concatenation of a and b. */
static bool set_data(ProtobufCMessageUnknownField *r, const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
  ct_srcpos_builder out = {0};
  put_varint(&out, na + nb);
  if (!out.buf || !reserve(&out, na + nb)) return ct_srcpos_discard(&out), false;
  memcpy(out.buf + out.len, a, na);
  if (nb) memcpy(out.buf + out.len + na, b, nb);
  free(r->data);
  r->data = out.buf;
  r->len = out.len + na + nb;
  return true;
}

bool ct_srcpos_attach(ct_srcpos_builder *b, ProtobufCMessage *msg) {
  if (!b->buf) return false;
  ProtobufCMessageUnknownField *old = record_of(msg);
  bool ok;
  if (old) { /* a second block of the same message: its field entries go after the first's */
    const uint8_t *p = b->buf, *end = b->buf + b->len, *op, *oend;
    header h;
    ok = read_header(&p, end, &h) && payload(old, &op, &oend) &&
         set_data(old, op, (size_t)(oend - op), p, (size_t)(end - p));
  } else {
    ProtobufCMessageUnknownField *fields =
        realloc(msg->unknown_fields, (msg->n_unknown_fields + 1) * sizeof *fields);
    ok = fields != NULL;
    if (ok) {
      msg->unknown_fields = fields;
      ProtobufCMessageUnknownField *f = &fields[msg->n_unknown_fields];
      f->tag = CT_SRCPOS_FIELD;
      f->wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
      f->data = NULL;
      ok = set_data(f, b->buf, b->len, NULL, 0);
      if (ok) msg->n_unknown_fields++;
    }
  }
  ct_srcpos_discard(b);
  return ok;
}

/* ------------------------------------------------------------ reading */

bool ct_srcpos_find(const ProtobufCMessage *msg, const char *field, size_t index, char *out, size_t size) {
  out[0] = '\0';
  const ProtobufCMessageUnknownField *r = msg ? record_of(msg) : NULL;
  const uint8_t *p, *end;
  header h;
  if (!r || !payload(r, &p, &end) || !read_header(&p, end, &h)) return false;
  uint64_t line = h.line, col = h.col;
  if (field) {
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, field);
    if (!f) return false;
    bool found = false;
    while (!found && p < end) {
      uint64_t id, idx, l, c;
      if (!get_varint(&p, end, &id) || !get_varint(&p, end, &idx) || !get_varint(&p, end, &l) ||
          !get_varint(&p, end, &c))
        return false;
      if (id == f->id && idx == index) {
        line = l;
        col = c;
        found = true;
      }
    }
    if (!found) return false;
  }
  snprintf(out, size, "%s:%llu:%llu", h.file, (unsigned long long)line, (unsigned long long)col);
  return true;
}

bool ct_srcpos_starts_with(const char *text) {
  const char *c = strchr(text, ':');
  if (!c || c == text) return false;
  const char *p = c + 1;
  if (!isdigit((unsigned char)*p)) return false;
  while (isdigit((unsigned char)*p)) p++;
  if (*p++ != ':' || !isdigit((unsigned char)*p)) return false;
  while (isdigit((unsigned char)*p)) p++;
  return p[0] == ':' && p[1] == ' ';
}

ct_status ct_srcpos_prefix(ct_error *err, const ProtobufCMessage *msg, const char *field, size_t index) {
  if (!err) return CT_OK;
  if (ct_srcpos_starts_with(err->msg)) return err->code;
  char at[1200];
  if (!(field && ct_srcpos_find(msg, field, index, at, sizeof at)) && !ct_srcpos_find(msg, NULL, 0, at, sizeof at))
    return err->code;
  return ct_error_prefix(err, "%s", at);
}

ct_status ct_srcpos_locate(ct_error *err, const ProtobufCMessage *msg) {
  if (!err || !msg) return err ? err->code : CT_OK;
  char name[128];
  size_t n = strcspn(err->msg, ":[");
  if (n == 0 || n >= sizeof name || (err->msg[n] != ':' && err->msg[n] != '[')) return err->code;
  memcpy(name, err->msg, n);
  name[n] = '\0';
  size_t index = 0;
  if (err->msg[n] == '[') {
    char *end;
    index = strtoul(err->msg + n + 1, &end, 10);
    if (*end != ']' || end[1] != ':') return err->code;
  }
  if (!protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, name)) return err->code;
  char at[1200];
  if (!ct_srcpos_find(msg, name, index, at, sizeof at)) return err->code;
  return ct_error_prefix(err, "%s", at);
}

void ct_srcpos_copy_by_name(ProtobufCMessage *dst, const ProtobufCMessage *src) {
  const ProtobufCMessageUnknownField *r = record_of(src);
  const uint8_t *p, *end;
  header h;
  if (!r || !payload(r, &p, &end) || !read_header(&p, end, &h)) return;
  ct_srcpos_builder b = {0};
  ct_srcpos_begin(&b, h.file, (int)h.line, (int)h.col);
  while (p < end) {
    uint64_t id, idx, l, c;
    if (!get_varint(&p, end, &id) || !get_varint(&p, end, &idx) || !get_varint(&p, end, &l) ||
        !get_varint(&p, end, &c))
      break;
    const ProtobufCFieldDescriptor *sf = protobuf_c_message_descriptor_get_field(src->descriptor, (unsigned)id);
    const ProtobufCFieldDescriptor *df =
        sf ? protobuf_c_message_descriptor_get_field_by_name(dst->descriptor, sf->name) : NULL;
    if (df) ct_srcpos_add(&b, df->id, idx, (int)l, (int)c);
  }
  ct_srcpos_attach(&b, dst);
}

/* ------------------------------------------------------------ packing */

/* Messages whose record is hidden while packing (n_unknown_fields lowered
 * by one), to be restored. */
typedef struct hidden {
  ProtobufCMessage **v;
  size_t n, cap;
} hidden;

static void hide(ProtobufCMessage *m, hidden *h) {
  if (!m) return;
  size_t n = m->n_unknown_fields;
  if (n > 0 && m->unknown_fields[n - 1].tag == CT_SRCPOS_FIELD) {
    if (h->n == h->cap) {
      h->cap = h->cap ? h->cap * 2 : 16;
      h->v = ct_xrealloc(h->v, h->cap * sizeof *h->v);
    }
    h->v[h->n++] = m;
    m->n_unknown_fields--;
  }
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
    char *at = (char *)m + f->offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t count = *(size_t *)((char *)m + f->quantifier_offset);
      ProtobufCMessage **elems = *(ProtobufCMessage ***)at;
      for (size_t k = 0; k < count; k++) hide(elems[k], h);
      continue;
    }
    if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(uint32_t *)((char *)m + f->quantifier_offset) != f->id)
      continue;
    ProtobufCMessage *sub = *(ProtobufCMessage **)at;
    if (sub && sub != f->default_value) hide(sub, h);
  }
}

size_t ct_srcpos_pack_without(const ProtobufCMessage *msg, uint8_t **out) {
  hidden h = {0};
  hide((ProtobufCMessage *)msg, &h);
  size_t len = protobuf_c_message_get_packed_size(msg);
  *out = malloc(len ? len : 1);
  if (*out) CT_ASSERT(protobuf_c_message_pack(msg, *out) == len);
  for (size_t i = 0; i < h.n; i++) h.v[i]->n_unknown_fields++;
  free(h.v);
  return *out ? len : 0;
}
