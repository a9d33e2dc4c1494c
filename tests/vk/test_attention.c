/* vkrt_op_attention on lavapipe with validation: decode attention over f16 and q8_0 KV caches
 * (head_dim 64, 128, 256; 1, 2, 4 and 8 query heads per KV head) on fresh random data with
 * padded, offset views, outputs poisoned, against a float64 reference of softmax(scale q k^T) v
 * over the first kv_len[j] cache rows of each query. The path is asserted: the counters name
 * the op and its split count, which comes from the plan (vkrt_lab_attention_plan) or the
 * ATTENTION_SPLITS knob. Lengths of 1, odd ones, ones crossing split boundaries, several
 * queries of different lengths, rounds of queries, lengths changed on the device between two
 * recorded attentions and on the host between two submits of the same op; bad descriptors and
 * contexts past the scratch are refused with messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/vk_test.h"
#include "vkrt/vkrt_lab.h"

static uint64_t rng;

static uint64_t extent(const vkrt_tensor *t) {
  uint64_t e = t->offset + (uint64_t)t->ne[0] / vkrt_type_block(t->type) * vkrt_type_size(t->type);
  for (int i = 1; i < 4; i++)
    e += (uint64_t)(t->ne[i] - 1) * (uint64_t)t->nb[i];
  return e;
}

struct att_case {
  vkrt_type type;
  int D, H, HKV, NQ, n_ctx;
  int kv_len[4];
  float scale;      /* 0: 1 / sqrt(D) */
  uint32_t splits;  /* 0: planned, else forced through the knob */
  bool padded;      /* offsets and padded strides on every operand */
  uint32_t unroll;  /* 0: planned, else forced row passes per tile */
  int kernel;       /* split pass: 0 the device's choice, 1 tiles, 2 a row per invocation */
};

/* A {D, n1, n2} tensor, dense or padded (offset and pad in bytes, keeping the alignment the
 * op needs: f16 K/V rows on 16 bytes, q8_0 by whole blocks at a 2-byte offset). */
static vkrt_tensor make_tensor(vkrt_type type, int D, int n1, int n2, bool padded) {
  vkrt_tensor t = vkrt_tensor_contiguous(NULL, 0, type, D, n1, n2, 1);
  if (!padded)
    return t;
  int64_t pad = type == VKRT_TYPE_Q8_0 ? 34 : type == VKRT_TYPE_F16 ? 16 : 12;
  t.offset = type == VKRT_TYPE_Q8_0 ? 6 : type == VKRT_TYPE_F16 ? 32 : 20;
  t.nb[1] += pad;
  t.nb[2] = t.nb[1] * n1 + pad * 3;
  t.nb[3] = t.nb[2] * n2;
  return t;
}

/* Random cache rows; returns them dequantized, [t][h][d]. */
static float *fill_cache(uint8_t *base, const vkrt_tensor *t) {
  int D = (int)t->ne[0], n1 = (int)t->ne[1], n2 = (int)t->ne[2];
  float *out = malloc(sizeof(float) * (size_t)D * n1 * n2);
  float *row = malloc(sizeof(float) * (size_t)D);
  for (int i2 = 0; i2 < n2; i2++)
    for (int i1 = 0; i1 < n1; i1++) {
      uint8_t *p = base + t->offset + (uint64_t)i1 * t->nb[1] + (uint64_t)i2 * t->nb[2];
      float *o = out + ((size_t)i2 * n1 + i1) * D;
      if (t->type == VKRT_TYPE_F16) {
        vkt_fill_random_f32(row, (size_t)D, -1.0f, 1.0f, &rng);
        for (int d = 0; d < D; d++) {
          uint16_t h = vkrt_f32_to_f16(row[d]);
          memcpy(p + 2 * d, &h, 2);
          o[d] = vkrt_f16_to_f32(h);
        }
      } else {
        for (int b = 0; b < D / 32; b++) {
          uint8_t *blk = p + 34 * b;
          vkt_fill_random(blk + 2, 32, &rng);
          float dscale;
          vkt_fill_random_f32(&dscale, 1, 0.002f, 0.02f, &rng);
          uint16_t h = vkrt_f32_to_f16(vkrt_xorshift(&rng) & 1 ? -dscale : dscale);
          memcpy(blk, &h, 2);
        }
        assert_int_equal(vkrt_dequantize_row(VKRT_TYPE_Q8_0, p, o, D), VKRT_OK);
      }
    }
  free(row);
  return out;
}

struct att_bufs {
  vkt_hbuf qb, kb, vb, lb, db;
  vkrt_tensor q, k, v, len, dst;
  float *kf, *vf;
};

static void att_setup(vkrt_appliance *app, const struct att_case *c, struct att_bufs *b) {
  b->q = make_tensor(VKRT_TYPE_F32, c->D, c->H, c->NQ, c->padded);
  b->dst = make_tensor(VKRT_TYPE_F32, c->D, c->H, c->NQ, c->padded);
  b->k = make_tensor(c->type, c->D, c->HKV, c->n_ctx, c->padded);
  b->v = make_tensor(c->type, c->D, c->HKV, c->n_ctx, c->padded);
  b->len = vkrt_tensor_contiguous(NULL, c->padded ? 8 : 0, VKRT_TYPE_I32, c->NQ, 1, 1, 1);
  b->qb = vkt_hbuf_new(app, extent(&b->q) + 4);
  b->kb = vkt_hbuf_new(app, VKT_ALIGN_UP(extent(&b->k), 4));
  b->vb = vkt_hbuf_new(app, VKT_ALIGN_UP(extent(&b->v), 4));
  b->lb = vkt_hbuf_new(app, extent(&b->len));
  b->db = vkt_hbuf_new(app, extent(&b->dst) + 16);
  b->q.buffer = b->qb.buf, b->k.buffer = b->kb.buf, b->v.buffer = b->vb.buf;
  b->len.buffer = b->lb.buf, b->dst.buffer = b->db.buf;
  vkt_fill_random(b->qb.map, b->qb.size, &rng);
  for (int j = 0; j < c->NQ; j++)
    for (int h = 0; h < c->H; h++)
      vkt_fill_random_f32((float *)(b->qb.map + b->q.offset + h * b->q.nb[1] + j * b->q.nb[2]),
                          (size_t)c->D, -1.0f, 1.0f, &rng);
  vkt_fill_random(b->kb.map, b->kb.size, &rng);
  vkt_fill_random(b->vb.map, b->vb.size, &rng);
  b->kf = fill_cache(b->kb.map, &b->k);
  b->vf = fill_cache(b->vb.map, &b->v);
  for (int j = 0; j < c->NQ; j++)
    memcpy(b->lb.map + b->len.offset + 4 * j, &c->kv_len[j], 4);
}

