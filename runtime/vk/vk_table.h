/* Function tables expanded from vk_functions.h. */
#pragma once
#include <stdbool.h>
#include <vulkan/vulkan.h>

#include "vkrt/status.h"

#include "vk/vk_functions.h"

#define VKRT_VK_MEMBER(name) PFN_##name name;

struct vkrt_global_table {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  VKRT_VK_GLOBAL_FUNCTIONS(VKRT_VK_MEMBER)
};

struct vkrt_instance_table {
  VKRT_VK_INSTANCE_FUNCTIONS(VKRT_VK_MEMBER)
  VKRT_VK_INSTANCE_EXTENSION_FUNCTIONS(VKRT_VK_MEMBER)
};

/* One per VkDevice: never use one device's pointers for another. */
struct vkrt_device_table {
  VKRT_VK_DEVICE_FUNCTIONS(VKRT_VK_MEMBER)
  VKRT_VK_DEVICE_EXTENSION_FUNCTIONS(VKRT_VK_MEMBER)
};

struct vkrt_base;

/* Loads vkGetInstanceProcAddr (static link or dlopen per Kconfig) and the global table.
 * *loader_handle is the dlopen handle (NULL when statically linked). */
vkrt_status vkrt_vk_load_global(struct vkrt_base *base, struct vkrt_global_table *out,
                                void **loader_handle);
void vkrt_vk_unload_global(void *loader_handle);
/* Keeps the loader mapped for the rest of the process (for the driver keeper instance);
 * false when it cannot. */
bool vkrt_vk_pin_global(void);
/* Fills the global table from a vkGetInstanceProcAddr (shared by both loaders). */
vkrt_status vkrt_vk_load_global_from(struct vkrt_base *base, PFN_vkGetInstanceProcAddr gipa,
                                     struct vkrt_global_table *out);
/* Resolves the instance table; extension functions may stay NULL. Core ones must not. */
vkrt_status vkrt_vk_load_instance(struct vkrt_base *base, const struct vkrt_global_table *g,
                                  VkInstance instance, struct vkrt_instance_table *out);
/* Resolves every device function through this device's vkGetDeviceProcAddr. */
vkrt_status vkrt_vk_load_device(struct vkrt_base *base, const struct vkrt_instance_table *vki,
                                VkDevice device, struct vkrt_device_table *out);

/* "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc. */
const char *vkrt_vk_result_str(VkResult result);
/* Maps a VkResult to a status (OOM kinds, device lost, timeout, else VKRT_ERROR_VULKAN). */
vkrt_status vkrt_vk_status(VkResult result);
