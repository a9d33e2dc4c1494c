/* Pure decoding of Vulkan query results into a struct vkrt_caps. caps_query.c fills a
 * vkrt_caps_input from a physical device (and, once created, its VkDevice); unit tests
 * fill one by hand. Pointers to optional structs are NULL when the query was not made
 * (extension absent). */
#pragma once
#include <vulkan/vulkan.h>

#include "device/caps.h"
#include "vk/vk_table.h"

struct vkrt_caps_input {
  uint32_t physical_index;
  const VkPhysicalDeviceProperties *props;                           /* required */
  const VkPhysicalDeviceIDProperties *id;                            /* may be NULL */
  const VkPhysicalDeviceDriverProperties *driver;                    /* may be NULL */
  const VkPhysicalDeviceExternalMemoryHostPropertiesEXT *host;       /* NULL: ext absent */
  const VkPhysicalDeviceSubgroupProperties *subgroup;                /* may be NULL */
  const VkPhysicalDeviceSubgroupSizeControlProperties *subgroup_size; /* NULL: unsupported */
  const VkPhysicalDeviceMaintenance3Properties *maintenance3;        /* may be NULL */
  const VkPhysicalDeviceMaintenance4Properties *maintenance4;        /* NULL: unsupported */
  const VkPhysicalDeviceTimelineSemaphoreFeatures *timeline;         /* may be NULL */
  const VkPhysicalDevice16BitStorageFeatures *storage16;             /* may be NULL */
  const VkPhysicalDeviceShaderFloat16Int8Features *float16;          /* may be NULL */
  const VkPhysicalDeviceSubgroupSizeControlFeatures *subgroup_size_features; /* may be NULL */
  const VkPhysicalDeviceShaderIntegerDotProductFeatures *integer_dot; /* NULL: unsupported */
  const VkPhysicalDeviceCooperativeMatrixFeaturesNV *coopmat;        /* NULL: ext absent */
  const VkCooperativeMatrixPropertiesNV *coopmat_shapes;             /* the NV shape list */
  uint32_t coopmat_shape_count;
  const VkPhysicalDeviceVulkanMemoryModelFeatures *memory_model;     /* may be NULL */
  const VkPhysicalDeviceBufferDeviceAddressFeatures *device_address; /* may be NULL */
  const VkPhysicalDeviceShaderSMBuiltinsPropertiesNV *sm_builtins;   /* NULL: ext absent */
  const VkPhysicalDeviceShaderCorePropertiesAMD *amd_core;           /* NULL: ext absent */
  const VkExtensionProperties *extensions;
  uint32_t extension_count;
  const VkPhysicalDeviceMemoryProperties *memory;                    /* required */
  const VkPhysicalDeviceMemoryBudgetPropertiesEXT *budget;           /* NULL: no budget */
  const VkQueueFamilyProperties *families;
  uint32_t family_count;
  /* vkGetPhysicalDeviceExternalSemaphoreProperties (timeline) per handle type; zeroed
   * when not queried */
  VkExternalSemaphoreProperties semaphore_opaque_fd, semaphore_sync_fd;
  /* vkGetPhysicalDeviceExternalBufferProperties per handle type; zeroed when not queried */
  VkExternalBufferProperties buffer_host_allocation, buffer_opaque_fd, buffer_dma_buf;
  /* R32_UINT in linear tiling as a copy destination (loads' 2D row copies): its format
   * features and vkGetPhysicalDeviceImageFormatProperties' answer; zeroed when not queried */
  VkFormatProperties row_format;
  VkImageFormatProperties row_image;
  bool row_image_queried;
  /* The device's function table once its VkDevice exists; NULL for a physical-only
   * snapshot (board matching), where extension presence alone decides. */
  const struct vkrt_device_table *functions;
  uint32_t host_import_memory_type_bits;
  /* VKRT_FAULT_HIDE_* bits injected on this device: the hidden features read false. */
  uint32_t hidden;
};

/* Fills *out from in; never fails (missing pieces read as false / 0). */
void vkrt_caps_decode(const struct vkrt_caps_input *in, struct vkrt_caps *out);
/* True when the extension list has `name` (and it is not hidden by `hidden`). */
bool vkrt_caps_has_extension(const VkExtensionProperties *extensions, uint32_t count,
                             const char *name);
