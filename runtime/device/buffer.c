/* Buffers (and the public vkrt_buffer_* functions), device memory allocation (with fault
 * injection) and memory type selection. */
#include <string.h>

#include "base/base.h"
#include "device/device.h"

vkrt_status vkrt_vk_error(struct vkrt_device *dev, VkResult result, const char *what) {
  return vkrt_error(&dev->sys->base, vkrt_vk_status(result), "dev%u: %s: %s", dev->index, what,
                    vkrt_vk_result_str(result));
}

VkResult vkrt_device_allocate_memory(struct vkrt_device *dev, const VkMemoryAllocateInfo *info,
                                     VkDeviceMemory *out) {
  *out = VK_NULL_HANDLE;
  struct vkrt_system *sys = dev->sys;
  unsigned n = atomic_fetch_add(&sys->vk_alloc_count, 1) + 1;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  if (sys->options.faults.vulkan_alloc_fail_at && n == sys->options.faults.vulkan_alloc_fail_at) {
    vkrt_log(&sys->base, VKRT_LOG_WARN,
             "dev%u: injected failure of vkAllocateMemory call %u (%llu bytes)", dev->index, n,
             (unsigned long long)info->allocationSize);
    return VK_ERROR_OUT_OF_DEVICE_MEMORY;
  }
#else
  (void)n;
#endif
  return dev->vk.vkAllocateMemory(dev->handle, info, &dev->sys->vk_allocator, out);
}

uint32_t vkrt_device_memory_type(const struct vkrt_device *dev, uint32_t type_bits,
                                 uint32_t required, uint32_t preferred) {
  uint32_t fallback = UINT32_MAX;
  for (uint32_t i = 0; i < dev->caps.type_count; i++) {
    if (!(type_bits & (1u << i)))
      continue;
    uint32_t flags = dev->caps.type_flags[i];
    if ((flags & required) != required)
      continue;
    if ((flags & preferred) == preferred)
      return i;
    if (fallback == UINT32_MAX)
      fallback = i;
  }
  return fallback;
}

vkrt_status vkrt_buffer_create_internal(struct vkrt_device *dev, uint64_t size, uint32_t flags,
                                        VkBufferUsageFlags extra_usage, struct vkrt_buffer **out) {
  *out = NULL;
  struct vkrt_base *base = &dev->sys->base;
  if (size == 0)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "dev%u: buffer size 0", dev->index);
  if (flags & ~(uint32_t)VKRT_BUFFER_HOST_VISIBLE)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "dev%u: unknown buffer flags 0x%x",
                      dev->index, flags);
  uint64_t limit = VKRT_MIN(dev->caps.max_buffer_size, dev->caps.max_memory_allocation_size);
  if (limit && size > limit)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: buffer of %llu bytes is over the device limit of %llu", dev->index,
                      (unsigned long long)size, (unsigned long long)limit);
  struct vkrt_buffer *b = vkrt_calloc(base, 1, sizeof(*b));
  if (!b)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "dev%u: out of host memory",
                      dev->index);
  b->dev = dev;
  b->size = size;
  b->flags = flags;
  VkBufferCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT | extra_usage,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  vkrt_device_buffer_sharing(dev, &info);
  vkrt_status s;
  VkResult r = dev->vk.vkCreateBuffer(dev->handle, &info, &dev->sys->vk_allocator, &b->handle);
  if (r != VK_SUCCESS) {
    b->handle = VK_NULL_HANDLE;
    s = vkrt_vk_error(dev, r, "vkCreateBuffer");
    goto fail;
  }
  VkMemoryRequirements req;
  dev->vk.vkGetBufferMemoryRequirements(dev->handle, b->handle, &req);
  uint32_t type;
  if (flags & VKRT_BUFFER_HOST_VISIBLE)
    type = vkrt_device_memory_type(dev, req.memoryTypeBits,
                                   VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                   VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  else
    type = vkrt_device_memory_type(dev, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (type == UINT32_MAX)
    type = vkrt_device_memory_type(dev, req.memoryTypeBits, 0, 0);
  if (type == UINT32_MAX) {
    s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE, "dev%u: no memory type for a %s buffer",
                   dev->index, (flags & VKRT_BUFFER_HOST_VISIBLE) ? "host-visible" : "device");
    goto fail;
  }
  VkMemoryAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .allocationSize = req.size,
      .memoryTypeIndex = type,
  };
  b->memory_type = type;
  b->memory_size = req.size;
  r = vkrt_device_allocate_memory(dev, &alloc, &b->memory);
  if (r != VK_SUCCESS) {
    b->memory = VK_NULL_HANDLE;
    s = vkrt_vk_error(dev, r, "vkAllocateMemory for a buffer");
    goto fail;
  }
  r = dev->vk.vkBindBufferMemory(dev->handle, b->handle, b->memory, 0);
  if (r != VK_SUCCESS) {
    s = vkrt_vk_error(dev, r, "vkBindBufferMemory");
    goto fail;
  }
  if (flags & VKRT_BUFFER_HOST_VISIBLE) {
    r = dev->vk.vkMapMemory(dev->handle, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped);
    if (r != VK_SUCCESS) {
      b->mapped = NULL;
      s = vkrt_vk_error(dev, r, "vkMapMemory");
      goto fail;
    }
  }
  struct vkrt_system *sys = dev->sys;
  pthread_mutex_lock(&sys->buffers_lock);
  b->id = ++sys->buffer_ids;
  b->live_next = sys->live_buffers;
  if (sys->live_buffers)
    sys->live_buffers->live_prev = b;
  sys->live_buffers = b;
  pthread_mutex_unlock(&sys->buffers_lock);
  *out = b;
  return VKRT_OK;
