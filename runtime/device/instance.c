/* The Vulkan instance: allocation callbacks routing driver allocations to the injected
 * allocator, the validation layer and its messenger counting messages. */
#include <string.h>

#include "base/base.h"
#include "device/caps_decode.h"
#include "device/device.h"
#include "device/device_internal.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

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

static void *vk_block_alloc(struct vkrt_system *sys, size_t size, size_t alignment) {
  if (alignment < 16)
    alignment = 16;
  size_t offset = vkrt_align_up(sizeof(struct vk_block_header), alignment);
  size_t total;
  if (__builtin_add_overflow(size, offset, &total))
    return NULL;
  uint8_t *raw = sys->base.allocator.alloc(sys->base.allocator.user, total, alignment);
  if (!raw)
    return NULL;
  uint8_t *user = raw + offset;
  struct vk_block_header *h = (struct vk_block_header *)(void *)(user - sizeof(*h));
  h->size = size;
  h->offset = offset;
  atomic_fetch_add(&sys->vk_driver_live, 1);
  return user;
}

static void vk_block_free(struct vkrt_system *sys, void *ptr) {
  if (!ptr)
    return;
  struct vk_block_header *h = (struct vk_block_header *)(void *)((uint8_t *)ptr - sizeof(*h));
  atomic_fetch_sub(&sys->vk_driver_live, 1);
  sys->base.allocator.free(sys->base.allocator.user, (uint8_t *)ptr - h->offset);
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
  struct vkrt_system *sys = user;
  bool serious = severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                             VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT);
  bool from_validation = types & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                  VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT);
  const char *text = data && data->pMessage ? data->pMessage : "(no message)";
  if (serious && from_validation) {
    atomic_fetch_add(&sys->validation_messages, 1);
    vkrt_log(&sys->base,
             (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? VKRT_LOG_ERROR
                                                                        : VKRT_LOG_WARN,
             "validation: %s", text);
  } else {
    vkrt_log(&sys->base, VKRT_LOG_DEBUG, "vulkan: %s", text);
  }
  return VK_FALSE;
}

/* ---- instance ------------------------------------------------------------------------ */

