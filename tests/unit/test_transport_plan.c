/* Transport planner: the exhaustive decision table over hand-built capability snapshots (no
 * GPU), plus named regressions. The expected values come from the planner's rules as
 * runtime/transport/transport.h states them, written here independently of plan.c's structure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/base.h"
#include "base/numbers.h"
#include "transport/transport.h"

#define NATIVE VKRT_TRANSPORT_BIT(VKRT_TRANSPORT_NATIVE_FD)
#define PROXY VKRT_TRANSPORT_BIT(VKRT_TRANSPORT_CPU_PROXY)
#define STAGED VKRT_TRANSPORT_BIT(VKRT_TRANSPORT_HOST_STAGED)

static void make_caps(struct vkrt_caps *c, uint32_t index, bool host, bool fd, bool timeline,
                      bool sync, uint8_t uuid_tag) {
  memset(c, 0, sizeof(*c));
  snprintf(c->device_name, sizeof(c->device_name), "test device %u", index);
  c->external_memory_host = host;
  c->external_semaphore_fd = fd;
  c->timeline_semaphore = timeline;
  /* Handle types come from an instance-level query and are reported even when the device's
   * FD functions are missing: the planner must look at the functions, not just these. */
  c->semaphore_export_handles = VKRT_HANDLE_OPAQUE_FD | (sync ? VKRT_HANDLE_SYNC_FD : 0);
  c->semaphore_import_handles = c->semaphore_export_handles;
  memset(c->device_uuid, uuid_tag, 16);
  memset(c->driver_uuid, 0x22, 16);
}

static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

#define assert_contains(hay, needle)                                                      \
  do {                                                                                    \
    if (!contains((hay), (needle)))                                                       \
      fail_msg("expected \"%s\" in \"%s\" (row %s)", (needle), (hay), row_name);          \
  } while (0)

