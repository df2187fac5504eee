/* Private pieces shared by the text-format tokenizer (text_lex.c), parser
 * (textformat.c) and printer (text_print.c).  Not part of the public API. */
#ifndef CT_PROTO_TEXT_INTERNAL_H
#define CT_PROTO_TEXT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "core/status.h"
#include "proto/textformat.h"

typedef enum ct_ttoken_kind {
  CT_TTOKEN_EOF,
  CT_TTOKEN_IDENT,  /* [A-Za-z_][A-Za-z0-9_]* */
  CT_TTOKEN_INT,    /* 123, 0x1F, 017: no '.', exponent or 'f' suffix */
  CT_TTOKEN_FLOAT,  /* 1.5, .5, 5., 1e-4, 1f */
  CT_TTOKEN_STRING, /* one quoted literal, quotes included, escapes not decoded */
  CT_TTOKEN_SYMBOL  /* one of { } < > [ ] : , ; - */
} ct_ttoken_kind;

typedef struct ct_ttoken {
  ct_ttoken_kind kind;
  const char *text; /* points into the source; not NUL-terminated */
  size_t len;
  int line, col;    /* 1-based; col counts bytes */
} ct_ttoken;

typedef struct ct_tlex {
  const char *file; /* for error messages */
  const char *cur, *end;
  const char *line_start;
  int line;
} ct_tlex;

/* Starts a tokenizer over [text, text + len); skips a UTF-8 byte-order mark. */
void ct_tlex_init(ct_tlex *lx, const char *file, const char *text, size_t len);

/* Reads the next token into *tok, skipping whitespace and # comments.  At the
 * end it returns CT_TTOKEN_EOF (again on every later call).  Bad input (an
 * unterminated string, a stray byte, a malformed number) returns
 * CT_ERR_PARSE with "FILE:LINE:COL: ..." in err. */
ct_status ct_tlex_next(ct_tlex *lx, ct_ttoken *tok, ct_error *err);

/* True when tok is the one-character symbol c. */
bool ct_ttoken_is(const ct_ttoken *tok, char c);

/* Sets err to "FILE:LINE:COL: " followed by the formatted message; returns
 * CT_ERR_PARSE. */
ct_status ct_text_error_at(ct_error *err, const char *file, int line, int col, const char *fmt,
                           ...) __attribute__((format(printf, 5, 6)));

/* Writes a short description of tok for "got ..." in messages: string
 * literals as written, identifiers and symbols in single quotes, numbers
 * bare, "end of file"; long tokens are cut with "...". */
void ct_ttoken_describe(const ct_ttoken *tok, char *out, size_t size);

/* Decodes the escapes of a string token (quotes included) into a new
 * malloc'd buffer of *len bytes plus a NUL.  Returns CT_ERR_PARSE for a bad
 * escape (the message points at the backslash), CT_ERR_NOMEM when out of
 * memory. */
ct_status ct_ttoken_unescape(const ct_ttoken *tok, const char *file, char **out, size_t *len,
                             ct_error *err);

/* Length of the valid UTF-8 sequence at s (at most n bytes available), or 0
 * when the bytes there are not valid UTF-8 (overlong forms, surrogates and
 * code points past U+10FFFF count as invalid). */
size_t ct_utf8_seq_len(const unsigned char *s, size_t n);

/* Bytes one element of a field of this type takes in a protobuf-c struct
 * (and in its repeated arrays). */
size_t ct_text_elt_size(ProtobufCType type);


/* ------------------------------------------------------------ the parser
 * (textformat.c; unknown fields and where messages point: text_unknown.c) */

#define NAME_MAX_LEN 128
#define MAX_SUGGEST 512

typedef struct path_step {
  const char *field;
  long index;            /* element of a repeated field, or -1 */
  ProtobufCMessage *msg; /* the message this step leads to */
} path_step;

/* An unknown field, reported once the whole text is read (when the names
 * of the layers around it are known). */
typedef struct unknown_rec {
  int line, col;
  char word[64 + 1];
  const ProtobufCMessageDescriptor *desc;
  int depth;
  path_step *path; /* (depth) copied */
} unknown_rec;

typedef struct ct_tparser {
  ct_tlex lx;
  ct_ttoken tok; /* the current token, not yet consumed */
  const char *file;
  unsigned flags; /* CT_TEXT_* */
  ct_error *err;
  int depth; /* path[0..depth) leads from the top message to the one being filled */
  path_step path[CT_TEXT_MAX_DEPTH];
  unknown_rec *unknown; /* (n_unknown) in the order met */
  size_t n_unknown, cap_unknown;
} ct_tparser;

/* "ConvolutionParameter[ of layer 'conv1' (Convolution)][ at
 * layer[1].convolution_param]": the message type, the layer around it (an
 * element with a name and a type) and the path from the top message. */
void ct_text_where(const path_step *path, int depth, const ProtobufCMessageDescriptor *desc, char *out,
                   size_t size);

/* An unknown field whose name is the current token: recorded, and its value
 * skipped so that parsing goes on (an error only when what follows cannot
 * be skipped). */
ct_status ct_text_unknown_field(ct_tparser *p, const ProtobufCMessageDescriptor *desc, const ct_ttoken *name);
/* The error for the unknown fields recorded (there is at least one). */
ct_status ct_text_report_unknown(ct_tparser *p);
void ct_text_free_unknown(ct_tparser *p);

#endif
