/* The tiled matmul (kernels/matmul.comp) on lavapipe with validation: f32, f16, Q8_0, Q4_K
 * and Q6_K weights against a float64 reference of the weights as vkrt_dequantize_row (or the
 * f16 conversion) gives them, on fresh random data with the output poisoned: odd M, N and K
 * (K a multiple of the block for the quantized types), offsets, padded rows, strided x,
 * batches with a broadcast w, the three tile sizes (M up to the small tile's bn, the
 * medium's, beyond), 32- to 128-k steps, one and two shared-memory buffers, the 16-byte and
 * per-element loads, accumulation; the path each call took is asserted through
 * the counters (tiled, cooperative matrix where the device has it, matrix-vector below the
 * crossover, the logged fallback when w is past one binding), and the forced tiled kernel
 * refuses what it cannot take, saying why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/vk_test.h"
#include "vkrt/vkrt_lab.h"

static uint64_t rng;

enum path { TILED, MATVEC, FALLBACK };

struct mm {
  vkrt_type wt;
  int64_t K, N, M, w2, b2;
  int64_t w_pad;  /* elements (blocks for quantized types) past K in each w row */
  uint64_t w_off; /* bytes */
  int64_t x_pad;  /* floats past K in each x column */
  uint64_t x_off; /* bytes */
  bool acc;       /* vkrt_op_matmul_add */
  int force;      /* FORCE_MATMUL_KERNEL */
  enum path expect;
  int split;      /* MATMUL_SPLIT_K: 0 whole K (the path tables, on every device), 2..8
                     forced, -1 the device's plan */
  bool d_dense;   /* dst rows not padded (split K reduces dense dst only) */
  bool want_split; /* K in pieces expected */
};

static bool type_enabled(vkrt_type t) {
  switch (t) {
  case VKRT_TYPE_F16: return IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL_F16);
  case VKRT_TYPE_Q8_0: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q8_0);
  case VKRT_TYPE_Q4_K: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K);
  case VKRT_TYPE_Q6_K: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q6_K);
  default: return IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL);
  }
}


static void put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

/* Row n of batch b of w as floats (the reference's view of the weights). */
static void w_row(const uint8_t *base, const vkrt_tensor *w, int64_t n, int64_t b, float *out) {
  const uint8_t *row = base + w->offset + n * w->nb[1] + b * w->nb[2];
  if (w->type == VKRT_TYPE_F32) {
    memcpy(out, row, sizeof(float) * (size_t)w->ne[0]);
  } else if (w->type == VKRT_TYPE_F16) {
    for (int64_t k = 0; k < w->ne[0]; k++) {
      uint16_t h;
      memcpy(&h, row + 2 * k, 2);
      out[k] = vkrt_f16_to_f32(h);
    }
  } else {
    assert_int_equal(vkrt_dequantize_row(w->type, row, out, w->ne[0]), VKRT_OK);
  }
}

/* Random weights: floats in [-1, 1) (f16: rounded), quantized blocks of random quants with
 * scales small enough that every weight is a normal f16 (Q4_K: d and dmin up to 0.02; Q6_K:
 * d up to 0.0005 times random int8 scales and quants of -32..31). */
static void fill_w(uint8_t *base, const vkrt_tensor *w) {
  uint64_t ts = vkrt_type_size(w->type), per = vkrt_type_block(w->type);
  for (int64_t b = 0; b < w->ne[2]; b++)
    for (int64_t n = 0; n < w->ne[1]; n++) {
      uint8_t *row = base + w->offset + n * w->nb[1] + b * w->nb[2];
      if (w->type == VKRT_TYPE_F32) {
        vkt_fill_random_f32((float *)(void *)row, (size_t)w->ne[0], -1.0f, 1.0f, &rng);
        continue;
      }
      if (w->type == VKRT_TYPE_F16) {
        for (int64_t k = 0; k < w->ne[0]; k++) {
          float f;
          vkt_fill_random_f32(&f, 1, -1.0f, 1.0f, &rng);
          put_u16(row + 2 * k, vkrt_f32_to_f16(f));
        }
        continue;
      }
      uint64_t blocks = (uint64_t)w->ne[0] / per;
      vkt_fill_random(row, blocks * ts, &rng);
      for (uint64_t i = 0; i < blocks; i++) {
        float s[2];
        vkt_fill_random_f32(s, 2, -0.02f, 0.02f, &rng);
        if (w->type == VKRT_TYPE_Q6_K) { /* d last; the int8 scales stay random bytes */
          put_u16(row + i * ts + 208, vkrt_f32_to_f16(0.025f * s[0]));
          continue;
        }
        put_u16(row + i * ts, vkrt_f32_to_f16(w->type == VKRT_TYPE_Q8_0 ? 2.5f * s[0] : s[0]));
        if (w->type == VKRT_TYPE_Q4_K)
          put_u16(row + i * ts + 2, vkrt_f32_to_f16(s[1]));
      }
    }
}

