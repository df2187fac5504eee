/* Unknown fields of a text (every one of them reported, after its value is
 * skipped), and where a message points: the path and the layer around it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strutil.h"
#include "proto/catalog.h"
#include "proto/text_internal.h"
#include "proto/textformat.h"

typedef ct_tparser parser;

static ct_status out_of_memory(parser *p) {
  return ct_error_set(p->err, CT_ERR_NOMEM, "%s: out of memory while parsing", p->file);
}

static ct_status advance(parser *p) { return ct_tlex_next(&p->lx, &p->tok, p->err); }

static bool at_symbol(const parser *p, char c) { return ct_ttoken_is(&p->tok, c); }

/* String field `name` of msg when set and not empty, else NULL. */
static const char *string_field(const ProtobufCMessage *msg, const char *name) {
  const ProtobufCFieldDescriptor *f = msg ? protobuf_c_message_descriptor_get_field_by_name(msg->descriptor, name) : NULL;
  if (!f || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED) return NULL;
  const char *s = *(char *const *)((const char *)msg + f->offset);
  return s && *s ? s : NULL;
}

/* "ConvolutionParameter" at the top level, else
 * "ConvolutionParameter at layer[1].convolution_param"; inside a named
 * layer (an element with a name and a type), that layer is named too:
 * "ConvolutionParameter of layer 'conv1' (Convolution) at
 * layer[1].convolution_param". */
void ct_text_where(const path_step *path, int depth, const ProtobufCMessageDescriptor *desc, char *out,
                   size_t size) {
  int n = snprintf(out, size, "%s", desc->short_name);
  for (int i = depth - 1; i >= 0; i--) {
    const ProtobufCMessage *m = path[i].msg;
    const char *name = path[i].index >= 0 ? string_field(m, "name") : NULL;
    if (!name || !protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "type")) continue;
    const char *type = string_field(m, "type");
    if (n >= 0 && (size_t)n < size)
      n += snprintf(out + n, size - n, " of %s '%.64s'", path[i].field, name);
    if (type && n >= 0 && (size_t)n < size) n += snprintf(out + n, size - n, " (%.64s)", type);
    break;
  }
  for (int i = 0; i < depth && n >= 0 && (size_t)n < size; i++) {
    n += snprintf(out + n, size - n, "%s%s", i == 0 ? " at " : ".", path[i].field);
    if (path[i].index >= 0 && (size_t)n < size)
      n += snprintf(out + n, size - n, "[%ld]", path[i].index);
  }
}

/* The message of an unknown field: "FILE:LINE:COL: unknown field 'x' in
 * TYPE[ of layer 'n' (T)][ at PATH]" and where the field comes from, or a
 * guess at the field meant. */
static void unknown_message(const parser *p, const unknown_rec *u, char *out, size_t size) {
  char in[768], hint[NAME_MAX_LEN + 256] = "";
  ct_text_where(u->path, u->depth, u->desc, in, sizeof in);
  const char *note = ct_caffe_foreign_field_note(u->desc->short_name, u->word);
  if (note) {
    snprintf(hint, sizeof hint, ": %s", note);
  } else {
    const char *names[MAX_SUGGEST];
    size_t n = u->desc->n_fields < MAX_SUGGEST ? u->desc->n_fields : MAX_SUGGEST;
    for (size_t i = 0; i < n; i++) names[i] = u->desc->fields[i].name;
    const char *guess = ct_suggest(u->word, names, n);
    if (guess) snprintf(hint, sizeof hint, " (did you mean '%s'?)", guess);
  }
  snprintf(out, size, "%s:%d:%d: unknown field '%s' in %s%s", p->file, u->line, u->col, u->word, in, hint);
}

void ct_text_free_unknown(parser *p) {
  for (size_t i = 0; i < p->n_unknown; i++) free(p->unknown[i].path);
  free(p->unknown);
  p->unknown = NULL;
  p->n_unknown = p->cap_unknown = 0;
}

