/* Quantized weights (Q8_0, Q4_K, Q6_K) and the SwiGLU gate on lavapipe with validation: the CPU
 * reference against hand-built blocks (the ggml definition, every scale/min packing case, every
 * Q6_K quarter and scale), then vkrt_op_matmul
 * (M 1..8 in one pass and beyond, every kernel variant, views with offsets and padded rows,
 * batches with a broadcast w) and vkrt_op_copy dequantizing into f32/f16 on fresh random
 * blocks with extreme scales, outputs poisoned, against float64 sums of the reference
 * dequantization; the descriptor rules of block types; vkrt_op_swiglu (in place too). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/vk_test.h"
#include "vkrt/vkrt_lab.h"

static uint64_t rng;

static const vkrt_type qtypes[] = {VKRT_TYPE_Q8_0, VKRT_TYPE_Q4_K, VKRT_TYPE_Q6_K};
static bool qtype_enabled(vkrt_type t) {
  switch (t) {
  case VKRT_TYPE_Q8_0: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q8_0);
  case VKRT_TYPE_Q4_K: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K);
  default: return IS_ENABLED(CONFIG_VKRT_KERNEL_Q6_K);
  }
}

/* The Kconfig symbol of a quantized type's kernels, as the ops name it when compiled out. */
static const char *qtype_symbol(vkrt_type t) {
  return t == VKRT_TYPE_Q8_0 ? "CONFIG_VKRT_KERNEL_Q8_0"
         : t == VKRT_TYPE_Q4_K ? "CONFIG_VKRT_KERNEL_Q4_K" : "CONFIG_VKRT_KERNEL_Q6_K";
}

static void put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

/* ---- the reference against the format's definition ------------------------------------ */

static void test_reference(void **state) {
  (void)state;
  /* Q8_0: d = 0.5, q[i] = i - 16 (and -128, 127 at the ends) */
  uint8_t b8[34];
  put_u16(b8, 0x3800); /* 0.5 */
  for (int i = 0; i < 32; i++)
    b8[2 + i] = (uint8_t)(int8_t)(i - 16);
  b8[2] = 0x80, b8[33] = 0x7f;
  float y[256];
  assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_Q8_0, b8, y, 32), VKRT_OK);
  assert_true(y[0] == -64.0f && y[31] == 63.5f);
  for (int i = 1; i < 31; i++)
    assert_true(y[i] == 0.5f * (float)(i - 16));

  /* Q4_K: d = 2, dmin = 0.25; sub-block j has scale 10 + j... with the 6-bit packing: j < 4
   * in the low 6 bits of scales[j] (scale) and scales[j + 4] (min); j >= 4 split between the
   * nibbles of scales[j + 4] and the top 2 bits of scales[j - 4] / scales[j]. */
  uint8_t b4[144] = {0};
  put_u16(b4, 0x4000);     /* d = 2 */
  put_u16(b4 + 2, 0x3400); /* dmin = 0.25 */
  uint8_t sc[8] = {1, 63, 17, 40, 33, 62, 5, 48}, mn[8] = {0, 2, 63, 9, 50, 1, 31, 60};
  uint8_t *s = b4 + 4;
  for (int j = 0; j < 4; j++) {
    s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  for (int i = 0; i < 128; i++)
    b4[16 + i] = (uint8_t)((i * 7 + 3) & 255);
  assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_Q4_K, b4, y, 256), VKRT_OK);
  for (int e = 0; e < 256; e++) {
    int g = e / 64, half = (e % 64) / 32, l = e % 32, j = 2 * g + half;
    int byte = b4[16 + 32 * g + l], q = half ? byte >> 4 : byte & 15;
    float want = 2.0f * (float)sc[j] * (float)q - 0.25f * (float)mn[j];
    if (y[e] != want)
      fail_msg("q4_K element %d (sub-block %d): %g, expected %g", e, j, y[e], want);
  }
  /* Q6_K: d = 0.5, scales[16] running through both signs and the int8 ends; weight
   * e = 128 h + 32 j + l carries the 6-bit q(e) = (37 e + 11) % 64, its low nibble in
   * ql[64 h + 32 (j % 2) + l] (low half for j < 2, high for j >= 2) and its top two bits in
   * bits 2 j, 2 j + 1 of qh[32 h + l]; w = d * scales[8 h + l / 16 + 2 j] * (q - 32). */
  uint8_t b6[210] = {0};
  static const int8_t sc6[16] = {1, -1, 127, -128, 5, -7, 64, -64, 3, 2, -3, 100, -100, 17, 0, 9};
  memcpy(b6 + 192, sc6, 16);
  put_u16(b6 + 208, 0x3800); /* d = 0.5 */
  for (int e = 0; e < 256; e++) {
    int h = e / 128, j = (e % 128) / 32, l = e % 32, q = (37 * e + 11) % 64;
    b6[64 * h + 32 * (j % 2) + l] |= (uint8_t)((q & 15) << (j < 2 ? 0 : 4));
    b6[128 + 32 * h + l] |= (uint8_t)((q >> 4) << (2 * j));
  }
  assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_Q6_K, b6, y, 256), VKRT_OK);
  for (int e = 0; e < 256; e++) {
    int h = e / 128, j = (e % 128) / 32, l = e % 32, q = (37 * e + 11) % 64;
    float want = 0.5f * (float)sc6[8 * h + l / 16 + 2 * j] * (float)(q - 32);
    if (y[e] != want)
      fail_msg("q6_K element %d (half %d, quarter %d, l %d): %g, expected %g", e, h, j, l, y[e], want);
  }
  /* a few by hand: e 0 (scale 0): q 11, scale 1; e 47 (quarter 1, l 15: scale 2): q 22,
   * 127; e 80 (quarter 2, l 16: scale 5): q 27, -7; e 100 (quarter 3, l 4: scale 6): q 63,
   * 64; e 200 (half 1, quarter 2, l 8: scale 12): q 51, -100; e 255 (half 1, quarter 3,
   * l 31: scale 15): q 38, 9 */
  assert_true(y[0] == -10.5f && y[47] == -635.0f && y[80] == 17.5f && y[100] == 992.0f &&
              y[200] == -950.0f && y[255] == 27.0f);
  /* bad arguments */
  assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_Q6_K, b6, y, 128), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_Q4_K, b4, y, 100), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_COUNT, b4, y, 32), VKRT_ERROR_INVALID_ARGUMENT);
  assert_int_equal(vkrt_type_block(VKRT_TYPE_Q4_K), 256);
  assert_int_equal(vkrt_type_size(VKRT_TYPE_Q8_0), 34);
  assert_string_equal(vkrt_type_str(VKRT_TYPE_Q4_K), "q4_K");
  assert_int_equal(vkrt_type_block(VKRT_TYPE_Q6_K), 256);
  assert_int_equal(vkrt_type_size(VKRT_TYPE_Q6_K), 210);
  assert_string_equal(vkrt_type_str(VKRT_TYPE_Q6_K), "q6_K");
}

/* ---- random blocks ------------------------------------------------------------------- */

enum scales { SCALE_NORMAL, SCALE_EXTREME };

/* A random f16 scale: normal ones in [-range, range], extreme ones cycle through the f16
 * maximum, the smallest subnormal, zero, negative zero and tiny normals. */
static uint16_t random_scale(enum scales mode, float range) {
  if (mode == SCALE_EXTREME) {
    static const uint16_t extreme[] = {0x7bff, 0xfbff, 0x0001, 0x8001, 0x0000, 0x8000, 0x0400, 0x03ff};
    return extreme[vkrt_xorshift(&rng) % (sizeof(extreme) / sizeof(extreme[0]))];
  }
  float f;
  vkt_fill_random_f32(&f, 1, -range, range, &rng);
  return vkrt_f32_to_f16(f);
}

/* Fills the rows of a block tensor (dense blocks along dim 0, rows at nb[1..3]) with random
 * quants and scales. */
static void fill_blocks(uint8_t *base, const vkrt_tensor *t, enum scales mode) {
  uint64_t bs = vkrt_type_size(t->type), blocks = (uint64_t)t->ne[0] / vkrt_type_block(t->type);
  for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
    for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
      for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
        uint8_t *row = base + t->offset + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
        vkt_fill_random(row, blocks * bs, &rng);
        for (uint64_t b = 0; b < blocks; b++) {
          uint8_t *p = row + b * bs;
          if (t->type == VKRT_TYPE_Q8_0) {
            put_u16(p, random_scale(mode, 0.05f));
          } else if (t->type == VKRT_TYPE_Q6_K) { /* the int8 scales stay random bytes */
            put_u16(p + 208, random_scale(mode, 0.002f));
          } else {
            put_u16(p, random_scale(mode, 0.02f));
            put_u16(p + 2, random_scale(mode, 0.02f));
          }
        }
      }
}

/* w[k, n] of batch (i2, i3), dequantized by the reference (one row at a time). */
static float *dequant_rows(const uint8_t *base, const vkrt_tensor *t) {
  int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
  float *out = malloc(sizeof(float) * (size_t)(rows * t->ne[0]));
  int64_t r = 0;
  for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
    for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
      for (int64_t i1 = 0; i1 < t->ne[1]; i1++, r++)
        assert_int_equal(vkrt_dequantize_row(t->type,
                                             base + t->offset + i1 * t->nb[1] + i2 * t->nb[2] +
                                                 i3 * t->nb[3],
                                             out + r * t->ne[0], t->ne[0]),
                         VKRT_OK);
  return out;
}



/* A block tensor {K, N, b2, 1}: rows `pad` whole blocks longer than K (0 = dense), at
 * `offset` bytes. */
static vkrt_tensor block_tensor(vkrt_buffer *b, uint64_t offset, vkrt_type type, int64_t K,
                                int64_t N, int64_t b2, int64_t pad) {
  int64_t bs = (int64_t)vkrt_type_size(type), per = vkrt_type_block(type);
  vkrt_tensor t = {.buffer = b, .offset = offset, .type = type, .ne = {K, N, b2, 1}};
  t.nb[0] = bs;
  t.nb[1] = bs * (K / per + pad);
  t.nb[2] = t.nb[1] * N;
  t.nb[3] = t.nb[2] * b2;
  return t;
}

static uint64_t block_extent(const vkrt_tensor *t) {
  uint64_t e = t->offset + (uint64_t)t->ne[0] / vkrt_type_block(t->type) * vkrt_type_size(t->type);
  for (int i = 1; i < 4; i++)
    e += (uint64_t)(t->ne[i] - 1) * (uint64_t)t->nb[i];
  return e;
}

struct mm_case {
  int64_t K, N, M, w2, b2, pad;
  uint64_t w_off, x_off; /* bytes */
  int variant;           /* 0 = choose, else forced */
  enum scales scales;
  bool q8;               /* the appliance was opened with VKRT_ACTIVATIONS_Q8 */
  bool acc;              /* vkrt_op_matmul_add: dst += w x */
  uint32_t columns;      /* ... and quant_activations_columns = this (0: one column) */
};

