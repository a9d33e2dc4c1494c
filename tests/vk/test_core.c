/* Runtime core on lavapipe with validation: open, buffers, streams, leaks, board
 * mismatch, fault-injected capability hiding. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/vk_test.h"
#include "appliance/appliance.h"
#include "vkrt/vkrt_lab.h"

static void test_open_board(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  assert_int_equal(vkrt_device_count(app), CONFIG_VKRT_DEVICE_COUNT);
  for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
    vkrt_device_info info;
    vkt_check(app, vkrt_device_info_get(app, d, &info));
    assert_true(info.name[0] != '\0');
    assert_true(info.device_local_bytes > 0);
    /* each rank has its own VkDevice and its own function table */
    assert_non_null(app->sys.devices[d].handle);
    assert_non_null(app->sys.devices[d].vk.vkQueueSubmit);
    assert_true(app->sys.devices[d].caps.timeline_semaphore);
    if (d > 0)
      assert_ptr_not_equal(app->sys.devices[d].handle, app->sys.devices[0].handle);
    if (IS_ENABLED(CONFIG_VKRT_SIMULATED))
      assert_memory_equal(info.device_uuid, app->sys.devices[0].caps.device_uuid, 16);
  }
  vkrt_device_info info;
  assert_int_equal(vkrt_device_info_get(app, 8, &info), VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(vkrt_last_error(app), "device 8"));
  vkt_close(app);
}

/* ---- open/close leaves the process as it found it ---------------------------------------- */

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    n += e->d_name[0] != '.';
  closedir(d);
  return n - (strcmp(path, "/proc/self/fd") == 0); /* the DIR's own fd */
}

/* Prints the targets of open fds numbered >= from (what a leaking cycle left open). */
static void print_fds(int from) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  while (d && (e = readdir(d))) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd < from || fd == dirfd(d))
      continue;
    char link[64], target[256] = "";
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    target[n > 0 ? n : 0] = '\0';
    fprintf(stderr, "vkrt-test:   fd %d -> %s\n", fd, target);
  }
  if (d)
    closedir(d);
}

/* Appliances opened and closed one after another (with every transport this build and these
 * devices can use) leave no file descriptor and no thread behind: a long-lived process (the
 * service, a test program opening hundreds of appliances) must not run into the driver's or
 * the kernel's limits. After a first cycle (the driver's one-time setup), the counts are
 * flat; a leak prints the new fds' targets. */
static void test_open_close_stable(void **state) {
  (void)state;
  /* Nothing here records GPU work: the sync-validation pass would only add minutes. */
  vkt_skip_if(vkt_sync_validation_pass());
  static const uint32_t transports[] = {VKRT_TRANSPORT_NONE, VKRT_TRANSPORT_NATIVE_FD,
                                        VKRT_TRANSPORT_CPU_PROXY, VKRT_TRANSPORT_HOST_STAGED};
  for (size_t t = 0; t < VKRT_ARRAY_SIZE(transports); t++) {
    int fds[3], threads[3], first_fd = 0;
    int cycles = 0;
    for (int i = 0; i < 3; i++) {
      vkrt_options o;
      vkt_options(&o);
      o.log = NULL;
      o.collective_transport = transports[t];
      vkrt_appliance *app = NULL;
      char why[512];
      if (vkrt_open(&o, &app, why, sizeof(why)) != VKRT_OK) {
        if (i == 0 && transports[t] != VKRT_TRANSPORT_NONE) /* not usable here */
          break;
        fail_msg("open %d (transport %s) failed: %s", i, vkrt_transport_str(transports[t]), why);
      }
      vkrt_close(app);
      fds[i] = count_dir("/proc/self/fd");
      threads[i] = count_dir("/proc/self/task");
      if (i == 0)
        first_fd = fds[0];
      cycles++;
    }
    if (cycles == 0) {
      fprintf(stderr, "vkrt-test: open/close with %s: not usable here\n",
              vkrt_transport_str(transports[t]));
      continue;
    }
    fprintf(stderr, "vkrt-test: open/close with %s: open fds after each cycle", 
            t ? vkrt_transport_str(transports[t]) : "the planner's transport");
    for (int i = 0; i < cycles; i++)
      fprintf(stderr, " %d", fds[i]);
    fprintf(stderr, ", threads");
    for (int i = 0; i < cycles; i++)
      fprintf(stderr, " %d", threads[i]);
    fprintf(stderr, "\n");
    if (fds[cycles - 1] != fds[0] || threads[cycles - 1] != threads[0]) {
      print_fds(first_fd > 8 ? first_fd - 8 : 0);
      fail_msg("%s: each open/close cycle leaves %d fd(s) and %d thread(s) behind",
               vkrt_transport_str(transports[t]), (fds[cycles - 1] - fds[0]) / (cycles - 1),
               (threads[cycles - 1] - threads[0]) / (cycles - 1));
    }
  }
}

static void test_open_four(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_SIMULATED));
  vkrt_options o;
  vkt_options(&o);
  o.device_count = 4;
  vkrt_appliance *app = vkt_open(&o);
  assert_int_equal(vkrt_device_count(app), 4);
  vkt_close(app);
}

