/* Appliance bring-up and tear-down: loader, instance (+ validation), board matching,
 * one VkDevice per rank with its own function table, capability snapshots, module hooks. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base.h"
#include "device/caps_decode.h"
#include "device/device.h"
#include "device/device_internal.h"
#include "transport/collective.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

void vkrt_options_initialize(vkrt_options *options) {
  memset(options, 0, sizeof(*options));
  options->allocator = vkrt_allocator_system();
  options->log_level = VKRT_LOG_INFO;
  for (int i = 0; i < VKRT_MAX_DEVICES; i++)
    options->physical_device_index[i] = -1;
}

/* ---- Vulkan allocation callbacks -------------------------------------------------------
 * Driver allocations go to the injected allocator but are counted apart from libvkrt's own
 * (vk_driver_live), so leak checks of libvkrt objects are not confused by driver caches.
 * Vulkan's realloc must keep the contents and the alignment, which vkrt_allocator.realloc
 * does not promise for large alignments, so each block carries a small header with its
 * size and the offset back to the start of the real allocation. */

struct vk_block_header {
  size_t size;   /* user bytes */
  size_t offset; /* from the raw allocation to the user pointer */
};

static void *vk_block_alloc(struct vkrt_appliance *app, size_t size, size_t alignment) {
  if (alignment < 16)
    alignment = 16;
  size_t offset = vkrt_align_up(sizeof(struct vk_block_header), alignment);
  size_t total;
  if (__builtin_add_overflow(size, offset, &total))
    return NULL;
  uint8_t *raw = app->base.allocator.alloc(app->base.allocator.user, total, alignment);
  if (!raw)
    return NULL;
  uint8_t *user = raw + offset;
  struct vk_block_header *h = (struct vk_block_header *)(void *)(user - sizeof(*h));
  h->size = size;
  h->offset = offset;
  atomic_fetch_add(&app->vk_driver_live, 1);
  return user;
}

static void vk_block_free(struct vkrt_appliance *app, void *ptr) {
  if (!ptr)
    return;
  struct vk_block_header *h = (struct vk_block_header *)(void *)((uint8_t *)ptr - sizeof(*h));
  atomic_fetch_sub(&app->vk_driver_live, 1);
  app->base.allocator.free(app->base.allocator.user, (uint8_t *)ptr - h->offset);
}

static VKAPI_ATTR void *VKAPI_CALL vk_alloc_cb(void *user, size_t size, size_t alignment,
                                               VkSystemAllocationScope scope) {
  (void)scope;
  return vk_block_alloc(user, size, alignment);
}

static VKAPI_ATTR void *VKAPI_CALL vk_realloc_cb(void *user, void *original, size_t size,
                                                 size_t alignment,
                                                 VkSystemAllocationScope scope) {
  (void)scope;
  if (!original)
    return vk_block_alloc(user, size, alignment);
  if (size == 0) { /* Vulkan: behaves like pfnFree, returns NULL */
    vk_block_free(user, original);
    return NULL;
  }
  struct vk_block_header *h =
      (struct vk_block_header *)(void *)((uint8_t *)original - sizeof(*h));
  void *p = vk_block_alloc(user, size, alignment);
  if (!p)
    return NULL; /* original stays valid, as Vulkan requires */
  memcpy(p, original, VKRT_MIN(size, h->size));
  vk_block_free(user, original);
  return p;
}

static VKAPI_ATTR void VKAPI_CALL vk_free_cb(void *user, void *ptr) { vk_block_free(user, ptr); }

/* ---- validation messages --------------------------------------------------------------- */

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT types,
                                                const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                void *user) {
  struct vkrt_appliance *app = user;
  bool serious = severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                             VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT);
  bool from_validation = types & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                  VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT);
  const char *text = data && data->pMessage ? data->pMessage : "(no message)";
  if (serious && from_validation) {
    atomic_fetch_add(&app->validation_messages, 1);
    vkrt_log(&app->base,
             (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? VKRT_LOG_ERROR
                                                                        : VKRT_LOG_WARN,
             "validation: %s", text);
  } else {
    vkrt_log(&app->base, VKRT_LOG_DEBUG, "vulkan: %s", text);
  }
  return VK_FALSE;
}

