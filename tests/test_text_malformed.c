/* Malformed net and solver prototxts: each snippet is written to a file (so
 * the file name shows in the message) and must fail with exactly the
 * expected "NAME:LINE:COL: ..." message.  Files named *solver* are read as
 * caffe.SolverParameter, the rest as caffe.NetParameter. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "proto/textformat.h"

typedef struct malformed_case {
  const char *file;
  const char *text;
  const char *message; /* without the folder in front */
} malformed_case;

static const malformed_case cases[] = {
    /* Unknown fields, at several depths, with suggestions. */
    {"top_typo.prototxt", "nmae: \"LeNet\"\n",
     "top_typo.prototxt:1:1: unknown field 'nmae' in NetParameter (did you mean 'name'?)"},
    {"layer_word.prototxt", "name: \"n\"\nlaye {\n  name: \"a\"\n}\n",
     "layer_word.prototxt:2:1: unknown field 'laye' in NetParameter (did you mean 'layer'?)"},
    {"layer_typo.prototxt",
     "name: \"LeNet\"\nlayer {\n  name: \"conv1\"\n  tpye: \"Convolution\"\n}\n",
     "layer_typo.prototxt:4:3: unknown field 'tpye' in LayerParameter of layer 'conv1' at layer[0] "
     "(did you mean 'type'?)"},
    {"lenet.prototxt",
     "name: \"LeNet\"\n"
     "layer {\n  name: \"data\"\n  type: \"Input\"\n  top: \"data\"\n}\n"
     "layer {\n  name: \"conv1\"\n  type: \"Convolution\"\n"
     "  convolution_param {\n    num_output: 20\n    kernal_size: 5\n  }\n}\n",
     "lenet.prototxt:12:5: unknown field 'kernal_size' in ConvolutionParameter of layer 'conv1' "
     "(Convolution) at layer[1].convolution_param (did you mean 'kernel_size'?)"},
    {"filler_typo.prototxt",
     "layer {\n  convolution_param {\n    weight_filler { tpye: \"xavier\" }\n  }\n}\n",
     "filler_typo.prototxt:3:21: unknown field 'tpye' in FillerParameter at "
     "layer[0].convolution_param.weight_filler (did you mean 'type'?)"},
    {"shape_typo.prototxt", "layer {\n  input_param { shape { dim: 1 dims: 3 } }\n}\n",
     "shape_typo.prototxt:2:32: unknown field 'dims' in BlobShape at layer[0].input_param.shape[0] "
     "(did you mean 'dim'?)"},
    {"no_guess.prototxt", "layer {\n  frobnicate: 1\n}\n",
     "no_guess.prototxt:2:3: unknown field 'frobnicate' in LayerParameter at layer[0]"},
    /* Wrong types and ranges. */
    {"num_output_str.prototxt", "layer {\n  convolution_param { num_output: \"abc\" }\n}\n",
     "num_output_str.prototxt:2:35: expected an integer for field 'num_output' (uint32) in "
     "ConvolutionParameter at layer[0].convolution_param, got \"abc\""},
    {"num_output_real.prototxt", "layer { convolution_param { num_output: 20.5 } }\n",
     "num_output_real.prototxt:1:41: expected an integer for field 'num_output' (uint32) in "
     "ConvolutionParameter at layer[0].convolution_param, got 20.5"},
    {"num_output_neg.prototxt", "layer { convolution_param { num_output: -20 } }\n",
     "num_output_neg.prototxt:1:41: value -20 is out of range for field 'num_output' (uint32) in "
     "ConvolutionParameter at layer[0].convolution_param (0 to 4294967295)"},
    {"num_output_big.prototxt", "layer { convolution_param { num_output: 4294967296 } }\n",
     "num_output_big.prototxt:1:41: value 4294967296 is out of range for field 'num_output' "
     "(uint32) in ConvolutionParameter at layer[0].convolution_param (0 to 4294967295)"},
    {"lr_mult_word.prototxt", "layer {\n  param { lr_mult: one }\n}\n",
     "lr_mult_word.prototxt:2:20: expected a number for field 'lr_mult' (float) in ParamSpec at "
     "layer[0].param[0], got 'one'"},
    {"mirror_yes.prototxt", "layer { transform_param { mirror: yes } }\n",
     "mirror_yes.prototxt:1:35: expected true or false for field 'mirror' (bool) in "
     "TransformationParameter at layer[0].transform_param, got 'yes'"},
    {"type_unquoted.prototxt", "layer {\n  type: Convolution\n}\n",
     "type_unquoted.prototxt:2:9: expected a quoted string for field 'type' (string) in "
     "LayerParameter at layer[0], got 'Convolution' (strings need quotes: \"Convolution\")"},
    {"kernel_3x3.prototxt", "layer { convolution_param { kernel_size: 3x3 } }\n",
     "kernel_3x3.prototxt:1:42: invalid number '3x3'"},
    {"stride_08.prototxt", "layer { convolution_param { stride: 08 } }\n",
     "stride_08.prototxt:1:37: invalid number '08' (a leading 0 means octal)"},
    {"dim_list.prototxt", "input_shape { dim: [1, 3, 224 224] }\n",
     "dim_list.prototxt:1:31: expected ',' or ']' in the list of field 'dim' in BlobShape at "
     "input_shape[0], got 224"},
    {"name_list.prototxt", "name: [\"a\", \"b\"]\n",
     "name_list.prototxt:1:7: field 'name' (string) in NetParameter is not repeated, so it cannot "
     "take a list [...]"},
    /* Enums. */
    {"pool_maxx.prototxt", "layer {\n  pooling_param {\n    pool: MAXX\n  }\n}\n",
     "pool_maxx.prototxt:3:11: unknown value 'MAXX' for enum PoolMethod of field 'pool' in "
     "PoolingParameter at layer[0].pooling_param (did you mean 'MAX'?)"},
    {"pool_quoted.prototxt", "layer { pooling_param { pool: \"MAX\" } }\n",
     "pool_quoted.prototxt:1:31: expected an enum value for field 'pool' (enum PoolMethod) in "
     "PoolingParameter at layer[0].pooling_param, got \"MAX\" (enum values are written without "
     "quotes)"},
    {"pool_number.prototxt", "layer { pooling_param { pool: 7 } }\n",
     "pool_number.prototxt:1:31: value 7 is not a member of enum PoolMethod of field 'pool' in "
     "PoolingParameter at layer[0].pooling_param (expected one of MAX, AVE, STOCHASTIC)"},
    {"phase_trian.prototxt", "layer {\n  include { phase: TRIAN }\n}\n",
     "phase_trian.prototxt:2:20: unknown value 'TRIAN' for enum Phase of field 'phase' in "
     "NetStateRule at layer[0].include[0] (did you mean 'TRAIN'?)"},
    /* Braces. */
    {"eof_in_layer.prototxt",
     "layer {\n  name: \"ip\"\n  inner_product_param {\n    num_output: 10\n}\n",
     "eof_in_layer.prototxt:6:1: reached end of file inside 'layer' opened at 1:1 (missing '}')"},
    {"eof_deep.prototxt", "name: \"n\"\nlayer {\n  convolution_param {\n    num_output: 1",
     "eof_deep.prototxt:4:18: reached end of file inside 'convolution_param' opened at 3:3 "
     "(missing '}')"},
    {"extra_brace.prototxt", "layer {\n  name: \"a\"\n}\n}\n",
     "extra_brace.prototxt:4:1: unexpected '}' with no open message to close"},
    {"angle_mismatch.prototxt", "layer < name: \"a\" }\n",
     "angle_mismatch.prototxt:1:19: expected '>' to close 'layer' opened at 1:1, got '}'"},
    {"double_open.prototxt", "layer { { name: \"a\" } }\n",
     "double_open.prototxt:1:9: expected a field name in LayerParameter at layer[0], got '{'"},
    {"stray_bracket.prototxt", "layer { name: \"a\" }\n]\n",
     "stray_bracket.prototxt:2:1: expected a field name in NetParameter, got ']'"},
    /* Strings. */
    {"unterminated.prototxt", "name: \"LeNet\nlayer {\n}\n",
     "unterminated.prototxt:1:7: unterminated string: missing closing \" before the end of the "
     "line"},
    {"unterminated_eof.prototxt", "layer { name: 'conv1",
     "unterminated_eof.prototxt:1:15: unterminated string: reached end of file before the "
     "closing '"},
    {"bad_escape.prototxt", "layer {\n  name: \"conv\\q1\"\n}\n",
     "bad_escape.prototxt:2:14: invalid escape '\\q' in string (use \\n \\t \\\\ \\\" \\' \\xHH "
     "or \\ooo with ooo at most 377)"},
    /* Messages and scalars confused, missing pieces. */
    {"param_scalar.prototxt", "layer {\n  convolution_param: 5\n}\n",
     "param_scalar.prototxt:2:22: field 'convolution_param' in LayerParameter at layer[0] is a "
     "message (ConvolutionParameter): expected '{', got 5"},
    {"scalar_brace.prototxt", "layer {\n  convolution_param { num_output { 10 } }\n}\n",
     "scalar_brace.prototxt:2:34: field 'num_output' (uint32) in ConvolutionParameter at "
     "layer[0].convolution_param is not a message, so it cannot take '{'; write 'num_output: "
     "value'"},
    {"missing_value.prototxt", "layer {\n  name:\n  type: \"Data\"\n}\n",
     "missing_value.prototxt:2:3: missing value for field 'name' (string) in LayerParameter at "
     "layer[0]"},
    {"missing_colon.prototxt", "layer {\n  name \"a\"\n}\n",
     "missing_colon.prototxt:2:8: expected ':' after field 'name' (string) in LayerParameter at "
     "layer[0], got \"a\""},
    {"stray_char.prototxt", "layer { top: \"conv1\" @ }\n",
     "stray_char.prototxt:1:22: unexpected character '@'"},
    {"latin1.prototxt", "# r\xe9seau\nname: \"n\"\n",
     "latin1.prototxt:1:4: invalid UTF-8 byte 0xE9 (save the file as UTF-8)"},
    /* Empty and binary files. */
    {"empty.prototxt", "", "empty.prototxt: file is empty"},
    {"comments_solver.prototxt", "# base_lr: 0.01\n\n   # max_iter: 100\n",
     "comments_solver.prototxt: file is empty (only whitespace and comments)"},
    {"net.caffemodel", "\x0a\x05LeNet\x12\x08\x0a\x06\x63onv1\x00",
     "net.caffemodel:1:1: this looks like a binary file, not a text prototxt (a .caffemodel? use "
     "the binary reader)"},
    /* Solvers. */
    {"fast_solver.prototxt", "net: \"lenet.prototxt\"\nbase_lr: fast\n",
     "fast_solver.prototxt:2:10: expected a number for field 'base_lr' (float) in "
     "SolverParameter, got 'fast'"},
    {"policy_solver.prototxt", "lr_policy: step\n",
     "policy_solver.prototxt:1:12: expected a quoted string for field 'lr_policy' (string) in "
     "SolverParameter, got 'step' (strings need quotes: \"step\")"},
    {"policy3_solver.prototxt", "lr_policy: 3\n",
     "policy3_solver.prototxt:1:12: expected a quoted string for field 'lr_policy' (string) in "
     "SolverParameter, got 3 (strings need quotes: \"3\")"},
    {"mode_solver.prototxt", "solver_mode: GPUU\n",
     "mode_solver.prototxt:1:14: unknown value 'GPUU' for enum SolverMode of field 'solver_mode' "
     "in SolverParameter (did you mean 'GPU'?)"},
    {"iter_solver.prototxt", "max_itr: 10000\n",
     "iter_solver.prototxt:1:1: unknown field 'max_itr' in SolverParameter (did you mean "
     "'max_iter'?)"},
    {"iter_float_solver.prototxt", "max_iter: 1e4\n",
     "iter_float_solver.prototxt:1:11: expected an integer for field 'max_iter' (int32) in "
     "SolverParameter, got 1e4"},
    {"test_iter_solver.prototxt", "test_iter: 2147483648\n",
     "test_iter_solver.prototxt:1:12: value 2147483648 is out of range for field 'test_iter' "
     "(int32) in SolverParameter (-2147483648 to 2147483647)"},
    {"two_values_solver.prototxt", "momentum: 0.9 0.99\n",
     "two_values_solver.prototxt:1:15: expected a field name in SolverParameter, got 0.99"},
    {"decay_solver.prototxt", "weight_decay: 1e40\n",
     "decay_solver.prototxt:1:15: value 1e40 is out of range for field 'weight_decay' (float) in "
     "SolverParameter"},
    {"format_solver.prototxt", "snapshot_format: HDF6\n",
     "format_solver.prototxt:1:18: unknown value 'HDF6' for enum SnapshotFormat of field "
     "'snapshot_format' in SolverParameter (did you mean 'HDF5'?)"},
    {"type_solver.prototxt", "solver_type: ADAMM\n",
     "type_solver.prototxt:1:14: unknown value 'ADAMM' for enum SolverType of field "
     "'solver_type' in SolverParameter (did you mean 'ADAM'?)"},
    {"debug_solver.prototxt", "debug_info: maybe\n",
     "debug_solver.prototxt:1:13: expected true or false for field 'debug_info' (bool) in "
     "SolverParameter, got 'maybe'"},
    {"inline_net_solver.prototxt", "net_param {\n  layer { name: \"x\" typ: \"Data\" }\n}\n",
     "inline_net_solver.prototxt:2:21: unknown field 'typ' in LayerParameter of layer 'x' at "
     "net_param.layer[0] (did you mean 'type'?)"},
    /* Every unknown field in one pass (the first in full), the layer named
     * even when its name comes after the field; fields of Caffe's forks
     * said to be so instead of taken for typos. */
    {"ssd.prototxt",
     "layer {\n  norm_param { across_spatial: false scale_filler { type: \"constant\" } }\n"
     "  name: \"conv4_3_norm\"\n  type: \"Normalize\"\n}\n"
     "layer { name: \"d\" type: \"Dropout\" dropout_param { random_seed: 1 } }\n"
     "layer { name: \"c\" tpye: \"Convolution\" }\n",
     "ssd.prototxt:2:3: unknown field 'norm_param' in LayerParameter of layer 'conv4_3_norm' "
     "(Normalize) at layer[0]: a field of SSD's Caffe fork (weiliu89/caffe, branch ssd), which "
     "Cortado does not implement (and 2 more unknown fields)"},
    /* NVCaffe's precision, DataParameter, BatchNorm scale_bias and random
     * resize fields parse; its GPU transform switch does not */
    {"nvcaffe.prototxt",
     "default_forward_type: FLOAT16\nlayer { name: \"a\" forward_math: FLOAT data_param { threads: 4 "
     "parser_threads: 2 cache: true shuffle: true } batch_norm_param { scale_bias: true "
     "scale_filler { type: \"constant\" value: 1 } } transform_param { img_rand_resize_lower: 224 "
     "img_rand_resize_upper: 256 use_gpu_transform: true } }\n",
     "nvcaffe.prototxt:2:262: unknown field 'use_gpu_transform' in TransformationParameter of "
     "layer 'a' at layer[0].transform_param: a field of "
     "NVIDIA's Caffe fork (NVCaffe), which Cortado does not implement"},
    {"skip_list.prototxt", "frob: [1, 2, {a: 3}]\nfrob2: \"a\" \"b\";\nnmae: \"x\"\n",
     "skip_list.prototxt:1:1: unknown field 'frob' in NetParameter (and 2 more unknown fields)"},
    {"skip_eof.prototxt", "frob { a: 1\n",
     "skip_eof.prototxt:2:1: reached end of file inside 'frob' opened at 1:6 (missing '}')"},
    {"unknown_then_junk.prototxt", "frob: }\n",
     "unknown_then_junk.prototxt:1:1: unknown field 'frob' in NetParameter"},
    /* Multi-GPU lines from guides on the web. */
    {"device_list_solver.prototxt", "device_id: 0,1\nmultiprocess: true\n",
     "device_list_solver.prototxt:1:14: field 'device_id' (int32) in SolverParameter takes one "
     "value, not a list: device_id takes one GPU; choose several with --gpu=0,1 or --gpu=all on "
     "the command line (Cortado already trains with one worker process per GPU: --dp_workers)"},
    {"multiprocess_solver.prototxt", "base_lr: 0.1\nmultiprocess: true\n",
     "multiprocess_solver.prototxt:2:1: unknown field 'multiprocess' in SolverParameter: Cortado "
     "already trains with one worker process per GPU (--dp_workers=processes, the default): "
     "remove this line and choose the GPUs with --gpu=0,1 or --gpu=all"},
};

