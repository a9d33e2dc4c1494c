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

/* A device whose limits refuse the plan's tiles keeps the kernels it can run, and says why:
 * cooperative matrices with 256 invocations a workgroup run the portable tiles; 32 KiB of
 * shared memory on an NVIDIA GPU (the portable large tile needs 36) every M on the
 * matrix-vector kernels. */
static void test_limits_refuse_tiles(void **state) {
  (void)state;
  struct vkrt_caps caps = h200();
  struct vkrt_matmul_setup s;
  vkrt_matmul_setup_init(&caps, &s);
  assert_null(s.coopmat_refused);
  assert_null(s.portable_refused);
  caps.max_compute_work_group_invocations = 256;
  vkrt_matmul_setup_init(&caps, &s);
  assert_false(s.coopmat);
  assert_non_null(s.coopmat_refused);
  assert_non_null(strstr(s.coopmat_refused, "maxComputeWorkGroupInvocations"));
  assert_null(s.portable_refused);
  check_defaults_valid(&caps, &s);
  struct vkrt_matmul_pick p = vkrt_matmul_pick(&s, true, VKRT_TYPE_F16, 512);
  assert_true(p.tiled);
  assert_false(p.coopmat);
  caps = h200();
  caps.max_compute_shared_memory_size = 32768;
  vkrt_matmul_setup_init(&caps, &s);
  assert_non_null(s.portable_refused);
  assert_non_null(strstr(s.portable_refused, "maxComputeSharedMemorySize"));
  assert_non_null(s.coopmat_refused);
  for (unsigned t = 0; t < sizeof(types) / sizeof(types[0]); t++)
    for (int use = 0; use < 2; use++)
      assert_false(vkrt_matmul_pick(&s, use, types[t], 4096).tiled);
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
      {{256, 128, 128, 2, 32, 2}, true, NULL}, /* 40 KiB, two register sets of 4 units */
      {{128, 128, 128, 2, 64, 2}, true, "units"}, /* two sets of 16 */
      {{512, 32, 256, 16, 32, 1}, true, "1 KiB of results"},
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

/* Split K on an H200's 132 SMs with the default tiles: a grid that fills the device twice
 * stays whole (Llama-3-8B gate/up at M 512: 448 workgroups), one that fills it once or less
 * is cut in whole steps (down at M 512: 128 workgroups, 448 steps -> 2 pieces); the pieces
 * never exceed the cap (the reduce's inputs, the scratch), never leave an empty piece,
 * and devices without a residency estimate (lavapipe, units unknown) never split. */
static void test_split_k(void **state) {
  (void)state;
  struct vkrt_caps caps = h200();
  struct vkrt_matmul_setup s;
  vkrt_matmul_setup_init(&caps, &s);
  const struct vkrt_matmul_tile *large = &s.tile[1][VKRT_MATMUL_LARGE];
  const struct vkrt_matmul_tile *medium = &s.tile[1][VKRT_MATMUL_MEDIUM];
  uint32_t chunk;
  assert_int_equal(vkrt_matmul_split_k(132, large, 4096, 112 * 4, 8, &chunk), 1);
  assert_int_equal(chunk, 4096);
  assert_int_equal(vkrt_matmul_split_k(132, large, 14336, 32 * 4, 8, &chunk), 2);
  assert_int_equal(chunk, 7168);
  assert_int_equal(chunk % large->bk, 0);
  /* M 32 on the medium tile: 112 workgroups at K 4096 stay whole, 32 at K 14336 take 4 */
  assert_int_equal(vkrt_matmul_split_k(132, medium, 4096, 112, 8, &chunk), 1);
  assert_int_equal(vkrt_matmul_split_k(132, medium, 14336, 32, 8, &chunk), 4);
  assert_int_equal(chunk, 3584);
  assert_int_equal(vkrt_matmul_split_k(132, medium, 14336, 32, 3, &chunk), 3); /* the cap */
  assert_int_equal(chunk, vkrt_align_up((14336 + 2) / 3, medium->bk));
  /* M 12 on the small tile: 448 workgroups of 64 invocations, K 4096 in pieces */
  const struct vkrt_matmul_tile *small = &s.tile[1][VKRT_MATMUL_SMALL];
  uint32_t p = vkrt_matmul_split_k(132, small, 4096, 448, 8, &chunk);
  assert_true(p >= 2);
  assert_int_equal(chunk % small->bk, 0);
  assert_true((uint64_t)chunk * p >= 4096 && (uint64_t)chunk * (p - 1) < 4096);
  /* the portable large tile is bound by its arithmetic: never */
  assert_int_equal(vkrt_matmul_split_k(132, &s.tile[0][VKRT_MATMUL_LARGE], 14336, 32 * 4, 8, &chunk), 1);
  /* one step, or no groups: whole */
  assert_int_equal(vkrt_matmul_split_k(132, large, large->bk, 1, 8, &chunk), 1);
  assert_int_equal(chunk, large->bk);
  assert_int_equal(vkrt_matmul_split_k(132, large, 4096, 0, 8, &chunk), 1);
  /* K of 3 steps asked for 8 pieces: 3 at most, none empty */
  p = vkrt_matmul_split_k(132, large, 3 * large->bk, 1, 8, &chunk);
  assert_true(p <= 3 && (uint64_t)chunk * (p - 1) < 3 * large->bk);
  /* no units reported, or a tile without an estimate: never */
  assert_int_equal(vkrt_matmul_split_k(0, large, 14336, 1, 8, &chunk), 1);
  struct vkrt_caps l = lavapipe();
  l.compute_units = 2;
  vkrt_matmul_setup_init(&l, &s);
  for (int size = 0; size < VKRT_MATMUL_SIZES; size++)
    assert_int_equal(vkrt_matmul_split_k(2, &s.tile[0][size], 14336, 1, 8, &chunk), 1);
}

/* Quantized w converted to f16 first from the measured columns: q4_K (the dearest decode)
 * before q8_0 and q6_K, f16 and f32 w never (nothing to convert). */
static void test_w16_min_m(void **state) {
  (void)state;
  uint32_t m[VKRT_TYPE_COUNT];
  vkrt_matmul_w16_min_m_init(m);
  assert_int_equal(m[VKRT_TYPE_Q4_K], 256);
  assert_int_equal(m[VKRT_TYPE_Q8_0], 512);
  assert_int_equal(m[VKRT_TYPE_Q6_K], 512);
  assert_int_equal(m[VKRT_TYPE_F16], UINT32_MAX);
  assert_int_equal(m[VKRT_TYPE_F32], UINT32_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_w16_min_m),
      cmocka_unit_test(test_split_k),
      cmocka_unit_test(test_h200),
      cmocka_unit_test(test_limits_refuse_tiles),
      cmocka_unit_test(test_no_coopmat),
      cmocka_unit_test(test_tile_check),
      cmocka_unit_test(test_quant_rows_fill),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
