#include "gpu/gpu.h"
#include "layers/argmax.h"

__device__ static bool ranks_above(float v, size_t i, float w, size_t j) {
  return v > w || (v == w && i > j);
}

/* One thread per selection: top_k passes, each taking the best value that
 * ranks below the previous pick (as the CPU path does). */
__global__ static void argmax_fwd(size_t rows, size_t dim, size_t axis_dist, unsigned top_k,
                                  bool out_max_val, bool pairs, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(r, rows) {
    size_t outer = r / axis_dist, in = r % axis_dist;
    const float *xr = x + outer * dim * axis_dist + in;
    float prev_v = 0.0f;
    size_t prev_i = 0;
    for (unsigned k = 0; k < top_k; k++) {
      bool found = false;
      float best_v = 0.0f;
      size_t best_i = 0;
      for (size_t j = 0; j < dim; j++) {
        float v = xr[j * axis_dist];
        if (k > 0 && !ranks_above(prev_v, prev_i, v, j)) continue;
        if (!found || ranks_above(v, j, best_v, best_i)) {
          found = true;
          best_v = v;
          best_i = j;
        }
      }
      prev_v = best_v;
      prev_i = best_i;
      float index = found ? (float)best_i : -1.0f;
      if (pairs) {
        y[2 * r * top_k + k] = index;
        y[2 * r * top_k + top_k + k] = best_v;
      } else {
        y[(outer * top_k + k) * axis_dist + in] = out_max_val ? best_v : index;
      }
    }
  }
}

extern "C" void ct_argmax_forward_gpu(ct_context *ctx, size_t rows, size_t dim, size_t axis_dist,
                                      unsigned top_k, bool out_max_val, bool pairs, const float *x,
                                      float *y) {
  if (!rows || !top_k) return;
  argmax_fwd<<<ct_cuda_blocks(rows), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      rows, dim, axis_dist, top_k, out_max_val, pairs, x, y);
  CT_CUDA_LAUNCH_CHECK();
}
