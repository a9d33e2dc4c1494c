/* dlopen loader (CONFIG_VKRT_LOADER_DLOPEN): a missing libvulkan is a status, not a link
 * failure. */
#include <dlfcn.h>

#include "base/base.h"
#include "vk/vk_table.h"

vkrt_status vkrt_vk_load_global(struct vkrt_base *base, struct vkrt_global_table *out,
                                void **loader_handle) {
  *loader_handle = NULL;
  void *handle = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    handle = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return vkrt_error(base, VKRT_ERROR_NO_DEVICE, "cannot dlopen libvulkan.so.1: %s", dlerror());
  PFN_vkGetInstanceProcAddr gipa;
  /* POSIX-sanctioned way to turn dlsym's void * into a function pointer. */
  *(void **)&gipa = dlsym(handle, "vkGetInstanceProcAddr");
  if (!gipa) {
    dlclose(handle);
    return vkrt_error(base, VKRT_ERROR_NO_DEVICE,
                      "libvulkan.so.1 has no vkGetInstanceProcAddr symbol");
  }
  vkrt_status s = vkrt_vk_load_global_from(base, gipa, out);
  if (s != VKRT_OK) {
    dlclose(handle);
    return s;
  }
  *loader_handle = handle;
  return VKRT_OK;
}

bool vkrt_vk_pin_global(void) {
  return dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) ||
         dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
}

void vkrt_vk_unload_global(void *loader_handle) {
  if (loader_handle)
    dlclose(loader_handle);
}
