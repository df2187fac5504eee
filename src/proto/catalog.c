#include "proto/catalog.h"

#include <stdio.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "core/log.h"
#include "proto/reflect.h"

/* Every type BVLC Caffe's master registers (REGISTER_LAYER_CLASS and the
 * creator functions of layer_factory.cpp). */
static const char *const k_bvlc_types[] = {
    "AbsVal", "Accuracy", "ArgMax", "BatchNorm", "BatchReindex", "Bias", "BNLL", "Clip", "Concat",
    "ContrastiveLoss", "Convolution", "Crop", "Data", "Deconvolution", "Dropout", "DummyData", "Eltwise",
    "ELU", "Embed", "EuclideanLoss", "Exp", "Filter", "Flatten", "HDF5Data", "HDF5Output", "HingeLoss",
    "Im2col", "ImageData", "InfogainLoss", "InnerProduct", "Input", "Log", "LRN", "LSTM", "LSTMUnit",
    "MemoryData", "MultinomialLogisticLoss", "MVN", "Parameter", "Pooling", "Power", "PReLU", "Python",
    "Reduction", "ReLU", "Reshape", "RNN", "Scale", "Sigmoid", "SigmoidCrossEntropyLoss", "Silence",
    "Slice", "Softmax", "SoftmaxWithLoss", "Split", "SPP", "Swish", "TanH", "Threshold", "Tile",
    "WindowData"};

#define SSD "SSD's Caffe fork (weiliu89/caffe, branch ssd)"
#define NVCAFFE "NVIDIA's Caffe fork (NVCaffe)"
#define FRCNN "Fast R-CNN's Caffe fork (rbgirshick/caffe-fast-rcnn)"
#define DEEPLAB "DeepLab's Caffe fork"

typedef struct fork_type {
  const char *type, *fork;
} fork_type;

static const fork_type k_fork_types[] = {
    {"AnnotatedData", SSD},  {"DetectionEvaluate", SSD}, {"DetectionOutput", SSD}, {"MultiBoxLoss", SSD},
    {"Normalize", SSD},      {"Permute", SSD},           {"PriorBox", SSD},        {"VideoData", SSD},
    {"ROIPooling", FRCNN},   {"SmoothL1Loss", FRCNN},    {"Interp", DEEPLAB},
};

typedef struct foreign_field {
  const char *message, *field, *note;
} foreign_field;

#define OF(fork) "a field of " fork ", which Cortado does not implement"

/* Fields of other Caffes' schemas, and settings with an answer of Cortado's
 * own. */
static const foreign_field k_fields[] = {
    {"LayerParameter", "annotated_data_param", OF(SSD)},
    {"LayerParameter", "detection_evaluate_param", OF(SSD)},
    {"LayerParameter", "detection_output_param", OF(SSD)},
    {"LayerParameter", "multibox_loss_param", OF(SSD)},
    {"LayerParameter", "norm_param", OF(SSD)},
    {"LayerParameter", "permute_param", OF(SSD)},
    {"LayerParameter", "prior_box_param", OF(SSD)},
    {"LayerParameter", "video_data_param", OF(SSD)},
    {"LayerParameter", "roi_pooling_param", OF(FRCNN)},
    {"LayerParameter", "smooth_l1_loss_param", OF(FRCNN)},
    {"LayerParameter", "interp_param", OF(DEEPLAB)},
    {"LayerParameter", "detectnet_groundtruth_param", OF(NVCAFFE)},
    {"LayerParameter", "detectnet_augmentation_param", OF(NVCAFFE)},
    {"ConvolutionParameter", "cudnn_convolution_algo_seeker", OF(NVCAFFE)},
    {"ConvolutionParameter", "conv_algos_override", OF(NVCAFFE)},
    {"DropoutParameter", "engine", OF(NVCAFFE)},
    {"DropoutParameter", "random_seed", OF(NVCAFFE)},
    {"ELUParameter", "lambda", OF(NVCAFFE)},
    {"TransformationParameter", "resize_to_square", OF(NVCAFFE)},
    {"TransformationParameter", "use_gpu_transform", OF(NVCAFFE)},
    {"TransformationParameter", "random_seed", OF(NVCAFFE)},
    {"SolverParameter", "local_lr_auto", OF(NVCAFFE)},
    {"SolverParameter", "local_gw_ratio", OF(NVCAFFE)},
    {"SolverParameter", "multiprocess",
     "Cortado already trains with one worker process per GPU (--dp_workers=processes, the "
     "default): remove this line and choose the GPUs with --gpu=0,1 or --gpu=all"},
};

