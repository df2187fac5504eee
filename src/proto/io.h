/* Binary Caffe files (.caffemodel, .solverstate, .binaryproto) on disk.
 *
 * Reads take a protobuf-c descriptor, so one function serves every message
 * type: caffe__net_parameter__descriptor, caffe__solver_state__descriptor,
 * caffe__blob_proto__descriptor, ...  Writes are atomic (see
 * ct_file_write_atomic). */
#ifndef CT_PROTO_IO_H
#define CT_PROTO_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "caffe.pb-c.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest binary proto Caffe reads (INT_MAX bytes, just under 2 GiB). */
#define CT_PROTO_MAX_BYTES ((size_t)2147483647)

/* Reads the binary message of type `desc` stored in the file at `path`.
 *
 * On success *out is the decoded message; free it with
 * protobuf_c_message_free_unpacked(*out, NULL).  Errors (*out is NULL; each
 * message starts with the path; TYPE is desc->name, e.g. caffe.NetParameter):
 *   CT_ERR_NOTFOUND  "PATH: cannot open: No such file or directory"
 *   CT_ERR_IO        "PATH: cannot open: <reason>" / "PATH: is a directory" /
 *                    "PATH: read failed: <reason>"
 *   CT_ERR_INVALID   "PATH: file too large (N bytes; the limit is 2147483647 bytes)"
 *   CT_ERR_PARSE     "PATH: file is empty, expected a binary TYPE"
 *   CT_ERR_PARSE     "PATH: not a valid binary TYPE (truncated or corrupt, N bytes)"
 *   CT_ERR_PARSE     "PATH: no TYPE fields in N bytes (a text prototxt, or
 *                    another kind of file?)"  -- bytes that happen to decode,
 *                    but only into fields TYPE does not have. */
ct_status ct_proto_read_binary(const ProtobufCMessageDescriptor *desc, const char *path,
                               ProtobufCMessage **out, ct_error *err);

/* Writes `msg` in binary form to `path`, atomically: a reader sees either the
 * previous file or the complete new one.  Source positions of text-parsed
 * messages (proto/srcpos.h) are left out.  Errors: CT_ERR_IO from
 * ct_file_write_atomic ("PATH: <step> failed: <reason>"), CT_ERR_NOMEM. */
ct_status ct_proto_write_binary(const ProtobufCMessage *msg, const char *path, ct_error *err);

/* The shape Caffe gives a stored blob: the legacy 4-D num x channels x height
 * x width when any of those four fields is set (missing ones count as 0), else
 * the dims of `shape` (no shape at all is a 0-axis scalar).
 *
 * Writes the first min(axes, max_dims) dims into dims[] and returns the
 * number of axes; a return value above max_dims means dims[] was too short. */
int ct_blob_proto_shape(const Caffe__BlobProto *b, int64_t *dims, int max_dims);

/* Whether a stored blob may be loaded into a blob of shape dims[0..n_dims),
 * by Caffe's rule: a legacy 4-D blob matches when the target, padded on the
 * left with 1s to 4 axes, equals num x channels x height x width (so a legacy
 * 1x1x1x20 bias loads into a [20] blob); otherwise the shapes must be equal. */
bool ct_blob_proto_shape_matches(const Caffe__BlobProto *b, const int64_t *dims, int n_dims);

/* Prints one line per layer of the binary NetParameter at `caffemodel_path`
 * (current `layer` entries, or legacy V1 `layers` with their V2 type names):
 *
 *   conv1  Convolution  20x1x5x5 20
 *
 * name, type, then each blob's shape (dims joined by 'x', blobs by spaces,
 * "scalar" for a 0-axis blob); fields are separated by two spaces and
 * layers without blobs end after the type.  Errors: those of
 * ct_proto_read_binary; CT_ERR_IO when writing to `out` fails. */
ct_status ct_model_info_print(const char *caffemodel_path, FILE *out, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