static vkrt_lab_counters ran(vkrt_appliance *app) {
  vkrt_lab_counters c;
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c));
  return c;
}

/* The crossover the path tables assume (0: the device's own, for the crossover test). */
static int64_t pin_min_m = 9;

static void knob(vkrt_appliance *app, vkrt_lab_knob k, int64_t v) {
  vkt_check(app, vkrt_lab_set(app, 0, k, v));
}

static void run(vkrt_appliance *app, const struct mm *c) {
  int64_t per = vkrt_type_block(c->wt), ts = (int64_t)vkrt_type_size(c->wt);
  vkrt_tensor w = {.offset = c->w_off, .type = c->wt, .ne = {c->K, c->N, c->w2, 1}};
  w.nb[0] = ts;
  w.nb[1] = ts * (c->K / per + c->w_pad);
  w.nb[2] = w.nb[1] * c->N;
  w.nb[3] = w.nb[2] * c->w2;
  vkrt_tensor x = {.offset = c->x_off, .type = VKRT_TYPE_F32, .ne = {c->K, c->M, c->b2, 1}};
  x.nb[0] = 4;
  x.nb[1] = 4 * (c->K + c->x_pad);
  x.nb[2] = x.nb[1] * c->M;
  x.nb[3] = x.nb[2] * c->b2;
  /* dst rows padded by 3 elements, which must stay as they were (or dense) */
  vkrt_tensor d = {.offset = 8, .type = VKRT_TYPE_F32, .ne = {c->N, c->M, c->b2, 1}};
  d.nb[0] = 4;
  d.nb[1] = 4 * (c->N + (c->d_dense ? 0 : 3));
  d.nb[2] = d.nb[1] * c->M;
  d.nb[3] = d.nb[2] * c->b2;
  vkt_hbuf wb = vkt_hbuf_new(app, c->w_off + (uint64_t)w.nb[3] + 16), xb = vkt_hbuf_new(app, c->x_off + (uint64_t)x.nb[3]),
       db = vkt_hbuf_new(app, 8 + (uint64_t)d.nb[3] + 4);
  w.buffer = wb.buf, x.buffer = xb.buf, d.buffer = db.buf;
  vkt_fill_random(wb.map, wb.size, &rng);
  fill_w(wb.map, &w);
  vkt_fill_random(xb.map, xb.size, &rng); /* the padding: garbage the kernel must not read */
  for (int64_t b = 0; b < c->b2; b++)
    for (int64_t m = 0; m < c->M; m++)
      vkt_fill_random_f32((float *)(void *)(xb.map + c->x_off + m * x.nb[1] + b * x.nb[2]),
                          (size_t)c->K, -1.0f, 1.0f, &rng);
  vkt_poison(db.map, db.size);
  for (int64_t b = 0; c->acc && b < c->b2; b++)
    for (int64_t m = 0; m < c->M; m++)
      vkt_fill_random_f32((float *)(void *)(db.map + 8 + m * d.nb[1] + b * d.nb[2]), (size_t)c->N,
                          -4.0f, 4.0f, &rng);
  uint8_t *before = malloc(db.size);
  memcpy(before, db.map, db.size);

  /* The path tables' expected paths assume the tiles from M = 9 on; a device's measured
   * crossover (vkrt-probe) may lie elsewhere, so those cases pin it and restore it after. */
  if (pin_min_m)
    knob(app, VKRT_LAB_MATMUL_TILED_MIN_M, pin_min_m);
  vkrt_lab_counters r0 = ran(app);
  knob(app, VKRT_LAB_FORCE_MATMUL_KERNEL, c->force);
  knob(app, VKRT_LAB_MATMUL_SPLIT_K, c->split > 0 ? c->split : c->split == 0 ? 1 : 0);
  vkrt_status s = c->acc ? vkrt_op_matmul_add(&d, &w, &x) : vkrt_op_matmul(&d, &w, &x);
  knob(app, VKRT_LAB_FORCE_MATMUL_KERNEL, 0);
  knob(app, VKRT_LAB_MATMUL_SPLIT_K, 0);
  if (pin_min_m) /* the device's per-type crossovers again */
    knob(app, VKRT_LAB_MATMUL_TILED_MIN_M, 0);
  vkt_check(app, s);
  vkt_check(app, vkrt_finish(app, 0));
  vkrt_lab_counters r1 = ran(app);
  bool quant = per > 1;
  uint64_t tiled = r1.matmul_tiled - r0.matmul_tiled, cm = r1.matmul_coopmat - r0.matmul_coopmat;
  uint64_t mv = quant ? r1.quant_matvec - r0.quant_matvec : r1.matvec - r0.matvec;
  uint64_t fb = r1.matmul_fallback - r0.matmul_fallback;
  int64_t on, x16_on;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_COOPMAT, &on));
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_X16, &x16_on));
  bool want_cm = c->expect == TILED && c->wt != VKRT_TYPE_F32 && on &&
                 vkrt_lab_matmul_coopmat_usable(app, 0);
  /* x rounded to f16 by a copy first: cooperative matrices, the large tile, K a multiple
   * of 8 */
  vkrt_lab_matmul_tile medium;
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_COOPMAT_MEDIUM, &medium));
  bool want_x16 = want_cm && x16_on && c->M > (int64_t)medium.bn && c->K % 8 == 0;
  /* quantized w dequantized to f16 first: the same tile, from the knob's M (0: no scratch) */
  int64_t w16_min;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_W16_MIN_M, &w16_min));
  bool want_w16 = want_cm && quant && c->M > (int64_t)medium.bn && w16_min && c->M >= w16_min;
  uint64_t xh = r1.matmul_x16 - r0.matmul_x16, wh = r1.matmul_w16 - r0.matmul_w16;
  uint64_t split = r1.matmul_split_k - r0.matmul_split_k;
  if (tiled != (c->expect == TILED) || mv != (c->expect != TILED) || fb != (c->expect == FALLBACK) ||
      cm != want_cm || xh != want_x16 || wh != want_w16 || split != c->want_split)
    fail_msg("%s K %lld N %lld M %lld: path %d expected (split K %d, w16 %d); tiled %llu, "
             "coopmat %llu (x16 %llu, w16 %llu), split K %llu, matvec %llu, fallback %llu",
             vkrt_type_str(c->wt), (long long)c->K, (long long)c->N, (long long)c->M, c->expect,
             c->want_split, want_w16, (unsigned long long)tiled, (unsigned long long)cm,
             (unsigned long long)xh, (unsigned long long)wh, (unsigned long long)split,
             (unsigned long long)mv, (unsigned long long)fb);

  float *wr = malloc(sizeof(float) * (size_t)c->K);
  for (int64_t b = 0; b < c->b2; b++)
    for (int64_t n = 0; n < c->N; n++) {
      w_row(wb.map, &w, n, b / (c->b2 / c->w2), wr);
      for (int64_t m = 0; m < c->M; m++) {
        const float *xr = (const float *)(const void *)(xb.map + c->x_off + m * x.nb[1] + b * x.nb[2]);
        uint64_t a = 8 + n * 4 + m * d.nb[1] + b * d.nb[2];
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < c->K; k++) {
          sum += (double)wr[k] * xr[k];
          mag += fabs((double)wr[k] * xr[k]);
        }
        if (c->acc) {
          float prev;
          memcpy(&prev, before + a, 4);
          sum += prev;
          mag += fabs(prev);
        }
        /* f32 accumulation: about sqrt(K) roundings of 2^-24 of the magnitude; cooperative
         * matrices round x and w to f16 first (2^-11 each) */
        double tol = 4e-6 * mag * sqrt((double)c->K) + (cm ? 2 * 0x1p-11 * mag : 0) + 1e-30;
        float g;
        memcpy(&g, db.map + a, 4);
        if (!(fabs(g - sum) <= tol))
          fail_msg("%s K %lld N %lld M %lld b2 %lld w_off %llu x_off %llu: [%lld,%lld,%lld] = "
                   "%.9g, expected %.9g (tol %.3g)", vkrt_type_str(c->wt), (long long)c->K,
                   (long long)c->N, (long long)c->M, (long long)c->b2,
                   (unsigned long long)c->w_off, (unsigned long long)c->x_off, (long long)n,
                   (long long)m, (long long)b, g, sum, tol);
        memcpy(db.map + a, before + a, 4);
      }
    }
  assert_memory_equal(db.map, before, db.size); /* nothing else written */
  free(wr);
  free(before);
  vkrt_buffer_destroy(wb.buf);
  vkrt_buffer_destroy(xb.buf);
  vkrt_buffer_destroy(db.buf);
}

