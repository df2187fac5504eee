/* What a data layer's source holds, read without building the layer. */
#ifndef CT_DATA_SOURCE_SHAPE_H
#define CT_DATA_SOURCE_SHAPE_H

#include <stdbool.h>

#include "caffe.pb-c.h"

/* The C,H,W of one sample of a Data layer (its DB's first record) or an
 * ImageData layer (its list's first image), before cropping or resizing.
 * False when the source is missing or unreadable, or for other types. */
bool ct_data_source_sample_shape(const Caffe__LayerParameter *l, int chw[3]);

#endif
