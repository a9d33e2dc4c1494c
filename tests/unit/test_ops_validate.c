/* The ops' pure descriptor validation (runtime/ops/validate.c) with hand-built tensors on
 * fake buffers: no GPU, no Vulkan calls. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "device/device.h"
#include "ops/validate.h"

static struct vkrt_device dev0 = {.index = 0}, dev1 = {.index = 1};
static struct vkrt_buffer buf_a = {.dev = &dev0, .size = 1 << 20};
static struct vkrt_buffer buf_b = {.dev = &dev0, .size = 1 << 20};
static struct vkrt_buffer buf_small = {.dev = &dev0, .size = 1000};
static struct vkrt_buffer buf_other = {.dev = &dev1, .size = 1 << 20};
static const struct vkrt_ops_limits lim = {.max_storage_buffer_range = 1 << 30,
                                           .min_storage_buffer_offset_alignment = 64};
static char why[1024];

static vkrt_tensor t4(struct vkrt_buffer *b, uint64_t offset, vkrt_type type, int64_t n0,
                      int64_t n1, int64_t n2, int64_t n3) {
  return vkrt_tensor_contiguous(b, offset, type, n0, n1, n2, n3);
}

/* a view of src with dims 0 and 1 swapped in storage: nb[1] == element size */
static vkrt_tensor transposed(struct vkrt_buffer *b, uint64_t offset, vkrt_type type,
                              int64_t n0, int64_t n1) {
  vkrt_tensor t = t4(b, offset, type, n1, n0, 1, 1);
  int64_t nb0 = t.nb[0];
  t.ne[0] = n0, t.ne[1] = n1;
  t.nb[0] = t.nb[1], t.nb[1] = nb0;
  return t;
}

static void expect_fail(bool ok, const char *needle) {
  if (ok)
    fail_msg("expected a failure mentioning '%s'", needle);
  if (!strstr(why, needle))
    fail_msg("message '%s' lacks '%s'", why, needle);
}

static void test_view_contiguous(void **state) {
  (void)state;
  struct vkrt_ops_view v;
  vkrt_tensor t = t4(&buf_a, 200, VKRT_TYPE_F32, 33, 31, 2, 1);
  assert_true(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)));
  assert_true(v.contiguous);
  assert_int_equal(v.bind_offset, 192); /* aligned down to 64 */
  assert_int_equal(v.offset, 2);        /* (200 - 192) / 4 */
  assert_int_equal(v.elements, 33 * 31 * 2);
  assert_int_equal(v.hi, 200 + 33 * 31 * 2 * 4);
  assert_int_equal(v.bind_range, v.hi - 192);
  assert_int_equal(v.stride[0], 1);
  assert_int_equal(v.stride[1], 33);
  assert_int_equal(v.stride[2], 33 * 31);
  assert_int_equal(v.stride[3], 0); /* ne == 1 */

  vkrt_tensor tr = transposed(&buf_a, 0, VKRT_TYPE_F16, 5, 7);
  assert_true(vkrt_ops_view_init(&v, &lim, "op", "src", &tr, false, why, sizeof(why)));
  assert_false(v.contiguous);
  assert_int_equal(v.stride[0], 7);
  assert_int_equal(v.stride[1], 1);
  assert_int_equal(v.type_size, 2);
}

static void test_view_rejects(void **state) {
  (void)state;
  struct vkrt_ops_view v;
  vkrt_tensor t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 8, 1, 1);
  t.ne[1] = -3;
  expect_fail(vkrt_ops_view_init(&v, &lim, "vkrt_op_copy", "src", &t, false, why, sizeof(why)),
              "vkrt_op_copy: src: ne[1] = -3");
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 8, 1, 1);
  t.ne[2] = 0;
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)), "ne[2] = 0");
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 8, 1, 1);
  t.nb[1] = -32;
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "nb[1] = -32 is negative");
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 8, 1, 1);
  t.nb[1] = 30;
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "not a multiple of the f32 size");
  t = t4(&buf_a, 2, VKRT_TYPE_F32, 8, 8, 1, 1);
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "offset 2 is not aligned");
  t = t4(&buf_small, 0, VKRT_TYPE_F32, 16, 16, 1, 1); /* 1024 bytes in a 1000-byte buffer */
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "past the end of its 1000-byte buffer");
  t = t4(&buf_small, 0, VKRT_TYPE_F32, 10, 1, 1, 1);
  t.nb[1] = 4096; /* stride past the buffer, but ne[1] == 1 never steps */
  assert_true(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)));
  t.ne[1] = 2;
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "past the end");
  /* overflowing sizes and strides */
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 8, 1, 1);
  t.ne[0] = INT64_MAX;
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "does not fit 32 bits");
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 8, 1, 1);
  t.nb[1] = INT64_MAX - 3;
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)), "overflows");
  t = t4(&buf_a, UINT64_MAX - 3, VKRT_TYPE_F32, 8, 1, 1, 1);
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)), "overflows");
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 1 << 16, 1 << 16, 1, 1);
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "more than the 2^31");
  /* maxStorageBufferRange: recorded, enforced by the ops that need one binding */
  struct vkrt_ops_limits small = {.max_storage_buffer_range = 4096,
                                  .min_storage_buffer_offset_alignment = 16};
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 2048, 1, 1, 1);
  assert_true(vkrt_ops_view_init(&v, &small, "op", "src", &t, false, why, sizeof(why)));
  assert_false(v.fits_binding);
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 1024, 1, 1, 1);
  assert_true(vkrt_ops_view_init(&v, &small, "op", "src", &t, false, why, sizeof(why)));
  assert_true(v.fits_binding);
  {
    struct vkrt_ops_view vv[9];
    vkrt_tensor big = t4(&buf_a, 0, VKRT_TYPE_F32, 64, 64, 1, 1); /* 16 KiB */
    vkrt_tensor big2 = t4(&buf_b, 0, VKRT_TYPE_F32, 64, 64, 1, 1);
    vkrt_tensor bigt = t4(&buf_a, 0, VKRT_TYPE_F32, 64, 64, 1, 1);
    assert_true(vkrt_ops_check_copy(&small, &big, &big2, vv, why, sizeof(why))); /* dense: chunked */
    big2.type = VKRT_TYPE_F16;
    big2 = t4(&buf_b, 0, VKRT_TYPE_F16, 64, 64, 1, 1);
    expect_fail(vkrt_ops_check_copy(&small, &big, &big2, vv, why, sizeof(why)),
                "maxStorageBufferRange");
    big2 = t4(&buf_b, 0, VKRT_TYPE_F32, 64, 64, 1, 1);
    expect_fail(vkrt_ops_check_transpose(&small, &bigt, &big2, vv, why, sizeof(why)),
                "maxStorageBufferRange");
    const vkrt_tensor *srcs[1] = {&big2};
    assert_true(vkrt_ops_check_add(&small, &big, srcs, 1, vv, why, sizeof(why)));
  }
  /* invalid type, NULL buffer */
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 1, 1, 1);
  t.type = (vkrt_type)7;
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "invalid type 7");
  t = t4(NULL, 0, VKRT_TYPE_F32, 8, 1, 1, 1);
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)),
              "has no buffer");
}

