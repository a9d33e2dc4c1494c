/* Bring-up and tear-down of the system: board from options, instance, one VkDevice per
 * rank with its own function table, capability snapshot, queues and stream. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "device/caps_decode.h"
#include "device/device.h"
#include "device/device_internal.h"

/* ---- devices ------------------------------------------------------------------------- */

static uint32_t device_fault_mask(const struct vkrt_system *sys, uint32_t rank) {
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  uint32_t devices = sys->options.faults.device_mask;
  if (devices == 0 || (devices & (1u << rank)))
    return sys->options.faults.mask;
#else
  (void)sys;
  (void)rank;
#endif
  return 0;
}

static uint32_t pick_memory_type(const struct vkrt_device *dev, VkMemoryPropertyFlags required,
                                 VkMemoryPropertyFlags preferred) {
  return vkrt_device_memory_type(dev, UINT32_MAX, required, preferred);
}

static vkrt_status device_open(struct vkrt_system *sys, uint32_t rank,
                               VkPhysicalDevice physical, uint32_t physical_index) {
  struct vkrt_device *dev = &sys->devices[rank];
  dev->sys = sys;
  dev->index = rank;
  dev->physical = physical;
  dev->fault_mask = device_fault_mask(sys, rank);
  dev->memory_type_device_local = UINT32_MAX;
  dev->memory_type_host_visible = UINT32_MAX;
  uint32_t hidden = dev->fault_mask & (VKRT_FAULT_HIDE_EXTERNAL_SEMAPHORE_FD |
                                       VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST |
                                       VKRT_FAULT_HIDE_TRANSFER_QUEUE |
                                       VKRT_FAULT_REFUSE_FILE_BACKED);

  VkExtensionProperties *ext = NULL;
  uint32_t ext_count = 0;
  struct vkrt_caps_query *q = NULL;
  vkrt_status s = vkrt_device_extensions(sys, physical, &ext, &ext_count);
  if (s != VKRT_OK)
    return s;
  q = vkrt_calloc(&sys->base, 1, sizeof(*q));
  if (!q) {
    s = vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "dev%u: out of host memory", rank);
    goto out;
  }
  vkrt_caps_query_physical(sys, physical, physical_index, ext, ext_count, hidden, q);
  if (vkrt_caps_effective_api(sys, q->props.properties.apiVersion) < VK_API_VERSION_1_2) {
    s = vkrt_error(&sys->base, VKRT_ERROR_UNAVAILABLE,
                   "dev%u: %s supports Vulkan %u.%u; libvkrt needs 1.2", rank,
                   q->props.properties.deviceName,
                   VK_API_VERSION_MAJOR(q->props.properties.apiVersion),
                   VK_API_VERSION_MINOR(q->props.properties.apiVersion));
    goto out;
  }
  if (!q->timeline.timelineSemaphore) {
    s = vkrt_error(&sys->base, VKRT_ERROR_UNAVAILABLE,
                   "dev%u: %s lacks timeline semaphores, which libvkrt requires", rank,
                   q->props.properties.deviceName);
    goto out;
  }

  /* Queue families: any compute family; a transfer-only family where one exists. */
  dev->compute_family = UINT32_MAX;
  dev->transfer_family = UINT32_MAX;
  for (uint32_t i = 0; i < q->family_count; i++) {
    VkQueueFlags f = q->families[i].queueFlags;
    if (q->families[i].queueCount == 0)
      continue;
    if ((f & VK_QUEUE_COMPUTE_BIT) && dev->compute_family == UINT32_MAX)
      dev->compute_family = i;
    if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) &&
        dev->transfer_family == UINT32_MAX && !(hidden & VKRT_FAULT_HIDE_TRANSFER_QUEUE))
      dev->transfer_family = i;
  }
  if (dev->compute_family == UINT32_MAX) {
    s = vkrt_error(&sys->base, VKRT_ERROR_UNAVAILABLE, "dev%u: %s has no compute queue", rank,
                   q->props.properties.deviceName);
    goto out;
  }

  /* Extensions: those present among what libvkrt can use, minus the hidden ones. */
  static const char *const wanted[] = {
      VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME,
      VK_KHR_EXTERNAL_MEMORY_EXTENSION_NAME,      VK_KHR_EXTERNAL_SEMAPHORE_EXTENSION_NAME,
      VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME,
      VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME,      VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME,
      VK_KHR_16BIT_STORAGE_EXTENSION_NAME,        VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME,
      VK_KHR_STORAGE_BUFFER_STORAGE_CLASS_EXTENSION_NAME, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME,
      VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME,    VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME,
  };
  const char *enabled[VKRT_ARRAY_SIZE(wanted)];
  uint32_t enabled_count = 0;
  for (unsigned i = 0; i < VKRT_ARRAY_SIZE(wanted); i++) {
    if (!vkrt_caps_has_extension(ext, ext_count, wanted[i]))
      continue;
    if ((hidden & VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST) &&
        strcmp(wanted[i], VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) == 0)
      continue;
    if ((hidden & VKRT_FAULT_HIDE_EXTERNAL_SEMAPHORE_FD) &&
        strcmp(wanted[i], VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME) == 0)
      continue;
    if (!q->has_executable_info &&
        strcmp(wanted[i], VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME) == 0)
      continue;
    enabled[enabled_count++] = wanted[i];
  }

  /* Features: timeline semaphores (required) and what the kernels can use. */
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceTimelineSemaphoreFeatures timeline = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES,
      .timelineSemaphore = VK_TRUE,
  };
  VkPhysicalDevice16BitStorageFeatures storage16 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
      .storageBuffer16BitAccess = q->storage16.storageBuffer16BitAccess,
      .uniformAndStorageBuffer16BitAccess = q->storage16.uniformAndStorageBuffer16BitAccess,
      .storagePushConstant16 = q->storage16.storagePushConstant16,
  };
  VkPhysicalDeviceShaderFloat16Int8Features float16 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
      .shaderFloat16 = q->float16.shaderFloat16,
      .shaderInt8 = q->float16.shaderInt8,
  };
  VkPhysicalDeviceSubgroupSizeControlFeatures subgroup_size = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
      .subgroupSizeControl = q->subgroup_size_features.subgroupSizeControl,
      .computeFullSubgroups = q->subgroup_size_features.computeFullSubgroups,
  };
  features.features.shaderInt16 = q->features.features.shaderInt16;
  features.features.shaderInt64 = q->features.features.shaderInt64;
  CHAIN(features, timeline);
  CHAIN(features, storage16);
  CHAIN(features, float16);
  if (q->has_subgroup_size)
    CHAIN(features, subgroup_size);
  VkPhysicalDeviceShaderIntegerDotProductFeatures integer_dot = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
      .shaderIntegerDotProduct = q->integer_dot.shaderIntegerDotProduct,
  };
  if (q->has_integer_dot)
    CHAIN(features, integer_dot);
  /* the tiled matmul's cooperative-matrix kernels (their SPIR-V uses the Vulkan memory model) */
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
      .cooperativeMatrix = q->coopmat.cooperativeMatrix,
  };
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES,
      .vulkanMemoryModel = q->memory_model.vulkanMemoryModel,
  };
  if (q->has_coopmat) {
    CHAIN(features, coopmat);
    CHAIN(features, memory_model);
  }
  /* the lab's pipeline statistics (CONFIG_VKRT_LAB_PIPELINE_STATS) */
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable_info = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
      .pipelineExecutableInfo = VK_TRUE,
  };
  if (q->has_executable_info)
    CHAIN(features, executable_info);

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queues[2] = {
      {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
       .queueFamilyIndex = dev->compute_family,
       .queueCount = 1,
       .pQueuePriorities = &priority},
      {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
       .queueFamilyIndex = dev->transfer_family,
       .queueCount = 1,
       .pQueuePriorities = &priority},
  };
  VkDeviceCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .pNext = &features,
      .queueCreateInfoCount = dev->transfer_family == UINT32_MAX ? 1 : 2,
      .pQueueCreateInfos = queues,
      .enabledExtensionCount = enabled_count,
      .ppEnabledExtensionNames = enabled,
  };
  VkResult r = sys->vki.vkCreateDevice(physical, &info, &sys->vk_allocator, &dev->handle);
  if (r != VK_SUCCESS) {
    dev->handle = VK_NULL_HANDLE;
    s = vkrt_error(&sys->base, vkrt_vk_status(r), "dev%u: vkCreateDevice on %s failed: %s", rank,
                   q->props.properties.deviceName, vkrt_vk_result_str(r));
    goto out;
  }
  s = vkrt_vk_load_device(&sys->base, &sys->vki, dev->handle, &dev->vk);
  if (s != VKRT_OK)
    goto out;
  /* A hidden or absent extension keeps its functions NULL even where the loader would
   * hand out a trampoline. */
  bool on_host = false, on_semfd = false, on_memfd = false, on_push = false, on_stats = false;
  for (uint32_t i = 0; i < enabled_count; i++) {
    on_host |= strcmp(enabled[i], VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) == 0;
    on_semfd |= strcmp(enabled[i], VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME) == 0;
    on_memfd |= strcmp(enabled[i], VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME) == 0;
    on_push |= strcmp(enabled[i], VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0;
    on_stats |= strcmp(enabled[i], VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME) == 0;
  }
  if (!on_host)
    dev->vk.vkGetMemoryHostPointerPropertiesEXT = NULL;
  if (!on_semfd) {
    dev->vk.vkGetSemaphoreFdKHR = NULL;
    dev->vk.vkImportSemaphoreFdKHR = NULL;
  }
  if (!on_memfd) {
    dev->vk.vkGetMemoryFdKHR = NULL;
    dev->vk.vkGetMemoryFdPropertiesKHR = NULL;
  }
  if (!on_push)
    dev->vk.vkCmdPushDescriptorSetKHR = NULL;
  if (!on_stats) {
    dev->vk.vkGetPipelineExecutablePropertiesKHR = NULL;
    dev->vk.vkGetPipelineExecutableStatisticsKHR = NULL;
  }

  dev->vk.vkGetDeviceQueue(dev->handle, dev->compute_family, 0, &dev->compute_queue);
  pthread_mutex_init(&dev->compute_queue_lock, NULL);
  pthread_mutex_init(&dev->transfer_queue_lock, NULL);
  if (dev->transfer_family != UINT32_MAX) {
    dev->vk.vkGetDeviceQueue(dev->handle, dev->transfer_family, 0, &dev->transfer_queue);
    dev->transfer_lock = &dev->transfer_queue_lock;
  } else {
    dev->transfer_family = dev->compute_family;
    dev->transfer_queue = dev->compute_queue;
    dev->transfer_lock = &dev->compute_queue_lock;
  }

  /* Snapshot with this device's functions, then the host-import probe needs the device. */
  q->in.functions = &dev->vk;
  vkrt_caps_decode(&q->in, &dev->caps);
  dev->caps.has_transfer_queue = dev->transfer_queue != dev->compute_queue;
  q->in.host_import_memory_type_bits = vkrt_caps_probe_host_import_types(dev);
  dev->caps.host_import_memory_type_bits =
      dev->caps.external_memory_host ? q->in.host_import_memory_type_bits : 0;
  dev->caps.row_image_pitch_align = vkrt_caps_probe_row_image_pitch(dev);
  if (!dev->caps.row_image_pitch_align)
    dev->caps.row_image_max_width = dev->caps.row_image_max_height = 0;

  dev->memory_type_device_local =
      pick_memory_type(dev, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  dev->memory_type_host_visible =
      pick_memory_type(dev, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                       VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (dev->memory_type_device_local == UINT32_MAX)
    dev->memory_type_device_local = pick_memory_type(dev, 0, 0);
  if (dev->memory_type_host_visible == UINT32_MAX) {
    s = vkrt_error(&sys->base, VKRT_ERROR_UNAVAILABLE,
                   "dev%u: no host-visible coherent memory type", rank);
    goto out;
  }

  s = vkrt_stream_init(dev);
  if (s != VKRT_OK)
    goto out;
  vkrt_log(&sys->base, VKRT_LOG_INFO,
           "dev%u: %s (physical %u), compute family %u, %s, %u extensions enabled", rank,
           dev->caps.device_name, physical_index, dev->compute_family,
           dev->caps.has_transfer_queue ? "transfer-only queue" : "no transfer-only queue",
           enabled_count);
out:
  vkrt_free(&sys->base, q);
  vkrt_free(&sys->base, ext);
  return s;
}

static void device_close(struct vkrt_device *dev) {
  if (dev->on_close)
    dev->on_close(dev);
  dev->on_close = NULL;
  if (!dev->handle)
    return;
  vkrt_stream_finish(dev);
  vkrt_buffer_reap(dev, true); /* the stream is idle: nothing uses them any more */
  dev->vk.vkDestroyDevice(dev->handle, &dev->sys->vk_allocator);
  dev->handle = VK_NULL_HANDLE;
  pthread_mutex_destroy(&dev->compute_queue_lock);
  pthread_mutex_destroy(&dev->transfer_queue_lock);
}

/* ---- board ------------------------------------------------------------------------- */

static vkrt_status board_from_options(struct vkrt_system *sys) {
  char why[256];
  if (!vkrt_board_from_config(&sys->board, why, sizeof(why)))
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT, "board '%s': %s", CONFIG_VKRT_BOARD,
                      why);
  const vkrt_options *o = &sys->options;
  if (o->device_count) {
    if (o->device_count > VKRT_MAX_DEVICES)
      return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                        "options.device_count %u is more than %d", o->device_count,
                        VKRT_MAX_DEVICES);
    sys->board.device_count = o->device_count;
  }
  if (o->simulated)
    sys->board.simulated = true;
  if (o->physical_only)
    sys->board.simulated = false;
  for (uint32_t r = 0; r < sys->board.device_count; r++)
    if (o->physical_device_index[r] >= 0)
      sys->board.explicit_indices = true;
  if (sys->board.explicit_indices)
    for (uint32_t r = 0; r < sys->board.device_count; r++)
      sys->board.indices[r] =
          o->physical_device_index[r] >= 0 ? (uint32_t)o->physical_device_index[r] : r;
  return VKRT_OK;
}

