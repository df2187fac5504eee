/* The fused GPU update (ct_update_fused_gpu) against the host rules, for
 * every solver type: four parameters with their own lr_mult and decay_mult
 * in one padded flat buffer, L2 and L1 decay, iter_size, clip_gradients
 * active and inactive, five steps with fresh gradients; and the guard that
 * skips a step after a failed check or a non-finite loss.  Skipped (77)
 * without a GPU. */
#include <math.h>
#include <stdio.h>

#include "core/context.h"
#include "core/mem.h"
#include "solvers/update.h"
#include "testutil.h"

#define NSEG 4
#define COUNT 224 /* the segments below, each padded to 32 values */
#define STEPS 5

static const size_t g_start[NSEG + 1] = {0, 32, 64, 192, COUNT};
static const size_t g_count[NSEG] = {7, 32, 100, 1};
static const float g_lr_mult[NSEG] = {1.0f, 2.0f, 0.5f, 0.0f};
static const float g_decay_mult[NSEG] = {1.0f, 0.0f, 2.0f, 1.0f};

typedef struct {
  const char *type;
  float momentum, momentum2, rms_decay, delta;
  float rate;
} rule_setting;

static const rule_setting g_rules[] = {
    {"SGD", 0.9f, 0.999f, 0.99f, 1e-8f, 0.05f},
    {"Nesterov", 0.9f, 0.999f, 0.99f, 1e-8f, 0.05f},
    {"AdaGrad", 0.0f, 0.999f, 0.99f, 1e-6f, 0.05f},
    {"RMSProp", 0.0f, 0.999f, 0.98f, 1e-6f, 0.01f},
    {"AdaDelta", 0.95f, 0.999f, 0.99f, 1e-6f, 1.0f},
    {"Adam", 0.9f, 0.999f, 0.99f, 1e-8f, 0.01f},
};

/* Device copies of a host array. */
static void *to_device(int dev, const void *host, size_t bytes) {
  void *p = ct_mem_alloc(dev, bytes);
  ct_mem_copy(dev, p, CT_DEVICE_CPU, host, bytes);
  return p;
}

static void from_device(int dev, void *host, const void *p, size_t bytes) {
  ct_mem_copy(CT_DEVICE_CPU, host, dev, p, bytes);
}

static void expect_close(const float *gpu, const float *cpu, const char *what, const char *type,
                         const char *config, int step) {
  double e = tu_max_rel_err(gpu, cpu, COUNT, 1e-3);
  if (e > 1e-5) fail_msg("%s (%s) step %d: %s differs from the host by %g", type, config, step, what, e);
}

/* The host's clip factor, as the CPU solver computes it. */
static float host_clip_factor(const float *g, float clip) {
  if (clip < 0) return 1.0f;
  double sumsq = 0;
  for (int s = 0; s < NSEG; s++)
    for (size_t i = 0; i < g_count[s]; i++) sumsq += (double)g[g_start[s] + i] * g[g_start[s] + i];
  float l2 = (float)sqrt(sumsq);
  return l2 <= clip ? 1.0f : clip / l2;
}

