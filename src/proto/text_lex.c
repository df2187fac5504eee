/* Tokenizer for the protobuf text format: identifiers, numbers, quoted
 * strings and one-character symbols, with line and column for every token.
 * Character classes are plain ASCII tests so that the locale never matters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/text_internal.h"

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_octal(char c) { return c >= '0' && c <= '7'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }
static bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  return (c | 0x20) - 'a' + 10;
}

ct_status ct_text_error_at(ct_error *err, const char *file, int line, int col, const char *fmt,
                           ...) {
  char what[CT_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return ct_error_set(err, CT_ERR_PARSE, "%s:%d:%d: %s", file, line, col, what);
}

void ct_tlex_init(ct_tlex *lx, const char *file, const char *text, size_t len) {
  lx->file = file ? file : "<text>";
  lx->cur = text;
  lx->end = text + len;
  if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) lx->cur += 3;
  lx->line_start = lx->cur;
  lx->line = 1;
}

bool ct_ttoken_is(const ct_ttoken *tok, char c) {
  return tok->kind == CT_TTOKEN_SYMBOL && tok->text[0] == c;
}

static void skip_blanks(ct_tlex *lx) {
  while (lx->cur < lx->end) {
    char c = *lx->cur;
    if (c == '\n') {
      lx->line++;
      lx->line_start = ++lx->cur;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      lx->cur++;
    } else if (c == '#') {
      while (lx->cur < lx->end && *lx->cur != '\n') lx->cur++;
    } else {
      return;
    }
  }
}

static int col_of(const ct_tlex *lx, const char *p) { return (int)(p - lx->line_start) + 1; }

/* A run of characters that cannot follow a number, reported whole:
 * "invalid number '5abc'". */
static ct_status bad_number(ct_tlex *lx, const char *start, ct_error *err) {
  const char *p = start;
  while (p < lx->end && (is_alnum(*p) || *p == '.')) p++;
  int n = (int)(p - start) > 40 ? 40 : (int)(p - start);
  return ct_text_error_at(err, lx->file, lx->line, col_of(lx, start), "invalid number '%.*s'", n,
                          start);
}

static const char *scan_digits(const char *p, const char *end) {
  while (p < end && is_digit(*p)) p++;
  return p;
}

static ct_status lex_number(ct_tlex *lx, ct_ttoken *tok, ct_error *err) {
  const char *s = lx->cur, *p = s, *end = lx->end;
  bool is_float = false;
  if (end - p >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    p += 2;
    const char *digits = p;
    while (p < end && is_hex(*p)) p++;
    if (p == digits) return bad_number(lx, s, err);
  } else {
    p = scan_digits(p, end);
    if (p < end && *p == '.') {
      is_float = true;
      p = scan_digits(p + 1, end);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
      is_float = true;
      p++;
      if (p < end && (*p == '+' || *p == '-')) p++;
      const char *digits = p;
      p = scan_digits(p, end);
      if (p == digits) return bad_number(lx, s, err);
    }
    if (p < end && (*p == 'f' || *p == 'F')) {
      is_float = true;
      p++;
    }
  }
  if (p < end && (is_alnum(*p) || *p == '.')) return bad_number(lx, s, err);
  if (!is_float && s[0] == '0') {
    bool hex = p - s >= 2 && (s[1] == 'x' || s[1] == 'X');
    for (const char *q = s + 1; !hex && q < p; q++)
      if (!is_octal(*q))
        return ct_text_error_at(err, lx->file, lx->line, col_of(lx, s),
                                "invalid number '%.*s' (a leading 0 means octal)",
                                (int)(p - s) > 40 ? 40 : (int)(p - s), s);
  }
  tok->kind = is_float ? CT_TTOKEN_FLOAT : CT_TTOKEN_INT;
  tok->len = (size_t)(p - s);
  lx->cur = p;
  return CT_OK;
}

static ct_status lex_string(ct_tlex *lx, ct_ttoken *tok, ct_error *err) {
  const char *s = lx->cur, *p = s + 1, *end = lx->end;
  char quote = *s;
  while (p < end && *p != quote) {
    if (*p == '\n') break;
    if (*p == '\\' && p + 1 < end && p[1] != '\n') p++;
    p++;
  }
  if (p >= end || *p != quote)
    return ct_text_error_at(err, lx->file, lx->line, col_of(lx, s),
                            p >= end ? "unterminated string: reached end of file before the "
                                       "closing %c"
                                     : "unterminated string: missing closing %c before the end "
                                       "of the line",
                            quote);
  tok->kind = CT_TTOKEN_STRING;
  tok->len = (size_t)(p + 1 - s);
  lx->cur = p + 1;
  return CT_OK;
}

