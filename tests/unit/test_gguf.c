/* vkrt-service's GGUF parser (apps/vkrt-service/gguf.c) without a device: synthetic files
 * from the writer parse back with the shapes, offsets and alignment written; every prefix of
 * a valid file fails cleanly; and each malformed input (wrong magic or version, string and
 * array lengths past the end, nested arrays, bad alignment, misaligned or out-of-file tensor
 * data, unknown types, partial blocks, overflowing dims, duplicate and missing tensors) fails
 * with its own code and a message. VKRT_GGUF_SEED_DIR=dir also writes the inputs there (the
 * fuzz seed corpus tests/fuzz/corpus/fuzz_gguf was made so). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../apps/vkrt-service/gguf.h"

static int seed_count;

static void save_seed(const uint8_t *p, size_t n) {
  const char *dir = getenv("VKRT_GGUF_SEED_DIR");
  if (!dir)
    return;
  char path[512];
  snprintf(path, sizeof(path), "%s/seed-%03d", dir, seed_count++);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

/* ---- an in-memory builder for hand-made files --------------------------------------- */

struct buf {
  uint8_t data[8192];
  size_t len;
};
static void b_u(struct buf *b, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    b->data[b->len++] = (uint8_t)(v >> (8 * i));
}
static void b_str(struct buf *b, const char *s) {
  b_u(b, strlen(s), 8);
  memcpy(b->data + b->len, s, strlen(s));
  b->len += strlen(s);
}
static void b_header(struct buf *b, uint64_t tensors, uint64_t kvs) {
  b->len = 0;
  b_u(b, GGUF_MAGIC, 4);
  b_u(b, 3, 4);
  b_u(b, tensors, 8);
  b_u(b, kvs, 8);
}
static void b_tensor(struct buf *b, const char *name, uint64_t ne0, uint64_t ne1, uint32_t type,
                     uint64_t offset) {
  b_str(b, name);
  b_u(b, 2, 4);
  b_u(b, ne0, 8);
  b_u(b, ne1, 8);
  b_u(b, type, 4);
  b_u(b, offset, 8);
}
static void b_pad_data(struct buf *b, size_t align, size_t data) {
  while (b->len % align)
    b->data[b->len++] = 0;
  memset(b->data + b->len, 0x11, data);
  b->len += data;
}

static void expect(const struct buf *b, int code, const char *needle) {
  struct gguf_file f;
  char err[512];
  save_seed(b->data, b->len);
  int r = gguf_parse(b->data, b->len, &f, err, sizeof(err));
  if (r != code)
    fail_msg("expected %s, got %s (%s)", gguf_error_str(code), gguf_error_str(r), err);
  if (code == GGUF_OK) {
    gguf_close(&f);
    return;
  }
  if (!strstr(err, needle))
    fail_msg("message '%s' lacks '%s'", err, needle);
}

/* ---- types converted on the host (foreign.c) ------------------------------------------ */

/* A tensor of one row of K elements of ggml type `ggml` over the block bytes `b`, converted;
 * the converted row as floats in y (q8_0 results: d * q per element, and the int8 quants). */
static void convert_row(uint32_t ggml, const uint8_t *b, uint32_t K, float *y, int8_t *q8) {
  struct gguf_file f;
  memset(&f, 0, sizeof(f));
  struct gguf_tensor t = {.name = "t", .n_dims = 1, .ne = {K, 1, 1, 1}, .ggml_type = ggml,
                          .size = K / gguf_ggml_block(ggml) * gguf_ggml_block_bytes(ggml)};
  f.buf = b;
  f.tensors = &t;
  char err[256];
  assert_int_equal(gguf_convert(&f, &t, err, sizeof(err)), GGUF_OK);
  assert_true(t.supported && t.converted);
  vkrt_type to;
  assert_true(gguf_foreign_target(ggml, false, &to));
  assert_int_equal(t.type, to);
  assert_int_equal(gguf_row_bytes(&t), K / vkrt_type_block(to) * vkrt_type_size(to));
  for (uint32_t k = 0; k < K; k++) {
    if (to == VKRT_TYPE_F32) {
      memcpy(&y[k], t.converted + 4 * k, 4);
      continue;
    }
    const uint8_t *blk = t.converted + 34 * (k / 32);
    q8[k] = (int8_t)blk[2 + k % 32];
    y[k] = vkrt_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) * q8[k];
  }
  free(t.converted);
}

