/* cortado convert_cifar_data INPUT OUTPUT: CIFAR-10 binary batches to two
 * databases. */
#include <string.h>

#include "cli/cli.h"
#include "data/db.h"
#include "tools/convert_cifar.h"

static const ct_flag_spec convert_cifar_flags[] = {
    {"backend", CT_FLAG_STRING, "lmdb",
     "The database kind to write. Caffe's third argument DB_TYPE gives it too.",
     .choices = "lmdb|leveldb"},
};

static int run_convert_cifar(const ct_cli_args *args) {
  ct_error err;
  const char *name = ct_cli_string(args, "backend");
  if (args->n_positional == 3) { /* Caffe's form: convert_cifar_data IN OUT lmdb */
    const char *third = args->positional[2];
    if (ct_cli_is_set(args, "backend") && strcmp(third, name) != 0)
      return ct_cli_error(CT_EXIT_USAGE, "DB_TYPE '%s' contradicts --backend=%s", third, name);
    name = third;
  }
  ct_db_backend backend;
  if (ct_db_parse_backend(name, &backend, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  if (ct_convert_cifar(args->positional[0], args->positional[1], backend, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_convert_cifar_data = {
    .name = "convert_cifar_data",
    .summary = "Convert the CIFAR-10 binary batches to cifar10_{train,test}_<backend> databases.",
    .usage = "cortado convert_cifar_data INPUT_FOLDER OUTPUT_FOLDER [DB_TYPE] [--backend=lmdb|leveldb]",
    .description =
        "INPUT_FOLDER holds data_batch_1.bin .. data_batch_5.bin and test_batch.bin (1 label "
        "byte + 3x32x32 bytes per record). Writes OUTPUT_FOLDER/cifar10_train_<backend> and "
        "OUTPUT_FOLDER/cifar10_test_<backend> with keys %05d and raw 3x32x32 Datums in the "
        "files' channel order, as Caffe's convert_cifar_data does.",
    .flags = convert_cifar_flags,
    .n_flags = sizeof convert_cifar_flags / sizeof convert_cifar_flags[0],
    .min_args = 2,
    .max_args = 3,
    .run = run_convert_cifar,
};
