/* cortado db_info DB: what a database of Datums holds. */
#include <stdio.h>

#include "cli/cli.h"
#include "data/db.h"
#include "tools/db_info.h"
#include "tools/tools_common.h"

static const ct_flag_spec db_info_flags[] = {
    {"backend", CT_FLAG_STRING, "lmdb",
     "The database kind to read. Left out, a folder holding a LevelDB is read as one.",
     .choices = "lmdb|leveldb"},
    {"max_records", CT_FLAG_INT64, "0",
     "Read only the first N records for shapes, storage and labels (0: all).", .min = 0,
     .max = INT64_MAX},
    {"max_labels", CT_FLAG_INT, "50", "Print at most this many histogram lines (0: all).",
     .min = 0, .max = 2147483647},
};

static int run_db_info(const ct_cli_args *args) {
  ct_error err;
  const char *db_path = args->positional[0];
  ct_db_backend backend = ct_tools_detect_backend(db_path, CT_DB_LMDB);
  if (ct_cli_is_set(args, "backend") &&
      ct_db_parse_backend(ct_cli_string(args, "backend"), &backend, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  if (ct_db_info_print(db_path, backend, (size_t)ct_cli_int64(args, "max_records"),
                       (size_t)ct_cli_int(args, "max_labels"), stdout, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_db_info = {
    .name = "db_info",
    .summary = "Summarize a database of Datums: records, keys, storage, shapes and labels.",
    .usage = "cortado db_info DB [--backend=lmdb|leveldb] [--max_records=N]",
    .description =
        "Prints the record count, the first and last keys, how records are stored (raw, "
        "float, jpeg, png, or invalid), each image shape with its count and a histogram of "
        "the labels. Cortado's addition.",
    .flags = db_info_flags,
    .n_flags = sizeof db_info_flags / sizeof db_info_flags[0],
    .min_args = 1,
    .max_args = 1,
    .run = run_db_info,
};
