#include "gpu/gpu.h"
#include "layers/eltwise.h"
#include "math/typed.cuh"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)

template <typename T>
__global__ static void axpby_kernel(size_t n, float a, const T *x, float b, const T *y, bool relu,
                                    T *out) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    float v = a * ct_ld(x[k]);
    if (y) v += b * ct_ld(y[k]);
    out[k] = ct_st<T>(relu ? fmaxf(v, 0.0f) : v);
  }
}

template <typename T>
__global__ static void relu_grad_kernel(size_t n, float a, const T *dy, const T *y, T *dx) {
  CT_CUDA_KERNEL_LOOP(k, n) dx[k] = ct_st<T>(ct_ld(y[k]) > 0.0f ? a * ct_ld(dy[k]) : 0.0f);
}

template <typename T>
__global__ static void sum2_grad_kernel(size_t n, float a, float b, const T *dy, const T *y,
                                        T *dx0, T *dx1) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    const float g = !y || ct_ld(y[k]) > 0.0f ? ct_ld(dy[k]) : 0.0f;
    dx0[k] = ct_st<T>(a * g);
    dx1[k] = ct_st<T>(b * g);
  }
}

/* The same two over 16-byte vectors (ct_v16): nv vectors. */
template <typename T>
__global__ static void axpby_v16(size_t nv, float a, const T *x, float b, const T *y, bool relu,
                                 T *out) {
  CT_CUDA_KERNEL_LOOP(k, nv) {
    const ct_v16<T> vx = ct_v16<T>::load(x, k);
    ct_v16<T> vy = vx, o;
    if (y) vy = ct_v16<T>::load(y, k);
#pragma unroll
    for (unsigned j = 0; j < ct_v16<T>::V; j++) {
      float v = a * vx[j];
      if (y) v += b * vy[j];
      o.set(j, relu ? fmaxf(v, 0.0f) : v);
    }
    o.store(out, k);
  }
}

template <typename T>
__global__ static void sum2_grad_v16(size_t nv, float a, float b, const T *dy, const T *y, T *dx0,
                                     T *dx1) {
  CT_CUDA_KERNEL_LOOP(k, nv) {
    const ct_v16<T> vd = ct_v16<T>::load(dy, k);
    ct_v16<T> vy = vd, o0, o1;
    if (y) vy = ct_v16<T>::load(y, k);
#pragma unroll
    for (unsigned j = 0; j < ct_v16<T>::V; j++) {
      const float g = !y || vy[j] > 0.0f ? vd[j] : 0.0f;
      o0.set(j, a * g);
      o1.set(j, b * g);
    }
    o0.store(dx0, k);
    o1.store(dx1, k);
  }
}

template <typename T>
__global__ static void mul_kernel(size_t n, const T *a, const T *b, T *y, bool divide) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    const float u = ct_ld(a[k]), v = ct_ld(b[k]);
    y[k] = ct_st<T>(divide ? u / v : u * v);
  }
}

template <typename T>
__global__ static void max_first_kernel(size_t n, const T *a, const T *b, T *y, float *argmax) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    const float u = ct_ld(a[k]), v = ct_ld(b[k]);
    bool first = u > v;
    y[k] = ct_st<T>(first ? u : v);
    argmax[k] = first ? 0.0f : 1.0f;
  }
}

template <typename T>
__global__ static void max_next_kernel(size_t n, const T *x, float i, T *y, float *argmax) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    if (ct_ld(x[k]) > ct_ld(y[k])) {
      y[k] = x[k];
      argmax[k] = i;
    }
  }
}

template <typename T>
__global__ static void max_backward_kernel(size_t n, float i, const float *argmax, const T *dy,
                                           T *dx) {
  CT_CUDA_KERNEL_LOOP(k, n) dx[k] = argmax[k] == i ? dy[k] : ct_st<T>(0.0f);
}