static void att_free(struct att_bufs *b) {
  vkrt_buffer_destroy(b->qb.buf);
  vkrt_buffer_destroy(b->kb.buf);
  vkrt_buffer_destroy(b->vb.buf);
  vkrt_buffer_destroy(b->lb.buf);
  vkrt_buffer_destroy(b->db.buf);
  free(b->kf);
  free(b->vf);
}

static float scale_of(const struct att_case *c) {
  return c->scale != 0 ? c->scale : 1.0f / sqrtf((float)c->D);
}

/* Set while the appliance rounds the queries of q8_0 row-kernel cases to 8 bits
 * (VKRT_ACTIVATIONS_Q8 on a device with integer dot products): such cases take the q8q
 * kernel and are checked against the float64 reference of the rounded queries. */
static bool rounding_queries;

/* The scaled query of D values as the q8q kernel rounds it (out), and per value the amount a
 * rounding the other way would move it (tie: d where scale q / d is within 2^-10 of a half,
 * where the device's f32 division may land on the other side; else 0): per 32 values, scale
 * d = max|scale q| / 127 and r = scale q 127 / max|scale q| rounded to nearest, ties to even,
 * all in f32 as the kernel computes them;
 * out = r d. */
static void round_query(const float *q, float scale, int D, double *out, double *tie) {
  for (int b = 0; b < D / 32; b++) {
    float sq[32], amax = 0.0f;
    for (int i = 0; i < 32; i++) {
      sq[i] = scale * q[32 * b + i];
      amax = fmaxf(amax, fabsf(sq[i]));
    }
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f, d = amax / 127.0f;
    for (int i = 0; i < 32; i++) {
      float x = sq[i] * inv, r = nearbyintf(x); /* ties to even, as the kernel's roundEven */
      r = r < -127.0f ? -127.0f : r > 127.0f ? 127.0f : r;
      out[32 * b + i] = (double)r * d;
      tie[32 * b + i] = fabsf(fabsf(x - truncf(x)) - 0.5f) < 1.0f / 1024 ? d : 0.0;
    }
  }
}

/* dst against the float64 reference for query j attending `len` rows (with `rounded`, of
 * the queries rounded as round_query does); every byte of the buffer outside dst's elements
 * still holds the poison in `before`. */
static void att_check(const struct att_case *c, const struct att_bufs *b, const uint8_t *before,
                      const int *lens, bool rounded, const char *what) {
  int D = c->D, G = c->H / c->HKV;
  double *sc = malloc(sizeof(double) * (size_t)c->n_ctx), *qr = malloc(sizeof(double) * (size_t)D);
  double *tie = calloc((size_t)D, sizeof(double));
  uint8_t *expect_bytes = malloc(b->db.size);
  memcpy(expect_bytes, before, b->db.size);
  for (int j = 0; j < c->NQ; j++)
    for (int h = 0; h < c->H; h++) {
      const float *q = (const float *)(b->qb.map + b->q.offset + h * b->q.nb[1] + j * b->q.nb[2]);
      int kh = h / G, len = lens[j] > 0 ? (lens[j] < c->n_ctx ? lens[j] : c->n_ctx) : 0;
      double m = -INFINITY, l = 0, sabs = 0, sties = 0;
      /* the query the scores take: q times the scale after it, or rounded with it */
      double qscale = rounded ? 1.0 : scale_of(c);
      if (rounded)
        round_query(q, scale_of(c), D, qr, tie);
      else
        for (int d = 0; d < D; d++)
          qr[d] = q[d];
      for (int t = 0; t < len; t++) {
        const float *kr = b->kf + ((size_t)t * c->HKV + kh) * D;
        double s = 0, a = 0, t_ties = 0;
        for (int d = 0; d < D; d++) {
          s += qr[d] * kr[d];
          a += fabs(qr[d] * kr[d]);
          t_ties += tie[d] * fabs(kr[d]);
        }
        sabs = fmax(sabs, a * fabs(qscale));
        sties = fmax(sties, t_ties);
        sc[t] = s * qscale;
        m = fmax(m, sc[t]);
      }
      for (int t = 0; t < len; t++)
        l += exp(sc[t] - m);
      uint64_t at = b->dst.offset + h * b->dst.nb[1] + j * b->dst.nb[2];
      for (int d = 0; d < D; d++) {
        double o = 0, mag = 0;
        for (int t = 0; t < len; t++) {
          double p = exp(sc[t] - m) / l, vv = b->vf[((size_t)t * c->HKV + kh) * D + d];
          o += p * vv;
          mag += p * fabs(vv);
        }
        float got;
        memcpy(&got, b->db.map + at + 4 * d, 4);
        /* f32 scores: each off by up to ~D 2^-24 sum |scale q k| (bounded by sabs), which
         * moves the output by that times the spread of v; exp and sums in f32; rounded
         * queries: a value near a half may round either way (sties) */
        double tol = (2e-5 + 2 * D * 6e-8 * sabs + 2 * sties) * (mag + fabs(o)) + 1e-6;
        if (!(fabs(got - o) <= tol))
          fail_msg("%s: %s D %d H %d/%d n_ctx %d: query %d (kv_len %d) head %d [%d] = %.8g, "
                   "expected %.8g", what, vkrt_type_str(c->type), D, c->H, c->HKV, c->n_ctx, j,
                   len, h, d, got, o);
        if (len <= 0 && got != 0.0f) /* nothing attended: zeros */
          fail_msg("%s: query %d (kv_len %d) head %d [%d] = %.8g, expected 0", what, j, len, h,
                   d, got);
      }
      memcpy(expect_bytes + at, b->db.map + at, 4 * (size_t)D);
    }
  if (memcmp(expect_bytes, b->db.map, b->db.size))
    fail_msg("%s: bytes outside dst's elements were written", what);
  free(expect_bytes);
  free(sc);
  free(qr);
  free(tie);
}