/* random pattern -> host-visible -> device-local -> host-visible, on every device */
static void test_buffer_round_trip(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  uint64_t seed = vkt_seed(0);
  const uint64_t size = (1u << 20) + 12;
  uint8_t *expect = malloc(size);
  assert_non_null(expect);
  for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
    vkrt_buffer *src, *mid, *dst;
    vkt_check(app, vkrt_buffer_create(app, d, size, VKRT_BUFFER_HOST_VISIBLE, &src));
    vkt_check(app, vkrt_buffer_create(app, d, size, VKRT_BUFFER_DEVICE_LOCAL, &mid));
    vkt_check(app, vkrt_buffer_create(app, d, size, VKRT_BUFFER_HOST_VISIBLE, &dst));
    assert_int_equal(vkrt_buffer_size(mid), size);
    assert_int_equal(vkrt_buffer_device(mid), d);
    void *s, *t;
    vkt_check(app, vkrt_buffer_map(src, &s));
    vkt_check(app, vkrt_buffer_map(dst, &t));
    vkt_fill_random(expect, size, &seed);
    memcpy(s, expect, size);
    vkt_poison(t, size);
    vkt_check(app, vkrt_cmd_copy_buffer(mid, 0, src, 0, size));
    vkt_check(app, vkrt_cmd_copy_buffer(dst, 0, mid, 0, size));
    vkt_check(app, vkrt_finish(app, d));
    assert_memory_equal(t, expect, size);

    /* offsets, a fill, and the order of commands within one submit */
    vkt_poison(t, size);
    vkt_check(app, vkrt_cmd_fill(mid, 0, size - 12, 0x01020304u));
    vkt_check(app, vkrt_cmd_copy_buffer(mid, 4096, src, 100, 5000));
    vkt_check(app, vkrt_cmd_copy_buffer(dst, 0, mid, 0, size));
    uint64_t ticket;
    vkt_check(app, vkrt_submit(app, d, &ticket));
    assert_true(ticket > 0);
    vkt_check(app, vkrt_wait(app, d, ticket, UINT64_MAX));
    const uint8_t *u = t;
    for (uint64_t i = 0; i < size - 12; i++) {
      uint8_t want = (i >= 4096 && i < 4096 + 5000) ? expect[100 + i - 4096]
                                                    : (uint8_t)(0x01020304u >> (8 * (i % 4)));
      if (u[i] != want)
        fail_msg("dev%u byte %llu: got 0x%02x, want 0x%02x", d, (unsigned long long)i, u[i],
                 want);
    }
    /* the tail was copied from mid, which still holds the first round's bytes */
    assert_memory_equal(u + size - 12, expect + size - 12, 12);

    void *bad;
    assert_int_equal(vkrt_buffer_map(mid, &bad), VKRT_ERROR_INVALID_ARGUMENT);
    assert_null(bad);
    assert_int_equal(vkrt_cmd_copy_buffer(dst, size - 4, src, 0, 8), VKRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vkrt_last_error(app), "outside the buffer"));
    assert_int_equal(vkrt_cmd_fill(dst, 2, 4, 0), VKRT_ERROR_INVALID_ARGUMENT);
    vkrt_buffer_destroy(src);
    vkrt_buffer_destroy(mid);
    vkrt_buffer_destroy(dst);
  }
  if (vkrt_device_count(app) > 1) { /* copies never cross devices */
    vkrt_buffer *a, *b;
    vkt_check(app, vkrt_buffer_create(app, 0, 256, 0, &a));
    vkt_check(app, vkrt_buffer_create(app, 1, 256, 0, &b));
    assert_int_equal(vkrt_cmd_copy_buffer(a, 0, b, 0, 256), VKRT_ERROR_INVALID_ARGUMENT);
    vkrt_buffer_destroy(a);
    vkrt_buffer_destroy(b);
  }
  vkrt_buffer *none = (vkrt_buffer *)1;
  assert_int_equal(vkrt_buffer_create(app, 99, 64, 0, &none), VKRT_ERROR_INVALID_ARGUMENT);
  assert_null(none);
  assert_int_equal(vkrt_buffer_create(app, 0, 0, 0, &none), VKRT_ERROR_INVALID_ARGUMENT);
  free(expect);
  vkt_close(app);
}

/* The stream's barriers satisfy synchronization validation: fill, copy chains and host
 * reads across submits. */
static void test_sync_validation(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_VALIDATION_IN_TESTS));
  vkrt_options o;
  vkt_options(&o);
  o.enable_sync_validation = true;
  vkrt_appliance *app = vkt_open(&o);
  uint64_t seed = vkt_seed(0);
  uint32_t d = vkrt_device_count(app) - 1;
  vkrt_buffer *host, *a, *b;
  vkt_check(app, vkrt_buffer_create(app, d, 65536, VKRT_BUFFER_HOST_VISIBLE, &host));
  vkt_check(app, vkrt_buffer_create(app, d, 65536, 0, &a));
  vkt_check(app, vkrt_buffer_create(app, d, 65536, 0, &b));
  uint8_t *p, expect[4096];
  vkt_check(app, vkrt_buffer_map(host, (void **)&p));
  for (int round = 0; round < 3; round++) {
    vkt_fill_random(expect, sizeof(expect), &seed);
    memcpy(p, expect, sizeof(expect));
    vkt_check(app, vkrt_cmd_fill(a, 0, 65536, 0));
    vkt_check(app, vkrt_cmd_copy_buffer(a, 0, host, 0, 4096)); /* WAW after the fill */
    vkt_check(app, vkrt_cmd_copy_buffer(b, 8192, a, 0, 4096)); /* RAW */
    uint64_t t;
    vkt_check(app, vkrt_submit(app, d, &t));                    /* across submits */
    vkt_check(app, vkrt_cmd_copy_buffer(host, 32768, b, 8192, 4096));
    vkt_check(app, vkrt_cmd_fill(a, 0, 4096, 7));               /* WAR on a */
    vkt_check(app, vkrt_finish(app, d));
    assert_memory_equal(p + 32768, expect, sizeof(expect));
  }
  vkrt_buffer_destroy(host);
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
  vkt_close(app);
}

/* More submits than the ring holds, empty submits, and attached timeline signals. */
static void test_stream_ring(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  vkrt_buffer *buf;
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, VKRT_BUFFER_HOST_VISIBLE, &buf));
  uint32_t *p;
  vkt_check(app, vkrt_buffer_map(buf, (void **)&p));
  uint64_t last = 0;
  for (uint32_t i = 1; i <= 3 * VKRT_STREAM_DEPTH; i++) {
    vkt_check(app, vkrt_cmd_fill(buf, 0, 4096, i));
    uint64_t ticket;
    vkt_check(app, vkrt_submit(app, 0, &ticket));
    assert_true(ticket > last);
    last = ticket;
  }
  vkt_check(app, vkrt_wait(app, 0, last, UINT64_MAX));
  assert_int_equal(p[1023], 3 * VKRT_STREAM_DEPTH);

  struct vkrt_device *dev = &app->sys.devices[0];
  uint64_t empty;
  vkt_check(app, vkrt_submit(app, 0, &empty)); /* nothing recorded: still a ticket */
  assert_int_equal(empty, last + 1);
  /* a second timeline signalled by the next submit */
  VkSemaphoreTypeCreateInfo type = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
  VkSemaphoreCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type};
  VkSemaphore extra;
  assert_int_equal(dev->vk.vkCreateSemaphore(dev->handle, &info, NULL, &extra), VK_SUCCESS);
  vkt_check(app, vkrt_stream_add_signal(dev, extra, 7));
  vkt_check(app, vkrt_stream_submit(dev, NULL));
  vkt_check(app, vkrt_stream_add_wait(dev, extra, 7));
  vkt_check(app, vkrt_cmd_fill(buf, 0, 4096, 0xabcdef01u));
  vkt_check(app, vkrt_finish(app, 0));
  assert_int_equal(p[0], 0xabcdef01u);
  uint64_t value = 0;
  assert_int_equal(dev->vk.vkGetSemaphoreCounterValue(dev->handle, extra, &value), VK_SUCCESS);
  assert_int_equal(value, 7);
  dev->vk.vkDestroySemaphore(dev->handle, extra, NULL);

  assert_int_equal(vkrt_wait(app, 0, 1000000, 1000), VKRT_ERROR_INVALID_ARGUMENT);
  vkrt_buffer_destroy(buf);
  vkt_close(app);
}