static void test_view_overlapping_dst(void **state) {
  (void)state;
  struct vkrt_ops_view v;
  vkrt_tensor t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 8, 1, 1);
  t.nb[1] = 0; /* every row writes the same addresses */
  assert_true(vkrt_ops_view_init(&v, &lim, "op", "src", &t, false, why, sizeof(why)));
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "dst", &t, true, why, sizeof(why)),
              "elements overlap");
  t.nb[1] = 16; /* rows of 32 bytes 16 apart */
  expect_fail(vkrt_ops_view_init(&v, &lim, "op", "dst", &t, true, why, sizeof(why)),
              "elements overlap");
  vkrt_tensor tr = transposed(&buf_a, 0, VKRT_TYPE_F32, 8, 9); /* permuted: fine */
  assert_true(vkrt_ops_view_init(&v, &lim, "op", "dst", &tr, true, why, sizeof(why)));
  t = t4(&buf_a, 0, VKRT_TYPE_F32, 8, 8, 1, 1);
  t.nb[1] = 64; /* padded rows: fine */
  assert_true(vkrt_ops_view_init(&v, &lim, "op", "dst", &t, true, why, sizeof(why)));
}

static void test_copy_transpose_shapes(void **state) {
  (void)state;
  struct vkrt_ops_view v[3];
  vkrt_tensor d = t4(&buf_a, 0, VKRT_TYPE_F16, 31, 33, 1, 1);
  vkrt_tensor s = t4(&buf_b, 0, VKRT_TYPE_F32, 31, 33, 1, 1);
  assert_true(vkrt_ops_check_copy(&lim, &d, &s, v, why, sizeof(why)));
  s.ne[1] = 32;
  expect_fail(vkrt_ops_check_copy(&lim, &d, &s, v, why, sizeof(why)),
              "dst ne {31, 33, 1, 1} differs from src ne {31, 32, 1, 1}");
  s = t4(&buf_other, 0, VKRT_TYPE_F32, 31, 33, 1, 1);
  expect_fail(vkrt_ops_check_copy(&lim, &d, &s, v, why, sizeof(why)),
              "wrong device: src is on dev1 but dst is on dev0");
  s = t4(&buf_a, 64, VKRT_TYPE_F32, 31, 33, 1, 1); /* overlaps dst in the same buffer */
  expect_fail(vkrt_ops_check_copy(&lim, &d, &s, v, why, sizeof(why)), "in-place is not supported");

  vkrt_tensor td = t4(&buf_a, 0, VKRT_TYPE_F32, 33, 31, 2, 3);
  vkrt_tensor ts = t4(&buf_b, 0, VKRT_TYPE_F32, 31, 33, 2, 3);
  assert_true(vkrt_ops_check_transpose(&lim, &td, &ts, v, why, sizeof(why)));
  td = t4(&buf_a, 0, VKRT_TYPE_F32, 33, 31, 3, 2);
  expect_fail(vkrt_ops_check_transpose(&lim, &td, &ts, v, why, sizeof(why)),
              "dims 0 and 1 swapped");
}

