/* cortado compute_image_mean DB [OUTPUT]: the mean image of a database. */
#include "cli/cli.h"
#include "core/log.h"
#include "data/db.h"
#include "tools/image_mean.h"
#include "tools/tools_common.h"

static const ct_flag_spec compute_image_mean_flags[] = {
    {"backend", CT_FLAG_STRING, "lmdb",
     "The database kind to read. Left out, a folder holding a LevelDB is read as one.",
     .choices = "lmdb|leveldb"},
};

/* --backend when given, else what the folder holds (lmdb when unclear). */
static ct_status db_backend(const ct_cli_args *args, const char *path, ct_db_backend *out,
                           ct_error *err) {
  if (!ct_cli_is_set(args, "backend")) {
    *out = ct_tools_detect_backend(path, CT_DB_LMDB);
    return CT_OK;
  }
  return ct_db_parse_backend(ct_cli_string(args, "backend"), out, err);
}

static int run_compute_image_mean(const ct_cli_args *args) {
  ct_error err;
  ct_db_backend backend;
  const char *db_path = args->positional[0];
  if (db_backend(args, db_path, &backend, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  ct_image_mean mean;
  if (ct_compute_image_mean(db_path, backend, &mean, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  int rc = CT_EXIT_OK;
  if (args->n_positional == 2) {
    LOG_INFO("Write to %s", args->positional[1]);
    if (ct_image_mean_write_binaryproto(&mean, args->positional[1], &err) != CT_OK)
      rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  }
  if (rc == CT_EXIT_OK) {
    LOG_INFO("Number of channels: %d", mean.channels);
    for (int c = 0; c < mean.channels; c++)
      LOG_INFO("mean_value channel [%d]: %g", c, ct_image_mean_channel(&mean, c));
  }
  ct_image_mean_free(&mean);
  return rc;
}

const ct_cli_command ct_cli_cmd_compute_image_mean = {
    .name = "compute_image_mean",
    .summary = "Compute the mean image of a database and save it as a binaryproto.",
    .usage = "cortado compute_image_mean [--backend=lmdb|leveldb] DB [OUTPUT.binaryproto]",
    .description =
        "Averages every record (raw, float or encoded; all of one shape) into a BlobProto "
        "1xCxHxW for transform_param.mean_file, and logs each channel's mean value (for "
        "mean_value). Without OUTPUT only the channel means are logged.",
    .flags = compute_image_mean_flags,
    .n_flags = sizeof compute_image_mean_flags / sizeof compute_image_mean_flags[0],
    .min_args = 1,
    .max_args = 2,
    .run = run_compute_image_mean,
};
