/* cortado make_synthetic_db DB --num=N --shape=C,H,W --labels=K: a database
 * of made-up images for benchmarks and tests. */
#include "cli/cli.h"
#include "data/db.h"
#include "tools/synthetic_db.h"

static const ct_flag_spec make_synthetic_db_flags[] = {
    {"num", CT_FLAG_INT64, "1000", "How many records to write.", .min = 1, .max = 99999999},
    {"shape", CT_FLAG_STRING, "3,32,32", "Shape C,H,W of every image.", .meta = "C,H,W"},
    {"labels", CT_FLAG_INT, "10", "Labels are drawn uniformly from 0 to K-1.", .min = 1,
     .max = 2147483647, .meta = "K"},
    {"encode_type", CT_FLAG_STRING, "raw",
     "How records store images: raw pixels, or encoded jpg or png.", .choices = "raw|jpg|png"},
    {"quality", CT_FLAG_INT, "90", "JPEG quality of --encode_type=jpg.", .min = 1, .max = 100},
    {"seed", CT_FLAG_INT64, "1", "Seed of the generator: a seed always gives the same database.",
     .min = 0, .max = INT64_MAX},
    {"backend", CT_FLAG_STRING, "lmdb", "The database kind to write.", .choices = "lmdb|leveldb"},
};

static int run_make_synthetic_db(const ct_cli_args *args) {
  ct_error err;
  ct_synthetic_options opt = {0};
  if (ct_db_parse_backend(ct_cli_string(args, "backend"), &opt.backend, &err) != CT_OK ||
      ct_synthetic_parse_format(ct_cli_string(args, "encode_type"), &opt.format, &err) != CT_OK ||
      ct_parse_shape_chw(ct_cli_string(args, "shape"), "--shape", &opt.channels, &opt.height,
                         &opt.width, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  opt.num = (size_t)ct_cli_int64(args, "num");
  opt.labels = ct_cli_int(args, "labels");
  opt.quality = ct_cli_int(args, "quality");
  opt.seed = (uint64_t)ct_cli_int64(args, "seed");
  if (ct_make_synthetic_db(args->positional[0], &opt, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_make_synthetic_db = {
    .name = "make_synthetic_db",
    .summary = "Write a database of random structured images, for benchmarks and tests.",
    .usage = "cortado make_synthetic_db DB [--num=N] [--shape=C,H,W] [--labels=K] "
             "[--encode_type=raw|jpg|png] [flags]",
    .description =
        "Each image is smooth noise plus a stripe pattern that depends on its label, so "
        "compressed sizes are realistic and a net can learn the labels. Keys are %08d. "
        "Encoded images take 1 or 3 channels. Cortado's addition.",
    .flags = make_synthetic_db_flags,
    .n_flags = sizeof make_synthetic_db_flags / sizeof make_synthetic_db_flags[0],
    .min_args = 1,
    .max_args = 1,
    .run = run_make_synthetic_db,
};
