/* The neuron-group layers on GPU 0 against the CPU (tops, bottom diffs,
 * parameter diffs), gradient checks on the GPU, and in place on the GPU.
 * Skipped (exit 77) without a GPU. */
#include "neurontest.h"

#define TOL 1e-4
#define SHAPE "2,3,4,5"

static void grad_on_gpu(const Caffe__LayerParameter *p, ct_phase phase, const char *shapes,
                        ct_gradcheck_opts o, void (*prepare)(tu_layer_case *c)) {
  tu_layer_case c;
  tu_layer_case_init(&c, p, 0, phase, shapes, 1);
  if (prepare) prepare(&c);
  tu_check_gradient(&c, &o);
  tu_layer_case_free(&c);
}

/* CPU against GPU, the gradient on the GPU, and in place on the GPU. */
static void check_all(const Caffe__LayerParameter *p, ct_phase phase, const char *shapes,
                      ct_gradcheck_opts o, void (*prepare)(tu_layer_case *c)) {
  tu_compare_cpu_gpu(p, phase, shapes, 1, TOL, prepare);
  const ct_layer_ops *ops = ct_layer_find(p->type);
  assert_non_null(ops);
  if (ops->backward_gpu) grad_on_gpu(p, phase, shapes, o, prepare);
  nt_check_in_place_on(0, p, phase, shapes, prepare);
}

static float widen(float v) { return 4.0f * v; }
static void wide_values(tu_layer_case *c) { nt_map_values(c->bottom[0], widen); }

static void test_gpu_simple(void **state) {
  const char *types[] = {"Sigmoid", "TanH", "BNLL", "ELU", "Swish"};
  for (int k = 0; k < 5; k++) {
    Caffe__LayerParameter p = nt_layer("l", types[k]);
    check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, 0.01f), wide_values);
  }
  Caffe__LayerParameter p = nt_layer("elu", "ELU");
  Caffe__ELUParameter ep = CAFFE__ELUPARAMETER__INIT;
  ep.has_alpha = 1;
  ep.alpha = 0.5f;
  p.elu_param = &ep;
  check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, 0.01f), NULL);
  p = nt_layer("swish", "Swish");
  Caffe__SwishParameter sp = CAFFE__SWISH_PARAMETER__INIT;
  sp.has_beta = 1;
  sp.beta = 1.5f;
  p.swish_param = &sp;
  check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
}

static void test_gpu_absval_threshold_clip(void **state) {
  Caffe__LayerParameter p = nt_layer("abs", "AbsVal");
  tu_compare_cpu_gpu(&p, CT_PHASE_TRAIN, SHAPE, 1, TOL, NULL);
  grad_on_gpu(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-3f, 1e-2f, 0.0f, 0.01f), NULL);

  p = nt_layer("thr", "Threshold");
  Caffe__ThresholdParameter tp = CAFFE__THRESHOLD_PARAMETER__INIT;
  tp.has_threshold = 1;
  tp.threshold = 0.3f;
  p.threshold_param = &tp;
  tu_compare_cpu_gpu(&p, CT_PHASE_TRAIN, SHAPE, 1, 0, NULL);
  nt_check_in_place_on(0, &p, CT_PHASE_TRAIN, SHAPE, NULL);

  p = nt_layer("clip", "Clip");
  Caffe__ClipParameter cp = CAFFE__CLIP_PARAMETER__INIT;
  cp.min = -0.5f;
  cp.max = 0.6f;
  p.clip_param = &cp;
  tu_compare_cpu_gpu(&p, CT_PHASE_TRAIN, SHAPE, 1, TOL, NULL);
  nt_check_in_place_on(0, &p, CT_PHASE_TRAIN, SHAPE, NULL);
}

static void test_gpu_prelu(void **state) {
  Caffe__FillerParameter gauss = CAFFE__FILLER_PARAMETER__INIT;
  gauss.type = "gaussian";
  for (int shared = 0; shared < 2; shared++) {
    Caffe__LayerParameter p = nt_layer("prelu", "PReLU");
    Caffe__PReLUParameter pp = CAFFE__PRE_LUPARAMETER__INIT;
    pp.has_channel_shared = 1;
    pp.channel_shared = shared;
    pp.filler = &gauss;
    p.prelu_param = &pp;
    check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, 0.01f), NULL);
    tu_compare_cpu_gpu(&p, CT_PHASE_TRAIN, "3,2", 1, TOL, NULL);
  }
}

