/* Device-side loads and stores of the element types (math/typed.h) for
 * kernels templated on them: a 16-bit value is read as float32 (ct_ld) and
 * a float32 result written rounded to nearest, ties to even (ct_st<T>). */
#ifndef CT_MATH_TYPED_CUH
#define CT_MATH_TYPED_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

static __device__ __forceinline__ float ct_ld(float v) { return v; }
static __device__ __forceinline__ float ct_ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ float ct_ld(__half v) { return __half2float(v); }

template <typename T> static __device__ __forceinline__ T ct_st(float v);
template <> __device__ __forceinline__ float ct_st<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 ct_st<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half ct_st<__half>(float v) { return __float2half_rn(v); }

/* 16 bytes of T (ct_v16<T>::V values) loaded or stored at once: element
 * kernels over 16-bit tensors move a quarter of the bytes per instruction
 * that scalar loads do.  Vector i covers values [i V, i V + V). */
template <typename T>
struct ct_v16 {
  static constexpr unsigned V = 16 / sizeof(T);
  uint4 raw;
  static __device__ __forceinline__ ct_v16 load(const T *p, size_t i) {
    ct_v16 r;
    r.raw = reinterpret_cast<const uint4 *>(p)[i];
    return r;
  }
  __device__ __forceinline__ void store(T *p, size_t i) const {
    reinterpret_cast<uint4 *>(p)[i] = raw;
  }
  __device__ __forceinline__ float operator[](unsigned j) const {
    return ct_ld(reinterpret_cast<const T *>(&raw)[j]);
  }
  __device__ __forceinline__ void set(unsigned j, float v) {
    reinterpret_cast<T *>(&raw)[j] = ct_st<T>(v);
  }
};

/* Whether n values of esize bytes at each of the pointers (NULL: none) go
 * 16 bytes at a time: n esize a multiple of 16, every pointer aligned. */
static inline bool ct_v16_fits(size_t n, size_t esize, const void *a, const void *b, const void *c,
                               const void *d) {
  const uintptr_t m = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d;
  return (n * esize) % 16 == 0 && (m & 15) == 0;
}

#endif
