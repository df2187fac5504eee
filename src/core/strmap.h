/* A hash map from strings to ints, for name lookups that must not grow
 * quadratically with a net's size (a 200,000-layer net looks up every
 * bottom, top, layer and parameter name).
 *
 * Keys are borrowed: the strings must stay valid and unchanged while they
 * are in the map.  Open addressing with linear probing, FNV-1a hashes, the
 * table doubled when it is more than half full; removal keeps probe chains
 * intact (backward shift).  ct_strmap_compares counts the key comparisons
 * of all maps, so that tests can show lookups stay O(1) each. */
#ifndef CT_CORE_STRMAP_H
#define CT_CORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_strmap_slot {
  const char *key; /* NULL: empty */
  size_t hash;
  int value;
} ct_strmap_slot;

typedef struct ct_strmap {
  ct_strmap_slot *slots; /* (cap), cap a power of two or 0 */
  size_t cap, count;
} ct_strmap;

/* An empty map (no allocation until the first put). */
#define CT_STRMAP_INIT {NULL, 0, 0}

/* Sets key -> value (replacing the value of an equal key). */
void ct_strmap_put(ct_strmap *m, const char *key, int value);
/* The value of key, or -1 when absent. */
int ct_strmap_get(const ct_strmap *m, const char *key);
/* Removes key; returns whether it was there. */
bool ct_strmap_remove(ct_strmap *m, const char *key);
/* Empties the map (keeps its table). */
void ct_strmap_clear(ct_strmap *m);
void ct_strmap_free(ct_strmap *m);

/* Key comparisons (strcmp calls) made by every map of the process so far. */
unsigned long long ct_strmap_compares(void);

#ifdef __cplusplus
}
#endif

#endif
