/* vkrt/vkrt_lab.h, the benches' and tests' documented window into the runtime: knobs
 * round-trip and steer the op that follows (the counters say which path ran), bad devices,
 * knobs and values are refused with a message, the matrix-vector shape round-trips and a
 * matmul under a new one is still right, GPU timers and the raw submit floors work, the
 * host-region state and knobs round-trip and refuse bad values, the chain of dependent
 * products is right in every order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/vk_test.h"
#include "vkrt/vkrt_lab.h"

static void expect_refused(vkrt_appliance *app, vkrt_status s, const char *what) {
  assert_int_equal(s, VKRT_ERROR_INVALID_ARGUMENT);
  if (!vkrt_last_error(app)[0])
    fail_msg("%s refused without a message", what);
}

static void test_knobs_and_refusals(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  int64_t v = -1;
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, 2));
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, &v));
  assert_int_equal(v, 2);
  expect_refused(app, vkrt_lab_set(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, 3), "value 3");
  expect_refused(app, vkrt_lab_set(app, 0, VKRT_LAB_KNOB_COUNT, 0), "knob");
  expect_refused(app, vkrt_lab_set(app, 99, VKRT_LAB_FORCE_MATMUL_KERNEL, 0), "device 99");
  vkrt_lab_counters c;
  expect_refused(app, vkrt_lab_counters_get(app, 99, &c), "counters of device 99");
  assert_int_equal(vkrt_lab_counters_get(NULL, 0, &c), VKRT_ERROR_INVALID_ARGUMENT);
  /* quant read patterns and preferences: every variant has one, out of range gives -1/0 */
  const int variants = vkrt_lab_variant_count(VKRT_LAB_QUANT_VARIANT);
  assert_true(variants >= VKRT_LAB_QUANT_READ_COUNT);
  for (int64_t q = 1; q <= variants; q++)
    assert_in_range(vkrt_lab_quant_read_of(q), 0, VKRT_LAB_QUANT_READ_COUNT - 1);
  assert_int_equal(vkrt_lab_quant_read_of(0), -1);
  assert_int_equal(vkrt_lab_quant_read_of(variants + 1), -1);
  assert_int_equal(vkrt_lab_quant_read_of(1), VKRT_LAB_QUANT_READ_WORDS);
  if (IS_ENABLED(CONFIG_VKRT_KERNEL_QUANT))
    for (int r = 0; r < VKRT_LAB_QUANT_READ_COUNT - 1; r++) /* q8x is not in the order */
      assert_in_range(vkrt_lab_quant_preference(VKRT_TYPE_Q4_K, r), 1, variants);
  assert_int_equal(vkrt_lab_quant_preference(VKRT_TYPE_F32, 0), 0);
  assert_int_equal(vkrt_lab_quant_preference(VKRT_TYPE_Q8_0, VKRT_LAB_QUANT_READ_COUNT - 1), 0);
  assert_int_equal(vkrt_lab_quant_preference(VKRT_TYPE_Q8_0, -1), 0);
  /* by text (the tools' --lab): a knob, a tile slot, and what is neither */
  vkt_check(app, vkrt_lab_set_text(app, 0, "FORCE_matmul_kernel=1"));
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, &v));
  assert_int_equal(v, 1);
  vkrt_lab_matmul_tile keep_tile, tile;
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_PORTABLE_LARGE, &keep_tile));
  vkt_check(app, vkrt_lab_set_text(app, 0, "tile_portable_large=128,64,32,4,64,1,4"));
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_PORTABLE_LARGE, &tile));
  assert_true(tile.wg == 128 && tile.bm == 64 && tile.bn == 32 && tile.rm == 4 && tile.bk == 64 &&
              tile.stages == 1 && tile.order == 4);
  vkt_check(app, vkrt_lab_set_text(app, 0, "TILE_PORTABLE_LARGE=256,64,64,4"));
  vkt_check(app, vkrt_lab_matmul_tile_get(app, 0, VKRT_LAB_TILE_PORTABLE_LARGE, &tile));
  assert_true(tile.wg == 256 && tile.bm == 64 && tile.bn == 64 && tile.rm == 4 && tile.bk == 32 &&
              tile.stages == 1 && tile.order == 0);
  expect_refused(app, vkrt_lab_set_text(app, 0, "tile_portable_large=256,64,64"), "wg,bm,bn,rm");
  expect_refused(app, vkrt_lab_set_text(app, 0, "tile_portable_large=256,64,64,4,"), "wg,bm,bn,rm");
  expect_refused(app, vkrt_lab_set_text(app, 0, "tile_portable_large=256,64,x,4"), "wg,bm,bn,rm");
  expect_refused(app, vkrt_lab_set_text(app, 0, "tile_portable_large=256,64,64,3"), "tile");
  vkrt_lab_matvec keep_mv, mv;
  vkt_check(app, vkrt_lab_matvec_get(app, 0, VKRT_TYPE_F16, &keep_mv));
  vkt_check(app, vkrt_lab_set_text(app, 0, "matvec_f16=64,4,2"));
  vkt_check(app, vkrt_lab_matvec_get(app, 0, VKRT_TYPE_F16, &mv));
  assert_true(mv.wg == 64 && mv.rows == 4 && mv.unroll == 2 && mv.blocks == 1);
  vkt_check(app, vkrt_lab_set_text(app, 0, "MATVEC_F16=128,2,1,3"));
  vkt_check(app, vkrt_lab_matvec_get(app, 0, VKRT_TYPE_F16, &mv));
  assert_true(mv.wg == 128 && mv.rows == 2 && mv.unroll == 1 && mv.blocks == 3);
  expect_refused(app, vkrt_lab_set_text(app, 0, "matvec_f16=64,4"), "wg,rows,unroll");
  expect_refused(app, vkrt_lab_set_text(app, 0, "matvec_f16=64,4,2,1,1"), "wg,rows,unroll");
  expect_refused(app, vkrt_lab_set_text(app, 0, "matvec_f32=64,-4,2"), "wg,rows,unroll");
  expect_refused(app, vkrt_lab_set_text(app, 0, "matvec_f32=64,0,2"), "every field >= 1");
  vkt_check(app, vkrt_lab_matvec_set(app, 0, VKRT_TYPE_F16, &keep_mv));
  expect_refused(app, vkrt_lab_set_text(app, 0, "force_matmul_kernel=one"), "whole number");
  expect_refused(app, vkrt_lab_set_text(app, 0, "no_such_knob=1"), "matvec_<f32|f16>");
  vkt_check(app, vkrt_lab_matmul_tile_set(app, 0, VKRT_LAB_TILE_PORTABLE_LARGE, &keep_tile));
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, 0));
  expect_refused(app, vkrt_lab_limits_set(app, 0, 0, false, 1000), "binding range 1000");
  expect_refused(app, vkrt_lab_limits_set(app, 0, 0, false, 4104), "binding range 4104");
  expect_refused(app, vkrt_lab_limits_set(app, 99, 0, false, 0), "limits of device 99");
  vkt_check(app, vkrt_lab_limits_set(app, 0, 2, false, 4096));
  vkt_check(app, vkrt_lab_limits_set(app, 0, 0, false, 0));
  vkrt_lab_matvec m = {0};
  expect_refused(app, vkrt_lab_matvec_set(app, 0, VKRT_TYPE_F32, &m), "matvec shape of zeros");

  if (IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL)) {
    /* forced tiled, then forced matrix-vector with a new shape: the counters follow, and the
     * results match a CPU reference */
    enum { K = 96, N = 40 };
    static float w[K * N], x[K], y[N];
    uint64_t seed = vkt_seed(0);
    vkt_fill_random_f32(w, K * N, -1, 1, &seed);
    vkt_fill_random_f32(x, K, -1, 1, &seed);
    vkrt_buffer *wb, *xb, *yb;
    vkt_check(app, vkrt_buffer_create(app, 0, sizeof(w), VKRT_BUFFER_DEVICE_LOCAL, &wb));
    vkt_check(app, vkrt_buffer_create(app, 0, sizeof(x), VKRT_BUFFER_DEVICE_LOCAL, &xb));
    vkt_check(app, vkrt_buffer_create(app, 0, sizeof(y), VKRT_BUFFER_DEVICE_LOCAL, &yb));
    vkt_check(app, vkrt_upload(wb, 0, w, sizeof(w)));
    vkt_check(app, vkrt_upload(xb, 0, x, sizeof(x)));
    vkrt_tensor wt = vkrt_tensor_contiguous(wb, 0, VKRT_TYPE_F32, K, N, 1, 1);
    vkrt_tensor xt = vkrt_tensor_contiguous(xb, 0, VKRT_TYPE_F32, K, 1, 1, 1);
    vkrt_tensor yt = vkrt_tensor_contiguous(yb, 0, VKRT_TYPE_F32, N, 1, 1, 1);
    vkrt_lab_matvec keep, shape = {.wg = 64, .rows = 1, .unroll = 1, .blocks = 1};
    vkt_check(app, vkrt_lab_matvec_get(app, 0, VKRT_TYPE_F32, &keep));
    for (int force = 2; force >= 1; force--) {
      vkrt_lab_counters before, after;
      vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, force));
      if (force == 1)
        vkt_check(app, vkrt_lab_matvec_set(app, 0, VKRT_TYPE_F32, &shape));
      vkt_check(app, vkrt_lab_counters_get(app, 0, &before));
      float poison[N];
      vkt_poison(poison, sizeof(poison));
      vkt_check(app, vkrt_upload(yb, 0, poison, sizeof(poison)));
      vkt_check(app, vkrt_op_matmul(&yt, &wt, &xt));
      vkt_check(app, vkrt_finish(app, 0));
      vkt_check(app, vkrt_lab_counters_get(app, 0, &after));
      assert_int_equal(after.matmul_tiled - before.matmul_tiled, force == 2 ? 1 : 0);
      assert_int_equal(after.matvec - before.matvec, force == 1 ? 1 : 0);
      vkt_check(app, vkrt_download(y, yb, 0, sizeof(y)));
      for (int n = 0; n < N; n++) {
        double want = 0;
        for (int k = 0; k < K; k++)
          want += (double)w[k + K * n] * x[k];
        if (!(fabs(y[n] - want) <= 1e-4 * (1 + fabs(want))))
          fail_msg("force %d: y[%d] = %g, expected %g", force, n, (double)y[n], want);
      }
    }
    vkrt_lab_matvec got;
    vkt_check(app, vkrt_lab_matvec_get(app, 0, VKRT_TYPE_F32, &got));
    assert_memory_equal(&got, &shape, sizeof(got));
    /* a set shape serves every M (the M > 1 table too), as vkrt-probe --json shows */
    static char text[1 << 16];
    vkrt_describe(app, true, text, sizeof(text));
    assert_non_null(strstr(text, "\"matvec_f32\": {\"wg\": 64, \"rows\": 1, \"unroll\": 1, \"blocks\": 1}, "
                                 "\"matvec_f16_cols\""));
    assert_non_null(strstr(text, "\"matvec_f32_cols\": {\"wg\": 64, \"rows\": 1, \"unroll\": 1, \"blocks\": 1}"));
    vkt_check(app, vkrt_lab_matvec_set(app, 0, VKRT_TYPE_F32, &keep));
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_FORCE_MATMUL_KERNEL, 0));
    vkrt_buffer_destroy(wb);
    vkrt_buffer_destroy(xb);
    vkrt_buffer_destroy(yb);
  }
  vkt_close(app);
}