static vkrt_status open_devices(struct vkrt_system *sys) {
  uint32_t n = 0;
  VkResult r = sys->vki.vkEnumeratePhysicalDevices(sys->instance, &n, NULL);
  if (r != VK_SUCCESS)
    return vkrt_error(&sys->base, vkrt_vk_status(r), "vkEnumeratePhysicalDevices failed: %s",
                      vkrt_vk_result_str(r));
  if (n == 0)
    return vkrt_error(&sys->base, VKRT_ERROR_NO_DEVICE,
                      "no Vulkan physical device (is a driver such as mesa-vulkan-drivers "
                      "installed?)");
  VkPhysicalDevice *physical = vkrt_calloc(&sys->base, n, sizeof(*physical));
  struct vkrt_caps *candidates = vkrt_calloc(&sys->base, n, sizeof(*candidates));
  vkrt_status s = VKRT_OK;
  if (!physical || !candidates) {
    s = vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    goto out;
  }
  r = sys->vki.vkEnumeratePhysicalDevices(sys->instance, &n, physical);
  if (r < 0) {
    s = vkrt_error(&sys->base, vkrt_vk_status(r), "vkEnumeratePhysicalDevices failed: %s",
                   vkrt_vk_result_str(r));
    goto out;
  }
  sys->physical_count = n;
  s = vkrt_caps_snapshot_candidates(sys, physical, n, candidates);
  if (s != VKRT_OK)
    goto out;
  uint32_t chosen[8];
  char why[VKRT_ERROR_MESSAGE_SIZE - 64];
  if (!vkrt_board_match(&sys->board, candidates, n, chosen, why, sizeof(why))) {
    s = vkrt_error(&sys->base, VKRT_ERROR_BOARD_MISMATCH, "%s", why);
    goto out;
  }
  for (uint32_t rank = 0; rank < sys->board.device_count; rank++) {
    s = device_open(sys, rank, physical[chosen[rank]], chosen[rank]);
    sys->device_count = rank + 1; /* close unwinds what was (partly) opened */
    if (s != VKRT_OK)
      goto out;
  }
out:
  vkrt_free(&sys->base, candidates);
  vkrt_free(&sys->base, physical);
  return s;
}


