/* The transformer decode ops on lavapipe with validation (rms_norm, rope, get_rows,
 * set_rows, argmax), each against a CPU reference on fresh random inputs: outputs poisoned
 * first and every byte an op must not write checked to keep its poison; odd shapes, byte
 * offsets and padded rows; in-place forms; positions, ids and rows read on the device at
 * execution (changed after recording, the submitted work uses the new values); bit-exact
 * f32/f16 gathers, f32 scatters and q8_0 quantization against ggml's quantizer; argmax's
 * split path asserted through the counters; i32 in the other ops; bad descriptors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/vk_test.h"
#include "vkrt/vkrt_lab.h"

static uint64_t rng;


static void hb_free(vkt_hbuf *h) {
  vkrt_buffer_destroy(h->buf);
  h->buf = NULL;
}

/* A tensor of up to 3 dims at `offset` whose rows are `pad` bytes apart beyond their data
 * (block types: whole blocks per row). */
static vkrt_tensor mk(vkrt_buffer *b, uint64_t offset, vkrt_type type, int64_t ne0, int64_t ne1,
                      int64_t ne2, int64_t pad) {
  vkrt_tensor t = vkrt_tensor_contiguous(b, offset, type, ne0, ne1, ne2, 1);
  t.nb[1] += pad;
  t.nb[2] = t.nb[1] * ne1;
  t.nb[3] = t.nb[2] * ne2;
  return t;
}

static uint64_t extent(const vkrt_tensor *t) {
  uint64_t e = t->offset + (uint64_t)t->nb[1] * (uint64_t)t->ne[1] * (uint64_t)t->ne[2];
  return e + 8;
}

static uint64_t at(const vkrt_tensor *t, int64_t i0, int64_t i1, int64_t i2) {
  return t->offset + (uint64_t)(i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2]);
}

static float rd_f32(const uint8_t *base, uint64_t a) {
  float f;
  memcpy(&f, base + a, 4);
  return f;
}

static void wr_f32(uint8_t *base, uint64_t a, float v) { memcpy(base + a, &v, 4); }

static int32_t rd_i32(const uint8_t *base, uint64_t a) {
  int32_t v;
  memcpy(&v, base + a, 4);
  return v;
}

static void wr_i32(uint8_t *base, uint64_t a, int32_t v) { memcpy(base + a, &v, 4); }

static float rnd(float lo, float hi) {
  float v;
  vkt_fill_random_f32(&v, 1, lo, hi, &rng);
  return v;
}

/* A random finite normal half of magnitude in [2^-6, 2^1). */
static uint16_t rnd_half_scale(void) {
  return (uint16_t)((vkrt_xorshift(&rng) & 0x8000u) | ((9u + vkrt_xorshift(&rng) % 7u) << 10) |
                    (vkrt_xorshift(&rng) & 0x3ffu));
}

/* Fills f32 elements of t (a 2-D or 3-D tensor) with values in [lo, hi). */
static void fill_f32(uint8_t *base, const vkrt_tensor *t, float lo, float hi) {
  for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
    for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
      for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
        wr_f32(base, at(t, i0, i1, i2), rnd(lo, hi));
}

/* Device bytes == expected bytes everywhere, except f32 elements listed in `loose` (a
 * tensor of dst whose elements may differ by tol(expected) absolute). */
static void compare(const uint8_t *got, const uint8_t *expect, uint64_t size,
                    const vkrt_tensor *loose, const float *tol, const char *what) {
  uint8_t *g = malloc(size);
  assert_non_null(g);
  memcpy(g, got, size);
  if (loose) {
    uint64_t k = 0;
    for (int64_t i2 = 0; i2 < loose->ne[2]; i2++)
      for (int64_t i1 = 0; i1 < loose->ne[1]; i1++)
        for (int64_t i0 = 0; i0 < loose->ne[0]; i0++, k++) {
          uint64_t a = at(loose, i0, i1, i2);
          float x = rd_f32(g, a), y = rd_f32(expect, a);
          if (!(fabsf(x - y) <= tol[k]))
            fail_msg("%s: element [%lld,%lld,%lld] = %.9g, expected %.9g (tolerance %.3g)", what,
                     (long long)i0, (long long)i1, (long long)i2, x, y, tol[k]);
          memcpy(g + a, expect + a, 4);
        }
  }
  for (uint64_t i = 0; i < size; i++)
    if (g[i] != expect[i]) {
      uint64_t w = i / 4 * 4;
      uint32_t gw = 0, ew = 0;
      memcpy(&gw, g + w, VKT_MIN(4, size - w));
      memcpy(&ew, expect + w, VKT_MIN(4, size - w));
      fail_msg("%s: byte %llu is 0x%02x, expected 0x%02x (%s; its word 0x%08x, expected 0x%08x)",
               what, (unsigned long long)i, g[i], expect[i],
               loose ? "outside the written elements" : "exact compare", gw, ew);
    }
  free(g);
}

static vkrt_appliance *open_app(void) {
  vkrt_options o;
  vkt_options(&o);
  return vkt_open(&o);
}

/* ---- rms_norm ----------------------------------------------------------------------------- */

static void run_rms_norm(vkrt_appliance *app, int64_t n, int64_t rows, int64_t planes, bool with_w,
                         bool in_place, int64_t pad, uint64_t off) {
  vkrt_tensor x = mk(NULL, off, VKRT_TYPE_F32, n, rows, planes, pad);
  vkrt_tensor w = mk(NULL, off + 4, VKRT_TYPE_F32, n, 1, 1, 0);
  vkrt_tensor d = in_place ? x : mk(NULL, 12, VKRT_TYPE_F32, n, rows, planes, pad + 4);
  vkt_hbuf xb = vkt_hbuf_new(app, extent(&x)), wb = vkt_hbuf_new(app, extent(&w));
  vkt_hbuf db = in_place ? xb : vkt_hbuf_new(app, extent(&d));
  x.buffer = xb.buf, w.buffer = wb.buf, d.buffer = db.buf;
  vkt_fill_random(xb.map, xb.size, &rng);
  vkt_fill_random(wb.map, wb.size, &rng);
  float scale = rnd(0.01f, 100.0f); /* rows of very different magnitudes */
  fill_f32(xb.map, &x, -scale, scale);
  fill_f32(wb.map, &w, -2.0f, 2.0f);
  if (!in_place)
    vkt_poison(db.map, db.size);
  const float eps = 1e-5f;
  uint8_t *expect = malloc(db.size);
  float *tol = malloc((size_t)(n * rows * planes) * sizeof(float));
  memcpy(expect, db.map, db.size);
  uint64_t k = 0;
  for (int64_t i2 = 0; i2 < planes; i2++)
    for (int64_t i1 = 0; i1 < rows; i1++) {
      double sum = 0;
      for (int64_t i0 = 0; i0 < n; i0++) {
        double v = rd_f32(xb.map, at(&x, i0, i1, i2));
        sum += v * v;
      }
      double r = 1.0 / sqrt(sum / (double)n + eps);
      for (int64_t i0 = 0; i0 < n; i0++, k++) {
        double v = rd_f32(xb.map, at(&x, i0, i1, i2)) * r;
        if (with_w)
          v *= rd_f32(wb.map, at(&w, i0, 0, 0));
        wr_f32(expect, at(&d, i0, i1, i2), (float)v);
        tol[k] = (float)(4e-6 * fabs(v) + 1e-6);
      }
    }
  vkt_check(app, vkrt_op_rms_norm(&d, &x, with_w ? &w : NULL, eps));
  vkt_check(app, vkrt_finish(app, 0));
  char what[128];
  snprintf(what, sizeof(what), "rms_norm n %lld rows %lldx%lld%s%s pad %lld", (long long)n,
           (long long)rows, (long long)planes, with_w ? " w" : "", in_place ? " in place" : "",
           (long long)pad);
  compare(db.map, expect, db.size, &d, tol, what);
  free(expect);
  free(tol);
  hb_free(&xb);
  hb_free(&wb);
  if (!in_place)
    hb_free(&db);
}

static void test_rms_norm(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_RMS_NORM));
  vkrt_appliance *app = open_app();
  run_rms_norm(app, 4096, 1, 1, true, false, 0, 0);  /* a llama-3-8B hidden row */
  run_rms_norm(app, 4096, 1, 1, true, true, 0, 256); /* in place, as the model calls it */
  run_rms_norm(app, 1, 1, 1, true, false, 0, 4);
  run_rms_norm(app, 2051, 2, 1, true, false, 4, 8); /* a second step of 1024, partly past n */
  run_rms_norm(app, 7, 3, 1, false, false, 8, 20);
  run_rms_norm(app, 1000, 5, 1, true, false, 12, 36);
  run_rms_norm(app, 257, 3, 2, true, true, 4, 0);
  run_rms_norm(app, 33, 2, 3, false, true, 0, 8);
  vkt_close(app);
}

/* ---- matmul_fused ------------------------------------------------------------------------ */

static void expect_invalid(vkrt_appliance *app, vkrt_status s, const char *needle);

/* Random q4_K rows (any quants and 6-bit scales, small d and dmin) and their values. */
static void q4_k_rows(uint8_t *w, float *wf, int64_t k, int64_t rows) {
  int64_t row_bytes = k / 256 * 144;
  vkt_fill_random(w, (size_t)(row_bytes * rows), &rng);
  for (int64_t b = 0; b < row_bytes * rows / 144; b++) {
    uint16_t d = vkrt_f32_to_f16(rnd(0.0002f, 0.0008f)), m = vkrt_f32_to_f16(rnd(0.0001f, 0.0004f));
    memcpy(w + 144 * b, &d, 2);
    memcpy(w + 144 * b + 2, &m, 2);
  }
  for (int64_t n = 0; n < rows; n++)
    assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_Q4_K, w + n * row_bytes, wf + n * k, k), VKRT_OK);
}

/* Random f16 or f32 rows (values within +-0.01) and their values. */
static void dense_rows(vkrt_type t, uint8_t *w, float *wf, int64_t k, int64_t rows) {
  for (int64_t i = 0; i < k * rows; i++) {
    float v = rnd(-0.01f, 0.01f);
    if (t == VKRT_TYPE_F16) {
      uint16_t h = vkrt_f32_to_f16(v);
      memcpy(w + 2 * i, &h, 2);
      wf[i] = vkrt_f16_to_f32(h);
    } else {
      memcpy(w + 4 * i, &v, 4);
      wf[i] = v;
    }
  }
}

/* vkrt_op_matmul_fused with and without the norm and the swiglu on w {K, N} of type wt (q4_K,
 * f16 or f32): dst against a float64 reference and against the separate ops on the same
 * operands; one dispatch of the kernel of its type (the counters: the quantized or the
 * matrix-vector kernels); the bytes after dst keep their poison. */