static vkrt_appliance *open_app(void) {
  vkrt_options o;
  vkt_options(&o);
  return vkt_open(&o);
}

static const vkrt_type types[] = {VKRT_TYPE_F32, VKRT_TYPE_F16, VKRT_TYPE_Q8_0, VKRT_TYPE_Q4_K,
                                  VKRT_TYPE_Q6_K};

/* Every type through the three tiles, both load forms, batches, offsets and strided x. */
static void test_tiled(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  vkrt_lab_matmul_tile small, medium;
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_PORTABLE_SMALL, &small));
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_PORTABLE_MEDIUM, &medium));
  assert_true(small.bn >= 13 && medium.bn > small.bn);
  int64_t past = (int64_t)medium.bn + 5, mid = (int64_t)small.bn + 3; /* large, medium tile */
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(types); t++) {
    vkrt_type wt = types[t];
    if (!type_enabled(wt)) {
      print_message("%s kernels not in this build\n", vkrt_type_str(wt));
      continue;
    }
    bool q = vkrt_type_block(wt) > 1;
    int64_t B = vkrt_type_block(wt);
    int64_t K1 = q ? 3 * B : 301, K2 = q ? 2 * B : 264, K3 = q ? B : 40;
    uint64_t odd = wt == VKRT_TYPE_Q4_K ? 4 : q ? 2 : (uint64_t)vkrt_type_size(wt);
    const struct mm cases[] = {
      /* odd K, N and M past the small tile; x at 4 bytes with padded columns: per-element x */
      {wt, K1, 67, past, 1, 1, 0, 0, 3, 4, false, 0, TILED},
      /* all 16-byte aligned, M within the small tile: unit loads of w and x */
      {wt, K2, 45, 13, 1, 1, 0, 0, 4, 16, false, 0, TILED},
      /* the medium tile */
      {wt, K1, 70, mid, 1, 1, 0, 0, 0, 0, false, 0, TILED},
      /* batches with w broadcast, padded w rows at an offset that is not 16-byte aligned */
      {wt, K3, 19, 11, 2, 4, 1, odd, 0, 0, false, 0, TILED},
      /* one column forced onto the tiled kernel; N of one row */
      {wt, K2, 17, 1, 1, 1, 0, 0, 0, 0, false, 2, TILED},
      {wt, K3, 1, 9, 1, 1, 0, 16, 0, 0, false, 0, TILED},
      /* K that ends inside a 32-step (and is a multiple of 8 but not 32) */
      {wt, q ? 5 * B : 72, 33, 10, 1, 1, 0, 0, 0, 0, false, 0, TILED},
    };
    for (unsigned i = 0; i < VKT_ARRAY_SIZE(cases); i++)
      run(app, &cases[i]);
    { /* vkrt_op_matmul_add on both tiles */
      struct mm a = {wt, q ? 4 * B : 100, 33, 20, 1, 1, 0, 0, 0, 0, true, 0, TILED};
      run(app, &a);
      a.M = past, a.K = q ? 16 * B : 4096, a.N = 64; /* a long K against the tolerance */
      run(app, &a);
    }
  }
  vkt_close(app);
}