static void put_f16(uint8_t *p, float v) {
  uint16_t h = vkrt_f32_to_f16(v);
  p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}
static float f16_of(float v) { return vkrt_f16_to_f32(vkrt_f32_to_f16(v)); }

static void expect_close(const float *got, const double *want, int n, const char *what) {
  for (int i = 0; i < n; i++)
    if (fabs(got[i] - want[i]) > 1e-6 * (1 + fabs(want[i])))
      fail_msg("%s: element %d is %.9g, want %.9g", what, i, (double)got[i], want[i]);
}

/* Each converted type against blocks packed here the way ggml's quantizers pack them (from
 * chosen quants, scales and mins): every element comes back as d * sc * q - dmin * m. q4_0
 * and q5_0 become q8_0 with the same d and q - 8 / q - 16 as the quants, exactly. */
static void test_foreign_conversions(void **state) {
  (void)state;
  uint64_t rng = 0x1234567ull;
  uint8_t b[256 * 2];
  float y[256];
  int8_t q8[256];
  double want[256];
  int v[256];
  /* q4_0 {d; qs[16]}: element j < 16 in the low nibble of qs[j], j + 16 in its high one */
  memset(b, 0, sizeof(b));
  put_f16(b, 0.375f);
  for (int j = 0; j < 32; j++)
    v[j] = (int)(vkrt_xorshift(&rng) % 16) - 8;
  for (int j = 0; j < 16; j++)
    b[2 + j] = (uint8_t)((v[j] + 8) | (v[j + 16] + 8) << 4);
  convert_row(GGML_TYPE_Q4_0, b, 32, y, q8);
  for (int j = 0; j < 32; j++) {
    assert_int_equal(q8[j], v[j]);
    want[j] = 0.375 * v[j];
  }
  expect_close(y, want, 32, "q4_0");
  /* q5_0 {d; qh[4]; qs[16]}: the fifth bit of element j is bit j of qh */
  memset(b, 0, sizeof(b));
  put_f16(b, 0.25f);
  uint32_t qh = 0;
  for (int j = 0; j < 32; j++) {
    v[j] = (int)(vkrt_xorshift(&rng) % 32) - 16;
    qh |= (uint32_t)((v[j] + 16) >> 4) << j;
  }
  for (int j = 0; j < 16; j++)
    b[6 + j] = (uint8_t)(((v[j] + 16) & 15) | ((v[j + 16] + 16) & 15) << 4);
  memcpy(b + 2, &qh, 4);
  convert_row(GGML_TYPE_Q5_0, b, 32, y, q8);
  for (int j = 0; j < 32; j++)
    assert_int_equal(q8[j], v[j]);
  /* q4_1 {d; m; qs[16]} and q5_1 {d; m; qh[4]; qs[16]}: q d + m */
  for (int five = 0; five < 2; five++) {
    memset(b, 0, sizeof(b));
    put_f16(b, 0.125f), put_f16(b + 2, -0.8125f);
    qh = 0;
    for (int j = 0; j < 32; j++) {
      v[j] = (int)(vkrt_xorshift(&rng) % (five ? 32 : 16));
      qh |= (uint32_t)(v[j] >> 4) << j;
      want[j] = 0.125 * v[j] - 0.8125;
    }
    uint8_t *qs = b + (five ? 8 : 4);
    for (int j = 0; j < 16; j++)
      qs[j] = (uint8_t)((v[j] & 15) | (v[j + 16] & 15) << 4);
    if (five)
      memcpy(b + 4, &qh, 4);
    convert_row(five ? GGML_TYPE_Q5_1 : GGML_TYPE_Q4_1, b, 32, y, q8);
    expect_close(y, want, 32, five ? "q5_1" : "q4_1");
  }
  /* q5_K {d; dmin; scales[12]; qh[32]; qs[128]}: sub-block s (32 elements) with 6-bit scale
   * and min packed as q4_K's; sub-blocks 2 i and 2 i + 1 share qs[32 i ..] (low, high
   * nibbles); the fifth bit of element 32 s + l is bit s of qh[l] */
  {
    memset(b, 0, sizeof(b));
    const float d = f16_of(0.0078125f), dmin = f16_of(0.01953125f);
    put_f16(b, d), put_f16(b + 2, dmin);
    int sc[8], mn[8];
    for (int s = 0; s < 8; s++)
      sc[s] = (int)(vkrt_xorshift(&rng) % 64), mn[s] = (int)(vkrt_xorshift(&rng) % 64);
    uint8_t *h = b + 4;
    for (int j = 0; j < 4; j++) {
      h[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
      h[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
      h[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
    for (int i = 0; i < 256; i++) {
      int s = i / 32, l = i % 32;
      v[i] = (int)(vkrt_xorshift(&rng) % 32);
      b[48 + 32 * (s / 2) + l] |= (uint8_t)((v[i] & 15) << (s % 2 ? 4 : 0));
      b[16 + l] |= (uint8_t)((v[i] >> 4) << s);
      want[i] = (double)d * sc[s] * v[i] - (double)dmin * mn[s];
    }
    convert_row(GGML_TYPE_Q5_K, b, 256, y, q8);
    expect_close(y, want, 256, "q5_K");
  }
  /* q2_K {scales[16]; qs[64]; d; dmin}: group g (16 elements) scale g low nibble, min high;
   * element 128 h + 32 j + l: bits 2 j of qs[32 h + l] */
  {
    memset(b, 0, sizeof(b));
    const float d = f16_of(0.046875f), dmin = f16_of(0.0234375f);
    put_f16(b + 80, d), put_f16(b + 82, dmin);
    int sc[16], mn[16];
    for (int g = 0; g < 16; g++) {
      sc[g] = (int)(vkrt_xorshift(&rng) % 16), mn[g] = (int)(vkrt_xorshift(&rng) % 16);
      b[g] = (uint8_t)(sc[g] | mn[g] << 4);
    }
    for (int i = 0; i < 256; i++) {
      int hh = i / 128, j = (i % 128) / 32, l = i % 32;
      v[i] = (int)(vkrt_xorshift(&rng) % 4);
      b[16 + 32 * hh + l] |= (uint8_t)(v[i] << (2 * j));
      want[i] = (double)d * sc[i / 16] * v[i] - (double)dmin * mn[i / 16];
    }
    convert_row(GGML_TYPE_Q2_K, b, 256, y, q8);
    expect_close(y, want, 256, "q2_K");
  }
  /* q3_K {hmask[32]; qs[64]; scales[12]; d}: group g's 6-bit scale (minus 32): low nibble in
   * byte g (g < 8) or the high nibble of byte g - 8, top two bits at bits 2 (g / 4) of byte
   * 8 + g % 4; element i = q - 4 (q 3 bits): low two bits as q2_K's, the third bit i / 32 of
   * hmask[i % 32] */
  {
    memset(b, 0, sizeof(b));
    const float d = f16_of(0.0625f);
    put_f16(b + 108, d);
    int sc[16];
    uint8_t *s12 = b + 96;
    for (int g = 0; g < 16; g++) {
      sc[g] = (int)(vkrt_xorshift(&rng) % 64);
      s12[g < 8 ? g : g - 8] |= (uint8_t)((sc[g] & 15) << (g < 8 ? 0 : 4));
      s12[8 + g % 4] |= (uint8_t)((sc[g] >> 4) << (2 * (g / 4)));
    }
    for (int i = 0; i < 256; i++) {
      int hh = i / 128, j = (i % 128) / 32, l = i % 32, q = (int)(vkrt_xorshift(&rng) % 8);
      b[32 + 32 * hh + l] |= (uint8_t)((q & 3) << (2 * j));
      b[l] |= (uint8_t)((q >> 2) << (i / 32));
      want[i] = (double)d * (sc[i / 16] - 32) * (q - 4);
    }
    convert_row(GGML_TYPE_Q3_K, b, 256, y, q8);
    expect_close(y, want, 256, "q3_K");
  }
  /* bf16: the high half of an f32 */
  for (int i = 0; i < 64; i++) {
    float x = ((float)(vkrt_xorshift(&rng) >> 40) / (float)(1 << 24) - 0.5f) * 100.0f;
    uint32_t u;
    memcpy(&u, &x, 4);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    b[2 * i] = (uint8_t)(u >> 16), b[2 * i + 1] = (uint8_t)(u >> 24);
    want[i] = x;
  }
  convert_row(GGML_TYPE_BF16, b, 64, y, q8);
  expect_close(y, want, 64, "bf16");
  /* a type neither run nor converted: refused with its name */
  struct gguf_file f;
  memset(&f, 0, sizeof(f));
  struct gguf_tensor t = {.name = "iq", .n_dims = 1, .ne = {256, 1, 1, 1}, .ggml_type = 16};
  f.buf = b;
  f.tensors = &t;
  char err[256];
  assert_int_equal(gguf_convert(&f, &t, err, sizeof(err)), GGUF_E_TYPE);
  assert_non_null(strstr(err, "iq"));
  assert_null(t.converted);
}

/* A valid file of one 64 x 2 q8_0 tensor and 3 key/values (one an array of strings). */
static void valid(struct buf *b) {
  b_header(b, 1, 3);
  b_str(b, "general.architecture");
  b_u(b, 8, 4);
  b_str(b, "llama");
  b_str(b, "tokenizer.tokens");
  b_u(b, 9, 4);
  b_u(b, 8, 4);
  b_u(b, 2, 8);
  b_str(b, "a");
  b_str(b, "bc");
  b_str(b, "general.alignment");
  b_u(b, 4, 4);
  b_u(b, 64, 4);
  b_tensor(b, "w", 64, 2, GGML_TYPE_Q8_0, 0);
  b_pad_data(b, 64, 2 * 2 * 34);
}

static void test_handmade(void **state) {
  (void)state;
  struct buf b;
  valid(&b);
  expect(&b, GGUF_OK, "");
  struct gguf_file f;
  char err[512];
  assert_int_equal(gguf_parse(b.data, b.len, &f, err, sizeof(err)), GGUF_OK);
  assert_int_equal(f.alignment, 64);
  assert_int_equal(f.data_offset % 64, 0);
  assert_string_equal(f.architecture, "llama");
  assert_int_equal(f.tensors[0].size, 136);
  assert_int_equal(f.tensors[0].type, VKRT_TYPE_Q8_0);
  gguf_close(&f);
  /* every strict prefix fails (truncated header, kv, infos or data), never reads past it */
  size_t full = b.len;
  for (size_t n = 0; n < full; n++) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, b.data, n);
    int r = gguf_parse(copy, n, &f, err, sizeof(err));
    if (r == GGUF_OK)
      fail_msg("prefix of %zu / %zu bytes parsed", n, full);
    assert_true(r == GGUF_E_TRUNCATED || r == GGUF_E_OFFSET);
    free(copy);
  }
  valid(&b);
  b.data[0] = 'X';
  expect(&b, GGUF_E_MAGIC, "not a GGUF file");
  valid(&b);
  b.data[4] = 2;
  expect(&b, GGUF_E_VERSION, "version 2");
  /* string length past the end */
  valid(&b);
  b.data[24] = 0xff, b.data[25] = 0xff;
  expect(&b, GGUF_E_TRUNCATED, "length");
  /* array count past the end */
  valid(&b);
  size_t arr = 24 + 8 + 20 + 4 + 8 + 5 + 8 + 16 + 4 + 4; /* the string array's count */
  b.data[arr + 7] = 0x7f;
  expect(&b, GGUF_E_TRUNCATED, "array");
  /* huge kv and tensor counts */
  b_header(&b, 0, UINT64_MAX);
  expect(&b, GGUF_E_TRUNCATED, "metadata entries");
  b_header(&b, UINT64_MAX / 2, 0);
  expect(&b, GGUF_E_TRUNCATED, "tensor infos");
  /* unknown value type, nested array */
  b_header(&b, 0, 1);
  b_str(&b, "k");
  b_u(&b, 13, 4);
  b_u(&b, 0, 8);
  expect(&b, GGUF_E_BAD_VALUE, "unknown metadata value type");
  b_header(&b, 0, 1);
  b_str(&b, "k");
  b_u(&b, 9, 4);
  b_u(&b, 9, 4);
  b_u(&b, 1, 8);
  expect(&b, GGUF_E_BAD_VALUE, "nested array");
  /* alignment: not a power of two, wrong type */
  b_header(&b, 0, 1);
  b_str(&b, "general.alignment");
  b_u(&b, 4, 4);
  b_u(&b, 48, 4);
  expect(&b, GGUF_E_BAD_VALUE, "power of two");
  b_header(&b, 0, 1);
  b_str(&b, "general.alignment");
  b_u(&b, 10, 4);
  b_u(&b, 32, 8);
  expect(&b, GGUF_E_BAD_VALUE, "uint32");
  /* tensors: misaligned offset, past the end, unknown type, partial block, dims */
  b_header(&b, 1, 0);
  b_tensor(&b, "w", 32, 1, GGML_TYPE_F32, 16);
  b_pad_data(&b, 32, 256);
  expect(&b, GGUF_E_OFFSET, "not a multiple of the alignment");
  b_header(&b, 1, 0);
  b_tensor(&b, "w", 32, 2, GGML_TYPE_F32, 0);
  b_pad_data(&b, 32, 255);
  expect(&b, GGUF_E_OFFSET, "truncated data");
  b_header(&b, 1, 0);
  b_tensor(&b, "w", 32, 2, GGML_TYPE_F32, UINT64_MAX - 31);
  b_pad_data(&b, 32, 256);
  expect(&b, GGUF_E_OFFSET, "offset 18446744073709551584 is past the end");
  b_header(&b, 1, 0);
  b_tensor(&b, "w", 32, 1, 99, 0);
  b_pad_data(&b, 32, 256);
  expect(&b, GGUF_E_TYPE, "unknown ggml type 99");
  b_header(&b, 1, 0);
  b_tensor(&b, "w", 100, 1, GGML_TYPE_Q4_K, 0);
  b_pad_data(&b, 32, 256);
  expect(&b, GGUF_E_TYPE, "not a multiple");
  b_header(&b, 1, 0);
  b_tensor(&b, "w", 1ull << 40, 1ull << 40, GGML_TYPE_F32, 0);
  b_pad_data(&b, 32, 256);
  expect(&b, GGUF_E_OVERFLOW, "overflows");
  b_header(&b, 1, 0);
  b_tensor(&b, "w", 0, 1, GGML_TYPE_F32, 0);
  expect(&b, GGUF_E_BAD_VALUE, "ne[0] = 0");
  b_header(&b, 1, 0);
  b_str(&b, "w");
  b_u(&b, 5, 4);
  b_pad_data(&b, 1, 64);
  expect(&b, GGUF_E_BAD_VALUE, "5 dims");
  /* q8_0 bytes overflow 64 bits without the element count doing so */
  b_header(&b, 1, 0);
  b_tensor(&b, "w", 1ull << 32, 1ull << 30, GGML_TYPE_Q8_0, 0);
  b_pad_data(&b, 32, 64);
  expect(&b, GGUF_E_OFFSET, "past the end");
  /* duplicate names */
  b_header(&b, 2, 0);
  b_tensor(&b, "w", 32, 1, GGML_TYPE_F32, 0);
  b_tensor(&b, "w", 32, 1, GGML_TYPE_F32, 128);
  b_pad_data(&b, 32, 256);
  expect(&b, GGUF_E_DUPLICATE, "two tensors are named w");
  /* MLP lookup: missing tensors, wrong shapes, unsupported types */
  b_header(&b, 2, 0);
  b_tensor(&b, "blk.0.ffn_gate.weight", 32, 64, GGML_TYPE_F32, 0);
  b_tensor(&b, "blk.0.ffn_up.weight", 32, 64, GGML_TYPE_F32, 8192);
  b_pad_data(&b, 32, 32);
  expect(&b, GGUF_E_OFFSET, "past the end");
  b_header(&b, 3, 0);
  b_tensor(&b, "blk.0.ffn_gate.weight", 32, 8, GGML_TYPE_F32, 0);
  b_tensor(&b, "blk.0.ffn_up.weight", 32, 8, GGML_TYPE_F32, 1024);
  b_tensor(&b, "blk.0.ffn_down.weight", 32, 8, GGML_TYPE_F32, 2048);
  b_pad_data(&b, 32, 3072);
  expect(&b, GGUF_OK, "");
  assert_int_equal(gguf_parse(b.data, b.len, &f, err, sizeof(err)), GGUF_OK);
  struct gguf_mlp mlp;
  assert_int_equal(gguf_mlp(&f, &mlp, err, sizeof(err)), GGUF_E_MISSING);
  assert_non_null(strstr(err, "blk.0.ffn_down.weight has ne {32, 8"));
  gguf_close(&f);
  b_header(&b, 2, 0);
  b_tensor(&b, "blk.0.ffn_gate.weight", 32, 8, GGML_TYPE_F32, 0);
  b_tensor(&b, "blk.0.ffn_down.weight", 8, 32, GGML_TYPE_F32, 1024);
  b_pad_data(&b, 32, 2048);
  assert_int_equal(gguf_parse(b.data, b.len, &f, err, sizeof(err)), GGUF_OK);
  assert_int_equal(gguf_mlp(&f, &mlp, err, sizeof(err)), GGUF_E_MISSING);
  assert_string_equal(err, "missing tensor blk.0.ffn_up.weight");
  gguf_close(&f);
  b_header(&b, 1, 0);
  b_tensor(&b, "blk.0.ffn_gate.weight", 256, 8, 13 /* q5_K */, 0);
  b_pad_data(&b, 32, 8 * 176);
  assert_int_equal(gguf_parse(b.data, b.len, &f, err, sizeof(err)), GGUF_OK);
  assert_int_equal(gguf_mlp(&f, &mlp, err, sizeof(err)), GGUF_E_TYPE);
  assert_non_null(strstr(err, "ggml type 13; vkrt-service loads f32, f16, q8_0, q4_K and q6_K"));
  gguf_close(&f);
}

/* The writer's files parse back: shapes, types, aligned offsets inside the file. */
static void test_writer_round_trip(void **state) {
  (void)state;
  static const vkrt_type types[] = {VKRT_TYPE_F32, VKRT_TYPE_F16, VKRT_TYPE_Q8_0, VKRT_TYPE_Q4_K,
                                    VKRT_TYPE_Q6_K};
  for (unsigned i = 0; i < 5; i++) {
    char path[] = "/tmp/vkrt-test-gguf-XXXXXX", err[512];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    uint32_t hidden = 512, ffn = 768;
    assert_int_equal(gguf_write_mlp(path, 3, hidden, ffn, types[i], 7, err, sizeof(err)), GGUF_OK);
    struct gguf_file f;
    if (gguf_open(path, &f, err, sizeof(err)))
      fail_msg("%s", err);
    struct gguf_mlp mlp;
    if (gguf_mlp(&f, &mlp, err, sizeof(err)))
      fail_msg("%s", err);
    assert_int_equal(mlp.layers, 3);
    assert_int_equal(mlp.hidden, hidden);
    assert_int_equal(mlp.ffn, ffn);
    assert_string_equal(f.architecture, "llama");
    for (uint32_t l = 0; l < 3; l++) {
      assert_int_equal(mlp.down[l]->type, types[i]);
      assert_int_equal(gguf_row_bytes(mlp.gate[l]), hidden / vkrt_type_block(types[i]) * vkrt_type_size(types[i]));
      assert_int_equal((f.data_offset + mlp.up[l]->offset) % 32, 0);
    }
    /* a small one as a fuzz seed */
    if (getenv("VKRT_GGUF_SEED_DIR") && (types[i] == VKRT_TYPE_F16 || types[i] == VKRT_TYPE_Q8_0)) {
      uint32_t b = types[i] == VKRT_TYPE_Q8_0 ? 32 : 8;
      assert_int_equal(gguf_write_mlp(path, 2, b, b, types[i], 1, err, sizeof(err)), GGUF_OK);
      FILE *in = fopen(path, "rb");
      static uint8_t data[1 << 20];
      size_t n = fread(data, 1, sizeof(data), in);
      fclose(in);
      save_seed(data, n);
    }
    gguf_close(&f);
    unlink(path);
  }
  char err[256];
  assert_int_equal(gguf_write_mlp("/tmp/x.gguf", 1, 100, 256, VKRT_TYPE_Q4_K, 1, err, sizeof(err)),
                   GGUF_E_BAD_VALUE);
  assert_int_equal(gguf_write_mlp("/nonexistent/x.gguf", 1, 256, 256, VKRT_TYPE_Q4_K, 1, err, sizeof(err)),
                   GGUF_E_IO);
}

/* The metadata getters on a file of every value type: integers of every width (sign-extended,
 * range-checked into u32/i32), floats from f32 and f64, bool, strings, arrays of strings, f32
 * and integers; a missing key, a key of another type and a value that does not fit each fail
 * with a message naming the key. */
static void test_metadata(void **state) {
  (void)state;
  struct buf b;
  b_header(&b, 0, 15);
  b_str(&b, "u8"), b_u(&b, GGUF_KV_U8, 4), b_u(&b, 200, 1);
  b_str(&b, "i8"), b_u(&b, GGUF_KV_I8, 4), b_u(&b, (uint8_t)-5, 1);
  b_str(&b, "i16"), b_u(&b, GGUF_KV_I16, 4), b_u(&b, (uint16_t)-300, 2);
  b_str(&b, "u32"), b_u(&b, GGUF_KV_U32, 4), b_u(&b, 4000000000u, 4);
  b_str(&b, "i32"), b_u(&b, GGUF_KV_I32, 4), b_u(&b, (uint32_t)-7, 4);
  b_str(&b, "u64"), b_u(&b, GGUF_KV_U64, 4), b_u(&b, 1ull << 63, 8);
  b_str(&b, "i64"), b_u(&b, GGUF_KV_I64, 4), b_u(&b, 123456, 8);
  float half = 0.5f;
  uint32_t bits;
  memcpy(&bits, &half, 4);
  b_str(&b, "f32"), b_u(&b, GGUF_KV_F32, 4), b_u(&b, bits, 4);
  double third = 1.0 / 3;
  uint64_t bits64;
  memcpy(&bits64, &third, 8);
  b_str(&b, "f64"), b_u(&b, GGUF_KV_F64, 4), b_u(&b, bits64, 8);
  b_str(&b, "flag"), b_u(&b, GGUF_KV_BOOL, 4), b_u(&b, 1, 1);
  b_str(&b, "name"), b_u(&b, GGUF_KV_STRING, 4), b_str(&b, "llama");
  b_str(&b, "strs"), b_u(&b, GGUF_KV_ARRAY, 4), b_u(&b, GGUF_KV_STRING, 4), b_u(&b, 3, 8);
  b_str(&b, "a"), b_str(&b, ""), b_str(&b, "xyz");
  b_str(&b, "floats"), b_u(&b, GGUF_KV_ARRAY, 4), b_u(&b, GGUF_KV_F32, 4), b_u(&b, 2, 8);
  b_u(&b, bits, 4), b_u(&b, bits ^ 0x80000000u, 4);
  b_str(&b, "ints"), b_u(&b, GGUF_KV_ARRAY, 4), b_u(&b, GGUF_KV_I16, 4), b_u(&b, 2, 8);
  b_u(&b, (uint16_t)-2, 2), b_u(&b, 9, 2);
  b_str(&b, "bigs"), b_u(&b, GGUF_KV_ARRAY, 4), b_u(&b, GGUF_KV_U32, 4), b_u(&b, 2, 8);
  b_u(&b, 1, 4), b_u(&b, 3000000000u, 4);
  expect(&b, GGUF_OK, "");
  struct gguf_file f;
  char err[256];
  assert_int_equal(gguf_parse(b.data, b.len, &f, err, sizeof(err)), GGUF_OK);
  uint32_t u;
  int32_t i;
  float x;
  bool flag;
  assert_int_equal(gguf_get_u32(&f, "u8", &u, err, sizeof(err)), GGUF_OK);
  assert_int_equal(u, 200);
  assert_int_equal(gguf_get_i32(&f, "i8", &i, err, sizeof(err)), GGUF_OK);
  assert_int_equal(i, -5);
  assert_int_equal(gguf_get_i32(&f, "i16", &i, err, sizeof(err)), GGUF_OK);
  assert_int_equal(i, -300);
  assert_int_equal(gguf_get_u32(&f, "i16", &u, err, sizeof(err)), GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "i16 = -300 is out of range"));
  assert_int_equal(gguf_get_u32(&f, "u32", &u, err, sizeof(err)), GGUF_OK);
  assert_int_equal(u, 4000000000u);
  assert_int_equal(gguf_get_i32(&f, "u32", &i, err, sizeof(err)), GGUF_E_BAD_VALUE);
  assert_int_equal(gguf_get_i32(&f, "i32", &i, err, sizeof(err)), GGUF_OK);
  assert_int_equal(i, -7);
  assert_int_equal(gguf_get_u32(&f, "u64", &u, err, sizeof(err)), GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "u64"));
  assert_int_equal(gguf_get_u32(&f, "i64", &u, err, sizeof(err)), GGUF_OK);
  assert_int_equal(u, 123456);
  assert_int_equal(gguf_get_f32(&f, "f32", &x, err, sizeof(err)), GGUF_OK);
  assert_true(x == 0.5f);
  assert_int_equal(gguf_get_f32(&f, "f64", &x, err, sizeof(err)), GGUF_OK);
  assert_true(x == (float)(1.0 / 3));
  assert_int_equal(gguf_get_f32(&f, "u32", &x, err, sizeof(err)), GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "metadata key u32 is a u32, expected a float"));
  assert_int_equal(gguf_get_bool(&f, "flag", &flag, err, sizeof(err)), GGUF_OK);
  assert_true(flag);
  assert_int_equal(gguf_get_u32(&f, "flag", &u, err, sizeof(err)), GGUF_E_BAD_VALUE);
  const char *str;
  uint64_t len, n;
  assert_int_equal(gguf_get_string(&f, "name", &str, &len, err, sizeof(err)), GGUF_OK);
  assert_int_equal(len, 5);
  assert_memory_equal(str, "llama", 5);
  assert_int_equal(gguf_get_string(&f, "nope", &str, &len, err, sizeof(err)), GGUF_E_MISSING);
  assert_string_equal(err, "missing metadata key nope");
  assert_int_equal(gguf_get_string(&f, "strs", &str, &len, err, sizeof(err)), GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "strs is a array, expected a string"));
  assert_int_equal(gguf_get_array_len(&f, "strs", GGUF_KV_STRING, &n, err, sizeof(err)), GGUF_OK);
  assert_int_equal(n, 3);
  assert_int_equal(gguf_get_array_len(&f, "strs", GGUF_KV_F32, &n, err, sizeof(err)),
                   GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "array of string, expected an array of f32"));
  struct gguf_str strs[3];
  assert_int_equal(gguf_get_array_str(&f, "strs", strs, 3, err, sizeof(err)), GGUF_OK);
  assert_int_equal(strs[0].len, 1);
  assert_int_equal(strs[1].len, 0);
  assert_int_equal(strs[2].len, 3);
  assert_memory_equal(strs[2].s, "xyz", 3);
  assert_int_equal(gguf_get_array_str(&f, "strs", strs, 2, err, sizeof(err)), GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "strs has 3 elements, expected 2"));
  float fl[2];
  assert_int_equal(gguf_get_array_f32(&f, "floats", fl, 2, err, sizeof(err)), GGUF_OK);
  assert_true(fl[0] == 0.5f && fl[1] == -0.5f);
  assert_int_equal(gguf_get_array_f32(&f, "ints", fl, 2, err, sizeof(err)), GGUF_E_BAD_VALUE);
  int32_t in[2];
  assert_int_equal(gguf_get_array_i32(&f, "ints", in, 2, err, sizeof(err)), GGUF_OK);
  assert_true(in[0] == -2 && in[1] == 9);
  assert_int_equal(gguf_get_array_i32(&f, "bigs", in, 2, err, sizeof(err)), GGUF_E_BAD_VALUE);
  assert_non_null(strstr(err, "bigs: element 1 = 3000000000 does not fit an int32"));
  assert_int_equal(gguf_get_array_i32(&f, "floats", in, 2, err, sizeof(err)), GGUF_E_BAD_VALUE);
  assert_null(gguf_kv_find(&f, "u"));       /* a prefix of a key is not the key */
  assert_non_null(gguf_kv_find(&f, "u8"));
  gguf_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handmade),
      cmocka_unit_test(test_writer_round_trip),
      cmocka_unit_test(test_metadata),
      cmocka_unit_test(test_foreign_conversions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
