/* cortado convert_imageset [flags] ROOTFOLDER/ LISTFILE DB_NAME: a list of
 * images to a database. */
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/log.h"
#include "data/db.h"
#include "tools/convert_imageset.h"

static const ct_flag_spec convert_imageset_flags[] = {
    {"gray", CT_FLAG_BOOL, "false", "Decode images as 1-channel gray instead of 3-channel BGR."},
    {"shuffle", CT_FLAG_BOOL, "false", "Shuffle the list (images with their labels) first."},
    {"seed", CT_FLAG_INT64, "-1",
     "Seed of the --shuffle order; -1 takes one from the clock, as Caffe always does.",
     .min = -1, .max = INT64_MAX},
    {"backend", CT_FLAG_STRING, "lmdb", "The database kind to write.", .choices = "lmdb|leveldb"},
    {"resize_width", CT_FLAG_INT, "0",
     "Width images are resized to (with --resize_height; 0: no resize).", .min = 0, .max = 65535},
    {"resize_height", CT_FLAG_INT, "0",
     "Height images are resized to (with --resize_width; 0: no resize).", .min = 0,
     .max = 65535},
    {"check_size", CT_FLAG_BOOL, "false",
     "Fail when an image's size differs from the first image's."},
    {"encoded", CT_FLAG_BOOL, "false",
     "Store compressed images (the file's bytes when no change is needed) instead of pixels."},
    {"encode_type", CT_FLAG_STRING, "",
     "Format of stored compressed images: jpg, jpeg or png; empty: each file's own. Implies "
     "--encoded.",
     .meta = "jpg|png"},
};

static int run_convert_imageset(const ct_cli_args *args) {
  ct_error err;
  ct_imageset_options opt = {0};
  if (ct_db_parse_backend(ct_cli_string(args, "backend"), &opt.backend, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  ct_image_format format;
  opt.encode_type = ct_cli_string(args, "encode_type");
  if (ct_imageset_parse_encode_type(opt.encode_type, &format, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  opt.gray = ct_cli_bool(args, "gray");
  opt.shuffle = ct_cli_bool(args, "shuffle");
  int64_t seed = ct_cli_int64(args, "seed");
  if (seed < 0) seed = (int64_t)((uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid());
  opt.seed = (uint64_t)seed;
  if (opt.shuffle) LOG_INFO("Shuffle seed: %lld", (long long)opt.seed);
  opt.resize_width = ct_cli_int(args, "resize_width");
  opt.resize_height = ct_cli_int(args, "resize_height");
  opt.check_size = ct_cli_bool(args, "check_size");
  opt.encoded = ct_cli_bool(args, "encoded");
  if (ct_convert_imageset(args->positional[0], args->positional[1], args->positional[2], &opt,
                          NULL, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_convert_imageset = {
    .name = "convert_imageset",
    .summary = "Convert a list of JPEG/PNG images with labels to LMDB/LevelDB.",
    .usage = "cortado convert_imageset [flags] ROOTFOLDER/ LISTFILE DB_NAME",
    .description =
        "LISTFILE has one 'path/to/image.jpg LABEL' a line; each path is read under "
        "ROOTFOLDER. Record i gets the key %08d_<path>. Images are stored as BGR (or gray) "
        "pixels, or compressed with --encoded. An image that cannot be read is skipped with "
        "a warning, as in Caffe.",
    .flags = convert_imageset_flags,
    .n_flags = sizeof convert_imageset_flags / sizeof convert_imageset_flags[0],
    .min_args = 3,
    .max_args = 3,
    .run = run_convert_imageset,
};
