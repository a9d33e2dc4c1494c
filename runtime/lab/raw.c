/* vkrt/vkrt_lab.h: the raw Vulkan submit floors of one queue (vkrt-bench sync): empty or
 * pre-recorded 4-byte submits on the device's compute queue, beside the stream, waited by a
 * timeline spin, vkWaitSemaphores or a fence. */
#include "lab/lab.h"

struct vkrt_lab_raw {
  struct vkrt_device *dev;
  VkSemaphore timeline;
  uint64_t value;
  VkFence fence;
  VkCommandPool pool;
  VkCommandBuffer cmd[VKRT_LAB_RAW_KIND_COUNT]; /* recorded once; NULL: an empty submit */
};

/* What each kind's command buffer holds: a 4-byte fill or update of the target, and which
 * barriers around it. */
enum raw_barrier { RAW_NONE, RAW_HOST, RAW_DEVICE };
static const struct raw_recipe {
  bool recorded, update;
  enum raw_barrier lead, close;
} raw_recipes[VKRT_LAB_RAW_KIND_COUNT] = {
  [VKRT_LAB_RAW_FILL_SPIN] = {true, false, RAW_NONE, RAW_HOST},
  [VKRT_LAB_RAW_UPDATE_SPIN] = {true, true, RAW_NONE, RAW_HOST},
  [VKRT_LAB_RAW_FILL_BARE_SPIN] = {true, false, RAW_NONE, RAW_NONE},
  [VKRT_LAB_RAW_FILL_DEVICE_SPIN] = {true, false, RAW_NONE, RAW_DEVICE},
  [VKRT_LAB_RAW_UPDATE_DEVICE_SPIN] = {true, true, RAW_NONE, RAW_DEVICE},
  [VKRT_LAB_RAW_LEAD_FILL_SPIN] = {true, false, RAW_DEVICE, RAW_NONE},
};

void vkrt_lab_raw_destroy(vkrt_lab_raw *raw) {
  if (!raw)
    return;
  struct vkrt_device *dev = raw->dev;
  const VkAllocationCallbacks *a = &dev->sys->vk_allocator;
  /* the timeline was seen signaled by a spin; the queue (and the validation layer's thread
   * retiring its submissions) may still hold the objects a moment longer */
  pthread_mutex_lock(&dev->compute_queue_lock);
  dev->vk.vkQueueWaitIdle(dev->compute_queue);
  pthread_mutex_unlock(&dev->compute_queue_lock);
  if (raw->pool) /* frees the command buffers */
    dev->vk.vkDestroyCommandPool(dev->handle, raw->pool, a);
  if (raw->fence)
    dev->vk.vkDestroyFence(dev->handle, raw->fence, a);
  vkrt_timeline_destroy(dev, raw->timeline);
  vkrt_free(&dev->sys->base, raw);
}

static void raw_barrier(struct vkrt_device *dev, VkCommandBuffer cmd, enum raw_barrier kind) {
  if (kind == RAW_HOST) {
    VkMemoryBarrier host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    dev->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                 VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host, 0, NULL, 0, NULL);
  } else if (kind == RAW_DEVICE) { /* the stream's closing barrier when the host reads nothing */
    vkrt_stream_close_barrier(dev, cmd, false);
  }
}

static vkrt_status raw_setup(struct vkrt_lab_raw *raw, VkBuffer target) {
  struct vkrt_device *dev = raw->dev;
  const VkAllocationCallbacks *a = &dev->sys->vk_allocator;
  vkrt_status s = vkrt_timeline_create(dev, NULL, "raw floor timeline", &raw->timeline);
  if (s != VKRT_OK)
    return s;
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkResult r = dev->vk.vkCreateFence(dev->handle, &fci, a, &raw->fence);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkCreateFence");
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .queueFamilyIndex = dev->compute_family};
  r = dev->vk.vkCreateCommandPool(dev->handle, &pci, a, &raw->pool);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(dev, r, "vkCreateCommandPool");
  VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  static const uint32_t one = 0x3f800000u;
  for (int k = 0; k < VKRT_LAB_RAW_KIND_COUNT && r == VK_SUCCESS; k++) {
    const struct raw_recipe *recipe = &raw_recipes[k];
    if (!recipe->recorded)
      continue;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = raw->pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    r = dev->vk.vkAllocateCommandBuffers(dev->handle, &cai, &raw->cmd[k]);
    if (r != VK_SUCCESS)
      return vkrt_vk_error(dev, r, "raw floor command buffers");
    VkCommandBuffer cmd = raw->cmd[k];
    r = dev->vk.vkBeginCommandBuffer(cmd, &cbi);
    if (r != VK_SUCCESS)
      break;
    raw_barrier(dev, cmd, recipe->lead);
    if (recipe->update)
      dev->vk.vkCmdUpdateBuffer(cmd, target, 0, 4, &one);
    else
      dev->vk.vkCmdFillBuffer(cmd, target, 0, 4, one);
    raw_barrier(dev, cmd, recipe->close);
    r = dev->vk.vkEndCommandBuffer(cmd);
  }
  return r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(dev, r, "raw floor command buffer");
}

