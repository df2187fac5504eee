/* Im2col layer cases (test_layer_im2col.c on the CPU, test_gpu_layer_im2col.c
 * on a GPU): convolution_param windows in 2-D (square and _h/_w, pad, stride,
 * dilation, force_nd_im2col), 1-D, 3-D, and a channel axis after two leading
 * axes. */
#ifndef CT_TESTS_IM2COL_CASES_H
#define CT_TESTS_IM2COL_CASES_H

#include "layertest.h"
#include "testutil.h"

typedef struct ic_case {
  const char *shape;
  int axis;
  int nk, kernel[3];   /* kernel_size values given (0: kernel_h/_w below) */
  int kh, kw;
  int ns, stride[3];
  int np, pad[3];
  int nd, dilation[3];
  bool force_nd;
} ic_case;

static const ic_case k_ic_cases[] = {
    {"2,3,6,5", 1, 1, {3}, 0, 0, 0, {0}, 0, {0}, 0, {0}, false},
    {"2,3,6,5", 1, 1, {3}, 0, 0, 1, {2}, 1, {1}, 0, {0}, false},
    {"2,2,7,6", 1, 0, {0}, 3, 2, 2, {2, 1}, 2, {1, 0}, 1, {2}, false},
    {"2,2,7,6", 1, 0, {0}, 3, 2, 2, {2, 1}, 2, {1, 0}, 1, {2}, true},
    {"2,3,9", 1, 1, {4}, 0, 0, 1, {2}, 1, {2}, 0, {0}, false},
    {"2,2,5,4,6", 1, 3, {2, 3, 2}, 0, 0, 3, {1, 2, 2}, 3, {1, 0, 1}, 0, {0}, false},
    {"2,2,3,5,6", 2, 1, {2}, 0, 0, 0, {0}, 1, {1}, 1, {2}, false},
};

typedef struct ic_param {
  Caffe__LayerParameter lp;
  Caffe__ConvolutionParameter cp;
  uint32_t kernel[3], stride[3], pad[3], dilation[3];
} ic_param;

static inline void ic_make(ic_param *p, const ic_case *c) {
  memset(p, 0, sizeof *p);
  p->lp = (Caffe__LayerParameter)CAFFE__LAYER_PARAMETER__INIT;
  p->cp = (Caffe__ConvolutionParameter)CAFFE__CONVOLUTION_PARAMETER__INIT;
  p->lp.name = "im2col";
  p->lp.type = "Im2col";
  p->lp.convolution_param = &p->cp;
  p->cp.has_axis = 1;
  p->cp.axis = c->axis;
  for (int i = 0; i < 3; i++) {
    p->kernel[i] = (uint32_t)c->kernel[i];
    p->stride[i] = (uint32_t)c->stride[i];
    p->pad[i] = (uint32_t)c->pad[i];
    p->dilation[i] = (uint32_t)c->dilation[i];
  }
  p->cp.n_kernel_size = (size_t)c->nk;
  p->cp.kernel_size = p->kernel;
  if (!c->nk) {
    p->cp.has_kernel_h = p->cp.has_kernel_w = 1;
    p->cp.kernel_h = (uint32_t)c->kh;
    p->cp.kernel_w = (uint32_t)c->kw;
  }
  p->cp.n_stride = (size_t)c->ns;
  p->cp.stride = p->stride;
  p->cp.n_pad = (size_t)c->np;
  p->cp.pad = p->pad;
  p->cp.n_dilation = (size_t)c->nd;
  p->cp.dilation = p->dilation;
  p->cp.has_force_nd_im2col = c->force_nd;
  p->cp.force_nd_im2col = c->force_nd;
}

#endif
