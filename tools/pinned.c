/* The pinned host-to-device rate (tools/pinned.h). */
#include "pinned.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

struct pinned_part {
  vkrt_buffer *dst;
  const uint8_t *host;
  uint64_t size;
  vkrt_status status;
  pthread_t tid;
};

static void *pinned_part_run(void *arg) {
  struct pinned_part *p = arg;
  p->status = vkrt_upload(p->dst, 0, p->host, p->size);
  return NULL;
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double tool_pinned_rate(vkrt_appliance *app, const uint8_t *host, uint64_t size,
                        uint32_t devices) {
  struct pinned_part part[VKRT_MAX_DEVICES] = {0};
  devices = devices < 1 ? 1 : devices > VKRT_MAX_DEVICES ? VKRT_MAX_DEVICES : devices;
  double best = 0;
  bool made = true;
  for (uint32_t d = 0; made && d < devices; d++) {
    part[d].host = host + size * d / devices;
    part[d].size = size * (d + 1) / devices - size * d / devices;
    made = vkrt_buffer_create(app, d, part[d].size, VKRT_BUFFER_DEVICE_LOCAL, &part[d].dst) ==
           VKRT_OK;
  }
  for (int i = 0; made && i < 4; i++) {
    const double t0 = seconds();
    uint32_t started = 0;
    if (devices == 1)
      pinned_part_run(&part[0]);
    else
      while (started < devices &&
             pthread_create(&part[started].tid, NULL, pinned_part_run, &part[started]) == 0)
        started++;
    for (uint32_t d = 0; d < started; d++)
      pthread_join(part[d].tid, NULL);
    const double rate = (double)size / (seconds() - t0);
    for (uint32_t d = 0; d < devices; d++)
      made = made && (devices == 1 || started == devices) && part[d].status == VKRT_OK;
    if (made && i > 0 && rate > best)
      best = rate;
  }
  for (uint32_t d = 0; d < devices; d++)
    vkrt_buffer_destroy(part[d].dst);
  return best;
}