vkrt_status vkrt_lab_raw_create(vkrt_buffer *fill_target, vkrt_lab_raw **out) {
  if (!out)
    return VKRT_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (!fill_target)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = fill_target->dev;
  if (fill_target->size < 4)
    return vkrt_lab_bad(dev, "lab: the fill target has %lld bytes, under 4", (long long)fill_target->size);
  struct vkrt_lab_raw *raw = vkrt_calloc(&dev->sys->base, 1, sizeof(*raw));
  if (!raw)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "dev%u: raw floor", dev->index);
  raw->dev = dev;
  vkrt_status s = raw_setup(raw, fill_target->handle);
  if (s != VKRT_OK) {
    vkrt_lab_raw_destroy(raw);
    return s;
  }
  *out = raw;
  return VKRT_OK;
}

static vkrt_status raw_submit(struct vkrt_lab_raw *raw, bool fence, VkCommandBuffer cmd) {
  struct vkrt_device *dev = raw->dev;
  uint64_t v = ++raw->value;
  VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                      .signalSemaphoreValueCount = 1,
                                      .pSignalSemaphoreValues = &v};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &ts,
                     .commandBufferCount = cmd ? 1 : 0,
                     .pCommandBuffers = &cmd,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &raw->timeline};
  pthread_mutex_lock(&dev->compute_queue_lock);
  VkResult r = dev->vk.vkQueueSubmit(dev->compute_queue, 1, &si, fence ? raw->fence : VK_NULL_HANDLE);
  pthread_mutex_unlock(&dev->compute_queue_lock);
  return r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(dev, r, "vkQueueSubmit");
}

vkrt_status vkrt_lab_raw_round_trip(vkrt_lab_raw *raw, vkrt_lab_raw_kind kind) {
  if (!raw)
    return VKRT_ERROR_INVALID_ARGUMENT;
  struct vkrt_device *dev = raw->dev;
  VkResult r = VK_SUCCESS;
  vkrt_status s;
  switch (kind) {
  case VKRT_LAB_RAW_SPIN:
  case VKRT_LAB_RAW_FILL_SPIN:
  case VKRT_LAB_RAW_UPDATE_SPIN:
  case VKRT_LAB_RAW_FILL_BARE_SPIN:
  case VKRT_LAB_RAW_FILL_DEVICE_SPIN:
  case VKRT_LAB_RAW_UPDATE_DEVICE_SPIN:
  case VKRT_LAB_RAW_LEAD_FILL_SPIN:
    s = raw_submit(raw, false, raw->cmd[kind]);
    for (uint64_t cur = 0; s == VKRT_OK && r == VK_SUCCESS && cur < raw->value;)
      r = dev->vk.vkGetSemaphoreCounterValue(dev->handle, raw->timeline, &cur);
    break;
  case VKRT_LAB_RAW_WAIT_SEMAPHORES: {
    s = raw_submit(raw, false, VK_NULL_HANDLE);
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &raw->timeline,
                              .pValues = &raw->value};
    if (s == VKRT_OK)
      r = dev->vk.vkWaitSemaphores(dev->handle, &wi, UINT64_MAX);
    break;
  }
  case VKRT_LAB_RAW_FENCE:
    s = raw_submit(raw, true, VK_NULL_HANDLE);
    if (s == VKRT_OK)
      r = dev->vk.vkWaitForFences(dev->handle, 1, &raw->fence, VK_TRUE, UINT64_MAX);
    if (s == VKRT_OK && r == VK_SUCCESS)
      r = dev->vk.vkResetFences(dev->handle, 1, &raw->fence);
    break;
  default:
    return vkrt_lab_bad(dev, "lab: no raw floor kind %lld", (long long)kind);
  }
  return s != VKRT_OK ? s : r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(dev, r, "raw floor wait");
}
