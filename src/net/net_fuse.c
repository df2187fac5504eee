/* Net-level fusion: a layer that computes the layer after it too, so that
 * the pair takes one pass over the activations in forward and one in
 * backward (and no scratch copies in between).
 *
 * On a GPU, a Convolution followed by a ReLU (slope 0) in place on its top:
 * the convolution adds its bias and clamps in one pass (layers/conv/conv_cudnn.h),
 * the ReLU is marked forward_absorbed and keeps its backward, which reads
 * the same top either way; a 16-bit convolution takes the backward too, in
 * the pass that sums its bias gradient, and the ReLU is absorbed (not in
 * nets whose callers read blob gradients, ct_net_opts.keep_blob_diffs).
 *
 * On a GPU, a Pooling (MAX or AVE, Cortado's kernels) and a ReLU in place
 * on its top: the pooling clamps its output and passes gradients only
 * through outputs above 0, and the ReLU is absorbed.  And a ReLU in place
 * on a blob that a Pooling reads next: the pooling's backward keeps only
 * the gradients of inputs above 0 and the ReLU is marked backward_absorbed
 * (cifar10_quick has both: pool1 + relu1, relu2 + pool2, relu3 + pool3;
 * each saves a pass over the activations and a launch per direction).
 * And a Convolution whose top only a MAX Pooling reads (cifar10_quick's
 * conv1 + pool1): the pooling adds the convolution's bias to the maxima,
 * which is exact, and the convolution leaves it out (its top then holds
 * conv(x) without the bias: not in nets built for callers that read
 * intermediate blobs, ct_net_opts.keep_blob_diffs, such as pycaffe's).
 *
 * And Caffe's BatchNorm + Scale: a training BatchNorm
 * (batch statistics; on a GPU also one with global statistics, which then
 * computes the pair as one affine pass) followed by a Scale with a learned (C) scale at axis 1
 * and a bias, in place on the BatchNorm's top (the form of Caffe's ResNets,
 * usually all in place on the convolution's top).  The BatchNorm then
 * computes gamma * (x - mean) / std + beta and the gradients of x, gamma
 * and beta (layers/batch_norm.h); the Scale is marked absorbed and does
 * nothing.  Parameters stay where they were (the Scale keeps gamma and
 * beta), so .caffemodel files, snapshots, sharing and the flat layout do not
 * change; only the Scale's gradients become final one backward step later
 * (at the BatchNorm's), which the ready counts take into account.  A ReLU
 * in place after such a pair is computed by the BatchNorm too where cuDNN's
 * persistent kernels run it (16-bit channels-last training), and with
 * global statistics in every type.
 *
 * On a GPU, a SUM Eltwise and a ReLU in place on its top (ResNet's
 * shortcut additions): one pass computes max(sum, 0), and backward masks
 * each bottom's gradient by the top; the ReLU is absorbed.
 *
 * Not a fusion of two layers but of two blobs, decided as the Eltwise is
 * set up (ct_net_fuse_sum; its own top is freed at once, before the layers
 * after it take memory): on a GPU a SUM Eltwise writes its sum over its
 * last bottom when nothing else reads that bottom's values, forward or
 * backward, as PyTorch's ResNets add the shortcut in place on the last
 * BatchNorm's output.  That bottom must be the top of one layer (not
 * in place) whose backward does not read it (ct_layer_ops.backward_reads:
 * a 16-bit channels-last BatchNorm's own top), touched otherwise only by
 * layers absorbed into that one (its Scale).  ResNet-50 in bfloat16 then
 * holds one activation less per residual unit (1.3 GB at batch 128).  Not
 * in nets whose callers read blobs (no diff planning). */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "layers/batch_norm.h"
#include "layers/conv/conv_common.h"
#include "layers/eltwise.h"
#include "layers/pooling.h"
#include "net/net.h"

void ct_net_params_ready_counts(ct_net *net); /* net_params.c */