/* ---- instance ------------------------------------------------------------------------ */

/* 1 when present, 0 when absent, -1 when out of host memory. */
static int has_layer(struct vkrt_appliance *app, const char *name) {
  uint32_t n = 0;
  if (app->vkg.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
    return 0;
  VkLayerProperties *layers = vkrt_calloc(&app->base, n, sizeof(*layers));
  if (!layers)
    return -1;
  int found = 0;
  if (app->vkg.vkEnumerateInstanceLayerProperties(&n, layers) >= 0)
    for (uint32_t i = 0; i < n && !found; i++)
      found = strcmp(layers[i].layerName, name) == 0;
  vkrt_free(&app->base, layers);
  return found;
}

static int has_instance_extension(struct vkrt_appliance *app, const char *layer,
                                  const char *name) {
  uint32_t n = 0;
  if (app->vkg.vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0)
    return 0;
  VkExtensionProperties *ext = vkrt_calloc(&app->base, n, sizeof(*ext));
  if (!ext)
    return -1;
  int found = 0;
  if (app->vkg.vkEnumerateInstanceExtensionProperties(layer, &n, ext) >= 0)
    found = vkrt_caps_has_extension(ext, n, name);
  vkrt_free(&app->base, ext);
  return found;
}

static vkrt_status create_instance(struct vkrt_appliance *app) {
  vkrt_status s = vkrt_vk_load_global(&app->base, &app->vkg, &app->loader_handle);
  if (s != VKRT_OK)
    return s;
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (app->vkg.vkEnumerateInstanceVersion)
    app->vkg.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2)
    return vkrt_error(&app->base, VKRT_ERROR_NO_DEVICE,
                      "the Vulkan loader supports version %u.%u; libvkrt needs 1.2",
                      VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));
  app->api_version = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;

  const char *layers[1];
  const char *extensions[2];
  uint32_t layer_count = 0, extension_count = 0;
  bool validation = app->options.enable_validation || app->options.enable_sync_validation;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = debug_cb,
      .pUserData = app,
  };
  VkValidationFeatureEnableEXT sync_feature =
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT validation_features = {
      .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
      .enabledValidationFeatureCount = 1,
      .pEnabledValidationFeatures = &sync_feature,
  };
  const void *next = NULL;
  if (validation) {
    int layer = has_layer(app, VALIDATION_LAYER);
    int debug_utils = layer > 0 ? has_instance_extension(app, NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) : 0;
    if (debug_utils == 0 && layer > 0)
      debug_utils = has_instance_extension(app, VALIDATION_LAYER, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    int features = layer > 0 && app->options.enable_sync_validation
                       ? has_instance_extension(app, VALIDATION_LAYER,
                                                VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME)
                       : 0;
    if (layer < 0 || debug_utils < 0 || features < 0)
      return vkrt_error(&app->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                        "out of host memory listing instance layers and extensions");
    if (!layer)
      return vkrt_error(&app->base, VKRT_ERROR_UNAVAILABLE,
                        "validation requested but the %s layer is not installed or is "
                        "disabled (Debian package vulkan-validationlayers)",
                        VALIDATION_LAYER);
    if (!debug_utils)
      return vkrt_error(&app->base, VKRT_ERROR_UNAVAILABLE,
                        "validation requested but %s is not available, so messages could not "
                        "be counted",
                        VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    layers[layer_count++] = VALIDATION_LAYER;
    extensions[extension_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    /* Chained into the instance info so creation and destruction messages count too. */
    messenger_info.pNext = NULL;
    next = &messenger_info;
    if (app->options.enable_sync_validation) {
      if (!features)
        return vkrt_error(&app->base, VKRT_ERROR_UNAVAILABLE,
                          "synchronization validation requested but the validation layer "
                          "lacks %s",
                          VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
      extensions[extension_count++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
      validation_features.pNext = next;
      next = &validation_features;
    }
  }

  VkApplicationInfo app_info = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = "libvkrt",
      .pEngineName = "libvkrt",
      .apiVersion = app->api_version,
  };
  VkInstanceCreateInfo info = {
      .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
      .pNext = next,
      .pApplicationInfo = &app_info,
      .enabledLayerCount = layer_count,
      .ppEnabledLayerNames = layers,
      .enabledExtensionCount = extension_count,
      .ppEnabledExtensionNames = extensions,
  };
  VkResult r = app->vkg.vkCreateInstance(&info, &app->vk_allocator, &app->instance);
  if (r != VK_SUCCESS) {
    app->instance = VK_NULL_HANDLE;
    return vkrt_error(&app->base,
                      r == VK_ERROR_INCOMPATIBLE_DRIVER ? VKRT_ERROR_NO_DEVICE : vkrt_vk_status(r),
                      "vkCreateInstance failed: %s%s", vkrt_vk_result_str(r),
                      r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no usable Vulkan driver found)" : "");
  }
  s = vkrt_vk_load_instance(&app->base, &app->vkg, app->instance, &app->vki);
  if (s != VKRT_OK)
    return s;
  if (validation) {
    if (!app->vki.vkCreateDebugUtilsMessengerEXT)
      return vkrt_error(&app->base, VKRT_ERROR_UNAVAILABLE,
                        "validation requested but vkCreateDebugUtilsMessengerEXT is missing");
    messenger_info.pNext = NULL;
    r = app->vki.vkCreateDebugUtilsMessengerEXT(app->instance, &messenger_info,
                                                &app->vk_allocator, &app->messenger);
    if (r != VK_SUCCESS) {
      app->messenger = VK_NULL_HANDLE;
      return vkrt_error(&app->base, vkrt_vk_status(r),
                        "vkCreateDebugUtilsMessengerEXT failed: %s", vkrt_vk_result_str(r));
    }
  }
  return VKRT_OK;
}

/* ---- capability queries ----------------------------------------------------------------- */

static uint32_t effective_api(const struct vkrt_appliance *app, uint32_t device_api) {
  return VKRT_MIN(app->api_version, device_api);
}

static vkrt_status vkrt_device_extensions(struct vkrt_appliance *app, VkPhysicalDevice physical,
                                   VkExtensionProperties **out, uint32_t *count) {
  *out = NULL;
  *count = 0;
  uint32_t n = 0;
  VkResult r = app->vki.vkEnumerateDeviceExtensionProperties(physical, NULL, &n, NULL);
  if (r != VK_SUCCESS)
    return vkrt_error(&app->base, vkrt_vk_status(r),
                      "vkEnumerateDeviceExtensionProperties failed: %s", vkrt_vk_result_str(r));
  VkExtensionProperties *ext = vkrt_calloc(&app->base, n ? n : 1, sizeof(*ext));
  if (!ext)
    return vkrt_error(&app->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                      "out of host memory listing device extensions");
  r = app->vki.vkEnumerateDeviceExtensionProperties(physical, NULL, &n, ext);
  if (r < 0) {
    vkrt_free(&app->base, ext);
    return vkrt_error(&app->base, vkrt_vk_status(r),
                      "vkEnumerateDeviceExtensionProperties failed: %s", vkrt_vk_result_str(r));
  }
  *out = ext;
  *count = n;
  return VKRT_OK;
}

/* Everything Vulkan says about one physical device (and, with dev, its VkDevice). */
struct caps_query {
  VkPhysicalDeviceProperties2 props;
  VkPhysicalDeviceIDProperties id;
  VkPhysicalDeviceDriverProperties driver;
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host;
  VkPhysicalDeviceSubgroupProperties subgroup;
  VkPhysicalDeviceSubgroupSizeControlProperties subgroup_size;
  VkPhysicalDeviceMaintenance3Properties maintenance3;
  VkPhysicalDeviceMaintenance4Properties maintenance4;
  VkPhysicalDeviceFeatures2 features;
  VkPhysicalDeviceTimelineSemaphoreFeatures timeline;
  VkPhysicalDevice16BitStorageFeatures storage16;
  VkPhysicalDeviceShaderFloat16Int8Features float16;
  VkPhysicalDeviceSubgroupSizeControlFeatures subgroup_size_features;
  VkPhysicalDeviceMemoryProperties2 memory;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget;
  VkQueueFamilyProperties families[16];
  uint32_t family_count;
  bool has_host, has_subgroup_size, has_maintenance4, has_budget;
  struct vkrt_caps_input in;
};

#define CHAIN(head, s) \
  do {                 \
    (s).pNext = (head).pNext; \
    (head).pNext = &(s);      \
  } while (0)

static void vkrt_caps_query_physical(struct vkrt_appliance *app, VkPhysicalDevice physical,
                              uint32_t physical_index, const VkExtensionProperties *ext,
                              uint32_t ext_count, uint32_t hidden, struct caps_query *q) {
  memset(q, 0, sizeof(*q));
  const struct vkrt_instance_table *vki = &app->vki;
  VkPhysicalDeviceProperties base_props;
  vki->vkGetPhysicalDeviceProperties(physical, &base_props);
  uint32_t api = effective_api(app, base_props.apiVersion);
  q->has_host = vkrt_caps_has_extension(ext, ext_count, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  q->has_subgroup_size = api >= VK_API_VERSION_1_3 ||
      vkrt_caps_has_extension(ext, ext_count, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  q->has_maintenance4 = api >= VK_API_VERSION_1_3 ||
      vkrt_caps_has_extension(ext, ext_count, VK_KHR_MAINTENANCE_4_EXTENSION_NAME);
  q->has_budget = vkrt_caps_has_extension(ext, ext_count, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  bool has_driver = api >= VK_API_VERSION_1_2;

  q->props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  q->id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
  q->driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  q->host.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
  q->subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  q->subgroup_size.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
  q->maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  q->maintenance4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES;
  CHAIN(q->props, q->id);
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
  vki->vkGetPhysicalDeviceFeatures2(physical, &q->features);

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
  in->extensions = ext;
  in->extension_count = ext_count;
  in->memory = &q->memory.memoryProperties;
  in->budget = q->has_budget ? &q->budget : NULL;
  in->families = q->families;
  in->family_count = q->family_count;
  in->hidden = hidden;
}

/* Snapshots of every physical device, for board matching. */
static vkrt_status snapshot_candidates(struct vkrt_appliance *app, VkPhysicalDevice *physical,
                                       uint32_t count, struct vkrt_caps *out) {
  struct caps_query *q = vkrt_calloc(&app->base, 1, sizeof(*q));
  if (!q)
    return vkrt_error(&app->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
  for (uint32_t i = 0; i < count; i++) {
    VkExtensionProperties *ext;
    uint32_t ext_count;
    vkrt_status s = vkrt_device_extensions(app, physical[i], &ext, &ext_count);
    if (s != VKRT_OK) {
      vkrt_free(&app->base, q);
      return s;
    }
    vkrt_caps_query_physical(app, physical[i], i, ext, ext_count, 0, q);
    vkrt_caps_decode(&q->in, &out[i]);
    vkrt_free(&app->base, ext);
  }
  vkrt_free(&app->base, q);
  return VKRT_OK;
}

/* Memory types the driver accepts for an imported anonymous page. */
static uint32_t probe_host_import_types(struct vkrt_device *dev) {
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

/* ---- devices ------------------------------------------------------------------------- */

static uint32_t device_fault_mask(const struct vkrt_appliance *app, uint32_t rank) {
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  uint32_t devices = app->options.faults.device_mask;
  if (devices == 0 || (devices & (1u << rank)))
    return app->options.faults.mask;
#else
  (void)app;
  (void)rank;
#endif
  return 0;
}

static uint32_t pick_memory_type(const struct vkrt_device *dev, VkMemoryPropertyFlags required,
                                 VkMemoryPropertyFlags preferred) {
  return vkrt_device_memory_type(dev, UINT32_MAX, required, preferred);
}

static vkrt_status device_open(struct vkrt_appliance *app, uint32_t rank,
                               VkPhysicalDevice physical, uint32_t physical_index) {
  struct vkrt_device *dev = &app->devices[rank];
  dev->app = app;
  dev->index = rank;
  dev->physical = physical;
  dev->fault_mask = device_fault_mask(app, rank);
  dev->memory_type_device_local = UINT32_MAX;
  dev->memory_type_host_visible = UINT32_MAX;
  uint32_t hidden = dev->fault_mask & (VKRT_FAULT_HIDE_EXTERNAL_SEMAPHORE_FD |
                                       VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST |
                                       VKRT_FAULT_HIDE_TRANSFER_QUEUE |
                                       VKRT_FAULT_REFUSE_FILE_BACKED);

  VkExtensionProperties *ext = NULL;
  uint32_t ext_count = 0;
  struct caps_query *q = NULL;
  vkrt_status s = vkrt_device_extensions(app, physical, &ext, &ext_count);
  if (s != VKRT_OK)
    return s;
  q = vkrt_calloc(&app->base, 1, sizeof(*q));
  if (!q) {
    s = vkrt_error(&app->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "dev%u: out of host memory", rank);
    goto out;
  }
  vkrt_caps_query_physical(app, physical, physical_index, ext, ext_count, hidden, q);
  if (effective_api(app, q->props.properties.apiVersion) < VK_API_VERSION_1_2) {
    s = vkrt_error(&app->base, VKRT_ERROR_UNAVAILABLE,
                   "dev%u: %s supports Vulkan %u.%u; libvkrt needs 1.2", rank,
                   q->props.properties.deviceName,
                   VK_API_VERSION_MAJOR(q->props.properties.apiVersion),
                   VK_API_VERSION_MINOR(q->props.properties.apiVersion));
    goto out;
  }
  if (!q->timeline.timelineSemaphore) {
    s = vkrt_error(&app->base, VKRT_ERROR_UNAVAILABLE,
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
    s = vkrt_error(&app->base, VKRT_ERROR_UNAVAILABLE, "dev%u: %s has no compute queue", rank,
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
      VK_KHR_STORAGE_BUFFER_STORAGE_CLASS_EXTENSION_NAME,
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
  VkResult r = app->vki.vkCreateDevice(physical, &info, &app->vk_allocator, &dev->handle);
  if (r != VK_SUCCESS) {
    dev->handle = VK_NULL_HANDLE;
    s = vkrt_error(&app->base, vkrt_vk_status(r), "dev%u: vkCreateDevice on %s failed: %s", rank,
                   q->props.properties.deviceName, vkrt_vk_result_str(r));
    goto out;
  }
  s = vkrt_vk_load_device(&app->base, &app->vki, dev->handle, &dev->vk);
  if (s != VKRT_OK)
    goto out;
  /* A hidden or absent extension keeps its functions NULL even where the loader would
   * hand out a trampoline. */
  bool on_host = false, on_semfd = false, on_memfd = false, on_push = false;
  for (uint32_t i = 0; i < enabled_count; i++) {
    on_host |= strcmp(enabled[i], VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) == 0;
    on_semfd |= strcmp(enabled[i], VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME) == 0;
    on_memfd |= strcmp(enabled[i], VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME) == 0;
    on_push |= strcmp(enabled[i], VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0;
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
  q->in.host_import_memory_type_bits = probe_host_import_types(dev);
  dev->caps.host_import_memory_type_bits =
      dev->caps.external_memory_host ? q->in.host_import_memory_type_bits : 0;

  dev->memory_type_device_local =
      pick_memory_type(dev, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  dev->memory_type_host_visible =
      pick_memory_type(dev, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                       VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (dev->memory_type_device_local == UINT32_MAX)
    dev->memory_type_device_local = pick_memory_type(dev, 0, 0);
  if (dev->memory_type_host_visible == UINT32_MAX) {
    s = vkrt_error(&app->base, VKRT_ERROR_UNAVAILABLE,
                   "dev%u: no host-visible coherent memory type", rank);
    goto out;
  }

  s = vkrt_stream_init(dev);
  if (s != VKRT_OK)
    goto out;
  vkrt_log(&app->base, VKRT_LOG_INFO,
           "dev%u: %s (physical %u), compute family %u, %s, %u extensions enabled", rank,
           dev->caps.device_name, physical_index, dev->compute_family,
           dev->caps.has_transfer_queue ? "transfer-only queue" : "no transfer-only queue",
           enabled_count);
out:
  vkrt_free(&app->base, q);
  vkrt_free(&app->base, ext);
  return s;
}

static void device_close(struct vkrt_device *dev) {
  if (!dev->handle)
    return;
  vkrt_stream_finish(dev);
  dev->vk.vkDestroyDevice(dev->handle, &dev->app->vk_allocator);
  dev->handle = VK_NULL_HANDLE;
  pthread_mutex_destroy(&dev->compute_queue_lock);
  pthread_mutex_destroy(&dev->transfer_queue_lock);
}

/* ---- board ------------------------------------------------------------------------- */

static vkrt_status board_from_options(struct vkrt_appliance *app) {
  char why[256];
  if (!vkrt_board_from_config(&app->board, why, sizeof(why)))
    return vkrt_error(&app->base, VKRT_ERROR_INVALID_ARGUMENT, "board '%s': %s", CONFIG_VKRT_BOARD,
                      why);
  const vkrt_options *o = &app->options;
  if (o->device_count) {
    if (o->device_count > VKRT_MAX_DEVICES)
      return vkrt_error(&app->base, VKRT_ERROR_INVALID_ARGUMENT,
                        "options.device_count %u is more than %d", o->device_count,
                        VKRT_MAX_DEVICES);
    app->board.device_count = o->device_count;
  }
  if (o->simulated)
    app->board.simulated = true;
  if (o->physical_only)
    app->board.simulated = false;
  for (uint32_t r = 0; r < app->board.device_count; r++)
    if (o->physical_device_index[r] >= 0)
      app->board.explicit_indices = true;
  if (app->board.explicit_indices)
    for (uint32_t r = 0; r < app->board.device_count; r++)
      app->board.indices[r] =
          o->physical_device_index[r] >= 0 ? (uint32_t)o->physical_device_index[r] : r;
  return VKRT_OK;
}

static vkrt_status open_devices(struct vkrt_appliance *app) {
  uint32_t n = 0;
  VkResult r = app->vki.vkEnumeratePhysicalDevices(app->instance, &n, NULL);
  if (r != VK_SUCCESS)
    return vkrt_error(&app->base, vkrt_vk_status(r), "vkEnumeratePhysicalDevices failed: %s",
                      vkrt_vk_result_str(r));
  if (n == 0)
    return vkrt_error(&app->base, VKRT_ERROR_NO_DEVICE,
                      "no Vulkan physical device (is a driver such as mesa-vulkan-drivers "
                      "installed?)");
  VkPhysicalDevice *physical = vkrt_calloc(&app->base, n, sizeof(*physical));
  struct vkrt_caps *candidates = vkrt_calloc(&app->base, n, sizeof(*candidates));
  vkrt_status s = VKRT_OK;
  if (!physical || !candidates) {
    s = vkrt_error(&app->base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    goto out;
  }
  r = app->vki.vkEnumeratePhysicalDevices(app->instance, &n, physical);
  if (r < 0) {
    s = vkrt_error(&app->base, vkrt_vk_status(r), "vkEnumeratePhysicalDevices failed: %s",
                   vkrt_vk_result_str(r));
    goto out;
  }
  app->physical_count = n;
  s = snapshot_candidates(app, physical, n, candidates);
  if (s != VKRT_OK)
    goto out;
  uint32_t chosen[8];
  char why[VKRT_ERROR_MESSAGE_SIZE - 64];
  if (!vkrt_board_match(&app->board, candidates, n, chosen, why, sizeof(why))) {
    s = vkrt_error(&app->base, VKRT_ERROR_BOARD_MISMATCH, "%s", why);
    goto out;
  }
  for (uint32_t rank = 0; rank < app->board.device_count; rank++) {
    s = device_open(app, rank, physical[chosen[rank]], chosen[rank]);
    app->device_count = rank + 1; /* close unwinds what was (partly) opened */
    if (s != VKRT_OK)
      goto out;
  }
out:
  vkrt_free(&app->base, candidates);
  vkrt_free(&app->base, physical);
  return s;
}

/* ---- keeping the driver loaded ---------------------------------------------------------
 * The loader unloads a driver with its last instance and loads it again for the next one.
 * On the H200 (NVIDIA 580.159) a test process could create no instance at all once about 30
 * appliances had been opened and closed in it: every vkCreateInstance returned
 * VK_ERROR_INCOMPATIBLE_DRIVER from then on, whatever was freed. Drivers are rarely reloaded
 * that often in one process (the CTS keeps an instance for its whole run). So on GPUs one
 * bare instance per process, made at the first open and destroyed at exit, keeps the driver
 * loaded between appliances; failing to make it changes nothing else. */
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

static void keep_driver_loaded(struct vkrt_appliance *app) {
  pthread_mutex_lock(&keeper.lock);
  if (!keeper.tried) {
    keeper.tried = true;
    VkApplicationInfo app_info = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                  .pApplicationName = "libvkrt driver keeper",
                                  .apiVersion = app->api_version};
    VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                 .pApplicationInfo = &app_info};
    VkInstance instance = VK_NULL_HANDLE;
    VkResult r = vkrt_vk_pin_global() ? app->vkg.vkCreateInstance(&info, NULL, &instance)
                                      : VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkDestroyInstance destroy =
        r == VK_SUCCESS ? (PFN_vkDestroyInstance)(void (*)(void))app->vkg.vkGetInstanceProcAddr(
                              instance, "vkDestroyInstance")
                        : NULL;
    if (r == VK_SUCCESS && destroy) {
      keeper.instance = instance;
      keeper.destroy = destroy;
      atexit(keeper_destroy);
    }
    vkrt_log(&app->base, VKRT_LOG_DEBUG, "driver kept loaded between appliances: %s",
             r == VK_SUCCESS ? "yes" : vkrt_vk_result_str(r));
  }
  pthread_mutex_unlock(&keeper.lock);
}

/* ---- open / close ------------------------------------------------------------------ */

vkrt_status vkrt_open(const vkrt_options *options, vkrt_appliance **out, char *error_message,
                      size_t error_message_size) {
  if (error_message && error_message_size)
    error_message[0] = '\0';
  if (!out) {
    vkrt_format(error_message, error_message_size, "vkrt_open: out is NULL");
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  *out = NULL;
  vkrt_options defaults;
  if (!options) {
    vkrt_options_initialize(&defaults);
    options = &defaults;
  }
  /* The appliance holds the base every later allocation goes through; allocate it with
   * a throw-away base built from the same options, then hand the count over. */
  struct vkrt_base boot;
  vkrt_base_init(&boot, options);
  struct vkrt_appliance *app = vkrt_calloc(&boot, 1, sizeof(*app));
  unsigned boot_count = atomic_load(&boot.host_alloc_count);
  vkrt_base_finish(&boot);
  if (!app) {
    vkrt_format(error_message, error_message_size,
                "out of host memory allocating the appliance");
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  }
  vkrt_base_init(&app->base, options);
  atomic_store(&app->base.live_allocations, 1); /* the appliance itself */
  atomic_store(&app->base.host_alloc_count, boot_count);
  app->options = *options;
  app->options.allocator = app->base.allocator;
  app->vk_allocator = (VkAllocationCallbacks){
      .pUserData = app,
      .pfnAllocation = vk_alloc_cb,
      .pfnReallocation = vk_realloc_cb,
      .pfnFree = vk_free_cb,
  };
#ifdef CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS
  app->collective_timeout_ns = (uint64_t)CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS * 1000000ull;
#else
  app->collective_timeout_ns = 5000ull * 1000000ull;
#endif
  if (options->collective_timeout_ns)
    app->collective_timeout_ns = options->collective_timeout_ns;

  vkrt_status s = board_from_options(app);
  if (s == VKRT_OK)
    s = create_instance(app);
  if (s == VKRT_OK)
    s = open_devices(app);
  if (s == VKRT_OK && !app->devices[0].caps.is_cpu)
    keep_driver_loaded(app);
  if (s == VKRT_OK) {
    s = vkrt_upload_open(app);
    app->upload_opened = s == VKRT_OK;
  }
  if (s == VKRT_OK) {
    s = vkrt_collective_open(app);
    app->collective_opened = s == VKRT_OK;
  }
  if (s != VKRT_OK) {
    vkrt_format(error_message, error_message_size, "%s", vkrt_base_last_error(&app->base));
    vkrt_close(app);
    return s;
  }
  vkrt_log(&app->base, VKRT_LOG_INFO, "board '%s': %u device(s) open%s", app->board.name,
           app->device_count, app->board.simulated ? " (simulated)" : "");
  *out = app;
  return VKRT_OK;
}

void vkrt_close(vkrt_appliance *app) {
  if (!app)
    return;
  for (uint32_t i = 0; i < app->device_count; i++)
    if (app->devices[i].handle)
      app->devices[i].vk.vkDeviceWaitIdle(app->devices[i].handle);
  if (app->collective_opened)
    vkrt_collective_close(app);
  if (app->upload_opened)
    vkrt_upload_close(app);
  for (uint32_t i = app->device_count; i-- > 0;) {
    if (app->devices[i].handle)
      vkrt_ops_close(&app->devices[i]);
    device_close(&app->devices[i]);
  }
  if (app->messenger)
    app->vki.vkDestroyDebugUtilsMessengerEXT(app->instance, app->messenger, &app->vk_allocator);
  if (app->instance)
    app->vki.vkDestroyInstance(app->instance, &app->vk_allocator);
  vkrt_vk_unload_global(app->loader_handle);
  long leaked = atomic_load(&app->base.live_allocations) - 1;
  if (leaked != 0)
    vkrt_log(&app->base, VKRT_LOG_WARN, "vkrt_close: %ld libvkrt host allocation(s) not freed",
             leaked);
  long driver = atomic_load(&app->vk_driver_live);
  if (driver != 0)
    vkrt_log(&app->base, VKRT_LOG_DEBUG, "vkrt_close: the driver kept %ld allocation(s)", driver);
  vkrt_allocator allocator = app->base.allocator;
  vkrt_base_finish(&app->base);
  allocator.free(allocator.user, app);
}

const char *vkrt_last_error(const vkrt_appliance *app) {
  return app ? vkrt_base_last_error(&app->base) : "no appliance";
}

uint32_t vkrt_validation_message_count(const vkrt_appliance *app) {
  return app ? atomic_load(&((vkrt_appliance *)app)->validation_messages) : 0;
}

uint32_t vkrt_device_count(const vkrt_appliance *app) { return app ? app->device_count : 0; }

vkrt_status vkrt_device_info_get(const vkrt_appliance *app, uint32_t device,
                                 vkrt_device_info *out) {
  if (!app) {
    if (out)
      memset(out, 0, sizeof(*out));
    return VKRT_ERROR_INVALID_ARGUMENT; /* no appliance to carry the message */
  }
  if (!out)
    return vkrt_error((struct vkrt_base *)&app->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "device info: out is NULL");
  memset(out, 0, sizeof(*out));
  if (device >= app->device_count)
    return vkrt_error((struct vkrt_base *)&app->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "device %u does not exist (the appliance has %u)", device,
                      app->device_count);
  const struct vkrt_caps *c = &app->devices[device].caps;
  memcpy(out->name, c->device_name, sizeof(out->name));
  memcpy(out->driver_name, c->driver_name, sizeof(out->driver_name));
  out->vendor_id = c->vendor_id;
  out->device_id = c->device_id;
  out->physical_index = c->physical_index;
  memcpy(out->device_uuid, c->device_uuid, 16);
  memcpy(out->driver_uuid, c->driver_uuid, 16);
  out->has_transfer_queue = c->has_transfer_queue;
  out->external_memory_host = c->external_memory_host;
  out->external_semaphore_fd = c->external_semaphore_fd;
  for (uint32_t i = 0; i < c->heap_count; i++)
    if (c->heap_flags[i] & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      out->device_local_bytes += c->heap_size[i];
  return VKRT_OK;
}