static void test_timer_and_raw_floors(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  vkrt_buffer *b;
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, VKRT_BUFFER_DEVICE_LOCAL, &b));
  vkrt_lab_timer *t = NULL;
  vkrt_status s = vkrt_lab_timer_create(app, 0, &t);
  if (s == VKRT_OK) {
    double sec = -1;
    vkt_check(app, vkrt_lab_timer_begin(t));
    vkt_check(app, vkrt_cmd_fill(b, 0, 4096, 0x12345678u));
    vkt_check(app, vkrt_lab_timer_end(t, true));
    vkt_check(app, vkrt_finish(app, 0));
    vkt_check(app, vkrt_lab_timer_seconds(t, &sec));
    assert_true(sec >= 0 && sec < 10);
    vkrt_lab_timer_destroy(t);
  } else {
    assert_int_equal(s, VKRT_ERROR_UNSUPPORTED);
  }
  vkrt_lab_raw *raw = NULL;
  vkt_check(app, vkrt_lab_raw_create(b, &raw));
  for (int k = 0; k < VKRT_LAB_RAW_KIND_COUNT; k++)
    vkt_check(app, vkrt_lab_raw_round_trip(raw, (vkrt_lab_raw_kind)k));
  vkrt_lab_raw_destroy(raw);
  uint32_t word = 0;
  vkt_check(app, vkrt_download(&word, b, 0, 4)); /* FILL_SPIN filled the first word */
  print_message("vkrt-test: raw fill target word 0x%08x\n", word);
  vkrt_buffer_destroy(b);
  /* hand-over floors: a host relay between two devices always works; the others say why
   * they cannot run here (no transfer queue of its own, no semaphore FD functions) */
  if (vkrt_device_count(app) > 1) {
    vkrt_lab_handover *h;
    vkt_check(app, vkrt_lab_handover_create(app, 0, 1, false, &h));
    for (int i = 0; i < 3; i++)
      vkt_check(app, vkrt_lab_handover_round_trip(h));
    vkrt_lab_handover_destroy(h);
  }
  vkrt_lab_device td;
  vkt_check(app, vkrt_lab_device_get(app, 0, &td));
  vkrt_device_info info;
  vkt_check(app, vkrt_device_info_get(app, 0, &info));
  for (int gpu = 0; gpu < 2; gpu++) {
    vkrt_lab_handover *h = NULL;
    vkrt_status hs = vkrt_lab_handover_create(app, 0, 0, gpu, &h);
    if (info.has_transfer_queue) {
      vkt_check(app, hs);
      vkt_check(app, vkrt_lab_handover_round_trip(h));
    } else {
      assert_int_equal(hs, VKRT_ERROR_UNAVAILABLE);
      assert_non_null(strstr(vkrt_last_error(app), "no transfer queue"));
    }
    vkrt_lab_handover_destroy(h);
  }
  vkt_close(app);
}

