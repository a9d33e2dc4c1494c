/* Synchronization helpers every transport shares: bounded timeline waits (a short spin,
 * then vkWaitSemaphores), progress across devices, timeline semaphores, host signals,
 * stream copies and host-memory imports. */
#include <string.h>

#include "base/base.h"
#include "transport/transport.h"

#define WAIT_SPIN_NS 20000ull /* bounded spin on the counter before blocking (H200: 12 us) */

/* ---- synchronization helpers --------------------------------------------------------- */

static vkrt_status status_of(VkResult r) {
  return r == VK_ERROR_DEVICE_LOST ? VKRT_ERROR_DEVICE_LOST
         : r == VK_TIMEOUT         ? VKRT_ERROR_TIMEOUT
                                   : VKRT_ERROR_VULKAN;
}

vkrt_status vkrt_collective_wait_value(struct vkrt_device *dev, VkSemaphore sem, uint64_t value,
                                       uint64_t deadline_ns) {
  /* A CPU device (lavapipe) executes on the cores a spin would take from it. */
  uint64_t now = vkrt_now_ns(), spin_end = now + (dev->caps.is_cpu ? 0 : WAIT_SPIN_NS);
  uint64_t current = 0;
  for (;;) {
    VkResult r = dev->vk.vkGetSemaphoreCounterValue(dev->handle, sem, &current);
    if (r != VK_SUCCESS)
      return status_of(r);
    if (current >= value)
      return VKRT_OK;
    now = vkrt_now_ns();
    if (now >= spin_end || now >= deadline_ns)
      break;
    vkrt_cpu_relax();
  }
  VkSemaphoreWaitInfo info = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
      .semaphoreCount = 1,
      .pSemaphores = &sem,
      .pValues = &value,
  };
  for (;;) {
    now = vkrt_now_ns();
    if (now >= deadline_ns)
      return VKRT_ERROR_TIMEOUT;
    VkResult r = dev->vk.vkWaitSemaphores(dev->handle, &info, deadline_ns - now);
    if (r == VK_SUCCESS)
      return VKRT_OK;
    if (r != VK_TIMEOUT)
      return status_of(r);
  }
}

uint64_t vkrt_collective_progress(struct vkrt_system *sys) {
  uint64_t sum = 0;
  for (uint32_t d = 0; d < sys->device_count; d++) {
    struct vkrt_device *dev = &sys->devices[d];
    uint64_t v = 0;
    if (dev->stream.timeline &&
        dev->vk.vkGetSemaphoreCounterValue(dev->handle, dev->stream.timeline, &v) == VK_SUCCESS)
      sum += v;
  }
  return sum;
}

#define PROGRESS_SLICE_NS 20000000ull /* re-check the appliance's progress every 20 ms */

vkrt_status vkrt_collective_wait_progress(struct vkrt_system *sys, struct vkrt_device *dev,
                                          VkSemaphore sem, uint64_t value, uint64_t timeout_ns) {
  uint64_t progress = vkrt_collective_progress(sys);
  uint64_t deadline = vkrt_now_ns() + timeout_ns;
  for (;;) {
    uint64_t now = vkrt_now_ns();
    vkrt_status s = vkrt_collective_wait_value(dev, sem, value,
                                               VKRT_MIN(deadline, now + PROGRESS_SLICE_NS));
    if (s != VKRT_ERROR_TIMEOUT)
      return s;
    /* Work still retiring somewhere (a deep pipeline recorded far ahead, a long kernel
     * before the collective) is not a stall: the clock restarts. */
    uint64_t current = vkrt_collective_progress(sys);
    now = vkrt_now_ns();
    if (current != progress) {
      progress = current;
      deadline = now + timeout_ns;
    } else if (now >= deadline) {
      return VKRT_ERROR_TIMEOUT;
    }
  }
}

VkResult vkrt_collective_host_signal(struct vkrt_device *dev, VkSemaphore sem, uint64_t value) {
  VkSemaphoreSignalInfo info = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
      .semaphore = sem,
      .value = value,
  };
  return dev->vk.vkSignalSemaphore(dev->handle, &info);
}

bool vkrt_collective_stalled(const struct vkrt_device *dev) {
  return vkrt_fault(dev, VKRT_FAULT_PEER_STALL);
}

vkrt_status vkrt_collective_record_copy(struct vkrt_device *dev, VkBuffer dst, uint64_t dst_offset,
                                        VkBuffer src, uint64_t src_offset, uint64_t size) {
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_stream_next(dev, NULL, 0, &cmd); /* raw buffers: maybe host slots */
  if (s != VKRT_OK)
    return s;
  VkBufferCopy region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size};
  dev->vk.vkCmdCopyBuffer(cmd, src, dst, 1, &region);
  return VKRT_OK;
}

struct copy_tail {
  VkBuffer src, dst;
  VkBufferCopy region;
};

static void record_copy_tail(const struct vkrt_device_table *vk, VkCommandBuffer cmd,
                             const void *data) {
  const struct copy_tail *c = data;
  vk->vkCmdCopyBuffer(cmd, c->src, c->dst, 1, &c->region);
}

vkrt_status vkrt_collective_copy_after_waits(struct vkrt_device *dev, VkBuffer dst,
                                             uint64_t dst_offset, VkBuffer src,
                                             uint64_t src_offset, uint64_t size, bool host) {
  if (!vkrt_stream_tail_ok(dev))
    return vkrt_collective_record_copy(dev, dst, dst_offset, src, src_offset, size);
  struct vkrt_stream_tail tail = {.record = record_copy_tail, .host = host};
  _Static_assert(sizeof(struct copy_tail) <= VKRT_STREAM_TAIL_BYTES, "a copy fits a tail");
  *(struct copy_tail *)tail.data = (struct copy_tail){
      .src = src,
      .dst = dst,
      .region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size}};
  vkrt_stream_add_tail(dev, &tail);
  return VKRT_OK;
}

vkrt_status vkrt_collective_import_host(struct vkrt_device *dev, void *host, uint64_t size,
                                        VkBuffer *buffer, VkDeviceMemory *memory) {
  *buffer = VK_NULL_HANDLE;
  *memory = VK_NULL_HANDLE;
  if (vkrt_fault(dev, VKRT_FAULT_IMPORT_FAILS))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: collective slot import failed: VK_ERROR_OUT_OF_DEVICE_MEMORY "
                      "(injected)", dev->index);
  VkResult r = vkrt_device_import_host_pointer(
      dev, host, size,
      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
          VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, buffer, memory);
  if (r != VK_SUCCESS)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: collective slot import failed: %s", dev->index,
                      vkrt_vk_result_str(r));
  return VKRT_OK;
}


