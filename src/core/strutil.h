/* Small string helpers shared by the parsers and the command line. */
#ifndef CT_CORE_STRUTIL_H
#define CT_CORE_STRUTIL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Edit distance (insertions, deletions, substitutions, adjacent swaps) between
 * a and b; stops counting at `cap` and returns cap when the distance is larger. */
int ct_edit_distance(const char *a, const char *b, int cap);

/* The candidate closest to `word` by edit distance, or NULL when none is close
 * enough to be a plausible typo (distance at most max(1, strlen(word)/3)).
 * Ties go to the earlier candidate. */
const char *ct_suggest(const char *word, const char *const *candidates, size_t n);

/* A growing text: s (NULL until the first append) holds len characters and
 * a '\0'; the owner frees s.  Start from {0}. */
typedef struct ct_text {
  char *s;
  size_t len, cap;
} ct_text;

/* Appends printf's output of fmt. */
void ct_text_printf(ct_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends n bytes of s. */
void ct_text_append(ct_text *t, const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