static void run_matmul_fused(vkrt_appliance *app, vkrt_type wt, int64_t K, int64_t N,
                             bool with_norm, bool swiglu) {
  const bool dense = wt != VKRT_TYPE_Q4_K;
  const int64_t rows_out = swiglu ? N / 2 : N;
  const int64_t row_bytes = dense ? K * (wt == VKRT_TYPE_F16 ? 2 : 4) : K / 256 * 144;
  const uint64_t x_at = 64, g_at = 32 + 4 * (uint64_t)K + 16 * 5, pad = 64;
  const float eps = K == 768 ? 0.5f : 1e-5f; /* one where eps moves the scale */
  vkt_hbuf w = vkt_hbuf_new(app, (uint64_t)(row_bytes * N));
  vkt_hbuf xg = vkt_hbuf_new(app, g_at + 4 * (uint64_t)K);
  vkt_hbuf d = vkt_hbuf_new(app, 4 * (uint64_t)rows_out + pad);
  vkt_hbuf tmp = vkt_hbuf_new(app, 4 * ((uint64_t)K + 2 * (uint64_t)N));
  float *wf = malloc(sizeof(float) * (size_t)(K * N));
  float *sep = malloc(sizeof(float) * (size_t)rows_out);
  assert_non_null(wf);
  assert_non_null(sep);
  if (dense)
    dense_rows(wt, w.map, wf, K, N);
  else
    q4_k_rows(w.map, wf, K, N);
  float *x = (float *)(xg.map + x_at), *g = (float *)(xg.map + g_at);
  for (int64_t k = 0; k < K; k++) {
    /* mean 0 (products of both signs, so silu does not saturate), mean(x^2) well away from 1 */
    x[k] = rnd(-2.0f, 2.0f) + (k % 7 == 0 ? (k % 2 ? 3.0f : -3.0f) : 0.0f);
    g[k] = rnd(0.5f, 1.5f);
  }
  vkt_poison(d.map, d.size);
  vkrt_tensor tw = vkrt_tensor_contiguous(w.buf, 0, wt, K, N, 1, 1);
  vkrt_tensor tx = vkrt_tensor_contiguous(xg.buf, x_at, VKRT_TYPE_F32, K, 1, 1, 1);
  vkrt_tensor tg = vkrt_tensor_contiguous(xg.buf, g_at, VKRT_TYPE_F32, K, 1, 1, 1);
  vkrt_tensor td = vkrt_tensor_contiguous(d.buf, 0, VKRT_TYPE_F32, rows_out, 1, 1, 1);
  vkrt_matmul_fusion fz = {.norm = with_norm ? &tg : NULL, .eps = eps, .swiglu = swiglu};
  vkrt_lab_counters c0 = {0}, c1 = {0};
  if (IS_ENABLED(CONFIG_VKRT_LAB))
    vkt_check(app, vkrt_lab_counters_get(app, 0, &c0));
  vkt_check(app, vkrt_op_matmul_fused(&td, &tw, &tx, &fz));
  vkt_check(app, vkrt_finish(app, 0));
  if (IS_ENABLED(CONFIG_VKRT_LAB)) {
    vkt_check(app, vkrt_lab_counters_get(app, 0, &c1));
    /* one dispatch, of the kernel of w's type */
    assert_int_equal(c1.quant_matvec - c0.quant_matvec, !dense);
    assert_int_equal(c1.matvec - c0.matvec, dense);
    assert_int_equal(c1.matmul_fused_norm - c0.matmul_fused_norm, with_norm);
    assert_int_equal(c1.matmul_fused_swiglu - c0.matmul_fused_swiglu, swiglu);
  }
  /* the separate ops: rms_norm, matmul, swiglu */
  vkrt_tensor th = vkrt_tensor_contiguous(tmp.buf, 0, VKRT_TYPE_F32, K, 1, 1, 1);
  vkrt_tensor tp = vkrt_tensor_contiguous(tmp.buf, 4 * (uint64_t)K, VKRT_TYPE_F32, N, 1, 1, 1);
  if (with_norm)
    vkt_check(app, vkrt_op_rms_norm(&th, &tx, &tg, eps));
  vkt_check(app, vkrt_op_matmul(&tp, &tw, with_norm ? &th : &tx));
  if (swiglu) {
    vkrt_tensor gate = vkrt_tensor_contiguous(tmp.buf, 4 * (uint64_t)K, VKRT_TYPE_F32, N / 2, 1, 1, 1);
    vkrt_tensor up = vkrt_tensor_contiguous(tmp.buf, 4 * (uint64_t)(K + N / 2), VKRT_TYPE_F32, N / 2, 1, 1, 1);
    vkrt_tensor out = vkrt_tensor_contiguous(tmp.buf, 4 * (uint64_t)(K + N), VKRT_TYPE_F32, N / 2, 1, 1, 1);
    vkt_check(app, vkrt_op_swiglu(&out, &gate, &up));
    vkt_check(app, vkrt_finish(app, 0));
    memcpy(sep, tmp.map + 4 * (K + N), 4 * (size_t)rows_out);
  } else {
    vkt_check(app, vkrt_finish(app, 0));
    memcpy(sep, tmp.map + 4 * K, 4 * (size_t)rows_out);
  }
  double scale = with_norm ? vkt_rms_scale(x, K, eps) : 1.0;
  const float *got = (const float *)d.map;
  for (int64_t i = 0; i < rows_out; i++) {
    double y[2] = {0, 0}, mag = 0;
    for (int r = 0; r < (swiglu ? 2 : 1); r++) {
      const float *wr = wf + (i + r * rows_out) * K;
      for (int64_t k = 0; k < K; k++) {
        double h = x[k] * (with_norm ? scale * g[k] : 1.0);
        y[r] += wr[k] * h;
        mag += fabs(wr[k] * h);
      }
    }
    double want = swiglu ? y[0] / (1.0 + exp(-y[0])) * y[1] : y[0];
    double tol = 2e-6 * mag * (swiglu ? 1.0 + fabs(y[0]) + fabs(y[1]) : 1.0) + 1e-30;
    if (!(fabs(got[i] - want) <= tol))
      fail_msg("%s K %lld N %lld norm %d swiglu %d: dst[%lld] = %.9g, float64 %.9g",
               vkrt_type_str(wt), (long long)K, (long long)N, with_norm, swiglu, (long long)i,
               (double)got[i], want);
    if (!(fabs(got[i] - sep[i]) <= tol))
      fail_msg("%s K %lld N %lld norm %d swiglu %d: dst[%lld] = %.9g fused, %.9g by the "
               "separate ops", vkrt_type_str(wt), (long long)K, (long long)N, with_norm, swiglu,
               (long long)i, (double)got[i], (double)sep[i]);
  }
  uint8_t poison[64];
  vkt_poison(poison, sizeof(poison));
  if (memcmp(d.map + 4 * rows_out, poison, pad))
    fail_msg("K %lld N %lld: bytes after dst written", (long long)K, (long long)N);
  free(wf);
  free(sep);
  hb_free(&w);
  hb_free(&xg);
  hb_free(&d);
  hb_free(&tmp);
}

static void test_matmul_fused(void **state) {
  (void)state;
  if ((!IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K) && !IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL)) ||
      !IS_ENABLED(CONFIG_VKRT_KERNEL_RMS_NORM) || !IS_ENABLED(CONFIG_VKRT_KERNEL_SWIGLU))
    skip();
  vkrt_appliance *app = open_app();
  /* q4_K: 3 super-blocks: a warp of the workgroup without one; odd N; F 37: the last
   * workgroup's pairs short; K 4352: x g not staged in shared memory (K > 4096), multiplied in
   * the loop. f16 and f32 (the matrix-vector kernel, x g taken as x is loaded): the same
   * shapes and K 72 / 20 (fewer 16-byte chunks than the workgroup's invocations) */
  const vkrt_type types[3] = {VKRT_TYPE_Q4_K, VKRT_TYPE_F16, VKRT_TYPE_F32};
  const bool type_in[3] = {IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K),
                           IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL_F16),
                           IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL)};
  for (int t = 0; t < 3; t++)
    for (int norm = 0; t < 3 && type_in[t] && norm < 2; norm++)
      for (int sw = 0; sw < 2; sw++) {
        run_matmul_fused(app, types[t], 768, sw ? 74 : 41, norm, sw);
        run_matmul_fused(app, types[t], 2048, sw ? 2 * 53 : 67, norm, sw);
        run_matmul_fused(app, types[t], 4352, sw ? 18 : 23, norm, sw);
        if (t > 0)
          run_matmul_fused(app, types[t], t == 1 ? 72 : 20, sw ? 2 * 61 : 61, norm, sw);
      }
  /* a dense head past one binding (maxStorageBufferRange lowered): the norm in every slice
   * of rows; with swiglu (gate and up rows a slice apart) refused */
  if (IS_ENABLED(CONFIG_VKRT_LAB) && IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL_F16)) {
    vkt_check(app, vkrt_lab_limits_set(app, 0, 0, false, 16384));
    vkrt_lab_counters c0 = {0}, c1 = {0};
    vkt_check(app, vkrt_lab_counters_get(app, 0, &c0));
    run_matmul_fused(app, VKRT_TYPE_F16, 1024, 37, true, false); /* 2 KiB rows: 5 slices */
    vkt_check(app, vkrt_lab_counters_get(app, 0, &c1));
    assert_int_equal(c1.matvec_split - c0.matvec_split, 2); /* the fused op, the product */
    vkt_hbuf hw = vkt_hbuf_new(app, 2048 * 38), hx = vkt_hbuf_new(app, 4096 + 4096);
    vkrt_tensor tw = vkrt_tensor_contiguous(hw.buf, 0, VKRT_TYPE_F16, 1024, 38, 1, 1);
    vkrt_tensor tx = vkrt_tensor_contiguous(hx.buf, 0, VKRT_TYPE_F32, 1024, 1, 1, 1);
    vkrt_tensor td = vkrt_tensor_contiguous(hx.buf, 4096, VKRT_TYPE_F32, 19, 1, 1, 1);
    vkrt_status s = vkrt_op_matmul_fused(&td, &tw, &tx, &(vkrt_matmul_fusion){.swiglu = 1});
    if (s != VKRT_ERROR_INVALID_ARGUMENT || !strstr(vkrt_last_error(app), "more than one binding"))
      fail_msg("f16 swiglu past one binding: %s (%s)", vkrt_status_str(s), vkrt_last_error(app));
    vkt_check(app, vkrt_lab_limits_set(app, 0, 0, false, 0));
    hb_free(&hw);
    hb_free(&hx);
  }
  if (!IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K) || !IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL_F16)) {
    vkt_close(app);
    return;
  }
  /* what the fused kernels do not take: UNSUPPORTED, with the reason, nothing recorded */
  vkt_hbuf a = vkt_hbuf_new(app, 65536), b = vkt_hbuf_new(app, 4096);
  vkrt_tensor w = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_Q4_K, 512, 8, 1, 1);
  vkrt_tensor w6 = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_Q6_K, 512, 8, 1, 1);
  vkrt_tensor w16 = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F16, 500, 8, 1, 1);
  w16.nb[1] = 1008; /* rows 16-byte aligned, K not a multiple of 8 */
  w16.nb[2] = w16.nb[3] = 8 * 1008;
  vkrt_tensor x500 = vkrt_tensor_contiguous(a.buf, 32768, VKRT_TYPE_F32, 500, 1, 1, 1);
  vkrt_tensor d8_16 = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 8, 1, 1, 1);
  vkrt_tensor x = vkrt_tensor_contiguous(a.buf, 32768, VKRT_TYPE_F32, 512, 1, 1, 1);
  vkrt_tensor x2 = vkrt_tensor_contiguous(a.buf, 32768, VKRT_TYPE_F32, 512, 2, 1, 1);
  vkrt_tensor x4 = vkrt_tensor_contiguous(a.buf, 32772, VKRT_TYPE_F32, 512, 1, 1, 1);
  vkrt_tensor g = vkrt_tensor_contiguous(a.buf, 40960, VKRT_TYPE_F32, 512, 1, 1, 1);
  vkrt_tensor g4 = vkrt_tensor_contiguous(a.buf, 40964, VKRT_TYPE_F32, 512, 1, 1, 1);
  vkrt_tensor gs = vkrt_tensor_contiguous(a.buf, 40960, VKRT_TYPE_F32, 512, 1, 1, 1);
  gs.nb[0] = 8; /* every other float: aligned, not dense */
  gs.nb[1] = gs.nb[2] = gs.nb[3] = 8 * 512;
  vkrt_tensor w16d = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F16, 512, 8, 1, 1);
  vkrt_tensor d8 = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 8, 1, 1, 1);
  vkrt_tensor d4 = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 4, 1, 1, 1);
  vkrt_tensor d82 = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 8, 2, 1, 1);
  vkrt_matmul_fusion none = {0}, fn = {.norm = &g, .eps = 1e-6f}, fn4 = {.norm = &g4, .eps = 1e-6f},
                     fns = {.norm = &gs, .eps = 1e-6f};
  vkrt_lab_stream s0 = {0}, s1 = {0};
  vkt_check(app, vkrt_finish(app, 0));
  if (IS_ENABLED(CONFIG_VKRT_LAB))
    vkt_check(app, vkrt_lab_stream_get(app, 0, &s0));
  const struct {
    const vkrt_tensor *d, *w, *x;
    const vkrt_matmul_fusion *f;
    const char *needle;
  } unsupported[] = {
      {&d8, &w6, &x, &fn, "q6_K"}, {&d8_16, &w16, &x500, &none, "multiple of 8"},
      {&d82, &w, &x2, &none, "2 columns"},
      {&d8, &w, &x4, &none, "16-byte aligned"}, {&d8, &w, &x, &fn4, "norm must start 16-byte"},
      {&d8, &w, &x, &fns, "norm must start 16-byte"},
      {&d8, &w16d, &x, &fn4, "norm must start 16-byte"},
      {&d8, &w16d, &x, &fns, "norm must start 16-byte"}};
  for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
    vkrt_status s = vkrt_op_matmul_fused(unsupported[i].d, unsupported[i].w, unsupported[i].x,
                                         unsupported[i].f);
    if (s != VKRT_ERROR_UNSUPPORTED || !strstr(vkrt_last_error(app), unsupported[i].needle) ||
        !strstr(vkrt_last_error(app), "one by one"))
      fail_msg("case %zu: %s (%s), want UNSUPPORTED naming '%s'", i, vkrt_status_str(s),
               vkrt_last_error(app), unsupported[i].needle);
  }
  if (IS_ENABLED(CONFIG_VKRT_LAB)) {
    vkt_check(app, vkrt_lab_stream_get(app, 0, &s1));
    assert_int_equal(s1.barriers + s1.barriers_elided, s0.barriers + s0.barriers_elided);
  }
  /* invalid descriptors: INVALID_ARGUMENT with the reason */
  vkrt_matmul_fusion sw = {.swiglu = 1}, bad_eps = {.norm = &g, .eps = -1.0f};
  vkrt_tensor w7 = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_Q4_K, 512, 7, 1, 1);
  vkrt_tensor g256 = vkrt_tensor_contiguous(a.buf, 40960, VKRT_TYPE_F32, 256, 1, 1, 1);
  vkrt_matmul_fusion short_norm = {.norm = &g256};
  vkrt_tensor d3 = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 3, 1, 1, 1);
  expect_invalid(app, vkrt_op_matmul_fused(&d4, &w, &x, NULL), "fusion is NULL");
  expect_invalid(app, vkrt_op_matmul_fused(&d3, &w7, &x, &sw), "even row count");
  expect_invalid(app, vkrt_op_matmul_fused(&d8, &w, &x, &sw), "w.ne[1] / 2");
  expect_invalid(app, vkrt_op_matmul_fused(&d4, &w, &x, &none), "w.ne[1]");
  expect_invalid(app, vkrt_op_matmul_fused(&d8, &w, &x, &short_norm), "256 elements");
  expect_invalid(app, vkrt_op_matmul_fused(&d8, &w, &x, &bad_eps), "eps");
  hb_free(&a);
  hb_free(&b);
  vkt_close(app);
}