static void run_rule(const rule_setting *r, bool l1, int iter_size, float clip) {
  const ct_update_rule *rule;
  ct_error err;
  assert_int_equal(ct_update_rule_lookup(r->type, &rule, &err), CT_OK);
  char config[96];
  snprintf(config, sizeof config, "%s, iter_size %d, clip %g", l1 ? "L1" : "L2", iter_size,
           (double)clip);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, 0, 1, &err), CT_OK);
  const int dev = ctx.device;
  float w[COUNT] = {0}, g[COUNT] = {0}, h0[COUNT] = {0}, h1[COUNT] = {0};
  for (int s = 0; s < NSEG; s++) tu_fill_uniform(w + g_start[s], g_count[s], -1.0f, 1.0f, 10 + s);
  float *dw = to_device(dev, w, sizeof w), *dg = to_device(dev, g, sizeof g);
  float *dh0 = to_device(dev, h0, sizeof h0), *dh1 = to_device(dev, h1, sizeof h1);
  size_t *dstart = to_device(dev, g_start, sizeof g_start);
  float *dlr = to_device(dev, g_lr_mult, sizeof g_lr_mult);
  float *ddecay = to_device(dev, g_decay_mult, sizeof g_decay_mult);
  ct_update_step *dstep = ct_mem_alloc(dev, sizeof *dstep);
  ct_update_clip *dclip = ct_mem_alloc(dev, sizeof *dclip);
  double *partials = ct_mem_alloc(dev, CT_UPDATE_CLIP_BLOCKS * sizeof(double));
  unsigned *counter = ct_mem_alloc(dev, sizeof(unsigned));
  ct_update_fused u = {.kind = rule->kind, .count = COUNT, .nseg = NSEG, .seg_start = dstart,
                       .seg_lr_mult = dlr, .seg_decay_mult = ddecay, .l1 = l1,
                       .iter_size = iter_size, .clip = clip, .momentum2 = r->momentum2,
                       .rms_decay = r->rms_decay, .delta = r->delta};
  bool clipped = false;
  for (int step = 0; step < STEPS; step++) {
    for (int s = 0; s < NSEG; s++)
      tu_fill_uniform(g + g_start[s], g_count[s], -2.0f, 2.0f, 100 * (uint64_t)step + s);
    ct_mem_copy(dev, dg, CT_DEVICE_CPU, g, sizeof g);
    float rate = r->rate * (1.0f - 0.1f * (float)step);
    float correction =
        rule->kind == CT_UPDATE_ADAM ? ct_update_adam_correction(r->momentum, r->momentum2, step) : 1.0f;
    ct_update_step hs = {.rate = rate, .correction = correction, .momentum = r->momentum,
                         .weight_decay = 0.01f};
    ct_mem_copy(dev, dstep, CT_DEVICE_CPU, &hs, sizeof hs);
    /* host: the CPU solver's arithmetic, segment by segment */
    ct_update_hparams hp = {0};
    hp.grad_scale = host_clip_factor(g, clip);
    clipped |= hp.grad_scale != 1.0f;
    if (iter_size > 1) hp.grad_scale *= 1.0f / (float)iter_size;
    hp.l1 = l1;
    hp.momentum = r->momentum;
    hp.momentum2 = r->momentum2;
    hp.rms_decay = r->rms_decay;
    hp.delta = r->delta;
    for (int s = 0; s < NSEG; s++) {
      hp.lr = rate * g_lr_mult[s] * correction;
      hp.decay = 0.01f * g_decay_mult[s];
      size_t o = g_start[s];
      rule->cpu(g_count[s], w + o, g + o, h0 + o, rule->nslots > 1 ? h1 + o : NULL, &hp);
    }
    ct_update_fused_gpu(&ctx, &u, dw, dg, dh0, rule->nslots > 1 ? dh1 : NULL, dstep, dclip,
                        partials, counter);
    float gw[COUNT], gg[COUNT], gh0[COUNT], gh1[COUNT];
    from_device(dev, gw, dw, sizeof gw);
    from_device(dev, gg, dg, sizeof gg);
    from_device(dev, gh0, dh0, sizeof gh0);
    expect_close(gw, w, "weights", r->type, config, step);
    expect_close(gg, g, "update values", r->type, config, step);
    expect_close(gh0, h0, "history 0", r->type, config, step);
    if (rule->nslots > 1) {
      from_device(dev, gh1, dh1, sizeof gh1);
      expect_close(gh1, h1, "history 1", r->type, config, step);
    }
    /* padding stays zero */
    for (size_t i = g_start[0] + g_count[0]; i < g_start[1]; i++) assert_true(gw[i] == 0.0f);
  }
  if (clip >= 0 && clip < 1.0f) assert_true(clipped);
  ct_mem_free(dev, dw);
  ct_mem_free(dev, dg);
  ct_mem_free(dev, dh0);
  ct_mem_free(dev, dh1);
  ct_mem_free(dev, dstart);
  ct_mem_free(dev, dlr);
  ct_mem_free(dev, ddecay);
  ct_mem_free(dev, dstep);
  ct_mem_free(dev, dclip);
  ct_mem_free(dev, partials);
  ct_mem_free(dev, counter);
  ct_context_free(&ctx);
}

