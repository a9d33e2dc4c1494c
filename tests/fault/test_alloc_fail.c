/* Allocation-failure matrix (Vulkan CTS intentional_alloc_fail style): fail the 1st, 2nd, ...
 * Nth host allocation libvkrt makes (through the injected allocator) and the Nth
 * vkAllocateMemory during vkrt_open, vkrt_host_register, the first allreduce and the first
 * dispatch of each op. N runs over every allocation the call makes, as counted by a run
 * without faults (vkrt_fault_allocation_counts). Each failing run must return a clean status
 * with a message, leave no allocation live after close (the counting allocator sees the
 * driver's allocations too), and a retry without the fault must succeed. A run whose failed
 * allocation a fallback absorbed (e.g. pre-stage after a refused import) must succeed and
 * leak nothing as well; those are counted separately. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/vk_test.h"

#define MAX_N 4000 /* more allocations than any call here makes; more fails the test */

typedef vkrt_status (*phase_fn)(vkrt_appliance *app, void *ctx);

struct phase_result {
  uint32_t allocations;   /* allocations the call makes without faults */
  uint32_t failed_runs;   /* N values that made the call fail cleanly (and the retry work) */
  uint32_t absorbed_runs; /* N values a fallback absorbed: the call still succeeded */
};

static void options_with_counter(vkrt_options *o, vkt_counting *c) {
  vkt_options(o);
  memset(c, 0, sizeof(*c));
  o->allocator = vkt_counting_allocator(c);
}

static uint32_t pick(int kind, uint32_t host, uint32_t vulkan) { return kind ? vulkan : host; }

static void check_no_leak(vkt_counting *c, const char *what, int kind, uint32_t n) {
  if (atomic_load(&c->live) != 0)
    fail_msg("%s with %s allocation %u failing: %ld allocations leaked", what,
             kind ? "vulkan" : "host", n, (long)atomic_load(&c->live));
}

/* vkrt_open with the Nth host (kind 0) or Vulkan (kind 1) allocation failing. */
static struct phase_result open_matrix(int kind) {
  struct phase_result r = {0};
  vkt_counting c;
  vkrt_options o;
  options_with_counter(&o, &c);
  vkrt_appliance *app = vkt_open(&o);
  uint32_t host = 0, vulkan = 0;
  vkt_check(app, vkrt_fault_allocation_counts(app, &host, &vulkan));
  vkt_close(app);
  check_no_leak(&c, "open", kind, 0);
  r.allocations = pick(kind, host, vulkan);
  assert_true(r.allocations <= MAX_N);
  for (uint32_t n = 1; n <= r.allocations; n++) {
    options_with_counter(&o, &c);
    if (kind == 0)
      o.faults.host_alloc_fail_at = n;
    else
      o.faults.vulkan_alloc_fail_at = n;
    app = NULL;
    char why[512] = "";
    vkrt_status s = vkrt_open(&o, &app, why, sizeof(why));
    if (s == VKRT_OK) {
      vkt_close(app);
      check_no_leak(&c, "open (absorbed)", kind, n);
      r.absorbed_runs++;
      continue;
    }
    assert_null(app);
    assert_true(why[0] != '\0');
    check_no_leak(&c, "open", kind, n);
    /* The retry without the fault succeeds. */
    options_with_counter(&o, &c);
    vkt_close(vkt_open(&o));
    check_no_leak(&c, "open retry", kind, n);
    r.failed_runs++;
  }
  return r;
}

/* A phase run on a fresh appliance each time (first-use state such as pipelines must be
 * cold), failing the Nth allocation inside `fn` only. */
static struct phase_result phase_matrix(const char *name, phase_fn fn, int kind) {
  struct phase_result r = {0};
  vkt_counting c;
  vkrt_options o;
  options_with_counter(&o, &c);
  vkrt_appliance *app = vkt_open(&o);
  vkt_check(app, vkrt_fault_arm_allocations(app, 0, 0)); /* counts from here */
  vkt_check(app, fn(app, NULL));
  uint32_t host = 0, vulkan = 0;
  vkt_check(app, vkrt_fault_allocation_counts(app, &host, &vulkan));
  vkt_close(app);
  check_no_leak(&c, name, kind, 0);
  r.allocations = pick(kind, host, vulkan);
  assert_true(r.allocations <= MAX_N);
  for (uint32_t n = 1; n <= r.allocations; n++) {
    options_with_counter(&o, &c);
    app = vkt_open(&o);
    vkt_check(app, vkrt_fault_arm_allocations(app, kind == 0 ? n : 0, kind == 1 ? n : 0));
    vkrt_status s = fn(app, NULL);
    vkt_check(app, vkrt_fault_arm_allocations(app, 0, 0));
    if (s != VKRT_OK) {
      assert_true(strlen(vkrt_last_error(app)) > 0);
      /* The retry without the fault succeeds on the same appliance. */
      vkrt_status retry = fn(app, NULL);
      if (retry != VKRT_OK)
        fail_msg("%s: retry after failing allocation %u failed: %s: %s", name, n,
                 vkrt_status_str(retry), vkrt_last_error(app));
      r.failed_runs++;
    } else {
      r.absorbed_runs++;
    }
    vkt_close(app);
    check_no_leak(&c, name, kind, n);
  }
  return r;
}

static uint8_t *region;
#define REGION_BYTES (3u << 20)

static vkrt_status phase_register(vkrt_appliance *app, void *ctx) {
  (void)ctx;
  vkrt_status s = vkrt_host_register(app, region, REGION_BYTES, NULL, NULL, NULL);
  if (s == VKRT_OK)
    s = vkrt_host_unregister(app, region);
  return s;
}