static bool type_in_build(vkrt_type t) {
  return IS_ENABLED(CONFIG_VKRT_KERNEL_ATTENTION) &&
         (t == VKRT_TYPE_Q8_0 || IS_ENABLED(CONFIG_VKRT_KERNEL_ATTENTION_F16));
}

/* How many cases ran on each path: [one split, no combine]; split passes [tiles, rows] */
static int paths[2], kernels[2], full_splits[2];
/* Row-kernel q8_0 cases that read K in 16-byte words: their KV heads by the 4-byte phase of
 * the rows' start (how many words come before the first 16-byte boundary) */
static int k16_phases[4];
/* The split pass of cases that name none (0: the device's choice). */
static int kernel_default;
/* The lab's ATTENTION_LAST_MERGES for every case (1: the tiles' last split merges a row) */
static int last_merges_knob;

/* Runs one case: the op once with dst poisoned, the counters and the values checked. */
static void run_case(vkrt_appliance *app, const struct att_case *c) {
  struct att_bufs b;
  att_setup(app, c, &b);
  vkt_poison(b.db.map, b.db.size);
  uint8_t *before = malloc(b.db.size);
  memcpy(before, b.db.map, b.db.size);

  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_SPLITS, c->splits));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_UNROLL, c->unroll));
  int kernel = c->kernel ? c->kernel : kernel_default;
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_KERNEL, kernel));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_LAST_MERGES, last_merges_knob));
  vkrt_lab_attention plan;
  vkt_check(app, vkrt_lab_attention_plan(app, 0, (uint32_t)c->D, (uint32_t)c->H,
                                         (uint32_t)c->HKV, (uint32_t)c->NQ,
                                         (uint32_t)c->n_ctx, &plan));
  vkrt_lab_counters c0, c1;
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c0));
  vkrt_status s = vkrt_op_attention(&b.dst, &b.q, &b.k, &b.v, &b.len, scale_of(c));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_SPLITS, 0));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_UNROLL, 0));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_KERNEL, 0));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_LAST_MERGES, 0));
  vkt_check(app, s);
  vkt_check(app, vkrt_finish(app, 0));
  vkt_check(app, vkrt_lab_counters_get(app, 0, &c1));
  /* the tiles' own merge where asked (every case here has few enough workgroup rows) */
  assert_int_equal(c1.attention_last_merges - c0.attention_last_merges,
                   last_merges_knob && !plan.rows && !plan.direct);

  /* the path: one attention with the planned (or forced) splits, heads grouped by KV head */
  int G = c->H / c->HKV;
  assert_int_equal(c1.attention - c0.attention, 1);
  assert_int_equal(c1.attention_splits - c0.attention_splits, plan.splits);
  assert_int_equal(c1.attention_rounds - c0.attention_rounds, plan.rounds);
  assert_int_equal(c1.attention_direct - c0.attention_direct, plan.direct);
  /* tiles whose splits of min_split cover the capacity: the pass loads before kv_len */
  assert_int_equal(c1.attention_full_split - c0.attention_full_split, plan.full_split);
  if (plan.rows)
    assert_false(plan.full_split);
  else
    full_splits[plan.full_split]++;
  assert_int_equal(plan.direct, plan.splits == 1);
  paths[plan.direct]++;
  /* the split pass the plan named ran; forced tiles are tiles */
  assert_int_equal(c1.attention_rows - c0.attention_rows, plan.rows);
  /* q8_0 K in 16-byte words: the row kernel, D a multiple of 64, rows 4-byte aligned and a
   * 16-byte step from token to token */
  bool k16 = plan.rows && c->type == VKRT_TYPE_Q8_0 && c->D % 64 == 0 && b.k.offset % 4 == 0 &&
             b.k.nb[1] % 4 == 0 && b.k.nb[2] % 16 == 0;
  assert_int_equal(c1.attention_k16 - c0.attention_k16, k16);
  /* the queries rounded: q8_0 on the row kernel of an appliance that rounds them */
  bool q8q = rounding_queries && plan.rows && c->type == VKRT_TYPE_Q8_0;
  assert_int_equal(c1.attention_q8q - c0.attention_q8q, q8q);
  for (int h = 0; k16 && h < c->HKV; h++)
    k16_phases[(b.k.offset + (uint64_t)h * b.k.nb[1]) / 4 % 4]++;
  if (kernel == 1)
    assert_false(plan.rows);
  kernels[plan.rows]++;
  /* heads a group: the largest divisor of G up to 8; rows: whose weighted-V sums (8 per
   * head and chunk an invocation owns) stay within 64 */
  int per_lane = plan.rows ? (c->D / 8 + (int)plan.subgroup - 1) / (int)plan.subgroup : 1;
  int per_group = G <= 8 ? G : 8;
  while (G % per_group || (plan.rows && 8 * per_group * per_lane > 64))
    per_group--;
  assert_int_equal(plan.heads_per_group, per_group);
  assert_int_equal(plan.head_groups, G / per_group);
  assert_true((uint64_t)plan.splits * plan.split_len >= (uint64_t)c->n_ctx);
  assert_true((uint64_t)(plan.splits - 1) * plan.split_len < (uint64_t)c->n_ctx);
  if (plan.rows) {
    assert_int_equal(plan.unroll, 0);
    assert_true(plan.subgroup >= 4);
  } else {
    assert_int_equal(plan.unroll, c->unroll ? c->unroll : plan.unroll);
    assert_true(plan.unroll >= 1 && plan.unroll <= 8);
  }
  uint64_t per_split = (uint64_t)c->H * (c->D + 2) * 4; /* one query's partials */
  uint32_t forced = c->splits < (uint32_t)c->n_ctx ? c->splits : (uint32_t)c->n_ctx;
  if (c->splits && forced * per_split <= plan.scratch_bytes)
    assert_int_equal(plan.splits, forced);
  else if (c->splits) /* fewer: as many as one query's partials fit */
    assert_true(plan.splits < forced && plan.splits * per_split <= plan.scratch_bytes);
  assert_int_equal(plan.queries_per_round,
                   VKT_MIN((uint64_t)c->NQ, plan.scratch_bytes / (plan.splits * per_split)));

  char what[128];
  if (plan.rows)
    snprintf(what, sizeof(what), "rows: %d splits of %u, subgroups of %u%s", plan.splits,
             plan.split_len, plan.subgroup, q8q ? ", queries rounded to 8 bits" : "");
  else
    snprintf(what, sizeof(what), "tiles: %d splits of %u, %u passes a tile", plan.splits,
             plan.split_len, plan.unroll);
  att_check(c, &b, before, c->kv_len, q8q, what);
  free(before);
  att_free(&b);
}