/* ---- vkrt_wait with short timeouts --------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A timeline semaphore the host signals: a submit waiting for it stays unfinished until the
 * test opens the gate, or a watchdog does after `watchdog_s` (a wait that ignores its timeout
 * then returns late instead of hanging the test). */
struct gate {
  struct vkrt_device *dev;
  VkSemaphore sem;
  double watchdog_s;
  bool opened;
  pthread_mutex_t lock;
  pthread_cond_t cond;
};

static void gate_open(struct gate *g) {
  pthread_mutex_lock(&g->lock);
  if (!g->opened) {
    VkSemaphoreSignalInfo signal = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                                    .semaphore = g->sem, .value = 1};
    assert_int_equal(g->dev->vk.vkSignalSemaphore(g->dev->handle, &signal), VK_SUCCESS);
    g->opened = true;
    pthread_cond_broadcast(&g->cond);
  }
  pthread_mutex_unlock(&g->lock);
}

static void *gate_watchdog(void *arg) {
  struct gate *g = arg;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)g->watchdog_s;
  pthread_mutex_lock(&g->lock);
  while (!g->opened && pthread_cond_timedwait(&g->cond, &g->lock, &until) == 0)
    ;
  pthread_mutex_unlock(&g->lock);
  gate_open(g);
  return NULL;
}

/* vkrt_options.wait_spin_us: 0 gives GPUs the stream's 2 ms spin, a value its own, CPU
 * devices none either way; past 10 s is refused. */
static void test_wait_spin_option(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  o.wait_spin_us = VKRT_WAIT_SPIN_US_MAX + 1;
  vkrt_appliance *bad = NULL;
  char msg[256];
  assert_int_equal(vkrt_open(&o, &bad, msg, sizeof(msg)), VKRT_ERROR_INVALID_ARGUMENT);
  assert_null(bad);
  assert_non_null(strstr(msg, "wait_spin_us"));
  static const uint32_t asked[] = {0, 7000};
  for (size_t i = 0; i < VKT_ARRAY_SIZE(asked); i++) {
    o.wait_spin_us = asked[i];
    vkrt_appliance *app = vkt_open(&o);
    for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
      const struct vkrt_device *dev = &app->sys.devices[d];
      uint64_t spin_ns = vkrt_stream_spin_ns(dev);
      uint64_t want = dev->caps.is_cpu ? 0 : asked[i] ? asked[i] * 1000ull : VKRT_STREAM_SPIN_NS;
      if (spin_ns != want)
        fail_msg("dev%u (%s), wait_spin_us %u: spins %llu ns, want %llu", d,
                 dev->caps.is_cpu ? "CPU" : "GPU", asked[i], (unsigned long long)spin_ns,
                 (unsigned long long)want);
    }
    vkt_close(app);
  }
}

/* A ticket whose work waits for the host: vkrt_wait with a timeout of 0, 1 us, 1 ms and
 * 5 ms returns VKRT_ERROR_TIMEOUT within about the timeout, on the blocking path (spin 0,
 * the CPU devices' setting) and on the spin path (the GPUs' 2 ms spin, forced here): a
 * timeout shorter than the spin must not turn into an endless wait. Then the work runs and
 * its bytes are there. */
static void test_wait_short_timeouts(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  uint32_t d = vkrt_device_count(app) - 1;
  struct vkrt_device *dev = &app->sys.devices[d];
  uint64_t seed = vkt_seed(0);
  vkrt_buffer *buf;
  vkt_check(app, vkrt_buffer_create(app, d, 4096, VKRT_BUFFER_HOST_VISIBLE, &buf));
  uint32_t *p;
  vkt_check(app, vkrt_buffer_map(buf, (void **)&p));
  static const uint64_t spins[] = {0, VKRT_STREAM_SPIN_NS};
  static const uint64_t timeouts[] = {0, 1000, 1000000, 5000000};
  const uint64_t spin_before = vkrt_stream_spin_ns(dev);
  for (size_t si = 0; si < VKT_ARRAY_SIZE(spins); si++) {
    vkrt_stream_set_spin_ns(dev, spins[si]); /* the submitter thread reads it meanwhile */
    static struct gate gates[VKT_ARRAY_SIZE(spins)]; /* outlive a failed case's watchdog */
    struct gate *g = &gates[si];
    *g = (struct gate){.dev = dev, .watchdog_s = 3};
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    vkt_check(app, vkrt_timeline_create(dev, NULL, "test gate", &g->sem));
    uint32_t value = (uint32_t)vkrt_xorshift(&seed) | 1u;
    vkt_poison(p, 4096);
    vkt_check(app, vkrt_stream_add_wait(dev, g->sem, 1));
    vkt_check(app, vkrt_cmd_fill(buf, 0, 4096, value));
    uint64_t ticket;
    vkt_check(app, vkrt_submit(app, d, &ticket));
    pthread_t watchdog;
    assert_int_equal(pthread_create(&watchdog, NULL, gate_watchdog, g), 0);
    for (size_t ti = 0; ti < VKT_ARRAY_SIZE(timeouts); ti++) {
      double t0 = now_s();
      vkrt_status s = vkrt_wait(app, d, ticket, timeouts[ti]);
      double ms = (now_s() - t0) * 1e3;
      print_message("vkrt-test: spin %llu ns, timeout %llu ns: %s after %.3f ms\n",
                    (unsigned long long)spins[si], (unsigned long long)timeouts[ti],
                    vkrt_status_str(s), ms);
      if (s != VKRT_ERROR_TIMEOUT)
        fail_msg("spin %llu ns: a wait of %llu ns for unfinished work returned %s after "
                 "%.3f ms, want VKRT_ERROR_TIMEOUT",
                 (unsigned long long)spins[si], (unsigned long long)timeouts[ti],
                 vkrt_status_str(s), ms);
      char within[64]; /* the caller's timeout, not what was left after the spin */
      snprintf(within, sizeof(within), "not reached within %llu ns",
               (unsigned long long)timeouts[ti]);
      if (!strstr(vkrt_last_error(app), within))
        fail_msg("message '%s' lacks '%s'", vkrt_last_error(app), within);
      /* promptly: the timeout plus scheduling noise on a loaded machine, far below the
       * watchdog's seconds */
      if (ms > timeouts[ti] * 1e-6 + 250)
        fail_msg("spin %llu ns: a wait of %llu ns took %.3f ms", (unsigned long long)spins[si],
                 (unsigned long long)timeouts[ti], ms);
      /* the spin part runs on the host clock: it used at least the spin the timeout allows */
      assert_true(ms * 1e6 >= (double)VKT_MIN(spins[si], timeouts[ti]));
    }
    assert_int_equal(p[0], 0xDEADBEEFu); /* nothing ran while the gate was closed */
    gate_open(g);
    vkt_check(app, vkrt_wait(app, d, ticket, UINT64_MAX));
    for (int i = 0; i < 1024; i++)
      if (p[i] != value)
        fail_msg("word %d: 0x%08x, want 0x%08x", i, p[i], value);
    assert_int_equal(pthread_join(watchdog, NULL), 0);
    vkrt_timeline_destroy(dev, g->sem);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
  }
  vkrt_stream_set_spin_ns(dev, spin_before);
  vkrt_buffer_destroy(buf);
  vkt_close(app);
}