static void test_exhaustive_two_devices(void **state) {
  (void)state;
  int rows = 0;
  for (uint32_t compiled = 0; compiled < 8; compiled++)
    for (int pref = 0; pref < 2; pref++)
      for (int host = 0; host < 2; host++)
        for (int fd = 0; fd < 4; fd++)
          for (int uuid_eq = 0; uuid_eq < 2; uuid_eq++)
            for (int sync = 0; sync < 2; sync++)
              for (int timeline = 0; timeline < 2; timeline++) {
                bool fd0 = fd & 1, fd1 = fd & 2;
                uint32_t bits = ((compiled & 1) ? NATIVE : 0) | ((compiled & 2) ? PROXY : 0) |
                                ((compiled & 4) ? STAGED : 0);
                char row_name[160];
                snprintf(row_name, sizeof(row_name),
                         "compiled=%s%s%s pref=%s host=%d fd0=%d fd1=%d uuid_eq=%d sync=%d "
                         "timeline=%d", (bits & NATIVE) ? "N" : "", (bits & PROXY) ? "P" : "",
                         (bits & STAGED) ? "S" : "", pref ? "proxy" : "auto", host, fd0, fd1,
                         uuid_eq, sync, timeline);
                struct vkrt_caps caps[2];
                make_caps(&caps[0], 0, host, fd0, timeline, sync, 0x11);
                make_caps(&caps[1], 1, host, fd1, timeline, sync, uuid_eq ? 0x11 : 0x33);
                struct vkrt_transport_plan_input in = {
                    .device_count = 2, .caps = caps, .compiled = bits,
                    .preference = pref ? VKRT_TRANSPORT_PREFERENCE_CPU_PROXY
                                       : VKRT_TRANSPORT_PREFERENCE_AUTO};
                static struct vkrt_transport_plan plan;
                vkrt_transport_plan(&in, &plan);

                /* the planner's rules */
                bool native_ok = (bits & NATIVE) && !pref && host && fd0 && fd1 && timeline &&
                                 (uuid_eq || sync);
                bool proxy_ok = (bits & PROXY) && host && timeline;
                bool staged_ok = (bits & STAGED);
                vkrt_transport_kind want = native_ok ? VKRT_TRANSPORT_NATIVE_FD
                                           : proxy_ok ? VKRT_TRANSPORT_CPU_PROXY
                                           : staged_ok ? VKRT_TRANSPORT_HOST_STAGED
                                                       : VKRT_TRANSPORT_NONE;
                if (plan.kind != want || plan.ok != (want != VKRT_TRANSPORT_NONE))
                  fail_msg("%s: got %s (ok=%d), want %s; reason: %s", row_name,
                           vkrt_transport_str(plan.kind), plan.ok, vkrt_transport_str(want),
                           plan.reason);
                assert_int_equal(plan.candidates[0].usable, native_ok);
                assert_int_equal(plan.candidates[1].usable, proxy_ok);
                assert_int_equal(plan.candidates[2].usable, staged_ok);
                if (want == VKRT_TRANSPORT_NATIVE_FD)
                  assert_int_equal(plan.semaphore_handle,
                                   uuid_eq ? VKRT_HANDLE_OPAQUE_FD : VKRT_HANDLE_SYNC_FD);
                else
                  assert_int_equal(plan.semaphore_handle, 0);

                /* reason for the choice, or the error listing every candidate */
                if (want != VKRT_TRANSPORT_NONE) {
                  assert_true(!strncmp(plan.reason, vkrt_transport_str(want),
                                       strlen(vkrt_transport_str(want))));
                  if (want != VKRT_TRANSPORT_NATIVE_FD)
                    assert_contains(plan.reason, "native_fd rejected");
                } else {
                  assert_contains(plan.reason, "no usable collective transport");
                  assert_contains(plan.reason, "native_fd:");
                  assert_contains(plan.reason, "cpu_proxy:");
                  assert_contains(plan.reason, "host_staged:");
                }

                /* reason of every rejected candidate names the cause */
                const char *nr = plan.candidates[0].reason;
                if (!(bits & NATIVE)) {
                  assert_contains(nr, "not compiled in (CONFIG_VKRT_TRANSPORT_NATIVE_FD=n)");
                } else if (pref) {
                  assert_contains(nr, "forced CPU proxy");
                } else if (!native_ok) {
                  if (!host)
                    assert_contains(nr, "dev0: no VK_EXT_external_memory_host");
                  if (!fd0)
                    assert_contains(nr, "dev0: semaphore FD functions");
                  if (!fd1)
                    assert_contains(nr, "dev1: semaphore FD functions");
                  if (!timeline)
                    assert_contains(nr, "no timeline semaphores");
                  if (host && fd0 && fd1 && timeline)
                    assert_contains(nr, "they differ");
                }
                const char *pr = plan.candidates[1].reason;
                if (!(bits & PROXY)) {
                  assert_contains(pr, "not compiled in (CONFIG_VKRT_TRANSPORT_CPU_PROXY=n)");
                } else if (!proxy_ok) {
                  if (!host) {
                    assert_contains(pr, "dev0: no VK_EXT_external_memory_host");
                    assert_contains(pr, "dev1: no VK_EXT_external_memory_host");
                  }
                  if (!timeline)
                    assert_contains(pr, "no timeline semaphores");
                } else {
                  assert_contains(pr, "proxy thread");
                }
                if (!(bits & STAGED))
                  assert_contains(plan.candidates[2].reason,
                                  "not compiled in (CONFIG_VKRT_TRANSPORT_HOST_STAGED=n)");

                /* the pair line: what native_fd could use between dev0 and dev1 */
                const char *pair = plan.pair_reason[0][1];
                assert_string_equal(pair, plan.pair_reason[1][0]);
                if (!fd0 && !fd1)
                  assert_contains(pair, "missing on dev0 and dev1");
                else if (!fd0)
                  assert_contains(pair, "missing on dev0");
                else if (!fd1)
                  assert_contains(pair, "missing on dev1");
                else if (uuid_eq)
                  assert_int_equal(plan.pair_handle[0][1], VKRT_HANDLE_OPAQUE_FD);
                else if (sync)
                  assert_int_equal(plan.pair_handle[0][1], VKRT_HANDLE_SYNC_FD);
                else
                  assert_contains(pair, "no common semaphore handle");
                rows++;
              }
  assert_int_equal(rows, 8 * 2 * 2 * 4 * 2 * 2 * 2);
}