static vkrt_appliance *open_app(void) {
  vkrt_options o;
  vkt_options(&o);
  return vkt_open(&o);
}

/* Every cache type, head size and grouping, padded views, lengths of 1, odd and full. */
static void test_attention_shapes(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  static const vkrt_type types[] = {VKRT_TYPE_F16, VKRT_TYPE_Q8_0};
  static const int dims[] = {64, 128, 256}, ratios[] = {1, 2, 4, 8};
  int ran = 0;
  for (unsigned ti = 0; ti < 2; ti++) {
    if (!type_in_build(types[ti]))
      continue;
    for (unsigned di = 0; di < 3; di++)
      for (unsigned ri = 0; ri < 4; ri++) {
        int D = dims[di], r = ratios[ri];
        for (int kernel = 1; kernel <= 2; kernel++) { /* tiles, then a row per invocation */
          struct att_case c = {types[ti], D, 2 * r, 2, 2, 97 + 64 * (int)ri, {0}, 0, 0,
                               ri % 2 == 1, 0, kernel};
          c.kv_len[0] = c.n_ctx - (int)di;  /* odd lengths, the full cache */
          c.kv_len[1] = ri == 0 ? 1 : 1 + (int)(vkrt_xorshift(&rng) % (uint64_t)c.n_ctx);
          run_case(app, &c);
          ran++;
        }
      }
  }
  if (!ran)
    vkt_skip("no attention kernels in this build");
  /* both split passes ran: every device the suite runs on has subgroup arithmetic and a
   * fixed subgroup size */
  assert_true(kernels[0] > 0 && kernels[1] > 0);
  vkt_close(app);
}

/* Split boundaries: forced split counts with lengths just below, at and just past them, and
 * split counts beyond the length (splits that exit at once). */
/* The q8_0 row kernel's K rows by 16-byte loads at every 4-byte phase of a row's start
 * (head 64: KV heads 68 bytes apart; head 128 and 256: 136-byte parts), Llama's layouts
 * (a token's KV heads side by side), and a layout that cannot take them (a 2-byte offset). */
static void test_attention_k16(void **state) {
  (void)state;
  vkt_skip_if(!type_in_build(VKRT_TYPE_Q8_0));
  vkrt_appliance *app = open_app();
  memset(k16_phases, 0, sizeof(k16_phases));
  for (int hkv = 1; hkv <= 4; hkv++) {
    struct att_case c = {VKRT_TYPE_Q8_0, 64, 2 * hkv, hkv, 2, 96 * hkv, {96 * hkv, 50}, 0, 0,
                         false, 0, 2};
    run_case(app, &c);
  }
  struct att_case l8 = {VKRT_TYPE_Q8_0, 128, 32, 8, 1, 333, {301}, 0, 0, false, 0, 2};
  run_case(app, &l8);
  struct att_case d256 = {VKRT_TYPE_Q8_0, 256, 4, 2, 2, 140, {140, 3}, 0, 0, false, 0, 2};
  run_case(app, &d256);
  struct att_case odd = {VKRT_TYPE_Q8_0, 128, 4, 2, 1, 100, {100}, 0, 0, true, 0, 2};
  run_case(app, &odd);
  for (int p = 0; p < 4; p++)
    if (!k16_phases[p])
      fail_msg("no case read K rows in 16-byte words from 4-byte phase %d", p);
  vkt_close(app);
}