/* ---- the closing barrier's host stage ------------------------------------------------ */

/* vkCmdPipelineBarrier of the device under test, replaced in its function table by a spy
 * that keeps the last barrier's masks and forwards the call. */
static struct {
  PFN_vkCmdPipelineBarrier real;
  VkPipelineStageFlags src_stages, dst_stages;
  VkAccessFlags dst_access;
  uint32_t calls;
} barrier_spy;

static VKAPI_ATTR void VKAPI_CALL spy_pipeline_barrier(
    VkCommandBuffer cmd, VkPipelineStageFlags src, VkPipelineStageFlags dst,
    VkDependencyFlags flags, uint32_t memory_count, const VkMemoryBarrier *memory,
    uint32_t buffer_count, const VkBufferMemoryBarrier *buffers, uint32_t image_count,
    const VkImageMemoryBarrier *images) {
  barrier_spy.src_stages = src;
  barrier_spy.dst_stages = dst;
  barrier_spy.dst_access = 0;
  for (uint32_t i = 0; i < memory_count; i++)
    barrier_spy.dst_access |= memory[i].dstAccessMask;
  barrier_spy.calls++;
  barrier_spy.real(cmd, src, dst, flags, memory_count, memory, buffer_count, buffers,
                   image_count, images);
}

/* A command buffer in which a command wrote a mapped (host-visible) buffer ends with a
 * barrier whose second scope is the host (HOST stage, HOST_READ access), so the host reads
 * the bytes once the ticket is reached, also where host-visible memory is not coherent or
 * the device caches writes (lavapipe is coherent, so only the barrier itself shows it);
 * one that wrote only device-local memory ends without it. The stream's host_closes
 * counter counts the same buffers. */