static const char k_device_id_list[] =
    "device_id takes one GPU; choose several with --gpu=0,1 or --gpu=all on the command line "
    "(Cortado already trains with one worker process per GPU: --dp_workers)";

bool ct_caffe_is_layer_type(const char *type) {
  for (size_t i = 0; type && i < sizeof k_bvlc_types / sizeof *k_bvlc_types; i++)
    if (strcmp(k_bvlc_types[i], type) == 0) return true;
  return false;
}

const char *const *ct_caffe_layer_types(size_t *n) {
  *n = sizeof k_bvlc_types / sizeof *k_bvlc_types;
  return k_bvlc_types;
}

const char *ct_caffe_fork_of_layer_type(const char *type) {
  for (size_t i = 0; type && i < sizeof k_fork_types / sizeof *k_fork_types; i++)
    if (strcmp(k_fork_types[i].type, type) == 0) return k_fork_types[i].fork;
  return NULL;
}

const char *ct_caffe_foreign_field_note(const char *message, const char *field) {
  for (size_t i = 0; i < sizeof k_fields / sizeof *k_fields; i++)
    if (strcmp(k_fields[i].message, message) == 0 && strcmp(k_fields[i].field, field) == 0)
      return k_fields[i].note;
  return NULL;
}

const char *ct_caffe_list_note(const char *message, const char *field) {
  if (strcmp(message, "SolverParameter") == 0 && strcmp(field, "device_id") == 0) return k_device_id_list;
  return NULL;
}

/* NVCaffe's fields that Cortado parses without acting on them, and why. */
typedef struct ignored_field {
  const char *message, *field, *why;
} ignored_field;

#define GRADS_AS_FORWARD "gradients take the layer's forward type in Cortado"
#define MATH_FLOAT32 "16-bit layers always accumulate in float32 in Cortado"

static const ignored_field k_ignored[] = {
    {"NetParameter", "default_backward_type", GRADS_AS_FORWARD},
    {"NetParameter", "default_forward_math", MATH_FLOAT32},
    {"NetParameter", "default_backward_math", MATH_FLOAT32},
    {"NetParameter", "default_conv_algos_override", "Cortado benchmarks cuDNN's algorithms itself"},
    {"NetParameter", "reduce_buckets", "Cortado sizes its buckets with --bucket_mb"},
    {"NetParameter", "default_cudnn_math_override", "Cortado chooses the math (--precision)"},
    {"LayerParameter", "backward_type", GRADS_AS_FORWARD},
    {"LayerParameter", "forward_math", MATH_FLOAT32},
    {"LayerParameter", "backward_math", MATH_FLOAT32},
    {"LayerParameter", "debug", "Cortado has no per-layer debug output"},
    {"LayerParameter", "cudnn_math_override", "Cortado chooses the math (--precision)"},
    {"SolverParameter", "solver_data_type", "Cortado keeps the solver's history in float32"},
    {"SolverParameter", "store_blobs_in_old_format", "Cortado writes BVLC Caffe's float32 blobs"},
    {"SolverParameter", "test_and_snapshot_last_epochs", "Cortado has no epoch-based schedule"},
};

static int log_ignored_of(const ProtobufCMessage *m, const char *where) {
  int n = 0;
  const char *type = m->descriptor->short_name;
  for (size_t i = 0; i < sizeof k_ignored / sizeof *k_ignored; i++) {
    if (strcmp(k_ignored[i].message, type) != 0) continue;
    const ProtobufCFieldDescriptor *f = ct_pb_field(m->descriptor, k_ignored[i].field);
    if (!f || !ct_pb_present(m, f)) continue;
    LOG_WARNING("%s%s: NVCaffe's field %s is parsed but ignored (%s)", type, where,
                k_ignored[i].field, k_ignored[i].why);
    n++;
  }
  return n;
}

int ct_caffe_log_ignored_fields(const ProtobufCMessage *msg) {
  int n = log_ignored_of(msg, "");
  if (msg->descriptor == &caffe__net_parameter__descriptor) {
    const Caffe__NetParameter *net = (const Caffe__NetParameter *)msg;
    for (size_t i = 0; i < net->n_layer; i++) {
      char where[160];
      snprintf(where, sizeof where, " (layer '%s')", net->layer[i]->name ? net->layer[i]->name : "");
      n += log_ignored_of(&net->layer[i]->base, where);
    }
  }
  return n;
}
