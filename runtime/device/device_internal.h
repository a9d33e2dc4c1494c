/* Helpers private to runtime/device. */
#pragma once
#include "device/caps_decode.h"
#include "device/device.h"

/* Creates / destroys the device's stream (pool, ring of command buffers, timeline). */
vkrt_status vkrt_stream_init(struct vkrt_device *dev);
void vkrt_stream_finish(struct vkrt_device *dev);

/* instance.c: the loader, the instance (with validation and its messenger when asked) and
 * the allocation callbacks every vkCreate* / vkAllocateMemory gets. */
void vkrt_instance_allocator(struct vkrt_system *sys);
vkrt_status vkrt_instance_create(struct vkrt_system *sys);
void vkrt_instance_destroy(struct vkrt_system *sys);

/* caps_query.c */
/* Everything Vulkan says about one physical device (and, with dev, its VkDevice). */
struct vkrt_caps_query {
  VkPhysicalDeviceProperties2 props;
  VkPhysicalDeviceIDProperties id;
  VkPhysicalDeviceDriverProperties driver;
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host;
  VkPhysicalDeviceSubgroupProperties subgroup;
  VkPhysicalDeviceSubgroupSizeControlProperties subgroup_size;
  VkPhysicalDeviceMaintenance3Properties maintenance3;
  VkPhysicalDeviceMaintenance4Properties maintenance4;
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm_builtins;
  VkPhysicalDeviceShaderCorePropertiesAMD amd_core;
  VkPhysicalDeviceFeatures2 features;
  VkPhysicalDeviceTimelineSemaphoreFeatures timeline;
  VkPhysicalDevice16BitStorageFeatures storage16;
  VkPhysicalDeviceShaderFloat16Int8Features float16;
  VkPhysicalDeviceSubgroupSizeControlFeatures subgroup_size_features;
  VkPhysicalDeviceShaderIntegerDotProductFeatures integer_dot;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat;
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model;
  VkPhysicalDeviceBufferDeviceAddressFeatures device_address;
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable_info;
  VkCooperativeMatrixPropertiesNV coopmat_shapes[64];
  uint32_t coopmat_shape_count;
  VkPhysicalDeviceMemoryProperties2 memory;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget;
  VkQueueFamilyProperties families[16];
  uint32_t family_count;
  bool has_host, has_subgroup_size, has_maintenance4, has_budget, has_integer_dot;
  bool has_device_address; /* Vulkan 1.2 or VK_KHR_buffer_device_address */
  bool has_coopmat; /* VK_NV_cooperative_matrix and its shape query */
  bool has_sm_builtins, has_amd_core; /* the compute-unit counts */
  bool has_executable_info; /* VK_KHR_pipeline_executable_properties, asked for by the lab */
  struct vkrt_caps_input in;
};

#define CHAIN(head, s) \
  do {                 \
    (s).pNext = (head).pNext; \
    (head).pNext = &(s);      \
  } while (0)

/* The instance's API version capped by the device's. */
uint32_t vkrt_caps_effective_api(const struct vkrt_system *sys, uint32_t device_api);
/* The device's extensions in a fresh array (free with vkrt_free). */
vkrt_status vkrt_device_extensions(struct vkrt_system *sys, VkPhysicalDevice physical,
                                   VkExtensionProperties **out, uint32_t *count);
/* Fills q (and q->in for vkrt_caps_decode) for one physical device; `hidden` are the
 * capabilities fault injection hides. */
void vkrt_caps_query_physical(struct vkrt_system *sys, VkPhysicalDevice physical,
                              uint32_t physical_index, const VkExtensionProperties *ext,
                              uint32_t ext_count, uint32_t hidden, struct vkrt_caps_query *q);
/* Snapshots of every physical device, for board matching. */
vkrt_status vkrt_caps_snapshot_candidates(struct vkrt_system *sys, VkPhysicalDevice *physical,
                                          uint32_t count, struct vkrt_caps *out);
/* Memory types the driver accepts for an imported anonymous page (needs the VkDevice). */
uint32_t vkrt_caps_probe_host_import_types(struct vkrt_device *dev);
/* The row pitch the device gives a one-texel-wide linear R32_UINT image (row images' rows
 * must be a multiple of it); 0 when it makes none (needs the VkDevice). */
uint32_t vkrt_caps_probe_row_image_pitch(struct vkrt_device *dev);
