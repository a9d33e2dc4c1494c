/* Allocation-failure matrix (Vulkan CTS intentional_alloc_fail style): fail the 1st, 2nd, ...
 * Nth host allocation libvkrt makes (through the injected allocator) and the Nth
 * vkAllocateMemory during vkrt_open, vkrt_host_register, the first allreduce and the first
 * dispatch of each op. N runs over every allocation the call makes, as counted by a run
 * without faults (vkrt_fault_allocation_counts). Each failing run must return a clean status
 * with a message, leave no allocation live after close (the counting allocator sees the
 * driver's allocations too), and a retry without the fault must succeed. A run whose failed
 * allocation a fallback absorbed (e.g. pre-stage after a refused import) must succeed and
 * leak nothing as well; those are counted separately.
 *
 * A driver that cannot recover: when the retry after a failed case fails in this process
 * (seen on NVIDIA: every later vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER), the
 * matrix says so (with the open file descriptors before and after, the usual way such a
 * state builds up) and runs that case and every remaining one in a child process of its own
 * (this program re-executed with VKRT_ALLOC_FAIL_CASE set); a case failing there too fails
 * the test. VKRT_ALLOC_FAIL_ISOLATE=1 runs every case in a child from the start. */
#include <dirent.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>
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


static const char *const kind_names[2] = {"host", "vulkan"};

static uint32_t pick(int kind, uint32_t host, uint32_t vulkan) { return kind ? vulkan : host; }

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d)
    return -1;
  while (readdir(d))
    n++;
  closedir(d);
  return n - 3; /* ., .., the DIR's own fd */
}

/* Phases: 0 vkrt_open, 1 register, 2 first allreduce, 3 + op: first dispatch of that op. */
enum { PHASE_OPEN, PHASE_REGISTER, PHASE_ALLREDUCE, PHASE_OP };

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


static phase_fn phase_function(int phase) {
  if (phase == PHASE_REGISTER)
    return phase_register;
  if (phase == PHASE_ALLREDUCE)
    return phase_allreduce;
  current_op = (enum op_kind)(phase - PHASE_OP);
  return phase_op;
}

enum case_result { CASE_FAILED_CLEANLY, CASE_ABSORBED, CASE_BROKEN, CASE_NOT_RECOVERED };

/* One case: the phase with the Nth allocation of `kind` failing (n = 0: none, counting the
 * allocations into *count). why gets the reason for CASE_BROKEN / CASE_NOT_RECOVERED. */
