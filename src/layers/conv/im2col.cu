/* im2col / col2im on a GPU: one thread per column entry group (im2col) or
 * per image value (col2im gathers the windows that cover it, so no atomics). */
#include "gpu/gpu.h"
#include "layers/conv/im2col.h"

/* One thread per (image, channel, output position): writes that position's
 * column entry in every kernel row. */
__global__ static void im2col_2d(size_t n, ct_im2col_geom g, int B, const float *im, float *col) {
  const int H = g.in[0], W = g.in[1], OH = g.out[0], OW = g.out[1];
  const int KH = g.kernel[0], KW = g.kernel[1], C = g.channels;
  const size_t plane = (size_t)OH * OW, ld = (size_t)B * plane;
  CT_CUDA_KERNEL_LOOP(i, n) {
    int ow = (int)(i % OW);
    int oh = (int)((i / OW) % OH);
    int c = (int)((i / plane) % C);
    int b = (int)(i / plane / C);
    const float *src = im + ((size_t)b * C + c) * H * W;
    float *dst = col + (size_t)c * KH * KW * ld + (size_t)b * plane + (size_t)oh * OW + ow;
    int h0 = oh * g.stride[0] - g.pad[0], w0 = ow * g.stride[1] - g.pad[1];
    for (int ki = 0; ki < KH; ki++) {
      int h = h0 + ki * g.dilation[0];
      for (int kj = 0; kj < KW; kj++) {
        int w = w0 + kj * g.dilation[1];
        *dst = (h >= 0 && h < H && w >= 0 && w < W) ? src[(size_t)h * W + w] : 0.0f;
        dst += ld;
      }
    }
  }
}

/* One thread per image value: the sum of the column entries that read it. */
__global__ static void col2im_2d(size_t n, ct_im2col_geom g, int B, const float *col, float *im) {
  const int H = g.in[0], W = g.in[1], OH = g.out[0], OW = g.out[1];
  const int KH = g.kernel[0], KW = g.kernel[1], C = g.channels;
  const size_t plane = (size_t)OH * OW, ld = (size_t)B * plane;
  CT_CUDA_KERNEL_LOOP(i, n) {
    int w = (int)(i % W);
    int h = (int)((i / W) % H);
    int c = (int)((i / ((size_t)H * W)) % C);
    int b = (int)(i / ((size_t)H * W) / C);
    float sum = 0.0f;
    for (int ki = 0; ki < KH; ki++) {
      int hh = h + g.pad[0] - ki * g.dilation[0];
      if (hh < 0) break;
      if (hh % g.stride[0]) continue;
      int oh = hh / g.stride[0];
      if (oh >= OH) continue;
      for (int kj = 0; kj < KW; kj++) {
        int ww = w + g.pad[1] - kj * g.dilation[1];
        if (ww < 0) break;
        if (ww % g.stride[1]) continue;
        int ow = ww / g.stride[1];
        if (ow >= OW) continue;
        sum += col[((size_t)(c * KH + ki) * KW + kj) * ld + (size_t)b * plane + (size_t)oh * OW + ow];
      }
    }
    im[i] = sum;
  }
}

__global__ static void im2col_nd(size_t n, ct_im2col_geom g, int B, const float *im, float *col) {
  const int nd = g.nspatial, C = g.channels;
  size_t outc = 1, inc = 1, kc = 1;
  for (int d = 0; d < nd; d++) {
    outc *= g.out[d];
    inc *= g.in[d];
    kc *= g.kernel[d];
  }
  const size_t ld = (size_t)B * outc;
  CT_CUDA_KERNEL_LOOP(i, n) {
    size_t p = i % outc;
    int c = (int)((i / outc) % C);
    int b = (int)(i / outc / C);
    int o[CT_IM2COL_MAX_AXES], k[CT_IM2COL_MAX_AXES];
    size_t r = p;
    for (int d = nd - 1; d >= 0; d--) {
      o[d] = (int)(r % g.out[d]);
      r /= g.out[d];
      k[d] = 0;
    }
    const float *src = im + ((size_t)b * C + c) * inc;
    float *dst = col + (size_t)c * kc * ld + (size_t)b * outc + p;
    for (size_t kidx = 0; kidx < kc; kidx++) {
      size_t idx = 0;
      bool inside = true;
      for (int d = 0; d < nd; d++) {
        int x = o[d] * g.stride[d] - g.pad[d] + k[d] * g.dilation[d];
        inside = inside && x >= 0 && x < g.in[d];
        idx = idx * g.in[d] + (size_t)(inside ? x : 0);
      }
      *dst = inside ? src[idx] : 0.0f;
      dst += ld;
      for (int d = nd - 1; d >= 0; d--) {
        if (++k[d] < g.kernel[d]) break;
        k[d] = 0;
      }
    }
  }
}

__global__ static void col2im_nd(size_t n, ct_im2col_geom g, int B, const float *col, float *im) {
  const int nd = g.nspatial, C = g.channels;
  size_t outc = 1, inc = 1, kc = 1;
  for (int d = 0; d < nd; d++) {
    outc *= g.out[d];
    inc *= g.in[d];
    kc *= g.kernel[d];
  }
  const size_t ld = (size_t)B * outc;
  CT_CUDA_KERNEL_LOOP(i, n) {
    size_t q = i % inc;
    int c = (int)((i / inc) % C);
    int b = (int)(i / inc / C);
    int x[CT_IM2COL_MAX_AXES], k[CT_IM2COL_MAX_AXES];
    for (int d = nd - 1; d >= 0; d--) {
      x[d] = (int)(q % g.in[d]);
      q /= g.in[d];
      k[d] = 0;
    }
    float sum = 0.0f;
    for (size_t kidx = 0; kidx < kc; kidx++) {
      size_t p = 0;
      bool hit = true;
      for (int d = 0; d < nd && hit; d++) {
        int t = x[d] + g.pad[d] - k[d] * g.dilation[d];
        hit = t >= 0 && t % g.stride[d] == 0 && t / g.stride[d] < g.out[d];
        p = p * g.out[d] + (size_t)(hit ? t / g.stride[d] : 0);
      }
      if (hit) sum += col[((size_t)c * kc + kidx) * ld + (size_t)b * outc + p];
      for (int d = nd - 1; d >= 0; d--) {
        if (++k[d] < g.kernel[d]) break;
        k[d] = 0;
      }
    }
    im[i] = sum;
  }
}

extern "C" void ct_im2col_gpu(ct_context *ctx, const ct_im2col_geom *g, int B, const float *im,
                              float *col) {
  size_t n = (size_t)B * g->channels * ct_im2col_out_count(g);
  if (!n) return;
  cudaStream_t s = (cudaStream_t)ctx->stream;
  if (g->nspatial == 2 && !g->force_nd)
    im2col_2d<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, *g, B, im, col);
  else
    im2col_nd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, *g, B, im, col);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_col2im_gpu(ct_context *ctx, const ct_im2col_geom *g, int B, const float *col,
                              float *im) {
  size_t n = (size_t)B * g->channels * ct_im2col_in_count(g);
  if (!n) return;
  cudaStream_t s = (cudaStream_t)ctx->stream;
  if (g->nspatial == 2 && !g->force_nd)
    col2im_2d<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, *g, B, col, im);
  else
    col2im_nd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, *g, B, col, im);
  CT_CUDA_LAUNCH_CHECK();
}
