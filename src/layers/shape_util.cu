#include "gpu/gpu.h"
#include "layers/shape_util.h"

/* One (strided 2-D) copy on the context's stream does the whole block copy. */
extern "C" void ct_copy_rows_gpu(ct_context *ctx, size_t size, size_t rows, size_t row_len,
                                 const void *src, size_t src_stride, void *dst,
                                 size_t dst_stride) {
  if (!rows || !row_len) return;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (rows == 1 || (src_stride == row_len && dst_stride == row_len)) {
    CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, rows * row_len * size, cudaMemcpyDeviceToDevice,
                                  stream));
    return;
  }
  CT_ASSERT(src_stride >= row_len && dst_stride >= row_len);
  CT_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_stride * size, src, src_stride * size, row_len * size,
                                  rows, cudaMemcpyDeviceToDevice, stream));
}

/* Pageable host memory is staged by the driver before cudaMemcpyAsync
 * returns, so the caller may reuse it; the device side is stream-ordered. */
extern "C" void ct_stream_copy_gpu(ct_context *ctx, void *dst, const void *src, size_t bytes,
                                   bool wait) {
  if (!bytes) return;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  CT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  if (wait) CT_CUDA_CHECK(cudaStreamSynchronize(stream));
}
