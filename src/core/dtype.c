/* Element types' names and host conversions (see dtype.h). */
#include "core/dtype.h"

#include "core/status.h"

const char *ct_dtype_name(ct_dtype t) {
  switch (t) {
    case CT_F32: return "float32";
    case CT_BF16: return "bfloat16";
    case CT_F16: return "float16";
    case CT_DTYPES: break;
  }
  return "?";
}

float ct_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13); /* inf, NaN */
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else { /* subnormal: normalise */
    int e = -1;
    uint32_t m = man;
    do {
      e++;
      m <<= 1;
    } while (!(m & 0x400u));
    u = sign | ((uint32_t)(112 - e) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t ct_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);    /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* rounds past 65504: inf */
  if (a >= 0x38800000u) {                                    /* normal in half */
    uint32_t r = a - 0x38000000u;                            /* rebias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);                          /* to nearest, ties to even */
    return (uint16_t)(sign | (r >> 13));
  }
  if (a < 0x33000000u) return sign;                          /* below half the least subnormal */
  /* subnormal in half: shift the implicit-one mantissa right */
  const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;                           /* 14 .. 24 */
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) r++;
  return (uint16_t)(sign | r);
}

void ct_dtype_convert(ct_dtype to, void *dst, ct_dtype from, const void *src, size_t n) {
  if (to == from) {
    memmove(dst, src, n * ct_dtype_size(to));
    return;
  }
  for (size_t i = 0; i < n; i++) {
    float v;
    switch (from) {
      case CT_F32: v = ((const float *)src)[i]; break;
      case CT_BF16: v = ct_bf16_to_f32(((const uint16_t *)src)[i]); break;
      case CT_F16: v = ct_f16_to_f32(((const uint16_t *)src)[i]); break;
      default: CT_ASSERTF(false, "no dtype %d", (int)from);
    }
    switch (to) {
      case CT_F32: ((float *)dst)[i] = v; break;
      case CT_BF16: ((uint16_t *)dst)[i] = ct_f32_to_bf16(v); break;
      case CT_F16: ((uint16_t *)dst)[i] = ct_f32_to_f16(v); break;
      default: CT_ASSERTF(false, "no dtype %d", (int)to);
    }
  }
}
