#include "proto/catalog.h"

#include <string.h>

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
    {"LayerParameter", "forward_type", OF(NVCAFFE)},
    {"LayerParameter", "backward_type", OF(NVCAFFE)},
    {"LayerParameter", "forward_math", OF(NVCAFFE)},
    {"LayerParameter", "backward_math", OF(NVCAFFE)},
    {"LayerParameter", "debug", OF(NVCAFFE)},
    {"LayerParameter", "cudnn_math_override", OF(NVCAFFE)},
    {"NetParameter", "default_forward_type", OF(NVCAFFE)},
    {"NetParameter", "default_backward_type", OF(NVCAFFE)},
    {"NetParameter", "default_forward_math", OF(NVCAFFE)},
    {"NetParameter", "default_backward_math", OF(NVCAFFE)},
    {"NetParameter", "global_grad_scale", OF(NVCAFFE)},
    {"NetParameter", "default_conv_algos_override", OF(NVCAFFE)},
    {"NetParameter", "reduce_buckets", OF(NVCAFFE)},
    {"NetParameter", "default_cudnn_math_override", OF(NVCAFFE)},
    {"BatchNormParameter", "scale_bias", OF(NVCAFFE)},
    {"BatchNormParameter", "scale_filler", OF(NVCAFFE)},
    {"BatchNormParameter", "bias_filler", OF(NVCAFFE)},
    {"ConvolutionParameter", "cudnn_convolution_algo_seeker", OF(NVCAFFE)},
    {"ConvolutionParameter", "conv_algos_override", OF(NVCAFFE)},
    {"DataParameter", "threads", OF(NVCAFFE)},
    {"DataParameter", "parser_threads", OF(NVCAFFE)},
    {"DataParameter", "cache", OF(NVCAFFE)},
    {"DataParameter", "shuffle", OF(NVCAFFE)},
    {"DropoutParameter", "engine", OF(NVCAFFE)},
    {"DropoutParameter", "random_seed", OF(NVCAFFE)},
    {"ELUParameter", "lambda", OF(NVCAFFE)},
    {"TransformationParameter", "img_rand_resize_lower", OF(NVCAFFE)},
    {"TransformationParameter", "img_rand_resize_upper", OF(NVCAFFE)},
    {"TransformationParameter", "resize_to_square", OF(NVCAFFE)},
    {"TransformationParameter", "use_gpu_transform", OF(NVCAFFE)},
    {"TransformationParameter", "random_seed", OF(NVCAFFE)},
    {"SolverParameter", "rampup_interval", OF(NVCAFFE)},
    {"SolverParameter", "rampup_lr", OF(NVCAFFE)},
    {"SolverParameter", "min_lr", OF(NVCAFFE)},
    {"SolverParameter", "momentum_policy", OF(NVCAFFE)},
    {"SolverParameter", "max_momentum", OF(NVCAFFE)},
    {"SolverParameter", "momentum_power", OF(NVCAFFE)},
    {"SolverParameter", "local_lr_auto", OF(NVCAFFE)},
    {"SolverParameter", "local_gw_ratio", OF(NVCAFFE)},
    {"SolverParameter", "solver_data_type", OF(NVCAFFE)},
    {"SolverParameter", "store_blobs_in_old_format", OF(NVCAFFE)},
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
