/* dnnl_wgrad: every oneDNN implementation of a convolution's weight
 * gradient for one geometry, timed, in bfloat16 (the computing type of a
 * bfloat16 net on the host) with nhwc activations as Cortado's blobs hold
 * them, or the formats each implementation prefers (with the reorders
 * that costs), and float32 or bfloat16 weight gradients.  What the host
 * engine's choice (layers/conv/conv_dnnl.c) is measured against.
 *
 *   dnnl_wgrad N C H W K KH PAD [ITERS]
 *
 * e.g. cifar10_quick's conv2: dnnl_wgrad 100 32 16 16 32 5 2
 *
 * It builds against oneDNN 2.x (Debian's, as Cortado does) and 3.x (whose
 * C API makes memory descriptors handles and primitive descriptors
 * directly), so that a newer oneDNN (PyPI's onednn-devel-cpu-gomp) can be
 * measured beside the one Cortado uses:
 *   cc -O2 -I$W/include bench/dnnl_wgrad.c -L$W/lib -ldnnl -o dnnl3_wgrad */
#define _POSIX_C_SOURCE 200809L
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    dnnl_status_t s_ = (call);                                                   \
    if (s_ != dnnl_success) {                                                    \
      fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #call, s_); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

#if DNNL_VERSION_MAJOR >= 3
typedef const_dnnl_memory_desc_t md_ref; /* a handle */
#define MD(x) (x)
#else
typedef const dnnl_memory_desc_t *md_ref;
#define MD(x) (&(x))
#endif

/* A memory of md, zero-filled by oneDNN's allocation. */
static dnnl_memory_t mem(dnnl_engine_t eng, md_ref md) {
  dnnl_memory_t m;
  CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
  return m;
}

/* Reorders from user to the primitive's md when they differ: the time of
 * that reorder per run is part of the candidate's. */
typedef struct {
  dnnl_primitive_t r;
  dnnl_memory_t to;
} reorder;

static reorder make_reorder(dnnl_engine_t eng, md_ref user, md_ref want) {
  reorder o = {0};
  if (dnnl_memory_desc_equal(user, want)) return o;
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_reorder_primitive_desc_create(&pd, user, eng, want, eng, NULL));
  CHECK(dnnl_primitive_create(&o.r, pd));
  dnnl_primitive_desc_destroy(pd);
  o.to = mem(eng, want);
  return o;
}

/* Times the implementation pd is at (reorders from nhwc included); the
 * reference loops are left out (seconds a run). */
static void time_candidate(dnnl_engine_t eng, dnnl_stream_t st, const_dnnl_primitive_desc_t pd, md_ref x_user,
                           md_ref y_user, md_ref db_md, int fmt, int wt, int iters) {
  const char *name = "?";
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
  if (strncmp(name, "ref", 3) == 0) return;
  md_ref want_x = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  md_ref want_y = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_dst_md, 0);
  md_ref want_w = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
  dnnl_memory_t xu = mem(eng, x_user), yu = mem(eng, y_user), dw = mem(eng, want_w), db = mem(eng, db_md);
  reorder rx = make_reorder(eng, x_user, want_x), ry = make_reorder(eng, y_user, want_y);
  dnnl_primitive_t prim;
  CHECK(dnnl_primitive_create(&prim, pd));
  double best = 1e30;
  for (int i = 0; i < iters + 2; i++) {
    const double t0 = now();
    if (rx.r) {
      dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, xu}, {DNNL_ARG_TO, rx.to}};
      CHECK(dnnl_primitive_execute(rx.r, st, 2, a));
    }
    if (ry.r) {
      dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, yu}, {DNNL_ARG_TO, ry.to}};
      CHECK(dnnl_primitive_execute(ry.r, st, 2, a));
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, rx.r ? rx.to : xu},
                               {DNNL_ARG_DIFF_DST, ry.r ? ry.to : yu},
                               {DNNL_ARG_DIFF_WEIGHTS, dw},
                               {DNNL_ARG_DIFF_BIAS, db}};
    CHECK(dnnl_primitive_execute(prim, st, 4, args));
    CHECK(dnnl_stream_wait(st));
    const double t = now() - t0;
    if (i >= 2 && t < best) best = t;
  }
  printf("  %s acts, %s dW: %-40s %8.3f ms%s%s\n", fmt ? "any " : "nhwc", wt ? "bf16" : "f32 ", name,
         best * 1e3, rx.r ? " (+x reorder)" : "", ry.r ? " (+dy reorder)" : "");
  dnnl_primitive_destroy(prim);
  if (rx.r) dnnl_primitive_destroy(rx.r), dnnl_memory_destroy(rx.to);
  if (ry.r) dnnl_primitive_destroy(ry.r), dnnl_memory_destroy(ry.to);
  dnnl_memory_destroy(xu), dnnl_memory_destroy(yu), dnnl_memory_destroy(dw), dnnl_memory_destroy(db);
}

