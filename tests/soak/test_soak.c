/* Soak: small allreduces back to back while 8 threads upload (from registered and
 * unregistered host memory) and a ninth registers/unregisters regions. Every upload is read
 * back and compared; every 64th allreduce is checked on every rank; at the end the counting
 * allocator must show no live allocation. `make soak` runs it long (VKRT_SOAK_SECONDS,
 * VKRT_SOAK_ALLREDUCES); inside `make test` it runs a short version. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/vk_test.h"

#define UPLOADERS 8
#define REGIONS 4
#define CHURN_REGIONS 4
#define REGION_BYTES (1u << 20)
#define COUNT 256

struct soak {
  vkrt_appliance *app;
  uint8_t *regions[REGIONS];        /* registered for the whole run */
  uint8_t *churn[CHURN_REGIONS];    /* registered and unregistered over and over */
  uint8_t *plain;                   /* never registered: staging ring */
  atomic_bool stop;
  atomic_long uploads, upload_errors, churns, churn_errors;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *uploader(void *arg) {
  struct soak *s = arg;
  static atomic_int next_id;
  int id = atomic_fetch_add(&next_id, 1);
  uint32_t dev = (uint32_t)id % vkrt_device_count(s->app);
  uint64_t state = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
  vkrt_buffer *buf = NULL;
  uint8_t *back = malloc(REGION_BYTES);
  if (vkrt_buffer_create(s->app, dev, REGION_BYTES, VKRT_BUFFER_DEVICE_LOCAL, &buf) != VKRT_OK || !back) {
    atomic_fetch_add(&s->upload_errors, 1);
    free(back);
    return NULL;
  }
  while (!atomic_load(&s->stop)) {
    uint64_t r = vkrt_xorshift(&state);
    int which = (int)(r % 3);
    const uint8_t *src = which == 0 ? s->regions[r / 3 % REGIONS]
                       : which == 1 ? s->churn[r / 3 % CHURN_REGIONS] : s->plain;
    uint64_t off = (r >> 16) % (REGION_BYTES / 2), len = 1 + (r >> 40) % (REGION_BYTES / 2);
    if (vkrt_upload(buf, 0, src + off, len) != VKRT_OK ||
        vkrt_download(back, buf, 0, len) != VKRT_OK || memcmp(back, src + off, len) != 0) {
      fprintf(stderr, "soak: uploader %d: %s\n", id, vkrt_last_error(s->app));
      atomic_fetch_add(&s->upload_errors, 1);
    }
    atomic_fetch_add(&s->uploads, 1);
  }
  vkrt_buffer_destroy(buf);
  free(back);
  return NULL;
}

static void *churner(void *arg) {
  struct soak *s = arg;
  uint64_t i = 0;
  while (!atomic_load(&s->stop)) {
    uint8_t *r = s->churn[i++ % CHURN_REGIONS];
    if (vkrt_host_register(s->app, r, REGION_BYTES, NULL, NULL, NULL) != VKRT_OK ||
        vkrt_host_unregister(s->app, r) != VKRT_OK) {
      fprintf(stderr, "soak: churn: %s\n", vkrt_last_error(s->app));
      atomic_fetch_add(&s->churn_errors, 1);
    }
    atomic_fetch_add(&s->churns, 1);
  }
  return NULL;
}

static long env_long(const char *name, long fallback) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : fallback;
}

