/* cortado resnet50_trainer: Caffe2's examples/resnet50_trainer.py as a
 * command.  The flags are that script's; the net is ResNet-50 in Caffe's form
 * (src/models/resnet.c) for the given image size, channels and labels; the
 * solver is built in memory and trained by `cortado train`'s path, with the
 * CSV log of Caffe2's experiment_util written at the end of every epoch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/train.h"
#include "parallel/launch.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/settings.h"
#include "models/resnet.h"
#include "proto/textformat.h"

static const ct_flag_spec resnet50_trainer_flags[] = {
    {"train_data", CT_FLAG_STRING, NULL,
     "The training database (required); 'null' feeds random images instead.", .meta = "DB"},
    {"test_data", CT_FLAG_STRING, NULL,
     "A test database: --test_iter batches are scored after every epoch.", .meta = "DB"},
    {"db_type", CT_FLAG_STRING, "lmdb", "The kind of both databases.", .choices = "lmdb|leveldb"},
    {"gpus", CT_FLAG_GPU_LIST, NULL, "The GPUs to train on, separated by ','."},
    {"num_gpus", CT_FLAG_INT, "0",
     "How many GPUs to train on (the first N), instead of --gpus; 0 trains on the CPU.", .min = 0,
     .max = CT_GPU_LIST_MAX},
    {"num_channels", CT_FLAG_INT, "3", "Channels of the input images.", .min = 1, .max = 4096},
    {"image_size", CT_FLAG_INT, "227",
     "Height and width the images are cropped to (at least 32; the stored images must be as "
     "large).",
     .min = 32, .max = 65536},
    {"num_labels", CT_FLAG_INT, "1000", "Classes: the outputs of the last layer.", .min = 1,
     .max = 100000000},
    {"batch_size", CT_FLAG_INT, "32",
     "Images per iteration, total over this machine's GPUs (which must divide it).", .min = 1,
     .max = 1000000},
    {"epoch_size", CT_FLAG_INT64, "1500000",
     "Images per epoch over all machines, rounded down to whole global batches.", .min = 1,
     .max = INT64_MAX},
    {"num_epochs", CT_FLAG_INT, "1000", "Epochs to train.", .min = 1, .max = 1000000},
    {"base_learning_rate", CT_FLAG_DOUBLE, "0.1",
     "Learning rate for a global batch of 256, scaled linearly with the global batch; it "
     "falls by 10x every 30 epochs (SGD, Nesterov momentum 0.9)."},
    {"weight_decay", CT_FLAG_DOUBLE, "1e-4", "Weight decay (L2)."},
    {"num_shards", CT_FLAG_INT, "1", "Machines in a distributed run.", .min = 1, .max = 1000000},
    {"shard_id", CT_FLAG_INT, "0", "This machine's index, 0 to num_shards - 1.", .min = 0,
     .max = 1000000},
    {"run_id", CT_FLAG_STRING, NULL,
     "A name unique to the run (e.g. a UUID), shared by its machines for the rendezvous."},
    {"redis_host", CT_FLAG_STRING, NULL,
     "Redis server for the rendezvous of a distributed run (else --file_store_path)."},
    {"redis_port", CT_FLAG_INT, "6379", "Port of --redis_host.", .min = 1, .max = 65535},
    {"file_store_path", CT_FLAG_STRING, "/tmp",
     "A directory all machines see, for the rendezvous when --redis_host is not given.",
     .meta = "DIR"},
    {"test_iter", CT_FLAG_INT, "100",
     "Test batches per GPU after each epoch (Caffe2 runs 100). Cortado's addition.", .min = 1,
     .max = 1000000},
    {"csv_log", CT_FLAG_STRING, ".",
     "Where the CSV log goes: a directory gets Caffe2's name "
     "resnet50_gpu<N>_b<batch>_L<labels>_lr<rate>_<time>.csv; anything else is the file. "
     "Cortado's addition.",
     .meta = "DIR|FILE"},
    {"write_net", CT_FLAG_STRING, NULL,
     "Also write the generated net as a prototxt to this file. Cortado's addition.",
     .meta = "FILE"},
    {"snapshot_prefix", CT_FLAG_STRING, NULL,
     "Snapshot the weights and solver state after every epoch under this prefix (none when "
     "empty). Cortado's addition.",
     .meta = "PREFIX"},
};

/* The run as the flags describe it, checked. */
typedef struct trainer_plan {
  ct_gpu_list gpus;       /* this machine's GPUs; n == 0: the CPU */
  int batch_per_device;   /* batch_size / GPUs (the CPU: batch_size) */
  long long global_batch; /* batch_size x num_shards */
  long long epoch_iters;  /* iterations per epoch */
  long long epoch_size;   /* epoch_iters x global_batch */
  double lr;              /* base_learning_rate x global_batch / 256 */
} trainer_plan;

