#include "core/strutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

int ct_edit_distance(const char *a, const char *b, int cap) {
  size_t n = strlen(a), m = strlen(b);
  if ((size_t)cap < (n > m ? n - m : m - n)) return cap;
  if (n > 256 || m > 256) return cap;
  /* Three rows of the optimal-string-alignment table. */
  int rows[3][257];
  int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= m; j++) prev[j] = (int)j;
  for (size_t i = 1; i <= n; i++) {
    cur[0] = (int)i;
    int best = cur[0];
    for (size_t j = 1; j <= m; j++) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      int v = prev[j] + 1;
      if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
      if (prev[j - 1] + cost < v) v = prev[j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < v)
        v = prev2[j - 2] + 1;
      cur[j] = v;
      if (v < best) best = v;
    }
    if (best >= cap) return cap;
    int *t = prev2;
    prev2 = prev;
    prev = cur;
    cur = t;
  }
  return prev[m] < cap ? prev[m] : cap;
}

const char *ct_suggest(const char *word, const char *const *candidates, size_t n) {
  int limit = (int)strlen(word) / 3;
  if (limit < 1) limit = 1;
  const char *best = NULL;
  int best_d = limit + 1;
  for (size_t i = 0; i < n; i++) {
    if (!candidates[i]) continue;
    int d = ct_edit_distance(word, candidates[i], best_d);
    if (d < best_d) {
      best_d = d;
      best = candidates[i];
    }
  }
  return best;
}

/* Room for `more` characters and the '\0' after them. */
static void text_reserve(ct_text *t, size_t more) {
  if (t->len + more + 1 <= t->cap) return;
  t->cap = (t->len + more + 1) * 2;
  t->s = ct_xrealloc(t->s, t->cap);
}

void ct_text_printf(ct_text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  CT_ASSERT(n >= 0);
  text_reserve(t, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

void ct_text_append(ct_text *t, const char *s, size_t n) {
  text_reserve(t, n);
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = '\0';
}