static void test_concat_shapes(void **state) {
  (void)state;
  struct vkrt_ops_view v[3];
  for (int dim = 0; dim < 4; dim++) {
    int64_t ne[4] = {5, 6, 7, 8};
    int64_t na[4] = {5, 6, 7, 8}, nbb[4] = {5, 6, 7, 8};
    na[dim] = 2, nbb[dim] = 3, ne[dim] = 5;
    vkrt_tensor d = t4(&buf_a, 0, VKRT_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
    vkrt_tensor a = t4(&buf_b, 0, VKRT_TYPE_F32, na[0], na[1], na[2], na[3]);
    vkrt_tensor b = t4(&buf_b, 65536, VKRT_TYPE_F32, nbb[0], nbb[1], nbb[2], nbb[3]);
    assert_true(vkrt_ops_check_concat(&lim, &d, &a, &b, dim, v, why, sizeof(why)));
    b.ne[(dim + 1) % 4] += 1;
    expect_fail(vkrt_ops_check_concat(&lim, &d, &a, &b, dim, v, why, sizeof(why)),
                "do not concatenate");
    b.ne[(dim + 1) % 4] -= 1;
    d.ne[dim] = 6;
    d = t4(&buf_a, 0, VKRT_TYPE_F32, d.ne[0], d.ne[1], d.ne[2], d.ne[3]);
    expect_fail(vkrt_ops_check_concat(&lim, &d, &a, &b, dim, v, why, sizeof(why)),
                "do not concatenate");
  }
  vkrt_tensor d = t4(&buf_a, 0, VKRT_TYPE_F32, 4, 2, 1, 1);
  vkrt_tensor a = t4(&buf_b, 0, VKRT_TYPE_F32, 2, 2, 1, 1);
  vkrt_tensor b = t4(&buf_b, 64, VKRT_TYPE_F16, 2, 2, 1, 1);
  expect_fail(vkrt_ops_check_concat(&lim, &d, &a, &b, 0, v, why, sizeof(why)), "types differ");
  b = t4(&buf_b, 64, VKRT_TYPE_F32, 2, 2, 1, 1);
  expect_fail(vkrt_ops_check_concat(&lim, &d, &a, &b, 4, v, why, sizeof(why)), "dim 4 is not 0..3");
  expect_fail(vkrt_ops_check_concat(&lim, &d, &a, &b, -1, v, why, sizeof(why)), "dim -1");
  b.buffer = &buf_other;
  expect_fail(vkrt_ops_check_concat(&lim, &d, &a, &b, 0, v, why, sizeof(why)), "wrong device");
}

static void test_concat_fast_path_eligibility(void **state) {
  (void)state;
  struct vkrt_ops_view v[3];
  const char *why_not;
  vkrt_tensor d = t4(&buf_a, 0, VKRT_TYPE_F32, 30, 20, 1, 1);
  vkrt_tensor a = t4(&buf_b, 0, VKRT_TYPE_F32, 10, 20, 1, 1);
  vkrt_tensor bt = transposed(&buf_b, 4096, VKRT_TYPE_F32, 20, 20);
  assert_true(vkrt_ops_check_concat(&lim, &d, &a, &bt, 0, v, why, sizeof(why)));
  assert_int_equal(vkrt_ops_concat_fast_path_source(v, 0, &why_not), 2);
  vkrt_tensor at = transposed(&buf_b, 0, VKRT_TYPE_F32, 10, 20);
  vkrt_tensor b = t4(&buf_b, 4096, VKRT_TYPE_F32, 20, 20, 1, 1);
  assert_true(vkrt_ops_check_concat(&lim, &d, &at, &b, 0, v, why, sizeof(why)));
  assert_int_equal(vkrt_ops_concat_fast_path_source(v, 0, &why_not), 1);
  /* both contiguous: generic */
  assert_true(vkrt_ops_check_concat(&lim, &d, &a, &b, 0, v, why, sizeof(why)));
  assert_int_equal(vkrt_ops_concat_fast_path_source(v, 0, &why_not), 0);
  assert_non_null(why_not);
  /* both transposed: generic */
  assert_true(vkrt_ops_check_concat(&lim, &d, &at, &bt, 0, v, why, sizeof(why)));
  assert_int_equal(vkrt_ops_concat_fast_path_source(v, 0, &why_not), 0);
  /* dst not contiguous: generic */
  vkrt_tensor dt = transposed(&buf_a, 0, VKRT_TYPE_F32, 30, 20);
  assert_true(vkrt_ops_check_concat(&lim, &dt, &a, &bt, 0, v, why, sizeof(why)));
  assert_int_equal(vkrt_ops_concat_fast_path_source(v, 0, &why_not), 0);
  assert_string_equal(why_not, "dst not contiguous");
  /* dim 1 is never the fast path */
  vkrt_tensor d1 = t4(&buf_a, 0, VKRT_TYPE_F32, 20, 30, 1, 1);
  vkrt_tensor a1 = transposed(&buf_b, 0, VKRT_TYPE_F32, 20, 10);
  vkrt_tensor b1 = t4(&buf_b, 4096, VKRT_TYPE_F32, 20, 20, 1, 1);
  assert_true(vkrt_ops_check_concat(&lim, &d1, &a1, &b1, 1, v, why, sizeof(why)));
  assert_int_equal(vkrt_ops_concat_fast_path_source(v, 1, &why_not), 0);
}

static void test_add(void **state) {
  (void)state;
  struct vkrt_ops_view v[9];
  vkrt_tensor d = t4(&buf_a, 0, VKRT_TYPE_F32, 1000, 1, 1, 1);
  vkrt_tensor s[9];
  const vkrt_tensor *ps[9];
  for (int i = 0; i < 9; i++) {
    s[i] = t4(&buf_b, (uint64_t)i * 4096, VKRT_TYPE_F32, 1000, 1, 1, 1);
    ps[i] = &s[i];
  }
  assert_true(vkrt_ops_check_add(&lim, &d, ps, 8, v, why, sizeof(why)));
  expect_fail(vkrt_ops_check_add(&lim, &d, ps, 9, v, why, sizeof(why)), "9 sources");
  expect_fail(vkrt_ops_check_add(&lim, &d, ps, 0, v, why, sizeof(why)), "0 sources");
  s[2].ne[0] = 999;
  expect_fail(vkrt_ops_check_add(&lim, &d, ps, 3, v, why, sizeof(why)), "srcs[2] ne");
  s[2] = t4(&buf_b, 8192, VKRT_TYPE_F16, 1000, 1, 1, 1);
  expect_fail(vkrt_ops_check_add(&lim, &d, ps, 3, v, why, sizeof(why)), "srcs[2] is f16");
  s[2] = t4(&buf_other, 0, VKRT_TYPE_F32, 1000, 1, 1, 1);
  expect_fail(vkrt_ops_check_add(&lim, &d, ps, 3, v, why, sizeof(why)), "wrong device");
  s[2] = t4(&buf_b, 8192, VKRT_TYPE_F32, 500, 2, 1, 1);
  s[2].ne[0] = 1000, s[2].ne[1] = 1;
  s[2].nb[0] = 8;
  expect_fail(vkrt_ops_check_add(&lim, &d, ps, 3, v, why, sizeof(why)), "not contiguous");
  s[2] = t4(&buf_b, 8192, VKRT_TYPE_F32, 1000, 1, 1, 1);
  /* in place on srcs[1] is fine, a shifted overlap is not */
  vkrt_tensor inplace = s[1];
  assert_true(vkrt_ops_check_add(&lim, &inplace, ps, 3, v, why, sizeof(why)));
  inplace.offset += 4;
  expect_fail(vkrt_ops_check_add(&lim, &inplace, ps, 3, v, why, sizeof(why)), "overlap");
}

static void test_matmul_shapes(void **state) {
  (void)state;
  struct vkrt_ops_view v[3];
  vkrt_tensor w = t4(&buf_a, 0, VKRT_TYPE_F16, 64, 48, 2, 1);
  vkrt_tensor x = t4(&buf_b, 0, VKRT_TYPE_F32, 64, 3, 4, 1);
  vkrt_tensor d = t4(&buf_b, 65536, VKRT_TYPE_F32, 48, 3, 4, 1);
  assert_true(vkrt_ops_check_matmul(&lim, &d, &w, &x, v, why, sizeof(why)));
  x.ne[2] = 3;
  d.ne[2] = 3;
  x = t4(&buf_b, 0, VKRT_TYPE_F32, 64, 3, 3, 1);
  d = t4(&buf_b, 65536, VKRT_TYPE_F32, 48, 3, 3, 1);
  expect_fail(vkrt_ops_check_matmul(&lim, &d, &w, &x, v, why, sizeof(why)), "do not divide");
  x = t4(&buf_b, 0, VKRT_TYPE_F32, 63, 3, 4, 1);
  d = t4(&buf_b, 65536, VKRT_TYPE_F32, 48, 3, 4, 1);
  expect_fail(vkrt_ops_check_matmul(&lim, &d, &w, &x, v, why, sizeof(why)), "inner sizes differ");
  x = t4(&buf_b, 0, VKRT_TYPE_F32, 64, 3, 4, 1);
  d = t4(&buf_b, 65536, VKRT_TYPE_F32, 47, 3, 4, 1);
  expect_fail(vkrt_ops_check_matmul(&lim, &d, &w, &x, v, why, sizeof(why)), "dst ne");
  d = t4(&buf_b, 65536, VKRT_TYPE_F16, 48, 3, 4, 1);
  expect_fail(vkrt_ops_check_matmul(&lim, &d, &w, &x, v, why, sizeof(why)), "must be f32");
}

/* The decode ops: views filled (element offsets in place), in-place forms, i32 where it
 * belongs and nowhere else. */
/* Q6_K views: 210-byte blocks at any even byte, counted in bytes; odd offsets, ne[0] not a
 * multiple of 256, nb[0] not the block and rows not whole blocks refused with the reason;
 * taken as matmul's w, get_rows' table and copy's src, never written but by a dense
 * same-type copy. */
static void test_q6_k_views(void **state) {
  (void)state;
  struct vkrt_ops_view v[3];
  assert_int_equal(vkrt_type_size(VKRT_TYPE_Q6_K), 210);
  assert_int_equal(vkrt_type_block(VKRT_TYPE_Q6_K), 256);
  vkrt_tensor w = t4(&buf_a, 66, VKRT_TYPE_Q6_K, 512, 40, 1, 1); /* 2 mod 4 */
  vkrt_tensor x = t4(&buf_b, 0, VKRT_TYPE_F32, 512, 3, 1, 1);
  vkrt_tensor d = t4(&buf_b, 65536, VKRT_TYPE_F32, 40, 3, 1, 1);
  assert_true(vkrt_ops_check_matmul(&lim, &d, &w, &x, v, why, sizeof(why)));
  assert_int_equal(v[1].block, 256);
  assert_int_equal(v[1].type_size, 210);
  assert_int_equal(v[1].bind_offset, 64);
  assert_int_equal(v[1].offset, 2);         /* bytes from the binding */
  assert_int_equal(v[1].stride[1], 2 * 210); /* bytes per row */
  assert_int_equal(v[1].hi, 66 + 40 * 2 * 210);
  vkrt_tensor bad = w;
  bad.offset = 67;
  expect_fail(vkrt_ops_check_matmul(&lim, &d, &bad, &x, v, why, sizeof(why)),
              "offset 67 is not a multiple of 2 bytes (q6_K)");
  bad = w, bad.ne[0] = 384;
  vkrt_tensor x384 = t4(&buf_b, 0, VKRT_TYPE_F32, 384, 3, 1, 1);
  expect_fail(vkrt_ops_check_matmul(&lim, &d, &bad, &x384, v, why, sizeof(why)),
              "ne[0] = 384 is not a multiple of the q6_K block of 256 elements");
  bad = w, bad.nb[0] = 144;
  expect_fail(vkrt_ops_check_matmul(&lim, &d, &bad, &x, v, why, sizeof(why)),
              "nb[0] = 144 must be the q6_K block size 210");
  bad = w, bad.nb[1] = 2 * 210 + 2;
  expect_fail(vkrt_ops_check_matmul(&lim, &d, &bad, &x, v, why, sizeof(why)),
              "nb[1] = 422 is not a multiple of the q6_K block size 210");
  /* a get_rows table and a copy source; as a destination only dense and of its own type */
  vkrt_tensor ids = t4(&buf_b, 8192, VKRT_TYPE_I32, 5, 1, 1, 1);
  vkrt_tensor rows = t4(&buf_b, 16384, VKRT_TYPE_F32, 512, 5, 1, 1);
  assert_true(vkrt_ops_check_get_rows(&lim, &rows, &w, &ids, v, why, sizeof(why)));
  vkrt_tensor f = t4(&buf_b, 0, VKRT_TYPE_F32, 512, 40, 1, 1);
  assert_true(vkrt_ops_check_copy(&lim, &f, &w, v, why, sizeof(why)));
  expect_fail(vkrt_ops_check_copy(&lim, &w, &f, v, why, sizeof(why)), "dst is q6_K: block-quantized");
  vkrt_tensor same = t4(&buf_b, 2, VKRT_TYPE_Q6_K, 512, 40, 1, 1);
  assert_true(vkrt_ops_check_copy(&lim, &same, &w, v, why, sizeof(why)));
  vkrt_tensor src = t4(&buf_b, 65536, VKRT_TYPE_F32, 512, 5, 1, 1);
  expect_fail(vkrt_ops_check_set_rows(&lim, &w, &src, &ids, v, why, sizeof(why)), "f32, f16 or q8_0");
}

static void test_decode_ops(void **state) {
  (void)state;
  struct vkrt_ops_view v[5];
  vkrt_tensor x = t4(&buf_a, 256, VKRT_TYPE_F32, 128, 32, 3, 1);
  vkrt_tensor w = t4(&buf_b, 0, VKRT_TYPE_F32, 128, 1, 1, 1);
  vkrt_tensor pos = t4(&buf_b, 4096, VKRT_TYPE_I32, 3, 1, 1, 1);
  /* rms_norm in place, w's view in views[2] */
  assert_true(vkrt_ops_check_rms_norm(&lim, &x, &x, &w, 1e-5f, v, why, sizeof(why)));
  assert_int_equal(v[1].offset, 0);
  assert_int_equal(v[2].ne[0], 128);
  assert_true(vkrt_ops_check_rms_norm(&lim, &x, &x, NULL, 0.0f, v, why, sizeof(why)));
  assert_null(v[2].buffer);
  vkrt_tensor shifted = x;
  shifted.offset += 4;
  expect_fail(vkrt_ops_check_rms_norm(&lim, &shifted, &x, NULL, 1e-5f, v, why, sizeof(why)),
              "without being x exactly");
  /* rope: positions per token, n_dims even and within the head */
  vkrt_rope_params rp = {VKRT_ROPE_NEOX, 64, 10000.0f, 1.0f};
  assert_true(vkrt_ops_check_rope(&lim, &x, &x, &pos, NULL, &rp, v, why, sizeof(why)));
  assert_int_equal(v[2].type, VKRT_TYPE_I32);
  assert_int_equal(v[2].offset, (4096 - 4096 / 64 * 64) / 4);
  rp.n_dims = 65;
  expect_fail(vkrt_ops_check_rope(&lim, &x, &x, &pos, NULL, &rp, v, why, sizeof(why)), "n_dims = 65");
  rp.n_dims = 130;
  expect_fail(vkrt_ops_check_rope(&lim, &x, &x, &pos, NULL, &rp, v, why, sizeof(why)), "head size 128");
  rp.n_dims = 64;
  vkrt_tensor pos_f = pos;
  pos_f.type = VKRT_TYPE_F32;
  expect_fail(vkrt_ops_check_rope(&lim, &x, &x, &pos_f, NULL, &rp, v, why, sizeof(why)), "pos is f32; it must be i32");
  /* frequency factors: f32, one per pair at least, in views[3], never dst */
  vkrt_tensor ff = t4(&buf_b, 8192, VKRT_TYPE_F32, 32, 1, 1, 1);
  assert_true(vkrt_ops_check_rope(&lim, &x, &x, &pos, &ff, &rp, v, why, sizeof(why)));
  assert_int_equal(v[3].ne[0], 32);
  assert_int_equal(v[3].offset, (8192 - 8192 / 64 * 64) / 4);
  const struct {
    vkrt_tensor factors;
    const char *why;
  } bad_factors[] = {
      {t4(&buf_b, 8192, VKRT_TYPE_F32, 31, 1, 1, 1),
       "vkrt_op_rope_ext: factors has 31 values for the 32 pairs of n_dims = 64"},
      {t4(&buf_b, 8192, VKRT_TYPE_F16, 32, 1, 1, 1), "factors is f16; it must be f32"},
      {t4(&buf_b, 8192, VKRT_TYPE_F32, 32, 2, 1, 1), "factors ne {32, 2, 1, 1}: the op takes 1 dim"},
      {t4(&buf_a, 256, VKRT_TYPE_F32, 32, 1, 1, 1), "overlap factors bytes"}, /* dst's */
  };
  for (size_t i = 0; i < sizeof(bad_factors) / sizeof(bad_factors[0]); i++)
    expect_fail(vkrt_ops_check_rope(&lim, &x, &x, &pos, &bad_factors[i].factors, &rp, v, why,
                                    sizeof(why)),
                bad_factors[i].why);
  /* get_rows: a q4_K table, i32 ids, f32 rows out */
  vkrt_tensor table = t4(&buf_a, 0, VKRT_TYPE_Q4_K, 512, 100, 1, 1);
  vkrt_tensor ids = t4(&buf_b, 8192, VKRT_TYPE_I32, 5, 1, 1, 1);
  vkrt_tensor rows = t4(&buf_b, 16384, VKRT_TYPE_F32, 512, 5, 1, 1);
  assert_true(vkrt_ops_check_get_rows(&lim, &rows, &table, &ids, v, why, sizeof(why)));
  assert_int_equal(v[1].block, 256);
  assert_int_equal(v[1].stride[1], 2 * 144); /* bytes per row */
  vkrt_tensor narrow = t4(&buf_a, 0, VKRT_TYPE_F16, 256, 100, 1, 1);
  expect_fail(vkrt_ops_check_get_rows(&lim, &rows, &narrow, &ids, v, why, sizeof(why)),
              "must be {table.ne[0], ids.ne[0]}");
  expect_fail(vkrt_ops_check_get_rows(&lim, &rows, &x, &ids, v, why, sizeof(why)), "the op takes 2 dims");
  /* set_rows into a q8_0 cache; i32 stays out of the float ops */
  vkrt_tensor cache = t4(&buf_a, 2, VKRT_TYPE_Q8_0, 512, 40, 1, 1);
  vkrt_tensor src = t4(&buf_b, 65536, VKRT_TYPE_F32, 512, 5, 1, 1);
  assert_true(vkrt_ops_check_set_rows(&lim, &cache, &src, &ids, v, why, sizeof(why)));
  assert_int_equal(v[0].offset % 64, 2);
  vkrt_tensor q4 = t4(&buf_a, 0, VKRT_TYPE_Q4_K, 512, 40, 1, 1);
  expect_fail(vkrt_ops_check_set_rows(&lim, &q4, &src, &ids, v, why, sizeof(why)), "f32, f16 or q8_0");
  /* rope_set_rows: src's heads (strided) flattened into the cache rows, positions beside */
  vkrt_rope_params krp = {VKRT_ROPE_NORMAL, 128, 500000.0f, 1.0f};
  vkrt_tensor heads = t4(&buf_b, 65536, VKRT_TYPE_F32, 128, 4, 5, 1);
  heads.nb[1] = 1024; /* heads 1 KiB apart */
  heads.nb[2] = 4096;
  vkrt_tensor kpos = t4(&buf_b, 8448, VKRT_TYPE_I32, 5, 1, 1, 1);
  assert_true(vkrt_ops_check_rope_set_rows(&lim, &cache, &heads, &ids, &kpos, NULL, &krp, v, why,
                                           sizeof(why)));
  assert_int_equal(v[1].stride[1], 256); /* elements */
  assert_int_equal(v[3].ne[0], 5);
  krp.n_dims = 130;
  expect_fail(vkrt_ops_check_rope_set_rows(&lim, &cache, &heads, &ids, &kpos, NULL, &krp, v, why,
                                           sizeof(why)), "vkrt_op_rope_set_rows: n_dims = 130");
  krp.n_dims = 128;
  heads.ne[1] = 3;
  expect_fail(vkrt_ops_check_rope_set_rows(&lim, &cache, &heads, &ids, &kpos, NULL, &krp, v, why,
                                           sizeof(why)), "needs dst {head_dim * n_head, n_rows}");
  /* argmax: i32 out, one per row */
  vkrt_tensor am = t4(&buf_b, 0, VKRT_TYPE_I32, 32, 1, 1, 1);
  vkrt_tensor logits = t4(&buf_a, 0, VKRT_TYPE_F32, 1000, 32, 1, 1);
  assert_true(vkrt_ops_check_argmax(&lim, &am, &logits, NULL, 0, v, why, sizeof(why)));
  expect_fail(vkrt_ops_check_argmax(&lim, &logits, &am, NULL, 0, v, why, sizeof(why)), "it must be i32");
  /* top_k: values f32 and ids i32 {k, rows}, 1 <= k <= 64 and k <= n; rows whose lists fit
   * the scratch (a llama-3 vocabulary, k 64: 4160 keys; 600000 elements: 19040 + 640) */
  vkrt_tensor tv = t4(&buf_b, 0, VKRT_TYPE_F32, 40, 32, 1, 1);
  vkrt_tensor ti = t4(&buf_b, 8192, VKRT_TYPE_I32, 40, 32, 1, 1);
  assert_true(vkrt_ops_check_top_k(&lim, &tv, &ti, &logits, v, why, sizeof(why)));
  assert_int_equal(vkrt_ops_top_k_lists(128256), 63);
  assert_int_equal(vkrt_ops_top_k_row_keys(128256, 64), 63 * 64 + 2 * 64);
  assert_true(vkrt_ops_top_k_row_keys(600000, 64) <= VKRT_OPS_TOP_K_KEYS);
  assert_true(vkrt_ops_top_k_row_keys(1100000, 64) > VKRT_OPS_TOP_K_KEYS);
  expect_fail(vkrt_ops_check_top_k(&lim, &tv, &tv, &logits, v, why, sizeof(why)),
              "ids is f32; it must be i32");
  vkrt_tensor tv65 = t4(&buf_b, 0, VKRT_TYPE_F32, 65, 32, 1, 1);
  vkrt_tensor ti65 = t4(&buf_b, 16384, VKRT_TYPE_I32, 65, 32, 1, 1);
  expect_fail(vkrt_ops_check_top_k(&lim, &tv65, &ti65, &logits, v, why, sizeof(why)),
              "vkrt_op_top_k: k = 65 (values ne[0]) must be 1..64");
  ti.ne[1] = 31;
  expect_fail(vkrt_ops_check_top_k(&lim, &tv, &ti, &logits, v, why, sizeof(why)),
              "k for each of the rows of x");
  /* sample: a key of two words a row, a finite temperature > 0 */
  vkrt_tensor key = t4(&buf_b, 4096, VKRT_TYPE_I32, 2, 32, 1, 1);
  assert_true(vkrt_ops_check_argmax(&lim, &am, &logits, &key, 0.8f, v, why, sizeof(why)));
  assert_int_equal(v[2].ne[0], 2);
  expect_fail(vkrt_ops_check_argmax(&lim, &am, &logits, &key, 0, v, why, sizeof(why)),
              "vkrt_op_sample: temperature = 0");
  expect_fail(vkrt_ops_check_argmax(&lim, &am, &logits, &key, NAN, v, why, sizeof(why)),
              "a finite temperature > 0");
  key.ne[1] = 31;
  expect_fail(vkrt_ops_check_argmax(&lim, &am, &logits, &key, 0.8f, v, why, sizeof(why)),
              "two words for each of the 32 rows");
  key = t4(&buf_b, 0, VKRT_TYPE_I32, 2, 32, 1, 1); /* over dst */
  expect_fail(vkrt_ops_check_argmax(&lim, &am, &logits, &key, 0.8f, v, why, sizeof(why)),
              "overlap");
  /* i32 in the other ops: moved to i32 only, never summed or multiplied */
  vkrt_tensor i = t4(&buf_a, 0, VKRT_TYPE_I32, 16, 16, 1, 1), f = t4(&buf_b, 0, VKRT_TYPE_F32, 16, 16, 1, 1);
  vkrt_tensor i2 = t4(&buf_b, 0, VKRT_TYPE_I32, 16, 16, 1, 1);
  assert_true(vkrt_ops_check_copy(&lim, &i2, &i, v, why, sizeof(why)));
  expect_fail(vkrt_ops_check_copy(&lim, &f, &i, v, why, sizeof(why)), "copied to i32 only");
  expect_fail(vkrt_ops_check_transpose(&lim, &f, &i, v, why, sizeof(why)), "moved to i32 only");
  const vkrt_tensor *srcs[1] = {&i};
  struct vkrt_ops_view va[9];
  expect_fail(vkrt_ops_check_add(&lim, &i2, srcs, 1, va, why, sizeof(why)), "sums f32 or f16");
  vkrt_tensor xv = t4(&buf_b, 0, VKRT_TYPE_F32, 16, 1, 1, 1), dv = t4(&buf_b, 4096, VKRT_TYPE_F32, 16, 1, 1, 1);
  expect_fail(vkrt_ops_check_matmul(&lim, &dv, &i, &xv, v, why, sizeof(why)), "w is i32");
}

static void test_linear_split(void **state) {
  (void)state;
  /* every group is covered once, no dispatch exceeds the limits, and the overshoot of
   * the last dispatch stays below one row (keeps 32-bit indices safe) */
  const uint64_t cases[][3] = {{1, 65535, 65535}, {65536, 65535, 65535}, {1000, 7, 5},
                               {35, 7, 5}, {36, 7, 5}, {1ull << 23, 65535, 65535}};
  for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    uint64_t groups = cases[c][0], covered = 0, first = 0;
    int dispatches = 0;
    while (first < groups) {
      uint32_t x, y;
      vkrt_ops_linear_split(groups, first, (uint32_t)cases[c][1], (uint32_t)cases[c][2], &x, &y);
      assert_true(x >= 1 && x <= cases[c][1]);
      assert_true(y >= 1 && y <= cases[c][2]);
      assert_true(first + (uint64_t)x * y < groups + x);
      covered += VKRT_MIN((uint64_t)x * y, groups - first);
      first += (uint64_t)x * y;
      dispatches++;
    }
    assert_int_equal(covered, groups);
    assert_true(dispatches >= 1);
  }
}

