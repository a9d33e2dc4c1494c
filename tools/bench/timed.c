/* vkrt-bench: work recorded into a device's stream, timed by the lab's GPU timestamps
 * (vkrt/vkrt_lab.h) or the wall clock; for the commands built with the lab (copy, transpose,
 * concat, matmul, quant, cases). */
#include "bench.h"

double bench_last_record_s, bench_last_wall_s;

vkrt_status bench_time_recorded(vkrt_appliance *app, uint32_t device, vkrt_lab_timer *timer,
                                bool barrier, vkrt_status (*record)(void *user), void *user,
                                double *seconds) {
  *seconds = -1;
  vkrt_status s = timer ? vkrt_lab_timer_begin(timer) : VKRT_OK;
  if (s != VKRT_OK)
    return s;
  double w0 = bench_now_s();
  s = record(user);
  bench_last_record_s = bench_now_s() - w0;
  if (s != VKRT_OK) {
    vkrt_finish(app, device);
    return s;
  }
  if (timer && (s = vkrt_lab_timer_end(timer, barrier)) != VKRT_OK)
    return s;
  if ((s = vkrt_finish(app, device)) != VKRT_OK)
    return s;
  *seconds = bench_last_wall_s = bench_now_s() - w0;
  double gpu;
  if (timer && vkrt_lab_timer_seconds(timer, &gpu) == VKRT_OK)
    *seconds = gpu;
  return VKRT_OK;
}
