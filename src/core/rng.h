/* A small, fast, seedable random number generator (xoshiro256**) whose whole
 * state is a few bytes, so that a snapshot can save it and a resumed run draws
 * exactly the numbers an uninterrupted run would. */
#ifndef CT_CORE_RNG_H
#define CT_CORE_RNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_rng {
  uint64_t s[4];
  bool has_spare;   /* Box-Muller makes normals in pairs */
  double spare;
} ct_rng;

#define CT_RNG_STATE_BYTES 48

void ct_rng_seed(ct_rng *r, uint64_t seed);
uint64_t ct_rng_next(ct_rng *r);
/* Uniform in [0, 1). */
double ct_rng_uniform01(ct_rng *r);
/* Uniform float in [lo, hi). */
float ct_rng_uniform(ct_rng *r, float lo, float hi);
/* Normal with mean and standard deviation. */
float ct_rng_gaussian(ct_rng *r, float mean, float stddev);
/* Uniform integer in [0, n). */
uint64_t ct_rng_below(ct_rng *r, uint64_t n);

/* State to/from CT_RNG_STATE_BYTES bytes (little-endian, versioned by size). */
void ct_rng_save(const ct_rng *r, uint8_t out[CT_RNG_STATE_BYTES]);
void ct_rng_load(ct_rng *r, const uint8_t in[CT_RNG_STATE_BYTES]);

/* Vector fills on the host. */
void ct_rng_fill_uniform(ct_rng *r, float *x, size_t n, float lo, float hi);
void ct_rng_fill_gaussian(ct_rng *r, float *x, size_t n, float mean, float stddev);

/* A process-wide default seed source: the solver's random_seed when set, else
 * time-based.  Layers take their generator from the net's context instead. */

#ifdef __cplusplus
}
#endif

#endif