fail:
  vkrt_buffer_destroy(b);
  return s;
}

bool vkrt_system_buffers_alive(struct vkrt_system *sys, const uint64_t *sorted_ids, uint32_t count,
                               uint32_t *first_dead) {
  /* count the live ones among the ids; only when some are missing, find the first of them */
  uint32_t found = 0;
  pthread_mutex_lock(&sys->buffers_lock);
  for (const struct vkrt_buffer *b = sys->live_buffers; b; b = b->live_next) {
    uint32_t lo = 0, hi = count;
    while (lo < hi) {
      uint32_t mid = (lo + hi) / 2;
      if (sorted_ids[mid] < b->id)
        lo = mid + 1;
      else
        hi = mid;
    }
    found += lo < count && sorted_ids[lo] == b->id;
  }
  bool alive = found == count;
  for (uint32_t i = 0; !alive && i < count; i++) {
    bool live = false;
    for (const struct vkrt_buffer *b = sys->live_buffers; b && !live; b = b->live_next)
      live = b->id == sorted_ids[i];
    if (!live) {
      *first_dead = i;
      break;
    }
  }
  pthread_mutex_unlock(&sys->buffers_lock);
  return alive;
}

/* ---- the public buffer functions (vkrt.h) ------------------------------------------------ */

vkrt_status vkrt_buffer_create(vkrt_appliance *app, uint32_t device, uint64_t size,
                               uint32_t flags, vkrt_buffer **out) {
  struct vkrt_system *sys = app ? vkrt_handle_system(app) : NULL;
  if (!out)
    return app ? vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT, "buffer: out is NULL")
               : VKRT_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (device >= sys->device_count)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "buffer: device %u does not exist (the appliance has %u)", device,
                      sys->device_count);
  return vkrt_buffer_create_internal(&sys->devices[device], size, flags, 0, out);
}

static void buffer_release(struct vkrt_buffer *b) {
  struct vkrt_device *dev = b->dev;
  if (b->mapped)
    dev->vk.vkUnmapMemory(dev->handle, b->memory);
  if (b->handle)
    dev->vk.vkDestroyBuffer(dev->handle, b->handle, &dev->sys->vk_allocator);
  if (b->memory)
    dev->vk.vkFreeMemory(dev->handle, b->memory, &dev->sys->vk_allocator);
  vkrt_free(&dev->sys->base, b);
}

void vkrt_buffer_reap(struct vkrt_device *dev, bool all) {
  struct vkrt_system *sys = dev->sys;
  struct vkrt_buffer *free_list = NULL;
  pthread_mutex_lock(&sys->buffers_lock);
  if (dev->zombies) { /* the timeline is asked only when something waits on it */
    const uint64_t done = all ? UINT64_MAX : vkrt_stream_done(dev);
    for (struct vkrt_buffer **p = &dev->zombies; *p;) {
      struct vkrt_buffer *b = *p;
      if (atomic_load_explicit(&b->last_use, memory_order_relaxed) <= done) {
        *p = b->zombie_next;
        b->zombie_next = free_list;
        free_list = b;
      } else {
        p = &b->zombie_next;
      }
    }
  }
  pthread_mutex_unlock(&sys->buffers_lock);
  while (free_list) {
    struct vkrt_buffer *b = free_list;
    free_list = b->zombie_next;
    buffer_release(b);
  }
}

