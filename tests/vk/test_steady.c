/* Steady state allocates nothing: after a warm-up, 1000 cycles of record (copy,
 * transpose, concat, matmul, add on every device, then an allreduce), submit and wait make
 * zero host allocations by libvkrt through the injected allocator (counted by the
 * appliance's own counter of vkrt_allocator calls, which fault injection resets) and zero
 * vkAllocateMemory. Calls the driver and the validation layer make through the same
 * allocator are counted too and reported; they must stay at a plateau (no growth). The
 * results of the last cycle are checked against CPU references on fresh random inputs.
 *
 * libc's allocator is interposed too (malloc, calloc, realloc, free, aligned_alloc,
 * posix_memalign, memalign, defined here, forwarding to glibc's __libc_* functions): over the
 * same cycles, a call made from this program's own code (libvkrt is linked in statically),
 * outside the injected allocator, is a libc allocation by libvkrt and must not happen; calls
 * from the driver, the layer and the loader (their code lies in shared objects) are counted
 * and reported. Sanitizer builds keep their own allocator (the count is skipped there). */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/vk_test.h"

#define NDEV 2
#define CYCLES 1000
#define K 64   /* matmul inner size */
#define N 32   /* matmul outputs */
#define R 48   /* transpose / concat rows of a */
#define C 32
#define RB 16  /* concat rows of b */
#define AR 256 /* allreduce elements */
#define WARMUP 32

/* ---- libc's allocator, interposed ----------------------------------------------------- */

static atomic_bool libc_counting;
static atomic_long libc_own, libc_other;
static atomic_uintptr_t libc_own_first; /* the first own caller, as an offset for addr2line */
static _Thread_local int in_injected;   /* inside the injected allocator (counted apart) */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LIBC_COUNTED 0
#else
#define LIBC_COUNTED 1
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *ptr, size_t size);
void __libc_free(void *ptr);
void *__libc_memalign(size_t alignment, size_t size);
extern char __executable_start[], etext[]; /* this program's code: the test and libvkrt */


static void libc_note(void *caller) {
  if (!atomic_load_explicit(&libc_counting, memory_order_relaxed) || in_injected)
    return;
  if ((char *)caller >= __executable_start && (char *)caller < etext) {
    uintptr_t none = 0;
    atomic_compare_exchange_strong(&libc_own_first, &none,
                                   (uintptr_t)((char *)caller - __executable_start));
    atomic_fetch_add(&libc_own, 1);
  } else {
    atomic_fetch_add(&libc_other, 1);
  }
}

void *malloc(size_t size) {
  libc_note(__builtin_return_address(0));
  return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
  libc_note(__builtin_return_address(0));
  return __libc_calloc(count, size);
}

void *realloc(void *ptr, size_t size) {
  libc_note(__builtin_return_address(0));
  return __libc_realloc(ptr, size);
}

void free(void *ptr) {
  if (ptr)
    libc_note(__builtin_return_address(0));
  __libc_free(ptr);
}

void *aligned_alloc(size_t alignment, size_t size) {
  libc_note(__builtin_return_address(0));
  return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
  libc_note(__builtin_return_address(0));
  return __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  libc_note(__builtin_return_address(0));
  void *p = __libc_memalign(alignment, size);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}
#endif

/* The counting allocator, marked so that its own libc calls are not counted as libvkrt's:
 * they are the injected allocator's (libvkrt's through it are counted by the appliance, the
 * driver's and the layer's reported). */
static vkrt_allocator counted;

static void *marked_alloc(void *user, size_t size, size_t alignment) {
  in_injected++;
  void *p = counted.alloc(user, size, alignment);
  in_injected--;
  return p;
}

static void *marked_realloc(void *user, void *ptr, size_t size, size_t alignment) {
  in_injected++;
  void *p = counted.realloc(user, ptr, size, alignment);
  in_injected--;
  return p;
}

static void marked_free(void *user, void *ptr) {
  in_injected++;
  counted.free(user, ptr);
  in_injected--;
}

struct dev_bufs {
  vkrt_buffer *a, *a2, *b, *copy, *tr, *cat, *sum, *w, *x, *y, *send, *recv;
};

static vkrt_buffer *make(vkrt_appliance *app, uint32_t d, uint64_t floats) {
  vkrt_buffer *buf = NULL;
  vkt_check(app, vkrt_buffer_create(app, d, floats * 4, VKRT_BUFFER_DEVICE_LOCAL, &buf));
  return buf;
}

static void put(vkrt_appliance *app, vkrt_buffer *buf, const float *v, uint64_t n) {
  vkt_check(app, vkrt_upload(buf, 0, v, n * 4));
}

static void get(vkrt_appliance *app, float *v, vkrt_buffer *buf, uint64_t n) {
  vkt_check(app, vkrt_download(v, buf, 0, n * 4));
}

/* One cycle: record every op on every device, the allreduce, then submit and wait. */
static void cycle(vkrt_appliance *app, struct dev_bufs *db) {
  vkrt_allreduce_args ar = {.count = AR, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < NDEV; d++) {
    struct dev_bufs *b = &db[d];
    vkrt_tensor a = vkrt_tensor_contiguous(b->a, 0, VKRT_TYPE_F32, R, C, 1, 1);
    vkrt_tensor a2 = vkrt_tensor_contiguous(b->a2, 0, VKRT_TYPE_F32, R, C, 1, 1);
    vkrt_tensor bb = vkrt_tensor_contiguous(b->b, 0, VKRT_TYPE_F32, RB, C, 1, 1);
    vkrt_tensor cp = vkrt_tensor_contiguous(b->copy, 0, VKRT_TYPE_F32, R, C, 1, 1);
    vkrt_tensor tr = vkrt_tensor_contiguous(b->tr, 0, VKRT_TYPE_F32, C, R, 1, 1);
    vkrt_tensor cat = vkrt_tensor_contiguous(b->cat, 0, VKRT_TYPE_F32, R + RB, C, 1, 1);
    vkrt_tensor sum = vkrt_tensor_contiguous(b->sum, 0, VKRT_TYPE_F32, R, C, 1, 1);
    vkrt_tensor w = vkrt_tensor_contiguous(b->w, 0, VKRT_TYPE_F32, K, N, 1, 1);
    vkrt_tensor x = vkrt_tensor_contiguous(b->x, 0, VKRT_TYPE_F32, K, 1, 1, 1);
    vkrt_tensor y = vkrt_tensor_contiguous(b->y, 0, VKRT_TYPE_F32, N, 1, 1, 1);
    const vkrt_tensor *srcs[2] = {&a, &a2};
    vkt_check(app, vkrt_op_copy(&cp, &a));
    vkt_check(app, vkrt_op_transpose(&tr, &a));
    vkt_check(app, vkrt_op_concat(&cat, &a, &bb, 0));
    vkt_check(app, vkrt_op_matmul(&y, &w, &x));
    vkt_check(app, vkrt_op_add(&sum, srcs, 2));
    ar.send[d] = b->send;
    ar.recv[d] = b->recv;
  }
  vkt_check(app, vkrt_allreduce(app, &ar));
  for (uint32_t d = 0; d < NDEV; d++) {
    uint64_t ticket = 0;
    vkt_check(app, vkrt_submit(app, d, &ticket));
    vkt_check(app, vkrt_wait(app, d, ticket, UINT64_MAX));
  }
}

static void check_close(const float *got, const float *want, size_t n, double tol,
                        const char *what) {
  for (size_t i = 0; i < n; i++)
    if (!(fabs((double)got[i] - (double)want[i]) <= tol * (1.0 + fabs((double)want[i]))))
      fail_msg("%s[%zu] = %g, expected %g", what, i, (double)got[i], (double)want[i]);
}

static void test_steady_state_allocates_nothing(void **state) {
  (void)state;
  if (!IS_ENABLED(CONFIG_VKRT_KERNEL_COPY) || !IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE) ||
      !IS_ENABLED(CONFIG_VKRT_KERNEL_CONCAT) || !IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL) ||
      !IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE) || !IS_ENABLED(CONFIG_VKRT_COLLECTIVES))
    skip();
  vkt_counting counting = {0};
  vkrt_options o;
  vkt_options(&o);
  o.device_count = NDEV;
  counted = vkt_counting_allocator(&counting);
  o.allocator = (vkrt_allocator){.user = counted.user, .alloc = marked_alloc,
                                 .realloc = marked_realloc, .free = marked_free};
  vkrt_appliance *app = vkt_open(&o);

  uint64_t seed = vkt_seed(0);
  static float a[NDEV][R * C], a2[NDEV][R * C], b[NDEV][RB * C], w[NDEV][K * N], x[NDEV][K],
      send[NDEV][AR];
  static float got[(R + RB) * C], want[(R + RB) * C];
  struct dev_bufs db[NDEV];
  for (uint32_t d = 0; d < NDEV; d++) {
    db[d] = (struct dev_bufs){make(app, d, R * C), make(app, d, R * C), make(app, d, RB * C),
                              make(app, d, R * C), make(app, d, R * C),
                              make(app, d, (R + RB) * C), make(app, d, R * C),
                              make(app, d, K * N), make(app, d, K), make(app, d, N),
                              make(app, d, AR), make(app, d, AR)};
    vkt_fill_random_f32(a[d], R * C, -1, 1, &seed);
    vkt_fill_random_f32(a2[d], R * C, -1, 1, &seed);
    vkt_fill_random_f32(b[d], RB * C, -1, 1, &seed);
    vkt_fill_random_f32(w[d], K * N, -1, 1, &seed);
    vkt_fill_random_f32(x[d], K, -1, 1, &seed);
    vkt_fill_random_f32(send[d], AR, -1, 1, &seed);
    put(app, db[d].a, a[d], R * C);
    put(app, db[d].a2, a2[d], R * C);
    put(app, db[d].b, b[d], RB * C);
    put(app, db[d].w, w[d], K * N);
    put(app, db[d].x, x[d], K);
    put(app, db[d].send, send[d], AR);
  }

  /* Warm-up: every command buffer of the stream ring (16 per device) recorded twice, so the
   * driver's per-command-buffer memory has reached its size. */
  for (int i = 0; i < WARMUP; i++)
    cycle(app, db);
  uint32_t own_host = UINT32_MAX, own_vulkan = UINT32_MAX;
  vkt_check(app, vkrt_fault_arm_allocations(app, 0, 0)); /* libvkrt's counters restart */
  long total_before = atomic_load(&counting.total), live_before = atomic_load(&counting.live);
  long live_max = live_before;
  atomic_store(&libc_counting, true);
  for (int i = 0; i < CYCLES; i++) {
    cycle(app, db);
    long live = atomic_load(&counting.live);
    live_max = live > live_max ? live : live_max;
  }
  atomic_store(&libc_counting, false);
  long others = atomic_load(&counting.total) - total_before;
  long live_after = atomic_load(&counting.live);
  vkt_check(app, vkrt_fault_allocation_counts(app, &own_host, &own_vulkan));
  print_message("vkrt-test: steady state: %d cycles of copy, transpose, concat, matmul, add on "
                "%d devices + allreduce + submit + wait: libvkrt host allocations through the "
                "injected allocator %u, vkAllocateMemory %u; driver and layer calls through it "
                "%ld (live %ld -> %ld, max %ld)\n", CYCLES, NDEV, own_host, own_vulkan, others,
                live_before, live_after, live_max);
  assert_int_equal(own_host, 0);
  assert_int_equal(own_vulkan, 0);
  if (LIBC_COUNTED) {
    print_message("vkrt-test: libc allocator calls over those cycles: %ld from libvkrt, %ld "
                  "from the driver, the layer and the loader\n", atomic_load(&libc_own),
                  atomic_load(&libc_other));
    if (atomic_load(&libc_own))
      fail_msg("%ld libc allocator calls from libvkrt over %d cycles (the first from "
               "test_steady+0x%lx: addr2line -f -e tests/vk/test_steady 0x%lx)",
               atomic_load(&libc_own), CYCLES, (unsigned long)atomic_load(&libc_own_first),
               (unsigned long)atomic_load(&libc_own_first));
  } else {
    print_message("vkrt-test: libc allocator calls not counted (a sanitizer owns malloc)\n");
  }
  /* The driver and layer may allocate per command and free it again; a leak would grow the
   * live count by thousands over 1000 cycles. */
  assert_true(live_after <= live_before + 64 && live_max <= live_before + 64);

  /* The last cycle's results against CPU references (poisoned outputs first, one more). */
  for (uint32_t d = 0; d < NDEV; d++) {
    static float poison[(R + RB) * C];
    vkt_poison(poison, sizeof(poison));
    put(app, db[d].copy, poison, R * C);
    put(app, db[d].tr, poison, R * C);
    put(app, db[d].cat, poison, (R + RB) * C);
    put(app, db[d].sum, poison, R * C);
    put(app, db[d].y, poison, N);
    put(app, db[d].recv, poison, AR);
  }
  cycle(app, db);
  for (uint32_t d = 0; d < NDEV; d++) {
    get(app, got, db[d].copy, R * C);
    check_close(got, a[d], R * C, 0, "copy");
    get(app, got, db[d].tr, R * C);
    for (int i1 = 0; i1 < R; i1++)
      for (int i0 = 0; i0 < C; i0++)
        want[i0 + C * i1] = a[d][i1 + R * i0];
    check_close(got, want, R * C, 0, "transpose");
    get(app, got, db[d].cat, (R + RB) * C);
    for (int j = 0; j < C; j++)
      for (int i = 0; i < R + RB; i++)
        want[i + (R + RB) * j] = i < R ? a[d][i + R * j] : b[d][i - R + RB * j];
    check_close(got, want, (R + RB) * C, 0, "concat");
    get(app, got, db[d].sum, R * C);
    for (int i = 0; i < R * C; i++)
      want[i] = a[d][i] + a2[d][i];
    check_close(got, want, R * C, 1e-6, "add");
    get(app, got, db[d].y, N);
    for (int n = 0; n < N; n++) {
      double acc = 0;
      for (int k = 0; k < K; k++)
        acc += (double)w[d][k + K * n] * x[d][k];
      want[n] = (float)acc;
    }
    check_close(got, want, N, 1e-4, "matmul");
    get(app, got, db[d].recv, AR);
    for (int i = 0; i < AR; i++) {
      float s = 0;
      for (int r = 0; r < NDEV; r++)
        s += send[r][i];
      want[i] = s;
    }
    check_close(got, want, AR, 1e-6, "allreduce");
  }
  for (uint32_t d = 0; d < NDEV; d++) {
    vkrt_buffer **bufs = (vkrt_buffer **)&db[d];
    for (size_t i = 0; i < sizeof(db[d]) / sizeof(vkrt_buffer *); i++)
      vkrt_buffer_destroy(bufs[i]);
  }
  vkt_close(app);
  assert_int_equal(atomic_load(&counting.live), 0);
}

/* The pipelines built so far on every device, as vkrt_describe reports them ("vkrt: dev<i>
 * pipelines <when> (<n> ready)"). */
static uint32_t pipelines_ready(vkrt_appliance *app) {
  static char text[1 << 16];
  vkrt_describe(app, false, text, sizeof(text));
  uint32_t n = 0;
  for (uint32_t d = 0; d < NDEV; d++) {
    char key[32];
    snprintf(key, sizeof(key), "vkrt: dev%u pipelines ", d);
    const char *line = strstr(text, key), *ready = line ? strstr(line, " ready)") : NULL;
    const char *open = ready ? ready : NULL;
    while (open && open > line && *open != '(')
      open--;
    unsigned v = 0;
    if (!open || sscanf(open, "(%u ready)", &v) != 1)
      fail_msg("vkrt_describe has no '%s... (<n> ready)' line", key);
    n += v;
  }
  return n;
}

/* Pipelines built at open say how ("built at open on <n> thread(s) in <t> ms"): on more
 * than one thread where the machine has several CPUs, unless the driver already had the
 * binaries ("(the driver had them)": then one, as the threads would only contend). */
static void check_build_threads(vkrt_appliance *app) {
  static char text[1 << 16];
  vkrt_describe(app, false, text, sizeof(text));
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (uint32_t d = 0; d < NDEV; d++) {
    char key[48];
    snprintf(key, sizeof(key), "vkrt: dev%u pipelines built at open on ", d);
    const char *line = strstr(text, key), *end = line ? strchr(line, '\n') : NULL;
    unsigned threads = 0;
    if (!line || sscanf(line + strlen(key), "%u thread", &threads) != 1 || !threads)
      fail_msg("vkrt_describe has no '%s<n> thread(s) ...' line", key);
    const char *had = strstr(line, "(the driver had them)");
    bool cached = had && (!end || had < end);
    print_message("vkrt-test: dev%u pipelines on %u thread(s)%s, %ld CPUs\n", d, threads,
                  cached ? " (the driver had them)" : "", cpus);
    if (cached)
      assert_int_equal(threads, 1);
    else if (cpus > 1)
      assert_true(threads > 1);
  }
}

/* One appliance's first cycle: libvkrt's allocations during it and the pipelines it built. */
static void first_cycle(uint32_t pipelines, unsigned *own_host, unsigned *own_vulkan,
                        uint32_t *built_at_open, uint32_t *built_by_cycle) {
  vkrt_options o;
  vkt_options(&o);
  o.device_count = NDEV;
  o.pipelines = pipelines;
  vkrt_appliance *app = vkt_open(&o);
  struct dev_bufs db[NDEV];
  uint64_t seed = vkt_seed(0);
  static float v[K * N];
  vkt_fill_random_f32(v, K * N, -1, 1, &seed);
  for (uint32_t d = 0; d < NDEV; d++) {
    db[d] = (struct dev_bufs){make(app, d, R * C), make(app, d, R * C), make(app, d, RB * C),
                              make(app, d, R * C), make(app, d, R * C),
                              make(app, d, (R + RB) * C), make(app, d, R * C),
                              make(app, d, K * N), make(app, d, K), make(app, d, N),
                              make(app, d, AR), make(app, d, AR)};
    vkrt_buffer **bufs = (vkrt_buffer **)&db[d];
    for (size_t i = 0; i < sizeof(db[d]) / sizeof(vkrt_buffer *); i++)
      put(app, bufs[i], v, vkrt_buffer_size(bufs[i]) / 4);
  }
  *built_at_open = pipelines_ready(app);
  if (pipelines == VKRT_PIPELINES_AT_OPEN)
    check_build_threads(app);
  vkt_check(app, vkrt_fault_arm_allocations(app, 0, 0)); /* libvkrt's counters restart */
  cycle(app, db);
  vkt_check(app, vkrt_fault_allocation_counts(app, own_host, own_vulkan));
  *built_by_cycle = pipelines_ready(app) - *built_at_open;
  for (uint32_t d = 0; d < NDEV; d++) {
    vkrt_buffer **bufs = (vkrt_buffer **)&db[d];
    for (size_t i = 0; i < sizeof(db[d]) / sizeof(vkrt_buffer *); i++)
      vkrt_buffer_destroy(bufs[i]);
  }
  vkt_close(app);
}

/* With the pipelines built at open (the default on GPUs), the very first dispatch of every op
 * creates no pipeline and libvkrt allocates nothing; built on first use (the default on CPU
 * devices), the same cycle builds them. */
static void test_first_dispatch_builds_nothing(void **state) {
  (void)state;
  if (!IS_ENABLED(CONFIG_VKRT_KERNEL_COPY) || !IS_ENABLED(CONFIG_VKRT_KERNEL_TRANSPOSE) ||
      !IS_ENABLED(CONFIG_VKRT_KERNEL_CONCAT) || !IS_ENABLED(CONFIG_VKRT_KERNEL_MATMUL) ||
      !IS_ENABLED(CONFIG_VKRT_KERNEL_REDUCE) || !IS_ENABLED(CONFIG_VKRT_COLLECTIVES))
    skip();
  unsigned host = 0, vulkan = 0;
  uint32_t at_open = 0, by_cycle = 0;
  first_cycle(VKRT_PIPELINES_AT_OPEN, &host, &vulkan, &at_open, &by_cycle);
  print_message("vkrt-test: pipelines at open: %u built before the first cycle, %u by it; "
                "libvkrt allocations in it: host %u, vkAllocateMemory %u\n", at_open, by_cycle,
                host, vulkan);
  assert_true(at_open > 0);
  assert_int_equal(by_cycle, 0);
  assert_int_equal(host, 0);
  assert_int_equal(vulkan, 0);
  first_cycle(VKRT_PIPELINES_ON_FIRST_USE, &host, &vulkan, &at_open, &by_cycle);
  /* (uploads before the cycle may have built a copy pipeline or two) */
  print_message("vkrt-test: pipelines on first use: %u built before the first cycle, %u by it\n",
                at_open, by_cycle);
  assert_true(by_cycle > 0);
  /* a value outside vkrt_pipelines is refused with a message */
  vkrt_options o;
  vkt_options(&o);
  o.pipelines = 3;
  vkrt_appliance *app = (vkrt_appliance *)1;
  char why[256];
  assert_int_equal(vkrt_open(&o, &app, why, sizeof(why)), VKRT_ERROR_INVALID_ARGUMENT);
  assert_null(app);
  assert_non_null(strstr(why, "options.pipelines"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steady_state_allocates_nothing),
      cmocka_unit_test(test_first_dispatch_builds_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
