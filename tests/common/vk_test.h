/* Shared helpers for tests that open an appliance on lavapipe (cmocka). List the source
 * in a Sources entry as ../common/vk_test.c (from tests/vk, tests/fault, ...).
 *
 *   vkrt_options o;
 *   vkt_options(&o);                 // validation per CONFIG_VKRT_VALIDATION_IN_TESTS
 *   vkrt_appliance *app = vkt_open(&o);
 *   ...
 *   vkt_close(app);                  // asserts zero validation messages, then closes
 */
#pragma once
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/numbers.h"  /* f16 <-> f32 on the host, vkrt_xorshift */
#include "vkrt/kconfig.h" /* IS_ENABLED and this build's CONFIG_ symbols */
#include "vkrt/vkrt.h"

#define VKT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define VKT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VKT_ALIGN_UP(v, a) (((v) + (a) - 1) / (a) * (a))

/* vkrt_options_initialize + validation on (CONFIG_VKRT_VALIDATION_IN_TESTS) + a log to
 * stderr of warnings and errors (prefixed "vkrt-test: "). */
void vkt_options(vkrt_options *options);
/* Whether this run is tests/run's synchronization-validation pass (VKRT_TEST_SYNC_VALIDATION
 * is "1"; other values, "0" included, mean the plain pass). */
bool vkt_sync_validation_pass(void);
/* vkrt_open that fails the test (printing the status and message) when it fails. With any
 * fault injected (options->faults) the appliance's log lines read "vkrt-test: expected
 * (injected fault): error: ...": the errors are what the test provokes. */
vkrt_appliance *vkt_open(const vkrt_options *options);
/* Marks the log lines of an appliance opened with these options as expected (for a test
 * that calls vkrt_open itself with faults injected). Only the harness's own log is marked. */
void vkt_expect_errors(vkrt_options *options);
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
/* vkrt_fault_arm_allocations, with the harness's log lines marked "expected (injected
 * fault)" while a failure is armed (either count non-zero) and plain again once disarmed. */
vkrt_status vkt_fault_arm(vkrt_appliance *app, uint32_t host_alloc_fail_at,
                          uint32_t vulkan_alloc_fail_at);
#endif
/* Asserts vkrt_validation_message_count(app) == 0, then closes. */
void vkt_close(vkrt_appliance *app);
/* Fails the test with the last error when s != VKRT_OK. */
#define vkt_check(app, s)                                                                     \
  do {                                                                                        \
    vkrt_status vkt_s_ = (s);                                                                 \
    if (vkt_s_ != VKRT_OK)                                                                    \
      fail_msg("%s:%d: %s: %s", __FILE__, __LINE__, vkrt_status_str(vkt_s_),                  \
               vkrt_last_error(app));                                                         \
  } while (0)

/* Skips the current test saying why: tests/run lists every "vkrt-test: skipped" line and
 * counts the skipped cases. */
#define vkt_skip(why)                                                                         \
  do {                                                                                        \
    fprintf(stderr, "vkrt-test: skipped %s: %s\n", __func__, (why));                         \
    skip();                                                                                   \
  } while (0)
/* Skips when cond holds; the reason printed is the condition's text. */
#define vkt_skip_if(cond)                                                                     \
  do {                                                                                        \
    if (cond)                                                                                 \
      vkt_skip(#cond);                                                                        \
  } while (0)

/* Deterministic pseudo-random data (vkrt_xorshift of base/numbers.h), never all zero. A seed
 * of 0 picks a fresh one from the clock; the seed used is printed so a failure can be
 * replayed. */
uint64_t vkt_seed(uint64_t seed);
void vkt_fill_random(void *ptr, size_t bytes, uint64_t *state);
/* Uniform floats in [lo, hi). */
void vkt_fill_random_f32(float *out, size_t count, float lo, float hi, uint64_t *state);
/* The RMS norm's scale of x[0..n) in float64: 1 / sqrt(mean(x^2) + eps). */
double vkt_rms_scale(const float *x, int64_t n, double eps);
/* Fills outputs with a recognizable pattern (0xDEADBEEF words) before a kernel writes them. */
void vkt_poison(void *ptr, size_t bytes);

/* A host-visible buffer of `size` bytes on device 0, mapped (fails the test on error);
 * vkrt_buffer_destroy(h.buf) frees it. */
typedef struct vkt_hbuf {
  vkrt_buffer *buf;
  uint8_t *map;
  uint64_t size;
} vkt_hbuf;
vkt_hbuf vkt_hbuf_new(vkrt_appliance *app, uint64_t size);

/* A counting allocator (live/total blocks) to detect leaks through vkrt_options.allocator;
 * it counts driver allocations routed through the allocation callbacks too. */
typedef struct vkt_counting {
  atomic_long live;
  atomic_long total;
  atomic_long bytes_live;
} vkt_counting;
vkrt_allocator vkt_counting_allocator(vkt_counting *counting);

/* An allocator that maps every block on pages of its own and, when it is freed, leaves the
 * pages mapped without access (the last 4096 freed blocks): a read or write of freed memory
 * faults at once, in the plain test pass, where no sanitizer is. Alignments up to a page.
 * Also installs a SIGSEGV handler that prints "FAIL: an access at ... touched a block after
 * the injected allocator freed it" for such a fault before the program dies of it. */
vkrt_allocator vkt_guard_allocator(void);

/* Captures log messages into a buffer (for tests that check a message); log_user must be
 * a vkt_log_capture. Also forwards to stderr. */
typedef struct vkt_log_capture {
  char text[8192];
  size_t len;
} vkt_log_capture;
void vkt_log_capture_fn(void *user, vkrt_log_level level, const char *message);