/* The buffer leaves the live list at once (a graph that uses it is refused from now on);
 * its memory stays until the GPU has finished the work recorded on it, which may not even
 * be submitted yet: a destroy never makes a later submit touch freed memory. */
void vkrt_buffer_destroy(vkrt_buffer *b) {
  if (!b)
    return;
  struct vkrt_device *dev = b->dev;
  struct vkrt_system *sys = dev->sys;
  uint64_t use = atomic_load_explicit(&b->last_use, memory_order_relaxed);
  bool busy = use && dev->handle && use > vkrt_stream_done(dev);
  if (b->id) {
    pthread_mutex_lock(&sys->buffers_lock);
    if (b->live_prev)
      b->live_prev->live_next = b->live_next;
    else
      sys->live_buffers = b->live_next;
    if (b->live_next)
      b->live_next->live_prev = b->live_prev;
    if (busy) {
      b->zombie_next = dev->zombies;
      dev->zombies = b;
    }
    pthread_mutex_unlock(&sys->buffers_lock);
    atomic_fetch_add(&sys->buffers_destroyed, 1);
  }
  if (!busy || !b->id) /* only listed buffers can wait */
    buffer_release(b);
  vkrt_buffer_reap(dev, false);
}

uint64_t vkrt_buffer_size(const vkrt_buffer *b) { return b ? b->size : 0; }

uint32_t vkrt_buffer_device(const vkrt_buffer *b) { return b ? b->dev->index : UINT32_MAX; }

vkrt_status vkrt_buffer_map(vkrt_buffer *b, void **out) {
  if (!out)
    return b ? vkrt_error(&b->dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT, "map: out is NULL")
             : VKRT_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (!b)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!b->mapped)
    return vkrt_error(&b->dev->sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "dev%u: cannot map a buffer created without VKRT_BUFFER_HOST_VISIBLE",
                      b->dev->index);
  *out = b->mapped;
  return VKRT_OK;
}

VkResult vkrt_device_import_host_pointer(struct vkrt_device *dev, void *host, uint64_t size,
                                         VkBufferUsageFlags usage, VkMemoryPropertyFlags preferred,
                                         VkBuffer *out_buffer, VkDeviceMemory *out_memory) {
  *out_buffer = VK_NULL_HANDLE;
  *out_memory = VK_NULL_HANDLE;
  if (!dev->vk.vkGetMemoryHostPointerPropertiesEXT)
    return VK_ERROR_EXTENSION_NOT_PRESENT;
  VkMemoryHostPointerPropertiesEXT props = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
  VkResult r = dev->vk.vkGetMemoryHostPointerPropertiesEXT(
      dev->handle, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, host, &props);
  if (r != VK_SUCCESS)
    return r;
  VkExternalMemoryBufferCreateInfo external = {
      .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
      .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
  };
  VkBufferCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .pNext = &external,
      .size = size,
      .usage = usage,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  r = dev->vk.vkCreateBuffer(dev->handle, &info, &dev->sys->vk_allocator, out_buffer);
  if (r != VK_SUCCESS) {
    *out_buffer = VK_NULL_HANDLE;
    return r;
  }
  VkMemoryRequirements req;
  dev->vk.vkGetBufferMemoryRequirements(dev->handle, *out_buffer, &req);
  uint32_t type = vkrt_device_memory_type(dev, req.memoryTypeBits & props.memoryTypeBits, 0,
                                          preferred);
  if (type == UINT32_MAX || req.size > size) {
    r = VK_ERROR_INVALID_EXTERNAL_HANDLE; /* no memory type serves both the buffer and the pointer */
    goto fail;
  }
  VkImportMemoryHostPointerInfoEXT import = {
      .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
      .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
      .pHostPointer = host,
  };
  VkMemoryAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .pNext = &import,
      .allocationSize = size,
      .memoryTypeIndex = type,
  };
  r = vkrt_device_allocate_memory(dev, &alloc, out_memory);
  if (r != VK_SUCCESS) {
    *out_memory = VK_NULL_HANDLE;
    goto fail;
  }
  r = dev->vk.vkBindBufferMemory(dev->handle, *out_buffer, *out_memory, 0);
  if (r == VK_SUCCESS)
    return VK_SUCCESS;
fail:
  if (*out_buffer)
    dev->vk.vkDestroyBuffer(dev->handle, *out_buffer, &dev->sys->vk_allocator);
  if (*out_memory)
    dev->vk.vkFreeMemory(dev->handle, *out_memory, &dev->sys->vk_allocator);
  *out_buffer = VK_NULL_HANDLE;
  *out_memory = VK_NULL_HANDLE;
  return r;
}