/* ---------------------------------------------------------------- Power, Exp, Log */
static float g_root; /* -shift / scale of the current Power case */
static float away_from_root(float v) {
  v = v < g_root + 0.05f ? 2 * g_root - v : v;
  return v < g_root + 0.05f ? g_root + 0.05f : v;
}
static void power_values(tu_layer_case *c) { nt_map_values(c->bottom[0], away_from_root); }
/* [-1, 1) to [0.5, 2): inside the domain of both Log cases, away from 0. */
static float positive(float v) { return 0.5f + 0.75f * (v + 1.0f); }
static void log_values(tu_layer_case *c) { nt_map_values(c->bottom[0], positive); }

static void test_gpu_power_exp_log(void **state) {
  const float cases[][3] = {{0.37f, 0.83f, -2.4f}, {0.37f, 0.83f, 0.0f}, {2.0f, 0.34f, -2.4f},
                            {1.0f, 0.83f, -2.4f},  {0.0f, 0.83f, -2.4f}, {-1.5f, 1.2f, 2.2f}};
  for (int k = 0; k < 6; k++) {
    Caffe__LayerParameter p = nt_layer("pow", "Power");
    Caffe__PowerParameter pp = CAFFE__POWER_PARAMETER__INIT;
    pp.has_power = pp.has_scale = pp.has_shift = 1;
    pp.power = cases[k][0];
    pp.scale = cases[k][1];
    pp.shift = cases[k][2];
    p.power_param = &pp;
    g_root = -pp.shift / pp.scale;
    check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-3f, 1e-2f, 0.0f, 0.01f), power_values);
  }
  Caffe__LayerParameter p = nt_layer("exp", "Exp");
  check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
  Caffe__ExpParameter ep = CAFFE__EXP_PARAMETER__INIT;
  ep.has_base = ep.has_scale = ep.has_shift = 1;
  ep.base_ = 2.0f;
  ep.scale = 0.5f;
  ep.shift = 1.0f;
  p.exp_param = &ep;
  check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);

  p = nt_layer("log", "Log");
  check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-2f, 0.0f, -1.0f), log_values);
  Caffe__LogParameter lp = CAFFE__LOG_PARAMETER__INIT;
  lp.has_base = lp.has_scale = lp.has_shift = 1;
  lp.base_ = 10.0f;
  lp.scale = 0.5f;
  lp.shift = 1.2f;
  p.log_param = &lp;
  check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-2f, 0.0f, -1.0f), log_values);
}

/* ---------------------------------------------------------------- Dropout */
static void test_gpu_dropout(void **state) {
  Caffe__LayerParameter p = nt_layer("drop", "Dropout");
  /* The same RNG state drops the same elements on both devices. */
  check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
  check_all(&p, CT_PHASE_TEST, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
  Caffe__DropoutParameter dp = CAFFE__DROPOUT_PARAMETER__INIT;
  dp.has_dropout_ratio = 1;
  dp.dropout_ratio = 0.2f;
  p.dropout_param = &dp;
  tu_compare_cpu_gpu(&p, CT_PHASE_TRAIN, "4,3,17,19", 1, TOL, NULL);
}

/* ---------------------------------------------------------------- BatchNorm, MVN */
static void stored_stats(tu_layer_case *c) {
  const float ms[3] = {0.4f, -0.2f, 1.0f}, vs[3] = {2.0f, 0.5f, 1.2f}, factor = 2.5f;
  tu_set_values(c->l->params[0], ms);
  tu_set_values(c->l->params[1], vs);
  tu_set_values(c->l->params[2], &factor);
}

static void test_gpu_batch_norm(void **state) {
  Caffe__LayerParameter p = nt_layer("bn", "BatchNorm");
  ct_gradcheck_opts o = nt_opts(1e-2f, 1e-4f, 0.0f, -1.0f);
  o.check_params = false;
  check_all(&p, CT_PHASE_TRAIN, "5,2,3,4", o, NULL);
  tu_compare_cpu_gpu(&p, CT_PHASE_TRAIN, "6,3", 1, TOL, NULL);
  check_all(&p, CT_PHASE_TEST, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), stored_stats);

  /* The running statistics after two training batches agree. */
  tu_layer_case cpu, gpu;
  tu_layer_case_init(&cpu, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, SHAPE, 1);
  tu_layer_case_init(&gpu, &p, 0, CT_PHASE_TRAIN, SHAPE, 1);
  for (int pass = 0; pass < 2; pass++) {
    tu_fill(cpu.bottom[0], -1.0f, 2.0f, 40 + (uint64_t)pass);
    ct_tensor_copy_data(gpu.bottom[0], cpu.bottom[0]);
    tu_forward(&cpu);
    tu_forward(&gpu);
    ct_context_sync(&gpu.ctx);
  }
  for (int i = 0; i < 3; i++) {
    float *a = tu_values(cpu.l->params[i]), *b = tu_values(gpu.l->params[i]);
    double e = tu_max_rel_err(b, a, cpu.l->params[i]->count, 1e-3);
    if (!(e <= TOL)) fail_msg("BatchNorm blob %d: GPU differs from CPU by %g", i, e);
    free(a);
    free(b);
  }
  tu_layer_case_free(&cpu);
  tu_layer_case_free(&gpu);
}

