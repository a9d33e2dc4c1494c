/* vkrt/vkrt_lab.h: two GPU timestamps around work recorded into a device's stream. */
#include "lab/lab.h"

struct vkrt_lab_timer {
  struct vkrt_device *dev;
  VkQueryPool queries;
};

vkrt_status vkrt_lab_timer_create(vkrt_appliance *app, uint32_t device,
                                  vkrt_lab_timer **out) {
  if (!out)
    return VKRT_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  struct vkrt_device *dev;
  vkrt_status s = vkrt_lab_device_of(app, device, out, &dev);
  if (s != VKRT_OK)
    return s;
  if (!(dev->caps.timestamp_period_ns > 0))
    return vkrt_error(&dev->sys->base, VKRT_ERROR_UNSUPPORTED,
                      "dev%u: no timestamps on the compute queue", dev->index);
  struct vkrt_lab_timer *t = vkrt_calloc(&dev->sys->base, 1, sizeof(*t));
  if (!t)
    return vkrt_error(&dev->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "dev%u: timer", dev->index);
  t->dev = dev;
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                              .queryType = VK_QUERY_TYPE_TIMESTAMP,
                              .queryCount = 2};
  VkResult r = dev->vk.vkCreateQueryPool(dev->handle, &qi, &dev->sys->vk_allocator, &t->queries);
  if (r != VK_SUCCESS) {
    vkrt_free(&dev->sys->base, t);
    return vkrt_vk_error(dev, r, "vkCreateQueryPool");
  }
  *out = t;
  return VKRT_OK;
}

void vkrt_lab_timer_destroy(vkrt_lab_timer *t) {
  if (!t)
    return;
  t->dev->vk.vkDestroyQueryPool(t->dev->handle, t->queries, &t->dev->sys->vk_allocator);
  vkrt_free(&t->dev->sys->base, t);
}

vkrt_status vkrt_lab_timer_begin(vkrt_lab_timer *t) {
  if (!t)
    return VKRT_ERROR_INVALID_ARGUMENT;
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_stream_cmd(t->dev, &cmd);
  if (s != VKRT_OK)
    return s;
  t->dev->vk.vkCmdResetQueryPool(cmd, t->queries, 0, 2);
  t->dev->vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, t->queries, 0);
  return VKRT_OK;
}

vkrt_status vkrt_lab_timer_end(vkrt_lab_timer *t, bool barrier) {
  if (!t)
    return VKRT_ERROR_INVALID_ARGUMENT;
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_stream_cmd(t->dev, &cmd);
  if (s != VKRT_OK)
    return s;
  if (barrier)
    vkrt_stream_barrier(t->dev, cmd);
  t->dev->vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, t->queries, 1);
  return VKRT_OK;
}

vkrt_status vkrt_lab_timer_seconds(vkrt_lab_timer *t, double *out) {
  if (!t || !out)
    return VKRT_ERROR_INVALID_ARGUMENT;
  uint64_t ts[2];
  VkResult r = t->dev->vk.vkGetQueryPoolResults(t->dev->handle, t->queries, 0, 2, sizeof(ts), ts,
                                                8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(t->dev, r, "vkGetQueryPoolResults");
  *out = (double)(ts[1] - ts[0]) * t->dev->caps.timestamp_period_ns * 1e-9;
  return VKRT_OK;
}