static void test_rules(void **state) {
  for (size_t k = 0; k < sizeof g_rules / sizeof g_rules[0]; k++) {
    run_rule(&g_rules[k], false, 1, -1.0f);
    run_rule(&g_rules[k], true, 1, -1.0f);
    run_rule(&g_rules[k], false, 3, -1.0f);
    run_rule(&g_rules[k], false, 1, 0.5f);    /* clipping every step */
    run_rule(&g_rules[k], true, 2, 1000.0f);  /* a limit never reached */
  }
}

/* With a raised check word or a NaN loss the step changes nothing; with
 * neither it runs. */
static void test_guard(void **state) {
  ct_error err;
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, 0, 1, &err), CT_OK);
  const int dev = ctx.device;
  float w[COUNT], g[COUNT], zero[COUNT] = {0};
  tu_fill_uniform(w, COUNT, -1.0f, 1.0f, 3);
  tu_fill_uniform(g, COUNT, -1.0f, 1.0f, 4);
  float *dw = to_device(dev, w, sizeof w), *dg = to_device(dev, g, sizeof g);
  float *dh0 = to_device(dev, zero, sizeof zero);
  size_t *dstart = to_device(dev, g_start, sizeof g_start);
  float *dlr = to_device(dev, g_lr_mult, sizeof g_lr_mult);
  float *ddecay = to_device(dev, g_decay_mult, sizeof g_decay_mult);
  ct_update_step hs = {.rate = 0.1f, .correction = 1.0f, .momentum = 0.9f, .weight_decay = 0.0f};
  ct_update_step *dstep = to_device(dev, &hs, sizeof hs);
  unsigned word = 3;
  unsigned *dword = to_device(dev, &word, sizeof word);
  double nan_loss = NAN, good_loss = 1.5;
  double *dloss = to_device(dev, &nan_loss, sizeof nan_loss);
  ct_update_fused u = {.kind = CT_UPDATE_SGD, .count = COUNT, .nseg = NSEG, .seg_start = dstart,
                       .seg_lr_mult = dlr, .seg_decay_mult = ddecay, .iter_size = 1, .clip = -1,
                       .check_word = dword, .loss = dloss};
  float out[COUNT];
  ct_update_fused_gpu(&ctx, &u, dw, dg, dh0, NULL, dstep, NULL, NULL, NULL);
  from_device(dev, out, dw, sizeof out);
  assert_memory_equal(out, w, sizeof w); /* check raised and loss NaN */
  word = 0;
  ct_mem_copy(dev, dword, CT_DEVICE_CPU, &word, sizeof word);
  ct_update_fused_gpu(&ctx, &u, dw, dg, dh0, NULL, dstep, NULL, NULL, NULL);
  from_device(dev, out, dw, sizeof out);
  assert_memory_equal(out, w, sizeof w); /* loss NaN */
  ct_mem_copy(dev, dloss, CT_DEVICE_CPU, &good_loss, sizeof good_loss);
  ct_update_fused_gpu(&ctx, &u, dw, dg, dh0, NULL, dstep, NULL, NULL, NULL);
  from_device(dev, out, dw, sizeof out);
  assert_float_equal(out[0], w[0] - 0.1f * g[0], 1e-6); /* lr_mult 1, no decay: w - lr * g */
  ct_mem_free(dev, dw);
  ct_mem_free(dev, dg);
  ct_mem_free(dev, dh0);
  ct_mem_free(dev, dstart);
  ct_mem_free(dev, dlr);
  ct_mem_free(dev, ddecay);
  ct_mem_free(dev, dstep);
  ct_mem_free(dev, dword);
  ct_mem_free(dev, dloss);
  ct_context_free(&ctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules),
      cmocka_unit_test(test_guard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