int main(int argc, char **argv) {
  if (argc < 8) {
    fprintf(stderr, "usage: dnnl_wgrad N C H W K KH PAD [ITERS]\n");
    return 2;
  }
  const int N = atoi(argv[1]), C = atoi(argv[2]), H = atoi(argv[3]), W = atoi(argv[4]), K = atoi(argv[5]),
            KH = atoi(argv[6]), P = atoi(argv[7]), iters = argc > 8 ? atoi(argv[8]) : 20;
  const int OH = H + 2 * P - KH + 1, OW = W + 2 * P - KH + 1;
  dnnl_engine_t eng;
  dnnl_stream_t st;
  CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  dnnl_dims_t xd = {N, C, H, W}, yd = {N, K, OH, OW}, wd = {K, C, KH, KH}, bd = {K};
  dnnl_dims_t strides = {1, 1}, dil = {0, 0}, pad = {P, P};
  printf("oneDNN %d.%d.%d; N %d, %d -> %d channels, %dx%d, kernel %d, pad %d: %.3f GFLOP\n",
         DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, DNNL_VERSION_PATCH, N, C, K, H, W, KH, P,
         2.0 * N * K * C * KH * KH * OH * OW / 1e9);
  for (int fmt = 0; fmt < 2; fmt++)
    for (int wt = 0; wt < 2; wt++) {
#if DNNL_VERSION_MAJOR >= 3
      dnnl_memory_desc_t x_user, y_user, x_md, y_md, dw_md, db_md, w_any;
      CHECK(dnnl_memory_desc_create_with_tag(&x_user, 4, xd, dnnl_bf16, dnnl_acdb));
      CHECK(dnnl_memory_desc_create_with_tag(&y_user, 4, yd, dnnl_bf16, dnnl_acdb));
      CHECK(dnnl_memory_desc_create_with_tag(&x_md, 4, xd, dnnl_bf16, fmt ? dnnl_format_tag_any : dnnl_acdb));
      CHECK(dnnl_memory_desc_create_with_tag(&y_md, 4, yd, dnnl_bf16, fmt ? dnnl_format_tag_any : dnnl_acdb));
      CHECK(dnnl_memory_desc_create_with_tag(&dw_md, 4, wd, wt ? dnnl_bf16 : dnnl_f32, dnnl_format_tag_any));
      CHECK(dnnl_memory_desc_create_with_tag(&db_md, 1, bd, dnnl_f32, dnnl_a));
      CHECK(dnnl_memory_desc_create_with_tag(&w_any, 4, wd, dnnl_bf16, dnnl_format_tag_any));
      dnnl_primitive_desc_t fpd, pd;
      CHECK(dnnl_convolution_forward_primitive_desc_create(&fpd, eng, dnnl_forward_training,
                                                           dnnl_convolution_direct, x_md, w_any, db_md,
                                                           y_md, strides, dil, pad, pad, NULL));
      CHECK(dnnl_convolution_backward_weights_primitive_desc_create(
          &pd, eng, dnnl_convolution_direct, x_md, dw_md, db_md, y_md, strides, dil, pad, pad, fpd, NULL));
      do {
        time_candidate(eng, st, pd, x_user, y_user, db_md, fmt, wt, iters);
      } while (dnnl_primitive_desc_next_impl(pd) == dnnl_success);
      dnnl_primitive_desc_destroy(pd);
      dnnl_primitive_desc_destroy(fpd);
      dnnl_memory_desc_t all[7] = {x_user, y_user, x_md, y_md, dw_md, db_md, w_any};
      for (int k = 0; k < 7; k++) dnnl_memory_desc_destroy(all[k]);
#else
      dnnl_memory_desc_t x_user, y_user, x_md, y_md, dw_md, db_md;
      CHECK(dnnl_memory_desc_init_by_tag(&x_user, 4, xd, dnnl_bf16, dnnl_acdb));
      CHECK(dnnl_memory_desc_init_by_tag(&y_user, 4, yd, dnnl_bf16, dnnl_acdb));
      CHECK(dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dnnl_bf16, fmt ? dnnl_format_tag_any : dnnl_acdb));
      CHECK(dnnl_memory_desc_init_by_tag(&y_md, 4, yd, dnnl_bf16, fmt ? dnnl_format_tag_any : dnnl_acdb));
      CHECK(dnnl_memory_desc_init_by_tag(&dw_md, 4, wd, wt ? dnnl_bf16 : dnnl_f32, dnnl_format_tag_any));
      CHECK(dnnl_memory_desc_init_by_tag(&db_md, 1, bd, dnnl_f32, dnnl_a));
      /* the forward hint oneDNN's backward passes ask for */
      dnnl_convolution_desc_t fd, bd_;
      dnnl_memory_desc_t w_any;
      CHECK(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_bf16, dnnl_format_tag_any));
      CHECK(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
                                                       &x_md, &w_any, &db_md, &y_md, strides, dil, pad, pad));
      dnnl_primitive_desc_t fpd;
      CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
      CHECK(dnnl_dilated_convolution_backward_weights_desc_init(&bd_, dnnl_convolution_direct, &x_md, &dw_md,
                                                                &db_md, &y_md, strides, dil, pad, pad));
      dnnl_primitive_desc_iterator_t it;
      CHECK(dnnl_primitive_desc_iterator_create(&it, &bd_, NULL, eng, fpd));
      do {
        time_candidate(eng, st, dnnl_primitive_desc_iterator_fetch(it), &x_user, &y_user, &db_md, fmt, wt, iters);
      } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
      dnnl_primitive_desc_iterator_destroy(it);
      dnnl_primitive_desc_destroy(fpd);
#endif
    }
  dnnl_stream_destroy(st);
  dnnl_engine_destroy(eng);
  return 0;
}
