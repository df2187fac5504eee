/* Loading net and solver definitions as Caffe's tools do: text prototxt,
 * upgraded in memory from old formats (net_load.c); and replacing data
 * layers by DummyData for `--dummy_data` (net_dummy.c). */
#ifndef CT_NET_NET_LOAD_H
#define CT_NET_NET_LOAD_H

#include "caffe.pb-c.h"
#include "core/status.h"

/* Reads a NetParameter prototxt, with the source positions of its messages
 * (proto/srcpos.h), and upgrades it (V0/V1 layers, net inputs, BatchNorm
 * param specs) in memory.  *out is freed with
 * protobuf_c_message_free_unpacked.  Errors name the file (and line/column
 * for parse errors); several unknown fields are each logged (ERROR), and a
 * file that reads as a solver says so ("PATH looks like a solver (a
 * SolverParameter), not a net: ..."). */
ct_status ct_net_param_read(const char *path, Caffe__NetParameter **out, ct_error *err);
/* The same for a SolverParameter (solver_type enum -> type string, inline
 * nets upgraded); a file that reads as a net says so. */
ct_status ct_solver_param_read(const char *path, Caffe__SolverParameter **out, ct_error *err);

/* Replaces each data layer (Data, ImageData, HDF5Data, MemoryData,
 * WindowData) of net by a DummyData layer with the same tops and the shapes
 * the layer would produce (net_dummy.c): batch_size from its parameters;
 * the sample's C,H,W from dummy_chw when given (the log says so when the
 * layer's own shape differs), else height/width from crop_size,
 * new_height/new_width or MemoryData's dims, channels from force_color /
 * force_gray, is_color, MemoryData's channels or the count of mean_values,
 * and what is still missing from the source (its first record or image) or
 * the mean_file; 3 channels when only those are missing (logged).  Images
 * are uniform in [0, 1); labels uniform over the classes of the
 * SoftmaxWithLoss, Accuracy, ... that reads them (the num_output of the
 * InnerProduct or Convolution below its prediction), so that no net learns
 * them and its gradients stay as large as in real training.  Fails with
 * CT_ERR_INVALID naming the layer, and its source and why that cannot be
 * read, when a shape cannot be found. */
ct_status ct_net_param_replace_data_layers(Caffe__NetParameter *net, const int *dummy_chw,
                                           ct_error *err);

#endif
