/* vkrt-bench sync: the submit + wait floors of the raw Vulkan queue next to libvkrt's, in
 * one run on one device. Raw floors (vkrt_lab_raw of vkrt/vkrt_lab.h, so the bench
 * needs no Vulkan) use the device's own queue and a private timeline semaphore / fence: an empty submit signalling a timeline value, waited by spinning on
 * vkGetSemaphoreCounterValue, by vkWaitSemaphores, and an empty submit with a fence
 * (vkWaitForFences). libvkrt: vkrt_submit of nothing + vkrt_wait, a 4-byte vkrt_cmd_fill +
 * vkrt_finish, and a small op (vkrt_op_copy of 4 KiB) + vkrt_finish. Median and p99 of
 * --iters round trips each, the kinds interleaved; ratios to the timeline-spin floor. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "vkrt/vkrt_lab.h"

struct sync_ctx {
  vkrt_appliance *app;
  uint32_t device;
  vkrt_lab_raw *raw; /* the raw Vulkan floors, run inside the library */
  vkrt_buffer *a, *b;
};

/* The first kinds are vkrt_lab_raw_kind values in order. */
enum sync_kind { RAW_SPIN, RAW_WAIT_SEMAPHORES, RAW_FENCE, RAW_FILL_SPIN, RAW_UPDATE_SPIN,
                 RAW_FILL_BARE_SPIN, RAW_FILL_DEVICE_SPIN, RAW_UPDATE_DEVICE_SPIN,
                 RAW_LEAD_FILL_SPIN, LIB_SUBMIT_WAIT, LIB_FILL_FINISH, LIB_OP_FINISH, SYNC_KINDS };
_Static_assert(RAW_SPIN == (int)VKRT_LAB_RAW_SPIN && RAW_FILL_SPIN == (int)VKRT_LAB_RAW_FILL_SPIN &&
               LIB_SUBMIT_WAIT == (int)VKRT_LAB_RAW_KIND_COUNT, "sync kinds follow the raw kinds");
static const char *const sync_names[SYNC_KINDS] = {
  "raw: empty submit + timeline spin", "raw: empty submit + vkWaitSemaphores",
  "raw: empty submit + fence wait",    "raw: recorded 4 B fill + timeline spin",
  "raw: recorded 4 B update + timeline spin", "raw: recorded 4 B fill, no barrier, spin",
  "raw: 4 B fill + device barrier, spin", "raw: 4 B update + device barrier, spin",
  "raw: device barrier + 4 B fill, spin",
  "vkrt_submit (empty) + vkrt_wait",   "vkrt_cmd_fill 4 B + vkrt_finish",
  "vkrt_op_copy 4 KiB + vkrt_finish",
};

static bool one(struct sync_ctx *c, enum sync_kind k) {
  switch (k) {
  case LIB_SUBMIT_WAIT: {
    uint64_t t;
    return vkrt_submit(c->app, c->device, &t) == VKRT_OK &&
           vkrt_wait(c->app, c->device, t, UINT64_MAX) == VKRT_OK;
  }
  case LIB_FILL_FINISH:
    return vkrt_cmd_fill(c->a, 0, 4, 0x3f800000u) == VKRT_OK && vkrt_finish(c->app, c->device) == VKRT_OK;
  case LIB_OP_FINISH: {
    vkrt_tensor d = vkrt_tensor_contiguous(c->b, 0, VKRT_TYPE_F32, 1024, 1, 1, 1);
    vkrt_tensor s = vkrt_tensor_contiguous(c->a, 0, VKRT_TYPE_F32, 1024, 1, 1, 1);
    return vkrt_op_copy(&d, &s) == VKRT_OK && vkrt_finish(c->app, c->device) == VKRT_OK;
  }
  default:
    return vkrt_lab_raw_round_trip(c->raw, (vkrt_lab_raw_kind)k) == VKRT_OK;
  }
}