/* Layer si is a Scale that the BatchNorm bi can compute: one bottom, in
 * place on the BatchNorm's top, bias_term, a (C) scale at axis 1, no loss,
 * no propagate_down given. */
static bool scale_fusable(const ct_net *net, int bi, int si) {
  const ct_layer *bn = net->layers[bi], *sc = net->layers[si];
  if (strcmp(sc->ops->type, "Scale") != 0 || sc->nbottom != 1 || sc->nparams != 2) return false;
  if (bn->param->n_propagate_down || sc->param->n_propagate_down) return false;
  if (bn->loss_weight[0] != 0.0f || sc->loss_weight[0] != 0.0f) return false;
  int blob = net->top_ids[bi][0];
  if (net->bottom_ids[si][0] != blob || net->top_ids[si][0] != blob) return false;
  const Caffe__ScaleParameter *p = sc->param->scale_param;
  if (!p || !p->bias_term) return false;
  const ct_tensor *x = net->blobs[blob];
  int axis = p->axis < 0 ? p->axis + x->ndim : p->axis;
  if (axis != 1 || x->ndim < 2) return false;
  const ct_tensor *gamma = sc->params[0], *beta = sc->params[1];
  return gamma->ndim == 1 && beta->ndim == 1 && gamma->shape[0] == x->shape[1] &&
         beta->shape[0] == x->shape[1];
}

/* Layer ri is a ReLU with slope 0, one bottom and no loss weight, in place
 * on its bottom. */
static bool plain_relu_in_place(const ct_net *net, int ri) {
  const ct_layer *r = net->layers[ri];
  if (strcmp(r->ops->type, "ReLU") != 0 || r->nbottom != 1 || r->ntop != 1) return false;
  if (r->param->relu_param && r->param->relu_param->negative_slope != 0.0f) return false;
  return r->loss_weight[0] == 0.0f && net->bottom_ids[ri][0] == net->top_ids[ri][0];
}

/* Layer ri is such a ReLU on the only top of layer ci, which has no loss
 * weight. */
static bool relu_in_place_after(const ct_net *net, int ci, int ri) {
  const ct_layer *c = net->layers[ci];
  return plain_relu_in_place(net, ri) && c->ntop == 1 && c->loss_weight[0] == 0.0f &&
         net->bottom_ids[ri][0] == net->top_ids[ci][0];
}

/* Layer ri is such a ReLU, not absorbed, on the blob that is layer pi's
 * only bottom. */
static bool relu_in_place_before(const ct_net *net, int ri, int pi) {
  const ct_layer *p = net->layers[pi];
  return plain_relu_in_place(net, ri) && !net->layers[ri]->absorbed && p->nbottom == 1 &&
         net->bottom_ids[pi][0] == net->top_ids[ri][0];
}

/* Layer ci is a Convolution with a bias, one bottom, one top and no loss
 * weight, and its top is layer pi's only bottom. */
static bool conv_with_bias_into(const ct_net *net, int ci, int pi) {
  const ct_layer *c = net->layers[ci], *p = net->layers[pi];
  return strcmp(c->ops->type, "Convolution") == 0 && c->nbottom == 1 && c->ntop == 1 &&
         c->nparams == 2 && c->loss_weight[0] == 0.0f && p->nbottom == 1 &&
         net->bottom_ids[pi][0] == net->top_ids[ci][0];
}

