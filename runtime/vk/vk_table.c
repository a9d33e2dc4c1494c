/* Table loading from the X-macro list, and VkResult names/statuses. */
#include <string.h>

#include "base/base.h"
#include "vk/vk_table.h"

vkrt_status vkrt_vk_load_global_from(struct vkrt_base *base, PFN_vkGetInstanceProcAddr gipa,
                                     struct vkrt_global_table *out) {
  memset(out, 0, sizeof(*out));
  out->vkGetInstanceProcAddr = gipa;
#define LOAD(name) out->name = (PFN_##name)gipa(VK_NULL_HANDLE, #name);
  VKRT_VK_GLOBAL_FUNCTIONS(LOAD)
#undef LOAD
  /* vkEnumerateInstanceVersion is absent from 1.0 loaders; the rest are required. */
  if (!out->vkCreateInstance || !out->vkEnumerateInstanceExtensionProperties ||
      !out->vkEnumerateInstanceLayerProperties)
    return vkrt_error(base, VKRT_ERROR_NO_DEVICE,
                      "the Vulkan loader lacks vkCreateInstance or instance enumeration");
  return VKRT_OK;
}

vkrt_status vkrt_vk_load_instance(struct vkrt_base *base, const struct vkrt_global_table *g,
                                  VkInstance instance, struct vkrt_instance_table *out) {
  memset(out, 0, sizeof(*out));
#define LOAD(name) out->name = (PFN_##name)g->vkGetInstanceProcAddr(instance, #name);
  VKRT_VK_INSTANCE_FUNCTIONS(LOAD)
  VKRT_VK_INSTANCE_EXTENSION_FUNCTIONS(LOAD)
#undef LOAD
#define CHECK(name)                                                                       \
  if (!out->name)                                                                         \
    return vkrt_error(base, VKRT_ERROR_NO_DEVICE,                                         \
                      "Vulkan instance lacks core function " #name " (need Vulkan 1.2)");
  VKRT_VK_INSTANCE_FUNCTIONS(CHECK)
#undef CHECK
  return VKRT_OK;
}

vkrt_status vkrt_vk_load_device(struct vkrt_base *base, const struct vkrt_instance_table *vki,
                                VkDevice device, struct vkrt_device_table *out) {
  memset(out, 0, sizeof(*out));
  /* Every pointer comes from this device's own vkGetDeviceProcAddr: another VkDevice's
   * pointers may dispatch to a different driver. */
#define LOAD(name) out->name = (PFN_##name)vki->vkGetDeviceProcAddr(device, #name);
  VKRT_VK_DEVICE_FUNCTIONS(LOAD)
  VKRT_VK_DEVICE_EXTENSION_FUNCTIONS(LOAD)
#undef LOAD
#define CHECK(name)                                                                       \
  if (!out->name)                                                                         \
    return vkrt_error(base, VKRT_ERROR_VULKAN, "VkDevice lacks core function " #name);
  VKRT_VK_DEVICE_FUNCTIONS(CHECK)
#undef CHECK
  return VKRT_OK;
}

const char *vkrt_vk_result_str(VkResult result) {
  switch (result) {
#define R(x) \
  case x:    \
    return #x;
    R(VK_SUCCESS)
    R(VK_NOT_READY)
    R(VK_TIMEOUT)
    R(VK_EVENT_SET)
    R(VK_EVENT_RESET)
    R(VK_INCOMPLETE)
    R(VK_ERROR_OUT_OF_HOST_MEMORY)
    R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    R(VK_ERROR_INITIALIZATION_FAILED)
    R(VK_ERROR_DEVICE_LOST)
    R(VK_ERROR_MEMORY_MAP_FAILED)
    R(VK_ERROR_LAYER_NOT_PRESENT)
    R(VK_ERROR_EXTENSION_NOT_PRESENT)
    R(VK_ERROR_FEATURE_NOT_PRESENT)
    R(VK_ERROR_INCOMPATIBLE_DRIVER)
    R(VK_ERROR_TOO_MANY_OBJECTS)
    R(VK_ERROR_FORMAT_NOT_SUPPORTED)
    R(VK_ERROR_FRAGMENTED_POOL)
    R(VK_ERROR_UNKNOWN)
    R(VK_ERROR_OUT_OF_POOL_MEMORY)
    R(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    R(VK_ERROR_FRAGMENTATION)
    R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    R(VK_PIPELINE_COMPILE_REQUIRED)
    R(VK_ERROR_NOT_PERMITTED_KHR)
    R(VK_ERROR_INVALID_SHADER_NV)
#undef R
  default:
    return "VK_ERROR_(unknown)";
  }
}

vkrt_status vkrt_vk_status(VkResult result) {
  switch (result) {
  case VK_SUCCESS:
    return VKRT_OK;
  case VK_ERROR_OUT_OF_HOST_MEMORY:
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
  case VK_ERROR_OUT_OF_POOL_MEMORY:
  case VK_ERROR_FRAGMENTED_POOL:
  case VK_ERROR_FRAGMENTATION:
    return VKRT_ERROR_OUT_OF_DEVICE_MEMORY;
  case VK_ERROR_DEVICE_LOST:
    return VKRT_ERROR_DEVICE_LOST;
  case VK_TIMEOUT:
    return VKRT_ERROR_TIMEOUT;
  case VK_ERROR_INCOMPATIBLE_DRIVER:
    return VKRT_ERROR_NO_DEVICE;
  default:
    return VKRT_ERROR_VULKAN;
  }
}
