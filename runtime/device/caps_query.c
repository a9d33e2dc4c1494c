/* Capability queries: everything Vulkan says about a physical device (and, once it is
 * open, its VkDevice), handed to the pure decoder in caps.c. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base.h"
#include "device/caps_decode.h"
#include "device/device.h"
#include "device/device_internal.h"

/* ---- capability queries ----------------------------------------------------------------- */

uint32_t vkrt_caps_effective_api(const struct vkrt_system *sys, uint32_t device_api) {
  return VKRT_MIN(sys->api_version, device_api);
}

vkrt_status vkrt_device_extensions(struct vkrt_system *sys, VkPhysicalDevice physical,
                                   VkExtensionProperties **out, uint32_t *count) {
  *out = NULL;
  *count = 0;
  uint32_t n = 0;
  VkResult r = sys->vki.vkEnumerateDeviceExtensionProperties(physical, NULL, &n, NULL);
  if (r != VK_SUCCESS)
    return vkrt_error(&sys->base, vkrt_vk_status(r),
                      "vkEnumerateDeviceExtensionProperties failed: %s", vkrt_vk_result_str(r));
  VkExtensionProperties *ext = vkrt_calloc(&sys->base, n ? n : 1, sizeof(*ext));
  if (!ext)
    return vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                      "out of host memory listing device extensions");
  r = sys->vki.vkEnumerateDeviceExtensionProperties(physical, NULL, &n, ext);
  if (r < 0) {
    vkrt_free(&sys->base, ext);
    return vkrt_error(&sys->base, vkrt_vk_status(r),
                      "vkEnumerateDeviceExtensionProperties failed: %s", vkrt_vk_result_str(r));
  }
  *out = ext;
  *count = n;
  return VKRT_OK;
}