/* ---- rope ----------------------------------------------------------------------------------- */

/* ggml's rope from its definition, in double: theta_p = pos freq_scale base^(-2p / n_dims)
 * / factors[p] (factors NULL: 1). */
static void rope_ref(const uint8_t *xm, const vkrt_tensor *x, uint8_t *em, const vkrt_tensor *d,
                     const int32_t *pos, const vkrt_rope_params *rp, const double *factors,
                     float *tol) {
  int64_t hd = x->ne[0], half = rp->n_dims / 2;
  uint64_t k = 0;
  for (int64_t t = 0; t < x->ne[2]; t++)
    for (int64_t h = 0; h < x->ne[1]; h++) {
      for (int64_t p = 0; p < half; p++) {
        double theta = (double)pos[t] * rp->freq_scale *
                       pow(rp->freq_base, -2.0 * (double)p / (double)rp->n_dims) /
                       (factors ? factors[p] : 1.0);
        int64_t e0 = rp->mode == VKRT_ROPE_NEOX ? p : 2 * p;
        int64_t e1 = rp->mode == VKRT_ROPE_NEOX ? p + half : 2 * p + 1;
        double x0 = rd_f32(xm, at(x, e0, h, t)), x1 = rd_f32(xm, at(x, e1, h, t));
        wr_f32(em, at(d, e0, h, t), (float)(x0 * cos(theta) - x1 * sin(theta)));
        wr_f32(em, at(d, e1, h, t), (float)(x0 * sin(theta) + x1 * cos(theta)));
      }
      for (int64_t e = rp->n_dims; e < hd; e++)
        memcpy(em + at(d, e, h, t), xm + at(x, e, h, t), 4);
      /* theta is a float on the device: its rounding (relative 2^-23, times pos) moves the
       * angle; elements past n_dims are copied exactly. */
      for (int64_t e = 0; e < hd; e++, k++) {
        double mag = fabs(rd_f32(xm, at(x, e, h, t))) + 2.0;
        tol[k] = e < rp->n_dims ? (float)(mag * (4e-6 + 3e-7 * fabs((double)pos[t]))) : 0.0f;
      }
    }
}

/* with_factors: vkrt_op_rope_ext with fresh factors in [1, 32) (Llama 3.1's range), every
 * other f32 of their buffer from byte 4, rewritten after recording like the positions. */
static void run_rope(vkrt_appliance *app, int64_t hd, int64_t heads, int64_t tokens,
                     uint32_t n_dims, uint32_t mode, bool in_place, int64_t pad, uint64_t off,
                     int32_t max_pos, bool with_factors) {
  vkrt_rope_params rp = {.mode = mode, .n_dims = n_dims, .freq_base = 10000.0f,
                         .freq_scale = mode == VKRT_ROPE_NEOX ? 0.5f : 1.0f};
  vkrt_tensor x = mk(NULL, off, VKRT_TYPE_F32, hd, heads, tokens, pad);
  vkrt_tensor d = in_place ? x : mk(NULL, 8, VKRT_TYPE_F32, hd, heads, tokens, pad + 8);
  vkrt_tensor pos = mk(NULL, 12, VKRT_TYPE_I32, tokens, 1, 1, 0);
  pos.nb[0] = 8; /* every other i32 */
  vkt_hbuf xb = vkt_hbuf_new(app, extent(&x)), pb = vkt_hbuf_new(app, 12 + 8 * (uint64_t)tokens + 8);
  vkt_hbuf db = in_place ? xb : vkt_hbuf_new(app, extent(&d));
  x.buffer = xb.buf, d.buffer = db.buf, pos.buffer = pb.buf;
  vkt_fill_random(xb.map, xb.size, &rng);
  fill_f32(xb.map, &x, -3.0f, 3.0f);
  if (!in_place)
    vkt_poison(db.map, db.size);
  vkt_fill_random(pb.map, pb.size, &rng);
  int32_t *p_rec = malloc((size_t)tokens * 4), *p_run = malloc((size_t)tokens * 4);
  for (int64_t t = 0; t < tokens; t++) {
    p_rec[t] = (int32_t)(vkrt_xorshift(&rng) % (uint64_t)(max_pos + 1));
    p_run[t] = t == 0 ? max_pos : (int32_t)(vkrt_xorshift(&rng) % (uint64_t)(max_pos + 1));
    wr_i32(pb.map, 12 + 8 * (uint64_t)t, p_rec[t]);
  }
  const uint32_t pairs = n_dims / 2;
  vkrt_tensor ff = mk(NULL, 4, VKRT_TYPE_F32, pairs, 1, 1, 0);
  ff.nb[0] = 8;
  vkt_hbuf fb = vkt_hbuf_new(app, 4 + 8 * (uint64_t)pairs);
  ff.buffer = fb.buf;
  vkt_fill_random(fb.map, fb.size, &rng);
  double *factors = malloc(pairs * sizeof(double));
  uint8_t *expect = malloc(db.size);
  float *tol = malloc((size_t)(hd * heads * tokens) * sizeof(float));
  memcpy(expect, db.map, db.size);
  vkt_check(app, with_factors ? vkrt_op_rope_ext(&d, &x, &pos, &ff, &rp)
                              : vkrt_op_rope(&d, &x, &pos, &rp));
  /* The positions (and factors) change after the op was recorded, before the submit: the
   * work reads them when it runs (what a replay of recorded work for the next token relies
   * on). */
  for (int64_t t = 0; t < tokens; t++)
    wr_i32(pb.map, 12 + 8 * (uint64_t)t, p_run[t]);
  for (uint32_t p = 0; p < pairs; p++) {
    float f = 1.0f + (float)(vkrt_xorshift(&rng) >> 40) / (float)(1 << 24) * 31.0f;
    memcpy(fb.map + 4 + 8 * (uint64_t)p, &f, 4);
    factors[p] = f;
  }
  rope_ref(xb.map, &x, expect, &d, p_run, &rp, with_factors ? factors : NULL, tol);
  vkt_check(app, vkrt_finish(app, 0));
  char what[160];
  snprintf(what, sizeof(what), "rope %s hd %lld heads %lld tokens %lld n_dims %u%s%s",
           mode == VKRT_ROPE_NEOX ? "neox" : "normal", (long long)hd, (long long)heads,
           (long long)tokens, n_dims, in_place ? " in place" : "",
           with_factors ? " with frequency factors" : "");
  compare(db.map, expect, db.size, &d, tol, what);
  free(factors);
  hb_free(&fb);
  free(p_rec);
  free(p_run);
  free(expect);
  free(tol);
  hb_free(&xb);
  hb_free(&pb);
  if (!in_place)
    hb_free(&db);
}

static void test_rope(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE));
  vkrt_appliance *app = open_app();
  for (uint32_t mode = 0; mode <= VKRT_ROPE_NEOX; mode += VKRT_ROPE_NEOX) {
    run_rope(app, 128, 32, 1, 128, mode, true, 0, 0, 32767, false); /* llama-3 q of one token */
    run_rope(app, 128, 8, 3, 128, mode, false, 16, 64, 4096, false);
    run_rope(app, 64, 5, 2, 32, mode, false, 0, 4, 1000, false);    /* n_dims < head_dim */
    run_rope(app, 7, 3, 4, 4, mode, true, 4, 8, 50, false);          /* odd head size */
    run_rope(app, 2, 1, 1, 2, mode, false, 0, 0, 3, false);
    /* ggml's freq_factors (Llama 3.1's rope_freqs.weight) */
    run_rope(app, 128, 32, 1, 128, mode, true, 0, 0, 32767, true);
    run_rope(app, 64, 5, 2, 32, mode, false, 0, 4, 1000, true);
    run_rope(app, 7, 3, 4, 4, mode, true, 4, 8, 50, true);
  }
  vkt_close(app);
}

/* Positions written by earlier device work in the same stream (a copy into pos) are the
 * ones the rope reads. */
static void test_rope_positions_from_device(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE));
  vkrt_appliance *app = open_app();
  vkrt_rope_params rp = {.mode = VKRT_ROPE_NORMAL, .n_dims = 64, .freq_base = 500000.0f,
                         .freq_scale = 1.0f};
  vkrt_tensor x = mk(NULL, 0, VKRT_TYPE_F32, 64, 4, 1, 0), d = mk(NULL, 0, VKRT_TYPE_F32, 64, 4, 1, 0);
  vkt_hbuf xb = vkt_hbuf_new(app, extent(&x)), db = vkt_hbuf_new(app, extent(&d)), pb = vkt_hbuf_new(app, 64);
  vkrt_buffer *dev_pos;
  vkt_check(app, vkrt_buffer_create(app, 0, 64, 0, &dev_pos));
  vkrt_tensor pos = mk(dev_pos, 16, VKRT_TYPE_I32, 1, 1, 1, 0);
  x.buffer = xb.buf, d.buffer = db.buf;
  fill_f32(xb.map, &x, -1.0f, 1.0f);
  float *tol = malloc(64 * 4 * sizeof(float));
  uint8_t *expect = malloc(db.size);
  for (int32_t step = 0; step < 3; step++) {
    int32_t p = 17 + 1000 * step;
    wr_i32(pb.map, 0, p);
    vkt_poison(db.map, db.size);
    memcpy(expect, db.map, db.size);
    vkt_check(app, vkrt_cmd_copy_buffer(dev_pos, 16, pb.buf, 0, 4));
    vkt_check(app, vkrt_op_rope(&d, &x, &pos, &rp));
    vkt_check(app, vkrt_finish(app, 0));
    rope_ref(xb.map, &x, expect, &d, &p, &rp, NULL, tol);
    compare(db.map, expect, db.size, &d, tol, "rope after a device copy of its position");
  }
  free(tol);
  free(expect);
  vkrt_buffer_destroy(dev_pos);
  hb_free(&xb);
  hb_free(&db);
  hb_free(&pb);
  vkt_close(app);
}

/* ---- get_rows ------------------------------------------------------------------------------ */

static bool type_in_build(vkrt_type t) {
  return t != VKRT_TYPE_F16 || IS_ENABLED(CONFIG_VKRT_TYPE_F16);
}

/* A table of n_rows rows of `type` with random contents: any bit pattern for f32 and f16
 * (NaN payloads, infinities, subnormals: the gather is bit-exact), random quants with finite
 * normal scales for the block types. */
static void fill_table(uint8_t *base, const vkrt_tensor *t) {
  uint64_t row_bytes = (uint64_t)t->ne[0] / vkrt_type_block(t->type) * vkrt_type_size(t->type);
  for (int64_t r = 0; r < t->ne[1]; r++) {
    uint8_t *row = base + at(t, 0, r, 0);
    vkt_fill_random(row, row_bytes, &rng);
    if (t->type == VKRT_TYPE_Q8_0)
      for (uint64_t b = 0; b < row_bytes; b += 34) {
        uint16_t h = rnd_half_scale();
        memcpy(row + b, &h, 2);
      }
    if (t->type == VKRT_TYPE_Q4_K)
      for (uint64_t b = 0; b < row_bytes; b += 144) {
        uint16_t h = rnd_half_scale(), m = rnd_half_scale();
        memcpy(row + b, &h, 2);
        memcpy(row + b + 2, &m, 2);
      }
    if (t->type == VKRT_TYPE_Q6_K) /* d last; the int8 scales stay random bytes */
      for (uint64_t b = 0; b < row_bytes; b += 210) {
        uint16_t h = rnd_half_scale();
        memcpy(row + b + 208, &h, 2);
      }
  }
}

