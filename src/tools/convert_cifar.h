/* CIFAR-10 binary batches to databases of Caffe Datums, as Caffe's
 * examples/cifar10/convert_cifar_data does (`cortado convert_cifar_data`).
 *
 * Input: INPUT/data_batch_1.bin .. data_batch_5.bin (training) and
 * INPUT/test_batch.bin, each a run of 3073-byte records: one label byte, then
 * 3x32x32 pixel bytes as the R, G and B planes.  Output:
 * OUTPUT/cifar10_train_<backend> (the five batches in order) and
 * OUTPUT/cifar10_test_<backend>, with <backend> "lmdb" or "leveldb".
 *
 * Records keep Caffe's layout: a raw Datum 3x32x32 whose data is the 3072
 * bytes as the file has them (so the planes stay in R, G, B order, unlike
 * convert_imageset's BGR), label the label byte, key "%05d" of the record's
 * index in its database.  (Caffe numbers training records batch*10000 + i;
 * with CIFAR-10's 10000-record batches that is the same index.) */
#ifndef CT_TOOLS_CONVERT_CIFAR_H
#define CT_TOOLS_CONVERT_CIFAR_H

#include "core/status.h"
#include "data/db.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_CIFAR_SIDE 32
#define CT_CIFAR_IMAGE_BYTES (3 * CT_CIFAR_SIDE * CT_CIFAR_SIDE)
#define CT_CIFAR_RECORD_BYTES (1 + CT_CIFAR_IMAGE_BYTES)
#define CT_CIFAR_TRAIN_BATCHES 5

/* Converts the six batch files of input_folder into the two databases under
 * output_folder (which must exist), logging progress.  Every input file is
 * checked (present, a whole number of records) and both output paths are
 * checked to be free before anything is written.
 *
 * Errors (a database this call created is removed again on failure):
 *   CT_ERR_NOTFOUND "INPUT/data_batch_3.bin: cannot open: No such file or directory"
 *   CT_ERR_PARSE    "INPUT/test_batch.bin: 3000 bytes is not a whole number of
 *                    3073-byte records (1 label byte + 3x32x32 pixels)"
 *   CT_ERR_INVALID  "OUTPUT/cifar10_train_lmdb: the path already exists"
 *   CT_ERR_IO       "PATH: read failed: <reason>"
 *   the errors of ct_db_open, ct_db_put and ct_db_commit. */
ct_status ct_convert_cifar(const char *input_folder, const char *output_folder,
                           ct_db_backend backend, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