static void test_closing_barrier_host_stage(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  const uint32_t d = vkrt_device_count(app) - 1;
  struct vkrt_device *dev = &app->sys.devices[d];
  for (uint32_t t = 0; t < dev->caps.type_count; t++)
    if ((dev->caps.type_flags[t] & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
        !(dev->caps.type_flags[t] & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
      print_message("vkrt-test: dev%u memory type %u is host-visible and not coherent\n", d, t);
  enum { SIZE = 4096 };
  uint64_t seed = vkt_seed(0);
  vkrt_buffer *host, *local;
  vkt_check(app, vkrt_buffer_create(app, d, SIZE, VKRT_BUFFER_HOST_VISIBLE, &host));
  vkt_check(app, vkrt_buffer_create(app, d, SIZE, VKRT_BUFFER_DEVICE_LOCAL, &local));
  uint32_t *mapped;
  vkt_check(app, vkrt_buffer_map(host, (void **)&mapped));
  static uint32_t expect[SIZE / 4];
  vkt_fill_random(expect, SIZE, &seed);
  vkt_check(app, vkrt_upload(local, 0, expect, SIZE));
  vkt_check(app, vkrt_finish(app, d));
  barrier_spy.real = dev->vk.vkCmdPipelineBarrier;
  dev->vk.vkCmdPipelineBarrier = spy_pipeline_barrier;
  for (int step = 0; step < 4; step++) {
    const bool to_host = step % 2 == 1;
    uint32_t value = (uint32_t)vkrt_xorshift(&seed) | 1u;
    vkt_poison(mapped, SIZE);
    vkrt_lab_stream before = {0}, after = {0}; /* the lab's counters, when it is in */
    if (IS_ENABLED(CONFIG_VKRT_LAB))
      vkt_check(app, vkrt_lab_stream_get(app, d, &before));
    if (step < 2) {
      vkt_check(app, vkrt_cmd_fill(to_host ? host : local, 0, SIZE, value));
    } else { /* a device-local write, then (step 3) a copy to the mapped buffer */
      vkt_check(app, vkrt_cmd_fill(local, 0, 64, value));
      if (to_host)
        vkt_check(app, vkrt_cmd_copy_buffer(host, 0, local, 0, SIZE));
    }
    const uint32_t calls = barrier_spy.calls;
    vkt_check(app, vkrt_finish(app, d));
    if (IS_ENABLED(CONFIG_VKRT_LAB))
      vkt_check(app, vkrt_lab_stream_get(app, d, &after));
    assert_true(barrier_spy.calls > calls); /* the submit closed the buffer with a barrier */
    const bool host_stage = barrier_spy.dst_stages & VK_PIPELINE_STAGE_HOST_BIT,
               host_read = barrier_spy.dst_access & VK_ACCESS_HOST_READ_BIT;
    print_message("vkrt-test: step %d (%s): closing barrier src 0x%x dst 0x%x, dst access 0x%x\n",
                  step, to_host ? "writes the mapped buffer" : "device-local only",
                  barrier_spy.src_stages, barrier_spy.dst_stages, barrier_spy.dst_access);
    if (host_stage != to_host || host_read != to_host)
      fail_msg("step %d: the closing barrier's second scope %s the host (stages 0x%x, access "
               "0x%x), want %s", step, host_stage ? "includes" : "lacks",
               barrier_spy.dst_stages, barrier_spy.dst_access, to_host ? "it" : "none");
    if (IS_ENABLED(CONFIG_VKRT_LAB))
      assert_int_equal(after.host_closes - before.host_closes, to_host ? 1 : 0);
    for (int i = 0; i < (step == 0 ? SIZE / 4 : step >= 2 ? 16 : 0); i++)
      expect[i] = value; /* what local holds now */
    if (step == 1)
      for (int i = 0; i < SIZE / 4; i++)
        if (mapped[i] != value)
          fail_msg("word %d: 0x%08x, want the fill 0x%08x", i, mapped[i], value);
    if (step == 3)
      assert_memory_equal(mapped, expect, SIZE);
  }
  dev->vk.vkCmdPipelineBarrier = barrier_spy.real;
  vkrt_buffer_destroy(host);
  vkrt_buffer_destroy(local);
  vkt_close(app);
}

/* ---- the Kconfig pre-stage budget at open ---------------------------------------------- */

/* vkrt_open takes CONFIG_VKRT_PRESTAGE_BUDGET_MB, capped by the VK_EXT_memory_budget heap
 * host imports count against (where a device reports one), and vkrt_describe (what
 * vkrt-probe prints) shows it; no tuning call in between. */
static void test_prestage_budget_at_open(void **state) {
  (void)state;
#if IS_ENABLED(CONFIG_VKRT_PRESTAGE)
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  uint64_t want = (uint64_t)CONFIG_VKRT_PRESTAGE_BUDGET_MB << 20;
  for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
    const struct vkrt_caps *c = &app->sys.devices[d].caps;
    for (uint32_t t = 0; c->memory_budget && t < c->type_count; t++)
      if (c->host_import_memory_type_bits & (1u << t)) {
        uint64_t heap_budget = c->heap_budget[c->type_heap[t]];
        if (heap_budget && heap_budget < want)
          want = heap_budget;
        break;
      }
  }
  vkrt_lab_import t = {.prestage_budget = want}; /* the lab's view, when it is in */
  if (IS_ENABLED(CONFIG_VKRT_LAB))
    vkt_check(app, vkrt_lab_import_get(app, &t));
  if (t.prestage_budget != want)
    fail_msg("pre-stage budget at open: %llu bytes, want %llu (CONFIG_VKRT_PRESTAGE_BUDGET_MB "
             "%d, capped by the devices' memory budget)", (unsigned long long)t.prestage_budget,
             (unsigned long long)want, CONFIG_VKRT_PRESTAGE_BUDGET_MB);
  static char text[1 << 16];
  char line[96];
  vkrt_describe(app, false, text, sizeof(text));
  snprintf(line, sizeof(line), "pre-stage budget %llu MiB", (unsigned long long)(want >> 20));
  if (!strstr(text, line))
    fail_msg("vkrt_describe lacks '%s'", line);
  vkrt_describe(app, true, text, sizeof(text));
  snprintf(line, sizeof(line), "\"prestage_budget_bytes\": %llu", (unsigned long long)want);
  if (!strstr(text, line))
    fail_msg("vkrt_describe (JSON) lacks '%s'", line);
  vkt_close(app);
#else
  vkt_skip("pre-staging is compiled out (no CONFIG_VKRT_PRESTAGE)");
#endif
}

/* open/close repeatedly through a counting allocator: nothing stays allocated. */
static void test_open_close_leaks(void **state) {
  (void)state;
  vkt_counting counting;
  const int rounds = 100;
  for (int i = 0; i < rounds; i++) {
    vkrt_options o;
    vkt_options(&o);
    o.allocator = vkt_counting_allocator(&counting);
    vkrt_appliance *app = vkt_open(&o);
    vkrt_buffer *b;
    vkt_check(app, vkrt_buffer_create(app, vkrt_device_count(app) - 1, 65536, 0, &b));
    vkt_check(app, vkrt_cmd_fill(b, 0, 65536, 5));
    vkt_check(app, vkrt_finish(app, vkrt_device_count(app) - 1));
    vkrt_buffer_destroy(b);
    assert_true(atomic_load(&counting.live) > 0);
    vkt_close(app);
    if (atomic_load(&counting.live) != 0)
      fail_msg("round %d: %ld allocations (%ld bytes) live after vkrt_close", i,
               atomic_load(&counting.live), atomic_load(&counting.bytes_live));
  }
  vkrt_close(NULL);
}

/* Boards asking for what this machine is not: one VkDevice per physical device for one
 * device more than there are physical devices, and a physical index past the last. Both
 * must fail at open with VKRT_ERROR_BOARD_MISMATCH, naming what was found (the device name
 * the capability snapshot reports, not a driver the test assumes), on any machine. */
static void test_board_mismatch(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  vkrt_device_info info;
  vkt_check(app, vkrt_device_info_get(app, 0, &info));
  const uint32_t physical = app->sys.physical_count;
  vkt_close(app);
  assert_true(physical >= 1);
  vkt_skip_if(physical + 1 > VKRT_MAX_DEVICES);
  o.log = NULL;
  o.physical_only = true;
  o.device_count = physical + 1;
  app = (vkrt_appliance *)1;
  char why[1024], want[64];
  vkrt_status s = vkrt_open(&o, &app, why, sizeof(why));
  if (s == VKRT_OK) {
    vkrt_close(app);
    fail_msg("a board of %u physical devices opened on a machine with %u", physical + 1,
             physical);
  }
  assert_int_equal(s, VKRT_ERROR_BOARD_MISMATCH);
  assert_null(app);
  fprintf(stderr, "vkrt-test: mismatch message: %s\n", why);
  snprintf(want, sizeof(want), "expects %u device(s)", physical + 1);
  if (!strstr(why, want))
    fail_msg("mismatch message lacks '%s': %s", want, why);
  snprintf(want, sizeof(want), " %u physical device(s)", physical);
  if (!strstr(why, want))
    fail_msg("mismatch message lacks '%s': %s", want, why);
  if (!strstr(why, info.name))
    fail_msg("mismatch message does not name the device found ('%s')", info.name);

  vkt_options(&o);
  o.log = NULL;
  o.physical_device_index[0] = (int32_t)physical;
  assert_int_equal(vkrt_open(&o, &app, why, sizeof(why)), VKRT_ERROR_BOARD_MISMATCH);
  assert_null(app);
  snprintf(want, sizeof(want), "physical index %u, found %u", physical, physical);
  if (!strstr(why, want))
    fail_msg("mismatch message lacks '%s': %s", want, why);
}

/* Counting works: a deliberate invalid call is seen. */
static void test_validation_counts(void **state) {
  (void)state;
  vkt_skip_if(!IS_ENABLED(CONFIG_VKRT_VALIDATION_IN_TESTS));
  vkrt_options o;
  vkt_options(&o);
  o.log = NULL;
  vkrt_appliance *app = vkt_open(&o);
  assert_int_equal(vkrt_validation_message_count(app), 0);
  struct vkrt_device *dev = &app->sys.devices[0];
  VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = 0, /* invalid: size must be > 0 */
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
  VkBuffer b = VK_NULL_HANDLE;
  dev->vk.vkCreateBuffer(dev->handle, &info, NULL, &b);
  assert_true(vkrt_validation_message_count(app) > 0);
  if (b)
    dev->vk.vkDestroyBuffer(dev->handle, b, NULL);
  vkrt_close(app);
}

static void test_fault_hides_on_one_device(void **state) {
  (void)state;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *plain = vkt_open(&o);
  struct vkrt_caps before0 = plain->sys.devices[0].caps, before1 = plain->sys.devices[1].caps;
  vkt_close(plain);

  o.faults.mask = VKRT_FAULT_HIDE_EXTERNAL_SEMAPHORE_FD | VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST;
  o.faults.device_mask = 1u << 1;
  vkrt_appliance *app = vkt_open(&o);
  const struct vkrt_caps *c0 = &app->sys.devices[0].caps, *c1 = &app->sys.devices[1].caps;
  /* device 0 unchanged (budgets move between opens; compare everything else) */
  struct vkrt_caps a = before0, b = *c0;
  memset(a.heap_budget, 0, sizeof(a.heap_budget));
  memset(b.heap_budget, 0, sizeof(b.heap_budget));
  assert_memory_equal(&a, &b, sizeof(a));
  assert_int_equal(app->sys.devices[0].fault_mask, 0);
  assert_true(c0->external_memory_host == before0.external_memory_host);
  assert_true(before1.external_memory_host); /* lavapipe has it... */
  assert_false(c1->external_memory_host);    /* ...device 1 pretends not to */
  assert_false(c1->external_semaphore_fd);
  assert_null(app->sys.devices[1].vk.vkGetMemoryHostPointerPropertiesEXT);
  assert_null(app->sys.devices[1].vk.vkGetSemaphoreFdKHR);
  assert_null(app->sys.devices[1].vk.vkImportSemaphoreFdKHR);
  assert_non_null(app->sys.devices[0].vk.vkGetMemoryHostPointerPropertiesEXT);
  assert_int_equal(c1->host_import_memory_type_bits, 0);
  assert_int_equal(c1->min_imported_host_pointer_alignment, 0);
  assert_int_equal(c1->semaphore_export_handles, 0);
  assert_int_equal(c1->host_buffer_import_handles & VKRT_HANDLE_HOST_ALLOCATION, 0);
  vkrt_device_info info;
  vkt_check(app, vkrt_device_info_get(app, 1, &info));
  assert_false(info.external_memory_host);
  vkt_check(app, vkrt_device_info_get(app, 0, &info));
  assert_true(info.external_memory_host);
  vkt_close(app);

  /* vkAllocateMemory failure injection: the Nth call fails with a message */
  vkt_options(&o);
  app = vkt_open(&o); /* modules allocate at open: count those calls first */
  unsigned at_open = atomic_load(&app->sys.vk_alloc_count);
  vkt_close(app);
  o.log = NULL;
  o.faults.vulkan_alloc_fail_at = at_open + 2;
  app = vkt_open(&o);
  assert_int_equal(atomic_load(&app->sys.vk_alloc_count), at_open);
  vkrt_buffer *x, *y;
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, 0, &x));
  assert_int_equal(vkrt_buffer_create(app, 0, 4096, 0, &y), VKRT_ERROR_OUT_OF_DEVICE_MEMORY);
  assert_null(y);
  assert_non_null(strstr(vkrt_last_error(app), "VK_ERROR_OUT_OF_DEVICE_MEMORY"));
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, 0, &y));
  vkrt_buffer_destroy(x);
  vkrt_buffer_destroy(y);
  vkt_close(app);