static void test_attention_splits(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  int ran = 0, direct0 = paths[1], combined0 = paths[0], full0 = full_splits[0],
      full1 = full_splits[1];
  /* each case on both split passes: tiles, then a row per invocation */
  for (unsigned ti = 0; ti < 4; ti++) {
    kernel_default = 1 + (int)(ti / 2);
    vkrt_type t = ti % 2 ? VKRT_TYPE_Q8_0 : VKRT_TYPE_F16;
    if (!type_in_build(t))
      continue;
    /* 160 tokens in 5 splits of 32: lengths 31, 32, 33, 64, 65, 160 */
    struct att_case a = {t, 64, 8, 1, 3, 160, {31, 32, 33}, 0, 5, true};
    run_case(app, &a);
    struct att_case b = {t, 128, 4, 2, 3, 160, {64, 65, 160}, 0, 5, false};
    run_case(app, &b);
    /* one token per split, and more splits asked than tokens */
    struct att_case one = {t, 64, 2, 1, 2, 40, {40, 17}, 0, 40, false};
    run_case(app, &one);
    /* the same through the combine's split groups and trees (its default merges up to 32
     * live splits one invocation an element), the second query's 23 splits past its length
     * holding the first run's partials */
    int64_t in_order;
    vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_ATTENTION_COMBINE_IN_ORDER, &in_order));
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_COMBINE_IN_ORDER, 0));
    run_case(app, &a);
    run_case(app, &b);
    run_case(app, &one);
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_COMBINE_IN_ORDER, in_order));
    struct att_case over = {t, 64, 2, 1, 1, 20, {13}, 0, 1000, true};
    run_case(app, &over);
    /* more splits than the combine loads with kv_len (o of 64, max and sum of 256 on a
     * 256-wide workgroup): the rest through its loops; a short query among them */
    struct att_case many = {t, 64, 4, 2, 2, 600, {600, 150}, 0, 300, false};
    run_case(app, &many);
    /* a single split over the whole cache (kv_len not a tile multiple), longer than 2048
     * scores of 8 heads would hold */
    struct att_case single = {t, 256, 16, 2, 1, 300, {299}, 0, 1, false};
    run_case(app, &single);
    /* head sizes that do not divide the workgroup's rows: 8 (one 16-byte chunk a row) and
     * 40 (five), f16 only (q8_0 rows are whole 32-element blocks) */
    if (t == VKRT_TYPE_F16) {
      struct att_case d8 = {t, 8, 8, 4, 2, 700, {700, 333}, 0, 0, true};
      run_case(app, &d8);
      struct att_case d40 = {t, 40, 6, 2, 2, 150, {150, 77}, 0, 3, false};
      run_case(app, &d40);
    }
    /* nothing attended (kv_len 0 and negative): zeros; past the cache: the whole cache;
     * from one split and from the combine */
    for (uint32_t sp = 1; sp <= 4; sp += 3) {
      struct att_case empty = {t, 64, 8, 2, 3, 100, {100, 0, -3}, 0, sp, true};
      run_case(app, &empty);
      struct att_case past = {t, 64, 8, 2, 2, 100, {101, 0x7fffffff}, 0, sp, true};
      run_case(app, &past);
    }
    /* peaked scores: the running max matters (scale 1, scores of +-10) */
    struct att_case peaked = {t, 128, 8, 8, 2, 300, {300, 129}, 1.0f, 0, true};
    run_case(app, &peaked);
    /* 12 query heads per KV head: two head groups of 6 per KV head */
    struct att_case wide = {t, 64, 24, 2, 1, 130, {130}, 0, 0, false};
    run_case(app, &wide);
    /* row passes per tile forced: 1 (a tile of one pass), 3 (splits ending mid-tile), 8 (one
     * head a group: the shared memory holds it on every device) */
    for (uint32_t u = 1; u <= 8; u += u == 1 ? 2 : 5) {
      struct att_case forced = {t, 128, 2, 2, 2, 400, {400, 57}, 0, 4, true, u, 1};
      run_case(app, &forced);
    }
    ran++;
  }
  kernel_default = 0;
  if (!ran)
    vkt_skip("no attention kernels in this build");
  /* both ways out: one split written by the split pass alone, several merged by the combine */
  assert_true(paths[1] > direct0);
  assert_true(paths[0] > combined0);
  /* the tiles took both ways to their rows on every device: with kv_len (forced counts
   * shorter than the cache) and before it (a token a split: the splits cover the cache) */
  assert_true(full_splits[0] > full0 && full_splits[1] > full1);
  vkt_close(app);
}

/* ATTENTION_LAST_MERGES: the tiles' last live split of each workgroup row merges the row
 * (an arrival counter it zeroes again; no combine pass): the split cases above on the tiles,
 * each run twice in a row (a counter left wrong would leave dst unwritten, poisoned), with
 * nothing attended, past the cache, a single split and several queries among them. */
static void test_attention_last_merges(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  int ran = 0;
  last_merges_knob = 1;
  kernel_default = 1;
  for (unsigned ti = 0; ti < 2; ti++) {
    vkrt_type t = ti ? VKRT_TYPE_Q8_0 : VKRT_TYPE_F16;
    if (!type_in_build(t))
      continue;
    const struct att_case cases[] = {
        {t, 64, 8, 1, 3, 160, {31, 32, 33}, 0, 5, true},
        {t, 128, 4, 2, 3, 160, {64, 65, 160}, 0, 5, false},
        {t, 64, 2, 1, 2, 40, {40, 17}, 0, 40, false},
        {t, 64, 4, 2, 2, 600, {600, 150}, 0, 300, false},
        {t, 64, 8, 2, 3, 100, {100, 0, -3}, 0, 4, true},
        {t, 64, 8, 2, 2, 100, {101, 0x7fffffff}, 0, 4, true},
        {t, 128, 8, 8, 2, 300, {300, 129}, 1.0f, 0, true},
        {t, 64, 24, 2, 1, 130, {130}, 0, 0, false},
        {t, 128, 32, 8, 1, 512, {97}, 0, 0, true}, /* a llama-3 token: the plan's splits */
        {t, 256, 16, 2, 1, 300, {299}, 0, 1, false}, /* one split: written directly */
    };
    /* each case twice: the combine's default (live splits up to 32 merged one invocation an
     * element, in split order; more by the split groups and trees), then every split in
     * order or none, case by case */
    int64_t in_order;
    vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_ATTENTION_COMBINE_IN_ORDER, &in_order));
    assert_int_equal(in_order, 32);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      run_case(app, &cases[i]);
      vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_COMBINE_IN_ORDER,
                                  i % 2 ? 0 : UINT32_MAX));
      run_case(app, &cases[i]);
      vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_COMBINE_IN_ORDER, in_order));
    }
    ran++;
  }
  last_merges_knob = 0;
  kernel_default = 0;
  if (!ran)
    vkt_skip("no attention kernels in this build");
  vkt_close(app);
}

/* kv_len is read on the device: changed by a fill recorded between two identical attentions
 * (one submit), and on the host between two submits of the same op. */