/* body with T the element type t stands for. */
#define WITH_TYPE(t, body)                 \
  do {                                     \
    switch (t) {                           \
      case CT_BF16: {                      \
        typedef __nv_bfloat16 T;           \
        body;                              \
        break;                             \
      }                                    \
      case CT_F16: {                       \
        typedef __half T;                  \
        body;                              \
        break;                             \
      }                                    \
      default: {                           \
        typedef float T;                   \
        body;                              \
      }                                    \
    }                                      \
    CT_CUDA_LAUNCH_CHECK();                \
  } while (0)

#define GRID ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)

#define GRID_V16 ct_cuda_blocks(n / ct_v16<T>::V), CT_CUDA_THREADS, 0, STREAM(ctx)

extern "C" void ct_eltwise_axpby_gpu(ct_context *ctx, ct_dtype t, size_t n, float a,
                                     const void *x, float b, const void *y, bool relu, void *out) {
  if (!n) return;
  if (ct_v16_fits(n, ct_dtype_size(t), x, y, out, NULL))
    WITH_TYPE(t, (axpby_v16<T><<<GRID_V16>>>(n / ct_v16<T>::V, a, (const T *)x, b, (const T *)y,
                                             relu, (T *)out)));
  else
    WITH_TYPE(t, (axpby_kernel<T><<<GRID>>>(n, a, (const T *)x, b, (const T *)y, relu, (T *)out)));
}

extern "C" void ct_eltwise_relu_grad_gpu(ct_context *ctx, ct_dtype t, size_t n, float a,
                                         const void *dy, const void *y, void *dx) {
  if (!n) return;
  WITH_TYPE(t, (relu_grad_kernel<T><<<GRID>>>(n, a, (const T *)dy, (const T *)y, (T *)dx)));
}

extern "C" void ct_eltwise_sum2_grad_gpu(ct_context *ctx, ct_dtype t, size_t n, float a, float b,
                                         const void *dy, const void *y, void *dx0, void *dx1) {
  if (!n) return;
  if (ct_v16_fits(n, ct_dtype_size(t), dy, y, dx0, dx1))
    WITH_TYPE(t, (sum2_grad_v16<T><<<GRID_V16>>>(n / ct_v16<T>::V, a, b, (const T *)dy,
                                                 (const T *)y, (T *)dx0, (T *)dx1)));
  else
    WITH_TYPE(t, (sum2_grad_kernel<T><<<GRID>>>(n, a, b, (const T *)dy, (const T *)y, (T *)dx0,
                                                (T *)dx1)));
}

extern "C" void ct_eltwise_mul_gpu(ct_context *ctx, ct_dtype t, size_t n, const void *a,
                                   const void *b, void *y, bool divide) {
  if (!n) return;
  WITH_TYPE(t, (mul_kernel<T><<<GRID>>>(n, (const T *)a, (const T *)b, (T *)y, divide)));
}

extern "C" void ct_eltwise_max_first_gpu(ct_context *ctx, ct_dtype t, size_t n, const void *a,
                                         const void *b, void *y, float *argmax) {
  if (!n) return;
  WITH_TYPE(t, (max_first_kernel<T><<<GRID>>>(n, (const T *)a, (const T *)b, (T *)y, argmax)));
}

extern "C" void ct_eltwise_max_next_gpu(ct_context *ctx, ct_dtype t, size_t n, const void *x,
                                        int i, void *y, float *argmax) {
  if (!n) return;
  WITH_TYPE(t, (max_next_kernel<T><<<GRID>>>(n, (const T *)x, (float)i, (T *)y, argmax)));
}

extern "C" void ct_eltwise_max_backward_gpu(ct_context *ctx, ct_dtype t, size_t n, int i,
                                            const float *argmax, const void *dy, void *dx) {
  if (!n) return;
  WITH_TYPE(t, (max_backward_kernel<T><<<GRID>>>(n, (float)i, argmax, (const T *)dy, (T *)dx)));
}