/* K in pieces (the lab forces the count; the plan splits only where the device's residency
 * is measured): every type on the three tiles, a K whose last piece is short, batches with w
 * broadcast, accumulation (dst one of the reduce's inputs), the most pieces; a K of one step
 * and a padded dst stay whole; the plan on one workgroup of a long K splits exactly where the
 * device reports its compute units and the tiles have a residency estimate (GPUs measured:
 * NVIDIA; never on lavapipe). */
static void test_split_k(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  vkrt_lab_matmul_tile small, medium;
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_PORTABLE_SMALL, &small));
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_PORTABLE_MEDIUM, &medium));
  int64_t past = (int64_t)medium.bn + 5, mid = (int64_t)small.bn + 3;
  vkrt_lab_device facts;
  int64_t per_unit;
  vkt_check(app, vkrt_lab_device_get(app, 0, &facts));
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_SPLIT_K_PER_UNIT, &per_unit));
  bool planned = facts.compute_units > 0 && per_unit > 0;
  print_message("split K planned on this device: %s (%u compute units, %lld resident)\n",
                planned ? "yes" : "no", facts.compute_units, (long long)per_unit);
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(types); t++) {
    vkrt_type wt = types[t];
    if (!type_enabled(wt))
      continue;
    bool q = vkrt_type_block(wt) > 1;
    int64_t B = vkrt_type_block(wt);
    /* the steps of the tiles in use: 32 to 128 k (pieces are whole steps) */
    int64_t Klong = q ? (B == 32 ? 40 * B : 5 * B) : 1000, Kone = q ? B : 24;
    const struct mm cases[] = {
        /* three pieces of K, the last short; the large tile */
        {wt, Klong, 67, past, 1, 1, 0, 0, 0, 0, false, 0, TILED, 3, true, true},
        /* two on the small tile, x columns padded */
        {wt, Klong, 45, 13, 1, 1, 0, 0, 4, 16, false, 0, TILED, 2, true, true},
        /* batches, w broadcast, the medium tile; dst += the pieces (dst the first input) */
        {wt, Klong, 19, mid, 2, 4, 0, 0, 0, 0, true, 0, TILED, 7, true, true},
        /* the most pieces */
        {wt, Klong, 33, past, 1, 1, 0, 0, 0, 0, false, 0, TILED, 8, true, true},
        /* one step of K (a super-block is several): nothing to cut; a padded dst: the
         * reduce needs it dense */
        {wt, Kone, 21, past, 1, 1, 0, 0, 0, 0, false, 0, TILED, 4, true, B == 256},
        {wt, Klong, 21, past, 1, 1, 0, 0, 0, 0, true, 0, TILED, 4, false, false},
        {wt, q ? 16 * B : 4096, 21, past, 1, 1, 0, 0, 0, 0, false, 0, TILED, -1, true, planned},
    };
    for (unsigned i = 0; i < VKT_ARRAY_SIZE(cases); i++)
      run(app, &cases[i]);
  }
  vkt_close(app);
}

