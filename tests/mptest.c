#include "mptest.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/mem.h"
#include "layertest.h"
#include "proto/textformat.h"
#include "testutil.h"

double tu_rel_error(const float *a, const float *b, size_t n) {
  double scale = 0.0, err = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (fabs(a[i]) > scale) scale = fabs(a[i]);
    double d = fabs((double)a[i] - (double)b[i]);
    if (!(d <= err)) err = d; /* NaN counts */
  }
  return scale > 0 ? err / scale : err;
}

Caffe__LayerParameter *tu_layer_from(const char *text) {
  ProtobufCMessage *m = NULL;
  ct_error err;
  if (ct_text_parse(&caffe__layer_parameter__descriptor, text, strlen(text), NULL, &m, &err) != CT_OK)
    fail_msg("%s", err.msg);
  return (Caffe__LayerParameter *)m;
}

/* n host values rounded through type and back, in place. */
static void round_host(float *v, size_t n, ct_dtype type) {
  void *tmp = malloc(n * sizeof(float) + 1);
  ct_dtype_convert(type, tmp, CT_F32, v, n);
  ct_dtype_convert(CT_F32, v, type, tmp, n);
  free(tmp);
}

/* Values of t rounded through type and back, in place (t float32). */
static void round_through(ct_tensor *t, ct_dtype type) {
  float *h = tu_values(t);
  round_host(h, t->count, type);
  ct_tensor_upload(t, h);
  free(h);
}

static void check(const char *what, const ct_layer *l, ct_dtype type, const float *want,
                  const float *got, size_t n, double bound) {
  double e = tu_rel_error(want, got, n);
  print_message("  %s %s of %s: relative error %.3g (bound %.3g)\n", ct_dtype_name(type), what,
                l->ops->type, e, bound);
  if (!(e <= bound))
    fail_msg("%s (%s) of layer %s in %s: relative error %.3g over the bound %.3g", what,
             l->ops->type, l->name, ct_dtype_name(type), e, bound);
}

void tu_twin_check(const Caffe__LayerParameter *p, int device, ct_dtype type,
                   const char *bottom_shapes, int ntop, double rel_bound) {
  tu_twin_check_layout(p, device, type, CT_NCHW, bottom_shapes, ntop, rel_bound);
}

void tu_twin_check_layout(const Caffe__LayerParameter *p, int device, ct_dtype type,
                          ct_layout layout, const char *bottom_shapes, int ntop, double rel_bound) {
  tu_layer_case f, h;
  ct_error err;
  const bool strict = tu_layer_strict_fp32;
  tu_layer_strict_fp32 = true; /* the float32 twin without TF32 */
  tu_layer_case_init(&f, p, device, CT_PHASE_TRAIN, bottom_shapes, ntop);
  tu_layer_strict_fp32 = strict;
  tu_layer_layout = layout;
  const ct_status st =
      tu_layer_case_try_typed(&h, p, device, CT_PHASE_TRAIN, bottom_shapes, ntop, type, &err);
  tu_layer_layout = CT_NCHW;
  if (st != CT_OK)
    fail_msg("the %s %s layer's setup failed: %s", ct_dtype_name(type), ct_layout_name(layout),
             err.msg);
  assert_int_equal(f.l->nparams, h.l->nparams);
  /* the same inputs: the float32 run gets the 16-bit run's rounded bottoms */
  for (int i = 0; i < f.nb; i++) {
    round_through(f.bottom[i], type);
    float *v = tu_values(f.bottom[i]);
    ct_tensor_upload(h.bottom[i], v);
    free(v);
  }
  for (int j = 0; j < f.l->nparams; j++) ct_tensor_copy_data(h.l->params[j], f.l->params[j]);
  tu_forward(&f);
  tu_forward(&h);
  for (int t = 0; t < ntop; t++) {
    assert_int_equal(f.top[t]->count, h.top[t]->count);
    assert_int_equal(h.top[t]->dtype, type);
    float *a = tu_values(f.top[t]), *b = tu_values(h.top[t]);
    check("top", h.l, type, a, b, f.top[t]->count, rel_bound);
    free(a);
    free(b);
  }
  if (!f.l->ops->backward_cpu) goto done;
  /* the same top gradients, then backward from zeroed parameter diffs */
  for (int t = 0; t < ntop; t++) {
    float *d = malloc(f.top[t]->count * sizeof(float) + 1);
    tu_fill_uniform(d, f.top[t]->count, -1.0f, 1.0f, 500 + (uint64_t)t);
    round_host(d, f.top[t]->count, type);
    ct_tensor_upload_diff(f.top[t], d);
    ct_tensor_upload_diff(h.top[t], d);
    free(d);
  }
  bool down[TU_MAX_BLOBS];
  for (int i = 0; i < f.nb; i++) {
    down[i] = true;
    ct_tensor_need_diff(f.bottom[i]);
    ct_tensor_need_diff(h.bottom[i]);
  }
  for (int j = 0; j < f.l->nparams; j++) {
    ct_tensor_zero_diff(f.l->params[j]);
    ct_tensor_zero_diff(h.l->params[j]);
  }
  ct_layer_backward(f.l, f.top, down, f.bottom);
  ct_layer_backward(h.l, h.top, down, h.bottom);
  ct_context_sync(&f.ctx);
  ct_context_sync(&h.ctx);
  for (int i = 0; i < f.nb; i++) {
    float *a = malloc(f.bottom[i]->count * sizeof(float) + 1);
    float *b = malloc(f.bottom[i]->count * sizeof(float) + 1);
    ct_tensor_download_diff(f.bottom[i], a);
    ct_tensor_download_diff(h.bottom[i], b);
    check("bottom gradient", h.l, type, a, b, f.bottom[i]->count, rel_bound);
    free(a);
    free(b);
  }
  for (int j = 0; j < f.l->nparams; j++) {
    assert_int_equal(h.l->params[j]->dtype, CT_F32);
    float *a = malloc(f.l->params[j]->count * sizeof(float) + 1);
    float *b = malloc(f.l->params[j]->count * sizeof(float) + 1);
    ct_tensor_download_diff(f.l->params[j], a);
    ct_tensor_download_diff(h.l->params[j], b);
    check("parameter gradient", h.l, type, a, b, f.l->params[j]->count, rel_bound);
    free(a);
    free(b);
  }
done:
  tu_layer_case_free(&f);
  tu_layer_case_free(&h);
}
