/* The one list of Vulkan functions libvkrt calls. It expands into the global, instance and
 * per-device tables (vk_table.h). Device functions are resolved through each device's own
 * vkGetDeviceProcAddr; a function the driver lacks stays NULL and its capability is false.
 * Add a function here, never call Vulkan directly: everything builds with VK_NO_PROTOTYPES. */
#pragma once

#define VKRT_VK_GLOBAL_FUNCTIONS(X)          \
  X(vkCreateInstance)                        \
  X(vkEnumerateInstanceExtensionProperties)  \
  X(vkEnumerateInstanceLayerProperties)      \
  X(vkEnumerateInstanceVersion)

#define VKRT_VK_INSTANCE_FUNCTIONS(X)             \
  X(vkDestroyInstance)                            \
  X(vkEnumeratePhysicalDevices)                   \
  X(vkGetPhysicalDeviceProperties)                \
  X(vkGetPhysicalDeviceProperties2)               \
  X(vkGetPhysicalDeviceFeatures2)                 \
  X(vkGetPhysicalDeviceMemoryProperties)          \
  X(vkGetPhysicalDeviceMemoryProperties2)         \
  X(vkGetPhysicalDeviceQueueFamilyProperties)     \
  X(vkGetPhysicalDeviceExternalSemaphoreProperties) \
  X(vkGetPhysicalDeviceExternalBufferProperties)  \
  X(vkGetPhysicalDeviceFormatProperties)          \
  X(vkGetPhysicalDeviceImageFormatProperties)     \
  X(vkEnumerateDeviceExtensionProperties)         \
  X(vkCreateDevice)                               \
  X(vkGetDeviceProcAddr)

/* Instance-level extension functions: NULL when the extension is absent. */
#define VKRT_VK_INSTANCE_EXTENSION_FUNCTIONS(X) \
  X(vkCreateDebugUtilsMessengerEXT)             \
  X(vkDestroyDebugUtilsMessengerEXT)            \
  X(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)

#define VKRT_VK_DEVICE_FUNCTIONS(X)   \
  X(vkDestroyDevice)                  \
  X(vkGetDeviceQueue)                 \
  X(vkQueueSubmit)                    \
  X(vkQueueWaitIdle)                  \
  X(vkDeviceWaitIdle)                 \
  X(vkAllocateMemory)                 \
  X(vkFreeMemory)                     \
  X(vkMapMemory)                      \
  X(vkUnmapMemory)                    \
  X(vkFlushMappedMemoryRanges)        \
  X(vkInvalidateMappedMemoryRanges)   \
  X(vkCreateBuffer)                   \
  X(vkDestroyBuffer)                  \
  X(vkGetBufferMemoryRequirements)    \
  X(vkBindBufferMemory)               \
  X(vkCreateImage)                    \
  X(vkDestroyImage)                   \
  X(vkGetImageMemoryRequirements)     \
  X(vkGetImageSubresourceLayout)      \
  X(vkBindImageMemory)                \
  X(vkCreateShaderModule)             \
  X(vkDestroyShaderModule)            \
  X(vkCreateComputePipelines)         \
  X(vkDestroyPipeline)                \
  X(vkCreatePipelineLayout)           \
  X(vkDestroyPipelineLayout)          \
  X(vkCreateDescriptorSetLayout)      \
  X(vkDestroyDescriptorSetLayout)     \
  X(vkCreateDescriptorPool)           \
  X(vkDestroyDescriptorPool)          \
  X(vkResetDescriptorPool)            \
  X(vkAllocateDescriptorSets)         \
  X(vkUpdateDescriptorSets)           \
  X(vkCreateCommandPool)              \
  X(vkDestroyCommandPool)             \
  X(vkResetCommandPool)               \
  X(vkAllocateCommandBuffers)         \
  X(vkFreeCommandBuffers)             \
  X(vkBeginCommandBuffer)             \
  X(vkEndCommandBuffer)               \
  X(vkResetCommandBuffer)             \
  X(vkCmdBindPipeline)                \
  X(vkCmdBindDescriptorSets)          \
  X(vkCmdPushConstants)               \
  X(vkCmdDispatch)                    \
  X(vkCmdCopyBuffer)                  \
  X(vkCmdCopyBufferToImage)           \
  X(vkCmdFillBuffer)                  \
  X(vkCmdUpdateBuffer)                \
  X(vkCmdPipelineBarrier)             \
  X(vkCmdWriteTimestamp)              \
  X(vkCmdResetQueryPool)              \
  X(vkCreateQueryPool)                \
  X(vkDestroyQueryPool)               \
  X(vkGetQueryPoolResults)            \
  X(vkCreateSemaphore)                \
  X(vkDestroySemaphore)               \
  X(vkGetSemaphoreCounterValue)       \
  X(vkWaitSemaphores)                 \
  X(vkSignalSemaphore)                \
  X(vkCreateFence)                    \
  X(vkDestroyFence)                   \
  X(vkWaitForFences)                  \
  X(vkResetFences)                    \
  X(vkGetFenceStatus)

/* Device extension functions: NULL when the extension is absent, hidden by fault
 * injection, or not enabled on this device. */
#define VKRT_VK_DEVICE_EXTENSION_FUNCTIONS(X) \
  X(vkGetMemoryHostPointerPropertiesEXT)      \
  X(vkGetMemoryFdKHR)                         \
  X(vkGetMemoryFdPropertiesKHR)               \
  X(vkGetSemaphoreFdKHR)                      \
  X(vkImportSemaphoreFdKHR)                   \
  X(vkCmdPushDescriptorSetKHR)                \
  X(vkGetPipelineExecutablePropertiesKHR)     \
  X(vkGetPipelineExecutableStatisticsKHR)