/* The cooperative-matrix tiles where the device has them (skipped elsewhere, lavapipe
 * included): every weight type on the three tiles, with x rounded to f16 by a copy into the
 * scratch first (the default) and as the tiles load it, quantized w dequantized to f16 by a
 * copy first and decoded as loaded, K not a multiple of 8 (no copy), padded x columns at an
 * offset, batches, accumulation; other tiles (two stages, 8 subgroups, 64-k steps). */
static void test_coopmat(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  if (!vkrt_lab_matmul_coopmat_usable(app, 0)) {
    vkt_close(app);
    vkt_skip("no cooperative matrices on this device");
  }
  knob(app, VKRT_LAB_MATMUL_COOPMAT, 1);
  int64_t x16_default;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_X16, &x16_default));
  assert_true(x16_default); /* the scratch is made at open where cooperative matrices are */
  vkrt_lab_matmul_tile small, medium;
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_COOPMAT_SMALL, &small));
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_COOPMAT_MEDIUM, &medium));
  int64_t past = (int64_t)medium.bn + 37, mid = (int64_t)small.bn + 3;
  int64_t w16_default;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_W16_MIN_M, &w16_default));
  assert_true(w16_default > 0); /* the w scratch comes with the x one */
  /* x rounded first or as loaded, each with quantized w dequantized first (from M 1) and
   * decoded by the tiles (never) */
  for (int pass = 0; pass < 4; pass++) {
    int x16 = pass < 2;
    knob(app, VKRT_LAB_MATMUL_X16, x16);
    knob(app, VKRT_LAB_MATMUL_W16_MIN_M, pass % 2 ? 1 : UINT32_MAX);
    for (unsigned t = 1; t < VKT_ARRAY_SIZE(types); t++) {
      vkrt_type wt = types[t];
      if (!type_enabled(wt))
        continue;
      bool q = vkrt_type_block(wt) > 1;
      int64_t B = vkrt_type_block(wt);
      const struct mm cases[] = {
          {wt, q ? 4 * B : 264, 67, past, 1, 1, 0, 0, 3, 4, false, 0, TILED},
          {wt, q ? 2 * B : 136, 45, mid, 1, 1, 0, 0, 0, 16, false, 0, TILED},
          {wt, q ? 3 * B : 72, 33, 12, 2, 4, 0, 0, 0, 0, false, 0, TILED},
          {wt, q ? 2 * B : 300, 50, past, 1, 1, 0, 0, 0, 0, false, 0, TILED}, /* f16: K % 8 = 4 */
          {wt, q ? 8 * B : 1024, 64, past, 1, 1, 0, 0, 0, 0, true, 0, TILED},
          /* the large tile over batches, w broadcast (w16: every w batch converted) */
          {wt, q ? 2 * B : 128, 37, past, 2, 4, 0, 0, 0, 0, false, 0, TILED},
      };
      for (unsigned i = 0; i < VKT_ARRAY_SIZE(cases); i++)
        run(app, &cases[i]);
    }
  }
  knob(app, VKRT_LAB_MATMUL_X16, 1);
  /* quantized w converted and multiplied in pieces of rows, each piece's tiles beside the
   * next piece's conversion: 2 and 3 pieces of whole row tiles over 5 row tiles (the last
   * piece short), every piece counted */
  int64_t pieces_default;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_W16_PIECES, &pieces_default));
  vkrt_lab_matmul_tile large;
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_COOPMAT_LARGE, &large));
  for (int64_t pieces = 2; pieces <= 3; pieces++) {
    knob(app, VKRT_LAB_MATMUL_W16_PIECES, pieces);
    for (unsigned t = 1; t < VKT_ARRAY_SIZE(types); t++) {
      vkrt_type wt = types[t];
      int64_t B = vkrt_type_block(wt);
      if (!type_enabled(wt) || B == 1)
        continue;
      const struct mm c = {wt, 2 * B, 4 * (int64_t)large.bm + 37, past, 1, 1, 0, 0, 0, 0, false,
                           0, TILED};
      vkrt_lab_counters r0 = ran(app);
      run(app, &c);
      assert_int_equal(ran(app).matmul_w16_pieces - r0.matmul_w16_pieces, pieces);
    }
  }
  knob(app, VKRT_LAB_MATMUL_W16_PIECES, 0);
  int64_t pieces_now;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_W16_PIECES, &pieces_now));
  assert_int_equal(pieces_now, pieces_default);
  knob(app, VKRT_LAB_MATMUL_W16_MIN_M, 0);
  /* other tiles: two buffers with the loads two steps ahead (K 136 / 3 blocks: an odd step
   * count; 1024: even), 8 subgroups in 64-k steps, the medium tile in 64-k steps (the plan's
   * takes 128: a short last step at K 136); edge tiles pass their results through the w
   * buffers */
  static const struct {
    vkrt_lab_tile_slot slot;
    vkrt_lab_matmul_tile tile;
  } other[] = {{VKRT_LAB_TILE_COOPMAT_LARGE, {256, 128, 128, 2, 32, 2}},
               {VKRT_LAB_TILE_COOPMAT_LARGE, {128, 64, 64, 2, 32, 2}},
               {VKRT_LAB_TILE_COOPMAT_LARGE, {256, 128, 128, 4, 64, 1}},
               {VKRT_LAB_TILE_COOPMAT_MEDIUM, {256, 128, 32, 2, 64, 1}}};
  for (unsigned i = 0; i < VKT_ARRAY_SIZE(other); i++) {
    vkrt_lab_matmul_tile keep;
    vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, other[i].slot, &keep));
    vkt_check(app, vkrt_lab_matmul_tile_set(app, 0, other[i].slot, &other[i].tile));
    int64_t M = other[i].slot == VKRT_LAB_TILE_COOPMAT_MEDIUM ? medium.bn - 3 : past;
    for (unsigned t = 1; t < VKT_ARRAY_SIZE(types); t++) {
      vkrt_type wt = types[t];
      if (!type_enabled(wt))
        continue;
      int64_t B = vkrt_type_block(wt);
      bool q = B > 1;
      const struct mm cases[] = {
          {wt, q ? 3 * B : 136, 67, M, 1, 1, 0, 0, 3, 4, false, 0, TILED},
          {wt, q ? 4 * B : 1024, 45, M, 1, 1, 0, 0, 0, 0, true, 0, TILED},
      };
      for (unsigned c = 0; c < VKT_ARRAY_SIZE(cases); c++)
        run(app, &cases[c]);
    }
    vkt_check(app, vkrt_lab_matmul_tile_set(app, 0, other[i].slot, &keep));
  }
  int64_t w16_now;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_W16_MIN_M, &w16_now));
  assert_int_equal(w16_now, w16_default);
  vkt_close(app);
}