/* The q8x variant (x rounded to 8 bits, integer dot products): the last one. */
static int q8x_variant(void) {
  return vkrt_lab_variant_count(VKRT_LAB_QUANT_VARIANT);
}

/* Sets dev0's q8x grid to `workgroups` (VKRT_LAB_Q8X_WORKGROUPS) and returns the one before */
static int64_t set_q8x_grid(vkrt_appliance *app, int64_t workgroups) {
  int64_t before;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_Q8X_WORKGROUPS, &before));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_Q8X_WORKGROUPS, workgroups));
  return before;
}

/* What the q8x kernels compute for one row, in double from their definition: x rounded to
 * 8 bits per 32 values (dx = max|x| / 127, q = round(x 127 / max|x|)) times the scaled
 * quants a_k, minus the Q4_K mins b_k times the exact x (w_k = a_k - b_k; `mins` holds -b,
 * NULL for Q8_0 and Q6_K: b = 0).
 * *tol gets the worst-case f32 error (integer dot products are exact: at most K / 8 + 16
 * rounded float operations per result, 2^-24 each) plus |a_k| dx for every x that lies
 * within 1e-3 of a rounding tie (the device's 127 / max|x| may round the other way there). */
static double q8x_reference(const float *w, const float *mins, const float *x, int64_t K,
                            double *tol) {
  double sum = 0, mag = 0, ties = 0;
  for (int64_t k0 = 0; k0 < K; k0 += 32) {
    float amax = 0;
    for (int64_t k = k0; k < k0 + 32; k++)
      amax = fmaxf(amax, fabsf(x[k]));
    float inv = amax > 0 ? 127.0f / amax : 0, dx = amax / 127.0f;
    for (int64_t k = k0; k < k0 + 32; k++) {
      float v = x[k] * inv, q = fminf(fmaxf(roundf(v), -127), 127);
      double a = (double)w[k] - (mins ? mins[k] : 0); /* w + b */
      double p = a * dx * q, m = mins ? -(double)mins[k] * x[k] : 0;
      sum += p - m;
      mag += fabs(p) + fabs(m);
      if (fabsf(fabsf(v - truncf(v)) - 0.5f) < 1e-3f)
        ties += fabs(a) * dx;
    }
  }
  *tol = ((double)K / 8 + 16) * 0x1p-24 * mag + ties + 1e-30;
  return sum;
}

/* Q4_K's mins alone (-b) of the rows of w (in wb): its blocks with every quant 0 */
static float *q4_k_mins(const vkt_hbuf *wb, const vkrt_tensor *w) {
  uint8_t *z = malloc(wb->size);
  assert_non_null(z);
  memcpy(z, wb->map, wb->size);
  for (int64_t i = 0; i < w->ne[1] * w->ne[2]; i++)
    for (int64_t blk = 0; blk < w->ne[0] / 256; blk++)
      memset(z + w->offset + (i % w->ne[1]) * w->nb[1] + (i / w->ne[1]) * w->nb[2] + blk * 144 + 16,
             0, 128);
  float *mins = dequant_rows(z, w);
  free(z);
  return mins;
}

static void run_quant_matmul(vkrt_appliance *app, vkrt_type wt, const struct mm_case *c) {
  vkrt_tensor w = block_tensor(NULL, c->w_off, wt, c->K, c->N, c->w2, c->pad);
  vkrt_tensor x = vkrt_tensor_contiguous(NULL, c->x_off, VKRT_TYPE_F32, c->K, c->M, c->b2, 1);
  /* dst rows padded by 3 elements (never written) */
  vkrt_tensor d = {.offset = 8, .type = VKRT_TYPE_F32, .ne = {c->N, c->M, c->b2, 1}};
  d.nb[0] = 4;
  d.nb[1] = 4 * (c->N + 3);
  d.nb[2] = d.nb[1] * c->M;
  d.nb[3] = d.nb[2] * c->b2;
  vkt_hbuf wb = vkt_hbuf_new(app, block_extent(&w) + 7), xb = vkt_hbuf_new(app, c->x_off + 4 * c->K * c->M * c->b2),
       db = vkt_hbuf_new(app, 8 + (uint64_t)d.nb[3] + 4);
  w.buffer = wb.buf, x.buffer = xb.buf, d.buffer = db.buf;
  vkt_fill_random(wb.map, wb.size, &rng);
  fill_blocks(wb.map, &w, c->scales);
  vkt_fill_random_f32((float *)(xb.map + c->x_off), (size_t)(c->K * c->M * c->b2), -1.0f, 1.0f, &rng);
  vkt_poison(db.map, db.size);
  for (int64_t i2 = 0; c->acc && i2 < c->b2; i2++) /* what dst += w x adds to */
    for (int64_t m = 0; m < c->M; m++)
      vkt_fill_random_f32((float *)(void *)(db.map + 8 + m * d.nb[1] + i2 * d.nb[2]), (size_t)c->N,
                          -4.0f, 4.0f, &rng);
  uint8_t *before = malloc(db.size);
  memcpy(before, db.map, db.size);
  float *wf = dequant_rows(wb.map, &w);
  const float *xf = (const float *)(xb.map + c->x_off);
  float *mins = wt == VKRT_TYPE_Q4_K ? q4_k_mins(&wb, &w) : NULL;

  vkrt_lab_counters ran0, ran1;
  vkt_check(app, vkrt_lab_counters_get(app, 0, &ran0));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_QUANT_VARIANT, c->variant));
  /* the matrix-vector kernels at every M (past the crossover: test_matmul_tiled) */
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, 1));
  vkrt_status s = c->acc ? vkrt_op_matmul_add(&d, &w, &x) : vkrt_op_matmul(&d, &w, &x);
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, 0));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_QUANT_VARIANT, 0));
  vkt_check(app, s);
  vkt_check(app, vkrt_finish(app, 0));
  vkt_check(app, vkrt_lab_counters_get(app, 0, &ran1));
  assert_int_equal(ran1.quant_matvec - ran0.quant_matvec, 1);
  /* the read pattern: the forced one, else the most preferred one the layout allows (words:
   * any; vec16: rows and x 16-byte aligned, Q8_0 rows of 8k blocks; lanew: rows 4-byte
   * aligned, Q8_0 rows of an even block count, x 16-byte aligned; kspace: x 16-byte aligned,
   * Q4_K rows 8-byte aligned) */
  int64_t blocks = c->K / vkrt_type_block(wt);
  bool x16 = c->x_off % 16 == 0 && (c->K * 4) % 16 == 0;
  bool fits[VKRT_LAB_QUANT_READ_COUNT] = {
      true,
      c->w_off % 16 == 0 && (uint64_t)w.nb[1] % 16 == 0 && x16 &&
          (wt != VKRT_TYPE_Q8_0 || blocks % 8 == 0),
      c->w_off % 4 == 0 && (uint64_t)w.nb[1] % 4 == 0 && x16 &&
          (wt != VKRT_TYPE_Q8_0 || blocks % 2 == 0),
      x16 && (wt == VKRT_TYPE_Q8_0 || (c->w_off % 8 == 0 && (uint64_t)w.nb[1] % 8 == 0)),
      /* q8x: K <= 16384 for one column (Q6_K: one column only), 12288 for more,
         Q4_K rows 16-byte aligned, integer dot products */
      (c->M == 1 || wt != VKRT_TYPE_Q6_K) &&
          c->K <= (c->M == 1 ? VKRT_ACTIVATIONS_Q8_MAX_K : VKRT_LAB_Q8X_COLUMNS_MAX_K) && x16 &&
          (wt != VKRT_TYPE_Q4_K || (c->w_off % 16 == 0 && (uint64_t)w.nb[1] % 16 == 0)) &&
          vkrt_lab_variant_usable(app, 0, VKRT_LAB_QUANT_VARIANT, q8x_variant())};
  /* Q6_K: a forced Q6_K variant (the words kernel, or with x 16-byte aligned a stream kernel:
   * counted vec16); else the q8x kernel where 8-bit activations were asked for and it fits;
   * else with x 16-byte aligned a stream kernel (one column: stream or prefetch-rows-b by N;
   * more: the one for that many columns, built where stream is); the rest its kernel per
   * column count (words) */
  bool q6_forced = vkrt_lab_quant_q6_k_variant_usable(app, 0, c->variant);
  bool q6_stream = x16 && (q6_forced ? c->variant != 1
                                     : vkrt_lab_quant_q6_k_variant_usable(app, 0, 14) ||
                                           (c->M == 1 && vkrt_lab_quant_q6_k_variant_usable(app, 0, 12)));
  int q6_want = !q6_forced && c->q8 && fits[VKRT_LAB_QUANT_READ_Q8X] ? VKRT_LAB_QUANT_READ_Q8X
                : q6_stream                                          ? VKRT_LAB_QUANT_READ_VEC16
                                                                     : VKRT_LAB_QUANT_READ_WORDS;
  int want = wt == VKRT_TYPE_Q6_K ? q6_want
             : c->variant          ? vkrt_lab_quant_read_of(c->variant)
                                   : -1;
  if (want == VKRT_LAB_QUANT_READ_Q8X && !fits[want]) /* columns past its K: kspace's kernel */
    want = VKRT_LAB_QUANT_READ_KSPACE;
  /* unforced: one column, or (quant_activations_columns) up to that many from the type's
   * crossover on */
  int64_t min_m = 2;
  if (wt != VKRT_TYPE_Q6_K)
    vkt_check(app, vkrt_lab_get(app, 0, wt == VKRT_TYPE_Q8_0 ? VKRT_LAB_Q8X_COLUMNS_MIN_M_Q8_0
                                                             : VKRT_LAB_Q8X_COLUMNS_MIN_M_Q4_K,
                                &min_m));
  bool q8_m = c->M == 1 || (c->M <= (int64_t)c->columns && c->M >= min_m);
  if (want < 0 && c->q8 && q8_m && fits[VKRT_LAB_QUANT_READ_Q8X])
    want = VKRT_LAB_QUANT_READ_Q8X;
  /* a variant that wants rows on every compute unit only where N gives them (one column) */
  vkrt_lab_device info;
  vkt_check(app, vkrt_lab_device_get(app, 0, &info));
  for (int i = 0; want < 0 && i < VKRT_LAB_QUANT_READ_COUNT - 1; i++) {
    int pref = vkrt_lab_quant_preference(wt, i);
    int kind = vkrt_lab_quant_read_of(pref);
    assert_in_range(kind, 0, VKRT_LAB_QUANT_READ_COUNT - 1);
    uint64_t rows = vkrt_lab_quant_min_rows_per_unit(wt, pref);
    if (fits[kind] && (c->M > 1 || info.compute_units == 0 || (uint64_t)c->N >= rows * info.compute_units))
      want = kind;
  }
  for (int i = 0; i < VKRT_LAB_QUANT_READ_COUNT; i++)
    if (ran1.quant_read[i] - ran0.quant_read[i] != (i == want ? 1u : 0u))
      fail_msg("%s K %lld w_off %llu x_off %llu: read pattern %d not taken", vkrt_type_str(wt),
               (long long)c->K, (unsigned long long)c->w_off, (unsigned long long)c->x_off, want);

  for (int64_t i2 = 0; i2 < c->b2; i2++)
    for (int64_t m = 0; m < c->M; m++)
      for (int64_t n = 0; n < c->N; n++) {
        const float *wr = wf + ((i2 / (c->b2 / c->w2)) * c->N + n) * c->K;
        const float *xr = xf + (i2 * c->M + m) * c->K;
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < c->K; k++) {
          sum += (double)wr[k] * xr[k];
          mag += fabs((double)wr[k] * xr[k]);
        }
        double tol = 4e-6 * mag * sqrt((double)c->K) + 1e-30;
        if (want == VKRT_LAB_QUANT_READ_Q8X) /* x rounded to 8 bits: that exactly */
          sum = q8x_reference(wr, mins ? mins + (wr - wf) : NULL, xr, c->K, &tol);
        uint64_t a = d.offset + n * 4 + m * d.nb[1] + i2 * d.nb[2];
        if (c->acc) { /* the kernel adds its f32 sum to what dst held */
          float prev;
          memcpy(&prev, before + a, 4);
          sum += prev;
          tol += 0x1p-23 * fabs(sum);
        }
        float g;
        memcpy(&g, db.map + a, 4);
        if (!(fabs(g - sum) <= tol))
          fail_msg("%s matmul%s K %lld N %lld M %lld b2 %lld w_off %llu variant %d: [%lld,%lld,%lld] = %.9g, "
                   "expected %.9g", vkrt_type_str(wt), c->acc ? "_add" : "", (long long)c->K, (long long)c->N,
                   (long long)c->M, (long long)c->b2, (unsigned long long)c->w_off, c->variant,
                   (long long)n, (long long)m, (long long)i2, g, sum);
        memcpy(db.map + a, before + a, 4);
      }
  assert_memory_equal(db.map, before, db.size); /* nothing else written */
  free(wf);
  free(mins);
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