static struct vkrt_transport_plan plan_of(const struct vkrt_caps *caps, uint32_t n,
                                          uint32_t compiled, int pref, vkrt_transport_kind force) {
  struct vkrt_transport_plan_input in = {.device_count = n, .caps = caps, .compiled = compiled,
                                         .preference = (enum vkrt_transport_preference)pref,
                                         .force = force};
  struct vkrt_transport_plan plan;
  vkrt_transport_plan(&in, &plan);
  return plan;
}

/* The seed's case (lavapipe, Windows drivers): no FD functions, host import present. */
static void test_fd_missing_host_import_gives_cpu_proxy(void **state) {
  (void)state;
  const char *row_name = "lavapipe";
  struct vkrt_caps caps[2];
  make_caps(&caps[0], 0, true, false, true, false, 0x11);
  make_caps(&caps[1], 1, true, false, true, false, 0x11);
  struct vkrt_transport_plan plan = plan_of(caps, 2, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_NONE);
  assert_true(plan.ok);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_CPU_PROXY);
  assert_contains(plan.reason, "native_fd rejected: dev0: semaphore FD functions");
}

static void test_forced_proxy_with_fd_gives_cpu_proxy(void **state) {
  (void)state;
  const char *row_name = "forced proxy";
  struct vkrt_caps caps[2];
  make_caps(&caps[0], 0, true, true, true, true, 0x11);
  make_caps(&caps[1], 1, true, true, true, true, 0x11);
  struct vkrt_transport_plan plan = plan_of(caps, 2, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_NONE);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_NATIVE_FD); /* auto picks native */
  plan = plan_of(caps, 2, NATIVE | PROXY | STAGED, VKRT_TRANSPORT_PREFERENCE_CPU_PROXY,
                 VKRT_TRANSPORT_NONE);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_CPU_PROXY);
  assert_contains(plan.reason, "forced CPU proxy");
  /* an explicit override beats the preference */
  plan = plan_of(caps, 2, NATIVE | PROXY | STAGED, VKRT_TRANSPORT_PREFERENCE_CPU_PROXY,
                 VKRT_TRANSPORT_NATIVE_FD);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_NATIVE_FD);
  assert_contains(plan.candidates[1].reason, "not requested (transport forced to native_fd)");
}

static void test_no_import_no_staged_is_clear_error(void **state) {
  (void)state;
  const char *row_name = "no import";
  struct vkrt_caps caps[2];
  make_caps(&caps[0], 0, false, false, true, false, 0x11);
  make_caps(&caps[1], 1, false, false, true, false, 0x11);
  struct vkrt_transport_plan plan = plan_of(caps, 2, NATIVE | PROXY, 0, VKRT_TRANSPORT_NONE);
  assert_false(plan.ok);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_NONE);
  assert_contains(plan.reason, "no usable collective transport: native_fd: dev0: no "
                               "VK_EXT_external_memory_host");
  assert_contains(plan.reason, "cpu_proxy: dev0: no VK_EXT_external_memory_host; dev1: no "
                               "VK_EXT_external_memory_host");
  assert_contains(plan.reason, "host_staged: not compiled in");
  char text[4096];
  vkrt_transport_plan_describe(&plan, false, text, sizeof(text));
  assert_contains(text, "vkrt: collectives: no usable collective transport");
}

/* Four devices; dev2 lacks the FD functions, dev3 lacks host import. */
static void test_four_devices_names_the_device(void **state) {
  (void)state;
  const char *row_name = "x4";
  struct vkrt_caps caps[4];
  for (uint32_t d = 0; d < 4; d++)
    make_caps(&caps[d], d, true, d != 2, true, false, 0x11);
  struct vkrt_transport_plan plan = plan_of(caps, 4, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_NONE);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_CPU_PROXY);
  assert_contains(plan.candidates[0].reason, "dev2: semaphore FD functions");
  assert_false(contains(plan.candidates[0].reason, "dev1:"));
  assert_int_equal(plan.pair_handle[0][1], VKRT_HANDLE_OPAQUE_FD);
  assert_int_equal(plan.pair_handle[1][2], 0);
  assert_contains(plan.pair_reason[3][2], "missing on dev2");
  caps[3].external_memory_host = false;
  plan = plan_of(caps, 4, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_NONE);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_HOST_STAGED);
  assert_contains(plan.candidates[1].reason, "dev3: no VK_EXT_external_memory_host");
  assert_false(contains(plan.candidates[1].reason, "dev0"));
}

