/* Loading net and solver definitions as Caffe's tools do: text prototxt,
 * upgraded in memory from old formats; and replacing data layers by
 * DummyData for `--dummy_data`. */
#ifndef CT_NET_NET_LOAD_H
#define CT_NET_NET_LOAD_H

#include "caffe.pb-c.h"
#include "core/status.h"

/* Reads a NetParameter prototxt and upgrades it (V0/V1 layers, net inputs,
 * BatchNorm param specs) in memory.  *out is freed with
 * protobuf_c_message_free_unpacked.  Errors name the file (and line/column
 * for parse errors). */
ct_status ct_net_param_read(const char *path, Caffe__NetParameter **out, ct_error *err);
/* The same for a SolverParameter (solver_type enum -> type string). */
ct_status ct_solver_param_read(const char *path, Caffe__SolverParameter **out, ct_error *err);

/* Replaces each data layer (Data, ImageData, HDF5Data, MemoryData,
 * WindowData) of net by a DummyData layer with the same tops and the shapes
 * the layer would produce: batch_size from its parameters, height/width from
 * crop_size or new_height/new_width, channels and size from its source when
 * the source can be read, else from dummy_chw (C,H,W, may be NULL).  Fails
 * with CT_ERR_INVALID naming the layer when a shape cannot be found. */
ct_status ct_net_param_replace_data_layers(Caffe__NetParameter *net, const int *dummy_chw,
                                           ct_error *err);

#endif
