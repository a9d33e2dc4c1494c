/* vkrt/vkrt_lab.h: the hand-over floors (vkrt-bench allreduce --latency): empty work on one
 * queue, then on a second one after it (another device's compute queue or the device's
 * transfer queue), ordered by a GPU wait on a timeline semaphore or by a host relay. */
#include <unistd.h>

#include "lab/lab.h"

struct vkrt_lab_handover {
  struct vkrt_device *from, *to;
  VkQueue to_queue;
  pthread_mutex_t *to_lock;
  bool gpu_wait;
  VkSemaphore first;       /* on `from` */
  VkSemaphore first_at_to; /* the same payload on `to` (gpu_wait between devices) */
  VkSemaphore second;      /* on `to` */
  uint64_t value;
};

void vkrt_lab_handover_destroy(vkrt_lab_handover *h) {
  if (!h)
    return;
  struct vkrt_device *devs[2] = {h->from, h->to};
  for (int i = 0; i < 2; i++) {
    pthread_mutex_lock(&devs[i]->compute_queue_lock);
    devs[i]->vk.vkQueueWaitIdle(devs[i]->compute_queue);
    pthread_mutex_unlock(&devs[i]->compute_queue_lock);
  }
  if (h->to_lock) {
    pthread_mutex_lock(h->to_lock);
    h->to->vk.vkQueueWaitIdle(h->to_queue);
    pthread_mutex_unlock(h->to_lock);
  }
  vkrt_timeline_destroy(h->from, h->first);
  if (h->first_at_to)
    vkrt_timeline_destroy(h->to, h->first_at_to);
  vkrt_timeline_destroy(h->to, h->second);
  vkrt_free(&h->from->sys->base, h);
}

/* Shares `first` with `to` as an opaque FD (created exportable by the caller). */
static vkrt_status handover_share(struct vkrt_lab_handover *h) {
  VkSemaphoreGetFdInfoKHR get = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
                                 .semaphore = h->first,
                                 .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
  int fd = -1;
  VkResult r = h->from->vk.vkGetSemaphoreFdKHR(h->from->handle, &get, &fd);
  if (r != VK_SUCCESS)
    return vkrt_vk_error(h->from, r, "hand-over floor: vkGetSemaphoreFdKHR");
  vkrt_status s = vkrt_timeline_create(h->to, NULL, "hand-over floor timeline", &h->first_at_to);
  if (s != VKRT_OK) {
    close(fd);
    return s;
  }
  VkImportSemaphoreFdInfoKHR import = {.sType = VK_STRUCTURE_TYPE_IMPORT_SEMAPHORE_FD_INFO_KHR,
                                       .semaphore = h->first_at_to,
                                       .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
                                       .fd = fd};
  r = h->to->vk.vkImportSemaphoreFdKHR(h->to->handle, &import);
  if (r != VK_SUCCESS) {
    close(fd);
    return vkrt_vk_error(h->to, r, "hand-over floor: vkImportSemaphoreFdKHR");
  }
  return VKRT_OK;
}

vkrt_status vkrt_lab_handover_create(vkrt_appliance *app, uint32_t from, uint32_t to,
                                     bool gpu_wait, vkrt_lab_handover **out) {
  if (!out)
    return VKRT_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  struct vkrt_device *a, *b;
  vkrt_status s = vkrt_lab_device_of(app, from, out, &a);
  if (s == VKRT_OK)
    s = vkrt_lab_device_of(app, to, out, &b);
  if (s != VKRT_OK)
    return s;
  if (from == to && !a->caps.has_transfer_queue)
    return vkrt_error(&a->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: no transfer queue apart from the compute queue", from);
  bool shared = gpu_wait && from != to;
  if (shared && !(a->caps.external_semaphore_fd && b->caps.external_semaphore_fd))
    return vkrt_error(&a->sys->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u -> dev%u: no semaphore FD functions to wait on the GPU", from, to);
  struct vkrt_lab_handover *h = vkrt_calloc(&a->sys->base, 1, sizeof(*h));
  if (!h)
    return vkrt_error(&a->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "hand-over floor");
  h->from = a;
  h->to = b;
  h->gpu_wait = gpu_wait;
  h->to_queue = from == to ? a->transfer_queue : b->compute_queue;
  h->to_lock = from == to ? a->transfer_lock : &b->compute_queue_lock;
  VkExportSemaphoreCreateInfo export_info = {
      .sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO,
      .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
  s = vkrt_timeline_create(a, shared ? &export_info : NULL, "hand-over floor timeline", &h->first);
  if (s == VKRT_OK)
    s = vkrt_timeline_create(b, NULL, "hand-over floor timeline", &h->second);
  if (s == VKRT_OK && shared)
    s = handover_share(h);
  if (s != VKRT_OK) {
    vkrt_lab_handover_destroy(h);
    return s;
  }
  *out = h;
  return VKRT_OK;
}

static VkResult handover_submit(struct vkrt_device *dev, VkQueue queue, pthread_mutex_t *lock,
                                VkSemaphore wait, VkSemaphore signal, uint64_t value) {
  VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                      .waitSemaphoreValueCount = wait ? 1 : 0,
                                      .pWaitSemaphoreValues = &value,
                                      .signalSemaphoreValueCount = 1,
                                      .pSignalSemaphoreValues = &value};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &ts,
                     .waitSemaphoreCount = wait ? 1 : 0,
                     .pWaitSemaphores = &wait,
                     .pWaitDstStageMask = &stage,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &signal};
  pthread_mutex_lock(lock);
  VkResult r = dev->vk.vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE);
  pthread_mutex_unlock(lock);
  return r;
}

static VkResult handover_spin(struct vkrt_device *dev, VkSemaphore sem, uint64_t value) {
  uint64_t cur = 0;
  VkResult r = VK_SUCCESS;
  while (r == VK_SUCCESS && cur < value)
    r = dev->vk.vkGetSemaphoreCounterValue(dev->handle, sem, &cur);
  return r;
}

vkrt_status vkrt_lab_handover_round_trip(vkrt_lab_handover *h) {
  if (!h)
    return VKRT_ERROR_INVALID_ARGUMENT;
  uint64_t v = ++h->value;
  VkResult r = handover_submit(h->from, h->from->compute_queue, &h->from->compute_queue_lock,
                               VK_NULL_HANDLE, h->first, v);
  VkSemaphore wait = VK_NULL_HANDLE;
  if (r == VK_SUCCESS && h->gpu_wait)
    wait = h->first_at_to ? h->first_at_to : h->first;
  else if (r == VK_SUCCESS)
    r = handover_spin(h->from, h->first, v);
  if (r == VK_SUCCESS)
    r = handover_submit(h->to, h->to_queue, h->to_lock, wait, h->second, v);
  if (r == VK_SUCCESS)
    r = handover_spin(h->to, h->second, v);
  return r == VK_SUCCESS ? VKRT_OK : vkrt_vk_error(h->to, r, "hand-over floor round trip");
}
