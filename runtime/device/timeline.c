/* Timeline semaphores: the one way libvkrt makes them (stream, upload contexts,
 * collectives), through the appliance's allocation callbacks. */
#include "base/base.h"
#include "device/device.h"

vkrt_status vkrt_timeline_create(struct vkrt_device *dev, const void *pnext, const char *what,
                                 VkSemaphore *out) {
  VkSemaphoreTypeCreateInfo type_info = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
      .pNext = pnext,
      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
      .initialValue = 0,
  };
  VkSemaphoreCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                .pNext = &type_info};
  VkResult r = dev->vk.vkCreateSemaphore(dev->handle, &info, &dev->sys->vk_allocator, out);
  if (r != VK_SUCCESS) {
    *out = VK_NULL_HANDLE;
    return vkrt_vk_error(dev, r, what);
  }
  return VKRT_OK;
}

void vkrt_timeline_destroy(struct vkrt_device *dev, VkSemaphore sem) {
  if (sem)
    dev->vk.vkDestroySemaphore(dev->handle, sem, &dev->sys->vk_allocator);
}