/* Eight physical GPUs: UUIDs differ, sync FD everywhere -> native_fd over sync FDs; one GPU
 * without sync FD -> the pair is named and cpu_proxy is used. */
static void test_eight_devices_sync_fd(void **state) {
  (void)state;
  const char *row_name = "x8";
  struct vkrt_caps caps[8];
  for (uint32_t d = 0; d < 8; d++)
    make_caps(&caps[d], d, true, true, true, true, (uint8_t)(0x40 + d));
  struct vkrt_transport_plan plan = plan_of(caps, 8, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_NONE);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_NATIVE_FD);
  assert_int_equal(plan.semaphore_handle, VKRT_HANDLE_SYNC_FD);
  caps[5].semaphore_export_handles = VKRT_HANDLE_OPAQUE_FD;
  plan = plan_of(caps, 8, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_NONE);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_CPU_PROXY);
  assert_contains(plan.candidates[0].reason, "dev0 <-> dev5: no common semaphore handle");
  /* two logical devices on one GPU plus a third GPU without sync FD: opaque works only
   * within the GPU, so the appliance cannot use native_fd */
  struct vkrt_caps three[3];
  make_caps(&three[0], 0, true, true, true, false, 0x11);
  make_caps(&three[1], 1, true, true, true, false, 0x11);
  make_caps(&three[2], 2, true, true, true, false, 0x77);
  plan = plan_of(three, 3, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_NONE);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_CPU_PROXY);
  assert_int_equal(plan.pair_handle[0][1], VKRT_HANDLE_OPAQUE_FD);
  assert_contains(plan.candidates[0].reason, "dev0 <-> dev2");
  assert_contains(plan.candidates[0].reason, "they differ");
}

static void test_one_device_and_bad_counts(void **state) {
  (void)state;
  const char *row_name = "x1";
  struct vkrt_caps caps[1];
  make_caps(&caps[0], 0, false, false, false, false, 0x11);
  struct vkrt_transport_plan plan = plan_of(caps, 1, 0, 0, VKRT_TRANSPORT_NONE);
  assert_true(plan.ok);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_NONE);
  assert_contains(plan.reason, "one device");
  plan = plan_of(caps, 0, NATIVE, 0, VKRT_TRANSPORT_NONE);
  assert_false(plan.ok);
  assert_contains(plan.reason, "invalid device count 0");
  plan = plan_of(caps, 9, NATIVE, 0, VKRT_TRANSPORT_NONE);
  assert_false(plan.ok);
}

/* Several hosts (CONFIG_VKRT_TRANSPORT_MPI): the host's sum must land in host memory, so
 * native_fd is out even where it works, and one device per host still gets a transport. */
static void test_host_sum_for_multi_host(void **state) {
  (void)state;
  const char *row_name = "multi-host";
  struct vkrt_caps caps[2];
  make_caps(&caps[0], 0, true, true, true, true, 0x11);
  make_caps(&caps[1], 1, true, true, true, true, 0x11);
  struct vkrt_transport_plan_input in = {.device_count = 2, .caps = caps,
                                         .compiled = NATIVE | PROXY | STAGED, .host_sum = true};
  struct vkrt_transport_plan plan;
  vkrt_transport_plan(&in, &plan);
  assert_true(plan.ok);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_CPU_PROXY);
  assert_contains(plan.reason, "native_fd rejected: several hosts");
  in.device_count = 1; /* one device per host: a host transport, not "no transport needed" */
  vkrt_transport_plan(&in, &plan);
  assert_true(plan.ok);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_CPU_PROXY);
  make_caps(&caps[0], 0, false, false, false, false, 0x11); /* no import: host_staged */
  vkrt_transport_plan(&in, &plan);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_HOST_STAGED);
  in.compiled = NATIVE; /* only native_fd compiled: a clear error, not a silent GPU sum */
  make_caps(&caps[0], 0, true, true, true, true, 0x11);
  vkrt_transport_plan(&in, &plan);
  assert_false(plan.ok);
  assert_contains(plan.reason, "several hosts");
}