ct_status ct_net_fuse_layer(ct_net *net, int si, bool quiet, ct_error *err) {
  if (si < 1) return CT_OK;
  int bi = si - 1;
  ct_layer *before = net->layers[bi], *self = net->layers[si];
  /* (its backward too unless callers may run backward passes that stop
   * between the two: pycaffe's net.backward(end=...)) */
  bool backward_too = false;
  if (relu_in_place_after(net, bi, si) &&
      ct_conv_absorb_relu(before, !net->exact_blobs, &backward_too)) {
    if (backward_too) self->absorbed = true;
    else self->forward_absorbed = true;
    if (!quiet)
      LOG_INFO("%s computes %s%s too (Convolution + ReLU fused)", before->name, self->name,
               backward_too ? "" : "'s forward");
    return CT_OK;
  }
  /* (not for callers that read the blobs' gradients: the ReLU's bottom
   * gradient is never written) */
  if (!net->exact_blobs && relu_in_place_after(net, bi, si) &&
      strcmp(before->ops->type, "Eltwise") == 0 && ct_eltwise_absorb_relu(before)) {
    self->absorbed = true;
    if (!quiet) LOG_INFO("%s computes %s too (Eltwise + ReLU fused)", before->name, self->name);
    return CT_OK;
  }
  /* a ReLU after a BatchNorm that computes its Scale (absorbed, or its own
   * with NVCaffe's scale_bias) */
  int ai = bi;
  while (ai > 0 && net->layers[ai]->absorbed) ai--;
  if (!net->exact_blobs && strcmp(net->layers[ai]->ops->type, "BatchNorm") == 0 &&
      relu_in_place_after(net, ai, si) && ct_batch_norm_absorb_relu(net->layers[ai], self)) {
    CT_TRY(ct_layer_reshape(net->layers[ai], net->bottoms[ai], net->tops[ai], err));
    if (!quiet)
      LOG_INFO("%s computes %s too (BatchNorm + Scale + ReLU fused)", net->layers[ai]->name,
               self->name);
    return CT_OK;
  }
  if (relu_in_place_after(net, bi, si) && ct_pool_absorb_relu_top(before)) {
    self->absorbed = true;
    CT_TRY(ct_layer_reshape(before, net->bottoms[bi], net->tops[bi], err));
    if (!quiet) LOG_INFO("%s computes %s too (Pooling + ReLU fused)", before->name, self->name);
    return CT_OK;
  }
  if (!net->exact_blobs && conv_with_bias_into(net, bi, si) &&
      ct_pool_take_bias(self, before->params[1])) {
    if (ct_conv_defer_bias(before)) {
      CT_TRY(ct_layer_reshape(self, net->bottoms[si], net->tops[si], err));
      if (!quiet)
        LOG_INFO("%s adds %s's bias (Convolution + MAX Pooling fused)", self->name, before->name);
      return CT_OK;
    }
    ct_pool_take_bias(self, NULL);
  }
  if (relu_in_place_before(net, bi, si) && ct_pool_absorb_relu_bottom(self)) {
    before->backward_absorbed = true;
    CT_TRY(ct_layer_reshape(self, net->bottoms[si], net->tops[si], err));
    if (!quiet)
      LOG_INFO("%s computes %s's backward too (ReLU + Pooling fused)", self->name, before->name);
    return CT_OK;
  }
  if (strcmp(before->ops->type, "BatchNorm") != 0 || before->absorbed ||
      !scale_fusable(net, bi, si) || !ct_batch_norm_absorb_scale(before, self))
    return CT_OK;
  CT_TRY(ct_layer_reshape(before, net->bottoms[bi], net->tops[bi], err));
  CT_TRY(ct_layer_reshape(self, net->bottoms[si], net->tops[si], err));
  if (!quiet) LOG_INFO("%s computes %s too (BatchNorm + Scale fused)", before->name, self->name);
  return CT_OK;
}

/* Whether layer li reads (as a bottom) or writes (as a top) t. */
static void touches(const ct_net *net, int li, const ct_tensor *t, bool *bottom, bool *top) {
  const ct_layer *l = net->layers[li];
  *bottom = *top = false;
  for (int k = 0; k < l->nbottom; k++) *bottom = *bottom || net->bottoms[li][k] == t;
  for (int k = 0; k < l->ntop; k++) *top = *top || net->tops[li][k] == t;
}

/* Whether a layer after ei reads the blob named name (until one writes a
 * new blob of that name): from the NetParameter, as those are not built
 * yet.  Splits are in it, so a blob with several readers is read by one. */