static void test_quant_matmul(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(qtypes); t++) {
    vkrt_type wt = qtypes[t];
    if (!qtype_enabled(wt))
      continue;
    int64_t B = vkrt_type_block(wt);
    const struct mm_case cases[] = {
      /* decode: aligned (16-byte kernels), odd N, one row, one block */
      {8 * B, 33, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL},
      {B, 1, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL},
      {3 * B, 7, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL},        /* odd block count: word kernels */
      {5 * B, 5, 1, 1, 1, 1, 2, 4, 0, SCALE_NORMAL},        /* padded rows, 2-byte offset */
      {16 * B, 9, 1, 1, 1, 0, 4 + 32 * (t == 0), 0, 0, SCALE_NORMAL}, /* 4-byte offset */
      {8 * B, 17, 1, 2, 4, 0, 16, 16, 0, SCALE_NORMAL},     /* batches, broadcast w */
      {8 * B, 19, 1, 1, 1, 0, 0, 0, 0, SCALE_EXTREME},
      {3 * B, 6, 1, 1, 1, 0, 0, 0, 0, SCALE_EXTREME},
      /* M 2..8 in one pass, beyond in groups of 8 */
      {8 * B, 13, 2, 1, 1, 0, 0, 0, 0, SCALE_NORMAL},
      {2 * B, 11, 8, 1, 1, 1, 2, 8, 0, SCALE_NORMAL},
      {8 * B, 7, 5, 1, 2, 0, 0, 0, 0, SCALE_EXTREME},
      {3 * B, 7, 4, 1, 1, 1, 2, 0, 0, SCALE_NORMAL},  /* Q8_0 rows off 16 bytes, x aligned */
      {4 * B, 9, 17, 1, 1, 0, 0, 0, 0, SCALE_NORMAL},
      {8 * B, 21, 33, 1, 1, 0, 0, 0, 0, SCALE_NORMAL},
      /* vkrt_op_matmul_add: one column, several, past 8, batches with broadcast w */
      {8 * B, 33, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, false, true},
      {8 * B, 13, 3, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, false, true},
      {4 * B, 9, 11, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, false, true},
      {8 * B, 17, 1, 2, 4, 0, 16, 16, 0, SCALE_NORMAL, false, true},
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      struct mm_case c = cases[i];
      if (wt == VKRT_TYPE_Q4_K && c.w_off % 4)
        c.w_off += 2; /* Q4_K offsets are whole words */
      run_quant_matmul(app, wt, &c);
    }
    if (wt == VKRT_TYPE_Q6_K) {
      /* rows past a workgroup's 16 super-blocks per step (the last step part idle), at 2 mod
       * 4 bytes; 5 and 6 columns (the 8-column kernel with clamped columns) with batches on
       * w; x off 16 bytes (the words kernel); a forced variant with no Q6_K form (2: vec16)
       * leaves the choice to the op (Q8_0 and Q4_K refuse vec16 on such rows) */
      const struct mm_case more[] = {
        {40 * B, 5, 1, 1, 1, 0, 2, 0, 0, SCALE_NORMAL},
        {40 * B, 5, 6, 2, 2, 0, 0, 0, 0, SCALE_NORMAL},
        {19 * B, 9, 5, 1, 1, 1, 6, 4, 0, SCALE_EXTREME},
        {6 * B, 7, 1, 1, 1, 1, 2, 12, 2, SCALE_NORMAL},
        {6 * B, 7, 1, 1, 1, 1, 2, 4, 0, SCALE_NORMAL},
        {6 * B, 7, 3, 1, 1, 1, 2, 12, 2, SCALE_NORMAL, false, true},
      };
      for (unsigned i = 0; i < VKT_ARRAY_SIZE(more); i++)
        run_quant_matmul(app, wt, &more[i]);
      /* every Q6_K variant (words and the stream kernels, with their row counts) on one
       * column: rows in the last workgroup short of its 4 R, rows at 2 mod 4, several
       * super-blocks per warp (the prefetching ones carry words a step), batches with a
       * broadcast w and dst += w x; and on 3 columns (words, or the stream 4-column kernel) */
      for (int v = 1; v <= vkrt_lab_variant_count(VKRT_LAB_QUANT_VARIANT); v++) {
        if (!vkrt_lab_quant_q6_k_variant_usable(app, 0, v))
          continue;
        const struct mm_case sweep[] = {
          {16 * B, 37, 1, 1, 1, 0, 0, 0, v, SCALE_NORMAL},
          {3 * B, 5, 1, 1, 1, 1, 2, 0, v, SCALE_EXTREME},
          {40 * B, 21, 1, 1, 1, 0, 2, 16, v, SCALE_NORMAL},
          {9 * B, 17, 1, 2, 4, 0, 16, 16, v, SCALE_NORMAL, false, true},
          {11 * B, 13, 3, 1, 2, 1, 2, 0, v, SCALE_NORMAL}, /* the 4-column kernel, forced */
        };
        for (unsigned i = 0; i < VKT_ARRAY_SIZE(sweep); i++)
          run_quant_matmul(app, wt, &sweep[i]);
      }
      continue;
    }
    /* every variant on an aligned shape (those dev0 can run: the forcing-only kernels are
     * built with CONFIG_VKRT_LAB_KERNEL_VARIANTS); the 16-byte ones refuse unaligned rows */
    for (int v = 1; v <= vkrt_lab_variant_count(VKRT_LAB_QUANT_VARIANT); v++) {
      if (!vkrt_lab_variant_usable(app, 0, VKRT_LAB_QUANT_VARIANT, v)) {
        print_message("vkrt-test: %s variant %s: not usable on dev0 in this build\n",
                      vkrt_type_str(wt), vkrt_lab_variant_name(VKRT_LAB_QUANT_VARIANT, v));
        continue;
      }
      struct mm_case c = {16 * B, 37, 1, 1, 1, 0, 0, 0, v, SCALE_NORMAL};
      run_quant_matmul(app, wt, &c);
      c.M = 3;
      run_quant_matmul(app, wt, &c);
      /* a row shorter than one workgroup stride: idle invocations, the last block's clamped x */
      struct mm_case tail = {(wt == VKRT_TYPE_Q8_0 ? 8 : 6) * B, 5, 1, 1, 1, 0, 0, 0, v, SCALE_EXTREME};
      run_quant_matmul(app, wt, &tail);
      /* rows long enough for several units per invocation (the prefetching kernels carry the
       * next unit's words from one step to the next) */
      struct mm_case longer = {(wt == VKRT_TYPE_Q8_0 ? 264 : 40) * B, 5, 1, 1, 1, 0, 0, 0, v, SCALE_NORMAL};
      run_quant_matmul(app, wt, &longer);
      /* batches with a broadcast w, w and x at 16-byte offsets, odd N */
      struct mm_case batched = {8 * B, 17, 1, 2, 4, 0, 16, 16, v, SCALE_NORMAL};
      run_quant_matmul(app, wt, &batched);
      batched.acc = true; /* dst += w x */
      run_quant_matmul(app, wt, &batched);
      batched.M = 3;
      run_quant_matmul(app, wt, &batched);
      /* the same with 6 columns (M > 1 kernels carry the next unit too), batches on w */
      longer.M = 6;
      longer.w2 = 2;
      longer.b2 = 2;
      run_quant_matmul(app, wt, &longer);
    }
    {
      vkrt_buffer *wb, *xb, *db;
      vkt_check(app, vkrt_buffer_create(app, 0, 4096 * 4, 0, &wb));
      vkt_check(app, vkrt_buffer_create(app, 0, 4096 * 4, 0, &xb));
      vkt_check(app, vkrt_buffer_create(app, 0, 4096, 0, &db));
      vkrt_tensor w = block_tensor(wb, 4, wt, 2 * B, 3, 1, 0);
      vkrt_tensor x = vkrt_tensor_contiguous(xb, 0, VKRT_TYPE_F32, 2 * B, 1, 1, 1);
      vkrt_tensor d = vkrt_tensor_contiguous(db, 0, VKRT_TYPE_F32, 3, 1, 1, 1);
      vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_QUANT_VARIANT, 2));
      assert_int_equal(vkrt_op_matmul(&d, &w, &x), VKRT_ERROR_UNAVAILABLE);
      vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_QUANT_VARIANT, 0));
      assert_non_null(strstr(vkrt_last_error(app), "not aligned for it"));
      vkt_check(app, vkrt_finish(app, 0));
      vkrt_buffer_destroy(wb);
      vkrt_buffer_destroy(xb);
      vkrt_buffer_destroy(db);
    }
  }
  vkt_close(app);
}

/* vkrt_open refuses options `o` with INVALID_ARGUMENT, a message naming `field`, no appliance */
static void expect_open_refused(const vkrt_options *o, const char *field) {
  vkrt_appliance *bad = NULL;
  char msg[256];
  assert_int_equal(vkrt_open(o, &bad, msg, sizeof(msg)), VKRT_ERROR_INVALID_ARGUMENT);
  assert_null(bad);
  assert_non_null(strstr(msg, field));
}