static vkrt_status phase_allreduce(vkrt_appliance *app, void *ctx) {
  (void)ctx;
  uint32_t n = vkrt_device_count(app);
  vkrt_buffer *b[VKRT_MAX_DEVICES] = {0};
  vkrt_allreduce_args args = {.count = 1000, .type = VKRT_TYPE_F32};
  float host[1000];
  for (int i = 0; i < 1000; i++)
    host[i] = (float)(i % 17);
  vkrt_status s = VKRT_OK;
  /* Buffers are made before the fault is armed would be nicer, but the phase owns them so
   * a failure to create them is also a clean-status path worth covering. */
  for (uint32_t d = 0; d < n && s == VKRT_OK; d++) {
    s = vkrt_buffer_create(app, d, sizeof(host), VKRT_BUFFER_DEVICE_LOCAL, &b[d]);
    if (s == VKRT_OK)
      s = vkrt_upload(b[d], 0, host, sizeof(host));
    args.send[d] = args.recv[d] = b[d];
  }
  if (s == VKRT_OK)
    s = vkrt_allreduce(app, &args);
  for (uint32_t d = 0; d < n; d++) {
    vkrt_status f = vkrt_finish(app, d);
    if (s == VKRT_OK)
      s = f;
  }
  for (uint32_t d = 0; d < n; d++)
    vkrt_buffer_destroy(b[d]);
  return s;
}

enum op_kind { OP_COPY, OP_TRANSPOSE, OP_CONCAT, OP_ADD, OP_MATMUL };
static enum op_kind current_op;

static vkrt_status phase_op(vkrt_appliance *app, void *ctx) {
  (void)ctx;
  vkrt_buffer *a = NULL, *b = NULL, *d = NULL;
  vkrt_status s = vkrt_buffer_create(app, 0, 64 * 64 * 4, VKRT_BUFFER_DEVICE_LOCAL, &a);
  if (s == VKRT_OK)
    s = vkrt_buffer_create(app, 0, 64 * 64 * 4, VKRT_BUFFER_DEVICE_LOCAL, &b);
  if (s == VKRT_OK)
    s = vkrt_buffer_create(app, 0, 2 * 64 * 64 * 4, VKRT_BUFFER_DEVICE_LOCAL, &d);
  if (s == VKRT_OK) {
    vkrt_tensor ta = vkrt_tensor_contiguous(a, 0, VKRT_TYPE_F32, 64, 64, 1, 1);
    vkrt_tensor tb = vkrt_tensor_contiguous(b, 0, VKRT_TYPE_F32, 64, 64, 1, 1);
    vkrt_tensor td = vkrt_tensor_contiguous(d, 0, VKRT_TYPE_F32, 64, 64, 1, 1);
    vkrt_tensor tcat = vkrt_tensor_contiguous(d, 0, VKRT_TYPE_F32, 128, 64, 1, 1);
    const vkrt_tensor *srcs[2] = {&ta, &tb};
    switch (current_op) {
    case OP_COPY: s = vkrt_op_copy(&td, &ta); break;
    case OP_TRANSPOSE: s = vkrt_op_transpose(&td, &ta); break;
    case OP_CONCAT: s = vkrt_op_concat(&tcat, &ta, &tb, 0); break;
    case OP_ADD: s = vkrt_op_add(&td, srcs, 2); break;
    case OP_MATMUL: s = vkrt_op_matmul(&td, &ta, &tb); break;
    }
  }
  vkrt_status f = vkrt_finish(app, 0);
  if (s == VKRT_OK)
    s = f;
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
  vkrt_buffer_destroy(d);
  return s;
}

static void report(const char *what, const char *kind, struct phase_result r) {
  printf("vkrt-test: alloc-fail: %-20s %-6s %4u allocations, each failed once: %u clean "
         "failures (retry ok), %u absorbed by a fallback, 0 leaked\n",
         what, kind, r.allocations, r.failed_runs, r.absorbed_runs);
}

static void test_open(void **state) {
  (void)state;
  report("vkrt_open", "host", open_matrix(0));
  report("vkrt_open", "vulkan", open_matrix(1));
}

static void test_register(void **state) {
  (void)state;
  region = aligned_alloc(4096, REGION_BYTES);
  uint64_t seed = vkt_seed(0);
  vkt_fill_random(region, REGION_BYTES, &seed);
  report("vkrt_host_register", "host", phase_matrix("register", phase_register, 0));
  report("vkrt_host_register", "vulkan", phase_matrix("register", phase_register, 1));
  free(region);
}

static void test_allreduce(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_COLLECTIVES));
  report("first allreduce", "host", phase_matrix("allreduce", phase_allreduce, 0));
  report("first allreduce", "vulkan", phase_matrix("allreduce", phase_allreduce, 1));
}

static void test_ops(void **state) {
  (void)state;
  static const struct { enum op_kind op; const char *name; bool enabled; } ops[] = {
      {OP_COPY, "first copy", IS_ENABLED(CONFIG_VKRT_KERNEL_COPY)},
      {OP_TRANSPOSE, "first transpose", IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE)},
      {OP_CONCAT, "first concat", IS_ENABLED(CONFIG_VKRT_KERNEL_CONCAT)},
      {OP_ADD, "first add", IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE)},
      {OP_MATMUL, "first matmul", IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL)},
  };
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    if (!ops[i].enabled)
      continue;
    current_op = ops[i].op;
    report(ops[i].name, "host", phase_matrix(ops[i].name, phase_op, 0));
    report(ops[i].name, "vulkan", phase_matrix(ops[i].name, phase_op, 1));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open),
      cmocka_unit_test(test_register),
      cmocka_unit_test(test_allreduce),
      cmocka_unit_test(test_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
