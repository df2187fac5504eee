/* oneDNN matmul plans (matmul_dnnl.h). */
#include "math/matmul_dnnl.h"

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/status.h"

#define DNNL_CHECK(call)                                                                   \
  do {                                                                                     \
    dnnl_status_t st_ = (call);                                                            \
    CT_ASSERTF(st_ == dnnl_success, "%s:%d: %s failed (oneDNN status %d)", __FILE__, __LINE__, \
               #call, (int)st_);                                                           \
  } while (0)

struct ct_matmul_dnnl {
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t prim;
  dnnl_memory_t a, b, c, bias; /* data handles set per run */
  dnnl_stream_t stream;
};

static dnnl_engine_t g_engine;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnnl_status_t g_status;

static void engine_init(void) { g_status = dnnl_engine_create(&g_engine, dnnl_cpu, 0); }

static dnnl_data_type_t type_of(ct_dtype t) {
  switch (t) {
    case CT_BF16: return dnnl_bf16;
    case CT_F16: return dnnl_f16;
    default: return dnnl_f32;
  }
}

/* A (rows, cols) matrix stored row-major, or its transpose stored so. */
static dnnl_status_t matrix_md(dnnl_memory_desc_t *md, int rows, int cols, bool trans, ct_dtype t) {
  dnnl_dims_t dims = {rows, cols};
  dnnl_dims_t strides = {trans ? 1 : cols, trans ? rows : 1};
  return dnnl_memory_desc_init_by_strides(md, 2, dims, type_of(t), strides);
}

ct_matmul_dnnl *ct_matmul_dnnl_plan(bool trans_a, bool trans_b, int M, int N, int K, ct_dtype a,
                                    ct_dtype b, ct_dtype c, bool bias, bool accumulate, char *why,
                                    size_t why_len) {
  if (why_len) why[0] = '\0';
  pthread_once(&g_once, engine_init);
  if (g_status != dnnl_success) {
    snprintf(why, why_len, "no oneDNN CPU engine (status %d)", (int)g_status);
    return NULL;
  }
  ct_matmul_dnnl *p = ct_xcalloc(1, sizeof *p);
  dnnl_memory_desc_t amd, bmd, cmd, biasmd;
  dnnl_matmul_desc_t d;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  const char *stage = "descriptors";
  dnnl_status_t s;
  dnnl_dims_t bdims = {1, N};
  if ((s = matrix_md(&amd, M, K, trans_a, a)) || (s = matrix_md(&bmd, K, N, trans_b, b)) ||
      (s = matrix_md(&cmd, M, N, false, c)) ||
      (s = dnnl_memory_desc_init_by_tag(&biasmd, 2, bdims, dnnl_f32, dnnl_ab)))
    goto fail;
  stage = "matmul";
  if ((s = dnnl_matmul_desc_init(&d, &amd, &bmd, bias ? &biasmd : NULL, &cmd))) goto fail;
  if ((s = dnnl_primitive_attr_create(&attr))) goto fail;
  if (accumulate) {
    if ((s = dnnl_post_ops_create(&po)) || (s = dnnl_post_ops_append_sum(po, 1.0f)) ||
        (s = dnnl_primitive_attr_set_post_ops(attr, po)))
      goto fail;
  }
  if ((s = dnnl_primitive_desc_create(&p->pd, &d, attr, g_engine, NULL))) goto fail;
  if ((s = dnnl_primitive_create(&p->prim, p->pd))) goto fail;
  stage = "memory";
  if ((s = dnnl_memory_create(&p->a, &amd, g_engine, DNNL_MEMORY_NONE)) ||
      (s = dnnl_memory_create(&p->b, &bmd, g_engine, DNNL_MEMORY_NONE)) ||
      (s = dnnl_memory_create(&p->c, &cmd, g_engine, DNNL_MEMORY_NONE)) ||
      (s = dnnl_memory_create(&p->bias, &biasmd, g_engine, DNNL_MEMORY_NONE)) ||
      (s = dnnl_stream_create(&p->stream, g_engine, dnnl_stream_default_flags)))
    goto fail;
  if (po) dnnl_post_ops_destroy(po);
  dnnl_primitive_attr_destroy(attr);
  return p;
fail:
  snprintf(why, why_len, "oneDNN declined the %s of a %s x %s -> %s matmul (status %d)", stage,
           ct_dtype_name(a), ct_dtype_name(b), ct_dtype_name(c), (int)s);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  ct_matmul_dnnl_free(p);
  return NULL;
}

void ct_matmul_dnnl_run(ct_matmul_dnnl *p, const void *A, const void *B, const float *bias,
                        void *C) {
  DNNL_CHECK(dnnl_memory_set_data_handle(p->a, (void *)A));
  DNNL_CHECK(dnnl_memory_set_data_handle(p->b, (void *)B));
  DNNL_CHECK(dnnl_memory_set_data_handle(p->c, C));
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
  int n = 3;
  if (bias) {
    DNNL_CHECK(dnnl_memory_set_data_handle(p->bias, (void *)bias));
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->bias};
  }
  DNNL_CHECK(dnnl_primitive_execute(p->prim, p->stream, n, args));
  DNNL_CHECK(dnnl_stream_wait(p->stream));
}

void ct_matmul_dnnl_free(ct_matmul_dnnl *p) {
  if (!p) return;
  if (p->prim) dnnl_primitive_destroy(p->prim);
  if (p->pd) dnnl_primitive_desc_destroy(p->pd);
  dnnl_memory_t m[] = {p->a, p->b, p->c, p->bias};
  for (int i = 0; i < 4; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  if (p->stream) dnnl_stream_destroy(p->stream);
  free(p);
}