/* A submitted command buffer closes with the barrier to the host only when a command in it
 * wrote a mapped buffer (vkrt_stream_next); fills, copies and ops write exactly their range,
 * whichever barrier closed them. */
static void test_host_barrier_only_for_mapped_writes(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  enum { SIZE = 4096 };
  static uint8_t expect[SIZE], got[SIZE];
  uint64_t seed = vkt_seed(0);
  vkrt_buffer *dev_buf, *dev_buf2, *host_buf;
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &dev_buf));
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &dev_buf2));
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_HOST_VISIBLE, &host_buf));
  void *mapped;
  vkt_check(app, vkrt_buffer_map(host_buf, &mapped));
  vkrt_lab_stream before, after;
  /* (what is recorded, writes a mapped buffer) */
  for (int step = 0; step < 6; step++) {
    vkt_fill_random(expect, SIZE, &seed);
    vkt_check(app, vkrt_upload(dev_buf, 0, expect, SIZE));
    vkt_poison(mapped, SIZE);
    memcpy(got, mapped, SIZE); /* the poison, for the steps that must not touch it */
    uint32_t value = (uint32_t)vkrt_xorshift(&seed) | 1u;
    /* a fill at an offset: 260 bytes (no whole number of 16-byte words) on step 0, 256 on 1 */
    const uint64_t fill_offset = 4u * (uint64_t)(vkrt_xorshift(&seed) % 64), fill_size = step % 2 ? 256 : 260;
    vkt_check(app, vkrt_lab_stream_get(app, 0, &before));
    bool host = false;
    switch (step) {
    case 0: vkt_check(app, vkrt_cmd_fill(dev_buf, fill_offset, fill_size, value)); break;
    case 1: vkt_check(app, vkrt_cmd_fill(host_buf, fill_offset, fill_size, value)); host = true; break;
    case 2: vkt_check(app, vkrt_cmd_copy_buffer(dev_buf2, 0, dev_buf, 0, SIZE)); break;
    case 3: vkt_check(app, vkrt_cmd_copy_buffer(host_buf, 0, dev_buf, 0, SIZE)); host = true; break;
    case 4: {
      vkrt_tensor d = vkrt_tensor_contiguous(dev_buf2, 0, VKRT_TYPE_F32, SIZE / 4, 1, 1, 1);
      vkrt_tensor s = vkrt_tensor_contiguous(dev_buf, 0, VKRT_TYPE_F32, SIZE / 4, 1, 1, 1);
      vkt_check(app, vkrt_op_copy(&d, &s));
      break;
    }
    case 5: { /* an op to the mapped buffer after a device-only command: one host close */
      vkrt_tensor d = vkrt_tensor_contiguous(host_buf, 0, VKRT_TYPE_F32, SIZE / 4, 1, 1, 1);
      vkrt_tensor s = vkrt_tensor_contiguous(dev_buf, 0, VKRT_TYPE_F32, SIZE / 4, 1, 1, 1);
      vkt_check(app, vkrt_cmd_fill(dev_buf2, 0, SIZE, value));
      vkt_check(app, vkrt_op_copy(&d, &s));
      host = true;
      break;
    }
    }
    vkt_check(app, vkrt_finish(app, 0));
    vkt_check(app, vkrt_lab_stream_get(app, 0, &after));
    assert_int_equal(after.submitted, before.submitted + 1);
    /* the submit began the next buffer (its slot had retired: every step waits) */
    assert_int_equal(after.begun_ahead, before.begun_ahead + 1);
    if (after.host_closes != before.host_closes + (host ? 1 : 0))
      fail_msg("step %d: %llu host-closing barriers, want %d", step,
               (unsigned long long)(after.host_closes - before.host_closes), host ? 1 : 0);
    /* the bytes: what the device buffer or the mapped one must hold now */
    uint8_t *want = step == 1 ? got : expect;
    if (step <= 1)
      for (uint64_t i = fill_offset; i < fill_offset + fill_size; i++)
        want[i] = (uint8_t)(value >> (8 * (i % 4)));
    uint8_t out[SIZE];
    if (step == 0)
      vkt_check(app, vkrt_download(out, dev_buf, 0, SIZE));
    else if (step == 2 || step == 4)
      vkt_check(app, vkrt_download(out, dev_buf2, 0, SIZE));
    else
      memcpy(out, mapped, SIZE);
    assert_memory_equal(out, want, SIZE);
  }
  vkrt_lab_stream_get(app, 0, &before);
  uint64_t ticket;
  vkt_check(app, vkrt_submit(app, 0, &ticket)); /* empty: the buffer begun ahead stays */
  vkt_check(app, vkrt_wait(app, 0, ticket, UINT64_MAX));
  vkt_check(app, vkrt_lab_stream_get(app, 0, &after));
  assert_int_equal(after.host_closes, before.host_closes);
  assert_int_equal(after.begun_ahead, before.begun_ahead);
  /* ... and takes the next op, which still runs after the empty submit's */
  vkt_fill_random(expect, SIZE, &seed);
  vkt_check(app, vkrt_upload(dev_buf, 0, expect, SIZE));
  vkt_check(app, vkrt_cmd_copy_buffer(host_buf, 0, dev_buf, 0, SIZE));
  vkt_check(app, vkrt_finish(app, 0));
  assert_memory_equal(mapped, expect, SIZE);
  expect_refused(app, vkrt_lab_stream_get(app, 0, NULL), "NULL stream counters");
  expect_refused(app, vkrt_lab_stream_get(app, 99, &after), "stream of device 99");
  vkrt_buffer_destroy(dev_buf);
  vkrt_buffer_destroy(dev_buf2);
  vkrt_buffer_destroy(host_buf);
  vkt_close(app);
}

/* A command gets a barrier before it only for a hazard against the work recorded since the
 * last barrier (vkrt_stream_next): a read of what it wrote, a write of what it read or
 * wrote. Independent ops, copies and fills run without one, and every result is still the
 * one program order gives. */