/* ---- keeping the driver loaded ---------------------------------------------------------
 * The loader unloads a driver with its last instance and loads it again for the next one.
 * On the H200 (NVIDIA 580.159) a test process could create no instance at all once about 30
 * appliances had been opened and closed in it: every vkCreateInstance returned
 * VK_ERROR_INCOMPATIBLE_DRIVER from then on, whatever was freed. Drivers are rarely reloaded
 * that often in one process (the CTS keeps an instance for its whole run). So on GPUs one
 * bare instance per process, made at the first open and destroyed at exit, keeps the driver
 * loaded between appliances; failing to make it changes nothing else. The keeper outlives
 * every appliance, so it uses no appliance's allocation callbacks. */
static struct {
  pthread_mutex_t lock;
  bool tried;
  VkInstance instance;
  PFN_vkDestroyInstance destroy;
} keeper = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void keeper_destroy(void) {
  if (keeper.instance && keeper.destroy)
    keeper.destroy(keeper.instance, NULL);
  keeper.instance = VK_NULL_HANDLE;
}

static void keep_driver_loaded(struct vkrt_system *sys) {
  pthread_mutex_lock(&keeper.lock);
  if (!keeper.tried) {
    keeper.tried = true;
    VkApplicationInfo app_info = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                  .pApplicationName = "libvkrt driver keeper",
                                  .apiVersion = sys->api_version};
    VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                 .pApplicationInfo = &app_info};
    VkInstance instance = VK_NULL_HANDLE;
    VkResult r = vkrt_vk_pin_global() ? sys->vkg.vkCreateInstance(&info, NULL, &instance)
                                      : VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkDestroyInstance destroy =
        r == VK_SUCCESS ? (PFN_vkDestroyInstance)(void (*)(void))sys->vkg.vkGetInstanceProcAddr(
                              instance, "vkDestroyInstance")
                        : NULL;
    if (r == VK_SUCCESS && destroy) {
      keeper.instance = instance;
      keeper.destroy = destroy;
      atexit(keeper_destroy);
    }
    vkrt_log(&sys->base, VKRT_LOG_DEBUG, "driver kept loaded between appliances: %s",
             r == VK_SUCCESS ? "yes" : vkrt_vk_result_str(r));
  }
  pthread_mutex_unlock(&keeper.lock);
}