/* VKRT_ACTIVATIONS_Q8: one column of x takes the q8x kernel where it fits (the counters say
 * so), within the bound of rounding x; M > 1, K > 16384, x or Q4_K rows off 16 bytes take
 * the f32 kernels (Q6_K rows at any even byte take q8x). The forced q8x variant on 2..8
 * columns of q8_0 and q4_K w (more in groups of 8) takes the q8x kernels for columns (2, 4
 * or 8 a pass over w, fewer where K needs it), up to K 12288, kspace's kernel past it. A
 * value outside the enum is refused by vkrt_open. */
static void test_quant_q8_activations(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  o.quant_activations = 2;
  expect_open_refused(&o, "quant_activations");
  o.quant_activations = VKRT_ACTIVATIONS_Q8;
  vkrt_appliance *app = vkt_open(&o);
  if (!vkrt_lab_variant_usable(app, 0, VKRT_LAB_QUANT_VARIANT, q8x_variant()))
    print_message("dev0 has no integer dot products: every case below takes the f32 kernels\n");
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(qtypes); t++) {
    vkrt_type wt = qtypes[t];
    if (!qtype_enabled(wt))
      continue;
    int64_t B = vkrt_type_block(wt);
    int64_t over = (VKRT_ACTIVATIONS_Q8_MAX_K / B + 1) * B; /* the first K past it */
    const int v = wt == VKRT_TYPE_Q6_K ? 0 : q8x_variant();
    const struct mm_case cases[] = {
      {16 * B, 37, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true},
      {(wt == VKRT_TYPE_Q8_0 ? 512 : 64) * B, 45, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true},
      {8 * B, 17, 1, 2, 4, 0, 16, 16, 0, SCALE_NORMAL, true},      /* batches, broadcast w */
      {8 * B, 19, 1, 1, 1, 0, 0, 0, 0, SCALE_EXTREME, true},
      {3 * B, 7, 1, 1, 1, 1, 2 + 2 * (t == 1), 0, 0, SCALE_NORMAL, true}, /* rows off 16 */
      {8 * B, 13, 1, 1, 1, 0, 0, 4, 0, SCALE_NORMAL, true},        /* x off 16 */
      {8 * B, 13, 2, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true},        /* M = 2 */
      /* the forced q8x variant on several columns (Q6_K: not forced, its f32 kernels) */
      {16 * B, 21, 3, 1, 1, 0, 0, 0, v, SCALE_NORMAL, true},       /* M = 3: 4 a pass */
      {8 * B, 9, 5, 1, 2, 0, 16, 16, v, SCALE_EXTREME, true},      /* M = 5, batches */
      {8 * B, 11, 8, 1, 1, 0, 0, 0, v, SCALE_NORMAL, true, true},  /* M = 8, dst += */
      {4 * B, 7, 11, 1, 1, 0, 0, 0, v, SCALE_NORMAL, true},        /* 8 + 3 columns */
      {(12288 / B + 1) * B, 5, 5, 1, 1, 0, 0, 0, v, SCALE_NORMAL, true}, /* K > 12288: kspace */
      {(8192 / B) * B, 3, 3, 1, 1, 0, 0, 0, v, SCALE_NORMAL, true},  /* K 8192 at M 3: 2 a pass */
      {(4096 / B) * B, 3, 8, 1, 1, 0, 0, 0, v, SCALE_NORMAL, true},  /* K 4096 at M 8: 4 a pass */
      {2 * B, 2109, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true},      /* rows past the grid */
      {over, 3, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true},          /* K > 16384 */
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
      run_quant_matmul(app, wt, &cases[i]);
    /* a grid of 2 workgroups: every subgroup walks many rows (batches too) */
    const struct mm_case few[] = {
      {2 * B, 2109, 1, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true},
      {8 * B, 17, 1, 2, 4, 0, 16, 16, 0, SCALE_NORMAL, true},
      {2 * B, 1031, 4, 1, 1, 0, 0, 0, v, SCALE_NORMAL, true},
      {8 * B, 17, 6, 2, 4, 0, 16, 16, v, SCALE_NORMAL, true},
    };
    int64_t grid = set_q8x_grid(app, 2);
    for (unsigned i = 0; i < VKT_ARRAY_SIZE(few); i++)
      run_quant_matmul(app, wt, &few[i]);
    set_q8x_grid(app, grid);
    if (wt == VKRT_TYPE_Q6_K) {
      /* 210-byte super-blocks: an odd count per row puts every other row's start, and
       * every other super-block in a row, at 2 mod 4 bytes; odd N, a row group cut short;
       * dst += w x; a forced variant changes nothing */
      const struct mm_case more[] = {
        {5 * B, 33, 1, 1, 1, 0, 2, 0, 0, SCALE_NORMAL, true},
        {19 * B, 9, 1, 1, 1, 1, 6, 16, 0, SCALE_EXTREME, true},
        {57 * B, 11, 1, 1, 1, 0, 10, 0, 0, SCALE_NORMAL, true},
        {3 * B, 13, 1, 2, 2, 0, 2, 0, 0, SCALE_NORMAL, true, true},
        {7 * B, 7, 1, 1, 1, 1, 2, 0, 2, SCALE_NORMAL, true},
        {7 * B, 5, 3, 1, 1, 1, 2, 0, 0, SCALE_NORMAL, true},        /* M = 3 */
        {over, 3, 1, 1, 1, 1, 2, 0, 0, SCALE_NORMAL, true},         /* K > 16384 */
      };
      for (unsigned i = 0; i < VKT_ARRAY_SIZE(more); i++)
        run_quant_matmul(app, wt, &more[i]);
    }
  }
  vkt_close(app);
}

/* One case of test_quant_q8_columns, and the q8x columns' pass: where q8x ran, 8 columns of
 * K past 3072 and 4 past 6144 run one pass on the kernels of 32768 rounded values when the
 * device's shared memory holds them (40 KiB with Q4_K's sums, 36 KiB for Q8_0), else fewer
 * columns a pass (counter quant_q8x_wide). */
static void run_q8_columns_case(vkrt_appliance *app, vkrt_type wt, const struct mm_case *c) {
  vkrt_lab_counters c0, c1;
  vkrt_lab_device info;
  int64_t wide_on;
  vkt_check(app, vkrt_lab_device_get(app, 0, &info));
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_Q8X_COLUMNS_WIDE, &wide_on));
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c0));
  run_quant_matmul(app, wt, c);
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c1));
  bool q8x = c1.quant_read[VKRT_LAB_QUANT_READ_Q8X] > c0.quant_read[VKRT_LAB_QUANT_READ_Q8X];
  int64_t cols = c->M <= 2 ? 2 : c->M <= 4 ? 4 : 8;
  uint32_t need = 32768 + 32768 / 32 * 4 * (wt == VKRT_TYPE_Q4_K ? 2 : 1);
  bool wide = wide_on && q8x && c->M > 1 && cols > 2 && c->K > 24576 / cols && c->K <= 32768 / cols &&
              info.max_compute_shared_memory_size >= need;
  if (c1.quant_q8x_wide - c0.quant_q8x_wide != (wide ? 1u : 0u))
    fail_msg("%s K %lld M %lld: the 40 KiB q8x columns kernel %s (shared memory %u bytes)",
             vkrt_type_str(wt), (long long)c->K, (long long)c->M, wide ? "not taken" : "taken",
             info.max_compute_shared_memory_size);
}

/* quant_activations_columns: small batches of q8_0 and q4_K w take the q8x kernels for
 * 2..8 columns (8 a pass up to K 3072, 4 up to 6144, 2 up to 12288; 8 to 4096 and 4 to 8192
 * where shared memory holds 40 KiB) from the type's crossover (the lab's
 * VKRT_LAB_Q8X_COLUMNS_MIN_M_*) up to the columns asked for; more columns, K past 12288 and
 * x off 16 bytes take f32 x. A value past 8 is refused by vkrt_open. */
static void test_quant_q8_columns(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  o.quant_activations = VKRT_ACTIVATIONS_Q8;
  o.quant_activations_columns = 9;
  expect_open_refused(&o, "quant_activations_columns");
  for (uint32_t columns = 4; columns <= 8; columns += 4) {
    o.quant_activations_columns = columns;
    vkrt_appliance *app = vkt_open(&o);
    if (!vkrt_lab_variant_usable(app, 0, VKRT_LAB_QUANT_VARIANT, q8x_variant()))
      print_message("dev0 has no integer dot products: every case below takes the f32 kernels\n");
    const vkrt_type types[] = {VKRT_TYPE_Q8_0, VKRT_TYPE_Q4_K};
    for (unsigned t = 0; t < VKT_ARRAY_SIZE(types); t++) {
      vkrt_type wt = types[t];
      if (!qtype_enabled(wt))
        continue;
      int64_t B = vkrt_type_block(wt);
      const vkrt_lab_knob knob = wt == VKRT_TYPE_Q8_0 ? VKRT_LAB_Q8X_COLUMNS_MIN_M_Q8_0
                                                      : VKRT_LAB_Q8X_COLUMNS_MIN_M_Q4_K;
      int64_t min_m;
      vkt_check(app, vkrt_lab_get(app, 0, knob, &min_m));
      assert_in_range(min_m, 2, 9);
      const struct mm_case cases[] = {
        {8 * B, 13, 2, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns},
        {16 * B, 21, 3, 1, 1, 0, 0, 0, 0, SCALE_EXTREME, true, false, columns},
        {8 * B, 17, 4, 2, 4, 0, 16, 16, 0, SCALE_NORMAL, true, false, columns}, /* batches */
        {8 * B, 11, 5, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, true, columns},    /* dst += */
        {4 * B, 9, 8, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns},
        {4 * B, 7, 11, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns},  /* past 8 */
        {(8192 / B) * B, 3, 4, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns}, /* 2 a pass */
        {(12288 / B + 1) * B, 3, 3, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns},
        {8 * B, 13, 4, 1, 1, 0, 0, 4, 0, SCALE_NORMAL, true, false, columns},  /* x off 16 */
        /* 8 a pass to K 4096, 4 to 8192 where shared memory holds 40 KiB, else 4 and 2 */
        {(4096 / B) * B, 5, 8, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns},
        {(3072 / B + 1) * B, 6, 7, 1, 1, 0, 0, 0, 0, SCALE_EXTREME, true, false, columns},
        {(6144 / B + 1) * B, 5, 3, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns},
        {(4096 / B + 1) * B, 3, 8, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns}, /* 4 */
      };
      for (unsigned i = 0; i < VKT_ARRAY_SIZE(cases); i++)
        run_q8_columns_case(app, wt, &cases[i]);
      vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_Q8X_COLUMNS_WIDE, 0)); /* the lab's "never" */
      run_q8_columns_case(app, wt, &cases[VKT_ARRAY_SIZE(cases) - 4]);
      vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_Q8X_COLUMNS_WIDE, 1));
      /* the crossover moved: M 2 and 3 on f32 x, 4 on 8-bit x (up to the columns asked) */
      vkt_check(app, vkrt_lab_set(app, 0, knob, 4));
      for (int64_t M = 2; M <= 5; M++) {
        const struct mm_case c = {8 * B, 19, M, 1, 1, 0, 0, 0, 0, SCALE_NORMAL, true, false, columns};
        run_quant_matmul(app, wt, &c);
      }
      vkt_check(app, vkrt_lab_set(app, 0, knob, min_m));
    }
    vkt_close(app);
  }
}