static void test_attention_device_length(void **state) {
  (void)state;
  vkrt_type t = type_in_build(VKRT_TYPE_F16) ? VKRT_TYPE_F16 : VKRT_TYPE_Q8_0;
  vkt_skip_if(!type_in_build(t));
  vkrt_appliance *app = open_app();
  struct att_case c = {t, 128, 8, 2, 1, 1000, {700}, 0, 0, false};
  struct att_bufs b;
  att_setup(app, &c, &b);
  vkt_hbuf d2 = vkt_hbuf_new(app, b.db.size);
  vkrt_tensor dst2 = b.dst;
  dst2.buffer = d2.buf;
  vkt_poison(b.db.map, b.db.size);
  vkt_poison(d2.map, d2.size);
  uint8_t *before = malloc(b.db.size);
  memcpy(before, b.db.map, b.db.size);
  float sc = scale_of(&c);
  vkt_check(app, vkrt_op_attention(&b.dst, &b.q, &b.k, &b.v, &b.len, sc));
  vkt_check(app, vkrt_cmd_fill(b.lb.buf, 0, 4, 123));
  vkt_check(app, vkrt_op_attention(&dst2, &b.q, &b.k, &b.v, &b.len, sc));
  vkt_check(app, vkrt_finish(app, 0));
  att_check(&c, &b, before, (int[]){700}, false, "before the device fill");
  memcpy(b.db.map, d2.map, b.db.size);
  att_check(&c, &b, before, (int[]){123}, false, "after the device fill");

  /* the host changes it between two submits of the same op */
  for (int round = 0; round < 3; round++) {
    int len = round == 0 ? 1 : round == 1 ? 1000 : 513;
    memcpy(b.lb.map, &len, 4);
    vkt_poison(b.db.map, b.db.size);
    vkt_check(app, vkrt_op_attention(&b.dst, &b.q, &b.k, &b.v, &b.len, sc));
    vkt_check(app, vkrt_finish(app, 0));
    char what[64];
    snprintf(what, sizeof(what), "host-set kv_len %d", len);
    att_check(&c, &b, before, &len, false, what);
  }
  free(before);
  vkrt_buffer_destroy(d2.buf);
  att_free(&b);
  vkt_close(app);
}

/* Many queries of different lengths; with many forced splits the partials of all queries
 * exceed the scratch and the op runs in rounds of queries. */
static void test_attention_queries(void **state) {
  (void)state;
  vkt_skip_if(!type_in_build(VKRT_TYPE_Q8_0));
  vkrt_appliance *app = open_app();
  struct att_case c = {VKRT_TYPE_Q8_0, 64, 4, 1, 4, 250, {1, 250, 77, 128}, 0, 3, true};
  run_case(app, &c);
  /* 1 token per split: 4 queries x 2000 splits x 32 heads x 66 floats = 67 MB of partials */
  struct att_case r = {VKRT_TYPE_Q8_0, 64, 32, 2, 4, 2000, {2000, 1, 999, 1500}, 0, 2000, false};
  vkrt_lab_attention plan;
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_SPLITS, r.splits));
  vkt_check(app, vkrt_lab_attention_plan(app, 0, 64, 32, 2, 4, 2000, &plan));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_SPLITS, 0));
  uint64_t per_query = (uint64_t)plan.splits * 32 * 66 * 4;
  assert_int_equal(plan.queries_per_round, VKT_MIN(4, plan.scratch_bytes / per_query));
  assert_true(plan.rounds > 1);
  if (plan.splits != 2000) /* fewer splits when not even one query of 2000 fits */
    assert_true(2000 * (uint64_t)32 * 66 * 4 > plan.scratch_bytes);
  run_case(app, &r);
  vkt_close(app);
}

static void expect_refused(vkrt_appliance *app, vkrt_status s, vkrt_status want, const char *needle) {
  if (s != want)
    fail_msg("expected %s, got %s (%s)", vkrt_status_str(want), vkrt_status_str(s),
             vkrt_last_error(app));
  if (!strstr(vkrt_last_error(app), needle))
    fail_msg("message \"%s\" does not say \"%s\"", vkrt_last_error(app), needle);
}

