#include "layertest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/filler.h"
#include "testutil.h"

static int parse_shapes(const char *spec, int shapes[TU_MAX_BLOBS][CT_MAX_AXES], int *ndims) {
  int nb = 0;
  const char *p = spec;
  while (p && *p) {
    while (*p == ' ') p++;
    if (!*p) break;
    CT_ASSERT(nb < TU_MAX_BLOBS);
    ndims[nb] = 0;
    if (*p == '-') {
      p++;
    } else {
      while (*p && *p != ';') {
        char *end;
        long v = strtol(p, &end, 10);
        CT_ASSERTF(end != p, "bad shape spec '%s'", spec);
        shapes[nb][ndims[nb]++] = (int)v;
        p = end;
        while (*p == ' ' || *p == ',') p++;
      }
    }
    nb++;
    while (*p == ' ') p++;
    if (*p == ';') p++;
  }
  return nb;
}

void tu_fill(ct_tensor *t, float lo, float hi, uint64_t seed) {
  float *h = malloc(t->count * sizeof(float) + 1);
  tu_fill_uniform(h, t->count, lo, hi, seed);
  ct_tensor_upload(t, h);
  free(h);
}

void tu_set_values(ct_tensor *t, const float *values) { ct_tensor_upload(t, values); }

float *tu_values(const ct_tensor *t) {
  float *h = malloc(t->count * sizeof(float) + 1);
  ct_tensor_download(t, h);
  return h;
}

/* Moves host-filled parameters to the device, as the net does. */
static void params_to_device(ct_layer *l) {
  for (int i = 0; i < l->nparams; i++) {
    ct_tensor *h = l->params[i];
    if (h->device == l->ctx->device) continue;
    ct_tensor *d = ct_tensor_new_shape(l->ctx->device, NULL, h->ndim, h->shape, true);
    ct_tensor_copy_data(d, h);
    ct_tensor_free(h);
    l->params[i] = d;
  }
}

bool tu_layer_strict_fp32 = false;
ct_layout tu_layer_layout = CT_NCHW;

ct_status tu_layer_case_try(tu_layer_case *c, const Caffe__LayerParameter *p, int device,
                            ct_phase phase, const char *bottom_shapes, int ntop, ct_error *err) {
  return tu_layer_case_try_typed(c, p, device, phase, bottom_shapes, ntop, CT_F32, err);
}

ct_status tu_layer_case_try_typed(tu_layer_case *c, const Caffe__LayerParameter *p, int device,
                                  ct_phase phase, const char *bottom_shapes, int ntop,
                                  ct_dtype type, ct_error *err) {
  memset(c, 0, sizeof *c);
  CT_TRY(ct_context_init(&c->ctx, device, 1234, err));
  if (tu_layer_strict_fp32) ct_context_set_tf32(&c->ctx, false);
  int shapes[TU_MAX_BLOBS][CT_MAX_AXES], ndims[TU_MAX_BLOBS];
  c->nb = parse_shapes(bottom_shapes, shapes, ndims);
  c->nt = ntop;
  for (int i = 0; i < c->nb; i++) {
    char name[16];
    snprintf(name, sizeof name, "bottom%d", i);
    c->bottom[i] = ct_tensor_new_shape(device, name, ndims[i], shapes[i], true);
    if (type != CT_F32) {
      ct_tensor_set_dtype(c->bottom[i], type);
      ct_tensor_reshape_or_die(c->bottom[i], ndims[i], shapes[i]);
    }
    ct_tensor_set_layout(c->bottom[i], tu_layer_layout);
    tu_fill(c->bottom[i], -1.0f, 1.0f, 100 + (uint64_t)i);
  }
  for (int i = 0; i < ntop; i++) {
    char name[16];
    snprintf(name, sizeof name, "top%d", i);
    c->top[i] = ct_tensor_new(device, name);
    ct_tensor_set_dtype(c->top[i], type);
    ct_tensor_set_layout(c->top[i], tu_layer_layout);
    c->top[i]->has_diff = true;
  }
  CT_TRY(ct_layer_create(p, phase, &c->ctx, c->nb, ntop, &c->l, err));
  c->l->dtype = type;
  c->l->layout = tu_layer_layout;
  CT_TRY(ct_layer_setup(c->l, c->bottom, c->top, err));
  params_to_device(c->l);
  /* Loss tops carry their loss weight in diff, as the net arranges. */
  for (int i = 0; i < ntop; i++) {
    ct_tensor_need_diff(c->top[i]);
    if (c->l->loss_weight[i] != 0.0f) {
      float *h = malloc(c->top[i]->count * sizeof(float) + 1);
      for (size_t k = 0; k < c->top[i]->count; k++) h[k] = c->l->loss_weight[i];
      ct_tensor_upload_diff(c->top[i], h);
      free(h);
    }
  }
  return CT_OK;
}

