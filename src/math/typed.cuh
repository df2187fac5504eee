/* Device-side loads and stores of the element types (math/typed.h) for
 * kernels templated on them: a 16-bit value is read as float32 (ct_ld) and
 * a float32 result written rounded to nearest, ties to even (ct_st<T>). */
#ifndef CT_MATH_TYPED_CUH
#define CT_MATH_TYPED_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

static __device__ __forceinline__ float ct_ld(float v) { return v; }
static __device__ __forceinline__ float ct_ld(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ float ct_ld(__half v) { return __half2float(v); }

template <typename T> static __device__ __forceinline__ T ct_st(float v);
template <> __device__ __forceinline__ float ct_st<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 ct_st<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half ct_st<__half>(float v) { return __float2half_rn(v); }

#endif