static void run_get_rows(vkrt_appliance *app, vkrt_type type, int64_t n_embd, int64_t n_rows,
                         int64_t n, int64_t pad, uint64_t off) {
  /* offsets at the type's alignment (2 bytes for f16, q8_0 and q6_K); pads of whole blocks */
  bool two = type == VKRT_TYPE_F16 || type == VKRT_TYPE_Q8_0 || type == VKRT_TYPE_Q6_K;
  uint64_t toff = (two ? 2 : 4) * off;
  vkrt_tensor table = mk(NULL, toff, type, n_embd, n_rows, 1,
                         pad * (int64_t)vkrt_type_size(type));
  vkrt_tensor ids = mk(NULL, 4 * off, VKRT_TYPE_I32, n, 1, 1, 0);
  ids.nb[0] = 12; /* one id every three i32 */
  vkrt_tensor d = mk(NULL, 8, VKRT_TYPE_F32, n_embd, n, 1, 4 * pad);
  vkt_hbuf tb = vkt_hbuf_new(app, extent(&table)), ib = vkt_hbuf_new(app, 4 * off + 12 * (uint64_t)n + 8),
       db = vkt_hbuf_new(app, extent(&d));
  table.buffer = tb.buf, ids.buffer = ib.buf, d.buffer = db.buf;
  vkt_fill_random(tb.map, tb.size, &rng);
  fill_table(tb.map, &table);
  vkt_fill_random(ib.map, ib.size, &rng);
  vkt_poison(db.map, db.size);
  uint8_t *expect = malloc(db.size);
  memcpy(expect, db.map, db.size);
  float *row = malloc((size_t)n_embd * sizeof(float)), *tol = malloc((size_t)(n_embd * n) * sizeof(float));
  int32_t *id = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = vkrt_xorshift(&rng);
    /* mostly valid ids, some repeated, some out of range on either side */
    id[i] = r % 8 == 0 ? -1 - (int32_t)(r >> 40) % 3 : r % 8 == 1 ? (int32_t)n_rows + (int32_t)(r >> 40) % 2
                                                              : (int32_t)((r >> 16) % (uint64_t)n_rows);
    if (i == 0)
      id[i] = (int32_t)n_rows - 1;
    wr_i32(ib.map, at(&ids, i, 0, 0), id[i]);
  }
  for (int64_t i = 0; i < n; i++) {
    bool valid = id[i] >= 0 && id[i] < n_rows;
    if (valid)
      assert_int_equal(vkrt_dequantize_row(type, tb.map + at(&table, 0, id[i], 0), row, n_embd), VKRT_OK);
    float rmax = 0;
    for (int64_t e = 0; e < n_embd; e++)
      rmax = valid && fabsf(row[e]) > rmax ? fabsf(row[e]) : rmax;
    for (int64_t e = 0; e < n_embd; e++) {
      wr_f32(expect, at(&d, e, i, 0), valid ? row[e] : 0.0f);
      /* q4_K: d sc q - dmin m may be fused on the device; the rest is one rounding or none
       * (q6_K: d sc q in the reference's order) */
      tol[i * n_embd + e] = type == VKRT_TYPE_Q4_K ? rmax * 1e-6f : 0.0f;
    }
  }
  vkt_check(app, vkrt_op_get_rows(&d, &table, &ids));
  vkt_check(app, vkrt_finish(app, 0));
  char what[128];
  snprintf(what, sizeof(what), "get_rows %s %lldx%lld, %lld ids", vkrt_type_str(type),
           (long long)n_embd, (long long)n_rows, (long long)n);
  /* f32, f16, q8_0, q6_K: bit for bit (NaN payloads included) */
  compare(db.map, expect, db.size, type == VKRT_TYPE_Q4_K ? &d : NULL, tol, what);
  free(expect);
  free(row);
  free(tol);
  free(id);
  hb_free(&tb);
  hb_free(&ib);
  hb_free(&db);
}

static void test_get_rows(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_GET_ROWS));
  vkrt_appliance *app = open_app();
  static const vkrt_type types[] = {VKRT_TYPE_F32, VKRT_TYPE_F16, VKRT_TYPE_Q8_0, VKRT_TYPE_Q4_K,
                                    VKRT_TYPE_Q6_K};
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(types); t++) {
    if (!type_in_build(types[t]))
      continue;
    /* q6_K: 3 blocks of 210 bytes a row, so rows alternate between 0 and 2 mod 4 */
    int64_t e = types[t] == VKRT_TYPE_Q4_K ? 512 : types[t] == VKRT_TYPE_Q6_K ? 768
                : types[t] == VKRT_TYPE_Q8_0 ? 96 : 37;
    run_get_rows(app, types[t], e, 51, 9, 0, 0);
    run_get_rows(app, types[t], e, 3, 17, 1, 3);
    run_get_rows(app, types[t], 4096, 5, 1, 2, 1);
  }
  vkt_close(app);
}

/* ---- set_rows ------------------------------------------------------------------------------ */

/* ggml's quantize_row_q8_0_ref, as written there (float arithmetic, roundf, f16 d). */
static void quantize_q8_0_ref(const float *x, uint8_t *y, int64_t n) {
  for (int64_t b = 0; b < n / 32; b++, x += 32, y += 34) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
      amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    uint16_t h = vkrt_f32_to_f16(d);
    memcpy(y, &h, 2);
    for (int j = 0; j < 32; j++)
      y[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
  }
}

/* A q8_0 block whose quotients x id round (in f32) to exactly k + 0.5 while the exact
 * products lie below it: roundf of the rounded product goes up, of the exact one (a fused
 * x id - k, an fma) down. 32 values, the first the block's max; returns how many traps. */
static int contraction_traps(float *x) {
  const float amax = 100.3f, d = amax / 127.0f, id = 1.0f / d;
  int n = 0;
  x[n++] = amax;
  for (int k = 1; k < 126 && n < 32; k++) {
    float below = ((float)k + 0.5f) / id, above = below;
    for (int u = 0; u < 16; u++, below = nextafterf(below, 0.0f), above = nextafterf(above, INFINITY)) {
      float c = 0.0f;
      for (int side = 0; side < 2 && c == 0.0f; side++) {
        float t = side ? above : below;
        double exact = (double)t * (double)id; /* 24 x 24 bits: exact in a double */
        if (t < amax && (float)exact == (float)k + 0.5f && exact < (double)k + 0.5)
          c = t;
      }
      if (c != 0.0f) {
        x[n] = n % 2 ? c : -c;
        n++;
        break;
      }
    }
  }
  int traps = n - 1;
  while (n < 32)
    x[n++] = 0.25f;
  return traps;
}

/* Values for the f16 and q8_0 rows: random magnitudes from 2^-30 to 2^17 (f16 subnormals,
 * overflow to inf), exact .5 quantization ties, a zero block, products that round to ties. */
static void fill_cache_src(uint8_t *base, const vkrt_tensor *s, vkrt_type dt) {
  for (int64_t r = 0; r < s->ne[1]; r++) {
    float scale = ldexpf(1.0f, (int)(vkrt_xorshift(&rng) % 48) - 30);
    bool grid = r % 3 == 2; /* k / 1024: short mantissas, where quotients sit near ties */
    for (int64_t e = 0; e < s->ne[0]; e++) {
      float v = rnd(-1.0f, 1.0f) * (dt == VKRT_TYPE_F16 ? ldexpf(1.0f, (int)(vkrt_xorshift(&rng) % 48) - 30) : scale);
      if (grid)
        v = (float)((int)(vkrt_xorshift(&rng) % 2049) - 1024) / 1024.0f;
      wr_f32(base, at(s, e, r, 0), v);
    }
    if (dt == VKRT_TYPE_Q8_0 && r == 0) /* block 0: max 127, ties at k + 0.5 */
      for (int64_t e = 0; e < 32; e++)
        wr_f32(base, at(s, e, r, 0), e == 0 ? 127.0f : (float)((int64_t)(e * 7 % 120) - 60) + 0.5f);
    if (dt == VKRT_TYPE_Q8_0 && r == 1 && s->ne[0] >= 64)
      for (int64_t e = 32; e < 64; e++)
        wr_f32(base, at(s, e, r, 0), e % 2 ? 0.0f : -0.0f);
    if (dt == VKRT_TYPE_Q8_0 && r == 0 && s->ne[0] >= 64) { /* block 1 */
      float traps[32];
      assert_true(contraction_traps(traps) >= 8);
      for (int64_t e = 32; e < 64; e++)
        wr_f32(base, at(s, e, r, 0), traps[e - 32]);
    }
  }
}

static void run_set_rows(vkrt_appliance *app, vkrt_type dt, int64_t n, int64_t n_rows,
                         int64_t count, int64_t pad, uint64_t off) {
  vkrt_tensor dst = mk(NULL, (dt == VKRT_TYPE_F32 ? 4 : 2) * off, dt, n, n_rows, 1,
                       pad * (int64_t)vkrt_type_size(dt));
  vkrt_tensor src = mk(NULL, 4 * off, VKRT_TYPE_F32, n, count, 1, 4 * pad);
  vkrt_tensor rows = mk(NULL, 8, VKRT_TYPE_I32, count, 1, 1, 0);
  rows.nb[0] = 8;
  vkt_hbuf db = vkt_hbuf_new(app, extent(&dst) + 64), sb = vkt_hbuf_new(app, extent(&src)),
       rb = vkt_hbuf_new(app, 8 + 8 * (uint64_t)count + 8);
  dst.buffer = db.buf, src.buffer = sb.buf, rows.buffer = rb.buf;
  vkt_fill_random(sb.map, sb.size, &rng);
  if (dt == VKRT_TYPE_F32) { /* any bit pattern: the f32 rows move bit for bit */
  } else {
    fill_cache_src(sb.map, &src, dt);
  }
  vkt_fill_random(rb.map, rb.size, &rng);
  /* the cache: old contents that rows not written keep */
  vkt_fill_random(db.map, db.size, &rng);
  uint8_t *expect = malloc(db.size);
  memcpy(expect, db.map, db.size);
  /* distinct rows (one writer each), some out of range; recorded with other indices */
  int32_t *row_rec = malloc((size_t)count * 4), *row_run = malloc((size_t)count * 4);
  int64_t *perm = malloc((size_t)n_rows * sizeof(int64_t));
  for (int64_t i = 0; i < n_rows; i++)
    perm[i] = i;
  for (int64_t i = n_rows - 1; i > 0; i--) {
    int64_t j = (int64_t)(vkrt_xorshift(&rng) % (uint64_t)(i + 1)), tmp = perm[i];
    perm[i] = perm[j], perm[j] = tmp;
  }
  for (int64_t i = 0; i < count; i++) {
    row_rec[i] = (int32_t)perm[(i + 1) % n_rows];
    row_run[i] = i % 5 == 3 ? (i % 2 ? -2 : (int32_t)n_rows) : (int32_t)perm[i];
    wr_i32(rb.map, at(&rows, i, 0, 0), row_rec[i]);
  }
  vkt_check(app, vkrt_op_set_rows(&dst, &src, &rows));
  for (int64_t i = 0; i < count; i++) /* after recording, before the submit */
    wr_i32(rb.map, at(&rows, i, 0, 0), row_run[i]);
  float *row = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < count; i++) {
    if (row_run[i] < 0 || row_run[i] >= n_rows)
      continue;
    uint8_t *out = expect + at(&dst, 0, row_run[i], 0);
    if (dt == VKRT_TYPE_F32) {
      for (int64_t e = 0; e < n; e++)
        memcpy(out + 4 * e, sb.map + at(&src, e, i, 0), 4);
      continue;
    }
    for (int64_t e = 0; e < n; e++)
      row[e] = rd_f32(sb.map, at(&src, e, i, 0));
    if (dt == VKRT_TYPE_F16)
      for (int64_t e = 0; e < n; e++) {
        uint16_t h = vkrt_f32_to_f16(row[e]);
        memcpy(out + 2 * e, &h, 2);
      }
    else
      quantize_q8_0_ref(row, out, n);
    /* the library's CPU reference (vkrt_quantize_row) writes the same bytes */
    uint8_t lib[34 * 64];
    assert_true(n * 2 <= (int64_t)sizeof(lib));
    assert_int_equal(vkrt_quantize_row(dt, row, lib, n), VKRT_OK);
    if (memcmp(lib, out, (size_t)(n / vkrt_type_block(dt)) * vkrt_type_size(dt)))
      fail_msg("vkrt_quantize_row(%s) differs from ggml's quantizer", vkrt_type_str(dt));
  }
  vkt_check(app, vkrt_finish(app, 0));
  char what[128];
  snprintf(what, sizeof(what), "set_rows %s n %lld, %lld of %lld rows", vkrt_type_str(dt),
           (long long)n, (long long)count, (long long)n_rows);
  compare(db.map, expect, db.size, NULL, NULL, what); /* bit for bit, the rest untouched */
  free(expect);
  free(row_rec);
  free(row_run);
  free(perm);
  free(row);
  hb_free(&db);
  hb_free(&sb);
  hb_free(&rb);
}