static void test_forced_transport_unusable_fails(void **state) {
  (void)state;
  const char *row_name = "force";
  struct vkrt_caps caps[2];
  make_caps(&caps[0], 0, true, false, true, false, 0x11);
  make_caps(&caps[1], 1, true, false, true, false, 0x11);
  struct vkrt_transport_plan plan = plan_of(caps, 2, NATIVE | PROXY | STAGED, 0,
                                            VKRT_TRANSPORT_NATIVE_FD);
  assert_false(plan.ok);
  assert_contains(plan.reason, "cpu_proxy: not requested (transport forced to native_fd)");
  plan = plan_of(caps, 2, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_HOST_STAGED);
  assert_true(plan.ok);
  assert_int_equal(plan.kind, VKRT_TRANSPORT_HOST_STAGED);
}

static void test_describe(void **state) {
  (void)state;
  const char *row_name = "describe";
  struct vkrt_caps caps[2];
  make_caps(&caps[0], 0, true, false, true, false, 0x11);
  make_caps(&caps[1], 1, true, false, true, false, 0x11);
  struct vkrt_transport_plan plan = plan_of(caps, 2, NATIVE | PROXY | STAGED, 0, VKRT_TRANSPORT_NONE);
  char text[8192], json[8192], tiny[8];
  size_t n = vkrt_transport_plan_describe(&plan, false, text, sizeof(text));
  assert_int_equal(n, strlen(text));
  assert_contains(text, "vkrt: dev0 -> dev1 via cpu_proxy (native_fd pair: semaphore FD "
                        "functions missing on dev0 and dev1)");
  assert_contains(text, "cpu_proxy chosen:");
  assert_contains(text, "native_fd rejected:");
  assert_int_equal(vkrt_transport_plan_describe(&plan, false, tiny, sizeof(tiny)), n);
  assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
  n = vkrt_transport_plan_describe(&plan, true, json, sizeof(json));
  assert_int_equal(n, strlen(json));
  assert_contains(json, "\"collectives\": {\"transport\": \"cpu_proxy\", \"ok\": true");
  int depth = 0;
  for (const char *p = json; *p; p++)
    depth += (*p == '{' || *p == '[') - (*p == '}' || *p == ']');
  assert_int_equal(depth, 0);
}

/* ---- the CPU reduce the host transports share (no GPU either) ---------------------------- */

/* Every f16 value converts like the compiler's _Float16; f32 -> f16 rounds like it too
 * (round to nearest even, overflow to infinity, subnormals, NaN stays NaN). */
static void test_f16_conversions(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000; h++) {
    _Float16 x;
    uint16_t bits = (uint16_t)h;
    memcpy(&x, &bits, 2);
    float want = (float)x, got = vkrt_f16_to_f32(bits);
    if (want != want) {
      assert_true(got != got);
      continue;
    }
    assert_memory_equal(&want, &got, 4);
    assert_int_equal(vkrt_f32_to_f16(got), bits); /* exact round trip */
  }
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 2000000; i++) {
    uint64_t r = vkrt_xorshift(&rng);
    uint32_t bits = (uint32_t)r;
    if (i & 1) /* concentrate on the f16 range and its edges */
      bits = (bits & 0x807fffffu) | ((uint32_t)(0x60 + (r >> 40) % 0x30) << 23);
    float f;
    memcpy(&f, &bits, 4);
    _Float16 h = (_Float16)f;
    uint16_t want;
    memcpy(&want, &h, 2);
    uint16_t got = vkrt_f32_to_f16(f);
    if (f != f)
      assert_true((got & 0x7c00) == 0x7c00 && (got & 0x3ff));
    else if (got != want)
      fail_msg("f32 0x%08x -> f16: got 0x%04x want 0x%04x", bits, got, want);
  }
}