/* vkrt_op_matmul_fused on an appliance opened with VKRT_ACTIVATIONS_Q8: one column of q4_K
 * or q8_0 takes the q8x kernel where it fits (the counters: one dispatch, read pattern q8x,
 * the fused steps), rounding x g to 8 bits: against that definition in float64
 * (q8x_reference of x g, times the norm's scale from x, then silu(gate) up); K past
 * VKRT_ACTIVATIONS_Q8_MAX_K: q4_K takes the stream kernel with x in f32, q8_0 is refused
 * (UNSUPPORTED, the reason). The bytes after dst keep their poison. */
static void run_fused_q8(vkrt_appliance *app, vkrt_type wt, int64_t K, int64_t N, bool with_norm,
                         bool swiglu) {
  const int64_t rows_out = swiglu ? N / 2 : N;
  const float eps = K == 768 ? 0.5f : 1e-5f; /* one where eps moves the scale */
  vkrt_tensor w = block_tensor(NULL, 0, wt, K, N, 1, 0);
  vkt_hbuf wb = vkt_hbuf_new(app, block_extent(&w)), xb = vkt_hbuf_new(app, 8 * (uint64_t)K + 32),
           db = vkt_hbuf_new(app, 4 * (uint64_t)rows_out + 64);
  w.buffer = wb.buf;
  vkt_fill_random(wb.map, wb.size, &rng);
  fill_blocks(wb.map, &w, SCALE_NORMAL);
  float *wf = dequant_rows(wb.map, &w), *mins = wt == VKRT_TYPE_Q4_K ? q4_k_mins(&wb, &w) : NULL;
  float *x = (float *)(xb.map + 16), *g = x + K, *u = malloc(sizeof(float) * (size_t)K);
  assert_non_null(u);
  for (int64_t k = 0; k < K; k++) {
    vkt_fill_random_f32(&x[k], 1, -2.0f, 2.0f, &rng);
    x[k] += k % 7 == 0 ? (k % 2 ? 3.0f : -3.0f) : 0.0f; /* mean(x^2) well away from 1 */
    vkt_fill_random_f32(&g[k], 1, 0.5f, 1.5f, &rng);
    u[k] = with_norm ? x[k] * g[k] : x[k]; /* what gets rounded: one f32 product, as there */
  }
  vkt_poison(db.map, db.size);
  vkrt_tensor tx = vkrt_tensor_contiguous(xb.buf, 16, VKRT_TYPE_F32, K, 1, 1, 1);
  vkrt_tensor tg = vkrt_tensor_contiguous(xb.buf, 16 + 4 * (uint64_t)K, VKRT_TYPE_F32, K, 1, 1, 1);
  vkrt_tensor td = vkrt_tensor_contiguous(db.buf, 0, VKRT_TYPE_F32, rows_out, 1, 1, 1);
  vkrt_matmul_fusion fz = {.norm = with_norm ? &tg : NULL, .eps = eps, .swiglu = swiglu};
  bool q8x = K <= VKRT_ACTIVATIONS_Q8_MAX_K &&
             vkrt_lab_variant_usable(app, 0, VKRT_LAB_QUANT_VARIANT, q8x_variant());
  if (wt == VKRT_TYPE_Q8_0 && !q8x) { /* no f32-x fused kernel for q8_0: refused, nothing run */
    vkrt_tensor tx0 = vkrt_tensor_contiguous(xb.buf, 16, VKRT_TYPE_F32, K, 1, 1, 1);
    vkrt_tensor td0 = vkrt_tensor_contiguous(db.buf, 0, VKRT_TYPE_F32, rows_out, 1, 1, 1);
    vkrt_matmul_fusion f0 = {.swiglu = swiglu};
    assert_int_equal(vkrt_op_matmul_fused(&td0, &w, &tx0, &f0), VKRT_ERROR_UNSUPPORTED);
    assert_non_null(strstr(vkrt_last_error(app), "8-bit-x kernel only"));
    free(wf);
    free(u);
    vkrt_buffer_destroy(wb.buf);
    vkrt_buffer_destroy(xb.buf);
    vkrt_buffer_destroy(db.buf);
    return;
  }
  vkrt_lab_counters c0, c1;
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c0));
  vkt_check(app, vkrt_op_matmul_fused(&td, &w, &tx, &fz));
  vkt_check(app, vkrt_finish(app, 0));
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c1));
  assert_int_equal(c1.quant_matvec - c0.quant_matvec, 1);
  int want = q8x ? VKRT_LAB_QUANT_READ_Q8X : VKRT_LAB_QUANT_READ_VEC16;
  for (int i = 0; i < VKRT_LAB_QUANT_READ_COUNT; i++)
    if (c1.quant_read[i] - c0.quant_read[i] != (i == want ? 1u : 0u))
      fail_msg("fused %s K %lld N %lld: read pattern %d not taken", vkrt_type_str(wt), (long long)K,
               (long long)N, want);
  assert_int_equal(c1.matmul_fused_norm - c0.matmul_fused_norm, with_norm);
  assert_int_equal(c1.matmul_fused_swiglu - c0.matmul_fused_swiglu, swiglu);
  double scale = with_norm ? vkt_rms_scale(x, K, eps) : 1.0;
  const float *got = (const float *)db.map;
  for (int64_t i = 0; i < rows_out; i++) {
    double y[2] = {0, 0}, tol[2] = {0, 0};
    for (int r = 0; r < (swiglu ? 2 : 1); r++) {
      int64_t row = i + r * rows_out;
      const float *wr = wf + row * K;
      if (q8x) {
        y[r] = q8x_reference(wr, mins ? mins + row * K : NULL, u, K, &tol[r]);
      } else {
        double mag = 0;
        for (int64_t k = 0; k < K; k++) {
          y[r] += (double)wr[k] * u[k];
          mag += fabs((double)wr[k] * u[k]);
        }
        tol[r] = 4e-6 * mag * sqrt((double)K);
      }
      /* the kernel's own sum of squares and inverse square root: a few f32 roundings */
      y[r] *= scale;
      tol[r] = tol[r] * scale + 1e-5 * fabs(y[r]) + 1e-30;
    }
    double want_v = swiglu ? y[0] / (1.0 + exp(-y[0])) * y[1] : y[0];
    double t = swiglu ? (tol[0] + tol[1]) * (1.0 + fabs(y[0]) + fabs(y[1])) : tol[0];
    if (!(fabs(got[i] - want_v) <= t))
      fail_msg("fused q8 %s K %lld N %lld norm %d swiglu %d: dst[%lld] = %.9g, expected %.9g "
               "(tol %.3g)", vkrt_type_str(wt), (long long)K, (long long)N, with_norm, swiglu,
               (long long)i, (double)got[i], want_v, t);
  }
  uint8_t poison[64];
  vkt_poison(poison, sizeof(poison));
  if (memcmp(db.map + 4 * rows_out, poison, 64))
    fail_msg("fused q8 K %lld N %lld: bytes after dst written", (long long)K, (long long)N);
  free(wf);
  free(mins);
  free(u);
  vkrt_buffer_destroy(wb.buf);
  vkrt_buffer_destroy(xb.buf);
  vkrt_buffer_destroy(db.buf);
}

static void test_fused_q8_activations(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  o.quant_activations = VKRT_ACTIVATIONS_Q8;
  vkrt_appliance *app = vkt_open(&o);
  /* a type whose kernels are compiled out: UNSUPPORTED, saying so, nothing recorded */
  const vkrt_type fused_types[2] = {VKRT_TYPE_Q4_K, VKRT_TYPE_Q8_0};
  for (int t = 0; t < 2; t++) {
    if (qtype_enabled(fused_types[t]))
      continue;
    vkt_hbuf b = vkt_hbuf_new(app, 65536);
    vkrt_tensor w = vkrt_tensor_contiguous(b.buf, 0, fused_types[t], 512, 8, 1, 1);
    vkrt_tensor x = vkrt_tensor_contiguous(b.buf, 32768, VKRT_TYPE_F32, 512, 1, 1, 1);
    vkrt_tensor d = vkrt_tensor_contiguous(b.buf, 40960, VKRT_TYPE_F32, 8, 1, 1, 1);
    vkrt_matmul_fusion none = {0};
    assert_int_equal(vkrt_op_matmul_fused(&d, &w, &x, &none), VKRT_ERROR_UNSUPPORTED);
    assert_non_null(strstr(vkrt_last_error(app), "not in this build"));
    vkrt_buffer_destroy(b.buf);
  }
  if ((!qtype_enabled(VKRT_TYPE_Q4_K) && !qtype_enabled(VKRT_TYPE_Q8_0)) ||
      !IS_ENABLED(CONFIG_VKRT_KERNEL_RMS_NORM)) {
    vkt_close(app);
    skip();
  }
  if (!vkrt_lab_variant_usable(app, 0, VKRT_LAB_QUANT_VARIANT, q8x_variant()))
    print_message("dev0 has no integer dot products: the fused products take the stream kernel\n");
  /* 2 super-blocks, fewer rows (or pairs) than the grid's subgroups and more; 3 (odd N, 37
   * pairs), 8, 17, 33 (x's 2112 words in two rounds of the norm's rounding, 2048 a round
   * for 512 invocations, the second a part of one); K past the q8x kernel's limit: the
   * stream kernel, x in f32 */
  int64_t over = (VKRT_ACTIVATIONS_Q8_MAX_K / 256 + 1) * 256;
  const vkrt_type types[2] = {VKRT_TYPE_Q4_K, VKRT_TYPE_Q8_0};
  for (int t = 0; t < 2; t++) {
    if (!qtype_enabled(types[t]))
      continue;
    for (int norm = 0; norm < 2; norm++)
      for (int sw = 0; sw < 2; sw++) {
        run_fused_q8(app, types[t], 512, sw ? 2 * 300 : 301, norm, sw);
        run_fused_q8(app, types[t], 512, sw ? 2 * 1100 : 2105, norm, sw);
        run_fused_q8(app, types[t], 768, sw ? 74 : 41, norm, sw);
        run_fused_q8(app, types[t], 2048, sw ? 2 * 53 : 67, norm, sw);
        run_fused_q8(app, types[t], 4352, sw ? 18 : 23, norm, sw);
        run_fused_q8(app, types[t], 8448, sw ? 10 : 11, norm, sw);
        run_fused_q8(app, types[t], over, sw ? 6 : 5, norm, sw);
        /* a grid of 3 workgroups: every subgroup walks many rows or gate/up pairs */
        int64_t grid = set_q8x_grid(app, 3);
        run_fused_q8(app, types[t], 512, sw ? 2 * 1100 : 2105, norm, sw);
        run_fused_q8(app, types[t], 2048, sw ? 2 * 53 : 67, norm, sw);
        set_q8x_grid(app, grid);
      }
  }
  /* the lab's build of the one-column q4_K kernel with four units in flight: the same
   * results (plain rows, and the norm and swiglu folded in) */
  if (qtype_enabled(VKRT_TYPE_Q4_K) && IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K_LAB)) {
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_Q8X_UNROLL_Q4_K, 4));
    int64_t on = 0;
    vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_Q8X_UNROLL_Q4_K, &on));
    assert_int_equal(on, 4);
    for (int norm = 0; norm < 2; norm++)
      for (int sw = 0; sw < 2; sw++) {
        run_fused_q8(app, VKRT_TYPE_Q4_K, 512, sw ? 2 * 300 : 301, norm, sw);
        run_fused_q8(app, VKRT_TYPE_Q4_K, 4352, sw ? 18 : 23, norm, sw);
      }
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_Q8X_UNROLL_Q4_K, 0));
  }
  vkt_close(app);
}

