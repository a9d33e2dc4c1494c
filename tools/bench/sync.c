/* vkrt-bench sync: the submit + wait floors of the raw Vulkan queue next to libvkrt's, in
 * one run on one device. Raw floors use the device's own queue and a private timeline
 * semaphore / fence: an empty submit signalling a timeline value, waited by spinning on
 * vkGetSemaphoreCounterValue, by vkWaitSemaphores, and an empty submit with a fence
 * (vkWaitForFences). libvkrt: vkrt_submit of nothing + vkrt_wait, a 4-byte vkrt_cmd_fill +
 * vkrt_finish, and a small op (vkrt_op_copy of 4 KiB) + vkrt_finish. Median and p99 of
 * --iters round trips each, the kinds interleaved; ratios to the timeline-spin floor. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "device/device.h"

struct sync_ctx {
  vkrt_appliance *app;
  struct vkrt_device *dev;
  VkSemaphore timeline;
  uint64_t value;
  VkFence fence;
  vkrt_buffer *a, *b;
  VkCommandPool pool;
  VkCommandBuffer fill; /* recorded once: fill 4 bytes, barrier to the host */
};

enum sync_kind { RAW_SPIN, RAW_WAIT_SEMAPHORES, RAW_FENCE, RAW_FILL_SPIN, LIB_SUBMIT_WAIT,
                 LIB_FILL_FINISH, LIB_OP_FINISH, SYNC_KINDS };
static const char *const sync_names[SYNC_KINDS] = {
  "raw: empty submit + timeline spin", "raw: empty submit + vkWaitSemaphores",
  "raw: empty submit + fence wait",    "raw: recorded 4 B fill + timeline spin",
  "vkrt_submit (empty) + vkrt_wait",   "vkrt_cmd_fill 4 B + vkrt_finish",
  "vkrt_op_copy 4 KiB + vkrt_finish",
};

static bool raw_submit(struct sync_ctx *c, bool fence, VkCommandBuffer cmd) {
  struct vkrt_device *dev = c->dev;
  uint64_t v = ++c->value;
  VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                      .signalSemaphoreValueCount = 1,
                                      .pSignalSemaphoreValues = &v};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &ts,
                     .commandBufferCount = cmd ? 1 : 0,
                     .pCommandBuffers = &cmd,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &c->timeline};
  pthread_mutex_lock(&dev->compute_queue_lock);
  VkResult r = dev->vk.vkQueueSubmit(dev->compute_queue, 1, &si, fence ? c->fence : VK_NULL_HANDLE);
  pthread_mutex_unlock(&dev->compute_queue_lock);
  return r == VK_SUCCESS;
}

