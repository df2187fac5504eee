/* DummyData: tops of fixed shapes filled by fillers, no bottoms.
 *
 * dummy_data_param gives the shapes (shape, once or once per top, or the
 * legacy num/channels/height/width lists) and data_filler (none: constant 0;
 * one for every top; or one per top).  As in Caffe, a top whose filler is
 * "constant" is filled once at setup and never again; the others are refilled
 * on every forward from the context's RNG.  If the net later moves a constant
 * top to other storage, the values are written again there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "layers/dummy_data.h"
#include "layers/filler.h"
#include "layers/layer.h"
#include "layers/shape_util.h"
#include "math/math.h"

typedef struct {
  int nfill;                              /* 1 (shared by the tops) or ntop */
  const Caffe__FillerParameter **fillers; /* (nfill); NULL means constant 0 */
  bool *refill;                           /* (nfill) refill on every forward */
  float **filled_at;                      /* (ntop) storage a constant top was filled in */
  ct_tensor *host;                        /* host staging for tops on a GPU */
  uint64_t *seed_dev;                     /* GPU: (ntop) each top's last draw's seed */
} dummy_priv;

static bool is_constant(const Caffe__FillerParameter *fp) {
  return !fp || !fp->type || strcmp(fp->type, "constant") == 0;
}

static const Caffe__FillerParameter *filler_of(const dummy_priv *d, int top) {
  return d->fillers[d->nfill > 1 ? top : 0];
}

/* Fills top i from its filler.  On a GPU, uniform and (dense) gaussian
 * fillers draw on the device from a seed that a kernel takes from the
 * context's device draw counter (ct_context_next_draw_gpu, like Dropout), so
 * a refill costs two kernels, not a host fill and an upload, and a CUDA
 * graph captures it (the values differ from the CPU's, as any two
 * generators' do); other fillers run on the host and are uploaded. */
static ct_status fill_top(ct_layer *l, ct_tensor *top, int i, ct_error *err) {
  dummy_priv *d = l->priv;
  const Caffe__FillerParameter *fp = filler_of(d, i);
  if (top->device == CT_DEVICE_CPU) return ct_filler_fill(fp, top, &l->ctx->rng, err);
#ifdef CORTADO_HAVE_CUDA
  if (is_constant(fp)) { /* a constant top written again where the net moved it */
    ct_dev_set(l->ctx, top->count, fp ? fp->value : 0.0f, top->data);
    return CT_OK;
  }
  if (ct_dummy_filler_on_device(fp)) {
    const bool gaussian = strcmp(fp->type, "gaussian") == 0;
    ct_context_next_draw_gpu(l->ctx, d->seed_dev + i);
    ct_dummy_fill_gpu(l->ctx, top->count, top->data, gaussian, gaussian ? fp->mean : fp->min,
                      gaussian ? fp->std : fp->max, d->seed_dev + i);
    return CT_OK;
  }
#endif
  ct_tensor_reshape_like(d->host, top); /* sized for the largest top at setup: no allocation */
  CT_TRY(ct_filler_fill(filler_of(d, i), d->host, &l->ctx->rng, err));
  ct_stream_upload(l->ctx, top->data, d->host->data, top->count * sizeof(float));
  return CT_OK;
}

bool ct_dummy_filler_on_device(const Caffe__FillerParameter *fp) {
  return fp && fp->type &&
         (strcmp(fp->type, "uniform") == 0 || (strcmp(fp->type, "gaussian") == 0 && fp->sparse < 0));
}

static ct_status check_legacy_count(size_t n, const char *field, int ntop, ct_error *err) {
  if (n == 1 || (int)n == ntop) return CT_OK;
  return ct_error_set(err, CT_ERR_INVALID,
                      "dummy_data_param: '%s' given %zu times for %d tops (give it once or once per "
                      "top)",
                      field, n, ntop);
}

static ct_status shape_tops(ct_layer *l, const Caffe__DummyDataParameter *p, ct_tensor *const *top,
                            ct_error *err) {
  int nt = l->ntop;
  bool legacy = p->n_num || p->n_channels || p->n_height || p->n_width;
  if (legacy) {
    if (p->n_shape)
      return ct_error_set(err, CT_ERR_INVALID,
                          "dummy_data_param: both shape and the legacy num/channels/height/width "
                          "were given");
    CT_TRY(check_legacy_count(p->n_num, "num", nt, err));
    CT_TRY(check_legacy_count(p->n_channels, "channels", nt, err));
    CT_TRY(check_legacy_count(p->n_height, "height", nt, err));
    CT_TRY(check_legacy_count(p->n_width, "width", nt, err));
  } else if (p->n_shape != 1 && (int)p->n_shape != nt) {
    return ct_error_set(err, CT_ERR_INVALID,
                        "dummy_data_param: 'shape' given %zu times for %d tops (give it once or "
                        "once per top)",
                        p->n_shape, nt);
  }
  for (int i = 0; i < nt; i++) {
    int ndim, dims[CT_MAX_AXES];
    if (legacy) {
      const uint32_t *f[4] = {p->num, p->channels, p->height, p->width};
      const size_t n[4] = {p->n_num, p->n_channels, p->n_height, p->n_width};
      ndim = 4;
      for (int k = 0; k < 4; k++) {
        uint32_t v = f[k][n[k] == 1 ? 0 : i];
        if (v > INT32_MAX)
          return ct_error_set(err, CT_ERR_INVALID, "dummy_data_param: legacy dim %u too large", v);
        dims[k] = (int)v;
      }
    } else {
      size_t k = p->n_shape == 1 ? 0 : (size_t)i;
      char field[48];
      snprintf(field, sizeof field, "dummy_data_param.shape[%zu]", k);
      CT_TRY(ct_blob_shape_dims(p->shape[k], field, &ndim, dims, err));
    }
    CT_TRY(ct_tensor_reshape(top[i], ndim, dims, err));
  }
  return CT_OK;
}