static void test_set_rows(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_SET_ROWS));
  vkrt_appliance *app = open_app();
  static const vkrt_type types[] = {VKRT_TYPE_F32, VKRT_TYPE_F16, VKRT_TYPE_Q8_0};
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(types); t++) {
    if (!type_in_build(types[t]))
      continue;
    bool q = types[t] == VKRT_TYPE_Q8_0;
    run_set_rows(app, types[t], 1024, 40, 1, 0, 0);  /* one token, 8 KV heads of 128 */
    run_set_rows(app, types[t], q ? 96 : 37, 23, 11, 1, 3);
    run_set_rows(app, types[t], q ? 32 : 1, 7, 7, 0, 1);
    if (q) /* a prompt's worth of blocks: 16384 scales and reciprocals, bit for bit */
      run_set_rows(app, types[t], 1024, 600, 512, 0, 0);
  }
  vkt_close(app);
}

/* ---- rope_set_rows ------------------------------------------------------------------------- */

/* vkrt_op_rope_set_rows: src {hd, heads, tokens} (head rows `pad` bytes apart) roped at
 * positions unlike the rows they go to, written into a {hd * heads, n_rows} cache of dt at
 * distinct rows (every fifth one out of range, skipped); positions, rows and factors
 * rewritten after recording. Each written value against rope_ref's within its tolerance
 * and dt's rounding (f16: half an ulp; q8_0: d within the tolerance of max |v| / 127, each
 * q d within d / 2 and the f16 rounding of d); everything else of the cache untouched. */
static void run_rope_set_rows(vkrt_appliance *app, vkrt_type dt, int64_t hd, int64_t heads,
                              int64_t tokens, uint32_t n_dims, uint32_t mode, bool with_factors,
                              int64_t n_rows, int64_t pad) {
  vkrt_rope_params rp = {.mode = mode, .n_dims = n_dims, .freq_base = 500000.0f,
                         .freq_scale = mode == VKRT_ROPE_NEOX ? 0.25f : 1.0f};
  int64_t n = hd * heads;
  vkrt_tensor src = mk(NULL, 12, VKRT_TYPE_F32, hd, heads, tokens, pad);
  vkrt_tensor dst = mk(NULL, 2 * (int64_t)vkrt_type_size(dt), dt, n, n_rows, 1, 0);
  vkrt_tensor rows = mk(NULL, 8, VKRT_TYPE_I32, tokens, 1, 1, 0), pos = rows;
  rows.nb[0] = 8;
  pos.offset = 12;
  pos.nb[0] = 8;
  const uint32_t pairs = n_dims / 2;
  vkrt_tensor ff = mk(NULL, 4, VKRT_TYPE_F32, pairs, 1, 1, 0);
  vkt_hbuf sb = vkt_hbuf_new(app, extent(&src)), db = vkt_hbuf_new(app, extent(&dst) + 64),
           ib = vkt_hbuf_new(app, 16 + 8 * (uint64_t)tokens), fb = vkt_hbuf_new(app, 8 + 4 * (uint64_t)pairs);
  src.buffer = sb.buf, dst.buffer = db.buf, rows.buffer = pos.buffer = ib.buf, ff.buffer = fb.buf;
  vkt_fill_random(sb.map, sb.size, &rng);
  fill_f32(sb.map, &src, -3.0f, 3.0f);
  vkt_fill_random(db.map, db.size, &rng); /* old cache contents */
  vkt_fill_random(ib.map, ib.size, &rng);
  vkt_fill_random(fb.map, fb.size, &rng);
  for (int64_t i = 0; i < tokens; i++) { /* recorded with other indices than it runs with */
    wr_i32(ib.map, at(&rows, i, 0, 0), (int32_t)((i + 1) % n_rows));
    wr_i32(ib.map, at(&pos, i, 0, 0), (int32_t)i);
  }
  vkt_check(app, vkrt_op_rope_set_rows(&dst, &src, &rows, &pos, with_factors ? &ff : NULL, &rp));
  int32_t *row_run = malloc((size_t)tokens * 4), *pos_run = malloc((size_t)tokens * 4);
  for (int64_t i = 0; i < tokens; i++) {
    row_run[i] = i % 5 == 4 ? (i % 2 ? -1 : (int32_t)n_rows) : (int32_t)((n_rows - 1 - 3 * i) % n_rows);
    pos_run[i] = (int32_t)(vkrt_xorshift(&rng) % 32768);
    wr_i32(ib.map, at(&rows, i, 0, 0), row_run[i]);
    wr_i32(ib.map, at(&pos, i, 0, 0), pos_run[i]);
  }
  double *factors = malloc(pairs * sizeof(double));
  for (uint32_t p = 0; p < pairs; p++) {
    float f = 1.0f + (float)(vkrt_xorshift(&rng) >> 40) / (float)(1 << 24) * 31.0f;
    wr_f32(fb.map, at(&ff, p, 0, 0), f);
    factors[p] = f;
  }
  uint8_t *expect = malloc(db.size);
  memcpy(expect, db.map, db.size);
  vkrt_tensor roped = vkrt_tensor_contiguous(NULL, 0, VKRT_TYPE_F32, hd, heads, tokens, 1);
  uint8_t *ref = malloc((size_t)(n * tokens) * 4);
  float *tol = malloc((size_t)(n * tokens) * sizeof(float));
  rope_ref(sb.map, &src, ref, &roped, pos_run, &rp, with_factors ? factors : NULL, tol);
  vkt_check(app, vkrt_finish(app, 0));
  char what[160];
  snprintf(what, sizeof(what), "rope_set_rows %s %s hd %lld heads %lld tokens %lld n_dims %u%s",
           vkrt_type_str(dt), mode == VKRT_ROPE_NEOX ? "neox" : "normal", (long long)hd,
           (long long)heads, (long long)tokens, n_dims, with_factors ? " with factors" : "");
  for (int64_t i = 0; i < tokens; i++) {
    if (row_run[i] < 0 || row_run[i] >= n_rows)
      continue;
    uint64_t out = at(&dst, 0, row_run[i], 0);
    const float *v = (const float *)(void *)(ref + 4 * n * i);
    const float *t = tol + n * i;
    for (int64_t b0 = 0; b0 < n; b0 += 32) { /* q8_0 blocks; f32/f16 elements in runs of 32 */
      int64_t len = VKT_MIN(32, n - b0);
      double amax = 0, tmax = 0, d = 0;
      for (int64_t e = b0; e < b0 + len; e++) {
        amax = fmax(amax, fabs(v[e]));
        tmax = fmax(tmax, t[e]);
      }
      if (dt == VKRT_TYPE_Q8_0) {
        uint16_t h;
        memcpy(&h, db.map + out + 34 * (b0 / 32), 2);
        d = vkrt_f16_to_f32(h);
        if (!(fabs(d - amax / 127) <= tmax / 127 + amax / 127 * 0x1p-10))
          fail_msg("%s: row %d block %lld d = %.9g, expected %.9g", what, row_run[i],
                   (long long)(b0 / 32), d, amax / 127);
      }
      for (int64_t e = b0; e < b0 + len; e++) {
        double got, bound = t[e];
        if (dt == VKRT_TYPE_F32) {
          got = rd_f32(db.map, out + 4 * e);
        } else if (dt == VKRT_TYPE_F16) {
          uint16_t h;
          memcpy(&h, db.map + out + 2 * e, 2);
          got = vkrt_f16_to_f32(h);
          bound += fabs(v[e]) * 0x1p-11 + 0x1p-24;
        } else {
          got = d * (int8_t)db.map[out + 34 * (e / 32) + 2 + e % 32];
          bound += d / 2 + 127 * d * 0x1p-10; /* q rounds x / d; the stored d is f16 */
        }
        if (!(fabs(got - v[e]) <= bound))
          fail_msg("%s: token %lld (row %d, position %d) element %lld = %.9g, expected %.9g "
                   "(tolerance %.3g)", what, (long long)i, row_run[i], pos_run[i], (long long)e,
                   got, v[e], bound);
      }
    }
    memcpy(expect + out, db.map + out, (size_t)(n / vkrt_type_block(dt)) * vkrt_type_size(dt));
  }
  compare(db.map, expect, db.size, NULL, NULL, what); /* no other byte written */
  free(row_run);
  free(pos_run);
  free(factors);
  free(expect);
  free(ref);
  free(tol);
  hb_free(&sb);
  hb_free(&db);
  hb_free(&ib);
  hb_free(&fb);
}

static void test_rope_set_rows(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS));
  vkrt_appliance *app = open_app();
  static const vkrt_type types[] = {VKRT_TYPE_F32, VKRT_TYPE_F16, VKRT_TYPE_Q8_0};
  for (unsigned t = 0; t < VKT_ARRAY_SIZE(types); t++) {
    if (!type_in_build(types[t]))
      continue;
    for (uint32_t mode = 0; mode <= VKRT_ROPE_NEOX; mode += VKRT_ROPE_NEOX) {
      run_rope_set_rows(app, types[t], 128, 8, 1, 128, mode, false, 40, 0); /* llama-3 K */
      run_rope_set_rows(app, types[t], 128, 8, 1, 128, mode, true, 40, 0);
      run_rope_set_rows(app, types[t], 64, 3, 7, 32, mode, true, 23, 16); /* n_dims < hd */
      run_rope_set_rows(app, types[t], 32, 2, 6, 32, mode, false, 9, 4);
    }
  }
  vkt_close(app);
}

/* ---- argmax -------------------------------------------------------------------------------- */

static int32_t argmax_ref(const uint8_t *base, const vkrt_tensor *x, int64_t r) {
  int32_t best = -1;
  float bv = 0;
  for (int64_t i = 0; i < x->ne[0]; i++) {
    float v = rd_f32(base, at(x, i, r, 0));
    if (v != v)
      continue;
    if (best < 0 || v > bv)
      best = (int32_t)i, bv = v;
  }
  return best < 0 ? 0 : best;
}

static void run_argmax(vkrt_appliance *app, int64_t n, int64_t rows, int64_t pad, uint64_t off,
                       bool expect_split) {
  vkrt_tensor x = mk(NULL, off, VKRT_TYPE_F32, n, rows, 1, pad);
  vkrt_tensor d = mk(NULL, 4, VKRT_TYPE_I32, rows, 1, 1, 0);
  d.nb[0] = 8;
  vkt_hbuf xb = vkt_hbuf_new(app, extent(&x)), db = vkt_hbuf_new(app, 4 + 8 * (uint64_t)rows + 8);
  x.buffer = xb.buf, d.buffer = db.buf;
  vkt_fill_random(xb.map, xb.size, &rng);
  for (int64_t r = 0; r < rows; r++) {
    int kind = (int)(r % 5);
    for (int64_t i = 0; i < n; i++) {
      float v = rnd(-30.0f, 30.0f);
      if (kind == 1 && vkrt_xorshift(&rng) % 3 == 0)
        v = NAN; /* NaNs never win */
      if (kind == 2)
        v = (float)(int)(v / 8); /* many ties: the lowest index wins */
      if (kind == 3)
        v = -INFINITY;
      if (kind == 4 && r % 2 == 0)
        v = NAN; /* a row of NaNs */
      wr_f32(xb.map, at(&x, i, r, 0), v);
    }
    if (kind == 0 && n > 2) { /* the max twice, far apart (different workgroups) */
      int64_t a = (int64_t)(vkrt_xorshift(&rng) % (uint64_t)(n / 2)), b = n - 1 - a / 3;
      wr_f32(xb.map, at(&x, a, r, 0), 31.0f);
      wr_f32(xb.map, at(&x, b, r, 0), 31.0f);
    }
  }
  vkt_poison(db.map, db.size);
  uint8_t *expect = malloc(db.size);
  memcpy(expect, db.map, db.size);
  for (int64_t r = 0; r < rows; r++)
    wr_i32(expect, at(&d, r, 0, 0), argmax_ref(xb.map, &x, r));
  vkrt_lab_counters before, after; /* the lab's path counters, when it is in */
  if (IS_ENABLED(CONFIG_VKRT_LAB))
    vkt_check(app, vkrt_lab_counters_get(app, 0, &before));
  vkt_check(app, vkrt_op_argmax(&d, &x));
  vkt_check(app, vkrt_finish(app, 0));
  char what[96];
  snprintf(what, sizeof(what), "argmax n %lld rows %lld", (long long)n, (long long)rows);
  compare(db.map, expect, db.size, NULL, NULL, what);
  if (IS_ENABLED(CONFIG_VKRT_LAB)) {
    vkt_check(app, vkrt_lab_counters_get(app, 0, &after));
    if ((after.argmax_split - before.argmax_split == 1) != expect_split)
      fail_msg("%s: %s the split path", what, expect_split ? "did not take" : "took");
  }
  free(expect);
  hb_free(&xb);
  hb_free(&db);
}