static void test_attention_refusals(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  vkrt_buffer *big, *small;
  vkt_check(app, vkrt_buffer_create(app, 0, 1 << 20, 0, &big));
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, 0, &small));
  const vkrt_status bad = VKRT_ERROR_INVALID_ARGUMENT;
  vkrt_tensor q = vkrt_tensor_contiguous(big, 0, VKRT_TYPE_F32, 64, 4, 1, 1);
  vkrt_tensor dst = vkrt_tensor_contiguous(big, 4096, VKRT_TYPE_F32, 64, 4, 1, 1);
  vkrt_tensor k = vkrt_tensor_contiguous(big, 8192, VKRT_TYPE_F16, 64, 2, 100, 1);
  vkrt_tensor v = vkrt_tensor_contiguous(big, 65536, VKRT_TYPE_F16, 64, 2, 100, 1);
  vkrt_tensor len = vkrt_tensor_contiguous(big, 200000, VKRT_TYPE_I32, 1, 1, 1, 1);
  /* n_head not a multiple of n_head_kv */
  vkrt_tensor q3 = vkrt_tensor_contiguous(big, 0, VKRT_TYPE_F32, 64, 3, 1, 1);
  vkrt_tensor d3 = vkrt_tensor_contiguous(big, 4096, VKRT_TYPE_F32, 64, 3, 1, 1);
  expect_refused(app, vkrt_op_attention(&d3, &q3, &k, &v, &len, 0.125f), bad,
                 "n_head 3 (q ne[1]) is not a multiple of n_head_kv 2");
  /* wrong types */
  vkrt_tensor qh = vkrt_tensor_contiguous(big, 0, VKRT_TYPE_F16, 64, 4, 1, 1);
  expect_refused(app, vkrt_op_attention(&dst, &qh, &k, &v, &len, 0.125f), bad,
                 "q is f16; it must be f32");
  vkrt_tensor kf = vkrt_tensor_contiguous(big, 8192, VKRT_TYPE_F32, 64, 2, 100, 1);
  expect_refused(app, vkrt_op_attention(&dst, &q, &kf, &v, &len, 0.125f), bad,
                 "k and v must both be f16 or both q8_0 (k f32, v f16)");
  vkrt_tensor v8 = vkrt_tensor_contiguous(big, 65536, VKRT_TYPE_Q8_0, 64, 2, 100, 1);
  expect_refused(app, vkrt_op_attention(&dst, &q, &k, &v8, &len, 0.125f), bad,
                 "k and v must both be f16 or both q8_0 (k f16, v q8_0)");
  vkrt_tensor lenf = len;
  lenf.type = VKRT_TYPE_F32;
  expect_refused(app, vkrt_op_attention(&dst, &q, &k, &v, &lenf, 0.125f), bad,
                 "kv_len is f32; it must be i32");
  vkrt_tensor len2 = vkrt_tensor_contiguous(big, 200000, VKRT_TYPE_I32, 2, 1, 1, 1);
  expect_refused(app, vkrt_op_attention(&dst, &q, &k, &v, &len2, 0.125f), bad,
                 "kv_len must be {n_q} = {1}");
  /* kv buffers too small */
  vkrt_tensor ks = vkrt_tensor_contiguous(small, 0, VKRT_TYPE_F16, 64, 2, 100, 1);
  expect_refused(app, vkrt_op_attention(&dst, &q, &ks, &v, &len, 0.125f), bad,
                 "k: touches bytes [0, 25600) past the end of its 4096-byte buffer");
  vkrt_tensor vs = vkrt_tensor_contiguous(small, 0, VKRT_TYPE_F16, 64, 2, 100, 1);
  expect_refused(app, vkrt_op_attention(&dst, &q, &k, &vs, &len, 0.125f), bad,
                 "v: touches bytes");
  /* shapes: v differs from k, head_dim differs from q's */
  vkrt_tensor v99 = vkrt_tensor_contiguous(big, 65536, VKRT_TYPE_F16, 64, 2, 99, 1);
  expect_refused(app, vkrt_op_attention(&dst, &q, &k, &v99, &len, 0.125f), bad,
                 "v ne {64, 2, 99, 1} differs from k ne {64, 2, 100, 1}");
  vkrt_tensor k32 = vkrt_tensor_contiguous(big, 8192, VKRT_TYPE_F16, 32, 2, 100, 1);
  expect_refused(app, vkrt_op_attention(&dst, &q, &k32, &v, &len, 0.125f), bad,
                 "with q's head_dim 64");
  /* unsupported head_dim: past 256, not a multiple of 8, q8_0 not of 32 */
  vkrt_tensor q512 = vkrt_tensor_contiguous(big, 0, VKRT_TYPE_F32, 512, 1, 1, 1);
  vkrt_tensor d512 = vkrt_tensor_contiguous(big, 4096, VKRT_TYPE_F32, 512, 1, 1, 1);
  vkrt_tensor k512 = vkrt_tensor_contiguous(big, 8192, VKRT_TYPE_F16, 512, 1, 20, 1);
  vkrt_tensor v512 = vkrt_tensor_contiguous(big, 65536, VKRT_TYPE_F16, 512, 1, 20, 1);
  expect_refused(app, vkrt_op_attention(&d512, &q512, &k512, &v512, &len, 0.125f), bad,
                 "head_dim 512 is not supported (multiples of 8 up to 256");
  vkrt_tensor q20 = vkrt_tensor_contiguous(big, 0, VKRT_TYPE_F32, 20, 1, 1, 1);
  vkrt_tensor d20 = vkrt_tensor_contiguous(big, 4096, VKRT_TYPE_F32, 20, 1, 1, 1);
  vkrt_tensor k20 = vkrt_tensor_contiguous(big, 8192, VKRT_TYPE_F16, 20, 1, 20, 1);
  vkrt_tensor v20 = vkrt_tensor_contiguous(big, 65536, VKRT_TYPE_F16, 20, 1, 20, 1);
  expect_refused(app, vkrt_op_attention(&d20, &q20, &k20, &v20, &len, 0.125f), bad,
                 "head_dim 20 is not supported");
  vkrt_tensor q48 = vkrt_tensor_contiguous(big, 0, VKRT_TYPE_F32, 48, 1, 1, 1);
  vkrt_tensor d48 = vkrt_tensor_contiguous(big, 4096, VKRT_TYPE_F32, 48, 1, 1, 1);
  vkrt_tensor k48 = {.buffer = big, .offset = 8192, .type = VKRT_TYPE_Q8_0, .ne = {48, 1, 20, 1},
                     .nb = {34, 68, 68, 1360}};
  expect_refused(app, vkrt_op_attention(&d48, &q48, &k48, &k48, &len, 0.125f), bad,
                 "ne[0] = 48 is not a multiple of the q8_0 block of 32 elements");
  /* f16 rows off 16-byte boundaries */
  vkrt_tensor kodd = k;
  kodd.offset += 8;
  expect_refused(app, vkrt_op_attention(&dst, &q, &kodd, &v, &len, 0.125f), bad,
                 "k: f16 rows must be dense and start at 16-byte boundaries");
  /* dst overlapping a source, dst on another buffer's bytes of q */
  vkrt_tensor dq = q;
  expect_refused(app, vkrt_op_attention(&dq, &q, &k, &v, &len, 0.125f), bad,
                 "dst bytes [0, 1024) overlap q bytes");
  /* a long context plans within the scratch (splits of any length: the split pass keeps no
   * state per token): 64 heads of 256 over 8 KV heads and 100000 tokens */
  vkrt_lab_attention plan;
  if (type_in_build(VKRT_TYPE_F16)) {
    vkt_check(app, vkrt_lab_attention_plan(app, 0, 256, 64, 8, 1, 100000, &plan));
    assert_true(plan.splits >= 1 && (uint64_t)plan.splits * plan.split_len >= 100000);
    assert_true((uint64_t)plan.splits * 64 * 258 * 4 <= plan.scratch_bytes);
    vkt_check(app, vkrt_lab_attention_plan(app, 0, 256, 64, 8, 1, 32768, &plan));
    assert_true(plan.splits >= 1);
  } else {
    expect_refused(app, vkrt_op_attention(&dst, &q, &k, &v, &len, 0.125f),
                   VKRT_ERROR_UNSUPPORTED, "not in this build");
  }
  vkt_check(app, vkrt_finish(app, 0));
  vkrt_buffer_destroy(big);
  vkrt_buffer_destroy(small);
  vkt_close(app);
}

