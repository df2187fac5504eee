#include "core/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

static unsigned long long g_compares;

unsigned long long ct_strmap_compares(void) { return __atomic_load_n(&g_compares, __ATOMIC_RELAXED); }

static size_t hash_of(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)h;
}

static bool same(const ct_strmap_slot *slot, const char *key, size_t h) {
  if (slot->hash != h) return false;
  __atomic_fetch_add(&g_compares, 1, __ATOMIC_RELAXED);
  return strcmp(slot->key, key) == 0;
}

/* The slot of key, or the empty slot where it would go. */
static size_t find(const ct_strmap *m, const char *key, size_t h) {
  size_t mask = m->cap - 1, i = h & mask;
  while (m->slots[i].key && !same(&m->slots[i], key, h)) i = (i + 1) & mask;
  return i;
}

static void grow(ct_strmap *m) {
  ct_strmap old = *m;
  m->cap = old.cap ? 2 * old.cap : 16;
  m->slots = ct_xcalloc(m->cap, sizeof *m->slots);
  m->count = 0;
  for (size_t i = 0; i < old.cap; i++)
    if (old.slots[i].key) {
      size_t j = old.slots[i].hash & (m->cap - 1);
      while (m->slots[j].key) j = (j + 1) & (m->cap - 1);
      m->slots[j] = old.slots[i];
      m->count++;
    }
  free(old.slots);
}

void ct_strmap_put(ct_strmap *m, const char *key, int value) {
  CT_ASSERT(key != NULL);
  if (2 * (m->count + 1) > m->cap) grow(m);
  size_t h = hash_of(key), i = find(m, key, h);
  if (!m->slots[i].key) {
    m->slots[i].key = key;
    m->slots[i].hash = h;
    m->count++;
  }
  m->slots[i].value = value;
}

int ct_strmap_get(const ct_strmap *m, const char *key) {
  if (!m->count) return -1;
  size_t i = find(m, key, hash_of(key));
  return m->slots[i].key ? m->slots[i].value : -1;
}

bool ct_strmap_remove(ct_strmap *m, const char *key) {
  if (!m->count) return false;
  size_t mask = m->cap - 1, i = find(m, key, hash_of(key));
  if (!m->slots[i].key) return false;
  /* backward shift: later slots of the chain move up into the hole */
  for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
    size_t home = m->slots[j].hash & mask;
    /* j stays when its home lies cyclically in (i, j] */
    bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (stays) continue;
    m->slots[i] = m->slots[j];
    i = j;
  }
  m->slots[i].key = NULL;
  m->count--;
  return true;
}

void ct_strmap_clear(ct_strmap *m) {
  if (m->slots) memset(m->slots, 0, m->cap * sizeof *m->slots);
  m->count = 0;
}

void ct_strmap_free(ct_strmap *m) {
  free(m->slots);
  m->slots = NULL;
  m->cap = m->count = 0;
}