static ct_status bad_char(ct_tlex *lx, ct_error *err) {
  unsigned char c = (unsigned char)*lx->cur;
  int col = col_of(lx, lx->cur);
  if (c > 0x20 && c < 0x7f)
    return ct_text_error_at(err, lx->file, lx->line, col, "unexpected character '%c'", c);
  if (c >= 0x80)
    return ct_text_error_at(err, lx->file, lx->line, col,
                            "unexpected byte 0x%02X (non-ASCII text is only allowed inside "
                            "quoted strings and comments)",
                            c);
  return ct_text_error_at(err, lx->file, lx->line, col, "unexpected control character 0x%02X", c);
}

ct_status ct_tlex_next(ct_tlex *lx, ct_ttoken *tok, ct_error *err) {
  skip_blanks(lx);
  tok->text = lx->cur;
  tok->line = lx->line;
  tok->col = col_of(lx, lx->cur);
  tok->len = 0;
  if (lx->cur >= lx->end) {
    tok->kind = CT_TTOKEN_EOF;
    return CT_OK;
  }
  char c = *lx->cur;
  if (is_alpha(c)) {
    const char *p = lx->cur;
    while (p < lx->end && is_alnum(*p)) p++;
    tok->kind = CT_TTOKEN_IDENT;
    tok->len = (size_t)(p - lx->cur);
    lx->cur = p;
    return CT_OK;
  }
  if (is_digit(c) || (c == '.' && lx->cur + 1 < lx->end && is_digit(lx->cur[1])))
    return lex_number(lx, tok, err);
  if (c == '"' || c == '\'') return lex_string(lx, tok, err);
  if (c != '\0' && strchr("{}<>[]:,;-", c)) {
    tok->kind = CT_TTOKEN_SYMBOL;
    tok->len = 1;
    lx->cur++;
    return CT_OK;
  }
  return bad_char(lx, err);
}

void ct_ttoken_describe(const ct_ttoken *tok, char *out, size_t size) {
  const int max = 40;
  int n = tok->len > (size_t)max ? max : (int)tok->len;
  const char *more = tok->len > (size_t)max ? "..." : "";
  switch (tok->kind) {
    case CT_TTOKEN_EOF: snprintf(out, size, "end of file"); break;
    case CT_TTOKEN_STRING:
      if (*more)
        snprintf(out, size, "%.*s...%c", n, tok->text, tok->text[0]);
      else
        snprintf(out, size, "%.*s", n, tok->text);
      break;
    case CT_TTOKEN_INT:
    case CT_TTOKEN_FLOAT: snprintf(out, size, "%.*s%s", n, tok->text, more); break;
    case CT_TTOKEN_IDENT:
    case CT_TTOKEN_SYMBOL: snprintf(out, size, "'%.*s%s'", n, tok->text, more); break;
  }
}

/* Decodes one escape after a backslash at *s (which points past the
 * backslash); advances *s.  Returns the byte value, or -1 for a bad escape. */
static int decode_escape(const char **s, const char *end) {
  const char *p = *s;
  char c = *p++;
  int v = -1;
  switch (c) {
    case 'a': v = '\a'; break;
    case 'b': v = '\b'; break;
    case 'f': v = '\f'; break;
    case 'n': v = '\n'; break;
    case 'r': v = '\r'; break;
    case 't': v = '\t'; break;
    case 'v': v = '\v'; break;
    case '\\': case '\'': case '"': case '?': v = c; break;
    case 'x':
    case 'X':
      if (p < end && is_hex(*p)) {
        v = hex_value(*p++);
        if (p < end && is_hex(*p)) v = v * 16 + hex_value(*p++);
      }
      break;
    default:
      if (is_octal(c)) {
        v = c - '0';
        for (int i = 0; i < 2 && p < end && is_octal(*p); i++) v = v * 8 + (*p++ - '0');
        if (v > 255) v = -1;
      }
      break;
  }
  *s = p;
  return v;
}

ct_status ct_ttoken_unescape(const ct_ttoken *tok, const char *file, char **out, size_t *len,
                             ct_error *err) {
  CT_ASSERT(tok->kind == CT_TTOKEN_STRING && tok->len >= 2);
  const char *s = tok->text + 1, *end = tok->text + tok->len - 1;
  char *buf = malloc(tok->len);
  if (!buf) return ct_error_set(err, CT_ERR_NOMEM, "out of memory decoding a string");
  size_t n = 0;
  while (s < end) {
    if (*s != '\\') {
      buf[n++] = *s++;
      continue;
    }
    const char *backslash = s++;
    int v = decode_escape(&s, end);
    if (v < 0) {
      int shown = (int)(s - backslash);
      free(buf);
      return ct_text_error_at(err, file, tok->line, tok->col + (int)(backslash - tok->text),
                              "invalid escape '%.*s' in string (use \\n \\t \\\\ \\\" \\' "
                              "\\xHH or \\ooo with ooo at most 377)",
                              shown, backslash);
    }
    buf[n++] = (char)v;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return CT_OK;
}

size_t ct_utf8_seq_len(const unsigned char *s, size_t n) {
  if (n == 0) return 0;
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t need;
  unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < need) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < need; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return need;
}