void tu_layer_case_init(tu_layer_case *c, const Caffe__LayerParameter *p, int device, ct_phase phase,
                        const char *bottom_shapes, int ntop) {
  ct_error err;
  if (tu_layer_case_try(c, p, device, phase, bottom_shapes, ntop, &err) != CT_OK)
    fail_msg("layer setup failed: %s", err.msg);
}

void tu_layer_case_free(tu_layer_case *c) {
  ct_layer_free(c->l);
  for (int i = 0; i < c->nb; i++) ct_tensor_free(c->bottom[i]);
  for (int i = 0; i < c->nt; i++) ct_tensor_free(c->top[i]);
  ct_context_free(&c->ctx);
  memset(c, 0, sizeof *c);
}

void tu_forward(tu_layer_case *c) {
  ct_error err;
  if (ct_layer_forward(c->l, c->bottom, c->top, NULL, &err) != CT_OK)
    fail_msg("forward failed: %s", err.msg);
}

void tu_check_gradient(tu_layer_case *c, const ct_gradcheck_opts *o) {
  char msg[512];
  long n = 0;
  bool ok = ct_gradcheck(c->l, c->bottom, c->top, o, msg, sizeof msg, &n);
  if (!ok) fail_msg("gradient check failed: %s", msg);
  if (n == 0) fail_msg("gradient check compared no values (layer %s)", c->l->ops->type);
}

static void assert_close(const char *what, const ct_tensor *cpu, const ct_tensor *gpu, bool diff,
                         double tol) {
  assert_int_equal(cpu->count, gpu->count);
  float *a = malloc(cpu->count * sizeof(float) + 1), *b = malloc(cpu->count * sizeof(float) + 1);
  if (diff) {
    ct_tensor_download_diff(cpu, a);
    ct_tensor_download_diff(gpu, b);
  } else {
    ct_tensor_download(cpu, a);
    ct_tensor_download(gpu, b);
  }
  double e = tu_max_rel_err(b, a, cpu->count, 1e-3);
  if (!(e <= tol)) fail_msg("%s: GPU differs from CPU, max relative error %g > %g", what, e, tol);
  free(a);
  free(b);
}

void tu_compare_cpu_gpu(const Caffe__LayerParameter *p, ct_phase phase, const char *bottom_shapes,
                        int ntop, double rel_tol, void (*prepare)(tu_layer_case *c)) {
  tu_layer_case cpu, gpu;
  tu_layer_case_init(&cpu, p, CT_DEVICE_CPU, phase, bottom_shapes, ntop);
  tu_layer_case_init(&gpu, p, 0, phase, bottom_shapes, ntop);
  if (prepare) {
    prepare(&cpu);
    prepare(&gpu);
  }
  for (int i = 0; i < cpu.nb; i++) ct_tensor_copy_data(gpu.bottom[i], cpu.bottom[i]);
  for (int i = 0; i < cpu.l->nparams; i++) ct_tensor_copy_data(gpu.l->params[i], cpu.l->params[i]);
  tu_forward(&cpu);
  tu_forward(&gpu);
  for (int i = 0; i < ntop; i++) {
    char what[64];
    snprintf(what, sizeof what, "%s top %d", p->type, i);
    assert_close(what, cpu.top[i], gpu.top[i], false, rel_tol);
  }
  bool prop[TU_MAX_BLOBS];
  /* Random top diffs, except on loss tops, which keep their loss weight. */
  for (int i = 0; i < ntop; i++) {
    if (cpu.l->loss_weight[i] != 0.0f) continue;
    float *h = malloc(cpu.top[i]->count * sizeof(float) + 1);
    tu_fill_uniform(h, cpu.top[i]->count, -1.0f, 1.0f, 900 + (uint64_t)i);
    ct_tensor_upload_diff(cpu.top[i], h);
    ct_tensor_upload_diff(gpu.top[i], h);
    free(h);
  }
  for (int i = 0; i < cpu.nb; i++) prop[i] = !(cpu.l->ops->no_force_backward_bottoms & (1u << i));
  for (int i = 0; i < cpu.l->nparams; i++) {
    ct_tensor_zero_diff(cpu.l->params[i]);
    ct_tensor_zero_diff(gpu.l->params[i]);
  }
  if (cpu.l->ops->backward_cpu) {
    ct_layer_backward(cpu.l, cpu.top, prop, cpu.bottom);
    ct_layer_backward(gpu.l, gpu.top, prop, gpu.bottom);
    for (int i = 0; i < cpu.nb; i++) {
      if (!prop[i]) continue;
      char what[64];
      snprintf(what, sizeof what, "%s bottom %d diff", p->type, i);
      assert_close(what, cpu.bottom[i], gpu.bottom[i], true, rel_tol);
    }
    for (int i = 0; i < cpu.l->nparams; i++) {
      char what[64];
      snprintf(what, sizeof what, "%s param %d diff", p->type, i);
      assert_close(what, cpu.l->params[i], gpu.l->params[i], true, rel_tol);
    }
  }
  tu_layer_case_free(&cpu);
  tu_layer_case_free(&gpu);
}
