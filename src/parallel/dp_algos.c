/* Sharing rank 0's cuDNN convolution algorithms with the other worker
 * processes (see ct_dp_share_conv_algos in dp_internal.h). */
#include "parallel/dp_internal.h"

#include <stdlib.h>

#include "core/log.h"
#include "core/mem.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/conv/conv_algos.h"
#endif

ct_status ct_dp_share_conv_algos(ct_comm *comm, bool send, ct_error *err) {
#ifdef CORTADO_HAVE_CUDA
  double n = send ? (double)ct_cudnn_conv_table_export(NULL, 0) : 0.0;
  CT_TRY(ct_comm_allreduce_host_f64(comm, &n, 1, err)); /* only root's count is not 0 */
  const size_t count = (size_t)n;
  if (count == 0) return CT_OK;
  double *v = ct_xcalloc(count, sizeof *v);
  if (send) ct_cudnn_conv_table_export(v, count);
  ct_status st = ct_comm_allreduce_host_f64(comm, v, count, err);
  if (st == CT_OK && !send) {
    const long added = ct_cudnn_conv_table_import(v, count);
    if (added < 0)
      st = ct_error_set(err, CT_ERR_COMM, "rank 0's table of cuDNN algorithms arrived damaged");
    else
      LOG_INFO("took %ld cuDNN convolution algorithm choice%s from rank 0", added, added == 1 ? "" : "s");
  }
  free(v);
  return st;
#else
  (void)comm;
  (void)send;
  (void)err;
  return CT_OK;
#endif
}