static enum case_result one_case(int phase, int kind, uint32_t n, uint32_t *count, char *why,
                                 size_t why_size) {
  vkt_counting c;
  vkrt_options o;
  options_with_counter(&o, &c);
  o.log = NULL;
  if (phase == PHASE_OPEN && n) {
    if (kind == 0)
      o.faults.host_alloc_fail_at = n;
    else
      o.faults.vulkan_alloc_fail_at = n;
  }
  vkrt_appliance *app = NULL;
  char msg[512] = "";
  vkrt_status s = vkrt_open(&o, &app, msg, sizeof(msg));
  if (phase == PHASE_OPEN) {
    if (s == VKRT_OK && n == 0) {
      uint32_t host = 0, vulkan = 0;
      vkrt_fault_allocation_counts(app, &host, &vulkan);
      *count = pick(kind, host, vulkan);
    }
    if (s == VKRT_OK) {
      vkrt_close(app);
      if (atomic_load(&c.live) != 0) {
        snprintf(why, why_size, "%ld allocations leaked", (long)atomic_load(&c.live));
        return CASE_BROKEN;
      }
      return CASE_ABSORBED;
    }
    if (n == 0) {
      snprintf(why, why_size, "open without faults failed: %s: %s", vkrt_status_str(s), msg);
      return CASE_NOT_RECOVERED;
    }
    if (app || msg[0] == '\0' || atomic_load(&c.live) != 0) {
      snprintf(why, why_size, "failed open: appliance %p, message '%s', %ld allocations leaked",
               (void *)app, msg, (long)atomic_load(&c.live));
      return CASE_BROKEN;
    }
    /* The retry without the fault succeeds. */
    options_with_counter(&o, &c);
    o.log = NULL;
    s = vkrt_open(&o, &app, msg, sizeof(msg));
    if (s != VKRT_OK) {
      snprintf(why, why_size, "retry open failed: %s: %s", vkrt_status_str(s), msg);
      return CASE_NOT_RECOVERED;
    }
    vkrt_close(app);
    if (atomic_load(&c.live) != 0) {
      snprintf(why, why_size, "retry leaked %ld allocations", (long)atomic_load(&c.live));
      return CASE_BROKEN;
    }
    return CASE_FAILED_CLEANLY;
  }
  if (s != VKRT_OK) {
    snprintf(why, why_size, "open without faults failed: %s: %s", vkrt_status_str(s), msg);
    return CASE_NOT_RECOVERED;
  }
  phase_fn fn = phase_function(phase);
  vkrt_fault_arm_allocations(app, kind == 0 ? n : 0, kind == 1 ? n : 0); /* counts from here */
  s = fn(app, NULL);
  enum case_result r = CASE_ABSORBED;
  if (n == 0) {
    uint32_t host = 0, vulkan = 0;
    vkrt_fault_allocation_counts(app, &host, &vulkan);
    *count = pick(kind, host, vulkan);
    if (s != VKRT_OK) {
      snprintf(why, why_size, "without faults: %s: %s", vkrt_status_str(s), vkrt_last_error(app));
      r = CASE_BROKEN;
    }
  } else if (s != VKRT_OK) {
    vkrt_fault_arm_allocations(app, 0, 0);
    if (strlen(vkrt_last_error(app)) == 0 || !strcmp(vkrt_last_error(app), "no error")) {
      snprintf(why, why_size, "%s without a message", vkrt_status_str(s));
      r = CASE_BROKEN;
    } else {
      /* The retry without the fault succeeds on the same appliance. */
      vkrt_status retry = fn(app, NULL);
      if (retry != VKRT_OK) {
        snprintf(why, why_size, "retry failed: %s: %s", vkrt_status_str(retry),
                 vkrt_last_error(app));
        r = CASE_BROKEN;
      } else {
        r = CASE_FAILED_CLEANLY;
      }
    }
  }
  vkrt_close(app);
  if (r != CASE_BROKEN && atomic_load(&c.live) != 0) {
    snprintf(why, why_size, "%ld allocations leaked", (long)atomic_load(&c.live));
    r = CASE_BROKEN;
  }
  return r;
}

/* Set once the driver did not recover in this process: every later case runs in a child. */
static bool isolate;

/* The case in a fresh process: this program with VKRT_ALLOC_FAIL_CASE="phase kind n". */
static enum case_result child_case(int phase, int kind, uint32_t n, uint32_t *count, char *why,
                                   size_t why_size) {
  char cmd[256];
  snprintf(cmd, sizeof(cmd), "VKRT_ALLOC_FAIL_CASE='%d %d %u' /proc/%d/exe", phase, kind, n,
           (int)getpid());
  FILE *p = popen(cmd, "r");
  if (!p) {
    snprintf(why, why_size, "popen: %s", strerror(errno));
    return CASE_BROKEN;
  }
  char line[1024];
  int result = -1;
  unsigned cnt = 0;
  why[0] = '\0';
  while (fgets(line, sizeof(line), p)) {
    if (sscanf(line, "vkrt-alloc-case: result %d count %u", &result, &cnt) == 2) {
      const char *w = strstr(line, " why ");
      if (w)
        snprintf(why, why_size, "%s", w + 5);
      why[strcspn(why, "\n")] = '\0';
    }
  }
  int st = pclose(p);
  if (result < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    snprintf(why + strlen(why), why_size - strlen(why), " (child exit status %d)", st);
    return CASE_BROKEN;
  }
  *count = cnt;
  return (enum case_result)result;
}