/* The crossover decides (the lab's knob moves it; 0 restores the per-type plan), and the
 * tiles and the cooperative-matrix kernels can be swapped for benches. */
static void test_crossover_and_tiles(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  pin_min_m = 0;
  int64_t min_m;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_TILED_MIN_M, &min_m));
  assert_true(min_m >= 2);
  /* 0 restores the per-type crossovers chosen at open (vkrt-probe's "matmul:" line) */
  char plan[3][16384];
  vkrt_describe(app, false, plan[0], sizeof(plan[0]));
  knob(app, VKRT_LAB_MATMUL_TILED_MIN_M, min_m + 1);
  vkrt_describe(app, false, plan[1], sizeof(plan[1]));
  knob(app, VKRT_LAB_MATMUL_TILED_MIN_M, 0);
  vkrt_describe(app, false, plan[2], sizeof(plan[2]));
  if (!strstr(plan[0], "matrix-vector below M = ") || !strcmp(plan[0], plan[1]))
    fail_msg("the knob does not show in the plan: %s", plan[1]);
  if (strcmp(plan[0], plan[2]))
    fail_msg("knob 0 left\n%s\nnot the plan at open\n%s", plan[2], plan[0]);
  /* each type's own crossover (a device may measure them apart), in the order of types[] */
  unsigned type_min_m[VKT_ARRAY_SIZE(types)];
  const char *at = strstr(plan[0], "matrix-vector below M = ");
  assert_non_null(at);
  assert_int_equal(sscanf(at, "matrix-vector below M = %u (f32) %u (f16) %u (q8_0) %u (q4_K) %u (q6_K)",
                          &type_min_m[0], &type_min_m[1], &type_min_m[2], &type_min_m[3],
                          &type_min_m[4]),
                   5);
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(types); t++) {
    vkrt_type wt = types[t];
    if (!type_enabled(wt))
      continue;
    int64_t K = vkrt_type_block(wt) > 1 ? 2 * vkrt_type_block(wt) : 128;
    min_m = type_min_m[t];
    assert_true(min_m >= 2);
    struct mm c = {wt, K, 37, min_m - 1, 1, 1, 0, 0, 0, 0, false, 0, MATVEC};
    run(app, &c);
    c.M = min_m, c.expect = TILED;
    run(app, &c);
    knob(app, VKRT_LAB_MATMUL_TILED_MIN_M, 3);
    c.M = 2, c.expect = MATVEC;
    run(app, &c);
    c.M = 3, c.expect = TILED;
    run(app, &c);
    knob(app, VKRT_LAB_MATMUL_TILED_MIN_M, 0);
    /* forced matrix-vector past the crossover */
    c.M = min_m + 4, c.force = 1, c.expect = MATVEC;
    run(app, &c);
  }
  /* other tiles: 32 x 16 with 2 rows per invocation, 64 invocations, 32-k steps; 16 x 16
   * with 64-k steps in two buffers, workgroups in strips of 3 row tiles (N 50: 4 row tiles,
   * a strip of 3 and one of 1); 32 x 16 with 128-k steps (K 136: a partial last step) in
   * strips of 1 */
  static const vkrt_lab_matmul_tile tiles[] = {
      {64, 32, 16, 2, 32, 1}, {64, 16, 16, 2, 64, 2, 0, 3}, {64, 32, 16, 2, 128, 1, 0, 1}};
  vkrt_lab_matmul_tile keep;
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_PORTABLE_LARGE, &keep));
  int64_t coopmat_was;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_MATMUL_COOPMAT, &coopmat_was));
  knob(app, VKRT_LAB_MATMUL_COOPMAT, 0);
  for (unsigned i = 0; i < VKT_ARRAY_SIZE(tiles); i++) {
    vkt_check(app, vkrt_lab_matmul_tile_set(app, 0, VKRT_LAB_TILE_PORTABLE_LARGE, &tiles[i]));
    for (unsigned t = 0; t < VKT_ARRAY_SIZE(types); t++)
      if (type_enabled(types[t])) {
        int64_t K = vkrt_type_block(types[t]) > 1 ? 2 * vkrt_type_block(types[t]) : 136;
        struct mm c = {types[t], K, 50, 70, 1, 1, 0, 0, 0, 0, false, 0, TILED};
        run(app, &c);
      }
  }
  knob(app, VKRT_LAB_MATMUL_COOPMAT, coopmat_was);
  vkt_check(app, vkrt_lab_matmul_tile_set(app, 0, VKRT_LAB_TILE_PORTABLE_LARGE, &keep));
  /* tiles the kernel cannot take are refused, saying why */
  vkrt_lab_matmul_tile bad = {256, 64, 30, 4};
  assert_int_equal(vkrt_lab_matmul_tile_set(app, 0, VKRT_LAB_TILE_PORTABLE_LARGE, &bad),
                   VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(vkrt_last_error(app), "divide"));
  bad = (vkrt_lab_matmul_tile){256, 128, 128, 3};
  assert_int_equal(vkrt_lab_matmul_tile_set(app, 0, VKRT_LAB_TILE_COOPMAT_LARGE, &bad),
                   VKRT_ERROR_INVALID_ARGUMENT);
  bad = (vkrt_lab_matmul_tile){64, 32, 16, 2, 32, 3};
  assert_int_equal(vkrt_lab_matmul_tile_set(app, 0, VKRT_LAB_TILE_PORTABLE_SMALL, &bad),
                   VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(vkrt_last_error(app), "stages"));
  assert_int_equal(vkrt_lab_set(app, 0, VKRT_LAB_MATMUL_TILED_MIN_M, -1),
                   VKRT_ERROR_INVALID_ARGUMENT);
  pin_min_m = 9;
  vkt_close(app);
}