#else
  vkt_skip("CONFIG_VKRT_FAULT_INJECTION is off");
#endif
}

/* Every injected host-allocation failure during open unwinds completely: an error
 * status with a message, *out NULL, and nothing left allocated. */
static void test_open_fault_unwind(void **state) {
  (void)state;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  vkt_counting counting;
  int failures = 0;
  /* how many host allocations an open makes (counted only while a failure is armed) */
  vkrt_options probe;
  vkt_options(&probe);
  probe.faults.host_alloc_fail_at = 1u << 30;
  vkrt_appliance *counted = vkt_open(&probe);
  unsigned open_allocations = atomic_load(&counted->sys.base.host_alloc_count);
  vkt_close(counted);
  for (uint32_t n = 1; n < 2000; n++) {
    vkrt_options o;
    vkt_options(&o);
    o.log = NULL;
    o.allocator = vkt_counting_allocator(&counting);
    o.faults.host_alloc_fail_at = n;
    vkrt_appliance *app = (vkrt_appliance *)1;
    char why[512] = "";
    vkrt_status s = vkrt_open(&o, &app, why, sizeof(why));
    if (s == VKRT_OK) {
      vkt_close(app);
      assert_int_equal(atomic_load(&counting.live), 0);
      fprintf(stderr, "vkrt-test: open unwound each of its %u host allocation failures\n",
              n - 1);
      /* no failure was swallowed: the first allocation after open's is the first to pass */
      assert_int_equal(n, open_allocations + 1);
      assert_int_equal(failures, open_allocations);
      return;
    }
    failures++;
    assert_null(app);
    assert_true(why[0] != '\0');
    if (atomic_load(&counting.live) != 0)
      fail_msg("host allocation %u failed (%s: %s): %ld allocations left", n,
               vkrt_status_str(s), why, atomic_load(&counting.live));
  }
  fail_msg("open never succeeded");
#else
  vkt_skip("CONFIG_VKRT_FAULT_INJECTION is off");
#endif
}

/* Every vkAllocateMemory failure during open (module buffers, slots) either fails open
 * cleanly or is absorbed by a documented fallback; nothing leaks either way. */
static void test_open_vk_alloc_fault_unwind(void **state) {
  (void)state;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  unsigned count = atomic_load(&app->sys.vk_alloc_count);
  vkt_close(app);
  vkt_counting counting;
  for (unsigned n = 1; n <= count; n++) {
    vkt_options(&o);
    o.log = NULL;
    o.allocator = vkt_counting_allocator(&counting);
    o.faults.vulkan_alloc_fail_at = n;
    char why[512] = "";
    vkrt_status s = vkrt_open(&o, &app, why, sizeof(why));
    if (s == VKRT_OK) {
      fprintf(stderr, "vkrt-test: vkAllocateMemory %u/%u failing: open fell back\n", n, count);
      vkt_close(app);
    } else {
      fprintf(stderr, "vkrt-test: vkAllocateMemory %u/%u failing: %s: %s\n", n, count,
              vkrt_status_str(s), why);
      assert_null(app);
      assert_non_null(strstr(why, "VK_ERROR_OUT_OF_DEVICE_MEMORY"));
    }
    if (atomic_load(&counting.live) != 0)
      fail_msg("vkAllocateMemory %u failing: %ld allocations left", n,
               atomic_load(&counting.live));
  }
#else
  vkt_skip("CONFIG_VKRT_FAULT_INJECTION is off");
#endif
}

static void test_describe(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  size_t need = vkrt_describe(app, true, NULL, 0);
  assert_true(need > 100);
  char *json = malloc(need + 1);
  assert_int_equal(vkrt_describe(app, true, json, need + 1), need);
  assert_int_equal(strlen(json), need);
  /* The JSON says what the capability snapshot says, for every device. */
  for (uint32_t d = 0; d < vkrt_device_count(app); d++) {
    vkrt_device_info info;
    vkt_check(app, vkrt_device_info_get(app, d, &info));
    char want[128];
    snprintf(want, sizeof(want), "\"external_semaphore_fd\": %s",
             info.external_semaphore_fd ? "true" : "false");
    assert_non_null(strstr(json, want));
    snprintf(want, sizeof(want), "\"external_memory_host\": %s",
             info.external_memory_host ? "true" : "false");
    assert_non_null(strstr(json, want));
  }
  char small[64];
  assert_int_equal(vkrt_describe(app, true, small, sizeof(small)), need);
  assert_int_equal(strlen(small), sizeof(small) - 1);
  free(json);
  size_t lines = vkrt_describe(app, false, NULL, 0);
  char *text = malloc(lines + 1);
  vkrt_describe(app, false, text, lines + 1);
  assert_non_null(strstr(text, "vkrt: dev0 "));
  vkrt_device_info info0;
  vkt_check(app, vkrt_device_info_get(app, 0, &info0));
  assert_non_null(strstr(text, info0.external_semaphore_fd ? "external_semaphore_fd yes"
                                                           : "external_semaphore_fd no"));
  free(text);
  vkt_close(app);
}

