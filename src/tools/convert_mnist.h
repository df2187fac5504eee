/* MNIST-format idx files to a database of Caffe Datums, as Caffe's
 * examples/mnist/convert_mnist_data does (`cortado convert_mnist_data`).
 *
 * The input is a pair of idx files (big-endian headers), plain or gzipped:
 *   images: magic 0x00000803 (2051), count N, rows R, cols C, then N*R*C bytes
 *   labels: magic 0x00000801 (2049), count N, then N bytes
 * Fashion-MNIST uses the same format.  Record i gets the key "%08d" of i and a
 * raw Datum: channels 1, height R, width C, data the R*C pixel bytes, label
 * the label byte (0..255). */
#ifndef CT_TOOLS_CONVERT_MNIST_H
#define CT_TOOLS_CONVERT_MNIST_H

#include "core/status.h"
#include "data/db.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_MNIST_IMAGES_MAGIC 2051u
#define CT_MNIST_LABELS_MAGIC 2049u

/* Converts the idx pair (images_path, labels_path) into a new database at
 * db_path of the given back end, logging "Processed N files." every 10000
 * records and at the end.  Both files are read through zlib, so each may be
 * gzipped or not.
 *
 * Errors (nothing is left at db_path on failure, except when db_path already
 * existed, which is itself the error):
 *   CT_ERR_NOTFOUND "PATH: cannot open: No such file or directory"
 *   CT_ERR_PARSE    "PATH: not an idx image file: magic number 0x00000801
 *                    (expected 0x00000803 = 2051; this is a label file:
 *                    are the arguments swapped?)"  (and the same for labels)
 *   CT_ERR_PARSE    "PATH: truncated idx header (N bytes)"
 *   CT_ERR_PARSE    "PATH: truncated: the header promises N images of RxC
 *                    pixels but the file ends in image K"
 *   CT_ERR_PARSE    "PATH: cannot read: <zlib message>" (corrupt gzip data)
 *   CT_ERR_INVALID  "IMAGES has N images but LABELS has M labels"
 *   CT_ERR_INVALID  "PATH: bad image size RxC"
 *   the errors of ct_db_open (e.g. "DB: cannot create LMDB: the path already
 *   exists") and ct_db_put / ct_db_commit. */
ct_status ct_convert_mnist(const char *images_path, const char *labels_path, const char *db_path,
                           ct_db_backend backend, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