static bool one(struct sync_ctx *c, enum sync_kind k) {
  struct vkrt_device *dev = c->dev;
  switch (k) {
  case RAW_SPIN:
  case RAW_FILL_SPIN: {
    if (!raw_submit(c, false, k == RAW_FILL_SPIN ? c->fill : VK_NULL_HANDLE))
      return false;
    uint64_t cur = 0;
    while (cur < c->value)
      if (dev->vk.vkGetSemaphoreCounterValue(dev->handle, c->timeline, &cur) != VK_SUCCESS)
        return false;
    return true;
  }
  case RAW_WAIT_SEMAPHORES: {
    if (!raw_submit(c, false, VK_NULL_HANDLE))
      return false;
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &c->timeline,
                              .pValues = &c->value};
    return dev->vk.vkWaitSemaphores(dev->handle, &wi, UINT64_MAX) == VK_SUCCESS;
  }
  case RAW_FENCE:
    if (!raw_submit(c, true, VK_NULL_HANDLE) ||
        dev->vk.vkWaitForFences(dev->handle, 1, &c->fence, VK_TRUE, UINT64_MAX) != VK_SUCCESS)
      return false;
    return dev->vk.vkResetFences(dev->handle, 1, &c->fence) == VK_SUCCESS;
  case LIB_SUBMIT_WAIT: {
    uint64_t t;
    return vkrt_submit(c->app, dev->index, &t) == VKRT_OK &&
           vkrt_wait(c->app, dev->index, t, UINT64_MAX) == VKRT_OK;
  }
  case LIB_FILL_FINISH:
    return vkrt_cmd_fill(c->a, 0, 4, 0x3f800000u) == VKRT_OK && vkrt_finish(c->app, dev->index) == VKRT_OK;
  case LIB_OP_FINISH: {
    vkrt_tensor d = vkrt_tensor_contiguous(c->b, 0, VKRT_TYPE_F32, 1024, 1, 1, 1);
    vkrt_tensor s = vkrt_tensor_contiguous(c->a, 0, VKRT_TYPE_F32, 1024, 1, 1, 1);
    return vkrt_op_copy(&d, &s) == VKRT_OK && vkrt_finish(c->app, dev->index) == VKRT_OK;
  }
  default:
    return false;
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
  c.dev = &c.app->devices[device];
  if (iters <= 0)
    iters = c.dev->caps.is_cpu ? 200 : 2000;
  VkSemaphoreTypeCreateInfo type = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
  VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type};
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  double *t = calloc((size_t)iters, sizeof(double));
  int rc = 1;
  if (!t || c.dev->vk.vkCreateSemaphore(c.dev->handle, &sci, NULL, &c.timeline) != VK_SUCCESS ||
      c.dev->vk.vkCreateFence(c.dev->handle, &fci, NULL, &c.fence) != VK_SUCCESS ||
      vkrt_buffer_create(c.app, device, 4096, VKRT_BUFFER_DEVICE_LOCAL, &c.a) != VKRT_OK ||
      vkrt_buffer_create(c.app, device, 4096, VKRT_BUFFER_DEVICE_LOCAL, &c.b) != VKRT_OK) {
    fprintf(stderr, "vkrt-bench sync: setup failed: %s\n", vkrt_last_error(c.app));
    goto out;
  }
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .queueFamilyIndex = c.dev->compute_family};
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 1};
  VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  VkMemoryBarrier host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
  if (c.dev->vk.vkCreateCommandPool(c.dev->handle, &pci, NULL, &c.pool) != VK_SUCCESS ||
      (cai.commandPool = c.pool,
       c.dev->vk.vkAllocateCommandBuffers(c.dev->handle, &cai, &c.fill) != VK_SUCCESS) ||
      c.dev->vk.vkBeginCommandBuffer(c.fill, &cbi) != VK_SUCCESS) {
    fprintf(stderr, "vkrt-bench sync: command buffer setup failed\n");
    goto out;
  }
  c.dev->vk.vkCmdFillBuffer(c.fill, c.a->handle, 0, 4, 0x3f800000u);
  c.dev->vk.vkCmdPipelineBarrier(c.fill, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                                 0, 1, &host, 0, NULL, 0, NULL);
  if (c.dev->vk.vkEndCommandBuffer(c.fill) != VK_SUCCESS)
    goto out;
  if (json)
    printf("{\"bench\": \"sync\", \"device\": \"%s\", \"driver\": \"%s\", \"iters\": %d, \"results\": [",
           c.dev->caps.device_name, c.dev->caps.driver_name, iters);
  else
    printf("vkrt-bench sync: dev%u %s (%s), %d round trips each (median, p99)\n", device,
           c.dev->caps.device_name, c.dev->caps.driver_name, iters);
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
  if (c.pool) /* frees the command buffer */
    c.dev->vk.vkDestroyCommandPool(c.dev->handle, c.pool, NULL);
  vkrt_buffer_destroy(c.a);
  vkrt_buffer_destroy(c.b);
  if (c.fence)
    c.dev->vk.vkDestroyFence(c.dev->handle, c.fence, NULL);
  if (c.timeline)
    c.dev->vk.vkDestroySemaphore(c.dev->handle, c.timeline, NULL);
  vkrt_close(c.app);
  return rc;
}

BENCH_COMMAND(sync, "sync", "submit + wait floors (timeline spin, vkWaitSemaphores, fence) vs libvkrt",
              cmd_sync)