static void test_argmax(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_ARGMAX));
  vkrt_appliance *app = open_app();
  run_argmax(app, 128256, 1, 0, 0, true); /* a llama-3 vocabulary: many workgroups */
  run_argmax(app, 128256, 5, 12, 8, true);
  run_argmax(app, 1, 1, 0, 0, false);
  run_argmax(app, 7, 10, 4, 4, false);
  run_argmax(app, 1024, 3, 0, 0, false);
  run_argmax(app, 1025, 5, 0, 0, true);
  run_argmax(app, 5000, 100, 8, 12, true);
  run_argmax(app, 3, 9000, 0, 0, false); /* more rows than partials: one pass */
  vkt_close(app);
}

/* Two argmaxes back to back share the scratch: the second waits for the first's combine. */
static void test_argmax_back_to_back(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_ARGMAX));
  vkrt_appliance *app = open_app();
  int64_t n = 20000;
  vkrt_tensor x[2], d[2];
  vkt_hbuf xb = vkt_hbuf_new(app, 2 * 4 * (uint64_t)n), db = vkt_hbuf_new(app, 8);
  for (int k = 0; k < 2; k++) {
    x[k] = mk(xb.buf, 4 * (uint64_t)n * (uint64_t)k, VKRT_TYPE_F32, n, 1, 1, 0);
    d[k] = mk(db.buf, 4 * (uint64_t)k, VKRT_TYPE_I32, 1, 1, 1, 0);
  }
  for (int iter = 0; iter < 4; iter++) {
    int32_t want[2];
    for (int k = 0; k < 2; k++) {
      fill_f32(xb.map, &x[k], -1.0f, 1.0f);
      want[k] = (int32_t)(vkrt_xorshift(&rng) % (uint64_t)n);
      wr_f32(xb.map, at(&x[k], want[k], 0, 0), 2.0f);
    }
    vkt_poison(db.map, db.size);
    vkt_check(app, vkrt_op_argmax(&d[0], &x[0]));
    vkt_check(app, vkrt_op_argmax(&d[1], &x[1]));
    vkt_check(app, vkrt_finish(app, 0));
    for (int k = 0; k < 2; k++)
      if (rd_i32(db.map, 4 * (uint64_t)k) != want[k])
        fail_msg("argmax %d of two back to back: %d, expected %d", k, rd_i32(db.map, 4 * (uint64_t)k),
                 want[k]);
  }
  hb_free(&xb);
  hb_free(&db);
  vkt_close(app);
}

/* ---- i32 in the other ops ------------------------------------------------------------------ */

static void expect_invalid(vkrt_appliance *app, vkrt_status s, const char *needle) {
  if (s != VKRT_ERROR_INVALID_ARGUMENT)
    fail_msg("expected VKRT_ERROR_INVALID_ARGUMENT mentioning '%s', got %s (%s)", needle,
             vkrt_status_str(s), vkrt_last_error(app));
  if (!strstr(vkrt_last_error(app), needle))
    fail_msg("message '%s' lacks '%s'", vkrt_last_error(app), needle);
}

/* ---- sample (Gumbel-max) ------------------------------------------------------------------- */

/* vkrt.h's hash of the key and the index, and the perturbed score of x_i, in double */
static uint32_t mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}
static double gumbel_score(float x, float t, uint32_t i, uint32_t k0, uint32_t k1) {
  uint32_t h = mix32(i + mix32(k0 + mix32(k1)));
  double u = ((double)(h >> 9) + 0.5) / 8388608.0;
  return (double)x / t - log(-log1p(u - 1));
}

/* Every row of x holds the same logits and its own key, so the rows are independent draws:
 * each row's index is the largest perturbed score of the host's double arithmetic (a near tie
 * of 1e-4 allowed for the device's log), the frequencies over the rows follow softmax(x / T)
 * (5 sigma), NaN and -inf are never drawn, the same keys draw the same indexes again, and
 * the lab counts the rows drawn on the device. */
static void run_sample(vkrt_appliance *app, int64_t n, int64_t rows, float t) {
  vkrt_tensor x = mk(NULL, 0, VKRT_TYPE_F32, n, rows, 1, 8);
  vkrt_tensor d = mk(NULL, 0, VKRT_TYPE_I32, rows, 1, 1, 0);
  vkrt_tensor key = mk(NULL, 4 * (uint64_t)rows + 16, VKRT_TYPE_I32, 2, rows, 1, 0);
  vkt_hbuf xb = vkt_hbuf_new(app, extent(&x)), db = vkt_hbuf_new(app, extent(&key));
  x.buffer = xb.buf, d.buffer = db.buf, key.buffer = db.buf;
  float *row = malloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++)
    row[i] = rnd(-3.0f, 3.0f);
  for (int64_t j = 0; j < 6 && j < n; j++) /* a few likely ones, spread over the workgroups */
    row[(j * 7919) % n] = 4.0f + 0.5f * (float)j;
  if (n > 12)
    row[n - 5] = NAN, row[n - 6] = -INFINITY;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < n; i++)
      wr_f32(xb.map, at(&x, i, r, 0), row[i]);
  double *p = malloc((size_t)n * sizeof(double)), top = -INFINITY, total = 0;
  for (int64_t i = 0; i < n; i++)
    top = row[i] == row[i] && row[i] / t > top ? row[i] / t : top;
  for (int64_t i = 0; i < n; i++)
    total += p[i] = row[i] == row[i] ? exp(row[i] / t - top) : 0;
  int *hits = calloc((size_t)n, sizeof(int));
  int32_t *first = malloc((size_t)rows * sizeof(int32_t));
  char what[96];
  snprintf(what, sizeof(what), "sample n %lld rows %lld T %g", (long long)n, (long long)rows,
           (double)t);
  for (int round = 0; round < 2; round++) { /* round 1: the same keys again */
    for (int64_t r = 0; r < rows && !round; r++) {
      wr_i32(db.map, at(&key, 0, r, 0), (int32_t)vkrt_xorshift(&rng));
      wr_i32(db.map, at(&key, 1, r, 0), (int32_t)r);
    }
    vkt_poison(db.map, 4 * (uint64_t)rows);
    vkrt_lab_counters before, after;
    if (IS_ENABLED(CONFIG_VKRT_LAB))
      vkt_check(app, vkrt_lab_counters_get(app, 0, &before));
    vkt_check(app, vkrt_op_sample(&d, &x, &key, t));
    vkt_check(app, vkrt_finish(app, 0));
    if (IS_ENABLED(CONFIG_VKRT_LAB)) {
      vkt_check(app, vkrt_lab_counters_get(app, 0, &after));
      if (after.sample_draws - before.sample_draws != (uint64_t)rows)
        fail_msg("%s: %llu rows drawn on the device, expected %lld", what,
                 (unsigned long long)(after.sample_draws - before.sample_draws), (long long)rows);
    }
    int exact = 0;
    for (int64_t r = 0; r < rows; r++) {
      int32_t id = rd_i32(db.map, at(&d, r, 0, 0));
      if (id < 0 || id >= n || row[id] != row[id] || row[id] == -INFINITY)
        fail_msg("%s: row %lld drew %d", what, (long long)r, id);
      if (round) {
        if (id != first[r])
          fail_msg("%s: row %lld drew %d, then %d with the same key", what, (long long)r,
                   first[r], id);
        continue;
      }
      first[r] = id;
      hits[id]++;
      uint32_t k0 = (uint32_t)rd_i32(db.map, at(&key, 0, r, 0));
      uint32_t k1 = (uint32_t)rd_i32(db.map, at(&key, 1, r, 0));
      int64_t best = -1;
      double bs = -INFINITY;
      for (int64_t i = 0; i < n; i++) {
        double sc = row[i] == row[i] ? gumbel_score(row[i], t, (uint32_t)i, k0, k1) : -INFINITY;
        if (sc > bs)
          bs = sc, best = i;
      }
      double got = gumbel_score(row[id], t, (uint32_t)id, k0, k1);
      if (got < bs - 1e-4 * (1 + fabs(bs)))
        fail_msg("%s: row %lld drew %d (score %.6f), the largest is %lld (%.6f)", what,
                 (long long)r, id, got, (long long)best, bs);
      exact += id == best;
    }
    if (!round && exact < rows - rows / 100 - 1)
      fail_msg("%s: %d of %lld rows drew the host's largest score", what, exact, (long long)rows);
  }
  for (int64_t i = 0; i < n; i++) {
    double expect = p[i] / total * (double)rows, sigma = sqrt(expect) + 1;
    if (fabs(hits[i] - expect) > 5 * sigma)
      fail_msg("%s: index %lld (x %g) drawn %d times of %lld, %.1f expected", what, (long long)i,
               (double)row[i], hits[i], (long long)rows, expect);
  }
  free(row), free(p), free(hits), free(first);
  hb_free(&xb);
  hb_free(&db);
}

static void test_sample(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_ARGMAX));
  vkrt_appliance *app = open_app();
  run_sample(app, 1500, 2000, 0.7f);  /* rows over several workgroups and a combine */
  run_sample(app, 300, 3000, 1.3f);   /* a row a workgroup */
  run_sample(app, 128256, 3, 0.8f);   /* a llama-3 vocabulary */
  run_sample(app, 1, 5, 2.0f);
  /* bad input: a clear status and message, nothing recorded */
  vkt_hbuf xb = vkt_hbuf_new(app, 4096), db = vkt_hbuf_new(app, 64);
  vkrt_tensor x = mk(xb.buf, 0, VKRT_TYPE_F32, 100, 4, 1, 0);
  vkrt_tensor d = mk(db.buf, 0, VKRT_TYPE_I32, 4, 1, 1, 0);
  vkrt_tensor key = mk(db.buf, 16, VKRT_TYPE_I32, 2, 4, 1, 0);
  expect_invalid(app, vkrt_op_sample(&d, &x, &key, 0.0f), "temperature = 0");
  expect_invalid(app, vkrt_op_sample(&d, &x, &key, INFINITY), "a finite temperature > 0");
  key.ne[0] = 1;
  expect_invalid(app, vkrt_op_sample(&d, &x, &key, 1.0f), "two words for each of the 4 rows");
  hb_free(&xb);
  hb_free(&db);
  vkt_close(app);
}

/* The host's top-k of a row (NaN as -inf; larger first, the lower index on ties) into ids */
static int top_k_before(const float *row, int32_t a, int32_t b) {
  float x = row[a] == row[a] ? row[a] : -INFINITY, y = row[b] == row[b] ? row[b] : -INFINITY;
  return x > y || (x == y && a < b);
}

