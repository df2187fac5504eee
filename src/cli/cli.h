/* The `cortado` command: one entry per command in a const table (main.c),
 * one cmd_<name>.c file per command holding its flag table and handler.
 *
 * Adding a command: write src/cli/cmd_<name>.c defining
 * `const ct_cli_command ct_cli_cmd_<name>`, declare it below and add it to
 * the table in main.c. */
#ifndef CT_CLI_CLI_H
#define CT_CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/flags.h"

/* Exit statuses of the cortado command. */
enum {
  CT_EXIT_OK = 0,      /* success, and only success */
  CT_EXIT_FAILURE = 1, /* the command ran and failed (bad file, no device, ...) */
  CT_EXIT_USAGE = 2    /* the command line itself is wrong */
};

typedef struct ct_cli_command {
  const char *name;        /* "train" */
  const char *summary;     /* one line for the command list */
  const char *usage;       /* "cortado train --solver=FILE [flags]" */
  const char *description; /* a short paragraph for `cortado help <name>`, or NULL */
  const ct_flag_spec *flags;
  size_t n_flags;
  int min_args, max_args;  /* how many positional arguments it takes */
  bool host_threads;       /* computes on the host's thread pools: main() sets them up
                              first (ct_cli_setup_threads) */
  /* Runs the command; returns a CT_EXIT_* status.  Reports its own errors
   * (ct_cli_error).  The global flags are already applied. */
  int (*run)(const ct_cli_args *args);
} ct_cli_command;

/* Flags shared by train, test and time, declared once. */
#define CT_CLI_FLAG_MODEL \
  {"model", CT_FLAG_STRING, NULL, "The network definition: a NetParameter prototxt file.", \
   .meta = "FILE"}
#define CT_CLI_FLAG_LEVEL                                                                \
  {"level", CT_FLAG_INT, "0",                                                            \
   "Network level, matched against the min_level/max_level of the net's include and " \
   "exclude rules."}
#define CT_CLI_FLAG_STAGE                                                              \
  {"stage", CT_FLAG_STRING, NULL,                                                      \
   "Network stages, separated by ','; matched against the stage/not_stage of the " \
   "net's include and exclude rules."}
#define CT_CLI_FLAG_ITERATIONS                                                        \
  {"iterations", CT_FLAG_INT, "50", "How many iterations (batches) to run.", .min = 1, \
   .max = 2147483647}

#define CT_CLI_FLAG_MATH                                                                  \
  {"math", CT_FLAG_STRING, "tf32",                                                        \
   "GPU math for convolution and matrix products: tf32 (tensor cores, the default where " \
   "the GPU has them, as cuDNN and PyTorch do) or fp32 (strict single precision). "      \
   "--precision says the same and more.",                                                 \
   .choices = "tf32|fp32"}
/* --precision (train, test, time): see ct_cli_precision. */
#define CT_CLI_FLAG_PRECISION                                                                \
  {"precision", CT_FLAG_STRING, "auto",                                                      \
   "What layers compute in: fp32 (strict), tf32 (float32 values, TF32 tensor cores on a "   \
   "GPU), bf16 or fp16 (mixed precision: 16-bit activations and gradients where a layer "    \
   "has a 16-bit path, float32 master weights, solver state, losses, softmax and "          \
   "BatchNorm statistics). auto: as the net's default_forward_type says (NVCaffe's "       \
   "field), else tf32 (or --math). bf16 on the CPU needs AVX512_BF16 or AMX; fp16 is GPU " \
   "only.",                                                                                   \
   .choices = "auto|fp32|tf32|bf16|fp16"}

/* --cpu (train, test, time): the CPU whatever --gpu's default or the solver's
 * solver_mode say; the same as --gpu=none (see ct_cli_wants_cpu). */
#define CT_CLI_FLAG_CPU                                                                    \
  {"cpu", CT_FLAG_BOOL, "false",                                                           \
   "Run on the CPU, whatever the solver's solver_mode says (the same as --gpu=none). "     \
   "Caffe's example solvers say solver_mode: GPU; this runs them on a machine without one."}
/* --gpu of test and time: one device. */
#define CT_CLI_FLAG_GPU_ONE                                                                \
  {"gpu", CT_FLAG_GPU_LIST, NULL,                                                          \
   "Device to run on: an id, or 'all' (only the first device is used). Left out, or "     \
   "'none': the CPU."}