/* Decode attention: the descriptor rules and the split planner (the peers' shapes). */
static void test_attention_check_and_plan(void **state) {
  (void)state;
  struct vkrt_ops_view v[5];
  vkrt_tensor q = t4(&buf_a, 0, VKRT_TYPE_F32, 128, 32, 1, 1);
  vkrt_tensor d = t4(&buf_a, 16384, VKRT_TYPE_F32, 128, 32, 1, 1);
  vkrt_tensor k = t4(&buf_b, 0, VKRT_TYPE_Q8_0, 128, 8, 100, 1);
  vkrt_tensor val = t4(&buf_b, 131072, VKRT_TYPE_Q8_0, 128, 8, 100, 1);
  vkrt_tensor len = t4(&buf_a, 32768, VKRT_TYPE_I32, 1, 1, 1, 1);
  assert_true(vkrt_ops_check_attention(&lim, &d, &q, &k, &val, &len, 0.125f, v, why, sizeof(why)));
  vkrt_tensor q3 = t4(&buf_a, 0, VKRT_TYPE_F32, 128, 12, 1, 1);
  vkrt_tensor d3 = t4(&buf_a, 16384, VKRT_TYPE_F32, 128, 12, 1, 1);
  vkrt_tensor k5 = t4(&buf_b, 0, VKRT_TYPE_Q8_0, 128, 5, 100, 1);
  vkrt_tensor v5 = t4(&buf_b, 131072, VKRT_TYPE_Q8_0, 128, 5, 100, 1);
  expect_fail(vkrt_ops_check_attention(&lim, &d3, &q3, &k5, &v5, &len, 0.125f, v, why, sizeof(why)),
              "n_head 12 (q ne[1]) is not a multiple of n_head_kv 5");
  vkrt_tensor kother = t4(&buf_other, 0, VKRT_TYPE_Q8_0, 128, 8, 100, 1);
  expect_fail(vkrt_ops_check_attention(&lim, &d, &q, &kother, &val, &len, 0.125f, v, why, sizeof(why)),
              "wrong device: k is on dev1");
  expect_fail(vkrt_ops_check_attention(&lim, &d, &q, &k, &val, &len, NAN, v, why, sizeof(why)),
              "scale = nan is not finite");
  expect_fail(vkrt_ops_check_attention(&lim, &d, &q, &k, &val, &len, -INFINITY, v, why,
                                       sizeof(why)),
              "scale = -inf is not finite");

  struct vkrt_attention_plan p;
  uint64_t mib16 = 16u << 20;
  /* head 128, 32 heads over 8, 32768 tokens, 512 workgroups aimed at: 4 heads a group,
   * 64 splits of 512 */
  assert_true(vkrt_ops_attention_plan(128, 32, 8, 1, 32768, 512, 0, 0, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.heads_per_group, 4);
  assert_int_equal(p.head_groups, 1);
  assert_int_equal(p.split_len, 512);
  assert_int_equal(p.splits, 64);
  assert_int_equal(p.rounds, 1);
  /* a query of L tokens in that cache: splits of max(ceil(L / 64), 32), one tile (8 rows
   * of 16 chunks a pass, 4 passes) at least */
  assert_int_equal(p.min_split, 32);
  /* head 64, 8 heads over 1, 7680 tokens: 512 groups would be splits of 15: held at one
   * tile (16 rows a pass, 2 passes) */
  assert_true(vkrt_ops_attention_plan(64, 8, 1, 1, 7680, 512, 0, 0, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.heads_per_group, 8);
  assert_int_equal(p.split_len, 32);
  assert_int_equal(p.splits, 240);
  assert_int_equal(p.min_split, 32);
  /* Llama-3-8B's heads (128, 32 over 8), 264 groups aimed at, 132 splits at most: a short
   * cache plans a tile a split, so min_split x splits covers the capacity and every query
   * is cut into tiles whatever its length (the split pass loads its rows before kv_len
   * returns); a longer one is bound by the groups aimed at (33 splits of 249), a short query
   * in it still cut in tiles. {n_ctx, splits, split_len, min_split, full_split} */
  static const uint32_t tiles[][5] = {{1024, 32, 32, 32, 1}, {8192, 33, 249, 32, 0}};
  for (unsigned i = 0; i < sizeof(tiles) / sizeof(tiles[0]); i++) {
    const uint32_t *c = tiles[i];
    assert_true(vkrt_ops_attention_plan(128, 32, 8, 1, c[0], 264, 132, 0, 0, 49152, mib16, &p,
                                        why, sizeof(why)));
    assert_int_equal(p.splits, c[1]);
    assert_int_equal(p.split_len, c[2]);
    assert_int_equal(p.min_split, c[3]);
    assert_int_equal(p.full_split, c[4]);
    assert_int_equal((uint64_t)p.min_split * p.splits >= c[0], c[4]);
  }
  /* head 256, 16 heads over 2, 20000 tokens: 256 splits of 79 */
  assert_true(vkrt_ops_attention_plan(256, 16, 2, 1, 20000, 512, 0, 0, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.split_len, 79);
  assert_int_equal(p.splits, 254);
  /* a short context: at least one token per split, a split count under the target */
  assert_true(vkrt_ops_attention_plan(64, 2, 1, 1, 10, 512, 0, 0, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.splits, 1);
  assert_int_equal(p.min_split, 10);
  /* forced: any count down to one token a split, and splits of any length (whatever the
   * query's length: min_split 1) */
  assert_true(vkrt_ops_attention_plan(128, 32, 8, 1, 32768, 512, 0, 7, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.splits, 7);
  assert_int_equal(p.split_len, 4682);
  assert_int_equal(p.min_split, 1);
  assert_true(vkrt_ops_attention_plan(64, 2, 1, 1, 100, 512, 0, 1000, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.splits, 100);
  assert_int_equal(p.split_len, 1);
  /* 12 heads per KV head: groups of 6 */
  assert_true(vkrt_ops_attention_plan(64, 24, 2, 1, 1000, 16, 0, 0, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.heads_per_group, 6);
  assert_int_equal(p.head_groups, 2);
  /* rounds: 8 queries whose partials (64 splits forced) take 1.06 MB each in a 3 MiB
   * scratch: 2 per round */
  assert_true(vkrt_ops_attention_plan(128, 32, 8, 8, 32768, 512, 0, 64, 0, 49152, 3u << 20, &p, why, sizeof(why)));
  assert_int_equal(p.splits, 64);
  assert_int_equal(p.queries_per_round, 2);
  assert_int_equal(p.rounds, 4);
  assert_int_equal(p.scratch_used, 2 * 64 * 32 * 130 * 4);
  /* row passes per tile: 4 with 4 heads a group, 2 with 8 (their sums and the rows in flight
   * within 80 registers), halved while the shared memory does not fit; forced ones kept or
   * refused */
  assert_true(vkrt_ops_attention_plan(128, 32, 8, 1, 32768, 512, 0, 0, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.unroll, 4);
  assert_true(vkrt_ops_attention_plan(64, 8, 1, 1, 7680, 512, 0, 0, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.unroll, 2);
  /* the K tile (32 rows of 9 16-byte words), queries, partials of 4 parts, 3 floats per head
   * and slot, 2 per head, the slot merge */
  assert_int_equal(p.shared_bytes, 16 * 32 * 9 + (8 * 64 + 8 * 4 * 32 + 3 * 8 * 16 + 2 * 8 + 8 * 128) * 4);
  assert_true(vkrt_ops_attention_plan(64, 8, 1, 1, 7680, 512, 0, 0, 0, 16384, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.unroll, 1);
  assert_true(p.shared_bytes <= 16384);
  assert_true(vkrt_ops_attention_plan(64, 8, 1, 1, 7680, 512, 0, 0, 8, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.unroll, 8);
  expect_fail(vkrt_ops_attention_plan(64, 8, 1, 1, 7680, 512, 0, 0, 8, 16384, mib16, &p, why, sizeof(why)),
              "with 8 row passes per tile need 30272 bytes of shared memory; the device has 16384");
  expect_fail(vkrt_ops_attention_plan(64, 8, 1, 1, 7680, 512, 0, 0, 9, 49152, mib16, &p, why, sizeof(why)),
              "9 row passes per tile; 1..8");

  /* the split pass with a row per invocation: 32-wide subgroups, 528 workgroups aimed at
   * (4 per SM of 132): head 128, 32 heads over 8: 4 heads a group, 66 splits */
  assert_true(vkrt_ops_attention_rows_plan(128, 32, 8, 1, 32768, 32, false, 528, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_false(p.full_split); /* the row kernel has no tiles to load early */
  assert_true(p.rows);
  assert_int_equal(p.subgroup, 32);
  assert_int_equal(p.wg, 128);
  assert_int_equal(p.unroll, 0);
  assert_int_equal(p.heads_per_group, 4);
  assert_int_equal(p.head_groups, 1);
  assert_int_equal(p.splits, 66);
  assert_int_equal(p.split_len, 497);
  assert_int_equal(p.min_split, 32); /* a subgroup's run: a short query's splits */
  /* the queries, a run's probabilities per subgroup, max and sum per subgroup and head */
  assert_int_equal(p.shared_bytes, 4 * (4 * 128 + 4 * (4 * 32 + 2 * 4)));
  /* the same with the queries rounded to 8 bits (the q8q kernel): 4 x 128 int8 and a scale
   * per 32 more */
  assert_true(vkrt_ops_attention_rows_plan(128, 32, 8, 1, 32768, 32, true, 528, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.heads_per_group, 4);
  assert_int_equal(p.shared_bytes, 4 * (4 * 128 + 4 * (4 * 32 + 2 * 4)) + 4 * 128 + 4 * 4 * 4);
  /* head 64, 8 heads over 1, 7680 tokens: at least one run of 32 tokens a split */
  assert_true(vkrt_ops_attention_rows_plan(64, 8, 1, 1, 7680, 32, false, 528, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.heads_per_group, 8);
  assert_int_equal(p.split_len, 32);
  assert_int_equal(p.splits, 240);
  /* head 256, 32 heads over 2: 8 heads a group (8 sums each), 2 groups per KV head */
  assert_true(vkrt_ops_attention_rows_plan(256, 32, 2, 1, 20000, 32, false, 528, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.heads_per_group, 8);
  assert_int_equal(p.head_groups, 2);
  assert_int_equal(p.splits, 132);
  /* 8-wide subgroups (lavapipe): two chunks an invocation at head 128, so 4 heads a group;
   * workgroups of 16 subgroups */
  assert_true(vkrt_ops_attention_rows_plan(128, 16, 2, 1, 1000, 8, false, 16, 0, 32768, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.heads_per_group, 4);
  assert_int_equal(p.head_groups, 2);
  assert_int_equal(p.wg, 128);
  /* shared memory short: fewer heads a group; forced splits as with the tiles */
  assert_true(vkrt_ops_attention_rows_plan(256, 16, 2, 1, 20000, 32, false, 528, 0, 4096, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.heads_per_group, 2);
  assert_true(p.shared_bytes <= 4096);
  assert_true(vkrt_ops_attention_rows_plan(128, 32, 8, 1, 32768, 32, false, 528, 7, 49152, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.splits, 7);
  /* 64-wide subgroups: one subgroup's workgroups are 128 (2 subgroups) */
  assert_true(vkrt_ops_attention_rows_plan(128, 32, 8, 1, 32768, 64, false, 528, 0, 65536, mib16, &p, why, sizeof(why)));
  assert_int_equal(p.wg, 128);
  expect_fail(vkrt_ops_attention_rows_plan(128, 32, 8, 1, 32768, 24, false, 528, 0, 49152, mib16, &p, why, sizeof(why)),
              "the row kernel needs subgroups of 4..128 invocations, a power of two (24)");
  expect_fail(vkrt_ops_attention_rows_plan(256, 2, 1, 1, 100, 32, false, 528, 0, 1024, mib16, &p, why, sizeof(why)),
              "one query head of head_dim 256 needs 1568 bytes of shared memory; the device has 1024");
  /* the H200's plan (132 compute units: 2 workgroups each aimed at, at most one split per
   * compute unit): 33 splits at head 128 over 8 KV heads (264 workgroups), 132 at head 256
   * over 2 (264 workgroups), 131 of 59 at head 64 over 1 (tiles of 32 tokens allow 240); a prompt's worth of queries
   * fills the device with one split each (no combine); a forced count passes the cap. {head_dim, n_head, n_head_kv, n_q, n_ctx, forced, split_len,
   * splits} */
  static const uint32_t h200[][8] = {{128, 32, 8, 1, 32768, 0, 993, 33},
                                     {256, 16, 2, 1, 20000, 0, 152, 132},
                                     {64, 8, 1, 1, 7680, 0, 59, 131},
                                     {128, 32, 8, 512, 32768, 0, 32768, 1},
                                     {128, 32, 8, 1, 32768, 256, 128, 256}};
  for (unsigned i = 0; i < sizeof(h200) / sizeof(h200[0]); i++) {
    const uint32_t *c = h200[i];
    assert_true(vkrt_ops_attention_plan(c[0], c[1], c[2], c[3], c[4], 264, 132, c[5], 0, 49152,
                                        mib16, &p, why, sizeof(why)));
    assert_int_equal(p.split_len, c[6]);
    assert_int_equal(p.splits, c[7]);
  }
  /* a long context plans (splits of any length) */
  assert_true(vkrt_ops_attention_plan(256, 64, 8, 1, 100000, 512, 0, 0, 0, 49152, mib16, &p, why, sizeof(why)));
  assert_true((uint64_t)p.splits * 64 * 258 * 4 <= mib16);
  /* refused: one split's partials past the scratch */
  expect_fail(vkrt_ops_attention_plan(256, 64, 8, 1, 100000, 512, 0, 0, 0, 49152, 60000, &p, why, sizeof(why)),
              "the partials of one split of 64 query heads of 256 (66048 bytes) exceed the 60000-byte");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_view_contiguous),
      cmocka_unit_test(test_view_rejects),
      cmocka_unit_test(test_view_overlapping_dst),
      cmocka_unit_test(test_copy_transpose_shapes),
      cmocka_unit_test(test_concat_shapes),
      cmocka_unit_test(test_concat_fast_path_eligibility),
      cmocka_unit_test(test_add),
      cmocka_unit_test(test_matmul_shapes),
      cmocka_unit_test(test_q6_k_views),
      cmocka_unit_test(test_decode_ops),
      cmocka_unit_test(test_linear_split),
      cmocka_unit_test(test_attention_check_and_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
