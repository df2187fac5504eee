#include "core/rng.h"

#include <math.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void ct_rng_seed(ct_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
  r->has_spare = false;
  r->spare = 0;
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ct_rng_next(ct_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double ct_rng_uniform01(ct_rng *r) { return (double)(ct_rng_next(r) >> 11) * 0x1.0p-53; }

float ct_rng_uniform(ct_rng *r, float lo, float hi) {
  float v = (float)(lo + (hi - lo) * ct_rng_uniform01(r));
  return v < hi ? v : lo; /* rounding to float must not reach hi */
}

float ct_rng_gaussian(ct_rng *r, float mean, float stddev) {
  double z;
  if (r->has_spare) {
    z = r->spare;
    r->has_spare = false;
  } else {
    double u1, u2;
    do u1 = ct_rng_uniform01(r);
    while (u1 <= 0.0);
    u2 = ct_rng_uniform01(r);
    double m = sqrt(-2.0 * log(u1));
    z = m * cos(2.0 * M_PI * u2);
    r->spare = m * sin(2.0 * M_PI * u2);
    r->has_spare = true;
  }
  return (float)(mean + stddev * z);
}

uint64_t ct_rng_below(ct_rng *r, uint64_t n) {
  if (n <= 1) return 0;
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do v = ct_rng_next(r);
  while (v >= limit);
  return v % n;
}

void ct_rng_save(const ct_rng *r, uint8_t out[CT_RNG_STATE_BYTES]) {
  memset(out, 0, CT_RNG_STATE_BYTES);
  for (int i = 0; i < 4; i++)
    for (int b = 0; b < 8; b++) out[i * 8 + b] = (uint8_t)(r->s[i] >> (8 * b));
  out[32] = r->has_spare;
  uint64_t bits;
  memcpy(&bits, &r->spare, 8);
  for (int b = 0; b < 8; b++) out[40 + b] = (uint8_t)(bits >> (8 * b));
}

void ct_rng_load(ct_rng *r, const uint8_t in[CT_RNG_STATE_BYTES]) {
  for (int i = 0; i < 4; i++) {
    r->s[i] = 0;
    for (int b = 0; b < 8; b++) r->s[i] |= (uint64_t)in[i * 8 + b] << (8 * b);
  }
  r->has_spare = in[32] != 0;
  uint64_t bits = 0;
  for (int b = 0; b < 8; b++) bits |= (uint64_t)in[40 + b] << (8 * b);
  memcpy(&r->spare, &bits, 8);
}

void ct_rng_fill_uniform(ct_rng *r, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = ct_rng_uniform(r, lo, hi);
}

void ct_rng_fill_gaussian(ct_rng *r, float *x, size_t n, float mean, float stddev) {
  for (size_t i = 0; i < n; i++) x[i] = ct_rng_gaussian(r, mean, stddev);
}