static void test_barrier_only_for_hazards(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  enum { N = 1024, HALF = N * 4, SIZE = 2 * HALF };
  static uint8_t a_host[SIZE], b_want[SIZE], c_want[SIZE], got[SIZE];
  uint64_t seed = vkt_seed(0);
  vkrt_buffer *a, *b, *c;
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &a));
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &b));
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &c));
  vkt_fill_random(a_host, SIZE, &seed);
  vkt_check(app, vkrt_upload(a, 0, a_host, SIZE));
  vkt_poison(got, SIZE);
  vkt_check(app, vkrt_upload(b, 0, got, SIZE));
  vkt_check(app, vkrt_upload(c, 0, got, SIZE));
  uint32_t v1 = (uint32_t)vkrt_xorshift(&seed) | 1u, v2 = (uint32_t)vkrt_xorshift(&seed) | 2u;
  vkt_check(app, vkrt_finish(app, 0)); /* the next command starts a buffer */
  /* the counts below are those of one buffer: no piece submitted by the stream between */
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_STREAM_FLUSH_OPS, 0));
  vkrt_lab_stream before, after;
  vkt_check(app, vkrt_lab_stream_get(app, 0, &before));
  vkrt_tensor a_lo = vkrt_tensor_contiguous(a, 0, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_tensor a_hi = vkrt_tensor_contiguous(a, HALF, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_tensor b_lo = vkrt_tensor_contiguous(b, 0, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_tensor b_hi = vkrt_tensor_contiguous(b, HALF, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_tensor c_lo = vkrt_tensor_contiguous(c, 0, VKRT_TYPE_F32, N, 1, 1, 1);
  vkt_check(app, vkrt_op_copy(&b_lo, &a_lo));                /* first of its buffer */
  vkt_check(app, vkrt_op_copy(&b_hi, &a_hi));                /* other half of b: none */
  vkt_check(app, vkrt_op_copy(&c_lo, &b_lo));                /* reads what 1 wrote: barrier */
  vkt_check(app, vkrt_cmd_copy_buffer(c, HALF, a, 0, HALF)); /* other half of c: none */
  vkt_check(app, vkrt_cmd_copy_buffer(b, 0, a, HALF, HALF)); /* writes what 3 read: barrier */
  vkt_check(app, vkrt_cmd_fill(c, 0, 64, v1));               /* c synced by that one: none */
  vkt_check(app, vkrt_cmd_fill(c, 32, 64, v2));              /* overlaps the fill: barrier */
  vkt_check(app, vkrt_finish(app, 0));
  vkt_check(app, vkrt_lab_stream_get(app, 0, &after));
  if (after.barriers - before.barriers != 3 || after.barriers_elided - before.barriers_elided != 3)
    fail_msg("%llu barriers and %llu elided, want 3 and 3",
             (unsigned long long)(after.barriers - before.barriers),
             (unsigned long long)(after.barriers_elided - before.barriers_elided));
  memcpy(b_want, a_host + HALF, HALF); /* step 5 over step 1 */
  memcpy(b_want + HALF, a_host + HALF, HALF);
  memcpy(c_want, a_host, HALF); /* step 3 read step 1's b */
  memcpy(c_want + HALF, a_host, HALF);
  for (int i = 0; i < 96; i++)
    c_want[i] = (uint8_t)((i < 32 ? v1 : v2) >> (8 * (i % 4)));
  vkt_check(app, vkrt_download(got, b, 0, SIZE));
  assert_memory_equal(got, b_want, SIZE);
  vkt_check(app, vkrt_download(got, c, 0, SIZE));
  assert_memory_equal(got, c_want, SIZE);
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
  vkrt_buffer_destroy(c);
  vkt_close(app);
}

/* A barrier waits for the stages the commands since the one before used (the default,
 * VKRT_LAB_BARRIER_STAGES 0): between dispatches the compute stage alone; after a fill (a
 * transfer) compute and transfer, so the dispatch reading the filled bytes sees them. With
 * the knob at 1 every barrier names both. The values are program order's either way (and
 * the sync-validation pass checks that each barrier covers its hazard). */
static void test_barrier_waits_for_stages_used(void **state) {
  (void)state;
  enum { N = 1000 };
  const float eps = 1e-6f;
  for (int full = 0; full <= 1; full++) {
    vkrt_options o;
    vkt_options(&o);
    vkrt_appliance *app = vkt_open(&o);
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_STREAM_FLUSH_OPS, 0)); /* one buffer */
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_BARRIER_STAGES, full));
    int64_t got_knob = -1;
    vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_BARRIER_STAGES, &got_knob));
    assert_int_equal(got_knob, full);
    uint64_t seed = vkt_seed((uint64_t)full);
    static float a_host[N], got[N];
    vkt_fill_random_f32(a_host, N, -2.0f, 2.0f, &seed);
    uint32_t bits = 0x3f000000u | (uint32_t)(vkrt_xorshift(&seed) & 0xffffu); /* 0.5 + a bit */
    float fill;
    memcpy(&fill, &bits, 4);
    vkrt_buffer *buf[5];
    for (int i = 0; i < 5; i++) {
      vkt_check(app, vkrt_buffer_create(app, 0, N * 4, VKRT_BUFFER_DEVICE_LOCAL, &buf[i]));
      vkt_poison(got, sizeof(got));
      vkt_check(app, vkrt_upload(buf[i], 0, i ? got : a_host, N * 4));
    }
    vkrt_tensor t[5];
    for (int i = 0; i < 5; i++)
      t[i] = vkrt_tensor_contiguous(buf[i], 0, VKRT_TYPE_F32, N, 1, 1, 1);
    vkt_check(app, vkrt_finish(app, 0)); /* the next command starts a buffer */
    vkrt_lab_stream before, after;
    vkt_check(app, vkrt_lab_stream_get(app, 0, &before));
    const vkrt_tensor *sum[2] = {&t[2], &t[3]};
    vkt_check(app, vkrt_op_rms_norm(&t[1], &t[0], NULL, eps)); /* first of its buffer */
    vkt_check(app, vkrt_op_rms_norm(&t[2], &t[1], NULL, eps)); /* after a dispatch: compute */
    vkt_check(app, vkrt_cmd_fill(buf[3], 0, N * 4, bits));    /* independent: none */
    vkt_check(app, vkrt_op_add(&t[4], sum, 2));                 /* after the fill: both */
    vkt_check(app, vkrt_op_rms_norm(&t[1], &t[4], NULL, eps)); /* after the add: compute */
    vkt_check(app, vkrt_finish(app, 0));
    vkt_check(app, vkrt_lab_stream_get(app, 0, &after));
    uint64_t barriers = after.barriers - before.barriers;
    uint64_t compute = after.barriers_compute - before.barriers_compute;
    if (barriers != 3 || compute != (full ? 0u : 2u))
      fail_msg("BARRIER_STAGES %d: %llu barriers, %llu of them compute alone; want 3 and %d", full,
               (unsigned long long)barriers, (unsigned long long)compute, full ? 0 : 2);
    /* the float64 chain: rms_norm twice, + fill, rms_norm */
    static double x[N];
    for (int i = 0; i < N; i++)
      x[i] = a_host[i];
    for (int step = 0; step < 3; step++) {
      if (step == 2)
        for (int i = 0; i < N; i++)
          x[i] += fill;
      double ss = 0;
      for (int i = 0; i < N; i++)
        ss += x[i] * x[i];
      double r = 1.0 / sqrt(ss / N + eps);
      for (int i = 0; i < N; i++)
        x[i] *= r;
    }
    vkt_check(app, vkrt_download(got, buf[1], 0, N * 4));
    for (int i = 0; i < N; i++)
      if (fabs(got[i] - x[i]) > 1e-5 * (1 + fabs(x[i])))
        fail_msg("BARRIER_STAGES %d: element %d is %.9g, want %.9g", full, i, got[i], x[i]);
    for (int i = 0; i < 5; i++)
      vkrt_buffer_destroy(buf[i]);
    vkt_close(app);
  }
}

