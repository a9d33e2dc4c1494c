/* Chunk imports: one VkBuffer + VkDeviceMemory per chunk of a plan over host memory
 * (VK_EXT_external_memory_host), with the retry after a refusal seen on NVIDIA. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "import/host_maps.h"
#include "import/import.h"
#include "import/registry.h"

#define REG_USAGE                                                                        \
  (VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |                 \
   VK_BUFFER_USAGE_STORAGE_BUFFER_BIT)

void vkrt_region_free_chunks(struct vkrt_import_registry *reg, struct vkrt_device *dev, struct vkrt_region_device *rd) {
  /* Either array may be missing: import_chunks lands here when allocating one of them fails. */
  for (uint32_t k = 0; k < rd->chunk_count; k++) {
    if (rd->buffers && rd->buffers[k])
      dev->vk.vkDestroyBuffer(dev->handle, rd->buffers[k], &dev->sys->vk_allocator);
    if (rd->memories && rd->memories[k]) {
      dev->vk.vkFreeMemory(dev->handle, rd->memories[k], &dev->sys->vk_allocator);
      atomic_fetch_sub(&reg->live_chunks, 1);
    }
  }
  vkrt_free(&dev->sys->base, rd->buffers);
  vkrt_free(&dev->sys->base, rd->memories);
  rd->buffers = NULL;
  rd->memories = NULL;
  rd->chunks = NULL;
  rd->chunk_count = 0;
}

const char *vkrt_import_refuser(const struct vkrt_device *dev) {
  return dev->caps.refuses_file_backed_fault ? "this device (VKRT_FAULT_REFUSE_FILE_BACKED)"
                                             : dev->caps.driver_name;
}

/* Imports one aligned host range as a VkBuffer bound to VkDeviceMemory. */
static VkResult import_one(struct vkrt_device *dev, uint64_t addr, uint64_t size, bool injectable,
                           VkBuffer *out_buffer, VkDeviceMemory *out_memory) {
  *out_buffer = VK_NULL_HANDLE;
  *out_memory = VK_NULL_HANDLE;
  if (injectable && vkrt_fault(dev, VKRT_FAULT_IMPORT_FAILS))
    return VK_ERROR_OUT_OF_DEVICE_MEMORY; /* what NVIDIA returns for file-backed pages */
  if (vkrt_fault(dev, VKRT_FAULT_REFUSE_FILE_BACKED) &&
      vkrt_host_range_file_backed(addr, addr + size))
    return VK_ERROR_OUT_OF_DEVICE_MEMORY; /* the refusing driver, faithfully */
  return vkrt_device_import_host_pointer(dev, (void *)(uintptr_t)addr, size, REG_USAGE, 0,
                                         out_buffer, out_memory);
}

/* NVIDIA 580.159 on the H200: an import issued right after a refused one (file-backed pages)
 * was refused too, even for anonymous memory that imports fine a moment later. So a refused
 * import is retried after the device's queues drain and a short pause; the attempts are
 * logged so the GPU runs show whether the retry is what helped. */
static VkResult import_one_settled(struct vkrt_device *dev, uint64_t addr, uint64_t size,
                                   bool injectable, VkBuffer *out_buffer,
                                   VkDeviceMemory *out_memory) {
  VkResult r = import_one(dev, addr, size, injectable, out_buffer, out_memory);
  if (injectable && vkrt_fault(dev, VKRT_FAULT_IMPORT_FAILS))
    return r;
  for (int attempt = 2; r == VK_ERROR_OUT_OF_DEVICE_MEMORY && attempt <= 3; attempt++) {
    pthread_mutex_lock(&dev->compute_queue_lock);
    bool separate = dev->transfer_lock && dev->transfer_lock != &dev->compute_queue_lock;
    if (separate)
      pthread_mutex_lock(dev->transfer_lock);
    dev->vk.vkDeviceWaitIdle(dev->handle);
    if (separate)
      pthread_mutex_unlock(dev->transfer_lock);
    pthread_mutex_unlock(&dev->compute_queue_lock);
    usleep(2000u * (unsigned)attempt);
    r = import_one(dev, addr, size, injectable, out_buffer, out_memory);
    vkrt_log(&dev->sys->base, VKRT_LOG_INFO, "dev%u: host pointer import of %#" PRIx64 " (%" PRIu64
             " bytes) attempt %d after a refusal: %s", dev->index, addr, size, attempt,
             vkrt_vk_result_str(r));
  }
  return r;
}

/* Imports every chunk of a plan into dev. On failure frees what it made and reports the
 * failing chunk; VK_ERROR_OUT_OF_HOST_MEMORY when the arrays cannot be allocated. */
VkResult vkrt_region_import_chunks(struct vkrt_import_registry *reg, struct vkrt_device *dev, struct vkrt_region_device *rd,
                              const struct vkrt_chunk *chunks, uint32_t count, uint64_t host_base,
                              bool injectable, uint32_t *failed_chunk) {
  struct vkrt_base *base = &dev->sys->base;
  *failed_chunk = 0;
  rd->chunks = chunks;
  rd->chunk_count = count;
  rd->host_base = host_base;
  rd->buffers = vkrt_calloc(base, count, sizeof(VkBuffer));
  rd->memories = vkrt_calloc(base, count, sizeof(VkDeviceMemory));
  if (!rd->buffers || !rd->memories) {
    vkrt_region_free_chunks(reg, dev, rd);
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  }
  for (uint32_t k = 0; k < count; k++) {
    VkResult r = import_one_settled(dev, chunks[k].import_addr, chunks[k].import_size, injectable,
                            &rd->buffers[k], &rd->memories[k]);
    if (r == VK_SUCCESS)
      atomic_fetch_add(&reg->live_chunks, 1);
    if (r != VK_SUCCESS) {
      *failed_chunk = k;
      vkrt_region_free_chunks(reg, dev, rd);
      return r;
    }
  }
  return VK_SUCCESS;
}