static int cmd_sync(int argc, char **argv) {
  static const struct option longs[] = {{"iters", required_argument, 0, 'i'},
                                        {"device", required_argument, 0, 'd'},
                                        {"json", no_argument, 0, 'j'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  int iters = 0;
  uint32_t device = 0;
  bool json = false;
  optind = 1;
  int ch;
  while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (ch) {
    case 'i': iters = atoi(optarg); break;
    case 'd': device = (uint32_t)atoi(optarg); break;
    case 'j': json = true; break;
    default:
      printf("usage: vkrt-bench sync [--iters N] [--device D] [--json]\n");
      return ch == 'h' ? 0 : 2;
    }
  }
  struct sync_ctx c;
  memset(&c, 0, sizeof(c));
  c.app = bench_open(NULL);
  if (device >= vkrt_device_count(c.app)) {
    fprintf(stderr, "vkrt-bench sync: no device %u\n", device);
    vkrt_close(c.app);
    return 2;
  }
  c.device = device;
  vkrt_device_info info;
  vkrt_lab_device td;
  vkrt_device_info_get(c.app, device, &info);
  vkrt_lab_device_get(c.app, device, &td);
  if (iters <= 0)
    iters = td.is_cpu ? 200 : 2000;
  double *t = calloc((size_t)iters, sizeof(double));
  int rc = 1;
  if (!t || vkrt_buffer_create(c.app, device, 4096, VKRT_BUFFER_DEVICE_LOCAL, &c.a) != VKRT_OK ||
      vkrt_buffer_create(c.app, device, 4096, VKRT_BUFFER_DEVICE_LOCAL, &c.b) != VKRT_OK ||
      vkrt_lab_raw_create(c.a, &c.raw) != VKRT_OK) {
    fprintf(stderr, "vkrt-bench sync: setup failed: %s\n", vkrt_last_error(c.app));
    goto out;
  }
  if (json)
    printf("{\"bench\": \"sync\", \"device\": \"%s\", \"driver\": \"%s\", \"iters\": %d, \"results\": [",
           info.name, info.driver_name, iters);
  else
    printf("vkrt-bench sync: dev%u %s (%s), %d round trips each (median, p99)\n", device,
           info.name, info.driver_name, iters);
  /* Kinds interleaved round-robin, so each sees the same GPU and driver state (a run that
   * measured them one after another saw every kind after the blocking waits at 40-50 us). */
  double *all = calloc((size_t)iters * SYNC_KINDS, sizeof(double));
  if (!all)
    goto out;
  for (int i = -iters / 10 - 1; i < iters; i++) /* warm-up rounds first */
    for (int k = 0; k < SYNC_KINDS; k++) {
      double t0 = bench_now_s();
      if (!one(&c, (enum sync_kind)k)) {
        fprintf(stderr, "vkrt-bench sync: %s failed: %s\n", sync_names[k], vkrt_last_error(c.app));
        free(all);
        goto out;
      }
      if (i >= 0)
        all[(size_t)k * iters + i] = bench_now_s() - t0;
    }
  double floor = 0;
  for (int k = 0; k < SYNC_KINDS; k++) {
    memcpy(t, all + (size_t)k * iters, (size_t)iters * sizeof(double));
    double med = bench_median(t, iters); /* sorts t */
    double p99 = t[(int)((iters - 1) * 0.99)];
    if (k == RAW_SPIN)
      floor = med;
    if (json)
      printf("%s{\"name\": \"%s\", \"median_us\": %.2f, \"p99_us\": %.2f, \"ratio_to_spin_floor\": %.3f}",
             k ? ", " : "", sync_names[k], med * 1e6, p99 * 1e6, floor > 0 ? med / floor : 0);
    else
      printf("  %-40s %9.2f us  p99 %9.2f us  x%.2f of the spin floor\n", sync_names[k], med * 1e6,
             p99 * 1e6, floor > 0 ? med / floor : 0);
  }
  free(all);
  if (json)
    printf("]}\n");
  rc = 0;
out:
  free(t);
  vkrt_lab_raw_destroy(c.raw);
  vkrt_buffer_destroy(c.a);
  vkrt_buffer_destroy(c.b);
  vkrt_close(c.app);
  return rc;
}

BENCH_COMMAND(sync, "sync", "submit + wait floors (timeline spin, vkWaitSemaphores, fence) vs libvkrt",
              cmd_sync)