/* Barriers and elisions the stream counted while `record` ran (from a fresh buffer). */
struct barrier_count {
  uint64_t barriers, elided;
};

static struct barrier_count barrier_delta(const vkrt_lab_stream *before,
                                          const vkrt_lab_stream *after) {
  return (struct barrier_count){after->barriers - before->barriers,
                                after->barriers_elided - before->barriers_elided};
}

/* A write overlapping an earlier one from either side needs a barrier: one that starts
 * before it and ends inside, one that starts inside and ends after, one that contains it;
 * ranges that only touch need none. The bytes are those of program order. */
static void test_hazard_overlap_both_sides(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  /* one command buffer: the stream submits no piece by itself in between */
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_STREAM_FLUSH_OPS, 0));
  enum { SIZE = 256 };
  uint64_t seed = vkt_seed(0);
  vkrt_buffer *c;
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &c));
  static const struct { uint32_t lo, hi; int barrier; } writes[] = {
      {32, 96, 0},   /* first of its buffer */
      {0, 64, 1},    /* starts before [32, 96), ends inside: barrier */
      {48, 128, 1},  /* starts inside [0, 64), ends after: barrier */
      {128, 160, 0}, /* touches [48, 128) at 128: none */
      {160, 192, 0}, /* touches [128, 160): none */
      {152, 168, 1}, /* ends inside one, starts inside the other: barrier */
      {200, 204, 0}, /* apart: none */
      {196, 208, 1}, /* contains [200, 204): barrier */
  };
  uint32_t v[VKT_ARRAY_SIZE(writes)];
  for (size_t i = 0; i < VKT_ARRAY_SIZE(writes); i++)
    v[i] = (uint32_t)vkrt_xorshift(&seed) | 1u;
  vkt_check(app, vkrt_cmd_fill(c, 0, SIZE, 0));
  vkt_check(app, vkrt_finish(app, 0));
  vkrt_lab_stream before, after;
  vkt_check(app, vkrt_lab_stream_get(app, 0, &before));
  uint8_t want[SIZE] = {0}, got[SIZE];
  uint64_t want_barriers = 0;
  for (size_t i = 0; i < VKT_ARRAY_SIZE(writes); i++) {
    vkt_check(app, vkrt_cmd_fill(c, writes[i].lo, writes[i].hi - writes[i].lo, v[i]));
    for (uint32_t b = writes[i].lo; b < writes[i].hi; b++)
      want[b] = (uint8_t)(v[i] >> (8 * (b % 4)));
    want_barriers += (uint64_t)writes[i].barrier;
  }
  vkt_check(app, vkrt_finish(app, 0));
  vkt_check(app, vkrt_lab_stream_get(app, 0, &after));
  struct barrier_count n = barrier_delta(&before, &after);
  if (n.barriers != want_barriers || n.elided != VKT_ARRAY_SIZE(writes) - 1 - want_barriers)
    fail_msg("%llu barriers and %llu elided, want %llu and %llu", (unsigned long long)n.barriers,
             (unsigned long long)n.elided, (unsigned long long)want_barriers,
             (unsigned long long)(VKT_ARRAY_SIZE(writes) - 1 - want_barriers));
  vkt_check(app, vkrt_download(got, c, 0, SIZE));
  assert_memory_equal(got, want, SIZE);
  vkrt_buffer_destroy(c);
  vkt_close(app);
}

/* The stream tracks 32 ranges between barriers: a 33rd independent command gets a barrier
 * (the list is full; nothing is dropped), and a read of what that command wrote then gets
 * its own, because its range is tracked behind the new barrier. */
static void test_hazard_list_full_forces_barrier(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  /* one command buffer: the stream submits no piece by itself in between */
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_STREAM_FLUSH_OPS, 0));
  enum { TRACKED = 32, SLOT = 64, SIZE = (TRACKED + 1) * SLOT };
  uint64_t seed = vkt_seed(0);
  vkrt_buffer *a, *b;
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &a));
  vkt_check(app, vkrt_buffer_create(app, 0, SLOT, VKRT_BUFFER_DEVICE_LOCAL, &b));
  static uint32_t want[SIZE / 4];
  uint32_t got[SIZE / 4];
  vkt_poison(got, SLOT);
  vkt_check(app, vkrt_upload(b, 0, got, SLOT));
  vkt_check(app, vkrt_finish(app, 0));
  vkrt_lab_stream before, mid, after;
  vkt_check(app, vkrt_lab_stream_get(app, 0, &before));
  for (uint32_t i = 0; i <= TRACKED; i++) { /* 33 fills of disjoint slots */
    uint32_t value = (uint32_t)vkrt_xorshift(&seed) | 1u;
    vkt_check(app, vkrt_cmd_fill(a, i * SLOT, SLOT, value));
    for (uint32_t w = 0; w < SLOT / 4; w++)
      want[i * SLOT / 4 + w] = value;
  }
  vkt_check(app, vkrt_lab_stream_get(app, 0, &mid));
  vkt_check(app, vkrt_cmd_copy_buffer(b, 0, a, TRACKED * SLOT, SLOT)); /* reads fill 33 */
  vkt_check(app, vkrt_finish(app, 0));
  vkt_check(app, vkrt_lab_stream_get(app, 0, &after));
  struct barrier_count fills = barrier_delta(&before, &mid), copy = barrier_delta(&mid, &after);
  if (fills.barriers != 1 || fills.elided != TRACKED - 1)
    fail_msg("33 independent fills: %llu barriers and %llu elided, want 1 (the 33rd: the "
             "list of %d ranges is full) and %d", (unsigned long long)fills.barriers,
             (unsigned long long)fills.elided, TRACKED, TRACKED - 1);
  if (copy.barriers != 1)
    fail_msg("a copy reading the 33rd fill's range: %llu barriers, want 1",
             (unsigned long long)copy.barriers);
  vkt_check(app, vkrt_download(got, a, 0, SIZE));
  assert_memory_equal(got, want, SIZE);
  vkt_check(app, vkrt_download(got, b, 0, SLOT));
  assert_memory_equal(got, want + TRACKED * SLOT / 4, SLOT);
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
  vkt_close(app);
}

/* Byte copies of 1 to 47 bytes at every offset modulo 16, with source and destination
 * offsets agreeing or not modulo 16, on the compute path (its vkCmdCopyBuffer head and tail
 * are then 1..15 bytes, down to a single byte) and the transfer path, and through
 * vkrt_cmd_copy_buffer: every byte lands and nothing next to it changes. */