static ct_status dummy_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__DummyDataParameter *p =
      CT_PARAM_OR_DEFAULT(l, dummy_data_param, CAFFE__DUMMY_DATA_PARAMETER__INIT);
  int nt = l->ntop;
  if (p->n_data_filler > 1 && (int)p->n_data_filler != nt)
    return ct_error_set(err, CT_ERR_INVALID,
                        "dummy_data_param: %zu data_filler values for %d tops (give 0, 1 or one "
                        "per top)",
                        p->n_data_filler, nt);
  CT_TRY(shape_tops(l, p, top, err));

  dummy_priv *d = ct_xcalloc(1, sizeof *d);
  l->priv = d;
  d->nfill = p->n_data_filler > 1 ? nt : 1;
  d->fillers = ct_xcalloc((size_t)d->nfill, sizeof *d->fillers);
  d->refill = ct_xcalloc((size_t)d->nfill, sizeof *d->refill);
  d->filled_at = ct_xcalloc((size_t)nt, sizeof *d->filled_at);
  if (l->ctx->device != CT_DEVICE_CPU)
    d->seed_dev = ct_mem_alloc(l->ctx->device, (size_t)nt * sizeof(uint64_t));
  for (int f = 0; f < d->nfill; f++) {
    d->fillers[f] = p->n_data_filler ? p->data_filler[f] : NULL;
    d->refill[f] = !is_constant(d->fillers[f]);
  }
  d->host = ct_tensor_new(CT_DEVICE_CPU, NULL);
  size_t largest = 0;
  for (int i = 0; i < nt; i++)
    if (top[i]->count > largest) largest = top[i]->count;
  int flat[1] = {(int)largest};
  if (l->ctx->device != CT_DEVICE_CPU) ct_tensor_reshape_or_die(d->host, 1, flat);

  /* Constant tops get their values now (those without storage, which
   * another process holds, at their first forward).  The others are filled
   * by forward; a trial fill (with the RNG put back) reports a bad filler
   * here. */
  for (int i = 0; i < nt; i++) {
    if (!d->refill[d->nfill > 1 ? i : 0]) {
      if (!top[i]->data) continue;
      CT_TRY(fill_top(l, top[i], i, err));
      d->filled_at[i] = top[i]->data;
    } else {
      ct_rng saved = l->ctx->rng;
      ct_tensor *trial = ct_tensor_new_shape(CT_DEVICE_CPU, NULL, top[i]->ndim, top[i]->shape, false);
      ct_status s = ct_filler_fill(filler_of(d, i), trial, &l->ctx->rng, err);
      ct_tensor_free(trial);
      l->ctx->rng = saved;
      if (s != CT_OK) return ct_error_prefix(err, "dummy_data_param.data_filler");
    }
  }
  return CT_OK;
}

/* The shapes are fixed at setup. */
static ct_status dummy_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  return CT_OK;
}

static ct_status dummy_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  dummy_priv *d = l->priv;
  for (int i = 0; i < l->ntop; i++) {
    if (d->refill[d->nfill > 1 ? i : 0]) {
      CT_TRY(fill_top(l, top[i], i, err));
    } else if (d->filled_at[i] != top[i]->data) {
      CT_TRY(fill_top(l, top[i], i, err));
      d->filled_at[i] = top[i]->data;
    }
  }
  return CT_OK;
}

static void dummy_destroy(ct_layer *l) {
  dummy_priv *d = l->priv;
  if (!d) return;
  free(d->fillers);
  free(d->refill);
  free(d->filled_at);
  ct_tensor_free(d->host);
  if (d->seed_dev) ct_mem_free(l->ctx->device, d->seed_dev);
  free(d);
}

/* One forward for both devices: fill_top picks the host or device path. */
const ct_layer_ops ct_dummy_data_ops = {
    .type = "DummyData",
    .min_bottoms = 0, .max_bottoms = 0, .min_tops = 1, .max_tops = -1,
    .flags = CT_LAYER_DATA | CT_LAYER_NO_BACKWARD,
    .setup = dummy_setup,
    .reshape = dummy_reshape,
    .forward_cpu = dummy_forward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = dummy_forward,
#endif
    .destroy = dummy_destroy,
};