/* vkrt_matmul_fusion.qkv: a token's q/k/v product (nh query heads, nkv K heads, nkv V heads of
 * hd rows) with its RoPE and cache rows in one dispatch, against the separate ops on the same
 * operands (the fused product with the norm, vkrt_op_rope_ext, vkrt_op_rope_set_rows,
 * vkrt_op_set_rows): dst's K and V rows and the V cache bit for bit, the roped queries and K
 * within f32 roundings (the two kernels' RoPE may contract differently), every other cache
 * byte untouched; the position recorded is not the one run (read on the device), and one out
 * of the cache writes no row. The path: one q8x dispatch counted as the q/k/v kernel, and a
 * read of the K cache recorded after it waits behind a barrier (the cache rows are the op's
 * writes). */
static void run_fused_qkv(vkrt_appliance *app, vkrt_type wt, int64_t K, uint32_t nh, uint32_t nkv,
                          uint32_t hd, uint32_t n_dims, vkrt_type kt, vkrt_type vt,
                          bool with_factors, bool with_norm, int32_t pos_run) {
  const int64_t N = ((int64_t)nh + 2 * nkv) * hd, kv = (int64_t)nkv * hd, n_rows = 13;
  const vkrt_rope_params rope = {.mode = VKRT_ROPE_NORMAL, .n_dims = n_dims,
                                 .freq_base = 500000.0f, .freq_scale = 1.0f};
  vkrt_tensor w = block_tensor(NULL, 0, wt, K, N, 1, 0);
  vkt_hbuf wb = vkt_hbuf_new(app, block_extent(&w)), xb = vkt_hbuf_new(app, 8 * (uint64_t)K + 32),
           db = vkt_hbuf_new(app, 8 * (uint64_t)N + 64), ib = vkt_hbuf_new(app, 64 + 4 * (uint64_t)hd);
  w.buffer = wb.buf;
  vkt_fill_random(wb.map, wb.size, &rng);
  fill_blocks(wb.map, &w, SCALE_NORMAL);
  float *x = (float *)(xb.map + 16), *g = x + K;
  for (int64_t k = 0; k < K; k++) {
    vkt_fill_random_f32(&x[k], 1, -2.0f, 2.0f, &rng);
    vkt_fill_random_f32(&g[k], 1, 0.5f, 1.5f, &rng);
  }
  vkt_hbuf cb[4]; /* fused K, V caches; the separate ops' K, V caches: the same old rows */
  vkrt_tensor cache[4];
  for (int c = 0; c < 4; c++) {
    vkrt_type ct = c % 2 ? vt : kt;
    cache[c] = vkrt_tensor_contiguous(NULL, 2, ct, kv, n_rows, 1, 1);
    cb[c] = vkt_hbuf_new(app, 2 + (uint64_t)cache[c].nb[1] * n_rows + 64);
    cache[c].buffer = cb[c].buf;
    if (c < 2)
      vkt_fill_random(cb[c].map, cb[c].size, &rng);
    else
      memcpy(cb[c].map, cb[c - 2].map, cb[c].size);
  }
  uint8_t *old_k = malloc(cb[0].size);
  memcpy(old_k, cb[0].map, cb[0].size);
  vkt_poison(db.map, db.size);
  vkrt_tensor tx = vkrt_tensor_contiguous(xb.buf, 16, VKRT_TYPE_F32, K, 1, 1, 1);
  vkrt_tensor tg = vkrt_tensor_contiguous(xb.buf, 16 + 4 * (uint64_t)K, VKRT_TYPE_F32, K, 1, 1, 1);
  vkrt_tensor td = vkrt_tensor_contiguous(db.buf, 0, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_tensor ts = vkrt_tensor_contiguous(db.buf, 4 * (uint64_t)N, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_tensor tpos = vkrt_tensor_contiguous(ib.buf, 8, VKRT_TYPE_I32, 1, 1, 1, 1);
  vkrt_tensor tf = vkrt_tensor_contiguous(ib.buf, 16, VKRT_TYPE_F32, n_dims / 2, 1, 1, 1);
  for (uint32_t p = 0; p < n_dims / 2; p++)
    vkt_fill_random_f32((float *)(ib.map + 16) + p, 1, 1.0f, 32.0f, &rng);
  memcpy(ib.map + 8, &(int32_t){3}, 4); /* recorded at 3, run at pos_run */
  vkrt_qkv_fusion q = {.pos = &tpos, .k_cache = &cache[0], .v_cache = &cache[1],
                       .rope_factors = with_factors ? &tf : NULL, .rope = rope,
                       .n_head = nh, .n_head_kv = nkv, .head_dim = hd};
  vkrt_matmul_fusion fz = {.norm = with_norm ? &tg : NULL, .eps = 1e-5f, .qkv = &q};
  vkrt_lab_counters c0, c1;
  vkrt_lab_stream s0, s1;
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c0));
  vkt_check(app, vkrt_op_matmul_fused(&td, &w, &tx, &fz));
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c1));
  assert_int_equal(c1.quant_matvec - c0.quant_matvec, 1);
  assert_int_equal(c1.matmul_fused_qkv - c0.matmul_fused_qkv, 1);
  assert_int_equal(c1.quant_read[VKRT_LAB_QUANT_READ_Q8X] - c0.quant_read[VKRT_LAB_QUANT_READ_Q8X], 1);
  /* a read of the K cache alone (a copy of its first row into the separate K cache's last
   * row, put back below) is behind a barrier */
  vkt_check(app, vkrt_lab_stream_get(app, 0, &s0));
  vkrt_tensor k_row0 = vkrt_tensor_contiguous(cb[0].buf, 2, kt, kv, 1, 1, 1);
  vkrt_tensor spare = vkrt_tensor_contiguous(cb[2].buf, 2 + (uint64_t)cache[2].nb[1] * (n_rows - 1),
                                             kt, kv, 1, 1, 1);
  vkt_check(app, vkrt_op_copy(&spare, &k_row0));
  vkt_check(app, vkrt_lab_stream_get(app, 0, &s1));
  assert_int_equal(s1.barriers - s0.barriers, 1);
  memcpy(ib.map + 8, &pos_run, 4);
  vkt_check(app, vkrt_finish(app, 0));
  memcpy(cb[2].map + 2 + cache[2].nb[1] * (n_rows - 1), old_k + 2 + cache[0].nb[1] * (n_rows - 1),
         (size_t)cache[2].nb[1]); /* the spare row back to the old contents */
  /* the separate ops into ts and caches 2, 3 */
  vkrt_matmul_fusion fs = {.norm = with_norm ? &tg : NULL, .eps = 1e-5f};
  vkrt_tensor qs = vkrt_tensor_contiguous(db.buf, 4 * (uint64_t)N, VKRT_TYPE_F32, hd, nh, 1, 1);
  vkrt_tensor ks = vkrt_tensor_contiguous(db.buf, 4 * ((uint64_t)N + (uint64_t)nh * hd),
                                          VKRT_TYPE_F32, hd, nkv, 1, 1);
  vkrt_tensor vs = vkrt_tensor_contiguous(db.buf, 4 * ((uint64_t)N + (uint64_t)(nh + nkv) * hd),
                                          VKRT_TYPE_F32, kv, 1, 1, 1);
  vkrt_tensor qr = vkrt_tensor_contiguous(xb.buf, 16, VKRT_TYPE_F32, hd, nh, 1, 1); /* over x */
  vkt_check(app, vkrt_op_matmul_fused(&ts, &w, &tx, &fs));
  vkt_check(app, vkrt_op_rope_ext(&qr, &qs, &tpos, with_factors ? &tf : NULL, &rope));
  vkt_check(app, vkrt_op_rope_set_rows(&cache[2], &ks, &tpos, &tpos, with_factors ? &tf : NULL, &rope));
  vkt_check(app, vkrt_op_set_rows(&cache[3], &vs, &tpos));
  vkt_check(app, vkrt_finish(app, 0));
  char what[160];
  snprintf(what, sizeof(what), "fused qkv %s K %lld heads %u/%u of %u n_dims %u caches %s/%s%s%s pos %d",
           vkrt_type_str(wt), (long long)K, nh, nkv, hd, n_dims, vkrt_type_str(kt),
           vkrt_type_str(vt), with_factors ? " factors" : "", with_norm ? " norm" : "", pos_run);
  const float *got = (const float *)db.map, *sep = got + N, *roped = (const float *)(xb.map + 16);
  for (int64_t i = 0; i < N; i++) {
    float want = i < (int64_t)nh * hd ? roped[i] : sep[i];
    if (i < (int64_t)nh * hd) {
      int64_t pair = i & ~(int64_t)1; /* the unroped pair, from the separate product */
      double tol = 4e-7 * (fabs(sep[pair]) + fabs(sep[pair + 1])) + 1e-30;
      if (!(fabs(got[i] - want) <= tol))
        fail_msg("%s: query row %lld = %.9g, separate ops %.9g", what, (long long)i,
                 (double)got[i], (double)want);
    } else if (memcmp(&got[i], &want, 4)) {
      fail_msg("%s: dst row %lld = %.9g, the product %.9g (bit for bit)", what, (long long)i,
               (double)got[i], (double)want);
    }
  }
  if (memcmp(cb[1].map, cb[3].map, cb[1].size))
    fail_msg("%s: the V cache differs from vkrt_op_set_rows'", what);
  bool in = pos_run >= 0 && pos_run < n_rows;
  uint64_t row_at = 2 + (uint64_t)cache[0].nb[1] * (uint64_t)(in ? pos_run : 0);
  for (uint64_t b = 0; b < cb[0].size; b++) { /* outside row pos: untouched */
    bool in_row = in && b >= row_at && b < row_at + (uint64_t)cache[0].nb[1];
    if (!in_row && cb[0].map[b] != old_k[b])
      fail_msg("%s: K cache byte %llu written outside row %d", what, (unsigned long long)b, pos_run);
  }
  for (int64_t e = 0; in && e < kv; e++) { /* row pos: the separate ops' within a rounding */
    double a, b, tol;
    const uint8_t *ra = cb[0].map + row_at, *rb = cb[2].map + row_at;
    if (kt == VKRT_TYPE_F16) {
      uint16_t ha, hb;
      memcpy(&ha, ra + 2 * e, 2);
      memcpy(&hb, rb + 2 * e, 2);
      a = vkrt_f16_to_f32(ha), b = vkrt_f16_to_f32(hb);
      tol = fabs(b) * 0x1p-10 + 0x1p-24;
    } else {
      uint16_t ha, hb;
      memcpy(&ha, ra + 34 * (e / 32), 2);
      memcpy(&hb, rb + 34 * (e / 32), 2);
      double da = vkrt_f16_to_f32(ha), dbv = vkrt_f16_to_f32(hb);
      a = da * (int8_t)ra[34 * (e / 32) + 2 + e % 32];
      b = dbv * (int8_t)rb[34 * (e / 32) + 2 + e % 32];
      tol = 1.01 * fmax(da, dbv) + 1e-30; /* one quant step either side */
    }
    if (!(fabs(a - b) <= tol))
      fail_msg("%s: K cache row %d element %lld = %.9g, separate ops %.9g", what, pos_run,
               (long long)e, a, b);
  }
  uint8_t poison[64];
  vkt_poison(poison, sizeof(poison));
  if (memcmp(db.map + 8 * N, poison, 64))
    fail_msg("%s: bytes after dst written", what);
  free(old_k);
  for (int c = 0; c < 4; c++)
    vkrt_buffer_destroy(cb[c].buf);
  vkrt_buffer_destroy(wb.buf);
  vkrt_buffer_destroy(xb.buf);
  vkrt_buffer_destroy(db.buf);
  vkrt_buffer_destroy(ib.buf);
}

