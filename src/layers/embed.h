/* GPU launchers of the Embed layer (embed.cu), on ctx's stream.  Indices
 * are floats truncated toward zero; row r of the table w(K, N) is
 * w + r * N. */
#ifndef CT_LAYERS_EMBED_H
#define CT_LAYERS_EMBED_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The first position m < M whose index is outside [0, K) (NaN included), or
 * -1.  scratch: one device int.  Waits for the stream. */
long long ct_embed_check_gpu(ct_context *ctx, size_t M, int K, const float *index, int *scratch);
/* y(M, N) = w[index[m]] (+ bias(N) when bias is not NULL); indices checked. */
void ct_embed_forward_gpu(ct_context *ctx, size_t M, int N, const float *index, const float *w,
                          const float *bias, float *y);
/* dw[index[m]] += dy[m] for every m (atomic adds: rows may repeat). */
void ct_embed_backward_weight_gpu(ct_context *ctx, size_t M, int N, const float *index,
                                  const float *dy, float *dw);
/* db(N) += sum over m of dy(M, N). */
void ct_embed_backward_bias_gpu(ct_context *ctx, size_t M, int N, const float *dy, float *db);

#ifdef __cplusplus
}
#endif

#endif
