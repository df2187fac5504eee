/* Element types of tensors (ct_dtype) and their host conversions.
 *
 * CT_F32 is IEEE single precision.  CT_BF16 (bfloat16) is the upper half of
 * an F32: the same range, 8 bits of mantissa.  CT_F16 is IEEE half
 * precision: 11 bits of mantissa, largest finite value 65504.  Conversions
 * to the 16-bit types round to nearest, ties to even, as the hardware's
 * conversion instructions and oneDNN do; NaN stays NaN, values beyond the
 * range become infinities. */
#ifndef CT_CORE_DTYPE_H
#define CT_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_dtype { CT_F32 = 0, CT_BF16 = 1, CT_F16 = 2, CT_DTYPES } ct_dtype;

/* Bytes per element. */
static inline size_t ct_dtype_size(ct_dtype t) { return t == CT_F32 ? 4 : 2; }
/* "float32", "bfloat16", "float16". */
const char *ct_dtype_name(ct_dtype t);

static inline float ct_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline uint16_t ct_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float ct_f16_to_f32(uint16_t h);
uint16_t ct_f32_to_f16(float f);

/* n values from src (of type from) to dst (of type to), on the host. */
void ct_dtype_convert(ct_dtype to, void *dst, ct_dtype from, const void *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif
