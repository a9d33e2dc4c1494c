#include "vk_test.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* log_user of the harness's log: NULL, or &vkt_expected when the appliance runs with
 * injected faults, whose errors and warnings are the behaviour under test. */
static const char vkt_expected[] = "expected (injected fault): ";

/* Allocation faults armed on an open appliance (vkt_fault_arm): its errors until disarmed
 * are expected too. */
static atomic_bool vkt_armed;

static void log_stderr(void *user, vkrt_log_level level, const char *message) {
  static const char *const names[] = {"error", "warn", "info", "debug"};
  bool expected = user == vkt_expected || atomic_load(&vkt_armed);
  fprintf(stderr, "vkrt-test: %s%s: %s\n", expected ? vkt_expected : "", names[level & 3],
          message);
}

#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
vkrt_status vkt_fault_arm(vkrt_appliance *app, uint32_t host_alloc_fail_at,
                          uint32_t vulkan_alloc_fail_at) {
  atomic_store(&vkt_armed, host_alloc_fail_at || vulkan_alloc_fail_at);
  return vkrt_fault_arm_allocations(app, host_alloc_fail_at, vulkan_alloc_fail_at);
}
#endif

static bool faults_injected(const vkrt_options *o) {
  const vkrt_fault_options *f = &o->faults;
  return f->mask || f->host_alloc_fail_at || f->vulkan_alloc_fail_at || f->import_chunk_cap ||
         f->import_policy_override || f->release_delay_us || f->release_hook;
}

void vkt_expect_errors(vkrt_options *o) {
  if (o->log == log_stderr)
    o->log_user = (void *)vkt_expected;
}

bool vkt_sync_validation_pass(void) {
  const char *sync = getenv("VKRT_TEST_SYNC_VALIDATION");
  return sync && sync[0] == '1';
}

void vkt_options(vkrt_options *o) {
  vkrt_options_initialize(o);
  /* VKRT_TEST_VALIDATION=0 turns the layer off for one run (tools/mutation-check.sh: a
   * test must catch a copy past a chunk through the counters alone). */
  const char *validation = getenv("VKRT_TEST_VALIDATION");
  o->enable_validation = IS_ENABLED(CONFIG_VKRT_VALIDATION_IN_TESTS) &&
                         !(validation && validation[0] == '0');
  /* tests/run sets this for its second pass: synchronization validation on (hazards are
   * validation messages, so vkt_close fails the test on any). */
  o->enable_sync_validation = o->enable_validation && vkt_sync_validation_pass();
  o->log = log_stderr;
  o->log_level = VKRT_LOG_WARN;
}

vkrt_appliance *vkt_open(const vkrt_options *options) {
  vkrt_options o = *options;
  if (faults_injected(&o))
    vkt_expect_errors(&o);
  vkrt_appliance *app = NULL;
  char why[1024];
  vkrt_status s = vkrt_open(&o, &app, why, sizeof(why));
  if (s != VKRT_OK)
    fail_msg("vkrt_open: %s: %s", vkrt_status_str(s), why);
  assert_non_null(app);
  return app;
}

void vkt_close(vkrt_appliance *app) {
  uint32_t messages = vkrt_validation_message_count(app);
  vkrt_close(app);
  assert_int_equal(messages, 0);
}

uint64_t vkt_seed(uint64_t seed) {
  if (seed == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_nsec * 6364136223846793005ull + (uint64_t)ts.tv_sec;
    if (seed == 0)
      seed = 0x9e3779b97f4a7c15ull;
  }
  fprintf(stderr, "vkrt-test: random seed %llu\n", (unsigned long long)seed);
  return seed;
}

void vkt_fill_random(void *ptr, size_t bytes, uint64_t *state) {
  uint8_t *p = ptr;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t v = vkrt_xorshift(state);
    memcpy(p + i, &v, 8);
  }
  if (i < bytes) {
    uint64_t v = vkrt_xorshift(state);
    memcpy(p + i, &v, bytes - i);
  }
  if (bytes) /* never all zero, whatever the generator did */
    p[0] |= 1;
}

void vkt_fill_random_f32(float *out, size_t count, float lo, float hi, uint64_t *state) {
  for (size_t i = 0; i < count; i++)
    out[i] = lo + (hi - lo) * (float)((vkrt_xorshift(state) >> 40) * (1.0 / 16777216.0));
}

double vkt_rms_scale(const float *x, int64_t n, double eps) {
  double ss = 0;
  for (int64_t k = 0; k < n; k++)
    ss += (double)x[k] * x[k];
  return 1.0 / sqrt(ss / (double)n + eps);
}

void vkt_poison(void *ptr, size_t bytes) {
  static const uint8_t pattern[4] = {0xef, 0xbe, 0xad, 0xde};
  uint8_t *p = ptr;
  for (size_t i = 0; i < bytes; i++)
    p[i] = pattern[i & 3];
}

/* ---- counting allocator ------------------------------------------------------------- */

struct block {
  size_t size;
  size_t offset;
};

static void *count_alloc(void *user, size_t size, size_t alignment) {
  vkt_counting *c = user;
  if (alignment < 16)
    alignment = 16;
  size_t offset = (sizeof(struct block) + alignment - 1) / alignment * alignment;
  void *raw = NULL;
  if (posix_memalign(&raw, alignment, size + offset) != 0)
    return NULL;
  uint8_t *p = (uint8_t *)raw + offset;
  struct block *b = (struct block *)(void *)(p - sizeof(*b));
  b->size = size;
  b->offset = offset;
  atomic_fetch_add(&c->live, 1);
  atomic_fetch_add(&c->total, 1);
  atomic_fetch_add(&c->bytes_live, (long)size);
  return p;
}

static void count_free(void *user, void *ptr) {
  vkt_counting *c = user;
  if (!ptr)
    return;
  struct block *b = (struct block *)(void *)((uint8_t *)ptr - sizeof(*b));
  atomic_fetch_sub(&c->live, 1);
  atomic_fetch_sub(&c->bytes_live, (long)b->size);
  free((uint8_t *)ptr - b->offset);
}

static void *count_realloc(void *user, void *ptr, size_t size, size_t alignment) {
  if (!ptr)
    return count_alloc(user, size, alignment);
  struct block *b = (struct block *)(void *)((uint8_t *)ptr - sizeof(*b));
  void *p = count_alloc(user, size, alignment);
  if (!p)
    return NULL;
  memcpy(p, ptr, b->size < size ? b->size : size);
  count_free(user, ptr);
  return p;
}

vkrt_allocator vkt_counting_allocator(vkt_counting *c) {
  atomic_store(&c->live, 0);
  atomic_store(&c->total, 0);
  atomic_store(&c->bytes_live, 0);
  return (vkrt_allocator){.user = c, .alloc = count_alloc, .realloc = count_realloc,
                          .free = count_free};
}

/* ---- the guard allocator ---- */

#define GUARD_QUARANTINE 4096 /* freed blocks kept inaccessible */

struct guard_header { /* the page before the block */
  uint8_t *map;
  size_t map_size, size;
};

static struct {
  pthread_mutex_t lock;
  struct guard_header freed[GUARD_QUARANTINE];
  uint32_t next;
} guard = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t guard_page(void) {
  long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? (size_t)page : 4096;
}

static void *guard_alloc(void *user, size_t size, size_t alignment) {
  (void)user;
  const size_t page = guard_page();
  if (alignment > page)
    return NULL;
  size_t body = (size + page - 1) / page * page;
  size_t map_size = page + (body ? body : page);
  uint8_t *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return NULL;
  *(struct guard_header *)(void *)map = (struct guard_header){map, map_size, size};
  return map + page;
}

static void guard_free(void *user, void *ptr) {
  (void)user;
  if (!ptr)
    return;
  struct guard_header h = *(struct guard_header *)(void *)((uint8_t *)ptr - guard_page());
  mprotect(h.map, h.map_size, PROT_NONE); /* any later touch faults */
  pthread_mutex_lock(&guard.lock);
  struct guard_header old = guard.freed[guard.next];
  guard.freed[guard.next] = h;
  guard.next = (guard.next + 1) % GUARD_QUARANTINE;
  pthread_mutex_unlock(&guard.lock);
  if (old.map)
    munmap(old.map, old.map_size);
}

static void *guard_realloc(void *user, void *ptr, size_t size, size_t alignment) {
  if (!ptr)
    return guard_alloc(user, size, alignment);
  const struct guard_header *h = (const struct guard_header *)(void *)((uint8_t *)ptr - guard_page());
  void *p = guard_alloc(user, size, alignment);
  if (!p)
    return NULL;
  memcpy(p, ptr, h->size < size ? h->size : size);
  guard_free(user, ptr);
  return p;
}

/* Appends v in base 10 or 16 to *p (async-signal-safe). */
static void guard_put_u64(char **p, uint64_t v, unsigned base) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v);
  while (n)
    *(*p)++ = digits[--n];
}

static void guard_put_str(char **p, const char *s) {
  while (*s)
    *(*p)++ = *s++;
}

/* A fault on a quarantined block names it, then the signal's default action ends the program
 * (re-raised on return, the handler reset). Other faults are left to that action. The scan
 * takes no lock: it only reads, and the program is going down. */
static void guard_segv(int sig, siginfo_t *info, void *context) {
  (void)context;
  const uint8_t *addr = info->si_addr;
  for (uint32_t i = 0; i < GUARD_QUARANTINE; i++) {
    const struct guard_header h = guard.freed[i];
    if (!h.map || addr < h.map || addr >= h.map + h.map_size)
      continue;
    char line[256], *p = line;
    const size_t page = guard_page();
    guard_put_str(&p, "FAIL: an access at 0x");
    guard_put_u64(&p, (uint64_t)(uintptr_t)addr, 16);
    guard_put_str(&p, " touched a block after the injected allocator freed it (byte ");
    guard_put_u64(&p, (uint64_t)(addr - (h.map + page)), 10);
    guard_put_str(&p, " of a ");
    guard_put_u64(&p, h.size, 10);
    guard_put_str(&p, "-byte block)\n");
    ssize_t w = write(STDERR_FILENO, line, (size_t)(p - line));
    (void)w;
    break;
  }
  (void)sig;
}

vkrt_allocator vkt_guard_allocator(void) {
  struct sigaction sa = {.sa_sigaction = guard_segv, .sa_flags = SA_SIGINFO | SA_RESETHAND};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  return (vkrt_allocator){.alloc = guard_alloc, .realloc = guard_realloc, .free = guard_free};
}

void vkt_log_capture_fn(void *user, vkrt_log_level level, const char *message) {
  vkt_log_capture *cap = user;
  log_stderr(NULL, level, message);
  int n = snprintf(cap->text + cap->len, sizeof(cap->text) - cap->len, "%s\n", message);
  if (n > 0)
    cap->len = cap->len + (size_t)n < sizeof(cap->text) ? cap->len + (size_t)n
                                                        : sizeof(cap->text) - 1;
}


vkt_hbuf vkt_hbuf_new(vkrt_appliance *app, uint64_t size) {
  vkt_hbuf h = {.size = size};
  vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_HOST_VISIBLE, &h.buf));
  void *p;
  vkt_check(app, vkrt_buffer_map(h.buf, &p));
  h.map = p;
  return h;
}