/* w past one binding (maxStorageBufferRange lowered to 16 KiB): M past the crossover falls
 * back to the matrix-vector kernels, which bind w in row slices, counted and logged once;
 * forced onto the tiled kernel it is refused with the reason. */
static void test_fallback(void **state) {
  (void)state;
  vkt_log_capture cap = {0};
  vkrt_options o;
  vkt_options(&o);
  o.log = vkt_log_capture_fn;
  o.log_user = &cap;
  vkrt_appliance *app = vkt_open(&o);
  pin_min_m = 9; /* M = 12 past the crossover whatever the device measured */
  vkt_check(app, vkrt_lab_limits_set(app, 0, 0, false, 16384));
  uint64_t split = ran(app).matvec_split;
  int n = 0;
  for (unsigned t = 0; t < 2; t++) {
    if (!type_enabled(types[t]))
      continue;
    struct mm c = {types[t], 256, 100, 12, 1, 1, 0, 0, 0, 0, false, 0, FALLBACK};
    run(app, &c);
    n++;
    vkt_hbuf wb = vkt_hbuf_new(app, 256 * 100 * 4), xb = vkt_hbuf_new(app, 256 * 12 * 4), db = vkt_hbuf_new(app, 100 * 12 * 4);
    vkrt_tensor w = vkrt_tensor_contiguous(wb.buf, 0, types[t], 256, 100, 1, 1);
    vkrt_tensor x = vkrt_tensor_contiguous(xb.buf, 0, VKRT_TYPE_F32, 256, 12, 1, 1);
    vkrt_tensor d = vkrt_tensor_contiguous(db.buf, 0, VKRT_TYPE_F32, 100, 12, 1, 1);
    knob(app, VKRT_LAB_FORCE_MATMUL_KERNEL, 2);
    assert_int_equal(vkrt_op_matmul(&d, &w, &x), VKRT_ERROR_INVALID_ARGUMENT);
    knob(app, VKRT_LAB_FORCE_MATMUL_KERNEL, 0);
    if (!strstr(vkrt_last_error(app), "more than one binding"))
      fail_msg("message: %s", vkrt_last_error(app));
    vkrt_buffer_destroy(wb.buf);
    vkrt_buffer_destroy(xb.buf);
    vkrt_buffer_destroy(db.buf);
  }
  assert_int_equal(ran(app).matvec_split - split, n);
  if (n && !strstr(cap.text, "tiled kernel not possible"))
    fail_msg("no fallback in the log: %s", cap.text);
  vkt_check(app, vkrt_lab_limits_set(app, 0, 0, false, 0));
  vkt_close(app);
}

int main(void) {
  rng = vkt_seed(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tiled),
      cmocka_unit_test(test_crossover_and_tiles),
      cmocka_unit_test(test_split_k),
      cmocka_unit_test(test_coopmat),
      cmocka_unit_test(test_fallback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