static void run_top_k(vkrt_appliance *app, int64_t n, int64_t rows, int64_t k, bool ties) {
  vkrt_tensor x = mk(NULL, 4, VKRT_TYPE_F32, n, rows, 1, 12);
  vkrt_tensor v = mk(NULL, 8, VKRT_TYPE_F32, k, rows, 1, 4);
  vkrt_tensor ids = mk(NULL, extent(&v) + 64, VKRT_TYPE_I32, k, rows, 1, 8);
  vkt_hbuf xb = vkt_hbuf_new(app, extent(&x)), db = vkt_hbuf_new(app, extent(&ids));
  x.buffer = xb.buf, v.buffer = db.buf, ids.buffer = db.buf;
  float *row = malloc((size_t)n * sizeof(float));
  int32_t *order = malloc((size_t)n * sizeof(int32_t));
  char what[96];
  snprintf(what, sizeof(what), "top_k n %lld rows %lld k %lld%s", (long long)n, (long long)rows,
           (long long)k, ties ? " (ties)" : "");
  vkt_poison(db.map, db.size);
  uint8_t *expect = malloc(db.size); /* the poison, and each row's k written over it */
  memcpy(expect, db.map, db.size);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < n; i++) {
      /* ties: a few values, many equal (the order then by index); else spread, with NaN,
       * -inf and +inf among them */
      float f = ties ? (float)(vkrt_xorshift(&rng) % 5) : rnd(-8.0f, 8.0f);
      if (!ties && i % 97 == 13)
        f = i % 3 ? NAN : -INFINITY;
      if (!ties && r == 1 && i == n / 2)
        f = INFINITY;
      wr_f32(xb.map, at(&x, i, r, 0), f);
    }
  vkrt_lab_counters before, after;
  if (IS_ENABLED(CONFIG_VKRT_LAB))
    vkt_check(app, vkrt_lab_counters_get(app, 0, &before));
  vkt_check(app, vkrt_op_top_k(&v, &ids, &x));
  vkt_check(app, vkrt_finish(app, 0));
  if (IS_ENABLED(CONFIG_VKRT_LAB)) {
    /* the path: a sort of each slice of 2048, then merges of 2048 / k lists a pass, in rounds
     * of the rows the scratch holds */
    vkt_check(app, vkrt_lab_counters_get(app, 0, &after));
    uint64_t lists = (uint64_t)(n + 2047) / 2048, per = 2048 / (uint64_t)k, passes = 1;
    for (uint64_t c = lists; c > 1; c = (c + per - 1) / per)
      passes++;
    uint64_t keys = lists * (uint64_t)k + (lists + per - 1) / per * (uint64_t)k;
    uint64_t round = 32768 / keys, rounds = ((uint64_t)rows + round - 1) / round;
    if (after.top_k_passes - before.top_k_passes != passes * rounds)
      fail_msg("%s: %llu passes, expected %llu", what,
               (unsigned long long)(after.top_k_passes - before.top_k_passes),
               (unsigned long long)(passes * rounds));
  }
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t i = 0; i < n; i++) {
      row[i] = rd_f32(xb.map, at(&x, i, r, 0));
      order[i] = (int32_t)i;
    }
    for (int64_t j = 0; j < k; j++) { /* selection of the k first */
      int64_t best = j;
      for (int64_t i = j + 1; i < n; i++)
        if (top_k_before(row, order[i], order[best]))
          best = i;
      int32_t t = order[j];
      order[j] = order[best], order[best] = t;
      int32_t id = rd_i32(db.map, at(&ids, j, r, 0));
      float got = rd_f32(db.map, at(&v, j, r, 0));
      float want = row[order[j]] == row[order[j]] ? row[order[j]] : -INFINITY;
      if (id != order[j] || memcmp(&got, &want, 4) != 0)
        fail_msg("%s: row %lld place %lld: %d (%g), expected %d (%g)", what, (long long)r,
                 (long long)j, id, (double)got, order[j], (double)want);
      wr_f32(expect, at(&v, j, r, 0), want);
      wr_i32(expect, at(&ids, j, r, 0), order[j]);
    }
  }
  compare(db.map, expect, db.size, NULL, NULL, what); /* every other byte keeps its poison */
  free(expect);
  free(row);
  free(order);
  hb_free(&xb);
  hb_free(&db);
}

/* vkrt_op_top_k against the host's selection: one slice and several, merges in one pass and
 * in two (a llama-3 vocabulary), rows in rounds, k from 1 to 64 and equal to n, ties broken
 * by index, NaN as -inf; bad input refused with a message. */
static void test_top_k(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_KERNEL_TOP_K));
  vkrt_appliance *app = open_app();
  run_top_k(app, 100, 3, 40, false);
  run_top_k(app, 2048, 2, 1, false);
  run_top_k(app, 2049, 2, 64, true);
  run_top_k(app, 9000, 5, 7, true);
  run_top_k(app, 128256, 2, 40, false);
  run_top_k(app, 70000, 9, 64, false); /* 35 lists: two merges; 8 rows a round */
  run_top_k(app, 5, 4, 5, true);
  vkt_hbuf xb = vkt_hbuf_new(app, 4096), db = vkt_hbuf_new(app, 4096);
  vkrt_tensor x = mk(xb.buf, 0, VKRT_TYPE_F32, 100, 4, 1, 0);
  vkrt_tensor v = mk(db.buf, 0, VKRT_TYPE_F32, 8, 4, 1, 0);
  vkrt_tensor ids = mk(db.buf, 1024, VKRT_TYPE_I32, 8, 4, 1, 0);
  vkrt_tensor big = mk(db.buf, 0, VKRT_TYPE_F32, 65, 4, 1, 0);
  vkrt_tensor big_ids = mk(db.buf, 2048, VKRT_TYPE_I32, 65, 4, 1, 0);
  expect_invalid(app, vkrt_op_top_k(&big, &big_ids, &x), "k = 65");
  vkrt_tensor fewer = mk(db.buf, 0, VKRT_TYPE_F32, 8, 3, 1, 0);
  expect_invalid(app, vkrt_op_top_k(&fewer, &ids, &x), "k for each of the rows of x");
  expect_invalid(app, vkrt_op_top_k(&v, &v, &x), "ids is f32");
  vkrt_tensor same = mk(db.buf, 16, VKRT_TYPE_I32, 8, 4, 1, 0);
  expect_invalid(app, vkrt_op_top_k(&v, &same, &x), "overlap");
  vkrt_tensor shortx = mk(xb.buf, 0, VKRT_TYPE_F32, 5, 4, 1, 0);
  expect_invalid(app, vkrt_op_top_k(&v, &ids, &shortx), "at most the row's 5 elements");
  vkt_check(app, vkrt_finish(app, 0));
  hb_free(&xb);
  hb_free(&db);
  vkt_close(app);
}

/* i32 moves bit for bit through copy (dense and strided), transpose and concat; every
 * converting or arithmetic use is refused with a message. */
static void test_i32_in_other_ops(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  vkt_hbuf a = vkt_hbuf_new(app, 8192), b = vkt_hbuf_new(app, 8192);
  vkrt_tensor s = mk(a.buf, 4, VKRT_TYPE_I32, 13, 9, 1, 8);
  vkrt_tensor dense = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_I32, 13, 9, 1, 1);
  vkrt_tensor strided = mk(b.buf, 1024, VKRT_TYPE_I32, 13, 9, 1, 12);
  vkrt_tensor f = vkrt_tensor_contiguous(b.buf, 4096, VKRT_TYPE_F32, 13, 9, 1, 1);
  vkrt_tensor h = vkrt_tensor_contiguous(b.buf, 4096, VKRT_TYPE_F16, 13, 9, 1, 1);
  vkrt_tensor ft = vkrt_tensor_contiguous(b.buf, 4096, VKRT_TYPE_F32, 9, 13, 1, 1);
  const vkrt_tensor *srcs[1] = {&s};
  if (IS_ENABLED(CONFIG_VKRT_KERNEL_COPY)) {
    for (int k = 0; k < 2; k++) {
      const vkrt_tensor *dst = k ? &strided : &dense;
      vkt_fill_random(a.map, a.size, &rng); /* every bit pattern */
      vkt_poison(b.map, b.size);
      uint8_t *expect = malloc(b.size);
      memcpy(expect, b.map, b.size);
      for (int64_t i1 = 0; i1 < 9; i1++)
        for (int64_t i0 = 0; i0 < 13; i0++)
          memcpy(expect + at(dst, i0, i1, 0), a.map + at(&s, i0, i1, 0), 4);
      vkt_check(app, vkrt_op_copy(dst, &s));
      vkt_check(app, vkrt_finish(app, 0));
      compare(b.map, expect, b.size, NULL, NULL, k ? "i32 strided copy" : "i32 copy");
      free(expect);
    }
  }
  if (IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE)) {
    vkrt_tensor t = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_I32, 9, 13, 1, 1);
    vkt_fill_random(a.map, a.size, &rng);
    vkt_poison(b.map, b.size);
    uint8_t *expect = malloc(b.size);
    memcpy(expect, b.map, b.size);
    for (int64_t i1 = 0; i1 < 9; i1++)
      for (int64_t i0 = 0; i0 < 13; i0++)
        memcpy(expect + at(&t, i1, i0, 0), a.map + at(&s, i0, i1, 0), 4);
    vkt_check(app, vkrt_op_transpose(&t, &s));
    vkt_check(app, vkrt_finish(app, 0));
    compare(b.map, expect, b.size, NULL, NULL, "i32 transpose");
    free(expect);
  }
  expect_invalid(app, vkrt_op_copy(&f, &s), "i32 tensors are copied to i32 only");
  expect_invalid(app, vkrt_op_copy(&strided, &f), "i32 tensors are copied to i32 only");
  expect_invalid(app, vkrt_op_copy(&h, &s), "i32 tensors are copied to i32 only");
  expect_invalid(app, vkrt_op_transpose(&ft, &s), "i32 tensors are moved to i32 only");
  expect_invalid(app, vkrt_op_add(&dense, srcs, 1), "dst is i32; the op sums f32 or f16");
  expect_invalid(app, vkrt_op_swiglu(&dense, &s, &s), "dst is i32");
  vkrt_tensor w = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_I32, 16, 4, 1, 1);
  vkrt_tensor x = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 16, 1, 1, 1);
  vkrt_tensor y = vkrt_tensor_contiguous(b.buf, 4096, VKRT_TYPE_F32, 4, 1, 1, 1);
  expect_invalid(app, vkrt_op_matmul(&y, &w, &x), "w is i32");
  float out[4];
  int32_t in[4] = {1, 2, 3, 4};
  assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_I32, in, out, 4), VKRT_ERROR_INVALID_ARGUMENT);
  assert_string_equal(vkrt_type_str(VKRT_TYPE_I32), "i32");
  vkt_check(app, vkrt_finish(app, 0));
  hb_free(&a);
  hb_free(&b);
  vkt_close(app);
}

/* ---- bad descriptors ------------------------------------------------------------------------ */

