/* The tiled matmul's per-device setup and per-call path (runtime/ops/matmul_plan.c) on
 * hand-built capability snapshots: no GPU. The cooperative-matrix kernels run on no device
 * of the test machines (lavapipe lacks VK_NV_cooperative_matrix), so when they are chosen
 * is checked here; their results are checked on the GPU by vkrt-bench cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ops/ops.h"

/* A device as the tiled matmul sees it. */
static struct vkrt_caps device(uint32_t vendor, bool cpu, bool coopmat, uint32_t subgroup,
                               uint32_t shared) {
  struct vkrt_caps c;
  memset(&c, 0, sizeof(c));
  c.vendor_id = vendor;
  c.is_cpu = cpu;
  c.cooperative_matrix = coopmat;
  c.subgroup_size = subgroup;
  c.max_compute_shared_memory_size = shared;
  c.max_compute_work_group_invocations = 1024;
  return c;
}

/* An H200 as the driver reports it: VK_NV_cooperative_matrix with 16x16x16 f16, 32-wide
 * subgroups, 48 KiB of shared memory per workgroup. */
static struct vkrt_caps h200(void) { return device(0x10de, false, true, 32, 49152); }

/* lavapipe: a CPU device, no cooperative matrices, 8-wide subgroups, 32 KiB. */
static struct vkrt_caps lavapipe(void) { return device(0x10005, true, false, 8, 32768); }

/* (Q6_K after I32 in vkrt_type: the per-type tables are indexed past a type with no tiles) */
static const vkrt_type types[] = {VKRT_TYPE_F32, VKRT_TYPE_F16, VKRT_TYPE_Q8_0, VKRT_TYPE_Q4_K,
                                  VKRT_TYPE_Q6_K};

/* Every default tile is one the kernel and the device take. */
static void check_defaults_valid(const struct vkrt_caps *caps, const struct vkrt_matmul_setup *s) {
  for (int size = 0; size < VKRT_MATMUL_SIZES; size++) {
    const char *why = vkrt_matmul_tile_check(caps, false, &s->tile[0][size]);
    if (why)
      fail_msg("portable tile %d: %s", size, why);
    if (s->coopmat && (why = vkrt_matmul_tile_check(caps, true, &s->tile[1][size])))
      fail_msg("cooperative-matrix tile %d: %s", size, why);
  }
  for (int cm = 0; cm < 2; cm++) /* each size takes larger M than the one before */
    for (int size = 1; size < VKRT_MATMUL_SIZES; size++)
      assert_true(s->tile[cm][size - 1].bn < s->tile[cm][size].bn);
}

static void test_h200(void **state) {
  (void)state;
  struct vkrt_caps caps = h200();
  struct vkrt_matmul_setup s;
  vkrt_matmul_setup_init(&caps, &s);
  assert_true(vkrt_matmul_coopmat_capable(&caps));
  assert_true(s.coopmat);
  check_defaults_valid(&caps, &s);
  for (unsigned t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
    vkrt_type wt = types[t];
    for (int use = 0; use < 2; use++) {
      bool cm = use && wt != VKRT_TYPE_F32; /* f32 weights never lose precision */
      uint32_t min_m = s.min_m[cm][wt];
      assert_true(min_m > 1 && min_m <= 33);
      struct vkrt_matmul_pick p = vkrt_matmul_pick(&s, use, wt, min_m - 1);
      assert_false(p.tiled);
      p = vkrt_matmul_pick(&s, use, wt, min_m);
      assert_true(p.tiled);
      assert_int_equal(p.coopmat, cm);
      /* the prompt (M = 512) takes the large tile, a batch of 32 the medium one, of 16 the
       * small one */
      p = vkrt_matmul_pick(&s, use, wt, 512);
      assert_true(p.tiled);
      assert_int_equal(p.coopmat, cm);
      assert_ptr_equal(p.tile, &s.tile[cm][VKRT_MATMUL_LARGE]);
      assert_int_equal(p.tile->bn, 128);
      p = vkrt_matmul_pick(&s, use, wt, 32);
      assert_true(p.tiled);
      assert_ptr_equal(p.tile, &s.tile[cm][VKRT_MATMUL_MEDIUM]);
      assert_ptr_equal(vkrt_matmul_pick(&s, use, wt, 33).tile, &s.tile[cm][VKRT_MATMUL_LARGE]);
      assert_ptr_equal(vkrt_matmul_pick(&s, use, wt, 16).tile, &s.tile[cm][VKRT_MATMUL_SMALL]);
      assert_ptr_equal(vkrt_matmul_pick(&s, use, wt, 17).tile, &s.tile[cm][VKRT_MATMUL_MEDIUM]);
    }
  }
  /* the crossover moves the decision (the bench's --min-m) */
  s.min_m[1][VKRT_TYPE_Q4_K] = 64;
  assert_false(vkrt_matmul_pick(&s, true, VKRT_TYPE_Q4_K, 63).tiled);
  assert_true(vkrt_matmul_pick(&s, true, VKRT_TYPE_Q4_K, 64).tiled);
  assert_true(vkrt_matmul_pick(&s, false, VKRT_TYPE_Q4_K, 63).tiled == (63 >= s.min_m[0][VKRT_TYPE_Q4_K]));
}

