/* Static loader: libvulkan is linked at build time (CONFIG_VKRT_LOADER_STATIC). */
#include "base/base.h"
#include "vk/vk_table.h"

/* VK_NO_PROTOTYPES hides the loader's one exported entry point we need; declare it here so
 * nothing else can call Vulkan without a table. */
VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetInstanceProcAddr(VkInstance instance,
                                                               const char *name);

vkrt_status vkrt_vk_load_global(struct vkrt_base *base, struct vkrt_global_table *out,
                                void **loader_handle) {
  *loader_handle = NULL;
  return vkrt_vk_load_global_from(base, vkGetInstanceProcAddr, out);
}

void vkrt_vk_unload_global(void *loader_handle) { (void)loader_handle; }

bool vkrt_vk_pin_global(void) { return true; /* linked: never unloaded */ }