static void test_bad_input(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  vkt_hbuf a = vkt_hbuf_new(app, 65536), b = vkt_hbuf_new(app, 65536);
  vkrt_tensor x = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F32, 64, 4, 2, 1);
  vkrt_tensor d = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 64, 4, 2, 1);
  vkrt_tensor w = vkrt_tensor_contiguous(a.buf, 8192, VKRT_TYPE_F32, 64, 1, 1, 1);
  vkrt_tensor pos = vkrt_tensor_contiguous(a.buf, 16384, VKRT_TYPE_I32, 2, 1, 1, 1);
  vkrt_tensor bad;
  /* rms_norm */
  bad = x, bad.type = VKRT_TYPE_I32;
  expect_invalid(app, vkrt_op_rms_norm(&d, &bad, &w, 1e-5f), "vkrt_op_rms_norm: x is i32; it must be f32");
  bad = x, bad.type = VKRT_TYPE_F16;
  expect_invalid(app, vkrt_op_rms_norm(&d, &bad, &w, 1e-5f), "x is f16");
  bad = w, bad.ne[0] = 63;
  expect_invalid(app, vkrt_op_rms_norm(&d, &x, &bad, 1e-5f), "w has 63 elements");
  bad = x, bad.offset = 65536 - 1024;
  expect_invalid(app, vkrt_op_rms_norm(&d, &bad, &w, 1e-5f), "past the end of its 65536-byte buffer");
  expect_invalid(app, vkrt_op_rms_norm(&d, &x, &w, -1.0f), "eps = -1 must be finite and >= 0");
  expect_invalid(app, vkrt_op_rms_norm(&d, &x, &w, NAN), "eps");
  bad = x, bad.offset = 4; /* overlaps x without being x */
  bad.buffer = a.buf;
  expect_invalid(app, vkrt_op_rms_norm(&bad, &x, NULL, 1e-5f), "without being x exactly");
  bad = d, bad.ne[1] = 3;
  expect_invalid(app, vkrt_op_rms_norm(&bad, &x, NULL, 1e-5f), "differs from x ne");
  expect_invalid(app, vkrt_op_rms_norm(&d, NULL, NULL, 1e-5f), "x is NULL");
  /* rope */
  vkrt_rope_params rp = {.mode = VKRT_ROPE_NORMAL, .n_dims = 64, .freq_base = 10000.0f, .freq_scale = 1.0f};
  vkrt_rope_params bp = rp;
  bp.n_dims = 31;
  expect_invalid(app, vkrt_op_rope(&d, &x, &pos, &bp), "n_dims = 31 must be even");
  bp.n_dims = 66;
  expect_invalid(app, vkrt_op_rope(&d, &x, &pos, &bp), "<= the head size 64");
  bp = rp, bp.mode = 1;
  expect_invalid(app, vkrt_op_rope(&d, &x, &pos, &bp), "mode 1 is neither");
  bp = rp, bp.freq_base = 0.0f;
  expect_invalid(app, vkrt_op_rope(&d, &x, &pos, &bp), "freq_base");
  expect_invalid(app, vkrt_op_rope(&d, &x, &pos, NULL), "params is NULL");
  bad = pos, bad.type = VKRT_TYPE_F32;
  expect_invalid(app, vkrt_op_rope(&d, &x, &bad, &rp), "pos is f32; it must be i32");
  bad = x, bad.type = VKRT_TYPE_I32;
  expect_invalid(app, vkrt_op_rope(&d, &bad, &pos, &rp), "x is i32; it must be f32");
  bad = pos, bad.ne[0] = 3;
  expect_invalid(app, vkrt_op_rope(&d, &x, &bad, &rp), "pos has 3 positions for 2 tokens");
  vkrt_tensor ff = vkrt_tensor_contiguous(a.buf, 20480, VKRT_TYPE_F32, 32, 1, 1, 1);
  bad = ff, bad.ne[0] = 16;
  expect_invalid(app, vkrt_op_rope_ext(&d, &x, &pos, &bad, &rp),
                 "vkrt_op_rope_ext: factors has 16 values for the 32 pairs of n_dims = 64");
  bad = ff, bad.type = VKRT_TYPE_F16;
  expect_invalid(app, vkrt_op_rope_ext(&d, &x, &pos, &bad, &rp), "factors is f16; it must be f32");
  bad = ff, bad.buffer = b.buf, bad.offset = 0; /* d's bytes */
  expect_invalid(app, vkrt_op_rope_ext(&d, &x, &pos, &bad, &rp), "overlap factors bytes");
  bad = ff, bad.offset = 65536 - 64;
  expect_invalid(app, vkrt_op_rope_ext(&d, &x, &pos, &bad, &rp), "past the end of its 65536-byte buffer");
  expect_invalid(app, vkrt_op_rope_ext(&d, &x, &pos, &ff, NULL), "vkrt_op_rope_ext: params is NULL");
  bad = pos, bad.offset = 65536 - 4;
  expect_invalid(app, vkrt_op_rope(&d, &x, &bad, &rp), "past the end");
  /* get_rows */
  vkrt_tensor table = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F16, 64, 10, 1, 1);
  vkrt_tensor ids = vkrt_tensor_contiguous(a.buf, 16384, VKRT_TYPE_I32, 4, 1, 1, 1);
  vkrt_tensor gd = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 64, 4, 1, 1);
  bad = ids, bad.type = VKRT_TYPE_F32;
  expect_invalid(app, vkrt_op_get_rows(&gd, &table, &bad), "ids is f32; it must be i32");
  bad = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_I32, 64, 10, 1, 1);
  expect_invalid(app, vkrt_op_get_rows(&gd, &bad, &ids), "table is i32");
  bad = gd, bad.type = VKRT_TYPE_F16;
  expect_invalid(app, vkrt_op_get_rows(&bad, &table, &ids), "dst is f16; it must be f32");
  bad = gd, bad.ne[1] = 5;
  expect_invalid(app, vkrt_op_get_rows(&bad, &table, &ids), "must be {table.ne[0], ids.ne[0]}");
  bad = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_Q8_0, 48, 10, 1, 1);
  expect_invalid(app, vkrt_op_get_rows(&gd, &bad, &ids), "not a multiple of the q8_0 block");
  /* set_rows */
  vkrt_tensor cache = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_Q8_0, 64, 10, 1, 1);
  vkrt_tensor src = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F32, 64, 4, 1, 1);
  vkrt_tensor rows = vkrt_tensor_contiguous(a.buf, 16384, VKRT_TYPE_I32, 4, 1, 1, 1);
  bad = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_Q4_K, 256, 10, 1, 1);
  expect_invalid(app, vkrt_op_set_rows(&bad, &src, &rows), "dst is q4_K; the op writes f32, f16 or q8_0");
  bad = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_Q6_K, 256, 10, 1, 1);
  expect_invalid(app, vkrt_op_set_rows(&bad, &src, &rows), "dst is q6_K; the op writes f32, f16 or q8_0");
  bad = src, bad.type = VKRT_TYPE_F16;
  expect_invalid(app, vkrt_op_set_rows(&cache, &bad, &rows), "src is f16; it must be f32");
  bad = rows, bad.type = VKRT_TYPE_F32;
  expect_invalid(app, vkrt_op_set_rows(&cache, &src, &bad), "rows is f32; it must be i32");
  bad = rows, bad.ne[0] = 5;
  expect_invalid(app, vkrt_op_set_rows(&cache, &src, &bad), "must be {dst.ne[0], rows.ne[0]}");
  bad = cache, bad.offset = 65536 - 100;
  expect_invalid(app, vkrt_op_set_rows(&bad, &src, &rows), "past the end");
  bad = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F32, 64, 10, 1, 1); /* overlaps src */
  expect_invalid(app, vkrt_op_set_rows(&bad, &src, &rows), "overlap src");
  /* rope_set_rows: src {64, 1, 4} into the q8_0 cache {64, 10}, positions beside the rows */
  vkrt_tensor heads = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F32, 64, 1, 4, 1);
  vkrt_tensor at_pos = vkrt_tensor_contiguous(a.buf, 16400, VKRT_TYPE_I32, 4, 1, 1, 1);
  expect_invalid(app, vkrt_op_rope_set_rows(&cache, &heads, &rows, &at_pos, NULL, NULL),
                 "vkrt_op_rope_set_rows: params is NULL");
  bad = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_Q4_K, 256, 10, 1, 1);
  expect_invalid(app, vkrt_op_rope_set_rows(&bad, &heads, &rows, &at_pos, NULL, &rp),
                 "dst is q4_K; the op writes f32, f16 or q8_0");
  bad = heads, bad.ne[1] = 2, bad.ne[2] = 2;
  expect_invalid(app, vkrt_op_rope_set_rows(&cache, &bad, &rows, &at_pos, NULL, &rp),
                 "needs dst {head_dim * n_head, n_rows}, rows and pos {n}");
  bad = at_pos, bad.ne[0] = 3;
  expect_invalid(app, vkrt_op_rope_set_rows(&cache, &heads, &rows, &bad, NULL, &rp),
                 "needs dst {head_dim * n_head, n_rows}, rows and pos {n}");
  bad = at_pos, bad.type = VKRT_TYPE_F32;
  expect_invalid(app, vkrt_op_rope_set_rows(&cache, &heads, &rows, &bad, NULL, &rp),
                 "pos is f32; it must be i32");
  {
    vkrt_rope_params odd = rp;
    odd.n_dims = 65;
    expect_invalid(app, vkrt_op_rope_set_rows(&cache, &heads, &rows, &at_pos, NULL, &odd),
                   "vkrt_op_rope_set_rows: n_dims = 65 must be even");
  }
  bad = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 8, 1, 1, 1);
  expect_invalid(app, vkrt_op_rope_set_rows(&cache, &heads, &rows, &at_pos, &bad, &rp),
                 "factors has 8 values for the 32 pairs");
  bad = vkrt_tensor_contiguous(b.buf, 16, VKRT_TYPE_I32, 4, 1, 1, 1); /* inside the cache */
  expect_invalid(app, vkrt_op_rope_set_rows(&cache, &heads, &rows, &bad, NULL, &rp), "overlap pos");
  /* argmax */
  vkrt_tensor am = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_I32, 4, 1, 1, 1);
  vkrt_tensor ax = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F32, 100, 4, 1, 1);
  bad = am, bad.type = VKRT_TYPE_F32;
  expect_invalid(app, vkrt_op_argmax(&bad, &ax), "dst is f32; it must be i32");
  bad = ax, bad.type = VKRT_TYPE_I32;
  expect_invalid(app, vkrt_op_argmax(&am, &bad), "x is i32; it must be f32");
  bad = am, bad.ne[0] = 3;
  expect_invalid(app, vkrt_op_argmax(&bad, &ax), "dst has 3 elements for 4 rows");
  bad = ax, bad.ne[2] = 2;
  expect_invalid(app, vkrt_op_argmax(&am, &bad), "the op takes 2 dims");
  /* wrong device */
  if (vkrt_device_count(app) > 1) {
    vkrt_buffer *o;
    vkt_check(app, vkrt_buffer_create(app, 1, 4096, 0, &o));
    vkrt_tensor other = vkrt_tensor_contiguous(o, 0, VKRT_TYPE_I32, 2, 1, 1, 1);
    expect_invalid(app, vkrt_op_rope(&d, &x, &other, &rp), "wrong device");
    vkrt_buffer_destroy(o);
  }
  vkt_check(app, vkrt_finish(app, 0));
  hb_free(&a);
  hb_free(&b);
  vkt_close(app);
}

/* ---- kernels compiled out ------------------------------------------------------------------ */

static void expect_unsupported(vkrt_appliance *app, bool enabled, vkrt_status s, const char *symbol) {
  if (enabled)
    return;
  if (s != VKRT_ERROR_UNSUPPORTED)
    fail_msg("expected VKRT_ERROR_UNSUPPORTED for %s, got %s", symbol, vkrt_status_str(s));
  if (!strstr(vkrt_last_error(app), "not in this build") || !strstr(vkrt_last_error(app), symbol))
    fail_msg("message '%s' does not name %s", vkrt_last_error(app), symbol);
}

static void test_compiled_out(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  vkt_hbuf a = vkt_hbuf_new(app, 16384), b = vkt_hbuf_new(app, 16384);
  vkrt_tensor x = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F32, 64, 2, 1, 1);
  vkrt_tensor d = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 64, 2, 1, 1);
  vkrt_tensor i32 = vkrt_tensor_contiguous(a.buf, 8192, VKRT_TYPE_I32, 2, 1, 1, 1);
  vkrt_tensor x3 = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F32, 64, 1, 2, 1);
  vkrt_tensor d3 = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 64, 1, 2, 1);
  vkrt_tensor am = vkrt_tensor_contiguous(b.buf, 4096, VKRT_TYPE_I32, 2, 1, 1, 1);
  vkrt_tensor h16 = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F16, 64, 4, 1, 1);
  vkrt_rope_params rp = {.mode = VKRT_ROPE_NORMAL, .n_dims = 64, .freq_base = 10000.0f, .freq_scale = 1.0f};
  int32_t two[2] = {0, 1};
  memcpy(a.map + 8192, two, sizeof(two));
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_RMS_NORM), vkrt_op_rms_norm(&d, &x, NULL, 1e-6f),
                     "CONFIG_VKRT_KERNEL_RMS_NORM=n");
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE), vkrt_op_rope(&d3, &x3, &i32, &rp),
                     "CONFIG_VKRT_KERNEL_ROPE=n");
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_GET_ROWS), vkrt_op_get_rows(&d, &x, &i32),
                     "CONFIG_VKRT_KERNEL_GET_ROWS=n");
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_SET_ROWS), vkrt_op_set_rows(&d, &x, &i32),
                     "CONFIG_VKRT_KERNEL_SET_ROWS=n");
  vkrt_tensor k64 = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F32, 64, 1, 2, 1);
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_ROPE_SET_ROWS),
                     vkrt_op_rope_set_rows(&d, &k64, &i32, &i32, NULL, &rp),
                     "CONFIG_VKRT_KERNEL_ROPE_SET_ROWS=n");
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_ARGMAX), vkrt_op_argmax(&am, &x),
                     "CONFIG_VKRT_KERNEL_ARGMAX=n");
  /* f16 variants without the f16 element type */
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_SET_ROWS_F16) || !IS_ENABLED(CONFIG_VKRT_KERNEL_SET_ROWS),
                     vkrt_op_set_rows(&h16, &x, &i32), "CONFIG_VKRT_KERNEL_SET_ROWS_F16=n");
  vkrt_tensor t16 = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_F16, 64, 2, 1, 1);
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_GET_ROWS_F16) || !IS_ENABLED(CONFIG_VKRT_KERNEL_GET_ROWS),
                     vkrt_op_get_rows(&d, &t16, &i32), "CONFIG_VKRT_KERNEL_GET_ROWS_F16=n");
  vkrt_tensor q = vkrt_tensor_contiguous(a.buf, 0, VKRT_TYPE_Q4_K, 256, 2, 1, 1);
  vkrt_tensor x256 = vkrt_tensor_contiguous(a.buf, 4096, VKRT_TYPE_F32, 256, 1, 1, 1);
  vkrt_tensor d2 = vkrt_tensor_contiguous(b.buf, 0, VKRT_TYPE_F32, 2, 1, 1, 1);
  expect_unsupported(app, IS_ENABLED(CONFIG_VKRT_KERNEL_Q4_K),
                     vkrt_op_matmul_fused(&d2, &q, &x256, &(vkrt_matmul_fusion){0}),
                     "CONFIG_VKRT_KERNEL_Q4_K=n");
  vkt_check(app, vkrt_finish(app, 0));
  hb_free(&a);
  hb_free(&b);
  vkt_close(app);
}

int main(void) {
  rng = vkt_seed(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rms_norm),
      cmocka_unit_test(test_matmul_fused),
      cmocka_unit_test(test_rope),
      cmocka_unit_test(test_rope_positions_from_device),
      cmocka_unit_test(test_get_rows),
      cmocka_unit_test(test_set_rows),
      cmocka_unit_test(test_rope_set_rows),
      cmocka_unit_test(test_argmax),
      cmocka_unit_test(test_argmax_back_to_back),
      cmocka_unit_test(test_sample),
      cmocka_unit_test(test_top_k),
      cmocka_unit_test(test_i32_in_other_ops),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_compiled_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