/* NVCaffe's scale_bias: the layer's own scale and bias (cuDNN's fused
 * affine where it runs), with batch statistics, frozen ones in training,
 * and in TEST. */
static void random_affine(tu_layer_case *c) {
  tu_fill(c->l->params[3], 0.5f, 1.5f, 31);
  tu_fill(c->l->params[4], -0.5f, 0.5f, 32);
}

static void stored_stats_affine(tu_layer_case *c) {
  stored_stats(c);
  random_affine(c);
}

static void test_gpu_batch_norm_scale_bias(void **state) {
  Caffe__LayerParameter p = nt_layer("bn", "BatchNorm");
  Caffe__BatchNormParameter bp = CAFFE__BATCH_NORM_PARAMETER__INIT;
  bp.has_scale_bias = bp.scale_bias = 1;
  p.batch_norm_param = &bp;
  check_all(&p, CT_PHASE_TRAIN, "5,3,3,4", nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), random_affine);
  check_all(&p, CT_PHASE_TEST, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), stored_stats_affine);
  bp.has_use_global_stats = bp.use_global_stats = 1;
  check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), stored_stats_affine);
}

static void test_gpu_mvn(void **state) {
  for (int k = 0; k < 4; k++) {
    Caffe__LayerParameter p = nt_layer("mvn", "MVN");
    Caffe__MVNParameter mp = CAFFE__MVNPARAMETER__INIT;
    mp.has_normalize_variance = mp.has_across_channels = 1;
    mp.normalize_variance = !(k & 1);
    mp.across_channels = k & 2;
    p.mvn_param = &mp;
    check_all(&p, CT_PHASE_TRAIN, SHAPE, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
  }
}

/* ---------------------------------------------------------------- Scale, Bias */
static void test_gpu_scale_bias(void **state) {
  Caffe__FillerParameter gauss = CAFFE__FILLER_PARAMETER__INIT;
  gauss.type = "gaussian";
  /* shapes, axis, num_axes (-1000: unset), bias_term */
  const struct {
    const char *shapes;
    int axis, num_axes;
    bool bias;
  } cases[] = {
      {SHAPE, 1, -1000, true},       {SHAPE, 0, 0, true},          {SHAPE, 2, -1, false},
      {"2,3,4,5; 3,4", 1, -1000, true}, {"2,3,4,5; 2,3,4,5", 0, -1000, false},
      {"2,3,4,5; -", 1, -1000, true},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    Caffe__LayerParameter p = nt_layer("scale", "Scale");
    Caffe__ScaleParameter sp = CAFFE__SCALE_PARAMETER__INIT;
    sp.has_axis = 1;
    sp.axis = cases[k].axis;
    if (cases[k].num_axes != -1000) {
      sp.has_num_axes = 1;
      sp.num_axes = cases[k].num_axes;
    }
    sp.has_bias_term = 1;
    sp.bias_term = cases[k].bias;
    sp.filler = sp.bias_filler = &gauss;
    p.scale_param = &sp;
    check_all(&p, CT_PHASE_TRAIN, cases[k].shapes, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);

    p = nt_layer("bias", "Bias");
    Caffe__BiasParameter bp = CAFFE__BIAS_PARAMETER__INIT;
    bp.has_axis = 1;
    bp.axis = cases[k].axis;
    bp.has_num_axes = sp.has_num_axes;
    bp.num_axes = sp.num_axes;
    bp.filler = &gauss;
    p.bias_param = &bp;
    check_all(&p, CT_PHASE_TRAIN, cases[k].shapes, nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
  }
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_simple),
      cmocka_unit_test(test_gpu_absval_threshold_clip),
      cmocka_unit_test(test_gpu_prelu),
      cmocka_unit_test(test_gpu_power_exp_log),
      cmocka_unit_test(test_gpu_dropout),
      cmocka_unit_test(test_gpu_batch_norm),
      cmocka_unit_test(test_gpu_mvn),
      cmocka_unit_test(test_gpu_scale_bias), cmocka_unit_test(test_gpu_batch_norm_scale_bias),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