static void test_short_byte_copies(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  static const uint32_t lengths[] = {1, 2, 3, 15, 16, 17, 31, 33, 47};
  enum { SLOT = 128, CASES = 16 * 2 * VKT_ARRAY_SIZE(lengths), SIZE = CASES * SLOT };
  uint64_t seed = vkt_seed(0);
  vkrt_buffer *src, *dst;
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &src));
  vkt_check(app, vkrt_buffer_create(app, 0, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &dst));
  static uint8_t in[SIZE], want[SIZE], got[SIZE];
  vkt_fill_random(in, SIZE, &seed);
  vkt_check(app, vkrt_upload(src, 0, in, SIZE));
  for (int path = 0; path < 3; path++) { /* compute, transfer, vkrt_cmd_copy_buffer */
    vkt_poison(want, SIZE);
    vkt_check(app, vkrt_upload(dst, 0, want, SIZE));
    uint32_t c = 0;
    for (uint32_t off = 0; off < 16; off++)
      for (uint32_t skew = 0; skew < 2; skew++)
        for (size_t l = 0; l < VKT_ARRAY_SIZE(lengths); l++, c++) {
          /* source slot from the far end, so a copy from the wrong slot shows */
          uint64_t so = (uint64_t)(CASES - 1 - c) * SLOT + 16 + off,
                   d_o = (uint64_t)c * SLOT + 16 + (off + skew * 5) % 16;
          vkrt_status s =
              path == 2 ? vkrt_cmd_copy_buffer(dst, d_o, src, so, lengths[l])
                        : vkrt_lab_cmd_copy_bytes(dst, d_o, src, so, lengths[l],
                                                  path == 0 ? VKRT_LAB_COPY_COMPUTE
                                                               : VKRT_LAB_COPY_TRANSFER);
          vkt_check(app, s);
          memcpy(want + d_o, in + so, lengths[l]);
        }
    vkt_check(app, vkrt_finish(app, 0));
    vkt_check(app, vkrt_download(got, dst, 0, SIZE));
    for (uint32_t i = 0; i < SIZE; i++)
      if (got[i] != want[i])
        fail_msg("%s path: byte %u (slot %u, +%u) is 0x%02x, want 0x%02x",
                 path == 0 ? "compute" : path == 1 ? "transfer" : "vkrt_cmd_copy_buffer", i,
                 i / SLOT, i % SLOT, got[i], want[i]);
  }
  vkrt_buffer_destroy(src);
  vkrt_buffer_destroy(dst);
  vkt_close(app);
}

/* Host-region state and knobs: the budget round-trips, a registration shows in the counts,
 * the import alignment is refused unless a power of two at least the device's, the import
 * part of the description stands alone. */
static void test_import(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  vkrt_lab_import t;
  vkt_check(app, vkrt_lab_import_get(app, &t));
  assert_int_equal(t.regions, 0);
  assert_int_equal(t.live_chunks, 0);
  vkt_check(app, vkrt_lab_prestage_budget_set(app, 12345));
  vkt_check(app, vkrt_lab_import_get(app, &t));
  assert_int_equal(t.prestage_budget, 12345);
  expect_refused(app, vkrt_lab_import_get(app, NULL), "NULL import state");
  assert_int_equal(vkrt_lab_prestage_budget_set(NULL, 1), VKRT_ERROR_INVALID_ARGUMENT);

  static _Alignas(4096) unsigned char mem[16384];
  vkt_check(app, vkrt_host_register(app, mem, sizeof(mem), NULL, NULL, NULL));
  vkt_check(app, vkrt_lab_import_get(app, &t));
  assert_int_equal(t.regions, 1);
  char text[8192];
  size_t n = vkrt_lab_import_describe(app, false, text, sizeof(text));
  assert_true(n > 0 && n < sizeof(text));
  assert_non_null(strstr(text, "vkrt: dev0 import: "));
  assert_non_null(strstr(text, "vkrt: region ["));
  assert_int_equal(vkrt_lab_import_describe(app, false, NULL, 0), n);
  vkt_check(app, vkrt_host_unregister(app, mem));
  vkt_check(app, vkrt_lab_import_get(app, &t));
  assert_int_equal(t.regions, 0);

  vkrt_lab_device d;
  vkt_check(app, vkrt_lab_device_get(app, 0, &d));
  if (d.min_imported_host_pointer_alignment) {
    const uint64_t a = d.min_imported_host_pointer_alignment;
    expect_refused(app, vkrt_lab_import_alignment_set(app, 0, 3 * a), "alignment 3a");
    if (a > 1)
      expect_refused(app, vkrt_lab_import_alignment_set(app, 0, a / 2), "alignment a/2");
    expect_refused(app, vkrt_lab_import_alignment_set(app, 0, 0), "alignment 0");
    vkt_check(app, vkrt_lab_import_alignment_set(app, 0, 4 * a));
    vkt_check(app, vkrt_lab_device_get(app, 0, &d));
    assert_int_equal(d.min_imported_host_pointer_alignment, 4 * a);
  }
  expect_refused(app, vkrt_lab_import_alignment_set(app, 99, 65536), "alignment device 99");
  vkt_close(app);
}

/* Overlap: the stream submits pieces by itself while recording goes on, and program order
 * holds across them. A chain of dependent adds (a += b, b += a, with a copy b = a now and
 * then) gives a result that changes if any two steps ran in another order; it is compared
 * bit for bit with the same chain on the CPU, with the stream flushing every few commands
 * and with flushing off (then no piece is submitted by the stream). */