/* 1 when present, 0 when absent, -1 when out of host memory. */
static int has_layer(struct vkrt_system *sys, const char *name) {
  uint32_t n = 0;
  if (sys->vkg.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
    return 0;
  VkLayerProperties *layers = vkrt_calloc(&sys->base, n, sizeof(*layers));
  if (!layers)
    return -1;
  int found = 0;
  if (sys->vkg.vkEnumerateInstanceLayerProperties(&n, layers) >= 0)
    for (uint32_t i = 0; i < n && !found; i++)
      found = strcmp(layers[i].layerName, name) == 0;
  vkrt_free(&sys->base, layers);
  return found;
}

static int has_instance_extension(struct vkrt_system *sys, const char *layer,
                                  const char *name) {
  uint32_t n = 0;
  if (sys->vkg.vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0)
    return 0;
  VkExtensionProperties *ext = vkrt_calloc(&sys->base, n, sizeof(*ext));
  if (!ext)
    return -1;
  int found = 0;
  if (sys->vkg.vkEnumerateInstanceExtensionProperties(layer, &n, ext) >= 0)
    found = vkrt_caps_has_extension(ext, n, name);
  vkrt_free(&sys->base, ext);
  return found;
}

vkrt_status vkrt_instance_create(struct vkrt_system *sys) {
  vkrt_status s = vkrt_vk_load_global(&sys->base, &sys->vkg, &sys->loader_handle);
  if (s != VKRT_OK)
    return s;
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (sys->vkg.vkEnumerateInstanceVersion)
    sys->vkg.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2)
    return vkrt_error(&sys->base, VKRT_ERROR_NO_DEVICE,
                      "the Vulkan loader supports version %u.%u; libvkrt needs 1.2",
                      VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));
  sys->api_version = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;

  const char *layers[1];
  const char *extensions[2];
  uint32_t layer_count = 0, extension_count = 0;
  bool validation = sys->options.enable_validation || sys->options.enable_sync_validation;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = debug_cb,
      .pUserData = sys,
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
    int layer = has_layer(sys, VALIDATION_LAYER);
    int debug_utils = layer > 0 ? has_instance_extension(sys, NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) : 0;
    if (debug_utils == 0 && layer > 0)
      debug_utils = has_instance_extension(sys, VALIDATION_LAYER, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    int features = layer > 0 && sys->options.enable_sync_validation
                       ? has_instance_extension(sys, VALIDATION_LAYER,
                                                VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME)
                       : 0;
    if (layer < 0 || debug_utils < 0 || features < 0)
      return vkrt_error(&sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                        "out of host memory listing instance layers and extensions");
    if (!layer)
      return vkrt_error(&sys->base, VKRT_ERROR_UNAVAILABLE,
                        "validation requested but the %s layer is not installed or is "
                        "disabled (Debian package vulkan-validationlayers)",
                        VALIDATION_LAYER);
    if (!debug_utils)
      return vkrt_error(&sys->base, VKRT_ERROR_UNAVAILABLE,
                        "validation requested but %s is not available, so messages could not "
                        "be counted",
                        VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    layers[layer_count++] = VALIDATION_LAYER;
    extensions[extension_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    /* Chained into the instance info so creation and destruction messages count too. */
    messenger_info.pNext = NULL;
    next = &messenger_info;
    if (sys->options.enable_sync_validation) {
      if (!features)
        return vkrt_error(&sys->base, VKRT_ERROR_UNAVAILABLE,
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
      .apiVersion = sys->api_version,
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
  VkResult r = sys->vkg.vkCreateInstance(&info, &sys->vk_allocator, &sys->instance);
  if (r != VK_SUCCESS) {
    sys->instance = VK_NULL_HANDLE;
    return vkrt_error(&sys->base,
                      r == VK_ERROR_INCOMPATIBLE_DRIVER ? VKRT_ERROR_NO_DEVICE : vkrt_vk_status(r),
                      "vkCreateInstance failed: %s%s", vkrt_vk_result_str(r),
                      r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no usable Vulkan driver found)" : "");
  }
  s = vkrt_vk_load_instance(&sys->base, &sys->vkg, sys->instance, &sys->vki);
  if (s != VKRT_OK)
    return s;
  if (validation) {
    if (!sys->vki.vkCreateDebugUtilsMessengerEXT)
      return vkrt_error(&sys->base, VKRT_ERROR_UNAVAILABLE,
                        "validation requested but vkCreateDebugUtilsMessengerEXT is missing");
    messenger_info.pNext = NULL;
    r = sys->vki.vkCreateDebugUtilsMessengerEXT(sys->instance, &messenger_info,
                                                &sys->vk_allocator, &sys->messenger);
    if (r != VK_SUCCESS) {
      sys->messenger = VK_NULL_HANDLE;
      return vkrt_error(&sys->base, vkrt_vk_status(r),
                        "vkCreateDebugUtilsMessengerEXT failed: %s", vkrt_vk_result_str(r));
    }
  }
  return VKRT_OK;
}

void vkrt_instance_destroy(struct vkrt_system *sys) {
  if (sys->messenger)
    sys->vki.vkDestroyDebugUtilsMessengerEXT(sys->instance, sys->messenger, &sys->vk_allocator);
  sys->messenger = VK_NULL_HANDLE;
  if (sys->instance)
    sys->vki.vkDestroyInstance(sys->instance, &sys->vk_allocator);
  sys->instance = VK_NULL_HANDLE;
  vkrt_vk_unload_global(sys->loader_handle);
  sys->loader_handle = NULL;
}

void vkrt_instance_allocator(struct vkrt_system *sys) {
  sys->vk_allocator = (VkAllocationCallbacks){
      .pUserData = sys,
      .pfnAllocation = vk_alloc_cb,
      .pfnReallocation = vk_realloc_cb,
      .pfnFree = vk_free_cb,
  };
}