static const ProtobufCMessageDescriptor *desc_for(const char *name) {
  return strstr(name, "solver") ? &caffe__solver_parameter__descriptor
                                 : &caffe__net_parameter__descriptor;
}

static void test_malformed_table(void **state) {
  const char *dir = tu_tmpdir("test_text_malformed");
  size_t n = sizeof cases / sizeof cases[0];
  assert_true(n >= 35);
  int failures = 0;
  for (size_t i = 0; i < n; i++) {
    const malformed_case *c = &cases[i];
    char path[4096], want[4400];
    snprintf(path, sizeof path, "%s/%s", dir, c->file);
    /* The binary case holds a NUL: its length is the literal's size. */
    size_t len = strcmp(c->file, "net.caffemodel") == 0 ? 17 : strlen(c->text);
    tu_write_file(path, c->text, len);
    snprintf(want, sizeof want, "%s/%s", dir, c->message);
    ProtobufCMessage *m = (ProtobufCMessage *)1;
    ct_error err = {0};
    ct_status st = ct_text_parse_file(desc_for(c->file), path, &m, &err);
    if (st != CT_ERR_PARSE || m != NULL || strcmp(err.msg, want) != 0) {
      print_error("case %zu (%s): status %d\n  got:  %s\n  want: %s\n", i, c->file, (int)st,
                  err.msg, want);
      failures++;
      if (st == CT_OK) protobuf_c_message_free_unpacked(m, NULL);
    }
  }
  assert_int_equal(failures, 0);
}

/* The real trained model handed to the text reader by mistake. */
static void test_caffemodel_as_text(void **state) {
  const char *path = tu_fixture("lenet_iter_10000.caffemodel");
  ProtobufCMessage *m = NULL;
  ct_error err = {0};
  assert_int_equal(ct_text_parse_file(&caffe__net_parameter__descriptor, path, &m, &err),
                   CT_ERR_PARSE);
  assert_null(m);
  char want[4400];
  snprintf(want, sizeof want,
           "%s:1:1: this looks like a binary file, not a text prototxt (a .caffemodel? use the "
           "binary reader)",
           path);
  assert_string_equal(err.msg, want);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_malformed_table),
                                     cmocka_unit_test(test_caffemodel_as_text)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