static void test_fused_qkv(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  o.quant_activations = VKRT_ACTIVATIONS_Q8;
  vkrt_appliance *app = vkt_open(&o);
  if ((!qtype_enabled(VKRT_TYPE_Q4_K) && !qtype_enabled(VKRT_TYPE_Q8_0)) ||
      !IS_ENABLED(CONFIG_VKRT_KERNEL_RMS_NORM) || !IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS) ||
      !IS_ENABLED(CONFIG_VKRT_TYPE_F16) ||
      !vkrt_lab_variant_usable(app, 0, VKRT_LAB_QUANT_VARIANT, q8x_variant())) {
    vkt_close(app);
    skip();
  }
  const vkrt_type types[2] = {VKRT_TYPE_Q4_K, VKRT_TYPE_Q8_0};
  for (int t = 0; t < 2; t++) {
    if (!qtype_enabled(types[t]))
      continue;
    vkrt_type q8 = qtype_enabled(VKRT_TYPE_Q8_0) ? VKRT_TYPE_Q8_0 : VKRT_TYPE_F16;
    /* llama-3-like heads of 128 (4 per KV head), caches q8_0 and f16 either way round */
    run_fused_qkv(app, types[t], 512, 8, 2, 128, 128, q8, q8, false, true, 9);
    run_fused_qkv(app, types[t], 512, 8, 2, 128, 128, VKRT_TYPE_F16, VKRT_TYPE_F16, true, true, 12);
    run_fused_qkv(app, types[t], 256, 4, 2, 64, 32, q8, VKRT_TYPE_F16, true, false, 0);
    run_fused_qkv(app, types[t], 256, 2, 1, 32, 32, VKRT_TYPE_F16, q8, false, true, 5);
    /* a position past the cache: no row written; a grid of 3 workgroups: many blocks each */
    run_fused_qkv(app, types[t], 256, 4, 2, 64, 64, q8, q8, false, true, 13);
    int64_t grid = set_q8x_grid(app, 3);
    run_fused_qkv(app, types[t], 512, 8, 2, 128, 128, q8, VKRT_TYPE_F16, true, true, 7);
    set_q8x_grid(app, grid);
  }
  /* what it refuses: INVALID_ARGUMENT or UNSUPPORTED, with the reason */
  vkt_hbuf a = vkt_hbuf_new(app, 1 << 20);
  vkrt_type wt = qtype_enabled(VKRT_TYPE_Q4_K) ? VKRT_TYPE_Q4_K : VKRT_TYPE_Q8_0;
  vkrt_tensor w = vkrt_tensor_contiguous(a.buf, 0, wt, 256, 512, 1, 1);
  vkrt_tensor w16 = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F16, 256, 512, 1, 1);
  vkrt_tensor x = vkrt_tensor_contiguous(a.buf, 600000, VKRT_TYPE_F32, 256, 1, 1, 1);
  vkrt_tensor d = vkrt_tensor_contiguous(a.buf, 610000, VKRT_TYPE_F32, 512, 1, 1, 1);
  vkrt_tensor pos = vkrt_tensor_contiguous(a.buf, 620000, VKRT_TYPE_I32, 1, 1, 1, 1);
  vkrt_tensor kc = vkrt_tensor_contiguous(a.buf, 700000, VKRT_TYPE_F16, 128, 8, 1, 1);
  vkrt_tensor vc = vkrt_tensor_contiguous(a.buf, 710000, VKRT_TYPE_F16, 128, 8, 1, 1);
  vkrt_tensor kc32 = vkrt_tensor_contiguous(a.buf, 700000, VKRT_TYPE_F32, 128, 8, 1, 1);
  vkrt_tensor over_x = vkrt_tensor_contiguous(a.buf, 600000, VKRT_TYPE_F16, 128, 8, 1, 1);
  vkrt_rope_params rp = {.mode = VKRT_ROPE_NORMAL, .n_dims = 64, .freq_base = 10000.0f,
                         .freq_scale = 1.0f};
  vkrt_qkv_fusion good = {.pos = &pos, .k_cache = &kc, .v_cache = &vc, .rope = rp,
                          .n_head = 4, .n_head_kv = 2, .head_dim = 64};
  vkrt_qkv_fusion neox = good, rows = good, dim = good, f32c = good, overlap = good;
  neox.rope.mode = VKRT_ROPE_NEOX;
  rows.n_head = 5;
  dim.head_dim = 48, dim.n_head = 6, dim.n_head_kv = 2, dim.rope.n_dims = 48; /* 480 rows */
  f32c.k_cache = &kc32;
  overlap.k_cache = &over_x;
  vkrt_tensor d256 = vkrt_tensor_contiguous(a.buf, 610000, VKRT_TYPE_F32, 256, 1, 1, 1);
  struct {
    const vkrt_tensor *w;
    vkrt_matmul_fusion f;
    vkrt_status want;
    const char *needle;
  } bad[] = {
      {&w, {.swiglu = 1, .qkv = &good}, VKRT_ERROR_INVALID_ARGUMENT, "exclude each other"},
      {&w, {.qkv = &neox}, VKRT_ERROR_INVALID_ARGUMENT, "VKRT_ROPE_NORMAL"},
      {&w, {.qkv = &rows}, VKRT_ERROR_INVALID_ARGUMENT, "head_dim 64 = 576"},
      {&w, {.qkv = &dim}, VKRT_ERROR_INVALID_ARGUMENT, "multiple of 32"},
      {&w, {.qkv = &f32c}, VKRT_ERROR_INVALID_ARGUMENT, "f16 or q8_0 caches"},
      {&w, {.qkv = &overlap}, VKRT_ERROR_INVALID_ARGUMENT, "overlap"},
      {&w16, {.qkv = &good}, VKRT_ERROR_UNSUPPORTED, "take q4_K and q8_0"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    vkrt_status s = vkrt_op_matmul_fused(bad[i].f.swiglu ? &d256 : &d, bad[i].w, &x, &bad[i].f);
    if (s != bad[i].want || !strstr(vkrt_last_error(app), bad[i].needle))
      fail_msg("qkv case %zu: %s (%s), want %s naming '%s'", i, vkrt_status_str(s),
               vkrt_last_error(app), vkrt_status_str(bad[i].want), bad[i].needle);
  }
  vkrt_buffer_destroy(a.buf);
  vkt_close(app);
}

/* ---- dequantizing copy ----------------------------------------------------------------- */

static void run_dequant(vkrt_appliance *app, vkrt_type st, vkrt_type dt, int64_t K, int64_t N,
                        int64_t b2, int64_t pad, uint64_t s_off, bool transposed,
                        enum scales mode) {
  vkrt_tensor s = block_tensor(NULL, s_off, st, K, N, b2, pad);
  uint64_t ts = vkrt_type_size(dt);
  vkrt_tensor d = {.offset = 2 * ts, .type = dt, .ne = {K, N, b2, 1}};
  if (transposed) { /* dst stored with dim 1 innermost */
    d.nb[1] = (int64_t)ts;
    d.nb[0] = (int64_t)ts * N;
  } else {
    d.nb[0] = (int64_t)ts;
    d.nb[1] = (int64_t)ts * (K + 1);
  }
  d.nb[2] = (int64_t)ts * (K + 1) * N;
  d.nb[3] = d.nb[2] * b2;
  vkt_hbuf sb = vkt_hbuf_new(app, block_extent(&s) + 3), db = vkt_hbuf_new(app, d.offset + d.nb[3] + 8);
  s.buffer = sb.buf, d.buffer = db.buf;
  vkt_fill_random(sb.map, sb.size, &rng);
  fill_blocks(sb.map, &s, mode);
  vkt_poison(db.map, db.size);
  uint8_t *before = malloc(db.size);
  memcpy(before, db.map, db.size);
  float *ref = dequant_rows(sb.map, &s);
  vkrt_lab_counters ran0, ran1;
  vkt_check(app, vkrt_lab_counters_get(app, 0, &ran0));
  vkt_check(app, vkrt_op_copy(&d, &s));
  vkt_check(app, vkrt_finish(app, 0));
  vkt_check(app, vkrt_lab_counters_get(app, 0, &ran1));
  assert_int_equal(ran1.dequant - ran0.dequant, 1);
  for (int64_t i2 = 0; i2 < b2; i2++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++) {
        float e = ref[(i2 * N + n) * K + k], g;
        uint64_t a = d.offset + k * d.nb[0] + n * d.nb[1] + i2 * d.nb[2];
        bool ok;
        if (dt == VKRT_TYPE_F32) {
          memcpy(&g, db.map + a, 4);
          ok = fabsf(g - e) <= fabsf(e) * 1e-6f || (isnan(e) && isnan(g)); /* contraction: 1 ulp */
        } else {
          uint16_t h;
          memcpy(&h, db.map + a, 2);
          g = vkrt_f16_to_f32(h);
          float lo = vkrt_f16_to_f32(vkrt_f32_to_f16(e)); /* within one f16 ulp of the rounding */
          ok = fabsf(g - lo) <= fmaxf(fabsf(lo) * 1e-3f, 6e-8f) || (isinf(lo) && g == lo);
        }
        if (!ok)
          fail_msg("%s -> %s K %lld N %lld [%lld,%lld,%lld] = %.9g, expected %.9g",
                   vkrt_type_str(st), vkrt_type_str(dt), (long long)K, (long long)N,
                   (long long)k, (long long)n, (long long)i2, g, e);
        memcpy(db.map + a, before + a, ts);
      }
  assert_memory_equal(db.map, before, db.size);
  free(ref);
  free(before);
  vkrt_buffer_destroy(sb.buf);
  vkrt_buffer_destroy(db.buf);
}