static enum case_result run_case(const char *name, int phase, int kind, uint32_t n,
                                 uint32_t *count) {
  char why[768] = "";
  if (!isolate) {
    int fds_before = open_fds();
    enum case_result r = one_case(phase, kind, n, count, why, sizeof(why));
    if (r != CASE_NOT_RECOVERED) {
      if (r == CASE_BROKEN)
        fail_msg("%s with %s allocation %u failing: %s", name, kind_names[kind], n, why);
      return r;
    }
    isolate = true;
    printf("vkrt-test: alloc-fail: the driver did not recover in this process after %s with "
           "%s allocation %u failing (%s; open file descriptors %d before the case, %d "
           "after): this case and every remaining one run in a child process of its own\n",
           name, kind_names[kind], n, why, fds_before, open_fds());
  }
  enum case_result r = child_case(phase, kind, n, count, why, sizeof(why));
  if (r == CASE_BROKEN || r == CASE_NOT_RECOVERED)
    fail_msg("%s with %s allocation %u failing (child process): %s", name, kind_names[kind], n,
             why);
  return r;
}

static struct phase_result matrix(const char *name, int phase, int kind) {
  struct phase_result r = {0};
  run_case(name, phase, kind, 0, &r.allocations);
  assert_true(r.allocations <= MAX_N);
  for (uint32_t n = 1; n <= r.allocations; n++) {
    uint32_t unused = 0;
    if (run_case(name, phase, kind, n, &unused) == CASE_ABSORBED)
      r.absorbed_runs++;
    else
      r.failed_runs++;
  }
  return r;
}

static void report(const char *what, const char *kind, struct phase_result r) {
  printf("vkrt-test: alloc-fail: %-20s %-6s %4u allocations, each failed once: %u clean "
         "failures (retry ok), %u absorbed by a fallback, 0 leaked%s\n",
         what, kind, r.allocations, r.failed_runs, r.absorbed_runs,
         isolate ? " (child processes)" : "");
}

static void test_open(void **state) {
  (void)state;
  report("vkrt_open", "host", matrix("open", PHASE_OPEN, 0));
  report("vkrt_open", "vulkan", matrix("open", PHASE_OPEN, 1));
}

static void test_register(void **state) {
  (void)state;
  report("vkrt_host_register", "host", matrix("register", PHASE_REGISTER, 0));
  report("vkrt_host_register", "vulkan", matrix("register", PHASE_REGISTER, 1));
}

static void test_allreduce(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_COLLECTIVES));
  report("first allreduce", "host", matrix("allreduce", PHASE_ALLREDUCE, 0));
  report("first allreduce", "vulkan", matrix("allreduce", PHASE_ALLREDUCE, 1));
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
    report(ops[i].name, "host", matrix(ops[i].name, PHASE_OP + ops[i].op, 0));
    report(ops[i].name, "vulkan", matrix(ops[i].name, PHASE_OP + ops[i].op, 1));
  }
}

static void region_init(void) {
  region = aligned_alloc(4096, REGION_BYTES);
  uint64_t seed = 12345;
  vkt_fill_random(region, REGION_BYTES, &seed);
}

int main(void) {
  region_init();
  const char *child = getenv("VKRT_ALLOC_FAIL_CASE");
  if (child) {
    int phase, kind;
    unsigned n;
    if (sscanf(child, "%d %d %u", &phase, &kind, &n) != 3)
      return 2;
    uint32_t count = 0;
    char why[768] = "";
    enum case_result r = one_case(phase, kind, n, &count, why, sizeof(why));
    printf("vkrt-alloc-case: result %d count %u why %s\n", (int)r, count, why);
    return 0;
  }
  const char *iso = getenv("VKRT_ALLOC_FAIL_ISOLATE");
  isolate = iso && strcmp(iso, "1") == 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open),
      cmocka_unit_test(test_register),
      cmocka_unit_test(test_allreduce),
      cmocka_unit_test(test_ops),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  free(region);
  return failed;
}
