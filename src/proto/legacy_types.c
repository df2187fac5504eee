#include "proto/legacy_types.h"

#include <stddef.h>
#include <string.h>

typedef Caffe__V1LayerParameter__LayerType v1_type;

#define V1(NAME) CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__##NAME

static const struct {
  v1_type type;
  const char *v2_name;
} k_v1_names[] = {
    {V1(NONE), ""},
    {V1(ABSVAL), "AbsVal"},
    {V1(ACCURACY), "Accuracy"},
    {V1(ARGMAX), "ArgMax"},
    {V1(BNLL), "BNLL"},
    {V1(CONCAT), "Concat"},
    {V1(CONTRASTIVE_LOSS), "ContrastiveLoss"},
    {V1(CONVOLUTION), "Convolution"},
    {V1(DATA), "Data"},
    {V1(DECONVOLUTION), "Deconvolution"},
    {V1(DROPOUT), "Dropout"},
    {V1(DUMMY_DATA), "DummyData"},
    {V1(EUCLIDEAN_LOSS), "EuclideanLoss"},
    {V1(ELTWISE), "Eltwise"},
    {V1(EXP), "Exp"},
    {V1(FLATTEN), "Flatten"},
    {V1(HDF5_DATA), "HDF5Data"},
    {V1(HDF5_OUTPUT), "HDF5Output"},
    {V1(HINGE_LOSS), "HingeLoss"},
    {V1(IM2COL), "Im2col"},
    {V1(IMAGE_DATA), "ImageData"},
    {V1(INFOGAIN_LOSS), "InfogainLoss"},
    {V1(INNER_PRODUCT), "InnerProduct"},
    {V1(LRN), "LRN"},
    {V1(MEMORY_DATA), "MemoryData"},
    {V1(MULTINOMIAL_LOGISTIC_LOSS), "MultinomialLogisticLoss"},
    {V1(MVN), "MVN"},
    {V1(POOLING), "Pooling"},
    {V1(POWER), "Power"},
    {V1(RELU), "ReLU"},
    {V1(SIGMOID), "Sigmoid"},
    {V1(SIGMOID_CROSS_ENTROPY_LOSS), "SigmoidCrossEntropyLoss"},
    {V1(SILENCE), "Silence"},
    {V1(SOFTMAX), "Softmax"},
    {V1(SOFTMAX_LOSS), "SoftmaxWithLoss"},
    {V1(SPLIT), "Split"},
    {V1(SLICE), "Slice"},
    {V1(TANH), "TanH"},
    {V1(WINDOW_DATA), "WindowData"},
    {V1(THRESHOLD), "Threshold"},
};

/* V0 only ever had these types; anything else was a fatal error in Caffe. */
static const struct {
  const char *v0_name;
  v1_type type;
} k_v0_types[] = {
    {"accuracy", V1(ACCURACY)},
    {"bnll", V1(BNLL)},
    {"concat", V1(CONCAT)},
    {"conv", V1(CONVOLUTION)},
    {"data", V1(DATA)},
    {"dropout", V1(DROPOUT)},
    {"euclidean_loss", V1(EUCLIDEAN_LOSS)},
    {"flatten", V1(FLATTEN)},
    {"hdf5_data", V1(HDF5_DATA)},
    {"hdf5_output", V1(HDF5_OUTPUT)},
    {"im2col", V1(IM2COL)},
    {"images", V1(IMAGE_DATA)},
    {"infogain_loss", V1(INFOGAIN_LOSS)},
    {"innerproduct", V1(INNER_PRODUCT)},
    {"lrn", V1(LRN)},
    {"multinomial_logistic_loss", V1(MULTINOMIAL_LOGISTIC_LOSS)},
    {"pool", V1(POOLING)},
    {"relu", V1(RELU)},
    {"sigmoid", V1(SIGMOID)},
    {"softmax", V1(SOFTMAX)},
    {"softmax_loss", V1(SOFTMAX_LOSS)},
    {"split", V1(SPLIT)},
    {"tanh", V1(TANH)},
    {"window_data", V1(WINDOW_DATA)},
};

const char *ct_v1_layer_type_name(v1_type type) {
  for (size_t i = 0; i < sizeof k_v1_names / sizeof k_v1_names[0]; i++)
    if (k_v1_names[i].type == type) return k_v1_names[i].v2_name;
  return NULL;
}

bool ct_v0_layer_type_to_v1(const char *v0_type, v1_type *out) {
  for (size_t i = 0; v0_type && i < sizeof k_v0_types / sizeof k_v0_types[0]; i++) {
    if (strcmp(k_v0_types[i].v0_name, v0_type) == 0) {
      *out = k_v0_types[i].type;
      return true;
    }
  }
  return false;
}