static bool read_later(const ct_net *net, int ei, const char *name) {
  for (size_t li = (size_t)ei + 1; li < net->param->n_layer; li++) {
    const Caffe__LayerParameter *lp = net->param->layer[li];
    for (size_t k = 0; k < lp->n_bottom; k++)
      if (strcmp(lp->bottom[k], name) == 0) return true;
    for (size_t k = 0; k < lp->n_top; k++)
      if (strcmp(lp->top[k], name) == 0) return false; /* a new blob of that name */
  }
  return false;
}

/* Eltwise ei (just set up, the layers before it built and fused): whether
 * its sum may overwrite its last bottom (above). */
static bool sum_may_overwrite(const ct_net *net, int ei) {
  const ct_layer *e = net->layers[ei];
  if (strcmp(e->ops->type, "Eltwise") != 0 || e->absorbed || e->ntop != 1) return false;
  const ct_tensor *t = net->tops[ei][0], *b = net->bottoms[ei][e->nbottom - 1];
  if (t == b || !b->owns_data || !t->owns_data || b->no_storage || b->dtype != t->dtype ||
      b->layout != t->layout || b->count != t->count || !b->name)
    return false;
  for (int k = 0; k < e->nbottom - 1; k++)
    if (net->bottoms[ei][k] == b) return false;
  /* back to the layer that made b (nothing before it knows b): every layer
   * between that touches b must be absorbed */
  int li = ei - 1;
  for (; li >= net->part_first; li--) {
    bool as_bottom, as_top;
    touches(net, li, b, &as_bottom, &as_top);
    if (as_top && !as_bottom) break; /* the producer */
    if ((as_bottom || as_top) && !net->layers[li]->absorbed) return false;
  }
  if (li < net->part_first) return false;
  const ct_layer *p = net->layers[li];
  if (p->nbottom > 8 || p->ntop > 8) return false;
  bool reads_bottom[8], reads_top[8];
  ct_layer_backward_reads(p, reads_bottom, reads_top);
  for (int j = 0; j < p->ntop; j++)
    if (net->tops[li][j] == b && reads_top[j]) return false;
  return !read_later(net, ei, b->name);
}

ct_status ct_net_fuse_sum(ct_net *net, int ei, bool quiet, ct_error *err) {
  if (!sum_may_overwrite(net, ei) || !ct_eltwise_sum_in_place(net->layers[ei])) return CT_OK;
  ct_layer *e = net->layers[ei];
  CT_TRY(ct_layer_reshape(e, net->bottoms[ei], net->tops[ei], err)); /* its own top is freed */
  if (!quiet) LOG_INFO("%s writes its sum over %s", e->name, net->bottoms[ei][e->nbottom - 1]->name);
  return CT_OK;
}

ct_status ct_net_fuse_finish(ct_net *net, ct_error *err) {
  bool any = false;
  for (int si = 1; si < net->nlayers; si++) {
    if (!net->layers[si]->absorbed) continue;
    /* the layer that computes it: the nearest one before that is not
     * absorbed itself (a BatchNorm computes its Scale and the ReLU after) */
    int bi = si - 1;
    while (bi > 0 && net->layers[bi]->absorbed) bi--;
    any = true;
    net->layer_need_backward[bi] = net->layer_need_backward[bi] || net->layer_need_backward[si];
    net->layer_need_backward[si] = false;
    for (int q = 0; q < net->nparams; q++)
      if (net->params[q].final_layer == si) net->params[q].final_layer = bi;
    if (strcmp(net->layers[bi]->ops->type, "BatchNorm") == 0 &&
        !(net->layer_need_backward[bi] && net->bottom_need_backward[bi][0])) {
      ct_batch_norm_fused_need_dx(net->layers[bi], false);
      CT_TRY(ct_layer_reshape(net->layers[bi], net->bottoms[bi], net->tops[bi], err));
    }
  }
  if (any) ct_net_params_ready_counts(net);
  return CT_OK;
}