/* 64-wide subgroups or no f16 shape: the cooperative-matrix kernels are never picked, even
 * when asked for. */
static void test_no_coopmat(void **state) {
  (void)state;
  struct vkrt_caps caps[3] = {h200(), h200(), lavapipe()};
  caps[0].subgroup_size = 64;
  caps[1].cooperative_matrix = false;
  for (int i = 0; i < 3; i++) {
    struct vkrt_matmul_setup s;
    vkrt_matmul_setup_init(&caps[i], &s);
    assert_false(vkrt_matmul_coopmat_capable(&caps[i]));
    assert_false(s.coopmat);
    check_defaults_valid(&caps[i], &s);
    for (unsigned t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
      struct vkrt_matmul_pick p = vkrt_matmul_pick(&s, true, types[t], 512);
      assert_true(p.tiled);
      assert_false(p.coopmat);
      assert_ptr_equal(p.tile, &s.tile[0][VKRT_MATMUL_LARGE]);
    }
  }
  /* the portable tiles of a CPU device fit its 32 KiB */
  struct vkrt_caps lvp = lavapipe();
  struct vkrt_matmul_setup s;
  vkrt_matmul_setup_init(&lvp, &s);
  assert_true(s.tile[0][VKRT_MATMUL_LARGE].bm <= 64);
}

/* Tiles the kernel cannot take are refused, saying why. */
static void test_tile_check(void **state) {
  (void)state;
  struct vkrt_caps caps = h200();
  struct {
    struct vkrt_matmul_tile t;
    bool coopmat;
    const char *why; /* NULL: valid */
  } cases[] = {
      {{128, 128, 128, 2, 32, 1}, true, NULL},
      {{256, 128, 128, 2, 64, 1}, true, NULL},
      {{256, 128, 128, 2, 32, 2}, true, NULL}, /* exactly 48 KiB with the scratch */
      {{256, 128, 128, 2, 64, 2}, true, "maxComputeSharedMemorySize"},
      {{128, 128, 128, 2, 32, 3}, true, "stages"},
      {{128, 128, 128, 2, 32, 0}, true, "stages"},
      {{128, 128, 128, 2, 48, 1}, true, "bk must be"},
      {{128, 128, 128, 2, 0, 1}, true, "bk must be"},
      {{128, 128, 128, 3, 32, 1}, true, "multiple of rm"},
      {{128, 128, 80, 2, 32, 1}, true, "bn of 16 x rm"},
      {{128, 256, 256, 2, 64, 1}, true, "units"},
      {{256, 256, 128, 2, 64, 1}, true, "maxComputeSharedMemorySize"},
      {{2048, 128, 128, 2, 32, 1}, true, "maxComputeWorkGroupInvocations"},
      {{256, 128, 64, 8, 32, 1}, false, NULL},
      {{256, 64, 64, 4, 32, 2}, false, NULL},
      {{256, 128, 64, 8, 32, 2}, false, "maxComputeSharedMemorySize"},
      {{256, 128, 64, 8, 64, 1}, false, "maxComputeSharedMemorySize"},
      {{256, 64, 30, 4, 32, 1}, false, "divide"},
      {{0, 64, 64, 4, 32, 1}, false, ">= 1"},
  };
  for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const char *why = vkrt_matmul_tile_check(&caps, cases[i].coopmat, &cases[i].t);
    if (!cases[i].why ? why != NULL : !why || !strstr(why, cases[i].why))
      fail_msg("tile %u: %s, expected %s", i, why ? why : "valid",
               cases[i].why ? cases[i].why : "valid");
  }
}

/* The quantized one-column kernels with 16 rows per workgroup run where N gives every compute
 * unit 16 rows: on the H200's 132 SMs from N 2112 (Llama-3-8B q/o 4096 yes, k/v 1024 no); a
 * device that does not report its units (lavapipe) always takes them. */
static void test_quant_rows_fill(void **state) {
  (void)state;
  struct vkrt_caps g = h200(), l = lavapipe();
  g.compute_units = 132;
  assert_false(vkrt_quant_rows_fill(&g, 1024, 16));
  assert_false(vkrt_quant_rows_fill(&g, 2111, 16));
  assert_true(vkrt_quant_rows_fill(&g, 2112, 16));
  assert_true(vkrt_quant_rows_fill(&g, 4096, 16));
  assert_true(vkrt_quant_rows_fill(&g, 1, 0)); /* no demand */
  assert_true(vkrt_quant_rows_fill(&l, 1, 16));
  g.compute_units = UINT32_MAX; /* no overflow */
  assert_false(vkrt_quant_rows_fill(&g, UINT32_MAX, 16));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_h200),
      cmocka_unit_test(test_no_coopmat),
      cmocka_unit_test(test_tile_check),
      cmocka_unit_test(test_quant_rows_fill),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
