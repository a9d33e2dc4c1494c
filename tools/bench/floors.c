/* vkrt-bench allreduce --latency: the raw floors an allreduce is held against, through the
 * lab's raw submit and hand-over floors (vkrt/vkrt_lab.h), on an appliance of their own. */
#include <stdio.h>

#include "bench.h"

/* The median of N round trips of one hand-over floor (us); 0 when not measurable here. */
static double handover_us(vkrt_appliance *app, uint32_t from, uint32_t to, bool gpu_wait,
                          const char *what) {
  enum { N = 400 };
  static double t[N];
  vkrt_lab_handover *h = NULL;
  if (vkrt_lab_handover_create(app, from, to, gpu_wait, &h) != VKRT_OK) {
    printf("# floor %s: not measurable here: %s\n", what, vkrt_last_error(app));
    return 0;
  }
  for (int i = -N / 10; i < N; i++) {
    double t0 = bench_now_s();
    if (vkrt_lab_handover_round_trip(h) != VKRT_OK) {
      printf("# floor %s: %s\n", what, vkrt_last_error(app));
      vkrt_lab_handover_destroy(h);
      return 0;
    }
    if (i >= 0)
      t[i] = (bench_now_s() - t0) * 1e6;
  }
  vkrt_lab_handover_destroy(h);
  return bench_median(t, N);
}

void bench_latency_floors(uint32_t devices, bool json, struct bench_floors *out) {
  vkrt_options o;
  vkrt_options_initialize(&o);
  o.device_count = devices;
  o.log_level = VKRT_LOG_WARN;
  vkrt_appliance *app = NULL;
  char why[1024];
  if (vkrt_open(&o, &app, why, sizeof(why)) != VKRT_OK) {
    fprintf(stderr, "# floors: cannot open: %s\n", why);
    return;
  }
  enum { N = 400 };
  static double t[N];
  vkrt_buffer *target = NULL;
  vkrt_lab_raw *raw = NULL;
  if (vkrt_buffer_create(app, 0, 4096, VKRT_BUFFER_DEVICE_LOCAL, &target) == VKRT_OK &&
      vkrt_lab_raw_create(target, &raw) == VKRT_OK) {
    for (int i = -N / 10; i < N; i++) {
      double t0 = bench_now_s();
      if (vkrt_lab_raw_round_trip(raw, VKRT_LAB_RAW_SPIN) != VKRT_OK)
        break;
      if (i >= 0)
        t[i] = (bench_now_s() - t0) * 1e6;
    }
    out->one_queue = bench_median(t, N);
  }
  vkrt_lab_raw_destroy(raw);
  vkrt_buffer_destroy(target);
  out->queues_gpu = handover_us(app, 0, 0, true, "two queues of one device, GPU wait");
  out->queues_relay = handover_us(app, 0, 0, false, "two queues of one device, host relay");
  if (vkrt_device_count(app) > 1) {
    out->devices_gpu = handover_us(app, 0, 1, true, "two devices, GPU wait");
    out->devices_relay = handover_us(app, 0, 1, false, "two devices, host relay");
  }
  if (json)
    printf("\"latency_floors_us\": {\"one_queue\": %.2f, \"queues_gpu_wait\": %.2f, "
           "\"queues_host_relay\": %.2f, \"devices_gpu_wait\": %.2f, "
           "\"devices_host_relay\": %.2f}, ", out->one_queue, out->queues_gpu,
           out->queues_relay, out->devices_gpu, out->devices_relay);
  else
    printf("# raw floors (median of %d, us; 0 = not measurable here): one queue submit + spin "
           "%.1f; queue -> transfer queue of dev0: GPU wait %.1f, host relay %.1f; dev0 -> dev1: "
           "GPU wait %.1f, host relay %.1f\n", N, out->one_queue, out->queues_gpu,
           out->queues_relay, out->devices_gpu, out->devices_relay);
  vkrt_close(app);
}
