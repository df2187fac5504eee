/* cortado convert_mnist_data IMAGES LABELS DB: MNIST idx files to a database. */
#include "cli/cli.h"
#include "data/db.h"
#include "tools/convert_mnist.h"

static const ct_flag_spec convert_mnist_flags[] = {
    {"backend", CT_FLAG_STRING, "lmdb", "The database kind to write.", .choices = "lmdb|leveldb"},
};

static int run_convert_mnist(const ct_cli_args *args) {
  ct_error err;
  ct_db_backend backend;
  if (ct_db_parse_backend(ct_cli_string(args, "backend"), &backend, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  if (ct_convert_mnist(args->positional[0], args->positional[1], args->positional[2], backend,
                       &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_convert_mnist_data = {
    .name = "convert_mnist_data",
    .summary = "Convert MNIST-format idx image and label files (plain or .gz) to LMDB/LevelDB.",
    .usage = "cortado convert_mnist_data IMAGES LABELS DB [--backend=lmdb|leveldb]",
    .description =
        "IMAGES and LABELS are idx files as MNIST and Fashion-MNIST ship them "
        "(train-images-idx3-ubyte, train-labels-idx1-ubyte), gzipped or not. DB must not "
        "exist yet. Record i gets the key %08d and a raw Datum 1xRxC with its label, as "
        "Caffe's convert_mnist_data writes.",
    .flags = convert_mnist_flags,
    .n_flags = sizeof convert_mnist_flags / sizeof convert_mnist_flags[0],
    .min_args = 3,
    .max_args = 3,
    .run = run_convert_mnist,
};