void vkrt_caps_query_physical(struct vkrt_system *sys, VkPhysicalDevice physical,
                              uint32_t physical_index, const VkExtensionProperties *ext,
                              uint32_t ext_count, uint32_t hidden, struct vkrt_caps_query *q) {
  memset(q, 0, sizeof(*q));
  const struct vkrt_instance_table *vki = &sys->vki;
  VkPhysicalDeviceProperties base_props;
  vki->vkGetPhysicalDeviceProperties(physical, &base_props);
  uint32_t api = vkrt_caps_effective_api(sys, base_props.apiVersion);
  q->has_host = vkrt_caps_has_extension(ext, ext_count, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  q->has_subgroup_size = api >= VK_API_VERSION_1_3 ||
      vkrt_caps_has_extension(ext, ext_count, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  q->has_maintenance4 = api >= VK_API_VERSION_1_3 ||
      vkrt_caps_has_extension(ext, ext_count, VK_KHR_MAINTENANCE_4_EXTENSION_NAME);
  q->has_integer_dot = api >= VK_API_VERSION_1_3 ||
      vkrt_caps_has_extension(ext, ext_count, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  q->has_budget = vkrt_caps_has_extension(ext, ext_count, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  q->has_device_address = api >= VK_API_VERSION_1_2 ||
      vkrt_caps_has_extension(ext, ext_count, VK_KHR_BUFFER_DEVICE_ADDRESS_EXTENSION_NAME);
  q->has_coopmat = vkrt_caps_has_extension(ext, ext_count, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) &&
                   vki->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV && api >= VK_API_VERSION_1_2;
  q->has_sm_builtins = vkrt_caps_has_extension(ext, ext_count, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  q->has_amd_core = vkrt_caps_has_extension(ext, ext_count, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  q->has_executable_info =
      IS_ENABLED(CONFIG_VKRT_LAB_PIPELINE_STATS) &&
      vkrt_caps_has_extension(ext, ext_count, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  bool has_driver = api >= VK_API_VERSION_1_2;

  q->props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  q->id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
  q->driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  q->host.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
  q->subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  q->subgroup_size.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
  q->maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  q->maintenance4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES;
  q->sm_builtins.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV;
  q->amd_core.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD;
  CHAIN(q->props, q->id);
  if (q->has_sm_builtins)
    CHAIN(q->props, q->sm_builtins);
  if (q->has_amd_core)
    CHAIN(q->props, q->amd_core);
  CHAIN(q->props, q->subgroup);
  CHAIN(q->props, q->maintenance3);
  if (has_driver)
    CHAIN(q->props, q->driver);
  if (q->has_host)
    CHAIN(q->props, q->host);
  if (q->has_subgroup_size)
    CHAIN(q->props, q->subgroup_size);
  if (q->has_maintenance4)
    CHAIN(q->props, q->maintenance4);
  vki->vkGetPhysicalDeviceProperties2(physical, &q->props);

  q->features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  q->timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
  q->storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  q->float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  q->subgroup_size_features.sType =
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  CHAIN(q->features, q->timeline);
  CHAIN(q->features, q->storage16);
  CHAIN(q->features, q->float16);
  if (q->has_subgroup_size)
    CHAIN(q->features, q->subgroup_size_features);
  q->integer_dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  if (q->has_integer_dot)
    CHAIN(q->features, q->integer_dot);
  q->coopmat.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  q->memory_model.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
  if (q->has_coopmat) {
    CHAIN(q->features, q->coopmat);
    CHAIN(q->features, q->memory_model);
  }
  q->device_address.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES;
  if (q->has_device_address)
    CHAIN(q->features, q->device_address);
  q->executable_info.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  if (q->has_executable_info)
    CHAIN(q->features, q->executable_info);
  vki->vkGetPhysicalDeviceFeatures2(physical, &q->features);
  q->has_executable_info = q->has_executable_info && q->executable_info.pipelineExecutableInfo;
  if (q->has_coopmat) {
    uint32_t n = VKRT_ARRAY_SIZE(q->coopmat_shapes);
    for (uint32_t i = 0; i < n; i++)
      q->coopmat_shapes[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    if (vki->vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(physical, &n, q->coopmat_shapes) >= 0)
      q->coopmat_shape_count = n;
  }

  q->memory.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
  q->budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
  if (q->has_budget)
    CHAIN(q->memory, q->budget);
  vki->vkGetPhysicalDeviceMemoryProperties2(physical, &q->memory);

  q->family_count = VKRT_ARRAY_SIZE(q->families);
  vki->vkGetPhysicalDeviceQueueFamilyProperties(physical, &q->family_count, q->families);

  /* External handle types actually supported: timeline semaphores and storage buffers. */
  VkSemaphoreTypeCreateInfo timeline_type = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
  };
  VkPhysicalDeviceExternalSemaphoreInfo sem_info = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO,
      .pNext = &timeline_type,
      .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  q->in.semaphore_opaque_fd.sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES;
  vki->vkGetPhysicalDeviceExternalSemaphoreProperties(physical, &sem_info,
                                                      &q->in.semaphore_opaque_fd);
  sem_info.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_SYNC_FD_BIT;
  q->in.semaphore_sync_fd.sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES;
  vki->vkGetPhysicalDeviceExternalSemaphoreProperties(physical, &sem_info,
                                                      &q->in.semaphore_sync_fd);
  VkPhysicalDeviceExternalBufferInfo buf_info = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT,
  };
  if (q->has_host) {
    buf_info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    q->in.buffer_host_allocation.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES;
    vki->vkGetPhysicalDeviceExternalBufferProperties(physical, &buf_info,
                                                     &q->in.buffer_host_allocation);
  }
  if (vkrt_caps_has_extension(ext, ext_count, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME)) {
    buf_info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
    q->in.buffer_opaque_fd.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES;
    vki->vkGetPhysicalDeviceExternalBufferProperties(physical, &buf_info, &q->in.buffer_opaque_fd);
    if (vkrt_caps_has_extension(ext, ext_count, VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME)) {
      buf_info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_DMA_BUF_BIT_EXT;
      q->in.buffer_dma_buf.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES;
      vki->vkGetPhysicalDeviceExternalBufferProperties(physical, &buf_info, &q->in.buffer_dma_buf);
    }
  }

  vki->vkGetPhysicalDeviceFormatProperties(physical, VK_FORMAT_R32_UINT, &q->in.row_format);
  q->in.row_image_queried =
      vki->vkGetPhysicalDeviceImageFormatProperties(
          physical, VK_FORMAT_R32_UINT, VK_IMAGE_TYPE_2D, VK_IMAGE_TILING_LINEAR,
          VK_IMAGE_USAGE_TRANSFER_DST_BIT, 0, &q->in.row_image) == VK_SUCCESS;

  struct vkrt_caps_input *in = &q->in;
  in->physical_index = physical_index;
  in->props = &q->props.properties;
  in->id = &q->id;
  in->driver = has_driver ? &q->driver : NULL;
  in->host = q->has_host ? &q->host : NULL;
  in->subgroup = &q->subgroup;
  in->subgroup_size = q->has_subgroup_size ? &q->subgroup_size : NULL;
  in->maintenance3 = &q->maintenance3;
  in->maintenance4 = q->has_maintenance4 ? &q->maintenance4 : NULL;
  in->timeline = &q->timeline;
  in->storage16 = &q->storage16;
  in->float16 = &q->float16;
  in->subgroup_size_features = q->has_subgroup_size ? &q->subgroup_size_features : NULL;
  in->integer_dot = q->has_integer_dot ? &q->integer_dot : NULL;
  in->coopmat = q->has_coopmat ? &q->coopmat : NULL;
  in->coopmat_shapes = q->coopmat_shapes;
  in->coopmat_shape_count = q->coopmat_shape_count;
  in->memory_model = q->has_coopmat ? &q->memory_model : NULL;
  in->device_address = q->has_device_address ? &q->device_address : NULL;
  in->sm_builtins = q->has_sm_builtins ? &q->sm_builtins : NULL;
  in->amd_core = q->has_amd_core ? &q->amd_core : NULL;
  in->extensions = ext;
  in->extension_count = ext_count;
  in->memory = &q->memory.memoryProperties;
  in->budget = q->has_budget ? &q->budget : NULL;
  in->families = q->families;
  in->family_count = q->family_count;
  in->hidden = hidden;
}

/* Snapshots of every physical device, for board matching. */
vkrt_status vkrt_caps_snapshot_candidates(struct vkrt_system *sys, VkPhysicalDevice *physical,
                                       uint32_t count, struct vkrt_caps *out) {
  struct vkrt_caps_query *q = vkrt_calloc(&sys->base, 1, sizeof(*q));
  if (!q)
    return vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
  for (uint32_t i = 0; i < count; i++) {
    VkExtensionProperties *ext;
    uint32_t ext_count;
    vkrt_status s = vkrt_device_extensions(sys, physical[i], &ext, &ext_count);
    if (s != VKRT_OK) {
      vkrt_free(&sys->base, q);
      return s;
    }
    vkrt_caps_query_physical(sys, physical[i], i, ext, ext_count, 0, q);
    vkrt_caps_decode(&q->in, &out[i]);
    vkrt_free(&sys->base, ext);
  }
  vkrt_free(&sys->base, q);
  return VKRT_OK;
}

/* Memory types the driver accepts for an imported anonymous page. */
uint32_t vkrt_caps_probe_host_import_types(struct vkrt_device *dev) {
  if (!dev->vk.vkGetMemoryHostPointerPropertiesEXT)
    return 0;
  uint64_t align = dev->caps.min_imported_host_pointer_alignment;
  long page = sysconf(_SC_PAGESIZE);
  if (align < (uint64_t)page)
    align = (uint64_t)page;
  size_t map_size = (size_t)align * 2;
  void *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return 0;
  void *aligned = (void *)(uintptr_t)vkrt_align_up((uintptr_t)map, align);
  VkMemoryHostPointerPropertiesEXT props = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT,
  };
  VkResult r = dev->vk.vkGetMemoryHostPointerPropertiesEXT(
      dev->handle, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, aligned, &props);
  munmap(map, map_size);
  return r == VK_SUCCESS ? props.memoryTypeBits : 0;
}


uint32_t vkrt_caps_probe_row_image_pitch(struct vkrt_device *dev) {
  if (!dev->caps.row_image_max_width || dev->caps.row_image_max_height < 2)
    return 0;
  const VkImageCreateInfo info = vkrt_row_image_info(1, 2);
  VkImage image;
  if (dev->vk.vkCreateImage(dev->handle, &info, &dev->sys->vk_allocator, &image) != VK_SUCCESS)
    return 0;
  const VkImageSubresource sub = {.aspectMask = VK_IMAGE_ASPECT_COLOR_BIT};
  VkSubresourceLayout layout;
  dev->vk.vkGetImageSubresourceLayout(dev->handle, image, &sub, &layout);
  dev->vk.vkDestroyImage(dev->handle, image, &dev->sys->vk_allocator);
  return layout.rowPitch >= 4 && layout.rowPitch <= 65536 ? (uint32_t)layout.rowPitch : 0;
}