static void test_soak(void **state) {
  (void)state;
  double seconds = (double)env_long("VKRT_SOAK_SECONDS", 4);
  long allreduces = env_long("VKRT_SOAK_ALLREDUCES", 2000);
  vkt_counting counting = {0};
  vkrt_options o;
  vkt_options(&o);
  o.allocator = vkt_counting_allocator(&counting);
  struct soak s = {0};
  s.app = vkt_open(&o);
  uint32_t n = vkrt_device_count(s.app);
  uint64_t seed = vkt_seed(0);
  for (int i = 0; i < REGIONS; i++) {
    s.regions[i] = aligned_alloc(4096, REGION_BYTES);
    vkt_fill_random(s.regions[i], REGION_BYTES, &seed);
    vkt_check(s.app, vkrt_host_register(s.app, s.regions[i], REGION_BYTES, NULL, NULL, NULL));
  }
  for (int i = 0; i < CHURN_REGIONS; i++) {
    s.churn[i] = aligned_alloc(4096, REGION_BYTES);
    vkt_fill_random(s.churn[i], REGION_BYTES, &seed);
  }
  s.plain = malloc(REGION_BYTES);
  vkt_fill_random(s.plain, REGION_BYTES, &seed);

  /* Integer-valued contributions: the sum is exact in any order. */
  vkrt_buffer *send[VKRT_MAX_DEVICES] = {0}, *recv[VKRT_MAX_DEVICES] = {0};
  float host[COUNT], expect[COUNT], got[COUNT];
  memset(expect, 0, sizeof(expect));
  for (uint32_t d = 0; d < n; d++) {
    for (int i = 0; i < COUNT; i++) {
      host[i] = (float)((int)(vkrt_xorshift(&seed) % 2001) - 1000);
      expect[i] += host[i];
    }
    vkt_check(s.app, vkrt_buffer_create(s.app, d, sizeof(host), VKRT_BUFFER_DEVICE_LOCAL, &send[d]));
    vkt_check(s.app, vkrt_buffer_create(s.app, d, sizeof(host), VKRT_BUFFER_DEVICE_LOCAL, &recv[d]));
    vkt_check(s.app, vkrt_upload(send[d], 0, host, sizeof(host)));
  }

  pthread_t threads[UPLOADERS + 1];
  for (int i = 0; i < UPLOADERS; i++)
    pthread_create(&threads[i], NULL, uploader, &s);
  pthread_create(&threads[UPLOADERS], NULL, churner, &s);

  vkrt_allreduce_args args = {.count = COUNT, .type = VKRT_TYPE_F32};
  for (uint32_t d = 0; d < n; d++) {
    args.send[d] = send[d];
    args.recv[d] = recv[d];
  }
  double t0 = now_s();
  long done = 0, wrong = 0;
  for (; done < allreduces && now_s() - t0 < seconds; done++) {
    bool check = done % 64 == 0;
    if (check) {
      float poison[COUNT];
      vkt_poison(poison, sizeof(poison));
      for (uint32_t d = 0; d < n; d++)
        vkt_check(s.app, vkrt_upload(recv[d], 0, poison, sizeof(poison)));
    }
    vkt_check(s.app, vkrt_allreduce(s.app, &args));
    if (check || done % 16 == 15) {
      for (uint32_t d = 0; d < n; d++)
        vkt_check(s.app, vkrt_finish(s.app, d));
    }
    if (check) {
      for (uint32_t d = 0; d < n; d++) {
        vkt_check(s.app, vkrt_download(got, recv[d], 0, sizeof(got)));
        wrong += memcmp(got, expect, sizeof(got)) != 0;
      }
    }
  }
  for (uint32_t d = 0; d < n; d++)
    vkt_check(s.app, vkrt_finish(s.app, d));
  atomic_store(&s.stop, true);
  for (int i = 0; i <= UPLOADERS; i++)
    pthread_join(threads[i], NULL);
  double elapsed = now_s() - t0;
  printf("vkrt-test: soak: %ld allreduces (%ld wrong) on %u devices, %ld uploads (%ld errors) from %d "
         "threads, %ld register/unregister cycles (%ld errors) in %.1f s\n",
         done, wrong, n, (long)s.uploads, (long)s.upload_errors, UPLOADERS, (long)s.churns,
         (long)s.churn_errors, elapsed);
  for (uint32_t d = 0; d < n; d++) {
    vkrt_buffer_destroy(send[d]);
    vkrt_buffer_destroy(recv[d]);
  }
  for (int i = 0; i < REGIONS; i++)
    vkt_check(s.app, vkrt_host_unregister(s.app, s.regions[i]));
  vkt_close(s.app);
  long live = atomic_load(&counting.live);
  printf("vkrt-test: soak: %ld allocations through the injected allocator, %ld live after close\n",
         (long)atomic_load(&counting.total), live);
  for (int i = 0; i < REGIONS; i++)
    free(s.regions[i]);
  for (int i = 0; i < CHURN_REGIONS; i++)
    free(s.churn[i]);
  free(s.plain);
  assert_int_equal(wrong, 0);
  assert_int_equal(s.upload_errors, 0);
  assert_int_equal(s.churn_errors, 0);
  assert_int_equal(live, 0);
  assert_true(done > 0 && s.uploads > 0 && s.churns > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_soak)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
