/* ResNet in Caffe's form (He et al.'s Caffe release): Convolution without
 * bias, BatchNorm + Scale, ReLU, bottleneck blocks joined by Eltwise SUM, for
 * any image size, channel count and label count.  Used by
 * `cortado resnet50_trainer` and to write models/resnet50/train_val.prototxt. */
#ifndef CT_MODELS_RESNET_H
#define CT_MODELS_RESNET_H

#include <stdbool.h>

#include "caffe.pb-c.h"
#include "core/status.h"

typedef struct ct_resnet_opts {
  int depth;            /* 50, 101 or 152 */
  int num_labels;       /* classifier outputs */
  int num_channels;     /* input channels */
  int image_size;       /* input height = width (the crop size) */
  int batch_size;       /* per-GPU TRAIN batch */
  int test_batch_size;  /* TEST batch (0: no TEST data layer) */
  const char *train_source; /* DB of the TRAIN Data layer (NULL: an Input layer) */
  const char *test_source;  /* DB of the TEST Data layer (may be NULL) */
  const char *backend;  /* "LMDB" or "LEVELDB" */
  /* Caffe2's resnet50_trainer: inputs normalised as (x - 128) / 128 (Caffe's
   * form: per-channel means 104, 117, 123 for 3 channels, unscaled). */
  bool caffe2_input;
  /* An Accuracy layer ("accuracy") in TRAIN as well, as Caffe2's trainer
   * reports train accuracy (Caffe's form: TEST only). */
  bool train_accuracy;
} ct_resnet_opts;

/* The net as prototxt text (malloc'd; caller frees).  CT_ERR_INVALID for an
 * unsupported depth or a non-positive size. */
ct_status ct_resnet_prototxt(const ct_resnet_opts *o, char **text, ct_error *err);
/* The same parsed into a NetParameter (free with protobuf_c_message_free_unpacked). */
ct_status ct_resnet_net(const ct_resnet_opts *o, Caffe__NetParameter **out, ct_error *err);

#endif
