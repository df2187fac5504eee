/* Per-layer FLOPs and memory (see net_cost.h). */
#include "net/net_cost.h"

#include <string.h>

typedef struct cost_in {
  const ct_net *net;
  int i;
  const ct_layer *l;
  ct_tensor *const *bottom, *const *top;
  bool bottom_grad; /* some bottom gets a gradient */
  bool param_grad;  /* some parameter gets a gradient */
} cost_in;

static double top_count(const cost_in *c) {
  double n = 0;
  for (int t = 0; t < c->l->ntop; t++) n += (double)c->top[t]->count;
  return n;
}

/* Convolution and Deconvolution: weights (K, C/g, k...) read by every
 * output value of the "wide" side (the top of a convolution, the bottom
 * of a deconvolution). */
static void conv_cost(const cost_in *c, bool reverse, double *fwd, double *bwd) {
  const ct_layer *l = c->l;
  if (l->nparams < 1) return;
  const ct_tensor *w = l->params[0];
  const double per_out = (double)w->count / (double)w->shape[0]; /* (C/g) prod(k) */
  double macs = 0, bias = 0;
  for (int b = 0; b < l->nbottom; b++) {
    const ct_tensor *wide = reverse ? c->bottom[b] : c->top[b];
    macs += (double)wide->count * per_out;
    if (l->nparams > 1) bias += (double)c->top[b]->count;
  }
  *fwd = 2 * macs + bias;
  *bwd = (c->bottom_grad ? 2 * macs : 0) + (c->param_grad ? 2 * macs + bias : 0);
}

static void convolution_cost(const cost_in *c, double *fwd, double *bwd) { conv_cost(c, false, fwd, bwd); }
static void deconvolution_cost(const cost_in *c, double *fwd, double *bwd) { conv_cost(c, true, fwd, bwd); }

static void inner_product_cost(const cost_in *c, double *fwd, double *bwd) {
  const ct_layer *l = c->l;
  const ct_tensor *x = c->bottom[0];
  const Caffe__InnerProductParameter *p = l->param->inner_product_param;
  int axis = p && p->has_axis ? p->axis : 1;
  if (axis < 0) axis += x->ndim;
  double m = 1;
  for (int a = 0; a < axis && a < x->ndim; a++) m *= x->shape[a];
  const double k = (double)x->count / m, n = (double)c->top[0]->count / m;
  const double bias = l->nparams > 1 ? m * n : 0;
  *fwd = 2 * m * n * k + bias;
  *bwd = (c->bottom_grad ? 2 * m * n * k : 0) + (c->param_grad ? 2 * m * n * k + bias : 0);
}

static void pooling_cost(const cost_in *c, double *fwd, double *bwd) {
  const Caffe__PoolingParameter *p = c->l->param->pooling_param;
  const ct_tensor *x = c->bottom[0];
  double window = 1;
  if (p && p->has_global_pooling && p->global_pooling) {
    for (int a = 2; a < x->ndim; a++) window *= x->shape[a];
  } else if (p) {
    const double kh = p->has_kernel_h ? p->kernel_h : p->kernel_size;
    const double kw = p->has_kernel_w ? p->kernel_w : p->kernel_size;
    window = kh * kw;
  }
  const double out = top_count(c);
  const bool max = !p || !p->has_pool || p->pool == CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX;
  *fwd = out * window;
  *bwd = c->bottom_grad ? (max ? out : out * window) : 0;
}

/* Element-wise layers: FLOPs per top value, forward and backward. */
typedef struct per_value {
  const char *type;
  double fwd, bwd;
} per_value;

static const per_value per_value_table[] = {
    {"ReLU", 1, 1},       {"PReLU", 2, 4},     {"ELU", 3, 2},        {"Sigmoid", 4, 3},
    {"TanH", 4, 3},       {"AbsVal", 1, 2},    {"BNLL", 4, 4},       {"Power", 3, 4},
    {"Exp", 2, 2},        {"Log", 2, 2},       {"Swish", 5, 6},      {"Clip", 2, 2},
    {"Threshold", 1, 0},  {"Dropout", 1, 1},   {"Scale", 2, 4},      {"Bias", 1, 2},
    {"BatchNorm", 6, 8},  {"MVN", 5, 8},       {"Softmax", 4, 3},    {"SoftmaxWithLoss", 5, 2},
    {"LRN", 10, 14},      {"EuclideanLoss", 3, 2},                   {"SigmoidCrossEntropyLoss", 6, 2},
};

static void eltwise_cost(const cost_in *c, double *fwd, double *bwd) {
  const double n = (double)c->top[0]->count, inputs = c->l->nbottom;
  *fwd = n * (inputs - 1);
  *bwd = c->bottom_grad ? n * inputs : 0;
}

typedef void (*cost_fn)(const cost_in *c, double *fwd, double *bwd);

static const struct {
  const char *type;
  cost_fn fn;
} cost_table[] = {
    {"Convolution", convolution_cost}, {"Deconvolution", deconvolution_cost},
    {"InnerProduct", inner_product_cost}, {"Pooling", pooling_cost}, {"Eltwise", eltwise_cost},
};

/* Loss layers' tops are one value: count their bottom 0 instead. */
static double values_of(const cost_in *c) {
  if (c->l->ops->flags & CT_LAYER_LOSS) return (double)c->bottom[0]->count;
  return top_count(c);
}

void ct_net_layer_cost(const ct_net *net, int i, ct_layer_cost *cost) {
  memset(cost, 0, sizeof *cost);
  const ct_layer *l = net->layers[i];
  cost_in c = {.net = net, .i = i, .l = l, .bottom = net->bottoms[i], .top = net->tops[i]};
  const bool backward = net->layer_need_backward[i];
  for (int b = 0; b < l->nbottom; b++) c.bottom_grad |= backward && net->bottom_need_backward[i][b];
  for (int p = 0; p < l->nparams; p++) {
    c.param_grad |= backward && l->param_propagate_down[p];
    cost->param_bytes += l->params[p]->count * sizeof(float);
  }
  for (int t = 0; t < l->ntop; t++) {
    bool in_place = false;
    for (int b = 0; b < l->nbottom; b++) in_place |= c.top[t] == c.bottom[b];
    if (!in_place) cost->top_bytes += ct_tensor_bytes(c.top[t], c.top[t]->count);
  }
  if (l->ops->workspace_bytes) cost->workspace_bytes = l->ops->workspace_bytes(l);
  const char *type = l->ops->type;
  for (size_t k = 0; k < sizeof cost_table / sizeof cost_table[0]; k++) {
    if (strcmp(type, cost_table[k].type) != 0) continue;
    cost_table[k].fn(&c, &cost->forward_flops, &cost->backward_flops);
    cost->counted = true;
    return;
  }
  for (size_t k = 0; k < sizeof per_value_table / sizeof per_value_table[0]; k++) {
    if (strcmp(type, per_value_table[k].type) != 0) continue;
    const double n = values_of(&c);
    cost->forward_flops = n * per_value_table[k].fwd;
    cost->backward_flops = c.bottom_grad || c.param_grad ? n * per_value_table[k].bwd : 0;
    cost->counted = true;
    return;
  }
}