/* Notes an unknown field, to be reported with the others at the end. */
static ct_status record_unknown(parser *p, const ProtobufCMessageDescriptor *desc, const ct_ttoken *name) {
  if (p->n_unknown == p->cap_unknown) {
    size_t cap = p->cap_unknown ? p->cap_unknown * 2 : 8;
    unknown_rec *grown = realloc(p->unknown, cap * sizeof *grown);
    if (!grown) return out_of_memory(p);
    p->unknown = grown;
    p->cap_unknown = cap;
  }
  unknown_rec *u = &p->unknown[p->n_unknown];
  u->line = name->line;
  u->col = name->col;
  snprintf(u->word, sizeof u->word, "%.*s", (int)(name->len < 64 ? name->len : 64), name->text);
  u->desc = desc;
  u->depth = p->depth;
  u->path = NULL;
  if (p->depth > 0 && !(u->path = malloc((size_t)p->depth * sizeof *u->path))) return out_of_memory(p);
  if (p->depth > 0) memcpy(u->path, p->path, (size_t)p->depth * sizeof *u->path);
  p->n_unknown++;
  return CT_OK;
}

/* Fails with the unknown field last recorded (what follows it cannot be
 * skipped). */
static ct_status fail_unknown(parser *p) {
  char msg[CT_ERROR_MSG_MAX];
  unknown_message(p, &p->unknown[p->n_unknown - 1], msg, sizeof msg);
  return ct_error_set(p->err, CT_ERR_PARSE, "%s", msg);
}

/* Skips a balanced '{ ... }', '< ... >' or '[ ... ]' (the current token
 * is its opening symbol), nested blocks and lists included. */
static ct_status skip_balanced(parser *p, const ct_ttoken *name) {
  ct_ttoken open = p->tok;
  int depth = 0;
  do {
    if (p->tok.kind == CT_TTOKEN_EOF)
      return ct_text_error_at(p->err, p->file, p->tok.line, p->tok.col,
                              "reached end of file inside '%.*s' opened at %d:%d (missing '%c')",
                     (int)name->len, name->text, open.line, open.col,
                     ct_ttoken_is(&open, '[') ? ']' : ct_ttoken_is(&open, '<') ? '>' : '}');
    if (p->tok.kind == CT_TTOKEN_SYMBOL && strchr("{<[", p->tok.text[0])) depth++;
    if (p->tok.kind == CT_TTOKEN_SYMBOL && strchr("}>]", p->tok.text[0])) depth--;
    CT_TRY(advance(p));
  } while (depth > 0);
  return CT_OK;
}

/* After an unknown field's name: skips its value (`: value`, `: [ ... ]`,
 * `{ ... }`, `: { ... }`) so that parsing goes on and every unknown field
 * of the text is reported at once. */
ct_status ct_text_unknown_field(parser *p, const ProtobufCMessageDescriptor *desc, const ct_ttoken *name) {
  CT_TRY(record_unknown(p, desc, name));
  CT_TRY(advance(p));
  bool colon = at_symbol(p, ':');
  if (colon) CT_TRY(advance(p));
  if (at_symbol(p, '{') || at_symbol(p, '<') || (colon && at_symbol(p, '['))) {
    CT_TRY(skip_balanced(p, name));
  } else if (colon) {
    if (at_symbol(p, '-')) CT_TRY(advance(p));
    ct_ttoken_kind k = p->tok.kind;
    if (k != CT_TTOKEN_INT && k != CT_TTOKEN_FLOAT && k != CT_TTOKEN_IDENT && k != CT_TTOKEN_STRING)
      return fail_unknown(p);
    do CT_TRY(advance(p));
    while (k == CT_TTOKEN_STRING && p->tok.kind == CT_TTOKEN_STRING);
  } else {
    return fail_unknown(p);
  }
  if (at_symbol(p, ';') || at_symbol(p, ',')) CT_TRY(advance(p));
  return CT_OK;
}

/* The unknown fields of a text that parsed otherwise: the first one's
 * message, and how many more there are (with CT_TEXT_LOG_UNKNOWN each is
 * logged, so that one run shows them all). */
ct_status ct_text_report_unknown(parser *p) {
  char first[CT_ERROR_MSG_MAX];
  unknown_message(p, &p->unknown[0], first, sizeof first);
  if (p->n_unknown == 1) return ct_error_set(p->err, CT_ERR_PARSE, "%s", first);
  const bool logged = (p->flags & CT_TEXT_LOG_UNKNOWN) != 0;
  for (size_t i = 0; logged && i < p->n_unknown; i++) {
    char msg[CT_ERROR_MSG_MAX];
    unknown_message(p, &p->unknown[i], msg, sizeof msg);
    LOG_ERROR("%s", msg);
  }
  return ct_error_set(p->err, CT_ERR_PARSE, "%s (and %zu more unknown field%s%s)", first, p->n_unknown - 1,
                      p->n_unknown == 2 ? "" : "s", logged ? ", each logged above" : "");
}