/* ---- errors: each failing call leaves its own message, per thread ----------------------- */

#define MARK_DEVICE 77u
/* A failure with a known message, so the next check sees whether the call under test wrote
 * its own message or left the previous one. */
static void mark(vkrt_appliance *app) {
  vkrt_device_info info;
  assert_int_equal(vkrt_device_info_get(app, MARK_DEVICE, &info), VKRT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(vkrt_last_error(app), "device 77"));
}

#define EXPECT_OWN_MESSAGE(app, call, want, needle)                                          \
  do {                                                                                     \
    mark(app);                                                                             \
    vkrt_status got_ = (call);                                                             \
    const char *m_ = vkrt_last_error(app);                                                 \
    if (got_ != (want) || strstr(m_, "device 77") || !strstr(m_, needle))                  \
      fail_msg("%s: %s, message '%s' (want %s and a message with '%s')", #call,           \
               vkrt_status_str(got_), m_, vkrt_status_str(want), needle);                 \
  } while (0)

static void test_errors_have_messages(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  o.log = NULL;
  vkrt_appliance *app = vkt_open(&o);
  vkrt_buffer *a, *h, *none;
  void *p;
  uint8_t host[64] = {0};
  uint64_t ticket;
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, VKRT_BUFFER_DEVICE_LOCAL, &a));
  vkt_check(app, vkrt_buffer_create(app, 0, 4096, VKRT_BUFFER_HOST_VISIBLE, &h));
  const vkrt_status inval = VKRT_ERROR_INVALID_ARGUMENT;
  EXPECT_OWN_MESSAGE(app, vkrt_device_info_get(app, 0, NULL), inval, "out is NULL");
  EXPECT_OWN_MESSAGE(app, vkrt_buffer_create(app, 9, 16, 0, &none), inval, "device 9");
  EXPECT_OWN_MESSAGE(app, vkrt_buffer_create(app, 0, 16, 0, NULL), inval, "out is NULL");
  EXPECT_OWN_MESSAGE(app, vkrt_buffer_map(a, &p), inval, "cannot map");
  EXPECT_OWN_MESSAGE(app, vkrt_buffer_map(a, NULL), inval, "out is NULL");
  EXPECT_OWN_MESSAGE(app, vkrt_cmd_copy_buffer(a, 0, a, 8, 16), inval, "overlap");
  EXPECT_OWN_MESSAGE(app, vkrt_cmd_copy_buffer(a, 4090, h, 0, 16), inval, "outside");
  EXPECT_OWN_MESSAGE(app, vkrt_cmd_fill(a, 2, 4, 0), inval, "multiples of 4");
  EXPECT_OWN_MESSAGE(app, vkrt_submit(app, 9, &ticket), inval, "device 9");
  EXPECT_OWN_MESSAGE(app, vkrt_wait(app, 0, 1ull << 40, 0), inval, "submitted");
  EXPECT_OWN_MESSAGE(app, vkrt_upload(a, 4090, host, 16), inval, "outside");
  EXPECT_OWN_MESSAGE(app, vkrt_upload(a, 0, NULL, 16), inval, "NULL source");
  EXPECT_OWN_MESSAGE(app, vkrt_upload_2d(a, 0, 4, host, 16, 8, 2), inval, "pitch");
  EXPECT_OWN_MESSAGE(app, vkrt_download(NULL, a, 0, 16), inval, "NULL destination");
  EXPECT_OWN_MESSAGE(app, vkrt_download(host, a, 4090, 16), inval, "outside");
  EXPECT_OWN_MESSAGE(app, vkrt_host_register(app, host, 0, NULL, NULL, NULL), inval, "zero size");
  EXPECT_OWN_MESSAGE(app, vkrt_host_unregister(app, host), VKRT_ERROR_NOT_FOUND,
                     "never registered");
  EXPECT_OWN_MESSAGE(app, vkrt_host_unregister(app, NULL), inval, "NULL");
  vkrt_tensor t4 = vkrt_tensor_contiguous(a, 0, VKRT_TYPE_F32, 4, 1, 1, 1);
  vkrt_tensor t5 = vkrt_tensor_contiguous(a, 16, VKRT_TYPE_F32, 5, 1, 1, 1);
  EXPECT_OWN_MESSAGE(app, vkrt_op_copy(&t5, &t4), inval, "");
  vkrt_tensor far = vkrt_tensor_contiguous(a, 4096, VKRT_TYPE_F32, 4, 1, 1, 1);
  EXPECT_OWN_MESSAGE(app, vkrt_op_copy(&far, &t4), inval, "");
  EXPECT_OWN_MESSAGE(app, vkrt_op_transpose(&t5, &t4), inval, "");
  if (IS_ENABLED(CONFIG_VKRT_COLLECTIVES) && vkrt_device_count(app) > 1)
    EXPECT_OWN_MESSAGE(app, vkrt_allreduce(app, NULL), inval, "args is NULL");
  /* A buffer of another appliance is named as such, not as a device mismatch. */
  vkrt_appliance *other = vkt_open(&o);
  vkrt_buffer *foreign;
  vkt_check(other, vkrt_buffer_create(other, 0, 4096, VKRT_BUFFER_DEVICE_LOCAL, &foreign));
  vkrt_tensor ft = vkrt_tensor_contiguous(foreign, 0, VKRT_TYPE_F32, 4, 1, 1, 1);
  EXPECT_OWN_MESSAGE(app, vkrt_op_copy(&t4, &ft), inval, "another appliance");
  EXPECT_OWN_MESSAGE(app, vkrt_cmd_copy_buffer(a, 0, foreign, 0, 16), inval, "another appliance");
  vkrt_buffer_destroy(foreign);
  vkt_close(other);
  vkrt_options_initialize(NULL); /* a no-op, not a crash */
  /* Calls with no appliance to reach return the status and leave this one's message. */
  mark(app);
  assert_int_equal(vkrt_device_info_get(NULL, 0, NULL), inval);
  assert_int_equal(vkrt_upload(NULL, 0, host, 1), inval);
  assert_non_null(strstr(vkrt_last_error(app), "device 77"));
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(h);
  vkt_close(app);
}

struct error_thread {
  vkrt_appliance *app;
  char seen_before[64], seen_after[256];
};

