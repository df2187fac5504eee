/* What a data layer's source holds, read without building the layer. */
#ifndef CT_DATA_SOURCE_SHAPE_H
#define CT_DATA_SOURCE_SHAPE_H

#include "caffe.pb-c.h"
#include "core/status.h"

/* The C,H,W of one sample of a Data layer (its DB's first record) or an
 * ImageData layer (its list's first image), before cropping or resizing.
 * Errors say why not, naming the source: the reader's message for a missing
 * or unreadable source ("PATH: cannot open: No such file or directory"),
 * CT_ERR_INVALID "PATH: the database is empty", CT_ERR_UNSUPPORTED for a
 * layer without a source field ("the layer has no data_param.source") or of
 * another type ("Cortado does not read a HDF5Data layer's source ahead"). */
ct_status ct_data_source_sample_shape(const Caffe__LayerParameter *l, int chw[3], ct_error *err);

#endif