/* Which split pass the device takes without forcing: the row kernel up to 4 query heads per
 * KV head, the tiles above; on GPUs the rows only from 16384 cached tokens (shorter caches
 * ran faster on the tiles), on CPU devices at every length. A plan, then the op on a short
 * cache, whose counters say which pass ran. */
static void test_attention_kernel_choice(void **state) {
  (void)state;
  vkrt_appliance *app = open_app();
  if (!type_in_build(VKRT_TYPE_Q8_0)) {
    vkt_close(app);
    vkt_skip("no attention kernels in this build");
    return;
  }
  vkrt_lab_device dev;
  vkt_check(app, vkrt_lab_device_get(app, 0, &dev));
  vkrt_lab_attention plan;
  /* whether the row kernel runs here at all: forced, the plan says */
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_KERNEL, 2));
  vkt_check(app, vkrt_lab_attention_plan(app, 0, 128, 32, 8, 1, 1024, &plan));
  bool rows_run = plan.rows;
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_ATTENTION_KERNEL, 0));
  static const uint32_t lengths[] = {64, 1024, 16383, 16384, 32768};
  for (unsigned i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
    uint32_t n = lengths[i];
    vkt_check(app, vkrt_lab_attention_plan(app, 0, 128, 32, 8, 1, n, &plan));
    assert_int_equal(plan.rows, rows_run && (dev.is_cpu || n >= 16384));
    /* 8 query heads per KV head: the tiles at every length */
    vkt_check(app, vkrt_lab_attention_plan(app, 0, 128, 64, 8, 1, n, &plan));
    assert_false(plan.rows);
  }
  struct att_case c = {VKRT_TYPE_Q8_0, 128, 8, 2, 1, 300, {300}, 0, 0, false};
  int rows0 = kernels[1];
  run_case(app, &c);
  assert_int_equal(kernels[1] - rows0, rows_run && dev.is_cpu);
  vkt_close(app);
}

/* 8-bit activations (vkrt_options.quant_activations = VKRT_ACTIVATIONS_Q8): on a device
 * with integer dot products (the capability snapshot) the q8_0 row kernel scores on the
 * queries rounded to 8 bits per 32 values, checked against float64 of exactly those; f16
 * caches and the tiles keep the queries as they are. */
static void test_attention_int8_queries(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  o.quant_activations = VKRT_ACTIVATIONS_Q8;
  vkrt_appliance *app = vkt_open(&o);
  if (!type_in_build(VKRT_TYPE_Q8_0)) {
    vkt_close(app);
    vkt_skip("no attention kernels in this build");
    return;
  }
  static char desc[1 << 16];
  vkrt_describe(app, true, desc, sizeof(desc));
  rounding_queries = strstr(desc, "\"integer_dot_product\": true") != NULL;
  if (!rounding_queries)
    print_message("dev0 has no integer dot products: q8_0 scores on the queries as they are\n");
  char line[1024];
  vkrt_describe(app, false, desc, sizeof(desc));
  const char *at = strstr(desc, "attention split pass: ");
  assert_non_null(at);
  snprintf(line, sizeof(line), "%.*s", (int)strcspn(at, "\n"), at);
  assert_int_equal(strstr(line, "queries rounded to 8 bits") != NULL, rounding_queries);
  /* head 64, 128, 256; 1 to 8 query heads per KV head; padded views; 16-byte K loads and
   * word loads (the 2-byte offset); full and short lengths; forced splits */
  static const struct att_case cases[] = {
      {VKRT_TYPE_Q8_0, 64, 8, 1, 2, 300, {300, 17}, 0, 0, false, 0, 2},
      {VKRT_TYPE_Q8_0, 128, 32, 8, 1, 333, {301}, 0, 0, false, 0, 2},
      {VKRT_TYPE_Q8_0, 128, 4, 2, 2, 200, {200, 1}, 0, 5, true, 0, 2},
      {VKRT_TYPE_Q8_0, 256, 4, 2, 2, 140, {140, 3}, 0, 0, false, 0, 2},
      {VKRT_TYPE_Q8_0, 256, 2, 2, 1, 97, {96}, 0.3f, 0, true, 0, 2},
      {VKRT_TYPE_Q8_0, 128, 8, 2, 1, 150, {150}, 0, 0, false, 0, 1}, /* tiles: as they are */
      {VKRT_TYPE_F16, 128, 8, 2, 1, 150, {150}, 0, 0, false, 0, 2},  /* f16: as they are */
  };
  int rounded = 0;
  for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (!type_in_build(cases[i].type))
      continue;
    vkrt_lab_counters c0, c1;
    vkt_check(app, vkrt_lab_counters_get(app, 0, &c0));
    run_case(app, &cases[i]);
    vkt_check(app, vkrt_lab_counters_get(app, 0, &c1));
    rounded += (int)(c1.attention_q8q - c0.attention_q8q);
  }
  const bool could = rounding_queries;
  rounding_queries = false;
  /* the row kernel runs on every device the suite runs on (forced): each q8_0 row case
   * rounded where the device can */
  assert_int_equal(rounded, could ? 5 : 0);
  vkt_close(app);
}

int main(void) {
  rng = vkt_seed(0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention_shapes),
      cmocka_unit_test(test_attention_splits),
      cmocka_unit_test(test_attention_last_merges),
      cmocka_unit_test(test_attention_k16),
      cmocka_unit_test(test_attention_device_length),
      cmocka_unit_test(test_attention_queries),
      cmocka_unit_test(test_attention_kernel_choice),
      cmocka_unit_test(test_attention_int8_queries),
      cmocka_unit_test(test_attention_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