static void test_overlap_keeps_program_order(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  enum { N = 256, STEPS = 150 };
  static float a0[N], b0[N], a_want[N], b_want[N], got[N], poison[N];
  uint64_t seed = vkt_seed(0);
  vkt_fill_random_f32(a0, N, -1, 1, &seed);
  vkt_fill_random_f32(b0, N, -1, 1, &seed);
  memcpy(a_want, a0, sizeof(a0));
  memcpy(b_want, b0, sizeof(b0));
  for (int step = 0; step < STEPS; step++)
    for (int i = 0; i < N; i++) {
      if (step % 10 == 9)
        b_want[i] = a_want[i];
      else if (step % 2)
        b_want[i] = a_want[i] + b_want[i];
      else
        a_want[i] = a_want[i] + b_want[i];
    }
  vkrt_buffer *a, *b;
  vkt_check(app, vkrt_buffer_create(app, 0, sizeof(a0), VKRT_BUFFER_DEVICE_LOCAL, &a));
  vkt_check(app, vkrt_buffer_create(app, 0, sizeof(b0), VKRT_BUFFER_DEVICE_LOCAL, &b));
  vkrt_tensor at = vkrt_tensor_contiguous(a, 0, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_tensor bt = vkrt_tensor_contiguous(b, 0, VKRT_TYPE_F32, N, 1, 1, 1);
  const vkrt_tensor *ab[2] = {&at, &bt};
  int64_t flush_ops;
  vkt_check(app, vkrt_lab_get(app, 0, VKRT_LAB_STREAM_FLUSH_OPS, &flush_ops));
  assert_true(flush_ops > 0); /* on by default */
  for (int pass = 0; pass < 2; pass++) {
    int64_t every = pass == 0 ? 8 : 0;
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_STREAM_FLUSH_OPS, every));
    vkt_check(app, vkrt_upload(a, 0, a0, sizeof(a0)));
    vkt_check(app, vkrt_upload(b, 0, b0, sizeof(b0)));
    vkrt_lab_stream before, after;
    vkt_check(app, vkrt_lab_stream_get(app, 0, &before));
    for (int step = 0; step < STEPS; step++) {
      vkrt_status s = step % 10 == 9 ? vkrt_cmd_copy_buffer(b, 0, a, 0, sizeof(a0))
                      : step % 2     ? vkrt_op_add(&bt, ab, 2)
                                     : vkrt_op_add(&at, ab, 2);
      if (s == VKRT_ERROR_UNSUPPORTED) {
        vkt_close(app);
        vkt_skip("the add kernel is not in this build");
      }
      vkt_check(app, s);
    }
    uint64_t ticket;
    vkt_check(app, vkrt_submit(app, 0, &ticket));
    vkt_check(app, vkrt_lab_stream_get(app, 0, &after));
    /* the ticket is the last piece: it covers every flushed one */
    assert_int_equal(ticket, after.submitted);
    vkt_check(app, vkrt_wait(app, 0, ticket, UINT64_MAX));
    uint64_t flushes = after.flushes - before.flushes;
    if (every ? flushes < (uint64_t)(STEPS / every - 2) : flushes != 0)
      fail_msg("flush every %lld commands: %llu pieces flushed for %d commands", (long long)every,
               (unsigned long long)flushes, STEPS);
    assert_int_equal(after.submitted - before.submitted, flushes + 1);
    vkt_poison(poison, sizeof(poison));
    memcpy(got, poison, sizeof(got));
    vkt_check(app, vkrt_download(got, a, 0, sizeof(got)));
    assert_memory_equal(got, a_want, sizeof(got));
    memcpy(got, poison, sizeof(got));
    vkt_check(app, vkrt_download(got, b, 0, sizeof(got)));
    assert_memory_equal(got, b_want, sizeof(got));
  }
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_STREAM_FLUSH_OPS, flush_ops));
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
  vkt_close(app);
}

/* Ops of one kernel back to back bind its pipeline once per command buffer (the call
 * profile counts the binds: one for a run of rms_norms, one per op with
 * VKRT_LAB_PIPELINE_REBIND), and each op still reads its own operands: the results match a
 * CPU reference. After a submit the next buffer binds again. */
static void test_pipeline_bound_once_per_run(void **state) {
  (void)state;
  if (!IS_ENABLED(CONFIG_VKRT_KERNEL_RMS_NORM))
    vkt_skip("the rms_norm kernel is not in this build");
  enum { N = 96, OPS = 3 };
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  uint64_t seed = vkt_seed(0);
  static float x[OPS][N], want[OPS][N], got[N];
  vkrt_buffer *xb[OPS], *yb[OPS];
  for (int i = 0; i < OPS; i++) {
    vkt_fill_random_f32(x[i], N, -2, 2, &seed);
    double ss = 0;
    for (int k = 0; k < N; k++)
      ss += (double)x[i][k] * x[i][k];
    for (int k = 0; k < N; k++)
      want[i][k] = (float)(x[i][k] / sqrt(ss / N + 1e-5));
    vkt_check(app, vkrt_buffer_create(app, 0, sizeof(x[i]), VKRT_BUFFER_DEVICE_LOCAL, &xb[i]));
    vkt_check(app, vkrt_buffer_create(app, 0, sizeof(x[i]), VKRT_BUFFER_DEVICE_LOCAL, &yb[i]));
    vkt_check(app, vkrt_upload(xb[i], 0, x[i], sizeof(x[i])));
  }
  for (int rebind = 0; rebind < 2; rebind++) {
    vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_PIPELINE_REBIND, rebind));
    for (int i = 0; i < OPS; i++) { /* poisoned outputs */
      vkt_poison(got, sizeof(got));
      vkt_check(app, vkrt_upload(yb[i], 0, got, sizeof(got)));
    }
    vkt_check(app, vkrt_finish(app, 0));
    vkt_check(app, vkrt_lab_vk_calls_start(app, 0));
    for (int i = 0; i < OPS; i++) {
      vkrt_tensor xt = vkrt_tensor_contiguous(xb[i], 0, VKRT_TYPE_F32, N, 1, 1, 1);
      vkrt_tensor yt = vkrt_tensor_contiguous(yb[i], 0, VKRT_TYPE_F32, N, 1, 1, 1);
      vkrt_lab_vk_calls_mark(true);
      vkt_check(app, vkrt_op_rms_norm(&yt, &xt, NULL, 1e-5f));
    }
    vkrt_lab_vk_calls_mark(false);
    vkrt_lab_vk_calls calls;
    vkt_check(app, vkrt_lab_vk_calls_stop(app, 0, &calls));
    assert_int_equal(calls.marks, OPS);
    assert_int_equal(calls.count[VKRT_LAB_VK_DISPATCH], OPS);
    assert_int_equal(calls.count[VKRT_LAB_VK_BIND_PIPELINE], rebind ? OPS : 1);
    assert_true(calls.ns[VKRT_LAB_VK_DISPATCH] > 0 && calls.clock_ns > 0);
    vkt_check(app, vkrt_finish(app, 0));
    for (int i = 0; i < OPS; i++) {
      vkt_check(app, vkrt_download(got, yb[i], 0, sizeof(got)));
      for (int k = 0; k < N; k++)
        if (fabsf(got[k] - want[i][k]) > 1e-4f * (1 + fabsf(want[i][k])))
          fail_msg("rebind %d, op %d, element %d: %g, want %g", rebind, i, k, (double)got[k],
                   (double)want[i][k]);
    }
  }
  /* a new command buffer binds again: one op after the finish's submit */
  vkt_check(app, vkrt_lab_set(app, 0, VKRT_LAB_PIPELINE_REBIND, 0));
  vkt_check(app, vkrt_lab_vk_calls_start(app, 0));
  vkrt_tensor xt = vkrt_tensor_contiguous(xb[0], 0, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_tensor yt = vkrt_tensor_contiguous(yb[0], 0, VKRT_TYPE_F32, N, 1, 1, 1);
  vkrt_lab_vk_calls_mark(true);
  vkt_check(app, vkrt_op_rms_norm(&yt, &xt, NULL, 1e-5f));
  vkrt_lab_vk_calls_mark(false);
  vkrt_lab_vk_calls calls;
  expect_refused(app, vkrt_lab_vk_calls_stop(app, 1 % vkrt_device_count(app) == 0 ? 99 : 1,
                                             &calls), "profile of another device");
  vkt_check(app, vkrt_lab_vk_calls_stop(app, 0, &calls));
  assert_int_equal(calls.count[VKRT_LAB_VK_BIND_PIPELINE], 1);
  vkt_check(app, vkrt_finish(app, 0));
  for (int i = 0; i < OPS; i++) {
    vkrt_buffer_destroy(xb[i]);
    vkrt_buffer_destroy(yb[i]);
  }
  /* closed while profiled: the profile ends with the device, and the next appliance's
   * device can be profiled (not "being profiled already" about a freed device) */
  vkt_check(app, vkrt_lab_vk_calls_start(app, 0));
  assert_int_equal(vkrt_lab_vk_calls_start(app, 0), VKRT_ERROR_UNAVAILABLE);
  vkt_close(app);
  app = vkt_open(&o);
  vkt_check(app, vkrt_lab_vk_calls_start(app, 0));
  vkt_check(app, vkrt_lab_vk_calls_stop(app, 0, &calls));
  assert_int_equal(calls.marks, 0);
  vkt_close(app);
}