static void *fail_on_other_thread(void *arg) {
  struct error_thread *t = arg;
  snprintf(t->seen_before, sizeof(t->seen_before), "%s", vkrt_last_error(t->app));
  vkrt_device_info info;
  vkrt_device_info_get(t->app, 55, &info);
  snprintf(t->seen_after, sizeof(t->seen_after), "%s", vkrt_last_error(t->app));
  return NULL;
}

/* A failure on another thread leaves this thread's message alone, and a thread sees only
 * its own (a fresh one: "no error"). A closed appliance's successor starts without one. */
static void test_last_error_per_thread(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  o.log = NULL;
  vkrt_appliance *app = vkt_open(&o);
  assert_string_equal(vkrt_last_error(app), "no error");
  mark(app);
  struct error_thread t = {.app = app};
  pthread_t tid;
  assert_int_equal(pthread_create(&tid, NULL, fail_on_other_thread, &t), 0);
  pthread_join(tid, NULL);
  assert_string_equal(t.seen_before, "no error");
  assert_non_null(strstr(t.seen_after, "device 55"));
  assert_non_null(strstr(vkrt_last_error(app), "device 77"));
  vkt_close(app);
  app = vkt_open(&o);
  assert_string_equal(vkrt_last_error(app), "no error");
  vkt_close(app);
}

/* A buffer destroyed while recorded work still uses it (not submitted yet, or submitted and
 * running) keeps its memory until that work is done: the copy out of a destroyed source
 * still reads its bytes, a copy into a destroyed destination writes nowhere harmful, and
 * the appliance closes with nothing left. (Freeing at once made the submit run on freed
 * memory: a crash in the driver.) */
static void test_destroy_while_in_use(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkt_counting counting = {0};
  o.allocator = vkt_counting_allocator(&counting);
  vkrt_appliance *app = vkt_open(&o);
  const uint64_t size = 1 << 20;
  uint8_t *pattern = malloc(size), *got = malloc(size);
  assert_non_null(pattern);
  assert_non_null(got);
  uint64_t seed = vkt_seed(0);
  for (int round = 0; round < 2; round++) { /* 0: destroyed before the submit; 1: after */
    vkrt_buffer *src, *dst, *sink;
    vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &src));
    vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &dst));
    vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &sink));
    vkt_fill_random(pattern, size, &seed);
    vkt_check(app, vkrt_upload(src, 0, pattern, size));
    vkt_poison(got, size);
    vkt_check(app, vkrt_upload(dst, 0, got, size));
    vkt_check(app, vkrt_cmd_copy_buffer(dst, 0, src, 0, size));
    vkt_check(app, vkrt_cmd_copy_buffer(sink, 0, dst, 0, size));
    uint64_t ticket = 0;
    if (round == 1)
      vkt_check(app, vkrt_submit(app, 0, &ticket));
    vkrt_buffer_destroy(src);
    vkrt_buffer_destroy(sink);
    vkt_check(app, vkrt_finish(app, 0));
    vkt_poison(got, size);
    vkt_check(app, vkrt_download(got, dst, 0, size));
    if (memcmp(got, pattern, size))
      fail_msg("round %d: the copy out of a destroyed source did not read its bytes", round);
    vkrt_buffer_destroy(dst); /* reaps the two destroyed earlier: their work is done */
  }
  free(pattern);
  free(got);
  /* close frees what the caller left: a buffer never destroyed, a capture never ended */
  vkrt_buffer *left, *left_src;
  vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &left));
  vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &left_src));
  vkt_check(app, vkrt_cmd_copy_buffer(left, 0, left_src, 0, size));
  vkt_check(app, vkrt_graph_begin(app));
  vkt_check(app, vkrt_cmd_copy_buffer(left_src, 0, left, 0, size));
  vkt_close(app);
  assert_int_equal(atomic_load(&counting.live), 0);
}

/* Size-0 transfers are no-ops returning VKRT_OK whatever their other arguments, and write
 * nothing (vkrt.h). */
static void test_size_zero_is_noop(void **state) {
  (void)state;
  vkrt_options o;
  vkt_options(&o);
  vkrt_appliance *app = vkt_open(&o);
  const uint64_t size = 4096;
  vkrt_buffer *a, *b;
  vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &a));
  vkt_check(app, vkrt_buffer_create(app, 0, size, VKRT_BUFFER_DEVICE_LOCAL, &b));
  uint8_t *pattern = malloc(size), *got = malloc(size);
  assert_non_null(pattern);
  assert_non_null(got);
  uint64_t seed = vkt_seed(0);
  vkt_fill_random(pattern, size, &seed);
  vkt_check(app, vkrt_upload(a, 0, pattern, size));
  vkt_check(app, vkrt_upload(a, 0, got, 0));
  vkt_check(app, vkrt_upload(a, size + 100, NULL, 0));
  vkt_check(app, vkrt_upload_2d(a, 0, 0, NULL, 0, 0, 5));
  vkt_check(app, vkrt_upload_2d(a, 0, 0, NULL, 0, 5, 0));
  vkt_check(app, vkrt_download(NULL, a, size + 100, 0));
  vkt_check(app, vkrt_cmd_copy_buffer(a, 0, b, 0, 0));
  vkt_check(app, vkrt_cmd_copy_buffer(a, 16, a, 0, 0));
  vkt_check(app, vkrt_cmd_fill(a, 0, 0, 0));
  vkt_check(app, vkrt_finish(app, 0));
  vkt_poison(got, size);
  vkt_check(app, vkrt_download(got, a, 0, size));
  assert_memory_equal(got, pattern, size);
  free(pattern);
  free(got);
  vkrt_buffer_destroy(a);
  vkrt_buffer_destroy(b);
  vkt_close(app);
}

int main(int argc, char **argv) {
  if (argc > 1) /* one case by name or pattern (tools/mutation-check.sh) */
    cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_close_stable),
      cmocka_unit_test(test_open_board),
      cmocka_unit_test(test_errors_have_messages),
      cmocka_unit_test(test_last_error_per_thread),
      cmocka_unit_test(test_size_zero_is_noop),
      cmocka_unit_test(test_destroy_while_in_use),
      cmocka_unit_test(test_open_four),
      cmocka_unit_test(test_buffer_round_trip),
      cmocka_unit_test(test_stream_ring),
      cmocka_unit_test(test_wait_short_timeouts),
      cmocka_unit_test(test_wait_spin_option),
      cmocka_unit_test(test_closing_barrier_host_stage),
      cmocka_unit_test(test_prestage_budget_at_open),
      cmocka_unit_test(test_sync_validation),
      cmocka_unit_test(test_board_mismatch),
      cmocka_unit_test(test_validation_counts),
      cmocka_unit_test(test_fault_hides_on_one_device),
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_open_fault_unwind),
      cmocka_unit_test(test_open_vk_alloc_fault_unwind),
      cmocka_unit_test(test_open_close_leaks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