static void reduce_reference(vkrt_type type, void *dst, void *const *src, uint32_t n,
                             uint64_t count) {
  for (uint64_t i = 0; i < count; i++) {
    float acc = 0;
    for (uint32_t r = 0; r < n; r++) {
      float x = type == VKRT_TYPE_F32 ? ((const float *)src[r])[i]
                                      : (float)((const _Float16 *)src[r])[i];
      acc = r ? acc + x : x;
    }
    if (type == VKRT_TYPE_F32)
      ((float *)dst)[i] = acc;
    else
      ((_Float16 *)dst)[i] = (_Float16)acc;
  }
}

/* The CPU reduce and the pool give the rank-order f32 sum bit for bit, for every thread
 * count, odd sizes, 1..8 inputs, in place into input 0 too. */
static void test_cpu_reduce_and_pool(void **state) {
  (void)state;
  vkrt_options options;
  vkrt_options_initialize(&options);
  struct vkrt_base base;
  vkrt_base_init(&base, &options);
  const uint64_t counts[] = {0, 1, 3, 2047, 2049, 700001};
  uint64_t rng = 12345;
  for (int t = 0; t < 2; t++) {
    vkrt_type type = t ? VKRT_TYPE_F16 : VKRT_TYPE_F32;
    size_t esize = t ? 2 : 4;
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
      uint64_t count = counts[c];
      void *src[8], *want = malloc(count * esize + 4), *got = malloc(count * esize + 4);
      for (int r = 0; r < 8; r++) {
        src[r] = malloc(count * esize + 4);
        for (uint64_t i = 0; i < count; i++) {
          float v = (float)((double)(vkrt_xorshift(&rng) >> 11) * 0x1p-53 * 200.0 - 100.0);
          if (t)
            ((_Float16 *)src[r])[i] = (_Float16)v;
          else
            ((float *)src[r])[i] = v;
        }
      }
      for (uint32_t n = 1; n <= 8; n += (n < 3 ? 1 : 5)) {
        reduce_reference(type, want, src, n, count);
        for (uint32_t threads = 1; threads <= 5; threads += 2) {
          struct vkrt_reduce_pool *pool = NULL;
          assert_int_equal(vkrt_reduce_pool_create(&base, threads, &pool), VKRT_OK);
          assert_true((pool != NULL) == (threads >= 2));
          memset(got, 0xa5, count * esize);
          vkrt_reduce_pool_run(pool, type, got, (const void *const *)src, n, count);
          if (memcmp(got, want, count * esize))
            fail_msg("%s count %llu n %u threads %u differs", t ? "f16" : "f32",
                     (unsigned long long)count, n, threads);
          vkrt_reduce_pool_destroy(pool);
        }
      }
      /* in place into input 0 (host_staged does this) */
      reduce_reference(type, want, src, 4, count);
      struct vkrt_reduce_pool *pool = NULL;
      assert_int_equal(vkrt_reduce_pool_create(&base, 3, &pool), VKRT_OK);
      vkrt_reduce_pool_run(pool, type, src[0], (const void *const *)src, 4, count);
      vkrt_reduce_pool_destroy(pool);
      assert_memory_equal(src[0], want, count * esize);
      for (int r = 0; r < 8; r++)
        free(src[r]);
      free(want);
      free(got);
    }
  }
  assert_int_equal(atomic_load(&base.live_allocations), 0);
  vkrt_base_finish(&base);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exhaustive_two_devices),
      cmocka_unit_test(test_fd_missing_host_import_gives_cpu_proxy),
      cmocka_unit_test(test_forced_proxy_with_fd_gives_cpu_proxy),
      cmocka_unit_test(test_no_import_no_staged_is_clear_error),
      cmocka_unit_test(test_four_devices_names_the_device),
      cmocka_unit_test(test_eight_devices_sync_fd),
      cmocka_unit_test(test_one_device_and_bad_counts),
      cmocka_unit_test(test_forced_transport_unusable_fails),
      cmocka_unit_test(test_host_sum_for_multi_host),
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_f16_conversions),
      cmocka_unit_test(test_cpu_reduce_and_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
