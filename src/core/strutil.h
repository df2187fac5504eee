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

#ifdef __cplusplus
}
#endif

#endif