/* The shard flags of train and time (ct_cli_shard_opts reads them). */
#define CT_CLI_FLAGS_SHARDS                                                                    \
  {"num_shards", CT_FLAG_INT, "1",                                                             \
   "Shards (processes, on one or many machines) that run together without MPI, meeting "       \
   "through --file_store_path or --redis_host. train: each shard trains on its GPUs (--gpu, "  \
   "the same count on every shard) or as one CPU worker; --pipeline: each a stage.",           \
   .min = 1, .max = 65536},                                                                    \
  {"shard_id", CT_FLAG_INT, "0", "This process's shard: 0 to --num_shards - 1.", .min = 0,     \
   .max = 65535},                                                                              \
  {"run_id", CT_FLAG_STRING, NULL,                                                             \
   "Names the run in the rendezvous store; every shard of a run gives the same id and each "   \
   "run a new one.",                                                                           \
   .meta = "ID"},                                                                              \
  {"file_store_path", CT_FLAG_STRING, NULL,                                                    \
   "Shards meet through files in this folder, which every shard must see (e.g. on NFS).",      \
   .meta = "DIR"},                                                                             \
  {"redis_host", CT_FLAG_STRING, NULL, "Shards meet through the Redis server on this host.",   \
   .meta = "HOST"},                                                                            \
  {"redis_port", CT_FLAG_INT, "6379", "The port of --redis_host.", .min = 1, .max = 65535},    \
  {"redis_password", CT_FLAG_STRING, NULL,                                                     \
   "Password of --redis_host (AUTH); left out, the REDIS_PASSWORD environment variable, if "   \
   "set (better: a command line is visible to every user of the machine). Never written to "   \
   "logs, CSV logs or snapshots.",                                                             \
   .meta = "PASSWORD", .secret = true},                                                        \
  {"rendezvous_timeout", CT_FLAG_DOUBLE, "300",                                                \
   "Seconds a shard waits for the others to arrive before giving up, naming the missing "      \
   "ones."},                                                                                   \
  {"gloo_iface", CT_FLAG_STRING, NULL,                                                         \
   "CPU shards: the network interface whose address Gloo's TCP transport listens on "          \
   "(e.g. eth0). Left out (and no --gloo_host), the address of this machine's host name.",     \
   .meta = "IFACE"},                                                                           \
  {"gloo_host", CT_FLAG_STRING, NULL,                                                          \
   "CPU shards: the host name or address Gloo's TCP transport listens on (instead of "         \
   "--gloo_iface).",                                                                           \
   .meta = "HOST"}

/* --dummy_data and --dummy_shape (train, test, time): see ct_cli_dummy_shape. */
#define CT_CLI_FLAG_DUMMY_DATA                                                        \
  {"dummy_data", CT_FLAG_BOOL, "false",                                               \
   "Feed random values in place of the net's data layers, so that no data set is " \
   "needed."}
#define CT_CLI_FLAG_DUMMY_SHAPE                                                        \
  {"dummy_shape", CT_FLAG_STRING, NULL,                                                \
   "Shape C,H,W of one dummy sample for --dummy_data; empty: the shape the data layer " \
   "declares.",                                                                        \
   .meta = "C,H,W"}

/* --trace and --trace_iters (train, time): see ct_cli_trace_start. */
#define CT_CLI_FLAG_TRACE                                                                    \
  {"trace", CT_FLAG_STRING, NULL,                                                            \
   "Write a trace of the run's iterations to FILE: Chrome trace event JSON, which "          \
   "ui.perfetto.dev and chrome://tracing open (a process per rank; tracks for compute, "     \
   "communication and data threads, and on GPUs one per CUDA stream with device times; an " \
   "event per layer forward and backward, update, all-reduce bucket, data wait, test and "  \
   "snapshot).",                                                                             \
   .meta = "FILE"}
#define CT_CLI_FLAG_TRACE_ITERS                                                             \
  {"trace_iters", CT_FLAG_STRING, NULL,                                                     \
   "With --trace: only iterations FIRST to LAST (inclusive, counted as the log's "         \
   "'Iteration N' lines count them); left out, every iteration.",                          \
   .meta = "FIRST:LAST"}

extern const ct_cli_command ct_cli_cmd_train;
extern const ct_cli_command ct_cli_cmd_test;
extern const ct_cli_command ct_cli_cmd_time;
extern const ct_cli_command ct_cli_cmd_resnet50_trainer;
extern const ct_cli_command ct_cli_cmd_device_query;
extern const ct_cli_command ct_cli_cmd_model_info;
extern const ct_cli_command ct_cli_cmd_upgrade_net_proto_text;
extern const ct_cli_command ct_cli_cmd_upgrade_solver_proto_text;
extern const ct_cli_command ct_cli_cmd_convert_mnist_data;
extern const ct_cli_command ct_cli_cmd_convert_cifar_data;
extern const ct_cli_command ct_cli_cmd_convert_imageset;
extern const ct_cli_command ct_cli_cmd_compute_image_mean;
extern const ct_cli_command ct_cli_cmd_db_info;
extern const ct_cli_command ct_cli_cmd_make_synthetic_db;
extern const ct_cli_command ct_cli_cmd_plot;
extern const ct_cli_command ct_cli_cmd_help;

/* The command table, in the order `cortado --help` lists it. */
const ct_cli_command *const *ct_cli_commands(size_t *n);
/* The command called name, or NULL. */
const ct_cli_command *ct_cli_find_command(const char *name);

/* Turns a parsed --gpu value into device ids: `all` becomes every visible
 * device, and every id is checked against the devices present.  An empty
 * request (the CPU) stays empty.  Fails with ct_gpu_check_device's message
 * ("no CUDA device: ...", naming the cause) when a device is missing. */
ct_status ct_cli_resolve_gpus(const ct_gpu_list *requested, ct_gpu_list *out, ct_error *err);

/* Prints "cortado: error: <message>" to stderr and returns exit_code, so that
 * a handler can `return ct_cli_error(CT_EXIT_FAILURE, "...")`. */
int ct_cli_error(int exit_code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reports "unknown command 'trian' (did you mean 'train'?)"; returns
 * CT_EXIT_USAGE. */
int ct_cli_unknown_command(const char *name);

/* The standard failure of a handler whose work is not written yet. */
int ct_cli_not_implemented(const ct_cli_args *args);

/* `cortado --help`: the command list with summaries. */
void ct_cli_print_overview(FILE *out);
/* `cortado help <cmd>`: usage, description, the command's flags and the
 * global flags. */
void ct_cli_print_command_help(const ct_cli_command *cmd, FILE *out);

#endif