static void test_dequant_copy(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  int ndst = IS_ENABLED(CONFIG_VKRT_TYPE_F16) ? 2 : 1;
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(qtypes); t++) {
    vkrt_type st = qtypes[t];
    if (!qtype_enabled(st))
      continue;
    int64_t B = vkrt_type_block(st);
    for (int dt = 0; dt < ndst; dt++) {
      run_dequant(app, st, dt, B, 1, 1, 0, 0, false, SCALE_NORMAL);
      run_dequant(app, st, dt, 3 * B, 5, 2, 1, st == VKRT_TYPE_Q4_K ? 4 : 2, false, SCALE_NORMAL);
      run_dequant(app, st, dt, 2 * B, 7, 1, 0, 36, true, SCALE_EXTREME);
      run_dequant(app, st, dt, 5 * B, 3, 3, 2, 8, false, SCALE_EXTREME);
    }
    /* same-type dense copy: the bytes */
    vkt_hbuf a = vkt_hbuf_new(app, 4096), b = vkt_hbuf_new(app, 4096);
    vkt_fill_random(a.map, a.size, &rng);
    vkt_poison(b.map, b.size);
    vkrt_tensor s = vkrt_tensor_contiguous(a.buf, 2 * (t + 1), st, 2 * B, 3, 1, 1);
    vkrt_tensor d = vkrt_tensor_contiguous(b.buf, 4 * (t + 1), st, 2 * B, 3, 1, 1);
    vkt_check(app, vkrt_op_copy(&d, &s));
    vkt_check(app, vkrt_finish(app, 0));
    assert_memory_equal(b.map + d.offset, a.map + s.offset, (size_t)s.nb[2]);
    vkrt_buffer_destroy(a.buf);
    vkrt_buffer_destroy(b.buf);
  }
  vkt_close(app);
}

/* ---- descriptor rules of block types --------------------------------------------------- */

static void expect_invalid(vkrt_appliance *app, vkrt_status s, const char *needle) {
  assert_int_equal(s, VKRT_ERROR_INVALID_ARGUMENT);
  if (!strstr(vkrt_last_error(app), needle))
    fail_msg("message '%s' lacks '%s'", vkrt_last_error(app), needle);
}

static void test_block_descriptors(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  vkrt_buffer *b, *f;
  vkt_check(app, vkrt_buffer_create(app, 0, 1 << 16, 0, &b));
  vkt_check(app, vkrt_buffer_create(app, 0, 1 << 16, 0, &f));
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(qtypes); t++) {
    vkrt_type qt = qtypes[t];
    int64_t B = vkrt_type_block(qt);
    vkrt_tensor x = vkrt_tensor_contiguous(f, 0, VKRT_TYPE_F32, 2 * B, 1, 1, 1);
    vkrt_tensor d = vkrt_tensor_contiguous(f, 8192 * 4, VKRT_TYPE_F32, 4, 1, 1, 1);
    vkrt_tensor w = vkrt_tensor_contiguous(b, 0, qt, 2 * B, 4, 1, 1);
    if (!qtype_enabled(qt)) { /* compiled out: the ops say which symbol */
      assert_int_equal(vkrt_op_matmul(&d, &w, &x), VKRT_ERROR_UNSUPPORTED);
      assert_non_null(strstr(vkrt_last_error(app), qtype_symbol(qt)));
      vkrt_tensor wd = vkrt_tensor_contiguous(f, 0, VKRT_TYPE_F32, 2 * B, 4, 1, 1);
      assert_int_equal(vkrt_op_copy(&wd, &w), VKRT_ERROR_UNSUPPORTED);
    }
    vkrt_tensor bad = w;
    bad.ne[0] = B + 8;
    expect_invalid(app, vkrt_op_matmul(&d, &bad, &x), "not a multiple of the");
    bad = w;
    bad.nb[0] = 2;
    expect_invalid(app, vkrt_op_matmul(&d, &bad, &x), "must be the");
    bad = w;
    bad.nb[1] += 2;
    expect_invalid(app, vkrt_op_matmul(&d, &bad, &x), "block size");
    bad = w;
    bad.offset = qt == VKRT_TYPE_Q4_K ? 2 : 1;
    expect_invalid(app, vkrt_op_matmul(&d, &bad, &x), "offset");
    bad = w;
    bad.ne[1] = 1 << 20;
    bad.nb[2] = bad.nb[1] * bad.ne[1];
    expect_invalid(app, vkrt_op_matmul(&d, &bad, &x), "past the end");
    /* block types only as matmul w and copy src */
    vkrt_tensor qx = vkrt_tensor_contiguous(b, 0, qt, 2 * B, 1, 1, 1);
    expect_invalid(app, vkrt_op_matmul(&d, &w, &qx), "must be f32");
    vkrt_tensor qd = vkrt_tensor_contiguous(b, 0, qt, 2 * B, 1, 1, 1);
    vkrt_tensor fs = vkrt_tensor_contiguous(f, 0, VKRT_TYPE_F32, 2 * B, 1, 1, 1);
    expect_invalid(app, vkrt_op_copy(&qd, &fs), "block-quantized");
    vkrt_tensor tdst = vkrt_tensor_contiguous(f, 0, VKRT_TYPE_F32, 4, 2 * B, 1, 1);
    expect_invalid(app, vkrt_op_transpose(&tdst, &w), "block-quantized");
    const vkrt_tensor *srcs[1] = {&w};
    vkrt_tensor ad = vkrt_tensor_contiguous(b, 1 << 15, qt, 2 * B, 4, 1, 1);
    expect_invalid(app, vkrt_op_add(&ad, srcs, 1), "block-quantized");
  }
  vkt_check(app, vkrt_finish(app, 0));
  vkrt_buffer_destroy(b);
  vkrt_buffer_destroy(f);
  vkt_close(app);
}

/* ---- vkrt_op_swiglu ------------------------------------------------------------------ */

static void test_swiglu(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  if (!IS_ENABLED(CONFIG_VKRT_KERNEL_SWIGLU)) {
    vkrt_buffer *b;
    vkt_check(app, vkrt_buffer_create(app, 0, 4096, 0, &b));
    vkrt_tensor t = vkrt_tensor_contiguous(b, 0, VKRT_TYPE_F32, 16, 1, 1, 1);
    assert_int_equal(vkrt_op_swiglu(&t, &t, &t), VKRT_ERROR_UNSUPPORTED);
    vkrt_buffer_destroy(b);
    vkt_close(app);
    return;
  }
  static const int64_t sizes[] = {1, 255, 256, 1000, 70001};
  for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
    for (int inplace = 0; inplace < 3; inplace++) { /* 0: separate dst, 1: dst = gate, 2: = up */
      int64_t n = sizes[s];
      vkt_hbuf b = vkt_hbuf_new(app, (uint64_t)n * 12 + 64);
      float *g = (float *)(b.map + 16), *u = g + n, *d = u + n;
      vkt_fill_random_f32(g, (size_t)n, -12.0f, 12.0f, &rng);
      vkt_fill_random_f32(u, (size_t)n, -2.0f, 2.0f, &rng);
      g[0] = -100.0f; /* e^100 overflows to inf: silu -> -0 */
      if (n > 1)
        g[1] = 90.0f;
      float *gc = malloc(sizeof(float) * (size_t)n), *uc = malloc(sizeof(float) * (size_t)n);
      memcpy(gc, g, sizeof(float) * (size_t)n);
      memcpy(uc, u, sizeof(float) * (size_t)n);
      vkt_poison(d, sizeof(float) * (size_t)n + 16);
      vkrt_tensor tg = vkrt_tensor_contiguous(b.buf, 16, VKRT_TYPE_F32, n, 1, 1, 1);
      vkrt_tensor tu = vkrt_tensor_contiguous(b.buf, 16 + 4 * (uint64_t)n, VKRT_TYPE_F32, n, 1, 1, 1);
      vkrt_tensor td = vkrt_tensor_contiguous(b.buf, 16 + 8 * (uint64_t)n, VKRT_TYPE_F32, n, 1, 1, 1);
      const vkrt_tensor *dst = inplace == 1 ? &tg : inplace == 2 ? &tu : &td;
      vkt_check(app, vkrt_op_swiglu(dst, &tg, &tu));
      vkt_check(app, vkrt_finish(app, 0));
      float *out = inplace == 1 ? g : inplace == 2 ? u : d;
      for (int64_t i = 0; i < n; i++) {
        double e = (double)gc[i] / (1.0 + exp(-(double)gc[i])) * uc[i];
        if (!(fabs(out[i] - e) <= 1e-5 * fabs(e) + 1e-30))
          fail_msg("swiglu n %lld inplace %d [%lld]: g %g u %g -> %.9g, expected %.9g",
                   (long long)n, inplace, (long long)i, gc[i], uc[i], out[i], e);
      }
      if (inplace == 0)
        for (int i = 0; i < 4; i++) { /* past the end of dst stays poisoned */
          uint32_t w;
          memcpy(&w, d + n + i, 4);
          assert_int_equal(w, 0xDEADBEEFu);
        }
      free(gc);
      free(uc);
      vkrt_buffer_destroy(b.buf);
    }
  /* bad descriptors */
  vkrt_buffer *b;
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, 0, &b));
  vkrt_tensor t0 = vkrt_tensor_contiguous(b, 0, VKRT_TYPE_F32, 64, 1, 1, 1);
  vkrt_tensor t1 = vkrt_tensor_contiguous(b, 256, VKRT_TYPE_F32, 64, 1, 1, 1);
  vkrt_tensor t2 = vkrt_tensor_contiguous(b, 512, VKRT_TYPE_F32, 32, 1, 1, 1);
  vkrt_tensor h = vkrt_tensor_contiguous(b, 1024, VKRT_TYPE_F16, 64, 1, 1, 1);
  vkrt_tensor ov = vkrt_tensor_contiguous(b, 128, VKRT_TYPE_F32, 64, 1, 1, 1);
  expect_invalid(app, vkrt_op_swiglu(&t0, &t1, &t2), "differs from dst");
  expect_invalid(app, vkrt_op_swiglu(&t0, &t1, &h), "takes f32");
  expect_invalid(app, vkrt_op_swiglu(&ov, &t0, &t1), "overlap");
  vkt_check(app, vkrt_finish(app, 0));
  vkrt_buffer_destroy(b);
  vkt_close(app);
}

int main(void) {
  rng = vkt_seed(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference),
      cmocka_unit_test(test_quant_matmul),
      cmocka_unit_test(test_quant_q8_activations),
      cmocka_unit_test(test_quant_q8_columns),
      cmocka_unit_test(test_fused_q8_activations),
      cmocka_unit_test(test_fused_qkv),
      cmocka_unit_test(test_dequant_copy),
      cmocka_unit_test(test_block_descriptors),
      cmocka_unit_test(test_swiglu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