/* --gpus / --num_gpus into plan->gpus.  Caffe2 takes --gpus when given. */
static ct_status pick_gpus(const ct_cli_args *args, trainer_plan *plan, ct_error *err) {
  memset(&plan->gpus, 0, sizeof plan->gpus);
  const int num_gpus = ct_cli_int(args, "num_gpus");
  if (ct_cli_is_set(args, "gpus")) {
    const ct_gpu_list *g = ct_cli_gpus(args, "gpus");
    if (g->all) return ct_cli_resolve_gpus(g, &plan->gpus, err);
    if (ct_cli_is_set(args, "num_gpus") && num_gpus != g->n)
      return ct_error_set(err, CT_ERR_INVALID,
                          "--gpus=%s names %d GPU%s but --num_gpus=%d; give one of them",
                          ct_cli_text(args, "gpus"), g->n, g->n == 1 ? "" : "s", num_gpus);
    plan->gpus = *g;
    return CT_OK;
  }
  plan->gpus.n = num_gpus;
  for (int i = 0; i < num_gpus; i++) plan->gpus.ids[i] = i;
  return CT_OK;
}

static ct_status make_plan(const ct_cli_args *args, trainer_plan *plan, ct_error *err) {
  memset(plan, 0, sizeof *plan);
  if (!ct_cli_is_set(args, "train_data") || !*ct_cli_string(args, "train_data"))
    return ct_error_set(err, CT_ERR_INVALID,
                        "--train_data=DB is required (the training database, or 'null' for random images)");
  CT_TRY(pick_gpus(args, plan, err));
  const int batch = ct_cli_int(args, "batch_size"), ndev = plan->gpus.n > 0 ? plan->gpus.n : 1;
  if (batch % ndev != 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--batch_size=%d is the total over the GPUs, and %d GPUs do not divide it",
                        batch, ndev);
  plan->batch_per_device = batch / ndev;
  const int shards = ct_cli_int(args, "num_shards"), shard_id = ct_cli_int(args, "shard_id");
  if (shard_id >= shards)
    return ct_error_set(err, CT_ERR_INVALID, "--shard_id=%d: must be below --num_shards=%d", shard_id, shards);
  if (shards > 1 && (!ct_cli_is_set(args, "run_id") || !*ct_cli_string(args, "run_id")))
    return ct_error_set(err, CT_ERR_INVALID,
                        "--num_shards=%d needs --run_id, the name the machines meet under", shards);
  plan->global_batch = (long long)batch * shards;
  const long long epoch_size = ct_cli_int64(args, "epoch_size");
  plan->epoch_iters = epoch_size / plan->global_batch;
  if (plan->epoch_iters < 1)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--epoch_size=%lld is smaller than one global batch (%lld = --batch_size x "
                        "--num_shards)",
                        epoch_size, plan->global_batch);
  if (plan->epoch_iters * ct_cli_int(args, "num_epochs") > 2147483647LL)
    return ct_error_set(err, CT_ERR_INVALID, "--num_epochs x iterations per epoch exceeds 2^31 - 1");
  plan->epoch_size = plan->epoch_iters * plan->global_batch;
  plan->lr = ct_cli_double(args, "base_learning_rate") * (double)plan->global_batch / 256.0;
  if (plan->lr <= 0 || ct_cli_double(args, "weight_decay") < 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--base_learning_rate must be positive and --weight_decay not negative");
  return CT_OK;
}

/* The net for the plan; written to --write_net when asked. */
static ct_status make_net(const ct_cli_args *args, const trainer_plan *plan, Caffe__NetParameter **out,
                          ct_error *err) {
  const bool has_test = ct_cli_is_set(args, "test_data") && *ct_cli_string(args, "test_data");
  ct_resnet_opts o = {.depth = 50,
                      .num_labels = ct_cli_int(args, "num_labels"),
                      .num_channels = ct_cli_int(args, "num_channels"),
                      .image_size = ct_cli_int(args, "image_size"),
                      .batch_size = plan->batch_per_device,
                      .test_batch_size = has_test ? plan->batch_per_device : 0,
                      .train_source = ct_cli_string(args, "train_data"),
                      .test_source = has_test ? ct_cli_string(args, "test_data") : NULL,
                      .backend = strcmp(ct_cli_string(args, "db_type"), "leveldb") == 0 ? "LEVELDB" : "LMDB",
                      .caffe2_input = true,
                      .train_accuracy = true};
  /* the launcher of worker processes wrote it already */
  if (ct_cli_is_set(args, "write_net") && !ct_setting_text(CT_LAUNCH_WORKER_ENV)) {
    char *text;
    CT_TRY(ct_resnet_prototxt(&o, &text, err));
    const char *path = ct_cli_string(args, "write_net");
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    free(text);
    if (!ok) return ct_error_set(err, CT_ERR_IO, "--write_net=%s: cannot write the file", path);
  }
  return ct_resnet_net(&o, out, err);
}

/* The solver of Caffe2's trainer: SGD with Nesterov momentum 0.9, the rate
 * falling 10x every 30 epochs, a display (and CSV row) and a test after
 * every epoch.  Takes ownership of net. */
static ct_status make_solver(const ct_cli_args *args, const trainer_plan *plan, Caffe__NetParameter *net,
                             Caffe__SolverParameter **out, ct_error *err) {
  *out = NULL;
  const bool has_test = ct_cli_is_set(args, "test_data") && *ct_cli_string(args, "test_data");
  const char *prefix = ct_cli_is_set(args, "snapshot_prefix") ? ct_cli_string(args, "snapshot_prefix") : "";
  const long long e = plan->epoch_iters;
  char text[2048];
  int n = snprintf(text, sizeof text,
                   "type: \"Nesterov\"\nbase_lr: %.9g\nlr_policy: \"step\"\ngamma: 0.1\nstepsize: %lld\n"
                   "momentum: 0.9\nweight_decay: %.9g\nmax_iter: %lld\ndisplay: %lld\naverage_loss: 1\n"
                   "solver_mode: %s\nsnapshot_after_train: false\n",
                   plan->lr, e * 30 > 2147483647LL ? 2147483647LL : e * 30,
                   ct_cli_double(args, "weight_decay"), e * ct_cli_int(args, "num_epochs"), e,
                   plan->gpus.n > 0 ? "GPU" : "CPU");
  if (has_test)
    n += snprintf(text + n, sizeof text - (size_t)n,
                  "test_iter: %d\ntest_interval: %lld\ntest_initialization: false\n",
                  ct_cli_int(args, "test_iter"), e);
  if (*prefix) snprintf(text + n, sizeof text - (size_t)n, "snapshot: %lld\nsnapshot_prefix: \"%s\"\n", e, prefix);
  ProtobufCMessage *m;
  ct_status st = ct_text_parse(&caffe__solver_parameter__descriptor, text, strlen(text), "resnet50_trainer", &m, err);
  if (st != CT_OK) {
    protobuf_c_message_free_unpacked(&net->base, NULL);
    return st;
  }
  Caffe__SolverParameter *sp = (Caffe__SolverParameter *)m;
  sp->net_param = net;
  *out = sp;
  return CT_OK;
}

/* The `cortado train` command line the run goes through.  Strings are
 * written into store (which must outlive the parsed args). */
typedef struct train_argv {
  char *argv[16];
  int argc;
  char store[16][320];
} train_argv;

static void add_arg(train_argv *a, const char *fmt, const char *value) {
  CT_ASSERT(a->argc < 16);
  snprintf(a->store[a->argc], sizeof a->store[a->argc], fmt, value);
  a->argv[a->argc] = a->store[a->argc];
  a->argc++;
}

/* Several machines: the shard flags go on to `cortado train`, whose
 * rendezvous (file store or Redis, then Gloo/NCCL) runs the shards.  The
 * values were validated by make_plan. */
static ct_status add_shard_flags(const ct_cli_args *args, train_argv *a, ct_error *err) {
  (void)err;
  if (ct_cli_int(args, "num_shards") <= 1 && !ct_cli_is_set(args, "file_store_path") &&
      !ct_cli_is_set(args, "redis_host"))
    return CT_OK;
  add_arg(a, "--num_shards=%s", ct_cli_text(args, "num_shards"));
  add_arg(a, "--shard_id=%s", ct_cli_text(args, "shard_id"));
  add_arg(a, "--run_id=%s", ct_cli_text(args, "run_id"));
  if (ct_cli_is_set(args, "redis_host")) {
    add_arg(a, "--redis_host=%s", ct_cli_string(args, "redis_host"));
    add_arg(a, "--redis_port=%s", ct_cli_text(args, "redis_port"));
  } else {
    add_arg(a, "--file_store_path=%s", ct_cli_string(args, "file_store_path")); /* Caffe2: /tmp */
  }
  return CT_OK;
}

static ct_status make_train_argv(const ct_cli_args *args, const trainer_plan *plan, train_argv *a,
                                 ct_error *err) {
  memset(a, 0, sizeof *a);
  if (plan->gpus.n > 0) {
    char list[CT_GPU_LIST_MAX * 4 + 1] = "";
    int len = 0;
    for (int i = 0; i < plan->gpus.n; i++)
      len += snprintf(list + len, sizeof list - (size_t)len, "%s%d", i ? "," : "", plan->gpus.ids[i]);
    add_arg(a, "--gpu=%s", list);
  }
  add_arg(a, "--csv_log=%s", ct_cli_string(args, "csv_log"));
  if (strcmp(ct_cli_string(args, "train_data"), "null") == 0) {
    char shape[64];
    snprintf(shape, sizeof shape, "%d,%d,%d", ct_cli_int(args, "num_channels"), ct_cli_int(args, "image_size"),
             ct_cli_int(args, "image_size"));
    add_arg(a, "%s", "--dummy_data");
    add_arg(a, "--dummy_shape=%s", shape);
  }
  return add_shard_flags(args, a, err);
}

static int run_resnet50_trainer(const ct_cli_args *args) {
  ct_error err;
  trainer_plan plan;
  if (make_plan(args, &plan, &err) != CT_OK) return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  train_argv targv;
  if (make_train_argv(args, &plan, &targv, &err) != CT_OK)
    return ct_cli_error(err.code == CT_ERR_UNSUPPORTED ? CT_EXIT_FAILURE : CT_EXIT_USAGE, "%s", err.msg);
  LOG_INFO("ResNet-50: %d labels, %d x %d x %d images, batch %d per %s, global batch %lld",
           ct_cli_int(args, "num_labels"), ct_cli_int(args, "num_channels"), ct_cli_int(args, "image_size"),
           ct_cli_int(args, "image_size"), plan.batch_per_device, plan.gpus.n ? "GPU" : "process",
           plan.global_batch);
  LOG_INFO("Using epoch size: %lld (%lld iterations), learning rate %g", plan.epoch_size, plan.epoch_iters,
           plan.lr);
  Caffe__NetParameter *net;
  if (make_net(args, &plan, &net, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  Caffe__SolverParameter *sp;
  if (make_solver(args, &plan, net, &sp, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  ct_cli_args targs;
  if (ct_flags_parse("train", ct_cli_cmd_train.flags, ct_cli_cmd_train.n_flags, targv.argc, targv.argv, &targs,
                     &err) != CT_OK) {
    protobuf_c_message_free_unpacked(&sp->base, NULL);
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  }
  char expname[160];
  snprintf(expname, sizeof expname, "resnet50_gpu%d_b%d_L%d_lr%.2f", plan.gpus.n, ct_cli_int(args, "batch_size"),
           ct_cli_int(args, "num_labels"), ct_cli_double(args, "base_learning_rate"));
  char *params = ct_cli_namespace(args);
  ct_cli_csv_info csv = {.expname = expname, .params = params, .epoch_size = plan.epoch_size};
  int rc = ct_cli_train_solver(&targs, sp, &csv);
  free(params);
  ct_cli_args_free(&targs);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  return rc;
}

const ct_cli_command ct_cli_cmd_resnet50_trainer = {
    .name = "resnet50_trainer",
    .summary = "Train ResNet-50 with the flags of Caffe2's resnet50_trainer.py.",
    .usage = "cortado resnet50_trainer --train_data=DB [--test_data=DB] [--gpus=IDS | --num_gpus=N] "
             "[--batch_size=N] [--epoch_size=N] [--num_epochs=N] [flags]",
    .description =
        "Builds ResNet-50 (bottleneck blocks, BatchNorm) for --image_size, --num_channels and "
        "--num_labels, and trains it as Caffe2's script does: images cropped to the size and "
        "mirrored, (x - 128) / 128; SGD with Nesterov momentum 0.9 and weight decay; the rate "
        "falling 10x every 30 epochs. After every epoch it logs, tests on --test_data and "
        "writes a row of Caffe2's CSV log. --batch_size is the total over this machine's GPUs; "
        "without GPUs it trains on the CPU.",
    .flags = resnet50_trainer_flags,
    .n_flags = sizeof resnet50_trainer_flags / sizeof resnet50_trainer_flags[0],
    .min_args = 0,
    .max_args = 0,
    .host_threads = true,
    .run = run_resnet50_trainer,
};