/* The chain of dependent products (vkrt_lab_chain_record): each order's result against a
 * float64 chain of the same halves, every link's arrival counter holding its whole grid and
 * no wait given up, the orders bit-identical, bad shapes and buffers refused. The counter
 * orders leave out the barriers on purpose (the counters order the links), which the
 * synchronization-validation pass would report as hazards: they run in the plain pass. */
static void run_chain(bool counters_too) {
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  enum { N = 512, LINKS = 5, MATRICES = 2, GROUPS = N / 16 };
  const uint64_t mat = (uint64_t)N * N;
  uint64_t st = vkt_seed(0);
  uint16_t *w = malloc(mat * MATRICES * 2);
  float x0[N], out[N], first[N];
  double xr[N], yr[N];
  assert_non_null(w);
  const float a = (float)sqrt(3.0 / N); /* entries in +-a: x keeps its scale */
  for (uint64_t i = 0; i < mat * MATRICES; i++) {
    float v;
    vkt_fill_random_f32(&v, 1, -a, a, &st);
    w[i] = vkrt_f32_to_f16(v);
  }
  vkt_fill_random_f32(x0, N, -1.0f, 1.0f, &st);
  for (int i = 0; i < N; i++)
    xr[i] = x0[i];
  for (int l = 0; l < LINKS; l++) {
    for (int r = 0; r < N; r++) {
      double sum = 0;
      for (int k = 0; k < N; k++)
        sum += (double)vkrt_f16_to_f32(w[(uint64_t)(l % MATRICES) * mat + (uint64_t)r * N + k]) * xr[k];
      yr[r] = sum;
    }
    memcpy(xr, yr, sizeof(xr));
  }
  vkrt_buffer *wb, *xy, *cnt;
  vkt_check(app, vkrt_buffer_create(app, 0, mat * MATRICES * 2, VKRT_BUFFER_DEVICE_LOCAL, &wb));
  vkt_check(app, vkrt_buffer_create(app, 0, 2 * N * 4, VKRT_BUFFER_DEVICE_LOCAL, &xy));
  vkt_check(app, vkrt_buffer_create(app, 0, (LINKS + 1) * 4, VKRT_BUFFER_DEVICE_LOCAL, &cnt));
  vkt_check(app, vkrt_upload(wb, 0, w, mat * MATRICES * 2));
  int orders = counters_too ? VKRT_LAB_CHAIN_ORDER_COUNT : 1;
  for (int ord = 0; ord < orders; ord++) {
    vkrt_lab_chain c = {.n = N, .links = LINKS, .matrices = MATRICES,
                        .order = (vkrt_lab_chain_order)ord};
    vkt_check(app, vkrt_upload(xy, 0, x0, sizeof(x0)));
    vkt_check(app, vkrt_cmd_fill(xy, N * 4, N * 4, 0xffffffffu)); /* NaN poison */
    vkt_check(app, vkrt_cmd_fill(cnt, 0, (LINKS + 1) * 4, 0x5a5a5a5au)); /* zeroed by the chain */
    vkt_check(app, vkrt_lab_chain_record(wb, xy, cnt, &c));
    vkt_check(app, vkrt_finish(app, 0));
    uint32_t counts[LINKS + 1];
    vkt_check(app, vkrt_download(out, xy, (LINKS % 2) * N * 4, sizeof(out)));
    vkt_check(app, vkrt_download(counts, cnt, 0, sizeof(counts)));
    for (int l = 0; l < LINKS; l++)
      assert_int_equal(counts[l], GROUPS);
    assert_int_equal(counts[LINKS], 0); /* no wait gave up */
    if (ord == VKRT_LAB_CHAIN_UNORDERED)
      continue; /* the links race on a GPU: a timing floor, its result not compared */
    double scale = 0, err = 0;
    for (int i = 0; i < N; i++) {
      scale = fmax(scale, fabs(xr[i]));
      err = fmax(err, fabs(out[i] - xr[i]));
    }
    if (!(err <= 1e-4 * scale))
      fail_msg("chain order %d: max error %g against the float64 chain's max %g", ord, err, scale);
    if (ord == 0)
      memcpy(first, out, sizeof(out));
    else
      assert_memory_equal(first, out, sizeof(out));
  }
  vkrt_lab_chain bad = {.n = 300, .links = LINKS, .matrices = MATRICES};
  expect_refused(app, vkrt_lab_chain_record(wb, xy, cnt, &bad), "n 300");
  bad.n = N;
  bad.matrices = MATRICES + 1;
  expect_refused(app, vkrt_lab_chain_record(wb, xy, cnt, &bad), "a w of too few matrices");
  bad.matrices = MATRICES;
  bad.links = LINKS + 1;
  expect_refused(app, vkrt_lab_chain_record(wb, xy, cnt, &bad), "too few counters");
  bad.links = LINKS;
  bad.order = VKRT_LAB_CHAIN_ORDER_COUNT;
  expect_refused(app, vkrt_lab_chain_record(wb, xy, cnt, &bad), "no such order");
  vkrt_buffer_destroy(wb);
  vkrt_buffer_destroy(xy);
  vkrt_buffer_destroy(cnt);
  free(w);
  vkt_close(app);
}

static void test_chain_barriers(void **state) {
  (void)state;
  run_chain(false);
}

static void test_chain_counters(void **state) {
  (void)state;
  if (vkt_sync_validation_pass())
    vkt_skip("the counters order the links, which synchronization validation cannot see");
  run_chain(true);
}

int main(int argc, char **argv) {
  if (argc > 1) /* one case by name or pattern (tools/mutation-check.sh) */
    cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_knobs_and_refusals),
      cmocka_unit_test(test_timer_and_raw_floors),
      cmocka_unit_test(test_host_barrier_only_for_mapped_writes),
      cmocka_unit_test(test_barrier_only_for_hazards),
      cmocka_unit_test(test_barrier_waits_for_stages_used),
      cmocka_unit_test(test_hazard_overlap_both_sides),
      cmocka_unit_test(test_hazard_list_full_forces_barrier),
      cmocka_unit_test(test_short_byte_copies),
      cmocka_unit_test(test_import),
      cmocka_unit_test(test_overlap_keeps_program_order),
      cmocka_unit_test(test_pipeline_bound_once_per_run),
      cmocka_unit_test(test_chain_barriers),
      cmocka_unit_test(test_chain_counters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