/* ---- open / close ------------------------------------------------------------------ */

vkrt_status vkrt_system_open(struct vkrt_system *sys, const vkrt_options *options) {
  pthread_mutex_init(&sys->buffers_lock, NULL);
  atomic_init(&sys->buffers_destroyed, 0);
  sys->options = *options;
  sys->options.allocator = sys->base.allocator;
  vkrt_instance_allocator(sys);
  vkrt_status s = board_from_options(sys);
  if (s == VKRT_OK)
    s = vkrt_instance_create(sys);
  if (s == VKRT_OK)
    s = open_devices(sys);
  if (s == VKRT_OK && !sys->devices[0].caps.is_cpu)
    keep_driver_loaded(sys);
  return s;
}

void vkrt_system_wait_idle(struct vkrt_system *sys) {
  for (uint32_t i = 0; i < sys->device_count; i++)
    if (sys->devices[i].handle) {
      vkrt_stream_drain(&sys->devices[i]);
      sys->devices[i].vk.vkDeviceWaitIdle(sys->devices[i].handle);
    }
}

void vkrt_system_close(struct vkrt_system *sys) {
  /* Buffers the caller left: freed with the rest (the devices are idle). */
  uint32_t left = 0;
  for (; sys->live_buffers; left++)
    vkrt_buffer_destroy(sys->live_buffers);
  if (left)
    vkrt_log(&sys->base, VKRT_LOG_DEBUG, "vkrt_close: freed %u buffer(s) never destroyed", left);
  for (uint32_t i = sys->device_count; i-- > 0;)
    device_close(&sys->devices[i]);
  vkrt_instance_destroy(sys);
  pthread_mutex_destroy(&sys->buffers_lock);
}

vkrt_status vkrt_system_device(struct vkrt_system *sys, uint32_t device, struct vkrt_device **out) {
  *out = NULL;
  if (device >= sys->device_count)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "device %u does not exist (the appliance has %u)", device,
                      sys->device_count);
  *out = &sys->devices[device];
  return VKRT_OK;
}
